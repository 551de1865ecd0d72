"""Benchmarks: sweep planning and analysis, the batching sweep, llama-bench's format, the model zoo of sparse
GGUFs."""
