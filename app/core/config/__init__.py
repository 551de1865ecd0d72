"""Configuration: user settings, where files live, API keys in the OS keyring."""
