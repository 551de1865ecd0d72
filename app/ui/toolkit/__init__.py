"""Qt helpers every part of the window uses: background work, colours, safe text, self-sizing text, lazy
pages."""
