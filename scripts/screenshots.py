"""Save PNG screenshots of the app on the real default model (`scripts/screenshots DIR`).

main-mid-stream.png (a reply streaming), main-after-3.png and dashboard-after-3.png (after three replies),
main-dark.png and dashboard-dark.png (the same in a dark palette). Uses a throw-away ROOFLINE_HOME.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

PROMPTS = [
    "The three primary colours are",
    "Here is a Python function that reverses a string:\n```python",
    "A short list of fruits:\n\n-",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--tokens", type=int, default=40, help="tokens per reply")
    args = parser.parse_args(argv)
    args.outdir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("ROOFLINE_HOME", tempfile.mkdtemp(prefix="roofline-shots-"))

    from gui_scripting import offscreen_app, spin, wait_until

    from app.ui.toolkit import theme

    app = offscreen_app()
    from app.ui.chat.message_view import MessageWidget
    from app.ui.window.main_window import MainWindow

    win = MainWindow()
    win.resize(1440, 900)
    win.show()
    win.sampling_panel.max_tokens.setValue(args.tokens)
    win.sampling_overrides = {"ignore_eos": True}
    win.load_default_model()
    wait_until(lambda: win.engine.loaded_info is not None, 180, what="the model to load")
    saved: list[Path] = []

    def shot(widget, name: str) -> None:  # type: ignore[no-untyped-def]
        path = args.outdir / name
        widget.grab().save(str(path))
        saved.append(path)

    for i, prompt in enumerate(PROMPTS):
        win.input.setPlainText(prompt)
        win.submit()
        if i == 0:
            rid = win.session.streaming_message_id
            assert rid is not None
            widget = win.message_view.widget_for(rid)
            assert widget is not None
            def streamed(w: MessageWidget = widget) -> bool:
                return len(w.text) > 60

            wait_until(streamed, 120, what="streamed text")
            spin(100)
            shot(win, "main-mid-stream.png")
        wait_until(lambda: not win.session.busy, 300, what="the reply")
    spin(1200)  # one dashboard poll (RAM, KV stats)
    shot(win, "main-after-3.png")
    dash = win.dashboard
    dash.resize(dash.width(), dash.sizeHint().height())
    shot(dash, "dashboard-after-3.png")
    # The offscreen platform has no colour scheme to follow: apply the palette a dark system would give.
    app.setPalette(theme.dark_palette())
    win.restyle()
    spin(300)
    shot(win, "main-dark.png")
    dash.resize(dash.width(), dash.sizeHint().height())
    shot(dash, "dashboard-dark.png")
    win.close()
    app.quit()
    for p in saved:
        print(p)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the app, when run from anywhere
    sys.exit(main())
