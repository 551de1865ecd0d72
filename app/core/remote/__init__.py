"""A serving engine's own numbers (vLLM, SGLang, TensorRT-LLM, llama-server, Ollama) in Roofline's measures:
the Prometheus text read with prometheus_client's parser (exposition), which name means what in each engine
and its versions (engines), bucket counters turned into percentiles (histogram), one scrape against an earlier
one (measures), Ollama's per-reply fields and /api/ps (ollama), and a window of scrapes (watch). Pure Python:
the HTTP lives in app.engine.remote.server_metrics."""
