"""The main window's import path: `from app.ui.main_window import MainWindow` (the window itself lives in the
app.ui.window package, one module per job)."""

from app.ui.banner import Banner
from app.ui.window.engine_events import quant_of
from app.ui.window.main_window import MainWindow

__all__ = ["Banner", "MainWindow", "quant_of"]
