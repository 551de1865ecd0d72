#!/usr/bin/env bash
# Build (once, cached by flags) the portable llama-cpp-python wheel used by scripts/package, and print its path.
# Portable = no -march=native: llama.cpp's runtime CPU dispatch (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS) builds one
# libggml-cpu-<variant>.so per x86-64 ISA level and picks the best one for the CPU it runs on. The AMX variant
# (sapphirerapids) is left out: see packaging/patch_llama_sdist.py. Messages go to stderr, the wheel path to stdout.
# Usage: scripts/_portable_wheel.sh [--cached] [PYTHON]   (PYTHON runs pip; default python3.11)
#   --cached: only print the wheel's path if it is already built (exit 3 if not); never build (tests use it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHED_ONLY=0
if [ "${1:-}" = "--cached" ]; then CACHED_ONLY=1; shift; fi
PY="${1:-${ROOFLINE_PYTHON:-python3.11}}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
LLAMA_VERSION="0.3.36"
PATCH="$ROOT/packaging/patch_llama_sdist.py"

# Only the libraries the Python package loads: no tests/examples/tools/server, no llava (mtmd), no common.
cmake_args="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON -DGGML_CPU_NO_AMX=ON"
cmake_args="$cmake_args -DCMAKE_INSTALL_BINDIR=llama_cpp/lib"  # the variant modules go next to libggml.so
cmake_args="$cmake_args -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF"
cmake_args="$cmake_args -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAVA_BUILD=OFF"
if [ "${ROOFLINE_CUDA:-0}" = "1" ]; then
  # A second artifact for NVIDIA users: libggml-cuda.so is one more backend module, loaded only where a driver
  # is present. Real code for Pascal..Ada/Hopper, plus compute_90 PTX that newer GPUs compile at first start.
  cmake_args="$cmake_args -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=61-real;70-real;75-real;80-real;86-real;89-real;90"
fi
# The Vulkan backend as one more loadable module (libggml-vulkan.so): loaded where a Vulkan driver is installed
# (AMD, Intel and NVIDIA GPUs), skipped by ggml where libvulkan is missing, so one bundle serves both. Built when
# the Vulkan build tools are here; ROOFLINE_VULKAN=0 leaves it out, =1 insists on it.
VULKAN=0
if [ "${ROOFLINE_VULKAN:-}" = "1" ] || { [ "${ROOFLINE_VULKAN:-}" != "0" ] && command -v glslc >/dev/null 2>&1 \
    && { pkg-config --exists vulkan 2>/dev/null || [ -e /usr/include/vulkan/vulkan.h ]; }; }; then
  VULKAN=1
  cmake_args="$cmake_args -DGGML_VULKAN=ON"
fi
case "$(uname -m)" in x86_64|amd64) ;; *)
  echo "roofline: the portable wheel is defined for x86-64 only (see docs/packaging.md for other platforms)" >&2
  exit 1;;
esac
build_id="$(printf '%s|%s|%s|%s' "$LLAMA_VERSION" "$cmake_args" "$(sha256sum < "$PATCH")" "$(uname -m)" \
  | sha256sum | cut -c1-16)"
WHEEL_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/roofline-build/llama-cpp-python-portable-$build_id"
if ! ls "$WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  if [ "$CACHED_ONLY" = "1" ]; then
    echo "roofline: the portable llama-cpp-python wheel is not built yet (scripts/package builds it)" >&2
    exit 3
  fi
  # One build at a time per flag set: a second caller waits, then finds the wheel built.
  mkdir -p "$(dirname "$WHEEL_DIR")"
  exec 9>"$WHEEL_DIR.lock"
  if ! flock -n 9; then
    echo "roofline: another build of this wheel is running; waiting for it" >&2
    flock 9
  fi
fi
if ! ls "$WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
  echo "roofline: building the portable llama-cpp-python $LLAMA_VERSION (all CPU variants$([ "$VULKAN" = 1 ] && echo ", Vulkan"); 20-60 min on 2 cores)" >&2
  echo "roofline: CMAKE_ARGS=$cmake_args" >&2
  work="$WHEEL_DIR.src"
  rm -rf "$work" "$WHEEL_DIR.tmp" && mkdir -p "$work" "$WHEEL_DIR.tmp"
  "$PY" -m pip download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$LLAMA_VERSION" >&2
  tar -xzf "$work"/llama_cpp_python-"$LLAMA_VERSION".tar.gz -C "$work"
  src="$work/llama_cpp_python-$LLAMA_VERSION"
  "$PY" "$PATCH" "$src"
  CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
    nice -n "${ROOFLINE_BUILD_NICE:-10}" "$PY" -m pip wheel -q --no-deps --no-cache-dir -w "$WHEEL_DIR.tmp" "$src" >&2
  rm -rf "$WHEEL_DIR" && mv "$WHEEL_DIR.tmp" "$WHEEL_DIR" && rm -rf "$work"
fi
wheel="$(ls "$WHEEL_DIR"/llama_cpp_python-*.whl | head -n1)"
# The wheel must carry the dispatchable variants, and no AMX one; otherwise it is not the build we asked for.
check=("$wheel")
[ "$VULKAN" = "1" ] && check+=(--require vulkan)
"$PY" "$ROOT/packaging/check_portable_wheel.py" "${check[@]}" >&2
echo "$wheel"
