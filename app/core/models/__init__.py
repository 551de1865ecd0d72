"""The user's models: the local library, what fits this machine, curated picks, the default model, presets."""
