"""A command line that helps: help texts with units, exit codes in --help, did-you-mean, the
``--`` hint, usage errors as JSON, shell completion and the man page made from the parser."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.cli.main import COMMANDS, Context, command_parser, main

ROOT = Path(__file__).resolve().parent.parent


def _run(argv: list[str], stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    ctx = Context(stdout=out, stderr=err, stdin=io.StringIO(stdin), environ={"NO_COLOR": "1"})
    code = main(argv, ctx)
    return code, out.getvalue(), err.getvalue()


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    found: list[argparse.Action] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _actions(sub)
        elif not isinstance(action, argparse._HelpAction):
            found.append(action)
    return found


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_option_has_help_and_a_unit(name: str) -> None:
    """No bare ``--max-model-len MAX_MODEL_LEN``: each option says what it is, and each value
    its kind (a metavar such as TOKENS, DURATION, SIZE, or its choices)."""
    for action in _actions(command_parser(name)):
        assert action.help, (name, action.option_strings or action.dest)
        if action.option_strings and action.nargs != 0:
            assert action.metavar is not None or action.choices is not None, (
                name,
                action.option_strings,
            )


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_ends_with_exit_codes(name: str) -> None:
    """Each command's --help lists its exit codes."""
    code, out, _ = _run([name, "--help"])
    assert code == 0
    assert "exit codes:\n  0" in out


def test_verify_help_lists_the_code_it_exits_with_unchecked(tmp_path: Path) -> None:
    """``verify --hash`` of a folder with nothing to compare with exits 3: --help says so."""
    from builders.safetensors import write_checkpoint

    folder = write_checkpoint(tmp_path / "m", n_shards=1)
    code, _, _ = _run(["verify", "--hash", str(folder)])
    _, help_out, _ = _run(["verify", "--help"])
    codes = help_out.split("exit codes:\n", 1)[1].splitlines()
    assert code == 3
    assert any(line.split()[0] == str(code) for line in codes), codes


@pytest.mark.parametrize("argv", [["--list-models"], ["--list-gpus", "--json"]])
def test_a_reader_that_goes_away_is_no_internal_error(argv: list[str]) -> None:
    """``bringup plan --list-models | head -1``: the pipe closes before the output is written
    (a rich table, or JSON); that ends the command as SIGPIPE would (141), with nothing on
    stderr, never exit 70 nor rich's own exit 1."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write is EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bringup", "plan", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            env={**os.environ, "NO_COLOR": "1"},
        )
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (141, "")


def test_top_help_lists_every_command_in_one_column() -> None:
    """``bringup --help``: each command's line help starts in the same column, after at
    least two spaces (``completion`` is the longest name; it ran into its text)."""
    _, out, _ = _run(["--help"])
    rows = out.split("commands:\n", 1)[1].splitlines()
    assert [row.split()[0] for row in rows] == list(COMMANDS)
    starts = {row.index(COMMANDS[row.split()[0]]) for row in rows}
    assert len(starts) == 1
    (start,) = starts
    assert all(row[:start].endswith("  ") for row in rows)


def test_every_exit_code_help_names_is_one_of_bringup_exit_codes() -> None:
    """docs/exit-codes.md: the same codes for every command, from ``bringup.exit_codes``;
    each command's --help names no other (but 128+N, a signal's)."""
    from bringup import exit_codes
    from bringup.cli.help_text import EXIT_CODES

    known = {v for k, v in vars(exit_codes).items() if k.startswith("EXIT_")}
    for command, rows in EXIT_CODES.items():
        for code, _ in rows:
            assert code == "128+N" or int(code) in known, (command, code)


def test_no_exit_code_is_a_bare_number() -> None:
    """docs/exit-codes.md: every code comes from ``bringup.exit_codes``; no ``exit_code`` in
    the source (an attribute or a keyword) is set to a bare number (errors.Interrupted's 130
    was)."""
    import ast

    bare = []
    for path in sorted((ROOT / "src" / "bringup").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            pairs: list[tuple[str | None, ast.expr]] = []
            if isinstance(node, ast.Assign):
                pairs = [
                    (getattr(t, "id", getattr(t, "attr", None)), node.value) for t in node.targets
                ]
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                pairs = [
                    (getattr(node.target, "id", getattr(node.target, "attr", None)), node.value)
                ]
            elif isinstance(node, ast.keyword):
                pairs = [(node.arg, node.value)]
            bare += [
                f"{path.relative_to(ROOT)}:{value.lineno}"
                for name, value in pairs
                if name == "exit_code"
                and isinstance(value, ast.Constant)
                and isinstance(value.value, int)
            ]
    assert bare == []


def test_unknown_command_did_you_mean() -> None:
    """``bringup plna``: the command meant, from the parser's own names."""
    code, _, err = _run(["plna"])
    assert code == 2
    assert "did you mean `bringup plan`?" in err


def test_flags_before_the_command_are_the_commands() -> None:
    """``bringup --json plna``: the misspelt command is named (not --json) and the error is
    one JSON object; ``bringup --json plan M`` plans as ``plan --json M`` does."""
    code, out, err = _run(["--json", "plna"])
    assert code == 2
    assert json.loads(out)["error"] == "unknown command 'plna'"
    assert "did you mean `bringup plan`?" in err
    code, out, _ = _run(["--json", "plan", "Llama-3.1-8B", "--gpu", "H100"])
    assert code == 0
    assert json.loads(out)["model"]["architecture"] == "LlamaForCausalLM"
    code, out, _ = _run(["--json"])
    assert code == 2
    assert json.loads(out)["error"] == "no command given"


def test_unknown_option_did_you_mean() -> None:
    """``plan --tp 2``: vLLM's short -tp."""
    code, _, err = _run(["plan", "--tp", "2", "MiniMax-M2.5"])
    assert code == 2
    assert "did you mean -tp?" in err
    code, _, err = _run(["plan", "MiniMax-M2.5", "--max-num-seq", "8", "--gpu-memry", "80GiB"])
    assert "did you mean --gpu-memory?" in err


def test_a_server_flag_before_the_dashes_is_shown_after_them() -> None:
    """``plan M -O0``: vLLM's own flag, which plan reads in the server command after ``--``."""
    code, _, err = _run(["plan", "MiniMax-M2.5", "-O0"])
    assert code == 2
    assert "-O0 is not a bringup option" in err
    assert "bringup plan [options] -- vllm serve MODEL -O0" in err


def test_server_command_without_dashes() -> None:
    """``bringup run vllm serve x``: the ``--`` it needs, with the command as given."""
    code, _, err = _run(["run", "vllm", "serve", "x"])
    assert code == 2
    assert "the server command goes after `--`: bringup run [options] -- vllm serve x" in err


def test_usage_error_under_json_is_one_object() -> None:
    """A bad flag with --json: one JSON object on stdout, exit 2, and the line on stderr."""
    code, out, err = _run(["plan", "--json", "--tp", "2", "MiniMax-M2.5"])
    assert code == 2
    obj = json.loads(out)
    assert obj["schema_version"] == 1
    assert obj["exit_code"] == 2
    assert "unrecognized arguments: --tp" in obj["error"]
    assert obj["hint"].startswith("did you mean -tp?")
    assert err.startswith("bringup: error:")
    code, out, _ = _run(["diagnose", "--json", "/nonexistent/log"])
    assert code == 2
    assert json.loads(out)["error"].startswith("no such log file")


def _bash_complete(script: Path, words: list[str]) -> list[str]:
    line = " ".join(words)
    program = (
        f"source {script}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; _shtab_bringup; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return proc.stdout.split()


def test_bash_completion_completes_commands_and_options(tmp_path: Path) -> None:
    """The generated bash script, sourced in a real bash, completes from the parser."""
    code, out, _ = _run(["completion", "bash"])
    assert code == 0
    script = tmp_path / "bringup.bash"
    script.write_text(out)
    assert _bash_complete(script, ["bringup", "pl"]) == ["plan"]
    assert _bash_complete(script, ["bringup", "plan", "--max-mo"]) == ["--max-model-len"]
    assert "--retry" in _bash_complete(script, ["bringup", "run", "--re"])


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_know_every_command(shell: str) -> None:
    """zsh and fish scripts name every command and an option of each."""
    code, out, _ = _run(["completion", shell])
    assert code == 0
    for name in COMMANDS:
        assert name in out
    assert "max-model-len" in out
    if shutil.which(shell):
        subprocess.run([shell, "-n"], input=out, text=True, check=True)


def test_completion_install_writes_where_the_shell_looks(tmp_path: Path) -> None:
    """--install: the user's bash-completion folder (XDG_DATA_HOME), said where."""
    out, err = io.StringIO(), io.StringIO()
    environ = {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    ctx = Context(stdout=out, stderr=err, stdin=io.StringIO(), environ=environ)
    assert main(["completion", "bash", "--install"], ctx) == 0
    path = tmp_path / "data" / "bash-completion" / "completions" / "bringup"
    assert "_shtab_bringup" in path.read_text()
    assert str(path) in out.getvalue()


@pytest.mark.skipif(shutil.which("man") is None, reason="man is not installed")
def test_man_page_renders_every_command(tmp_path: Path) -> None:
    """scripts/build_man.py (argparse-manpage) makes a page ``man`` renders, with every
    command, its options and the exit status section."""
    page = tmp_path / "bringup.1"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_man.py"), str(page)], check=True)
    text = subprocess.run(
        ["man", "-l", str(page)],
        capture_output=True,
        text=True,
        check=True,
        env={"MANWIDTH": "100", "PATH": "/usr/bin:/bin"},
    ).stdout
    for name in COMMANDS:
        assert f"bringup {name}" in text
    assert "EXIT STATUS" in text
    assert "--max-model-len" in text or "-max-model-len" in text
