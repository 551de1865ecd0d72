"""The Lab page: benchmark sweeps and the batching lab."""
