"""The main window, one module per job: main_window.py builds it and owns its lifetime and settings;
chat_flow.py runs conversations and the input; engine_events.py shows what the engine reports;
model_loading.py chooses and loads models; base.py declares what they share."""

from app.ui.window.main_window import MainWindow

__all__ = ["MainWindow"]
