"""`roofline chat`: one prompt through the engine, streamed, then a phase summary (prefill vs decode)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands import _args as A
from app.commands._common import add_model_arg, api_key_arg, fail, print_json, resolve_model
from app.core.chat.left_out import messages_left_out
from app.core.config.defaults import CONTEXT_OVERFLOW_POLICIES
from app.core.files.untrusted import clean_line, clean_text
from app.core.gguf.kv_types import KV_TYPES
from app.core.remote.engines import ENGINES

if TYPE_CHECKING:
    from app.core.metrics.phase import PhaseMetrics
    from app.core.predict.load_plan import LoadPlan
    from app.engine import protocol as P


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="send one prompt, stream the reply, print prefill/decode metrics",
                       description="Options left out come from settings.json, then the model's preset, then the "
                       "`roofline tune` result; the summary before the reply says where each value came from.")
    add_model_arg(p)
    p.add_argument("prompt", nargs="?", default=None,
                   help="the user message (or text to continue with --raw); '-' reads it from standard input")
    p.add_argument("-f", "--file", dest="prompt_file", metavar="FILE", default=None,
                   help="read the prompt from FILE (any size; not UTF-8: decoded with replacement)")
    # Options left out take the value from settings.json, the model's preset or `roofline tune`
    # (app.core.predict.load_plan), so their defaults here are None ("not given").
    p.add_argument("--system", default=None, help="system prompt (default: the model's preset, if it has one)")
    p.add_argument("--raw", action="store_true", help="continue the text as-is, without a chat template")
    p.add_argument("-n", "--max-tokens", type=A.token_count, default=None)
    p.add_argument("--temp", type=A.float_range(0.0), default=None)
    p.add_argument("--top-p", type=A.float_range(0.0, 1.0), default=None)
    p.add_argument("--top-k", type=A.int_range(0), default=None)
    p.add_argument("--min-p", type=A.float_range(0.0, 1.0), default=None)
    p.add_argument("--repeat-penalty", type=A.float_range(0.0, lo_open=True), default=None)
    p.add_argument("--seed", type=A.seed, default=None)
    p.add_argument("-c", "--ctx", type=A.context_size, default=None, help="context size (tokens)")
    p.add_argument("-t", "--threads", type=A.threads, default=None)
    p.add_argument("-ngl", "--n-gpu-layers", type=A.gpu_layers, default=None)
    p.add_argument("--n-cpu-moe", "-ncmoe", type=A.int_range(0), default=None, metavar="N",
                   help="MoE models: keep the expert weights of the first N blocks in RAM, the rest on the GPU")
    p.add_argument("--kv-type", default=None, choices=KV_TYPES)
    p.add_argument("--context-overflow", default=None, choices=CONTEXT_OVERFLOW_POLICIES,
                   help="when the context is full: stop the reply (the default), cut the middle of a too-long "
                   "prompt, or roll (drop old tokens from the KV cache and go on past the context size)")
    p.add_argument("--keep", type=A.int_range(0), default=None, metavar="N",
                   help="tokens at the start that overflow never drops (default: the system prompt and first "
                   "turn; with --raw the prompt), at most half the context")
    p.add_argument("--draft-model", default=None, metavar="PATH",
                   help="speculative decoding with this small model (it must share the model's vocabulary)")
    p.add_argument("--draft-max", type=A.int_range(1, 64), default=8, metavar="N",
                   help="most tokens the draft model proposes per step (default 8)")
    p.add_argument("--prompt-lookup", action="store_true", help="speculative prompt-lookup decoding")
    p.add_argument("--remote", default=None, help="OpenAI-compatible server URL instead of the local engine")
    p.add_argument("--api-key", default=None, help="API key for --remote; '-' prompts for it; default: "
                   "$ROOFLINE_API_KEY, then the OS keyring (a key on the command line shows in `ps`)")
    p.add_argument("--model-name", "--remote-model", dest="remote_model", default=None,
                   help="model name on the --remote server")
    p.add_argument("--server-engine", default=None, choices=ENGINES,
                   help="with --remote: the serving engine whose metrics to read (default: told from what it "
                   "serves)")
    p.add_argument("--json", action="store_true", help="print the reply and metrics as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The prompt and the plan, the engine (local or --remote), the streamed reply, then the summary or JSON."""
    from app.commands._prompt import PromptError, from_argument, read_prompt
    from app.core.metrics.phase import PhaseMetrics
    from app.engine.client import EngineError

    try:
        prompt = read_prompt(args.prompt, args.prompt_file)
    except PromptError as exc:
        return fail(str(exc), 2)
    system = from_argument(args.system, "the system prompt") if args.system else None
    model = None if args.remote else resolve_model(args.model)
    plan = plan_from_args(args, model, system)
    messages, sampling = _request_parts(args, plan, prompt)
    if model is not None:
        refused = _context_refused(model, plan)
        if refused:
            return fail(refused)
    engine, cfg = _engine(args, model, plan)
    if not args.json:
        for line in plan.summary_lines():
            print(clean_text(line), file=sys.stderr)
    try:
        loaded, done, server = _generate(args, engine, cfg, plan, prompt, messages, sampling)
    except EngineError as exc:
        print(f"\nroofline: {clean_text(exc)}", file=sys.stderr)
        return 1
    if done is None:
        return fail("the engine ended the reply without a result")
    metrics = PhaseMetrics.from_dict(done.metrics)
    measures = _server_measures(server, done)
    if args.json:
        _print_json(done, loaded, cfg, plan, server, measures)
    else:
        _print_summary(args, done, metrics, plan)
        if not args.remote:
            print(slow_summary_line(loaded, done))
        _print_server(server, measures)
    return 0


def slow_summary_line(loaded: P.Loaded, done: P.Done) -> str:
    """"why slow: …" when the reply ran under 0.7× its prediction for this load, else the ratios it ran at."""
    from app.core.metrics.phase import PhaseMetrics
    from app.core.predict.reply_check import expected, for_load, slow_reply_line

    try:
        info, rates, cfg = for_load(loaded.model_path, loaded.n_ctx, loaded.type_k, loaded.type_v, loaded.flash_attn,
                                    loaded.n_gpu_layers, loaded.swa_full, loaded.n_threads)
    except (OSError, ValueError) as exc:
        return f"speed   : no prediction to compare with ({clean_text(exc)})"
    line = slow_reply_line(info, rates, cfg, done.metrics)
    if line:
        return f"why slow: {line}"
    m = PhaseMetrics.from_dict(done.metrics)
    decode, prefill = expected(info, rates, cfg, m)
    parts = [f"{name} {got / want:.2f}×" for name, got, want in (("decode", m.decode_tps, decode),
                                                                   ("prefill", m.prefill_tps, prefill)) if want]
    return f"speed   : {', '.join(parts)} the prediction for this load" if parts else "speed   : too short to judge"


def _server_measures(server: Any, done: P.Done) -> Any:
    """--remote: the server's own numbers over the reply: its metrics' polls, and Ollama's own per-reply prefill
    and decode where the reply went through its native API (app.core.remote.ollama.with_reply)."""
    if server is None:
        return None
    from app.core.remote.ollama import with_reply

    return with_reply(server.finish(), done.metrics)


def _print_server(server: Any, measures: Any) -> None:
    """--remote: the server's own numbers over the reply, beside the client's wall clock above."""
    if server is None:
        return
    from app.core.remote.text import summary_line

    if measures is not None:
        print(clean_line(summary_line(measures)))
    elif server.error:
        print(f"server  : {clean_line(server.error)}")


def _request_parts(args: argparse.Namespace, plan: LoadPlan,
                   prompt: str) -> tuple[list[dict[str, str]] | None, P.Sampling]:
    """The chat messages (None with --raw) and the Sampling of the request."""
    from app.engine import protocol as P

    system = plan.values["system_prompt"]
    messages = None
    if not args.raw:
        messages = ([{"role": "system", "content": system}] if system else []) + \
            [{"role": "user", "content": prompt}]
    return messages, P.Sampling(**plan.sampling_kwargs())


def _context_refused(model: Path, plan: LoadPlan) -> str | None:
    """Why the planned context does not fit in memory, if it does not."""
    from app.commands._preflight import check_context_fits

    load = plan.load_kwargs()
    return check_context_fits(model, load["n_ctx"], load["type_k"], load["type_v"], load["n_gpu_layers"])


def _engine(args: argparse.Namespace, model: Path | None, plan: LoadPlan) -> tuple[Any, P.LoadConfig | None]:
    """The engine (a local EngineClient, or a RemoteClient with --remote: the same interface where it matters
    here) and the LoadConfig for a local one (None for a remote server, which has its model loaded)."""
    if model is None:
        from app.engine.remote.backend import RemoteClient  # written for the remote-backend feature

        return RemoteClient(args.remote, api_key=api_key_arg(args.api_key), model=args.remote_model,
                            engine=args.server_engine), None
    from app.engine import protocol as P
    from app.engine.client import EngineClient

    engine = EngineClient()
    cfg = P.LoadConfig(model_path=str(model), **plan.load_kwargs(),
                       draft_model=str(resolve_model(args.draft_model)) if args.draft_model else None,
                       draft_max=args.draft_max)
    return engine, cfg


def _generate(args: argparse.Namespace, engine: Any, cfg: P.LoadConfig | None, plan: LoadPlan, prompt: str,
              messages: list[dict[str, str]] | None, sampling: P.Sampling) -> tuple[P.Loaded, P.Done | None, Any]:
    """Load (or connect), then stream the reply. Returns what was loaded, the Done event (None if none came) and,
    for a remote server, its metrics' first poll (app.commands._server_side; the request waits for it, briefly)."""
    from app.engine import protocol as P

    quiet = args.json
    server = None
    with engine:
        loaded = engine.load(cfg) if cfg is not None else engine.connect()
        if cfg is None:
            from app.commands._server_side import ServerSide

            server = ServerSide(engine, args.server_engine or engine.engine or None)  # as connect() told it
        if not quiet:
            _print_header(args, loaded, cfg)
        req = P.Generate(request_id=engine.new_request_id("c"), messages=messages,
                         prompt=prompt if args.raw else None, sampling=sampling,
                         prompt_lookup=args.prompt_lookup, context_overflow=plan.values["context_overflow"],
                         n_keep=args.keep)
        if server is not None:
            server.before_request()
        done = None
        shown = ThinkingPrinter()
        for event in engine.generate(req):
            if isinstance(event, P.Token) and not quiet:
                shown.token(event)
            elif isinstance(event, P.Done):
                done = event
        if not quiet:
            shown.end()
    return loaded, done, server


def _print_header(args: argparse.Namespace, loaded: P.Loaded, cfg: P.LoadConfig | None) -> None:
    """Before the reply, on stderr: the model, the context the engine allocated and the chat template."""
    if args.raw:
        template = "none (--raw: plain text continuation)"
    else:
        from app.core.chat.templates import ChatTemplate

        template = ChatTemplate(loaded.chat_template_name, loaded.chat_template_source).describe()
    print(clean_text(f"model: {loaded.model_desc}  ({loaded.model_path})"), file=sys.stderr)
    if cfg is not None:  # what the engine allocated, not what was asked for
        print(f"context: {loaded.n_ctx} tokens, KV {loaded.type_k}/{loaded.type_v}", file=sys.stderr)
        from app.core.metrics.slowness import gpu_shortfall, placement_warning

        shortfall = gpu_shortfall(loaded.gpu_layers_requested, loaded.gpu_layers_placed, loaded.gpu_layers_total)
        if shortfall:
            print(f"warning: {placement_warning(shortfall)}", file=sys.stderr)
    print(f"chat template: {template}", file=sys.stderr)
    print(file=sys.stderr)


def _print_json(done: P.Done, loaded: P.Loaded, cfg: P.LoadConfig | None, plan: LoadPlan, server: Any = None,
                measures: Any = None) -> None:
    """--json: the reply and its metrics (and, for a local engine, what was loaded and why; for a remote one,
    the server's own numbers over the reply under "server", or why there are none under "server_error")."""
    out = {"text": done.text, "reasoning": done.reasoning, "finish_reason": done.finish_reason,
           "metrics": done.metrics}
    if measures is not None:
        out["server"] = measures.to_dict()
    elif server is not None and server.error:
        out["server_error"] = server.error
    if cfg is not None:
        out["load"] = {"n_ctx": loaded.n_ctx, "type_k": loaded.type_k, "n_threads": loaded.n_threads,
                       "n_gpu_layers": loaded.n_gpu_layers, "sources": plan.sources, "notes": plan.notes}
    print_json(out)


def _print_summary(args: argparse.Namespace, done: P.Done, metrics: PhaseMetrics, plan: LoadPlan) -> None:
    """After the reply: how it finished, its phases, what drafting gained, the thinking and the context."""
    print("\n")
    print(f"-- finished: {done.finish_reason}; {metrics.source}")
    for line in metrics.summary_lines():  # the engine's metrics name the drafter that ran
        print(line)
    for note in done.metrics.get("server_notes", []):  # a remote server's numbers that were left out
        print(f"note    : {clean_line(note)}")
    from app.commands._draft_summary import speedup_lines

    draft = resolve_model(args.draft_model) if args.draft_model and not args.remote else None
    for line in speedup_lines(done.metrics, None if args.remote else resolve_model(args.model), draft,
                              plan.values["n_ctx"], plan.values["type_k"], plan.values["n_gpu_layers"]):
        print(line)
    if done.metrics.get("reasoning_tokens") or done.reasoning:
        print(_thinking_line(done.metrics))
    for line in overflow_lines(done.finish_reason, done.metrics):
        print(line)
    left_out = messages_left_out(done.metrics)
    if left_out:
        print(f"note    : {left_out}")


def _thinking_line(metrics: dict[str, Any]) -> str:
    """A reasoning model's thinking: its tokens and time, and when the answer began."""
    ttfa = metrics.get("ttft_answer_ms")
    return (f"thinking: {metrics.get('reasoning_tokens', 0)} tok in {metrics.get('reasoning_ms', 0.0):.1f} ms; "
            "first answer token "
            + ("never (the reply ended while thinking)" if ttfa is None else f"at {ttfa:.1f} ms (wall clock)"))


def plan_from_args(args: argparse.Namespace, model: Path | None, system: str | None) -> LoadPlan:
    """settings.json, the model's preset, the tune result, then these flags (app.core.predict.load_plan)."""
    from app.core.config.settings import load_settings
    from app.core.predict.load_plan import plan_load

    loaded = load_settings(move_aside=False)  # a command never moves the user's file aside; the window does
    flags = {"n_ctx": args.ctx, "n_gpu_layers": args.n_gpu_layers, "n_cpu_moe": args.n_cpu_moe,
             "type_k": args.kv_type, "type_v": args.kv_type,
             "n_threads": args.threads, "n_threads_batch": args.threads, "temperature": args.temp,
             "top_p": args.top_p, "top_k": args.top_k, "min_p": args.min_p, "repeat_penalty": args.repeat_penalty,
             "max_tokens": args.max_tokens, "seed": args.seed, "system_prompt": system,
             "context_overflow": args.context_overflow}
    plan = plan_load(model, loaded.settings, flags)
    if loaded.warning:
        plan.notes.insert(0, loaded.warning)
    return plan


class ThinkingPrinter:
    """Streams a reply to the terminal with the thinking apart: thinking on stderr between two marker lines,
    the answer on stdout (so `roofline chat ... > answer.txt` keeps the answer alone)."""

    def __init__(self) -> None:
        self.in_thinking = False

    def token(self, event: Any) -> None:
        if event.reasoning:
            if not self.in_thinking:
                print("[thinking]", file=sys.stderr)
                self.in_thinking = True
            sys.stderr.write(clean_text(event.reasoning))  # a reply may carry terminal escapes
            sys.stderr.flush()
        if event.text:
            self.end()
            sys.stdout.write(clean_text(event.text))
            sys.stdout.flush()

    def end(self) -> None:
        if self.in_thinking:
            print("\n[/thinking]", file=sys.stderr, flush=True)
            self.in_thinking = False


def overflow_lines(finish_reason: str, metrics: dict[str, Any]) -> list[str]:
    """What the context-overflow policy did, for the summary."""
    lines = []
    if metrics.get("context_prompt_dropped"):
        lines.append(f"context : {metrics['context_prompt_dropped']} tokens cut from the middle of the prompt "
                     f"to fit (first {metrics.get('context_keep', 0)} kept)")
    if metrics.get("context_shifts"):
        at = ", ".join(str(t) for t in metrics.get("context_shift_at", []))
        lines.append(f"context : full {metrics['context_shifts']}x, {metrics.get('context_dropped', 0)} old tokens "
                     f"dropped from the KV cache (after reply token {at}; first "
                     f"{metrics.get('context_keep', 0)} kept)")
        if metrics.get("context_reprefilled"):
            lines.append(f"context : this cache cannot shift: {metrics['context_reprefilled']} tokens "
                         "evaluated again instead")
    if finish_reason == "context_full":
        lines.append("context : the reply stopped because the context is full; use a larger --ctx or "
                     "--context-overflow rolling")
    return lines
