"""Measured performance: one generation's phase metrics, and a running server's traffic from its /metrics."""
