"""`roofline serve`: an OpenAI-compatible HTTP server over the batch engine (app.engine.llama.batch).

`openai_api` turns request bodies into engine requests and engine results into OpenAI-shaped JSON (pure);
`metrics` keeps the Prometheus counters; `engine_queue` (the Hub) connects the asyncio server to the engine
process; `guards` checks Host and Origin; `connections` caps connections and times their headers; `app` is
the Starlette application. No llama_cpp anywhere here: the model lives in the engine process.
"""
