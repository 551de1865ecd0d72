"""docs/screenshots/server-view.png: the window's Server view on a vLLM server — its recorded exposition
(tests/data/remote_metrics), polled for a minute whose running, waiting and KV-cache numbers this script varies so
the plots have a history — grabbed offscreen (no display needed).

    .venv/bin/python scripts/screenshot_server_view.py docs/screenshots/server-view.png
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "remote_metrics"


def main(out: Path) -> Path:
    sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "helpers"), str(ROOT / "scripts")]
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    from doc_screenshots import save

    from app.core.chat.store import ChatStore
    from app.core.config.settings import LoadResult, Settings
    from app.core.remote.engines import SPECS, VLLM
    from app.core.remote.exposition import read_exposition
    from app.core.remote.measures import measure
    from app.ui.window.main_window import MainWindow
    from fake_engine import fake_engine, loaded_event

    a, b = ((DATA / f"vllm-{x}.prom").read_text(encoding="utf-8") for x in "ab")
    m = measure(SPECS[VLLM], read_exposition(b, 60.0), read_exposition(a, 0.0))
    with tempfile.TemporaryDirectory() as tmp:
        store = ChatStore(Path(tmp) / "chats.sqlite3")
        win = MainWindow(store=store, settings_result=LoadResult(Settings()), engine=fake_engine())
        win.resize(1600, 1000)
        win.show()
        win.engine._dispatch(dataclasses.replace(loaded_event(model_desc="served (remote)"),
                                                 model_path="http://127.0.0.1:9/v1", chat_template_source="server"))
        d = win.dashboard
        for i in range(0, 61, 2):  # a minute of polls: requests pile up, a queue forms and drains, the cache fills
            running = min(4, i // 3) if i < 40 else 2
            waiting = 0 if i < 25 else (min(7, (i - 25) // 2) if i < 40 else 1)
            d.server_link.on_measures(dataclasses.replace(m, t=float(i), running=running, waiting=waiting,
                                                          kv_fraction=min(0.9, 0.02 + i * 0.02)))
            app.processEvents()
        for _ in range(20):
            app.processEvents()
        path = save(d.remote_server, out)
        win.close()
        store.close()
    return path


if __name__ == "__main__":
    print(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots" / "server-view.png"))
