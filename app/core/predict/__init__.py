"""Predictions from the machine's measured figures: hardware and bandwidth probes, memory, speed, calibration,
batching, recommendations."""
