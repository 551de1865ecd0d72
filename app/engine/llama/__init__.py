"""Everything that runs beside llama.cpp in the engine's child processes (the only importers of `llama_cpp`)."""
