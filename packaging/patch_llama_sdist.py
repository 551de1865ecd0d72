"""Patch an unpacked llama-cpp-python source tree before it is built (the native build and the portable bundle).

Exact, checked edits; the first two are exposed as CMake flags so the build's cache key records them:
- `GGML_CPU_NO_AMX=ON` drops the sapphirerapids CPU variant. It is the only variant using AMX tile instructions,
  and virtual machines that advertise AMX but fault on it would pick it (highest score) and die with SIGILL.
- `LLAMA_BUILD_COMMON` becomes an ordinary option instead of being forced ON: the Python package never ships
  llama.cpp's `common` library, and it is the slowest part of the build.
- The Vulkan backend's instance creation passes validation-layer settings (VK_EXT_layer_settings, Vulkan headers
  1.3.261 and newer); older headers (Debian 12 ships 1.3.239) lack those types and the file does not compile. The
  settings only matter with the validation layer, so older headers get the same instance without them.

Usage: python patch_llama_sdist.py SOURCE_DIR. Exits non-zero, naming the file, if an expected text is missing
(a new llama-cpp-python version needs this patch reviewed, not silently skipped).
"""

from __future__ import annotations

import sys
from pathlib import Path

VULKAN_SOURCE = "vendor/llama.cpp/ggml/src/ggml-vulkan/ggml-vulkan.cpp"
EDITS: list[tuple[str, str, str]] = [
    (
        "vendor/llama.cpp/ggml/src/CMakeLists.txt",
        "            ggml_add_cpu_backend_variant(sapphirerapids ",
        "            if (NOT GGML_CPU_NO_AMX)\n"
        "            ggml_add_cpu_backend_variant(sapphirerapids ",
    ),
    (
        "vendor/llama.cpp/ggml/src/CMakeLists.txt",
        "AVX512_BF16 AMX_TILE AMX_INT8)\n",
        "AVX512_BF16 AMX_TILE AMX_INT8)\n            endif()\n",
    ),
    (
        "CMakeLists.txt",
        '    set(LLAMA_BUILD_COMMON ON CACHE BOOL "Build llama.cpp common library" FORCE)\n',
        '    option(LLAMA_BUILD_COMMON "Build llama.cpp common library" ON)\n',
    ),
    (
        VULKAN_SOURCE,
        "    VkBool32 enable_best_practice = layer_settings;\n",
        "#if VK_HEADER_VERSION >= 261\n    VkBool32 enable_best_practice = layer_settings;\n",
    ),
    (
        VULKAN_SOURCE,
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, "
        "&layer_setting_info);\n",
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions, "
        "&layer_setting_info);\n#else\n"
        "    vk::InstanceCreateInfo instance_create_info(vk::InstanceCreateFlags{}, &app_info, layers, extensions);\n"
        "#endif\n",
    ),
]
MARKER = ".roofline-patched"


def patch(source: Path) -> None:
    """Apply every edit once; a second run on the same tree is a no-op."""
    if (source / MARKER).exists():
        return
    for rel, old, new in EDITS:
        path = source / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(f"patch_llama_sdist: expected text not found exactly once in {rel}: {old.strip()!r}")
        path.write_text(text.replace(old, new))
    (source / MARKER).write_text("patched\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: patch_llama_sdist.py SOURCE_DIR")
    patch(Path(sys.argv[1]))
