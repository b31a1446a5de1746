#!/usr/bin/env bash
# Install the real llama.cpp server (llama-cpp-python[server]) into the project's venv.
# PyPI ships only its source, which compiles for about 10 minutes on 2 cores, so the built
# wheel is kept in a wheelhouse outside the repository and reused by later runs.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
WHEELHOUSE="${BRINGUP_WHEELHOUSE:-$HOME/.cache/bringup/wheelhouse}"
PY=.venv/bin/python
mkdir -p "$WHEELHOUSE"
if ! ls "$WHEELHOUSE"/llama_cpp_python-"$VERSION"-*.whl >/dev/null 2>&1; then
  echo "install-engine: building llama-cpp-python $VERSION (about 10 minutes on 2 cores)..."
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}" \
    "$PY" -m pip wheel --quiet --no-deps "llama-cpp-python==$VERSION" -w "$WHEELHOUSE"
fi
"$PY" -m pip install --quiet --find-links "$WHEELHOUSE" "llama-cpp-python[server]==$VERSION"
"$PY" -c "import llama_cpp, llama_cpp.server; print('install-engine: llama-cpp-python', llama_cpp.__version__)"
