"""The command line of `bringup verify`: human output, exit codes, errors as one line."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from bringup.cli.main import Context, main
from bringup.render.verify import NOTHING_COMPARED, format_count

from builders.safetensors import shard_name, write_checkpoint


def test_human_output_names_each_problem_and_its_fix(tmp_path: Path, verify) -> None:
    """Plain output has the summary, FAILED with the count, and one line plus a fix line per problem."""
    write_checkpoint(tmp_path, n_shards=3)
    (tmp_path / shard_name(3, 3)).unlink()
    (tmp_path / "config.json").unlink()
    result = verify(tmp_path)
    assert result.code == 1
    lines = result.out.splitlines()
    assert lines[0] == f"checkpoint {tmp_path}"
    assert lines[1].startswith("  safetensors: 2 files, ")
    assert "FAILED: 2 problems" in lines
    assert (
        f"  missing_shard {shard_name(3, 3)}: model.safetensors.index.json maps 7 tensors to it, but it is not on disk"
        in lines
    )
    assert (
        f"    fix: fetch {shard_name(3, 3)} again: the index names it and the engine will stop when it is not found"
        in lines
    )
    assert "  config_missing config.json: there is no config.json" in lines
    assert "\x1b[" not in result.out


def test_human_output_for_a_good_checkpoint(tmp_path: Path, verify) -> None:
    """A good checkpoint prints totals and an OK verdict, exit 0."""
    write_checkpoint(tmp_path, n_shards=2)
    result = verify(tmp_path)
    assert result.code == 0
    assert (
        result.out.splitlines()[-1]
        == "OK: every check passed; the checkpoint is complete and intact"
    )
    assert "106.8K parameters" in result.out


def test_progress_bar_only_on_a_terminal_and_never_in_json(tmp_path: Path) -> None:
    """With a terminal (FORCE_COLOR) --hash draws a bar on stderr; with --json stdout stays pure JSON."""
    write_checkpoint(tmp_path, n_shards=2, fill=True)
    out, err = io.StringIO(), io.StringIO()
    assert (
        main(
            ["verify", str(tmp_path), "--hash"],
            Context(stdout=out, stderr=err, environ={"FORCE_COLOR": "1"}),
        )
        == 3  # a plain folder has no published digest to compare with
    )
    assert "sha256" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert (
        main(
            ["verify", str(tmp_path), "--hash", "--json"],
            Context(stdout=out, stderr=err, environ={"FORCE_COLOR": "1"}),
        )
        == 3
    )
    assert out.getvalue().startswith("{")
    assert err.getvalue() == f"bringup: {NOTHING_COMPARED}\n"  # no bar: only the one line


def test_hash_with_nothing_to_compare_says_so_and_exits_3(tmp_path: Path, verify) -> None:
    """--hash on a folder with no published digest: "nothing to compare", exit 3 (not the
    plain OK of a checked checkpoint); --write-manifest, whose purpose is the sums, exits 0."""
    write_checkpoint(tmp_path / "m", n_shards=2, fill=True)
    result = verify(tmp_path / "m", "--hash")
    assert result.code == 3
    assert "0 compared with a published digest" in result.out
    assert NOTHING_COMPARED in result.out
    assert result.out.splitlines()[-1] == "OK: every header check passed; contents not checked"
    manifest = tmp_path / "SHA256SUMS"
    assert verify(tmp_path / "m", "--write-manifest", str(manifest)).code == 0
    assert verify(tmp_path / "m", "--manifest", str(manifest)).code == 0


def test_usage_and_unreadable_input_are_exit_2(tmp_path: Path, verify) -> None:
    """A missing path, --jobs 0 and no arguments are one-line errors with exit 2."""
    for args in ((tmp_path / "absent",), (tmp_path, "--jobs", "0"), ()):
        result = verify(*args)
        assert result.code == 2, args
        assert result.err.startswith("bringup: error: ")
        assert result.err.count("\n") == 1
        assert "Traceback" not in result.err


def test_unreadable_shard_is_exit_2(tmp_path: Path, verify) -> None:
    """A shard that cannot be opened is unreadable input: exit 2 naming the file (skipped as root)."""
    if os.geteuid() == 0:
        return  # root reads anything; nothing to test here
    write_checkpoint(tmp_path, n_shards=2)
    (tmp_path / shard_name(1, 2)).chmod(0)
    result = verify(tmp_path)
    assert result.code == 2
    assert shard_name(1, 2) in result.err


def test_installed_command_runs_as_a_process(tmp_path: Path) -> None:
    """`python -m bringup verify --json` works as a real process, exit 1 on a damaged checkpoint."""
    write_checkpoint(tmp_path, n_shards=2)
    os.truncate(tmp_path / shard_name(2, 2), 100)
    proc = subprocess.run(
        [sys.executable, "-m", "bringup", "verify", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert '"kind": "truncated"' in proc.stdout
    assert proc.stderr == ""


def test_format_count() -> None:
    """Parameter counts read as people say them."""
    assert [format_count(n) for n in (512, 106_816, 8_030_261_248, 405_000_000_000)] == [
        "512",
        "106.8K",
        "8.03B",
        "405.0B",
    ]


def test_long_lines_wrap_with_a_hanging_indent_at_80_columns(tmp_path: Path) -> None:
    """On an 80-column colour terminal a long path, problem or fix wraps with its continuation
    indented deeper than the line it belongs to (never back at column 0, never at a sub-line's
    indent); the words are the plain output's, in order, and no line is wider than 80."""
    root = tmp_path / ("a-long-folder-name-" * 3) / "snapshots" / ("0123456789abcdef" * 3)
    write_checkpoint(root, n_shards=3)
    (root / shard_name(3, 3)).unlink()
    (root / "config.json").unlink()

    def run(environ: dict[str, str]) -> str:
        out = io.StringIO()
        assert (
            main(["verify", str(root)], Context(stdout=out, stderr=io.StringIO(), environ=environ))
            == 1
        )
        return out.getvalue()

    plain = run({})
    shown = re.sub(r"\x1b\[[0-9;]*m", "", run({"FORCE_COLOR": "1", "COLUMNS": "80"}))
    assert "".join(shown.split()) == "".join(plain.split())
    rows = shown.splitlines()
    assert max(len(r) for r in rows) <= 80
    assert len(rows) > len(plain.splitlines())  # something did wrap
    starts = {line.strip().split()[0] for line in plain.splitlines()}
    indent = 0
    for row in rows:
        lead = len(row) - len(row.lstrip(" "))
        if row.strip().split()[0] in starts and lead <= indent + 2:
            indent = lead  # a line of its own
        else:
            assert lead == indent + 4, f"continuation not indented 4 more: {row!r}"
    assert rows[0] == "checkpoint"
    assert rows[1].startswith("    " + str(tmp_path)[:20])
