"""The window's one handle on the engine (`EngineQt`) and its remote servers."""
