"""The portable llama.cpp of the desktop bundle: the build's patch and wheel check, the engine finding and naming its
CPU variant module, no AMX code in any variant, and the qemu harness of scripts/portable_check.

Tests that need the portable wheel (built once by scripts/package, cached) skip when it is not built; they run
the engine of this checkout against the wheel's libraries through llama_cpp's LLAMA_CPP_LIB_PATH override, so no
second virtual environment is needed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))

import check_portable_wheel  # noqa: E402
import patch_llama_sdist  # noqa: E402
import portable_check  # noqa: E402

GOOD = [f"llama_cpp/lib/libggml-cpu-{v}.so" for v in (
    "x64", "sse42", "sandybridge", "ivybridge", "piledriver", "haswell", "skylakex", "cannonlake", "cascadelake",
    "icelake", "cooperlake", "zen4", "alderlake")] + ["llama_cpp/lib/libllama.so", "llama_cpp/lib/libggml.so"]


# ------------------------------------------------------------------------------------------------ wheel check


def test_the_wheel_check_accepts_the_portable_set() -> None:
    assert check_portable_wheel.problems(GOOD) == []


@pytest.mark.parametrize("change, complaint", [
    (lambda n: n + ["llama_cpp/lib/libggml-cpu-sapphirerapids.so"], "AMX variant"),
    (lambda n: [x for x in n if "haswell" not in x], "missing CPU variant module libggml-cpu-haswell.so"),
    (lambda n: n + ["llama_cpp/lib/libggml-cpu.so"], "one-machine build"),
    (lambda n: [x for x in n if "libggml-cpu-" not in x], "missing CPU variant module libggml-cpu-sse42.so"),
])
def test_the_wheel_check_names_what_is_wrong(change, complaint) -> None:  # type: ignore[no-untyped-def]
    assert any(complaint in p for p in check_portable_wheel.problems(change(GOOD)))


def test_the_wheel_check_requires_the_gpu_backend_module_asked_for(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with_vulkan = GOOD + ["llama_cpp/lib/libggml-vulkan.so"]
    assert check_portable_wheel.gpu_modules_in(with_vulkan) == {"vulkan"}
    assert check_portable_wheel.problems(with_vulkan, ("vulkan",)) == []
    assert check_portable_wheel.problems(GOOD, ("vulkan",)) == [
        "no loadable vulkan backend module llama_cpp/lib/libggml-vulkan.so"]
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name in GOOD:
            z.writestr(name, b"")
    assert check_portable_wheel.main([str(wheel)]) == 0  # not asked for: a CPU-only bundle is still portable
    assert check_portable_wheel.main([str(wheel), "--require", "vulkan"]) == 1
    assert "libggml-vulkan.so" in capsys.readouterr().err


def test_the_wheel_check_reads_a_wheel_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.whl", tmp_path / "bad.whl"
    for path, names in ((good, GOOD), (bad, GOOD + ["llama_cpp/lib/libggml-cpu-sapphirerapids.so"])):
        with zipfile.ZipFile(path, "w") as z:
            for name in names:
                z.writestr(name, b"")
    assert check_portable_wheel.main([str(good)]) == 0
    assert check_portable_wheel.main([str(bad)]) == 1
    assert "sapphirerapids" in capsys.readouterr().err
    (tmp_path / "junk.whl").write_bytes(b"not a zip")
    assert check_portable_wheel.main([str(tmp_path / "junk.whl")]) == 1


# ------------------------------------------------------------------------------------------------ source patch

_GGML_CMAKE = """        ggml_add_cpu_backend_variant(alderlake          SSE42 AVX F16C FMA AVX2 BMI2 AVX_VNNI)
        if (NOT MSVC)
            # MSVC doesn't support AMX
            ggml_add_cpu_backend_variant(sapphirerapids SSE42 AVX F16C FMA AVX2 BMI2 AVX512 AVX512_VBMI AVX512_VNNI AVX512_BF16 AMX_TILE AMX_INT8)
        endif()
"""  # noqa: E501
_TOP_CMAKE = """    # Enable building of the common library
    set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)
"""
# The Vulkan backend's instance creation as llama-cpp-python 0.3.36 vendors it (the lines the patch guards).
_VULKAN_INSTANCE = """    VkBool32 enable_best_practice = layer_settings;
    std::vector<vk::LayerSettingEXT> settings = {
        {"VK_LAYER_KHRONOS_validation", "validate_best_practices", vk::LayerSettingTypeEXT::eBool32, 1,
         &enable_best_practice},
    };
    vk::LayerSettingsCreateInfoEXT layer_setting_info(settings);
    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, &layer_setting_info);
"""  # noqa: E501


def _fake_sdist(root: Path) -> Path:
    (root / "vendor/llama.cpp/ggml/src").mkdir(parents=True)
    (root / "vendor/llama.cpp/ggml/src/CMakeLists.txt").write_text(_GGML_CMAKE)
    (root / "CMakeLists.txt").write_text(_TOP_CMAKE)
    (root / "vendor/llama.cpp/ggml/src/ggml-vulkan").mkdir()
    (root / patch_llama_sdist.VULKAN_SOURCE).write_text(_VULKAN_INSTANCE)
    return root


def test_the_patch_puts_the_amx_variant_behind_a_flag(tmp_path: Path) -> None:
    src = _fake_sdist(tmp_path / "src")
    patch_llama_sdist.patch(src)
    ggml = (src / "vendor/llama.cpp/ggml/src/CMakeLists.txt").read_text()
    sapphire = next(line for line in _GGML_CMAKE.splitlines() if "sapphirerapids" in line)
    assert ggml == _GGML_CMAKE.replace(sapphire + "\n", "            if (NOT GGML_CPU_NO_AMX)\n"
                                       + sapphire + "\n            endif()\n")
    assert 'option(LLAMA_BUILD_COMMON "Build llama.cpp common library" ON)' in (src / "CMakeLists.txt").read_text()
    patch_llama_sdist.patch(src)  # a second run changes nothing
    assert (src / "vendor/llama.cpp/ggml/src/CMakeLists.txt").read_text() == ggml


def test_the_patch_lets_old_vulkan_headers_build_the_instance_without_layer_settings(tmp_path: Path) -> None:
    src = _fake_sdist(tmp_path / "src")
    patch_llama_sdist.patch(src)
    lines = (src / patch_llama_sdist.VULKAN_SOURCE).read_text().splitlines()
    # Headers older than 1.3.261 (VK_EXT_layer_settings) see none of the layer-settings lines, only an instance
    # created without them; newer headers see the original lines unchanged.
    start, other, end = lines.index("#if VK_HEADER_VERSION >= 261"), lines.index("#else"), lines.index("#endif")
    assert "\n".join(lines[start + 1:other]) + "\n" == _VULKAN_INSTANCE
    assert lines[other + 1:end] == [
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);"]
    assert not any("LayerSetting" in line for line in lines[:start] + lines[other:])


def test_the_patch_refuses_a_source_it_does_not_know(tmp_path: Path) -> None:
    src = _fake_sdist(tmp_path / "src")
    (src / "vendor/llama.cpp/ggml/src/CMakeLists.txt").write_text(
        _GGML_CMAKE.replace("sapphirerapids", "graniterapids"))
    with pytest.raises(SystemExit, match="expected text not found"):
        patch_llama_sdist.patch(src)


# ------------------------------------------------------------------------------------------------ harness helpers


def test_harness_reads_exits_qemu_warnings_and_execve() -> None:
    assert portable_check.describe_exit(-4) == "killed by SIGILL"
    assert portable_check.describe_exit(132) == "killed by SIGILL"  # via a shell
    assert portable_check.describe_exit(0) == "exit code 0"
    log = ("qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.07H:EBX.avx512f [bit 16]\n"
           "qemu-x86_64: warning: TCG doesn't support requested feature: CPUID.07H:EBX.avx512dq [bit 17]\n")
    assert portable_check.dropped_features(log) == ["avx512dq", "avx512f"]
    assert portable_check.dropped_features(
        "qemu-x86_64: warning: TCG doesn't support requested feature: "
        "CPUID.01H:ECX.tsc-deadline [bit 24]") == ["tsc-deadline"]
    strace = '123 openat(AT_FDCWD,"/x",O_RDONLY) = 3\n123 execve("/bin/sh",{"sh",NULL}) = 0\n'
    assert portable_check.count_execve(strace) == 1
    assert portable_check.count_execve('123 read(3,0x1,4) = 4\n') == 0


def test_harness_line_flags_an_unexpected_variant() -> None:
    r = portable_check.CpuResult("Skylake-Server", ok=True, variant="haswell (libggml-cpu-haswell.so)", tokens=4,
                                 text=" Paris", dropped=["pcid", "avx512f"])
    assert "expected skylakex; qemu cannot emulate avx512f" in r.line()
    fine = portable_check.CpuResult("Haswell", ok=True, variant="haswell (libggml-cpu-haswell.so)", tokens=4)
    assert "expected" not in fine.line() and fine.line().startswith("Haswell         ok")
    dead = portable_check.CpuResult("Haswell", exit="killed by SIGILL", problem="killed by SIGILL (EOF)")
    assert "FAIL" in dead.line() and "SIGILL" in dead.line()


# ------------------------------------------------------------------------------------------------ the engine


def test_variant_names_from_library_files() -> None:
    from app.engine.llama.backends import variant_of

    assert variant_of("/x/llama_cpp/lib/libggml-cpu-haswell.so") == "haswell"
    assert variant_of("libggml-cpu-armv8.2_1.so") == "armv8.2_1"
    assert variant_of("ggml-cpu-skylakex.dll") == "skylakex"
    assert variant_of("/x/libggml-cpu.so") == "built-in"  # a native build: the CPU code is one library
    assert variant_of("/x/libggml-cpu.so.0") == "built-in"


def _worker(env_extra: dict[str, str], model: Path | None, timeout: float = 240) -> list[dict]:  # type: ignore[type-arg]
    """Run the engine worker of this checkout; with a model, load it, then generate 3 tokens. Commands go one at a
    time (a shutdown queued behind a load would cancel the load, as the app's cancel button does)."""
    import os
    import time

    proc = subprocess.Popen([sys.executable, "-u", "-m", "app.engine.llama.worker"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **env_extra})
    assert proc.stdin is not None and proc.stdout is not None
    events: list[dict] = []  # type: ignore[type-arg]
    deadline = time.monotonic() + timeout

    def until(kind: str) -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("{"):
                events.append(json.loads(line))
                if events[-1]["type"] in (kind, "error") or time.monotonic() > deadline:
                    return

    def send(cmd: dict) -> None:  # type: ignore[type-arg]
        proc.stdin.write(json.dumps(cmd) + "\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    try:
        until("ready")
        if model is not None:
            send({"type": "load", "config": {"model_path": str(model), "n_ctx": 256, "n_threads": 2}})
            until("loaded")
            send({"type": "generate", "request_id": "p", "prompt": "The capital of France is",
                  "sampling": {"temperature": 0.0, "max_tokens": 3, "ignore_eos": True}})
            until("done")
        send({"type": "shutdown"})
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return events


def test_the_native_engine_names_its_built_in_cpu_backend() -> None:
    events = _worker({}, None)
    ready = events[0]
    assert ready["type"] == "ready"
    # The development .venv's native build: CPU code in libggml-cpu.so, chosen at compile time.
    assert ready["cpu_backend"].startswith("built-in (libggml-cpu.so")


def _portable_lib(tmp_path: Path) -> Path:
    """The cached portable wheel's llama_cpp/lib, unpacked into tmp_path (skip when it is not built)."""
    got = subprocess.run(["bash", str(ROOT / "scripts" / "_portable_wheel.sh"), "--cached"], capture_output=True,
                         text=True, check=False)
    if got.returncode == 3:
        pytest.skip("the portable llama-cpp-python wheel is not built: run scripts/package")
    assert got.returncode == 0, got.stderr  # built, but check_portable_wheel.py refuses it
    wheel = got.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path, [n for n in z.namelist() if n.startswith("llama_cpp/lib/")])
    return tmp_path / "llama_cpp" / "lib"


@pytest.mark.model
def test_the_engine_loads_the_best_portable_variant_and_generates(tmp_path: Path, default_model: Path) -> None:
    lib = _portable_lib(tmp_path)
    events = _worker({"LLAMA_CPP_LIB_PATH": str(lib)}, default_model)
    ready = events[0]
    variant = ready["cpu_backend"].split()[0]
    assert variant in check_portable_wheel.variants_in([f"llama_cpp/lib/libggml-cpu-{variant}.so"])
    assert (lib / f"libggml-cpu-{variant}.so").is_file(), ready["cpu_backend"]
    assert variant not in ("x64", "sse42")  # this development machine has AVX2 at least: the dispatch scored
    done = [e for e in events if e["type"] == "done"]
    assert done and done[0]["metrics"]["generated_tokens"] == 3, events[-3:]


def test_no_variant_module_contains_amx_instructions(tmp_path: Path) -> None:
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump (binutils) is not installed")
    lib = _portable_lib(tmp_path)
    modules = sorted(lib.glob("libggml-cpu-*.so"))
    assert len(modules) >= 8
    amx = ("ldtilecfg", "tileloadd", "tdpbssd", "tdpbusd", "tdpbf16ps", "tilezero", "tilestored", "tilerelease")
    for module in modules:
        text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(module)], capture_output=True, text=True,
                              timeout=300, check=False).stdout
        assert len(text) > 10_000, module  # really disassembled
        found = [m for m in amx if f"\t{m} " in text or f"\t{m}\n" in text]
        assert not found, f"{module.name} contains AMX instructions {found}"


# ------------------------------------------------------------------------------------------------ reporting it


def test_hw_names_the_cpu_variant_the_engine_uses(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from app.cli import main
    from app.core.predict import bandwidth

    monkeypatch.setattr(bandwidth, "machine_busy", lambda: False)
    assert main(["hw", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["llama_cpp"]["cpu_backend"].startswith("built-in (libggml-cpu.so")  # the native .venv
    assert main(["hw", "--no-engine"]) == 0
    assert "llama.cpp CPU" not in capsys.readouterr().out


def test_hw_text_line_for_the_variant_and_for_an_engine_that_did_not_start() -> None:
    from app.commands.hw import describe
    from app.core.predict.bandwidth import BandwidthResult
    from app.core.predict.hardware import probe_hardware

    hw = probe_hardware(gpu_offload=False)
    bw = BandwidthResult(read_gbs=10.0, copy_gbs=8.0, threads=2, buffer_bytes=1, runs=1, seconds=0.1,
                         measured_at="now", cached=True)
    lines = dict(describe(hw, bw, {"version": "0.3.36", "cpu_backend": "haswell (libggml-cpu-haswell.so)",
                                   "gpu_offload": False}))
    assert lines["llama.cpp CPU"] == "haswell (libggml-cpu-haswell.so) (llama-cpp-python 0.3.36)"
    lines = dict(describe(hw, bw, {"error": "the engine process was stopped by SIGILL"}))
    assert lines["llama.cpp CPU"].startswith("unknown: the engine did not start (the engine process was stopped")
    assert "llama.cpp CPU" not in dict(describe(hw, bw))


# ------------------------------------------------------------------------------------------------ under emulation

FROZEN = ROOT / "dist" / "roofline" / "roofline"


def test_the_frozen_launcher_is_kept_in_the_emulated_process(tmp_path: Path) -> None:
    app = tmp_path / "roofline"
    app.write_text("")
    env = portable_check.frozen_single_process_env(app)
    # What PyInstaller's one-folder launcher finds after its own re-exec: the same archive, level -1.
    assert env["_PYI_ARCHIVE_FILE"] == str(app.resolve()) and env["_PYI_PARENT_PROCESS_LEVEL"] == "-1"
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(tmp_path.resolve() / "_internal")


@pytest.mark.model
@pytest.mark.timeout(900)  # emulated, with every syscall logged: minutes on a busy 2-core machine
def test_the_frozen_bundle_runs_on_an_sse42_cpu_under_qemu() -> None:
    """The slowest CPU the bundle promises, emulated; --strace fails the run on any execve (an escape)."""
    if not FROZEN.exists():
        pytest.skip("no frozen build: run scripts/package")
    if shutil.which("qemu-x86_64") is None:
        pytest.skip("qemu-user is not installed (apt-get install qemu-user)")
    out = subprocess.run([sys.executable, str(ROOT / "packaging" / "portable_check.py"), "--cpus", "Nehalem",
                          "--tokens", "2", "--strace", "--timeout", "800"], capture_output=True, text=True,
                         timeout=850, check=False)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("Nehalem")), out.stdout + out.stderr)
    assert out.returncode == 0, line
    assert "variant sse42 (libggml-cpu-sse42.so)" in line and "execve under qemu: 0" in line, line
