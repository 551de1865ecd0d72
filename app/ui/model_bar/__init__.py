"""The toolbar's model controls: selector, eject/reload, tips, presets, the draft model."""
