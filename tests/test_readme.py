"""The README is built from docs/ and must not drift from the command pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_is_up_to_date() -> None:
    """README.md equals what scripts/build_readme.py builds from docs/readme-head.md and docs/cli/."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_readme.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_readme_documents_every_command() -> None:
    """Every command the CLI offers has a section in the README."""
    from bringup.cli.main import COMMANDS

    readme = (ROOT / "README.md").read_text()
    missing = [name for name in COMMANDS if f"bringup {name}" not in readme]
    assert not missing
