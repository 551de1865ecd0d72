"""The screenshots in docs/screenshots/ (`scripts/doc_screenshots [DIR]`): the window after three replies on the
real default model, at 1600×1000 and 800×600, light and dark, switched through View ▸ Theme as a user would.

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

PROMPTS = [
    "The three primary colours are",
    "Here is a Python function that reverses a string:\n```python",
    "A short list of fruits:\n\n-",
]
SIZES = {"wide": (1600, 1000), "small": (800, 600)}
THEMES = ("light", "dark")


def optimise(path: Path) -> None:
    """Shrink a PNG in place (lossy palette, then lossless recompression) with whichever tools exist."""
    if shutil.which("pngquant"):
        subprocess.run(["pngquant", "--force", "--skip-if-larger", "--quality", "70-95", "--output", str(path),
                        str(path)], check=False)
    if shutil.which("optipng"):
        subprocess.run(["optipng", "-quiet", "-o2", str(path)], check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", type=Path, nargs="?", default=Path("docs/screenshots"))
    parser.add_argument("--tokens", type=int, default=40, help="tokens per reply")
    args = parser.parse_args(argv)
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
    for prompt in PROMPTS:
        win.input.setPlainText(prompt)
        win.submit()
        wait_until(lambda: not win.session.busy, 300, what="the reply")
    spin(1200)  # one dashboard poll (RAM, KV stats)
    saved: list[Path] = []
    for size_name, size in SIZES.items():
        win.resize(*size)
        for theme_name in THEMES:
            win.menus.theme_actions[theme_name].trigger()
            spin(600)  # the layout, the cards' columns and the header wraps settle
            path = args.outdir / f"{size_name}-{theme_name}.png"
            if not win.grab().save(str(path)):
                raise OSError(f"could not write {path}")
            optimise(path)
            saved.append(path)
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
