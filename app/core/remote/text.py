"""ServerMeasures in words: the lines of `roofline top --remote` and of `roofline chat --remote`'s summary.
Every line names its numbers' source (the server's clock), and a number the server does not give is "—" or
left out, never guessed."""

from __future__ import annotations

from app.core.remote.histogram import Distribution
from app.core.remote.measures import ServerMeasures


def ms(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 1000:
        return f"{v / 1000:.2f} s"
    return f"{v:.1f} ms" if v < 100 else f"{v:.0f} ms"


def dist(d: Distribution | None, what: str = "") -> str:
    if d is None:
        return "—"
    tail = f" ({d.count:,} {what})" if what else ""
    return f"p50 {ms(d.p50_ms)} · p95 {ms(d.p95_ms)} · p99 {ms(d.p99_ms)}{tail}"


def rate(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f} tok/s" if v >= 100 else f"{v:.1f} tok/s"


def window(m: ServerMeasures) -> str:
    if m.scope:
        return m.scope
    return f"over the last {m.window_s:.0f} s" if m.window_s else "since the server started"


def kv_line(m: ServerMeasures) -> str:
    parts = []
    if m.kv_fraction is not None:
        parts.append(f"{100 * m.kv_fraction:.0f} %")
    if m.kv_tokens is not None and m.kv_capacity:
        parts.append(f"{m.kv_tokens:,} of {m.kv_capacity:,} tokens")
    elif m.kv_tokens is not None:
        parts.append(f"{m.kv_tokens:,} tokens")
    elif m.kv_capacity:
        parts.append(f"context {m.kv_capacity:,} tokens")
    return " · ".join(parts) or "not reported"


def requests_line(m: ServerMeasures) -> str:
    if m.running is None and m.waiting is None:
        return "not reported"
    text = f"{m.running if m.running is not None else '—'} running · {m.waiting if m.waiting is not None else '—'} " \
           "waiting"
    if m.preemptions:
        text += f" · {m.preemptions} preempted"
    return text


def phase_line(per_request: float | None, time: Distribution | None, total: float | None, how: str = "") -> str:
    parts = [f"{rate(per_request)} per request{f' ({how})' if how else ''}"]
    if time is not None and time.mean_ms is not None:
        parts.append(f"{ms(time.mean_ms)} mean")
    if total is not None:
        parts.append(f"{rate(total)} all requests")
    return " · ".join(parts)


def memory_line(m: ServerMeasures) -> str:
    """The model's memory on the server (Ollama's /api/ps) and how much of it is on the GPU: "6.2 GiB, 6.2 GiB on
    the GPU"; "" when the server does not say."""
    if not m.memory_bytes:
        return ""
    gpu = f", {m.memory_gpu_bytes / 2**30:.1f} GiB on the GPU" if m.memory_gpu_bytes is not None else ""
    return f"{m.memory_bytes / 2**30:.1f} GiB{gpu}"


def screen_lines(m: ServerMeasures, where: str) -> list[str]:
    """`roofline top`'s screen, below its title line."""
    lines = [f"{where} · {m.source} · {window(m)}",
             f"requests : {requests_line(m)}",
             f"KV cache : {kv_line(m)}"]
    if m.prefix_hit_rate is not None:
        lines.append(f"prefix   : {100 * m.prefix_hit_rate:.0f} % of prompt tokens found in the cache")
    lines += [f"TTFT     : {dist(m.ttft, 'requests')}",
              f"ITL      : {dist(m.itl, 'gaps')}",
              f"prefill  : {phase_line(m.prefill_tps, m.prefill_time, m.prompt_tps_total)}",
              f"decode   : {phase_line(m.decode_tps, m.decode_time, m.generation_tps_total, m.decode_tps_from)}"]
    if m.queue_time is not None:
        lines.append(f"queue    : {dist(m.queue_time)}")
    if m.spec_acceptance is not None:
        lines.append(f"spec     : {100 * m.spec_acceptance:.0f} % of drafted tokens accepted")
    if m.memory_bytes:
        lines.append(f"memory   : {memory_line(m)}")
    if m.load_ms is not None:
        lines.append(f"load     : {ms(m.load_ms)} to load the model for the reply")
    lines += [f"note     : {n}" for n in m.notes]
    return lines


def summary_line(m: ServerMeasures) -> str:
    """One line for the end of a chat: the server's own phases and KV over the reply's window."""
    parts = [f"prefill {rate(m.prefill_tps)}", f"decode {rate(m.decode_tps)}"]
    if m.ttft is not None:
        parts.append(f"TTFT p50 {ms(m.ttft.p50_ms)}")
    parts.append(f"KV {kv_line(m)}")
    parts.append(requests_line(m))
    if m.memory_bytes:  # Ollama's /api/ps: the model's memory is its nearest to a KV gauge
        parts.append(f"model {memory_line(m)}")
    if m.load_ms is not None:
        parts.append(f"load {ms(m.load_ms)}")
    return f"{m.source} ({window(m)}): " + " · ".join(parts)
