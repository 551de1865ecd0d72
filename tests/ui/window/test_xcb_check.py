"""The missing-system-library hint: which libraries Qt's xcb plugin lacks, and which packages provide them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.ui.window import xcb_check

LDD_OUTPUT = """\
\tlinux-vdso.so.1 (0x00007ffc5a9f2000)
\tlibQt6XcbQpa.so.6 => /opt/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f1d2c000000)
\tlibxcb-cursor.so.0 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-cursor.so.0 => not found
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f1d2bfd0000)
\tlibfoo-unknown.so.3 => not found
"""
X11 = {"DISPLAY": ":0"}


def test_ldd_output_gives_the_missing_libraries_once_each() -> None:
    assert xcb_check.parse_ldd(LDD_OUTPUT) == ["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libfoo-unknown.so.3"]
    assert xcb_check.parse_ldd("\tlibxcb.so.1 => /lib/libxcb.so.1 (0x1)\n") == []


def test_missing_libraries_map_to_apt_and_dnf_packages() -> None:
    apt, dnf, unknown = xcb_check.packages_for(["libxcb-cursor.so.0", "libxcb-icccm.so.4", "libxkbcommon-x11.so.0",
                                                "libxcb-randr.so.0", "libxcb-shape.so.0", "libfoo.so.1"])
    assert apt == ["libxcb-cursor0", "libxcb-icccm4", "libxkbcommon-x11-0", "libxcb-randr0", "libxcb-shape0"]
    assert dnf == ["xcb-util-cursor", "xcb-util-wm", "libxkbcommon-x11", "libxcb"]  # one package, several libs
    assert unknown == ["libfoo.so.1"]


def test_the_hint_is_one_line_with_both_package_managers() -> None:
    line = xcb_check.hint(["libxcb-cursor.so.0", "libxcb-keysyms.so.1"])
    assert "\n" not in line
    assert "sudo apt install libxcb-cursor0 libxcb-keysyms1" in line
    assert "sudo dnf install xcb-util-cursor xcb-util-keysyms" in line
    assert "libxcb-cursor.so.0" in line


def _fake_ldd(output: str, calls: list[list[str]]):  # type: ignore[no-untyped-def]
    def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, output, "")
    return run


def test_probe_runs_ldd_on_the_plugin_and_reports(tmp_path: Path) -> None:
    plugin = tmp_path / "libqxcb.so"
    plugin.write_bytes(b"\x7fELF")
    calls: list[list[str]] = []
    hint = xcb_check.check(X11, plugin=plugin, run=_fake_ldd(LDD_OUTPUT, calls), ldd="/usr/bin/ldd")
    assert calls == [["/usr/bin/ldd", str(plugin)]]
    assert hint is not None and "libxcb-cursor0 libxcb-icccm4" in hint and "libfoo-unknown.so.3" in hint
    # Everything found: no hint.
    assert xcb_check.check(X11, plugin=plugin, run=_fake_ldd("\tlibxcb.so.1 => /x (0x1)\n", []), ldd="ldd") is None


def test_no_probe_off_x11(tmp_path: Path) -> None:
    plugin = tmp_path / "libqxcb.so"
    calls: list[list[str]] = []
    run = _fake_ldd(LDD_OUTPUT, calls)
    for env in ({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}, {"WAYLAND_DISPLAY": "wayland-0"}, {}):
        assert xcb_check.check(env, plugin=plugin, run=run, ldd="ldd") is None
    assert calls == []
    assert not xcb_check.xcb_likely(X11, platform="darwin")
    assert xcb_check.xcb_likely({"QT_QPA_PLATFORM": "xcb"}, platform="linux")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="dlopen error text is glibc's")
def test_without_ldd_a_child_process_names_the_first_missing_library(tmp_path: Path) -> None:
    """The fallback probe really loads a library in a child: one that needs a library that does not exist."""
    import shutil

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build a stand-in plugin")
    (tmp_path / "dep.c").write_text("int dep(void) { return 1; }\n")
    (tmp_path / "plugin.c").write_text("int dep(void); int plugin(void) { return dep(); }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "libroofline-missing-dep.so.7"),
                    "-Wl,-soname,libroofline-missing-dep.so.7", str(tmp_path / "dep.c")], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "libqxcb.so"), str(tmp_path / "plugin.c"),
                    str(tmp_path / "libroofline-missing-dep.so.7")], check=True)
    (tmp_path / "libroofline-missing-dep.so.7").unlink()
    missing = xcb_check.missing_libraries(tmp_path / "libqxcb.so", ldd="")
    assert missing == ["libroofline-missing-dep.so.7"]
    # And ldd itself, when present, says the same.
    if shutil.which("ldd"):
        assert xcb_check.missing_libraries(tmp_path / "libqxcb.so") == ["libroofline-missing-dep.so.7"]


def test_gui_command_prints_the_hint_and_exits_2(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from app.commands import gui

    monkeypatch.setattr(gui, "display_problem", lambda: None)
    monkeypatch.setattr(xcb_check, "check", lambda: xcb_check.hint(["libxcb-cursor.so.0"]))
    assert gui.run_gui(gui.argparse.Namespace()) == 2
    err = capsys.readouterr().err
    assert "sudo apt install libxcb-cursor0" in err and "sudo dnf install xcb-util-cursor" in err
