"""Soak the window (`scripts/soak_gui`, not part of `scripts/test`): many replies, random everything, a restart.

Phase 1 (a child process, so a crash is counted, not suffered): the window on the default model streams
`--replies` replies with random sampling settings (temperature, top-p/k, min-p, repeat penalty, length, seed)
and random prompts in several scripts (English, Devanagari, Chinese, Korean, Arabic, Hebrew, emoji), a new
chat every `--per-chat` replies, while a timer resizes the window at random (400-2000 x 300-1200 px) every
150-600 ms. A 5 ms timer records the event loop's gaps (stalls). Phase 2 (another child): the window starts
on the same store, reopens every chat in turn at random sizes, and closes. The parent then prints the
crashes (a child killed by a signal, a non-zero exit, or a Python traceback: must be 0), the stall p99 and
max of each phase, and the store's `PRAGMA integrity_check` with its counts.

Runs offscreen unless DISPLAY is set and `--on-screen` is given. Usage:
    scripts/soak_gui [--replies 200] [--per-chat 10] [--seed 1] [--max-tokens 64] [--max-minutes M]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPTS = [
    "Explain in three sentences why decode is memory-bandwidth bound.",
    "Write a haiku about the sea.",
    "Liste trois raisons pour lesquelles le ciel est bleu.",
    "मेमोरी बैंडविड्थ क्या है? तीन वाक्यों में समझाइए।",
    "用三句话解释为什么解码受内存带宽限制。",
    "디코딩이 메모리 대역폭에 묶이는 이유를 설명하세요.",
    "اشرح لماذا يكون فك التشفير محدودًا بعرض نطاق الذاكرة.",
    "הסבר בשלושה משפטים מדוע הפענוח מוגבל ברוחב הפס.",
    "Reply with a Markdown table of five fruits and their colours 🍎🍌🍇, then a code block.",
    "Count from one to twenty in words, one per line, as a numbered list.",
    "Write a Python function that reverses a string, with a docstring.",
    "Mix English, हिन्दी, 中文 and 한국어 in one paragraph about the weather. 👩‍👩‍👧‍👦",
]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


# ---------------------------------------------------------------------------------------------------- child
def child(args: argparse.Namespace) -> int:
    from gui_scripting import offscreen_app, spin, wait_until
    from PySide6.QtCore import Qt, QTimer

    if not args.on_screen:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    app = offscreen_app()
    from app.ui.window.main_window import MainWindow

    rng = random.Random(args.seed * 1000 + (1 if args.phase == "reopen" else 0))
    win = MainWindow()
    win.measure_bandwidth_on_load = False
    win.resize(1400, 860)
    win.show()
    gaps: list[float] = []
    last = [time.perf_counter()]

    def tick() -> None:
        now = time.perf_counter()
        gaps.append((now - last[0]) * 1000.0 - 5.0)
        last[0] = now

    probe = QTimer()
    probe.setTimerType(Qt.TimerType.PreciseTimer)
    probe.setInterval(5)
    probe.timeout.connect(tick)

    def resize_randomly() -> None:
        win.resize(rng.randint(400, 2000), rng.randint(300, 1200))
        resizer.start(rng.randint(150, 600))

    resizer = QTimer()
    resizer.setSingleShot(True)
    resizer.timeout.connect(resize_randomly)
    result: dict[str, object] = {"phase": args.phase}
    started = time.monotonic()
    if args.phase == "stream":
        win.load_default_model()
        wait_until(lambda: win.engine.loaded_info is not None, 600, what="the model to load")
        last[0] = time.perf_counter()
        probe.start()
        resizer.start(200)
        done = errors = 0
        for n in range(args.replies):
            if args.max_minutes and time.monotonic() - started > args.max_minutes * 60:
                print(f"  time budget of {args.max_minutes} min spent after {n} replies", flush=True)
                break
            if n % args.per_chat == 0:
                win.new_chat()
            win.sampling_overrides = {
                "temperature": round(rng.uniform(0.0, 1.6), 2), "top_p": round(rng.uniform(0.5, 1.0), 2),
                "top_k": rng.choice([0, 1, 10, 40, 100]), "min_p": round(rng.uniform(0.0, 0.2), 3),
                "repeat_penalty": round(rng.uniform(1.0, 1.3), 2), "max_tokens": rng.randint(4, args.max_tokens),
                "seed": rng.randint(0, 2**31 - 1)}
            win.input.setPlainText(rng.choice(PROMPTS))
            win.submit()
            if not win.session.busy:
                errors += 1  # not sent (engine not ready): counted, the soak goes on
                spin(200)
                continue
            wait_until(lambda: not win.session.busy, 300, step_ms=20, what=f"reply {n + 1}")
            done += 1
            if (n + 1) % 20 == 0:
                print(f"  {n + 1} replies, {time.monotonic() - started:.0f} s", flush=True)
        result.update(replies=done, not_sent=errors)
    else:
        last[0] = time.perf_counter()
        probe.start()
        resizer.start(200)
        convs = win.store.list_conversations()
        for conv in convs:
            win.open_conversation(conv.id)
            spin(rng.randint(50, 250))
        result.update(reopened=len(convs),
                      messages_shown=sum(len(win.store.messages(c.id)) for c in convs))
    probe.stop()
    resizer.stop()
    spin(100)
    win.close()
    app.processEvents()
    result.update(seconds=round(time.monotonic() - started, 1), stall_p99_ms=round(percentile(gaps, 99), 1),
                  stall_max_ms=round(max(gaps, default=0.0), 1), ticks=len(gaps))
    print("SOAK-RESULT " + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------------------------------------------- parent
def run_phase(phase: str, args: argparse.Namespace, env: dict[str, str]) -> tuple[dict[str, object], str | None]:
    cmd = [sys.executable, __file__, "--child", phase, "--replies", str(args.replies), "--per-chat",
           str(args.per_chat), "--seed", str(args.seed), "--max-tokens", str(args.max_tokens),
           "--max-minutes", str(args.max_minutes)]
    if args.on_screen:
        cmd.append("--on-screen")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    result: dict[str, object] = {}
    tail: list[str] = []
    for line in proc.stdout:
        if line.startswith("SOAK-RESULT "):
            result = json.loads(line[len("SOAK-RESULT "):])
        elif line.startswith("  "):
            print(line.rstrip(), flush=True)
        else:
            tail = (tail + [line.rstrip()])[-40:]
    code = proc.wait()
    crash = None
    if code != 0 or not result:
        crash = f"{phase}: exit {code}" + ("\n    " + "\n    ".join(tail[-15:]) if tail else "")
    elif any("Traceback" in line for line in tail):
        crash = f"{phase}: Python traceback\n    " + "\n    ".join(tail[-15:])
    return result, crash


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replies", type=int, default=200)
    parser.add_argument("--per-chat", type=int, default=10, help="replies per chat (default 10)")
    parser.add_argument("--max-tokens", type=int, default=64, help="longest reply in tokens (default 64)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-minutes", type=float, default=0.0,
                        help="stop streaming after this long (the replies done are reported); 0: no limit")
    parser.add_argument("--on-screen", action="store_true", help="use the real display (DISPLAY) if there is one")
    parser.add_argument("--child", choices=("stream", "reopen"), dest="phase", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        return child(args)

    from app.core.models.default_model import default_model_path

    model = default_model_path()  # in the real data dir, before the soak's own home is used
    home = tempfile.mkdtemp(prefix="roofline-soak-")
    env = {**os.environ, "ROOFLINE_HOME": home, "ROOFLINE_DEFAULT_MODEL": str(model)}
    print(f"soak: {args.replies} replies (seed {args.seed}), store in {home}", flush=True)
    crashes: list[str] = []
    results = []
    for phase in ("stream", "reopen"):
        result, crash = run_phase(phase, args, env)
        results.append(result)
        if crash:
            crashes.append(crash)
        print(f"{phase}: {json.dumps(result)}", flush=True)
    db = Path(home) / "data" / "chats.sqlite3"
    con = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
    counts = con.execute("SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM messages WHERE"
                         " role = 'assistant'), (SELECT count(*) FROM messages WHERE state = 'streaming')").fetchone()
    con.close()
    print(f"crashes: {len(crashes)}")
    for c in crashes:
        print(f"  {c}")
    for r in results:
        print(f"stalls ({r.get('phase', '?')}): p99 {r.get('stall_p99_ms', '?')} ms, "
              f"max {r.get('stall_max_ms', '?')} ms")
    print(f"store: integrity_check {integrity}; {counts[0]} chats, {counts[1]} replies, {counts[2]} left streaming")
    return 0 if not crashes and integrity == "ok" and counts[2] == 0 else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
