"""Packaging inputs: the icon set rendered from the SVG, the Linux desktop entry and AppStream metainfo, the
llama.cpp libraries the spec collects, the runtime hook that finds the bundled model."""

from __future__ import annotations

import configparser
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))

import icons  # noqa: E402
import spec_helpers  # noqa: E402

LINUX = ROOT / "packaging" / "linux"
APP_ID = "io.github.roofline.Roofline"


def _qimage(data: bytes):  # type: ignore[no-untyped-def]
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    # A QApplication, not a QGuiApplication: the process's one app object must serve the widget tests that
    # run after this file too (a QGuiApplication made here aborted them when run in that order).
    _app = QApplication.instance() or QApplication([])
    image = QImage()
    assert image.loadFromData(data, "PNG")
    return image


# ------------------------------------------------------------------------------------------------ icons


@pytest.mark.parametrize("size", icons.SIZES)
def test_committed_pngs_match_a_fresh_render_of_the_svg(size: int) -> None:
    committed = _qimage((ROOT / "resources" / "icons" / f"roofline-{size}.png").read_bytes())
    fresh = _qimage(icons.render_png(icons.SVG, size))
    assert (committed.width(), committed.height()) == (size, size)
    worst = 0
    step = max(1, size // 64)  # every pixel up to 64 px, a grid of 64 x 64 samples above
    for y in range(0, size, step):
        for x in range(0, size, step):
            a, b = committed.pixelColor(x, y).getRgb(), fresh.pixelColor(x, y).getRgb()
            worst = max(worst, *(abs(i - j) for i, j in zip(a, b, strict=False)))
    assert worst <= 2, "resources/icons is stale: run scripts/make_icons"


def test_the_icon_is_drawn_not_blank() -> None:
    image = _qimage(icons.render_png(icons.SVG, 64))
    alpha = [image.pixelColor(x, y).alpha() for x in range(64) for y in range(64)]
    assert sum(a > 0 for a in alpha) > 0.8 * 64 * 64  # the rounded square fills the canvas
    assert image.pixelColor(0, 0).alpha() == 0  # with transparent corners
    colours = {image.pixelColor(x, y).name() for x in range(0, 64, 2) for y in range(0, 64, 2)}
    assert len(colours) > 20  # background, slope, roof, ridge point, anti-aliasing


def test_ico_and_icns_hold_every_size_as_png() -> None:
    ico = (ROOT / "resources" / "icons" / "roofline.ico").read_bytes()
    reserved, kind, count = struct.unpack_from("<HHH", ico)
    assert (reserved, kind, count) == (0, 1, len(icons.ICO_SIZES))
    for i, size in enumerate(icons.ICO_SIZES):
        w, h, _c, _r, _planes, _bpp, length, offset = struct.unpack_from("<BBBBHHII", ico, 6 + 16 * i)
        assert (w or 256, h or 256) == (size, size)
        image = _qimage(ico[offset:offset + length])
        assert (image.width(), image.height()) == (size, size)
    icns = (ROOT / "resources" / "icons" / "roofline.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack_from(">I", icns, 4)[0] == len(icns)
    pos, seen = 8, {}
    while pos < len(icns):
        kind_b, length = icns[pos:pos + 4], struct.unpack_from(">I", icns, pos + 4)[0]
        seen[kind_b] = _qimage(icns[pos + 8:pos + length]).width()
        pos += length
    assert seen == {kind: size for size, kind in icons.ICNS_TYPES.items()}


# ------------------------------------------------------------------------------------------------ Linux files


def test_desktop_entry_is_complete() -> None:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(LINUX / f"{APP_ID}.desktop", encoding="utf-8")
    entry = parser["Desktop Entry"]
    assert entry["Type"] == "Application" and entry["Name"] == "Roofline"
    assert entry["Exec"].split()[0] == "roofline" and entry["Icon"] == APP_ID
    assert entry["Terminal"] == "false"
    for key in ("Categories", "Keywords", "MimeType"):
        assert entry[key].endswith(";"), key  # list values end with a semicolon (spec)


def test_metainfo_is_well_formed_and_matches_the_desktop_entry() -> None:
    root = ET.parse(LINUX / f"{APP_ID}.metainfo.xml").getroot()
    assert root.tag == "component" and root.get("type") == "desktop-application"
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == f"{APP_ID}.desktop"
    assert root.findtext("icon") == APP_ID
    assert root.findtext("metadata_license") == "CC0-1.0" and root.findtext("project_license") == "MIT"
    assert root.findtext("name") == "Roofline" and root.findtext("summary")
    assert root.find("description/p") is not None
    import app

    assert root.find("releases/release").get("version") == app.__version__  # type: ignore[union-attr]


def test_metainfo_passes_appstreamcli() -> None:
    tool = shutil.which("appstreamcli")
    if tool is None:
        pytest.skip("appstreamcli is not installed (apt install appstream)")
    out = subprocess.run([tool, "validate", "--no-net", str(LINUX / f"{APP_ID}.metainfo.xml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# ------------------------------------------------------------------------------------------------ what the spec bundles


def test_every_library_libllama_needs_is_collected() -> None:
    import importlib.util

    lib_dir = Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib"  # type: ignore[union-attr,arg-type]
    chosen = {p.name for p in spec_helpers.llama_libraries(lib_dir)}
    assert "libllama.so" in chosen
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    # Follow NEEDED entries from libllama.so through the libraries of its own directory.
    todo, seen = ["libllama.so"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        dyn = subprocess.run([readelf, "-d", str(lib_dir / name)], capture_output=True, text=True).stdout
        for line in dyn.splitlines():
            if "(NEEDED)" in line:
                dep = line.split("[", 1)[1].rstrip("]")
                if (lib_dir / dep).exists():
                    assert dep in chosen, f"{name} needs {dep}, which the spec leaves out"
                    todo.append(dep)
    assert len(seen) >= 3  # libllama -> libggml -> libggml-base/cpu


def test_runtime_hook_points_at_the_bundled_model_only_when_it_is_there(tmp_path: Path) -> None:
    from app.core.models.default_model import DEFAULT_MODEL_FILENAME

    hook = ROOT / "packaging" / "rthook_roofline.py"
    probe = ("import os, runpy, sys; sys._MEIPASS = sys.argv[1]; runpy.run_path(sys.argv[2]); "
             "print(os.environ.get('ROOFLINE_DEFAULT_MODEL', '-'))")
    env = {k: v for k, v in os.environ.items() if k != "ROOFLINE_DEFAULT_MODEL"}

    def run(extra: dict[str, str] | None = None) -> str:
        return subprocess.run([sys.executable, "-c", probe, str(tmp_path), str(hook)], env={**env, **(extra or {})},
                              capture_output=True, text=True, check=True).stdout.strip()

    assert run() == "-"  # no bundled model: nothing set
    model = tmp_path / spec_helpers.MODEL_DEST / DEFAULT_MODEL_FILENAME
    model.parent.mkdir()
    model.write_bytes(b"GGUF")
    assert run() == str(model)
    assert run({"ROOFLINE_DEFAULT_MODEL": "/my/own.gguf"}) == "/my/own.gguf"  # the user's choice wins


def test_a_wheel_install_carries_the_icon_set() -> None:
    """pyproject's data-files put every file of resources/ under <prefix>/share/roofline/resources, where
    app.selftest.resources_dir() looks when there is no source tree beside the package."""
    import glob
    import tomllib

    data_files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    shipped = {Path(f).resolve() for patterns in data_files.values() for p in patterns
               for f in glob.glob(str(ROOT / p))}
    wanted = {p.resolve() for p in (ROOT / "resources").rglob("*") if p.is_file()}
    assert wanted and wanted <= shipped
    assert all(dest.startswith("share/roofline/resources") for dest in data_files)
