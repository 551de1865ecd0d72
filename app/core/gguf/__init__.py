"""GGUF files: reading headers (facts, values, errors), split models, vocabularies, writing, quant and KV
types."""
