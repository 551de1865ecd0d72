"""A scroll area's new content laid out now, at the width it is shown at.

Left to the event loop, widgets just added to a shown scroll area are shown one event later (Qt queues it),
laid out, and the vertical scroll bar is shown or hidden one event later still (a queued call too), which
changes the width once more: meanwhile the content was painted at a width it no longer has, squeezed or cut
at the right, until the next resize. `lay_out_now` does those steps at once.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, Qt
from PySide6.QtWidgets import QScrollArea


def lay_out_now(area: QScrollArea) -> None:
    """Show the widgets added to `area`'s content (unless hidden on purpose), size the content and the scroll
    bars for them, and show or hide the scroll bar, all before returning."""
    inner = area.widget()
    layout = inner.layout() if inner is not None else None
    if inner is None or layout is None or not inner.isVisible():
        return
    hidden_on_purpose = Qt.WidgetAttribute.WA_WState_ExplicitShowHide
    for i in range(layout.count()):
        item = layout.itemAt(i)
        child = item.widget() if item is not None else None
        if child is not None and child.isHidden() and not child.testAttribute(hidden_on_purpose):
            child.show()  # what Qt's queued show would do one event later
    QCoreApplication.sendEvent(area, QEvent(QEvent.Type.LayoutRequest))  # the content's size, the bar's range
    QCoreApplication.sendPostedEvents(area, QEvent.Type.MetaCall)  # the bar shown or hidden, the width with it
