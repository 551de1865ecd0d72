"""Render the app icon (resources/roofline.svg) to PNGs, a Windows .ico and a macOS .icns, with Qt.

Run through `scripts/make_icons`. PNGs go to resources/icons/roofline-<size>.png (16..512, the sizes desktop
icon themes ask for). The .ico and .icns hold PNG-encoded images (supported since Windows Vista and
macOS 10.7), written here by hand: both containers are a few lines of header around those PNGs, and
Qt's own ICO writer stores one size only.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SVG = ROOT / "resources" / "roofline.svg"
ICON_DIR = ROOT / "resources" / "icons"
SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)  # 256 is the largest an .ico entry describes
ICNS_TYPES = {16: b"icp4", 32: b"icp5", 64: b"icp6", 128: b"ic07", 256: b"ic08", 512: b"ic09"}


def render_png(svg: Path, size: int) -> bytes:
    """The SVG drawn into a transparent size x size image, as PNG bytes."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    if QGuiApplication.instance() is None:
        _app = QGuiApplication(["make_icons"])  # Qt needs an application object to paint
        globals()["_keep_app"] = _app
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg} is not a valid SVG for Qt")
    image = QImage(size, size, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buf, "PNG")
    buf.close()
    return bytes(data.data())


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """ICONDIR + one ICONDIRENTRY per size + the PNG payloads."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    entries, blobs = b"", b""
    for s in sizes:
        data = pngs[s]
        dim = 0 if s >= 256 else s  # 0 means 256
        entries += struct.pack("<BBBBHHII", dim, dim, 0, 0, 1, 32, len(data), offset)
        blobs += data
        offset += len(data)
    return header + entries + blobs


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """'icns' + total length, then (type, length, PNG) records."""
    body = b""
    for size, kind in sorted(ICNS_TYPES.items()):
        data = pngs[size]
        body += kind + struct.pack(">I", 8 + len(data)) + data
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def make_icons(svg: Path = SVG, out_dir: Path = ICON_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    pngs = {s: render_png(svg, s) for s in SIZES}
    written = []
    for s, data in pngs.items():
        path = out_dir / f"roofline-{s}.png"
        path.write_bytes(data)
        written.append(path)
    ico = out_dir / "roofline.ico"
    ico.write_bytes(ico_bytes({s: pngs[s] for s in ICO_SIZES}))
    icns = out_dir / "roofline.icns"
    icns.write_bytes(icns_bytes(pngs))
    return written + [ico, icns]


if __name__ == "__main__":
    for p in make_icons(Path(sys.argv[1]) if len(sys.argv) > 1 else SVG):
        print(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
