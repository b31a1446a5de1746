"""`run --nodes` and `status --nodes` on the command line: the flags that make sense over
several nodes, and one clear line for those that do not (nothing is started)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from bringup.cli.main import Context, main
from bringup.cli.remote import split_remote_flags
from bringup.errors import UsageError

SERVE = ["--", "vllm", "serve", "/m", "-tp", "2"]


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    code = main(argv, Context(stdout=out, stderr=out, environ={}))
    return code, out.getvalue()


@pytest.mark.parametrize(
    ("flag", "says"),
    [
        (["--keep"], "nothing would stop the servers left behind"),
        (["--retry", "-1"], "give a count of 0 or more"),
        (["--ray-port", "7000"], "--ray-port and --ray-arg are for the Ray backend"),
    ],
)
def test_keep_and_bad_options_are_refused_with_the_reason(
    tmp_path: Path, flag: str, says: str
) -> None:
    nodes = tmp_path / "nodes"
    nodes.write_text("a@h1\nb@h2\n")
    code, err = _run(["run", "--nodes", str(nodes), *flag, *SERVE])
    assert code == 2
    assert err.count("\n") <= 2  # the line and its hint, no traceback
    assert says in err


def test_accept_new_host_key_applies_to_the_nodes() -> None:
    # with --nodes and no --host it is not a remote call: it stays for run's own parser
    args = ["--nodes", "f", "--accept-new-host-key", *SERVE]
    assert split_remote_flags(args) is None
    with pytest.raises(UsageError, match="needs --host"):
        split_remote_flags(["--accept-new-host-key", *SERVE])
    with pytest.raises(UsageError, match="need --host"):
        split_remote_flags(["--nodes", "f", "--sudo", *SERVE])


def test_accept_new_host_key_reaches_the_pre_flight(tmp_path: Path) -> None:
    # an address nothing answers at: the pre-flight says so per node, after the flag parsed
    nodes = tmp_path / "nodes"
    nodes.write_text("root@127.0.0.1:1\nroot@127.0.0.1:2\n")
    code, err = _run(["run", "--nodes", str(nodes), "--accept-new-host-key", "--preflight", *SERVE])
    assert code == 1, err
    assert "node 0 (root@127.0.0.1:1): not reached" in err
    assert "node 1 (root@127.0.0.1:2): not reached" in err
