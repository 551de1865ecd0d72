#!/usr/bin/env bash
# Builds llama.cpp's own llama-bench and llama-server, once, from the llama.cpp that llama-cpp-python vendors,
# with the same compiler flags scripts/_setup.sh gives the wheel: so a side-by-side benchmark (or a server)
# runs exactly the code the app runs. Cached by flag hash like the wheel; prints the directory holding both.
#   usage: scripts/_llama_tools.sh            -> prints e.g. ~/.cache/roofline-build/llama-tools-<hash>/bin
# Environment: CMAKE_ARGS (extra flags, as for _setup.sh), ROOFLINE_BUILD_JOBS (parallel jobs, default 2),
# ROOFLINE_PYTHON (the python whose pip downloads the source; default python3.11).
set -euo pipefail
LLAMA_VERSION="0.3.36"
PY="${ROOFLINE_PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3

# shellcheck source=scripts/_llama_flags.sh
source "$(dirname "${BASH_SOURCE[0]}")/_llama_flags.sh"

# The source is patched as the wheel's is (packaging/patch_llama_sdist.py: old Vulkan headers, AMX): unpatched,
# ggml-vulkan.cpp does not compile against Debian 12's Vulkan 1.3.239 headers. The patch is part of the cache key.
PATCH="$(dirname "${BASH_SOURCE[0]}")/../packaging/patch_llama_sdist.py"
build_id="$(printf 'tools|%s|%s|%s|%s' "$LLAMA_VERSION" "$cmake_args" "$(uname -m)" "$(sha256sum < "$PATCH")" \
  | sha256sum | cut -c1-16)"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/roofline-build/llama-tools-$build_id"
if [ -x "$CACHE/bin/llama-bench" ] && [ -x "$CACHE/bin/llama-server" ]; then
  echo "$CACHE/bin"
  exit 0
fi

# One build at a time (two users of the tools may ask at once): the second waits, then finds the cache.
mkdir -p "$(dirname "$CACHE")"
exec 9>"$CACHE.lock"
flock 9
if [ -x "$CACHE/bin/llama-bench" ] && [ -x "$CACHE/bin/llama-server" ]; then
  echo "$CACHE/bin"
  exit 0
fi
WORK="$CACHE.tmp"
rm -rf "$WORK"
mkdir -p "$WORK"
{
  echo "roofline: building llama-bench and llama-server from llama-cpp-python $LLAMA_VERSION's llama.cpp (first time only)"
  echo "roofline: CMAKE_ARGS=$cmake_args"
} >&2
"$PY" -m pip download -q --no-deps --no-binary :all: -d "$WORK/sdist" "llama-cpp-python==$LLAMA_VERSION" >&2
tar -xzf "$WORK"/sdist/llama_cpp_python-*.tar.gz -C "$WORK"
"$PY" "$PATCH" "$(echo "$WORK"/llama_cpp_python-*)" >&2
SRC="$(echo "$WORK"/llama_cpp_python-*/vendor/llama.cpp)"

# Shared libraries and a Release build, as the wheel has them (its CMakeLists forces BUILD_SHARED_LIBS and
# turns curl off); $ORIGIN rpath so the copied bin/ directory is self-contained. The server's web UI is
# neither built nor downloaded: nothing here may reach the network.
eval "extra=($cmake_args)"
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON -DCMAKE_INSTALL_RPATH='$ORIGIN' \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_COMMON=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF "${extra[@]}" >"$WORK/configure.log" 2>&1 \
  || { tail -30 "$WORK/configure.log" >&2; echo "roofline: configuring llama.cpp failed" >&2; exit 1; }
cmake --build "$WORK/build" --target llama-bench llama-server -j "${ROOFLINE_BUILD_JOBS:-2}" \
  >"$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log" >&2; echo "roofline: building llama.cpp's tools failed" >&2; exit 1; }

mkdir -p "$WORK/out/bin"
cp -a "$WORK"/build/bin/llama-bench "$WORK"/build/bin/llama-server "$WORK"/build/bin/*.so* "$WORK/out/bin/"
printf '%s\n' "llama-cpp-python $LLAMA_VERSION" "CMAKE_ARGS=$cmake_args" > "$WORK/out/build-info.txt"
rm -rf "$CACHE"
mv "$WORK/out" "$CACHE"
rm -rf "$WORK"
echo "$CACHE/bin"
