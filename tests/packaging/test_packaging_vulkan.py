"""The bundle's Vulkan backend: a loadable ggml module beside the CPU variants, used where a Vulkan driver is and
skipped where none is. The judging of scripts/portable_check's three Vulkan cases (no loader, no driver, driver)
on made-up engine answers; the spec leaving the Vulkan loader to the system; and, where they are built, the
portable wheel and the frozen bundle themselves (they skip otherwise, saying so).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))

import check_portable_wheel  # noqa: E402
import portable_check  # noqa: E402
import spec_helpers  # noqa: E402

FROZEN = ROOT / "dist" / "roofline" / "roofline"
LLVMPIPE = {"name": "Vulkan0", "description": "llvmpipe (LLVM 15.0.6, 256 bits)", "type": "gpu", "backend": "Vulkan"}
CPU_DEV = {"name": "CPU", "description": "AMD EPYC", "type": "cpu", "backend": "CPU"}


def _session(backends: list[str], devices: list[dict[str, str]], placed: int, buffers: dict[str, float],
             tokens: int = 4) -> portable_check.Session:
    """An engine's answers: Ready with its backends and devices, Loaded with llama.cpp's placement and buffers."""
    return portable_check.Session(
        ready={"type": "ready", "backends": backends, "devices": devices, "cpu_backend": "zen4 (libggml-cpu-zen4.so)"},
        loaded={"type": "loaded", "gpu_layers_placed": placed, "gpu_layers_total": 19,
                "buffers_mib": {f"model:{k}": v for k, v in buffers.items()} | {"KV:CPU": 4.5}},
        done={"type": "done", "text": " the capital", "metrics": {"generated_tokens": tokens}},
        load_s=1.0, gen_s=2.0, code=0)


ON_VULKAN = _session(["CPU", "Vulkan"], [LLVMPIPE, CPU_DEV], 19, {"Vulkan0": 160.25, "CPU_Mapped": 62.3})
ON_CPU = _session(["CPU"], [CPU_DEV], 0, {"CPU_Mapped": 222.5})


def test_with_the_driver_every_layer_and_the_weights_must_be_on_the_vulkan_device() -> None:
    good = portable_check.judge_vulkan("Vulkan driver", ON_VULKAN, 4)
    assert good.ok, good.line()
    assert good.line().startswith("Vulkan driver    ok   19/19 layers on Vulkan0")
    assert "Vulkan0 = llvmpipe (LLVM 15.0.6, 256 bits)" in good.line()
    assert "Vulkan0 model buffer 160.25 MiB" in good.line()
    partial = _session(["CPU", "Vulkan"], [LLVMPIPE, CPU_DEV], 12, {"Vulkan0": 100.0, "CPU_Mapped": 122.5})
    assert "only 12 of 19 layers" in portable_check.judge_vulkan("Vulkan driver", partial, 4).problem
    # A Vulkan build that ran on the CPU (no device visible, or a CPU-only bundle) must not pass as offloaded.
    for quiet in (_session(["CPU", "Vulkan"], [CPU_DEV], 0, {"CPU_Mapped": 222.5}), ON_CPU):
        r = portable_check.judge_vulkan("Vulkan driver", quiet, 4)
        assert not r.ok and "no model buffer on a Vulkan device" in r.problem, r.line()
    assert "did not load" in portable_check.judge_vulkan("Vulkan driver", ON_CPU, 4).problem
    short = _session(["CPU", "Vulkan"], [LLVMPIPE, CPU_DEV], 19, {"Vulkan0": 160.25}, tokens=1)
    assert "asked for 4 tokens, got 1" in portable_check.judge_vulkan("Vulkan driver", short, 4).problem


@pytest.mark.parametrize("case", ["no Vulkan loader", "no Vulkan driver"])
def test_without_vulkan_the_model_must_run_on_the_cpu_and_the_case_must_really_hide_vulkan(case: str) -> None:
    r = portable_check.judge_vulkan(case, ON_CPU, 4)
    assert r.ok, r.line()
    assert "all 19 layers on the CPU" in r.line() and "CPU variant zen4" in r.line()
    # The loader or the driver was not hidden: the case would test nothing, and says so.
    leaked = portable_check.judge_vulkan(case, ON_VULKAN, 4)
    assert not leaked.ok and "layers went to a GPU" in leaked.problem
    assert "driver was not hidden" in leaked.problem
    if case == "no Vulkan loader":
        assert "libvulkan was not hidden" in leaked.problem
    # The engine died (say the Vulkan module took the process down with it): a failure, with the exit.
    died = portable_check.Session(ready=ON_CPU.ready, code=-11, problem="the engine's output ended",
                                  stderr="ggml_vulkan: something\nSegmentation fault\n")
    assert "killed by SIGSEGV (the engine's output ended)" in portable_check.judge_vulkan(case, died, 4).problem


def test_the_cases_differ_only_in_the_loader_or_the_driver_taken_away(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "VK_ADD_DRIVER_FILES": "/x.json", "LD_LIBRARY_PATH": "/opt/lib"}
    driver = portable_check.vulkan_env("Vulkan driver", base, tmp_path)
    assert driver == {**base, "GGML_VK_VISIBLE_DEVICES": "0"}  # llvmpipe is device 0 where it is the only one
    assert portable_check.vulkan_env("Vulkan driver", {**base, "GGML_VK_VISIBLE_DEVICES": "1"},
                                     tmp_path)["GGML_VK_VISIBLE_DEVICES"] == "1"
    no_driver = portable_check.vulkan_env("no Vulkan driver", base, tmp_path)
    empty = Path(no_driver["VK_DRIVER_FILES"])
    assert no_driver["VK_ICD_FILENAMES"] == str(empty) and empty.is_dir() and not any(empty.iterdir())
    assert "VK_ADD_DRIVER_FILES" not in no_driver
    no_loader = portable_check.vulkan_env("no Vulkan loader", base, tmp_path)
    first, rest = no_loader["LD_LIBRARY_PATH"].split(os.pathsep, 1)
    assert rest == "/opt/lib" and (Path(first) / "libvulkan.so.1").read_bytes() == b""
    assert no_loader["GGML_VK_VISIBLE_DEVICES"] == no_driver["GGML_VK_VISIBLE_DEVICES"] == "0"


def test_the_stand_in_makes_libvulkan_unloadable(tmp_path: Path) -> None:
    """The dynamic loader rejects the empty stand-in instead of searching on: dlopen fails as without libvulkan."""
    env = portable_check.vulkan_env("no Vulkan loader", {"PATH": os.environ.get("PATH", "")}, tmp_path)
    probe = ("import ctypes\ntry:\n    ctypes.CDLL('libvulkan.so.1')\n    print('loaded')\n"
             "except OSError as e:\n    print('refused', e)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.startswith("refused") and "libvulkan.so.1" in out.stdout, out.stdout + out.stderr


def test_the_bundle_leaves_the_vulkan_loader_to_the_system() -> None:
    toc = [("libvulkan.so.1", "/usr/lib/x86_64-linux-gnu/libvulkan.so.1", "BINARY"),
           ("llama_cpp/lib/libggml-vulkan.so", "/v/llama_cpp/lib/libggml-vulkan.so", "BINARY"),
           ("libQt6Gui.so.6", "/v/PySide6/Qt/lib/libQt6Gui.so.6", "BINARY"),
           ("libvulkan_lvp.so", "/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so", "BINARY")]
    assert [b[0] for b in spec_helpers.bundled_binaries(toc)] == [
        "llama_cpp/lib/libggml-vulkan.so", "libQt6Gui.so.6", "libvulkan_lvp.so"]


# ------------------------------------------------------------------------------------------------ built artifacts


def _vulkan_tools_here() -> bool:
    """The condition under which scripts/_portable_wheel.sh builds the Vulkan module (ROOFLINE_VULKAN aside)."""
    if os.environ.get("ROOFLINE_VULKAN") == "0":
        return False
    headers = Path("/usr/include/vulkan/vulkan.h").exists() or subprocess.run(
        ["pkg-config", "--exists", "vulkan"], capture_output=True, check=False).returncode == 0
    return os.environ.get("ROOFLINE_VULKAN") == "1" or (shutil.which("glslc") is not None and headers)


def _cached_wheel() -> Path:
    got = subprocess.run(["bash", str(ROOT / "scripts" / "_portable_wheel.sh"), "--cached"], capture_output=True,
                         text=True, check=False)
    if got.returncode == 3:
        pytest.skip("the portable llama-cpp-python wheel is not built: run scripts/package")
    assert got.returncode == 0, got.stderr  # built, but the wheel check refuses it
    return Path(got.stdout.strip().splitlines()[-1])


def test_the_portable_wheel_carries_the_vulkan_module_where_the_tools_are() -> None:
    if not _vulkan_tools_here():
        pytest.skip("no Vulkan build tools (glslc, Vulkan headers): the portable wheel is CPU-only here")
    names = zipfile.ZipFile(_cached_wheel()).namelist()
    assert check_portable_wheel.problems(names, ("vulkan",)) == []
    assert "vulkan" in check_portable_wheel.gpu_modules_in(names)


def _frozen_lib() -> Path:
    if not FROZEN.exists():
        pytest.skip("no frozen build: run scripts/package")
    return FROZEN.parent / "_internal" / "llama_cpp" / "lib"


def test_the_frozen_bundle_carries_the_vulkan_module_but_not_the_loader() -> None:
    lib = _frozen_lib()
    if not _vulkan_tools_here():
        pytest.skip("no Vulkan build tools here: the bundle is built CPU-only")
    assert (lib / "libggml-vulkan.so").is_file()
    assert sorted(p.name for p in lib.glob("libggml-cpu-*.so"))  # beside the CPU variants
    loaders = [str(p) for p in FROZEN.parent.rglob("libvulkan.so*")]
    assert loaders == [], "the bundle carries a Vulkan loader, which would shadow the system's"


@pytest.mark.model
@pytest.mark.timeout(1500)  # three loads natively, one of them on llvmpipe, which compiles its pipelines on the CPU
def test_the_frozen_bundle_runs_without_vulkan_and_offloads_with_it() -> None:
    lib = _frozen_lib()
    if not (lib / "libggml-vulkan.so").is_file():
        pytest.skip("the bundle has no Vulkan module (built without the Vulkan tools)")
    drivers = [p for d in ("/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d") for p in Path(d).glob("*.json")]
    if not drivers:
        pytest.skip("no Vulkan driver here (Debian/Ubuntu: apt-get install mesa-vulkan-drivers for llvmpipe)")
    out = subprocess.run([sys.executable, str(ROOT / "packaging" / "portable_check.py"), "--cpus", "none",
                          "--vulkan", "on", "--tokens", "2", "--timeout", "450"], capture_output=True, text=True,
                         timeout=1450, check=False)
    lines = {case: next((ln for ln in out.stdout.splitlines() if ln.startswith(case + " ")), "")
             for case in portable_check.VULKAN_CASES}
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    cpu_only = r" ok   all \d+ layers on the CPU  CPU variant \w+; ggml backends CPU  "
    assert re.search(cpu_only, lines["no Vulkan loader"]), lines["no Vulkan loader"]
    assert re.search(r" ok   all \d+ layers on the CPU ", lines["no Vulkan driver"]), lines["no Vulkan driver"]
    assert re.search(r" ok   (\d+)/\1 layers on Vulkan0 ", lines["Vulkan driver"]), lines["Vulkan driver"]
