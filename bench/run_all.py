"""Run every benchmark script under bench/ (bench_*.py) in turn; each prints its own figures
and writes bench/results/<area>.md. Benchmarks are measurements, never tests: nothing here
asserts a time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def main() -> int:
    failures = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"== {script.name}", flush=True)
        code = subprocess.run([sys.executable, str(script)], check=False).returncode
        if code != 0:
            print(f"   {script.name} exited with {code}", flush=True)
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
