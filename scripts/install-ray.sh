#!/usr/bin/env bash
# Install Ray (the second multi-node runtime of vLLM, `--distributed-executor-backend ray`) for
# the tests, layered over the vLLM CPU venv of scripts/install-vllm.sh without touching it:
#   - a venv of its own (same interpreter as vLLM's) whose site-packages holds a .pth naming
#     the vLLM venv's site-packages, so `import vllm` works from it;
#   - ray and only the dependencies ray needs that the vLLM venv lacks (msgpack on 0.32);
#   - `ray` and `vllm` entry points in its bin/, so a node's PATH=<this venv>/bin runs both.
# The vLLM venv's packages are never changed (other helpers' and CI's vLLM tests share it).
# Idempotent: a venv that already passes the check is left as it is (milliseconds).
# Prints the venv's path as its last line. BRINGUP_RAY_VERSION / BRINGUP_RAY_VENV override.
set -euo pipefail
RAY_VERSION="${BRINGUP_RAY_VERSION:-2.60.0}"
VLLM_VERSION="${BRINGUP_VLLM_VERSION:-0.32.0}"
VLLM_VENV="${BRINGUP_VLLM_VENV:-$HOME/.cache/bringup/vllm-$VLLM_VERSION-cpu}"
VENV="${BRINGUP_RAY_VENV:-$HOME/.cache/bringup/ray-$RAY_VERSION-on-vllm-$VLLM_VERSION}"
WHEELHOUSE="${BRINGUP_WHEELHOUSE:-$HOME/.cache/bringup/wheelhouse}"
PY="$VENV/bin/python"
STAMP="$VENV/.bringup-ray-ok"

say() { echo "install-ray: $*" >&2; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$RAY_VERSION on $VLLM_VENV" ] && [ -x "$PY" ]; then
  echo "$VENV"
  exit 0
fi
if [ ! -x "$VLLM_VENV/bin/python" ]; then
  say "no vLLM venv at $VLLM_VENV (scripts/install-vllm.sh makes it)"
  exit 1
fi

check() {
  "$PY" - "$RAY_VERSION" <<'EOF' >/dev/null 2>&1
import importlib.metadata as md, sys
assert md.version("ray") == sys.argv[1], md.version("ray")
import ray, ray.util.placement_group  # noqa: F401
import vllm.platforms  # through the .pth: the vLLM venv's packages
EOF
}

BASE="$("$VLLM_VENV/bin/python" -c 'import sys; print(sys._base_executable)')"
VLLM_SITE="$("$VLLM_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ ! -x "$PY" ]; then
  say "creating $VENV (layered over $VLLM_VENV)"
  mkdir -p "$(dirname "$VENV")"
  "$BASE" -m venv "$VENV"
fi
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$VLLM_SITE" >"$SITE/bringup-vllm-venv.pth"
LOG="$VENV/install.log"
mkdir -p "$WHEELHOUSE"
# pip sees the vLLM venv's packages through the .pth as installed: only what is missing comes
say "installing ray==$RAY_VERSION (about 80 MB the first time)..."
if ! "$PY" -m pip install --find-links "$WHEELHOUSE" "ray==$RAY_VERSION" >"$LOG" 2>&1; then
  tail -n 15 "$LOG" >&2
  say "pip could not install ray==$RAY_VERSION"
  exit 1
fi
# the entry points a node runs: ray (from this venv) and vllm (through this venv's python)
printf '#!%s\n# -*- coding: utf-8 -*-\nimport sys\nfrom vllm.entrypoints.cli.main import main\nif __name__ == "__main__":\n    sys.exit(main())\n' \
  "$PY" >"$VENV/bin/vllm"
chmod 755 "$VENV/bin/vllm"
if ! check; then
  say "Ray was installed in $VENV but does not import; see: $PY -c 'import ray, vllm.platforms'"
  exit 1
fi
echo "$RAY_VERSION on $VLLM_VENV" >"$STAMP"
say "Ray $RAY_VERSION ready in $VENV (over vLLM $VLLM_VERSION)"
echo "$VENV"
