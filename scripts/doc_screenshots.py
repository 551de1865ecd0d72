"""The screenshots in docs/screenshots/ (`scripts/doc_screenshots [DIR]`): the window after three replies on the
real default model, at 1600×1000 and 800×600, light and dark, switched through View ▸ Theme as a user would;
then the chat column with a reply's code blocks and the context meter over a 512-token context
(code-blocks-and-context-meter.png), and the Lab page after a batching sweep (batching-lab.png; `--no-lab`
skips its minutes of measuring). `--only code,lab` takes only those (see --help).

Run it under a real X server for the committed ones (fonts and hinting as users see them), e.g.
`Xvfb :61 -screen 0 1600x1000x24 & DISPLAY=:61 scripts/doc_screenshots`; without a display it runs offscreen.
Uses a throw-away ROOFLINE_HOME. The PNGs are made small with pngquant and optipng where installed, else kept
as Qt saves them; the sizes are printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PROMPTS = [
    "The three primary colours are",
    "Here is a Python function that reverses a string:\n```python",
    "A short list of fruits:\n\n-",
]
SIZES = {"wide": (1600, 1000), "small": (800, 600)}
# The code-blocks shot's chat. The small base model seldom writes a fenced block when asked, so the reply is
# written into the chat by this script (it has no metrics: the shot shows rendering, not a measurement).
CODE_QUESTION = "Write a greeting function in Python, and the command that lists the models."
CODE_REPLY = ('Here it is:\n\n```python\ndef greet(name: str) -> str:\n    """Say hello."""\n'
              '    return f"Hello, {name}!"\n```\n\nAnd to list the models:\n\n```\nls -la | grep gguf\n```\n')
DRAFT_SENTENCE = "Now explain what prefill and decode are, in two sentences. "
SHOT_CTX = 512  # a small context, so that a few lines of draft show the meter's "will not fit"
THEMES = ("light", "dark")
SHOTS = ("window", "code", "lab")  # the window at both sizes and themes, the code-blocks shot, the Lab's


def optimise(path: Path) -> None:
    """Shrink a PNG in place (lossy palette, then lossless recompression) with whichever tools exist."""
    if shutil.which("pngquant"):
        subprocess.run(["pngquant", "--force", "--skip-if-larger", "--quality", "70-95", "--output", str(path),
                        str(path)], check=False)
    if shutil.which("optipng"):
        subprocess.run(["optipng", "-quiet", "-o2", str(path)], check=False)


def save(widget: Any, path: Path) -> Path:
    if not widget.grab().save(str(path)):
        raise OSError(f"could not write {path}")
    optimise(path)
    return path


def window_shots(win: Any, outdir: Path, spin: Any, wait_until: Any) -> list[Path]:
    """Three replies, then the window at each size in each theme."""
    for prompt in PROMPTS:
        win.input.setPlainText(prompt)
        win.submit()
        wait_until(lambda: not win.session.busy, 300, what="the reply")
    spin(1200)  # one dashboard poll (RAM, KV stats)
    saved = []
    for size_name, size in SIZES.items():
        win.resize(*size)
        for theme_name in THEMES:
            win.menus.theme_actions[theme_name].trigger()
            spin(600)  # the layout, the cards' columns and the header wraps settle
            saved.append(save(win, outdir / f"{size_name}-{theme_name}.png"))
    return saved


def code_blocks_shot(win: Any, outdir: Path, spin: Any, wait_until: Any) -> Path:
    """A chat whose reply has two code blocks, a draft typed until the meter says it will not fit the model
    reloaded with a `SHOT_CTX`-token context; the chat column grabbed."""
    loaded = win.engine.loaded_info
    win.settings.n_ctx = SHOT_CTX
    win.load_model(Path(loaded.model_path))
    wait_until(lambda: win.engine.loaded_info is not None and win.engine.loaded_info.n_ctx == SHOT_CTX, 300,
               what="the model to load again with a small context")
    conv = win.store.create_conversation("Code blocks")
    win.store.add_message(conv.id, "user", CODE_QUESTION)
    win.store.add_message(conv.id, "assistant", CODE_REPLY)
    win.conversations.reload()
    win.open_conversation(conv.id)
    draft = DRAFT_SENTENCE
    win.input.setPlainText(draft)
    spin(300)
    while "will not fit" not in win.context_label.text():
        draft += DRAFT_SENTENCE
        win.input.setPlainText(draft)
        spin(300)  # the meter follows the draft after a short pause
    spin(600)
    return save(win.message_view.parentWidget(), outdir / "code-blocks-and-context-meter.png")


def lab_shot(win: Any, outdir: Path, spin: Any, wait_until: Any) -> Path:
    """The Lab page's batching sweep (1–16 streams, 64 tokens, two rounds) run from its button; the page
    grabbed when it is done, the measured tok/s printed (for the docs' caption)."""
    win.pages.setCurrentWidget(win.lab_page)
    spin(300)
    lab = win.lab_page.ensure()
    lab.kind.setCurrentIndex(lab.kind.findData("batch"))
    panel = lab.batch_lab
    panel.rounds.setValue(2)
    panel.run_button.click()
    wait_until(lambda: not panel.running, 1800, step_ms=200, what="the batching sweep")
    spin(600)
    if panel.result is None:
        raise RuntimeError(f"the batching sweep failed: {panel.status.text()}")
    for row in panel.result.rows:
        print(f"batching: {row}")
    path = save(lab, outdir / "batching-lab.png")
    win.pages.setCurrentWidget(win.chat_page)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", type=Path, nargs="?", default=Path("docs/screenshots"))
    parser.add_argument("--tokens", type=int, default=40, help="tokens per reply")
    parser.add_argument("--no-lab", action="store_true", help="skip the batching sweep (minutes) and its shot")
    parser.add_argument("--only", default=",".join(SHOTS), metavar="SHOTS",
                        help=f"a comma-separated choice of {', '.join(SHOTS)} (default: all): e.g. `--only lab` "
                             "retakes batching-lab.png alone, without the replies the window shots need")
    args = parser.parse_args(argv)
    only = {name.strip() for name in args.only.split(",") if name.strip()}
    if not only or only - set(SHOTS):
        parser.error(f"--only takes {', '.join(SHOTS)}, separated by commas")
    args.outdir.mkdir(parents=True, exist_ok=True)
    home = tempfile.mkdtemp(prefix="roofline-shots-")
    os.environ.setdefault("ROOFLINE_HOME", home)
    if os.environ.get("DISPLAY"):  # a real X server: its fonts and hinting, as users see them
        os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    else:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from gui_scripting import offscreen_app, spin, wait_until

    app = offscreen_app()  # (on the platform chosen above)
    from app.ui.window.main_window import MainWindow

    win = MainWindow()
    win.measure_bandwidth_on_load = False  # 2 s of every core for one line of the roofline box
    win.resize(*SIZES["wide"])
    win.show()
    win.sampling_panel.max_tokens.setValue(args.tokens)
    win.sampling_overrides = {"ignore_eos": True}
    win.load_default_model()
    wait_until(lambda: win.engine.loaded_info is not None, 300, what="the model to load")
    saved: list[Path] = []
    if "window" in only:
        saved += window_shots(win, args.outdir, spin, wait_until)
    win.resize(*SIZES["wide"])
    win.menus.theme_actions["light"].trigger()
    if "code" in only:
        saved.append(code_blocks_shot(win, args.outdir, spin, wait_until))
    if "lab" in only and not args.no_lab:
        saved.append(lab_shot(win, args.outdir, spin, wait_until))
    win.menus.theme_actions["system"].trigger()
    win.close()
    app.quit()
    shutil.rmtree(home, ignore_errors=True)
    for p in saved:
        print(f"{p}  {p.stat().st_size // 1024} KiB")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app, when run from anywhere
    sys.exit(main())
