"""Token sampling: llama.cpp's default chain on a logits row (with a small C top-k), and the default settings."""
