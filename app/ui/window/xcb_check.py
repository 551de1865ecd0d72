"""Before the window starts on Linux/X11: can Qt's xcb platform plugin load? If not, say which packages to install.

Without one of its system libraries (libxcb-cursor0 on a fresh Debian, typically) Qt prints "Could not load
the Qt platform plugin "xcb"" and aborts, naming no package. `missing_libraries` asks `ldd` which shared
libraries the plugin (and Qt's xcb integration library it links) cannot find; where there is no `ldd`, a
child process tries to load the plugin and reports the first one. `packages_for` maps library file names to
Debian/Ubuntu (apt) and Fedora (dnf) package names. Nothing here imports Qt's GUI modules, so it runs before Qt
is touched; `check` returns the one-line hint, or None when the plugin loads (or it cannot tell).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

# library soname -> (apt package, dnf package)
LIBRARY_PACKAGES: dict[str, tuple[str, str]] = {
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor"),
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil"),
    "libxcb-util.so.1": ("libxcb-util1", "xcb-util"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libxcb.so.1": ("libxcb1", "libxcb"),
    "libxcb-xkb.so.1": ("libxcb-xkb1", "libxcb"),
    "libxcb-randr.so.0": ("libxcb-randr0", "libxcb"),
    "libxcb-shape.so.0": ("libxcb-shape0", "libxcb"),
    "libxcb-xfixes.so.0": ("libxcb-xfixes0", "libxcb"),
    "libxcb-sync.so.1": ("libxcb-sync1", "libxcb"),
    "libxcb-shm.so.0": ("libxcb-shm0", "libxcb"),
    "libxcb-render.so.0": ("libxcb-render0", "libxcb"),
    "libxcb-xinerama.so.0": ("libxcb-xinerama0", "libxcb"),
    "libxcb-xinput.so.0": ("libxcb-xinput0", "libxcb"),
    "libxcb-glx.so.0": ("libxcb-glx0", "libxcb"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb"),
    "libX11.so.6": ("libx11-6", "libX11"),
    "libXau.so.6": ("libxau6", "libXau"),
    "libXdmcp.so.6": ("libxdmcp6", "libXdmcp"),
    "libSM.so.6": ("libsm6", "libSM"),
    "libICE.so.6": ("libice6", "libICE"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl"),
    "libGL.so.1": ("libgl1", "libglvnd-glx"),
    "libGLX.so.0": ("libglx0", "libglvnd-glx"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2"),
    "libgthread-2.0.so.0": ("libglib2.0-0", "glib2"),
}

PROBE_EXIT = 2
_LDD_MISSING = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)
_DLOPEN_MISSING = re.compile(r"(\S+\.so[.\d]*): cannot open shared object file")


def parse_ldd(output: str) -> list[str]:
    """Library names `ldd` reported as "not found", in order, without repeats."""
    return list(dict.fromkeys(_LDD_MISSING.findall(output)))


def parse_dlopen_error(message: str) -> list[str]:
    """The library named by a dlopen error ("libxcb-cursor.so.0: cannot open shared object file ...")."""
    return list(dict.fromkeys(_DLOPEN_MISSING.findall(message)))


def packages_for(libraries: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """(apt packages, dnf packages, libraries no package is known for), each without repeats."""
    apt: dict[str, None] = {}
    dnf: dict[str, None] = {}
    unknown: list[str] = []
    for lib in libraries:
        names = LIBRARY_PACKAGES.get(Path(lib).name)
        if names is None:
            unknown.append(lib)
            continue
        apt[names[0]] = None
        dnf[names[1]] = None
    return list(apt), list(dnf), unknown


def hint(libraries: list[str]) -> str:
    """The one line printed when the plugin cannot load."""
    apt, dnf, unknown = packages_for(libraries)
    line = (f"roofline: cannot open the window: Qt's xcb platform plugin needs {', '.join(libraries)}, "
            f"which {'is' if len(libraries) == 1 else 'are'} not installed.")
    if apt:
        line += (f" Install: sudo apt install {' '.join(apt)} (Debian/Ubuntu) "
                 f"or sudo dnf install {' '.join(dnf)} (Fedora)")
        line += f"; and the package providing {', '.join(unknown)}." if unknown else "."
    else:
        line += " Install the packages that provide them with your distribution's package manager."
    return line + " Or run without a window: `roofline --help`."


def xcb_likely(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Will Qt try the xcb plugin? Only on Linux/BSD, with an X display, unless another platform is asked for
    (a Wayland session with no explicit choice may use Wayland: not probed, to never refuse a working start)."""
    if not platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return False
    qpa = env.get("QT_QPA_PLATFORM", "").split(";")[0].split(":")[0].strip().lower()
    if qpa == "xcb":
        return True
    return qpa == "" and bool(env.get("DISPLAY")) and not env.get("WAYLAND_DISPLAY")


def plugin_path() -> Path | None:
    """Qt's libqxcb.so as this Python (or frozen app) would load it."""
    from PySide6.QtCore import QLibraryInfo  # QtCore only: no platform plugin is loaded by this

    folders = [Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath))]
    folders += [Path(p) for p in os.environ.get("QT_PLUGIN_PATH", "").split(os.pathsep) if p]
    bundle = getattr(sys, "_MEIPASS", None)  # a PyInstaller build keeps Qt's plugins inside the bundle
    if bundle:
        folders += [Path(bundle) / "PySide6" / "Qt" / "plugins", Path(bundle) / "PySide6" / "plugins"]
    for folder in folders:
        candidate = folder / "platforms" / "libqxcb.so"
        if candidate.is_file():
            return candidate
    return None


Runner = Callable[[list[str]], "subprocess.CompletedProcess[str]"]


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=False)


def missing_libraries(plugin: Path, run: Runner = _run, ldd: str | None = None) -> list[str] | None:
    """Libraries the plugin cannot find ([] when none), or None when this could not be found out."""
    ldd = ldd if ldd is not None else shutil.which("ldd")
    try:
        if ldd:
            result = run([ldd, str(plugin)])
            return parse_ldd(result.stdout + result.stderr)
        if getattr(sys, "frozen", False):
            return None  # no interpreter to start a probe child with
        code = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"
        result = run([sys.executable, "-c", code, str(plugin)])
        return [] if result.returncode == 0 else parse_dlopen_error(result.stderr) or None
    except (OSError, subprocess.SubprocessError):
        return None


def check(env: Mapping[str, str] | None = None, plugin: Path | None = None, run: Runner = _run,
          ldd: str | None = None) -> str | None:
    """The install hint when Qt's xcb plugin will be needed and cannot load; else None."""
    env = os.environ if env is None else env
    if env.get("ROOFLINE_SKIP_XCB_CHECK") == "1" or not xcb_likely(env):
        return None
    try:
        plugin = plugin or plugin_path()
    except ImportError:
        return None
    if plugin is None:
        return None
    missing = missing_libraries(plugin, run, ldd)
    return hint(missing) if missing else None
