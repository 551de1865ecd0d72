"""Desktop app (PySide6): chat window, live performance dashboard, settings. Talks to the engine only
through `app.ui.engine_link.engine_qt.EngineQt`."""
