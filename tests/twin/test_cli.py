"""`bringup twin` flags: bad values are one line and exit 2, never a traceback."""

from __future__ import annotations

import io

import pytest

from bringup.cli.main import Context, main


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--time-scale", "0"], "--time-scale must be a positive factor"),
        (
            ["--gpu-memory-utilization", "1.5"],
            "--gpu-memory-utilization must be a fraction in (0, 1]",
        ),
        (["--tp", "0"], "--tp must be at least 1"),
        (["--scenario", "nope"], "invalid choice: 'nope'"),
    ],
)
def test_bad_flags_are_one_line(argv: list[str], expected: str) -> None:
    """Each bad flag prints one `bringup: error:` line naming it, and exits 2."""
    err = io.StringIO()
    code = main(["twin", "vllm", *argv], Context(stdout=io.StringIO(), stderr=err, environ={}))
    assert code == 2
    assert err.getvalue().count("\n") == 1
    assert err.getvalue().startswith("bringup: error:")
    assert expected in err.getvalue()


def test_kv_insufficient_defaults_to_lower_utilization() -> None:
    """kv_insufficient replays a start at utilization 0.72 unless the flag is given."""
    from bringup.cli.commands.twin import config_from_args
    from bringup.cli.main import command_parser

    args = command_parser("twin").parse_args(["vllm", "--scenario", "kv_insufficient"])
    cfg = config_from_args(args, {"VLLM_API_KEY": "k"})
    assert cfg.gpu_memory_utilization == 0.72
    assert cfg.given == {"gpu_memory_utilization": 0.72}
    assert cfg.api_key == "k"
