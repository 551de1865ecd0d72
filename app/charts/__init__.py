"""Charts drawn with Qt (pyqtgraph) but belonging to no window: the sweep chart, shown by the Lab page and
saved as PNG by `roofline sweep --png`. Nothing here imports app.ui, so the CLI renders without the UI
package; the window's widgets import these instead of keeping their own copies."""
