"""A remote OpenAI-compatible server behind the engine's interface: HTTP, the streamed protocol, the server's
timings."""
