"""The Settings dialog, its field checks and memory figures."""
