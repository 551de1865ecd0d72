# Sourced by scripts/_setup.sh (the wheel) and scripts/_llama_tools.sh (llama-bench, llama-server): the one
# place that decides llama.cpp's CMake flags for this machine, so the app and the side-by-side tools run the
# same code. Sets `cmake_args` from CMAKE_ARGS plus: AMX off on x86-64 (AMX tile instructions crash with
# SIGILL on these virtual machines; only server Xeons have AMX anyway), Metal on macOS, CUDA where usable, else
# Vulkan where its build tools are (AMD, Intel and NVIDIA GPUs alike). ROOFLINE_CUDA / ROOFLINE_VULKAN = 1 or 0
# force a backend on or off. A Vulkan build on a machine without a GPU behaves as a CPU build: llama.cpp ignores
# CPU-type Vulkan devices (Mesa's llvmpipe) unless GGML_VK_VISIBLE_DEVICES names them.
cmake_args="${CMAKE_ARGS:-}"
case "$(uname -m)" in
  x86_64|amd64)
    nf="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
    cmake_args="$cmake_args -DCMAKE_C_FLAGS='$nf' -DCMAKE_CXX_FLAGS='$nf'";;
esac
if [ "$(uname -s)" = "Darwin" ]; then
  cmake_args="$cmake_args -DGGML_METAL=on"
elif command -v nvcc >/dev/null 2>&1 && { [ -e /dev/nvidia0 ] || [ "${ROOFLINE_CUDA:-0}" = "1" ]; }; then
  # nvcc alone is not enough: a CUDA build takes far longer and is useless without a driver and a GPU.
  cmake_args="$cmake_args -DGGML_CUDA=on"
fi
if [ "${ROOFLINE_CUDA:-}" = "0" ]; then  # an if, not `&&`: a sourced file's last status is `source`'s own
  cmake_args="${cmake_args// -DGGML_CUDA=on/}"
fi
# Vulkan beside CUDA would show one NVIDIA GPU twice (CUDA0 and Vulkan0) and split layers across the two: only
# when asked. Its tools: the glslc shader compiler and the Vulkan headers (Debian: glslc libvulkan-dev).
vulkan_tools=0
if command -v glslc >/dev/null 2>&1 && { pkg-config --exists vulkan 2>/dev/null || [ -e /usr/include/vulkan/vulkan.h ]; }; then
  vulkan_tools=1
fi
if [ "${ROOFLINE_VULKAN:-}" = "1" ] || { [ "${ROOFLINE_VULKAN:-}" != "0" ] && [ "$vulkan_tools" = "1" ] \
    && [[ "$cmake_args" != *GGML_CUDA=on* ]] && [ "$(uname -s)" != "Darwin" ]; }; then
  cmake_args="$cmake_args -DGGML_VULKAN=on"
fi
