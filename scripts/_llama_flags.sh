# Sourced by scripts/_setup.sh (the wheel) and scripts/_llama_tools.sh (llama-bench, llama-server): the one
# place that decides llama.cpp's CMake flags for this machine, so the app and the side-by-side tools run the
# same code. Sets `cmake_args` from CMAKE_ARGS plus: AMX off on x86-64 (AMX tile instructions crash with
# SIGILL on these virtual machines; only server Xeons have AMX anyway), Metal on macOS, CUDA where usable.
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
