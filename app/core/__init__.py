"""Pure-Python core: no Qt and no llama_cpp here (enforced by import-linter in the test suite)."""
