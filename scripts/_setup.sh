#!/usr/bin/env bash
# Shared, idempotent set-up for scripts/run and scripts/test.
# Creates .venv, builds llama-cpp-python with the flags this machine needs (once, cached by flag hash),
# installs the app and its dependencies, and assembles the embedded default model.
# scripts/package sets ROOFLINE_VENV (another venv) and ROOFLINE_LLAMA_PORTABLE=1: llama.cpp then comes from the
# portable wheel of scripts/_portable_wheel.sh (runtime CPU dispatch) instead of this machine's native build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${ROOFLINE_PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV="${ROOFLINE_VENV:-$ROOT/.venv}"
PORTABLE="${ROOFLINE_LLAMA_PORTABLE:-0}"
LLAMA_VERSION="0.3.36"

if [ ! -x "$VENV/bin/python" ]; then
  echo "roofline: creating virtual environment in .venv"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
VPY="$VENV/bin/python"

# ---- llama-cpp-python: build with the flags we ask for, never a cached wheel built with other flags ----
NEED_VERIFY=0
if [ "$PORTABLE" = "1" ]; then
  STAMP="$VENV/.llama-build-id"
  wheel="$(bash "$ROOT/scripts/_portable_wheel.sh" "$PY")"
  build_id="portable-$(basename "$(dirname "$wheel")")"
  if [ "$(cat "$STAMP" 2>/dev/null)" != "$build_id" ]; then
    "$VPY" -m pip install -q --no-deps --force-reinstall "$wheel"
    NEED_VERIFY=1
  fi
  cmake_args=""
else
# shellcheck source=scripts/_llama_flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/_llama_flags.sh"
PATCH="$ROOT/packaging/patch_llama_sdist.py"
build_id="$(printf '%s|%s|%s|%s|%s' "$LLAMA_VERSION" "$cmake_args" "$("$VPY" -c 'import sys;print(sys.version_info[:2])')" \
  "$(uname -m)" "$(sha256sum < "$PATCH")" | sha256sum | cut -c1-16)"
WHEEL_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/roofline-build/llama-cpp-python-$build_id"
STAMP="$VENV/.llama-build-id"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$build_id" ]; then
  if ! ls "$WHEEL_DIR"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    echo "roofline: building llama-cpp-python $LLAMA_VERSION from source (first time only; takes several minutes)"
    echo "roofline: CMAKE_ARGS=$cmake_args"
    [[ "$cmake_args" == *GGML_VULKAN=on* ]] && echo "roofline: with the Vulkan backend (its shaders add a few minutes; up to 20 on a busy machine)"
    # From the source, patched (packaging/patch_llama_sdist.py says what and why), like the portable wheel.
    work="$WHEEL_DIR.src"
    rm -rf "$work" "$WHEEL_DIR.tmp" && mkdir -p "$work" "$WHEEL_DIR.tmp"
    "$VPY" -m pip download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$LLAMA_VERSION"
    tar -xzf "$work"/llama_cpp_python-"$LLAMA_VERSION".tar.gz -C "$work"
    "$VPY" "$PATCH" "$work/llama_cpp_python-$LLAMA_VERSION"
    CMAKE_ARGS="$cmake_args" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc 2>/dev/null || echo 2)" \
      "$VPY" -m pip wheel -q --no-deps --no-cache-dir -w "$WHEEL_DIR.tmp" "$work/llama_cpp_python-$LLAMA_VERSION"
    rm -rf "$WHEEL_DIR" && mv "$WHEEL_DIR.tmp" "$WHEEL_DIR" && rm -rf "$work"
  fi
  "$VPY" -m pip install -q --no-deps --force-reinstall "$WHEEL_DIR"/llama_cpp_python-*.whl
  NEED_VERIFY=1
fi
fi  # native build

# ---- the app and its dependencies (llama-cpp-python is already satisfied, so pip will not rebuild it) ----
EXTRAS="${1:-}"
want="$(cat pyproject.toml app/core/sampling/_topk.c | sha256sum | cut -c1-16)$EXTRAS"  # the C file: rebuild on change
if [ "$(cat "$VENV/.app-install-id" 2>/dev/null)" != "$want" ]; then
  echo "roofline: installing the app and its dependencies into .venv"
  if ! "$VPY" -m pip install -q -e ".${EXTRAS}" >"$VENV/.pip-install.log" 2>&1; then
    cat "$VENV/.pip-install.log" >&2
    echo "roofline: dependency installation failed (log above)" >&2
    exit 1
  fi
  echo "$want" > "$VENV/.app-install-id"
fi

# ---- prove the installed llama.cpp build is the one we asked for (needs its dependencies, installed above)
if [ "${NEED_VERIFY:-0}" = "1" ]; then
  info="$("$VPY" -c 'import llama_cpp; print(llama_cpp.llama_print_system_info().decode())')"
  if [[ "$cmake_args" == *mno-amx-tile* && "$info" == *"AMX_INT8 = 1"* ]]; then
    echo "roofline: the installed llama.cpp was built with AMX despite -mno-amx-*; refusing to use it" >&2
    exit 1
  fi
  if [[ "$cmake_args" == *GGML_CUDA=on* ]] && ! "$VPY" -c 'import llama_cpp,sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)'; then
    echo "roofline: asked for a CUDA build of llama.cpp but the installed one cannot offload" >&2
    exit 1
  fi
  # Vulkan: the backend must be registered; whether it offloads depends on a device being visible (a machine
  # without a GPU has none, and llvmpipe only counts when GGML_VK_VISIBLE_DEVICES names it).
  if [[ "$cmake_args" == *GGML_VULKAN=on* ]] && ! "$VPY" -c 'from app.engine.llama.backends import load_backends
from app.engine.llama.devices import list_backends
load_backends(); raise SystemExit(0 if "Vulkan" in list_backends() else 1)' 2>/dev/null; then
    echo "roofline: asked for a Vulkan build of llama.cpp but the installed one has no Vulkan backend" >&2
    exit 1
  fi
  if [ "$PORTABLE" = "1" ]; then
    # The CPU code must come from a variant module that ggml chose at run time, found in llama_cpp/lib/.
    if ! chosen="$("$VPY" -c 'from app.engine.llama.backends import cpu_backend, load_backends
load_backends(); b = cpu_backend(); print(b.describe())
raise SystemExit(b.variant in ("built-in", "none loaded", "unknown"))')"; then
      echo "roofline: the portable llama.cpp did not load a CPU variant module (got: ${chosen:-nothing})" >&2
      exit 1
    fi
    echo "roofline: portable llama.cpp installed; on this CPU it uses $chosen"
  fi
  echo "$build_id" > "$STAMP"
fi

# ---- the embedded default model, assembled once into the app data directory ----
"$VPY" -m app.cli default-model --quiet
