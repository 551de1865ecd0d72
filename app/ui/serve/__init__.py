"""The Serve switch: one `roofline serve` process on the loaded model."""
