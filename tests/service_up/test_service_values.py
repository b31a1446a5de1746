"""Unit values: systemctl show text, ExecStart= parsing and rewriting, the status verdict."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.core import service
from bringup.core.diagnosis import Diagnosis, Failure
from bringup.core.systemd_unit import EnvRef, format_command, render_retry_dropin
from bringup.core.vocab import FailureClass, Outcome, Phase

CAT = """# /etc/systemd/system/vllm-m2.service
[Service]
Type=notify
ExecStart=/usr/local/bin/bringup run --notify -- /opt/vllm/bin/vllm serve /models/M2 --port 8000 --api-key ${API_KEY}

# /etc/systemd/system/vllm-m2.service.d/bringup-retry.conf
[Service]
ExecStart=
ExecStart=/usr/local/bin/bringup run --notify -- /opt/vllm/bin/vllm serve "/models/M 2" --port 8000 --max-num-seqs 256
"""


def test_split_command_follows_systemd_syntax():
    """Quotes, escapes, %% and $$, ${NAME} references and executable prefixes are read as systemd does."""
    words = service.split_command(r"""-/usr/bin/x "a b" 'c d' 50%% $$HOME ${TOKEN} tab\tx""")
    assert words == ("/usr/bin/x", "a b", "c d", "50%", "$HOME", EnvRef("TOKEN"), "tab\tx")


def test_exec_start_from_cat_honours_the_dropin_reset():
    """The drop-in's empty ExecStart= resets the unit's; the last one wins."""
    words = service.exec_start_from_cat(CAT)
    assert words is not None
    assert words[5:7] == ("serve", "/models/M 2")
    assert words[-1] == "256"


def test_exec_start_from_show_reads_argv():
    """The ``systemctl show -p ExecStart`` form gives the argv words."""
    value = "{ path=/usr/bin/vllm ; argv[]=/usr/bin/vllm serve m --port 8001 ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }"
    assert service.exec_start_from_show(value) == ("/usr/bin/vllm", "serve", "m", "--port", "8001")


def test_set_server_flag_changes_only_the_wrapped_command_and_keeps_secrets():
    """Behind `bringup run --notify --` the server's flag is set; ${API_KEY} stays a reference."""
    words = service.split_command(
        "/usr/local/bin/bringup run --notify -- vllm serve m --api-key ${API_KEY}"
    )
    changed = service.set_server_flag(words, "--max-num-seqs", "256")
    assert changed == (
        "/usr/local/bin/bringup",
        "run",
        "--notify",
        "--",
        "vllm",
        "serve",
        "m",
        "--api-key",
        EnvRef("API_KEY"),
        "--max-num-seqs",
        "256",
    )
    assert service.server_argv(changed)[:3] == ["vllm", "serve", "m"]
    dropin = render_retry_dropin(changed, ["--max-num-seqs 256: sampler OOM"])
    assert (
        "ExecStart=\nExecStart=/usr/local/bin/bringup run --notify -- vllm serve m --api-key ${API_KEY} --max-num-seqs 256\n"
        in dropin
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.text(
            alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_format_then_split_round_trips(words):
    """What the unit writer quotes, the parser reads back word for word."""
    words[0] = "/usr/bin/" + words[0].lstrip("@-:+!")
    assert service.split_command(format_command(words)) == tuple(words)


def test_parse_show_and_unit_state():
    """``systemctl show`` text becomes a UnitState; MainPID 0 means none."""
    props = service.parse_show(
        "ActiveState=failed\nSubState=failed\nMainPID=0\nNRestarts=2\nResult=exit-code\nExecMainStatus=1\nInvocationID=ab12\n"
    )
    state = service.UnitState.from_show(props)
    assert (
        state.active_state,
        state.main_pid,
        state.n_restarts,
        state.exec_main_status,
        state.invocation_id,
    ) == ("failed", None, 2, 1, "ab12")


def _state(active: str, sub: str = "running", load: str = "loaded") -> service.UnitState:
    return service.UnitState(load, active, sub, 4242, 0, "success", 0, "ab12")


FAIL = Failure(FailureClass.CUDA_OOM, Phase.WARMUP, "oom", 3, "oom")
FAILED_LOG = Diagnosis("vllm", None, Outcome.FAILED, Phase.WARMUP, FAIL)


@pytest.mark.parametrize(
    ("state", "diagnosis", "answers", "verdict", "code"),
    [
        (_state("active"), None, True, "ready", 0),
        (_state("active"), None, False, "failed", 1),
        (_state("active"), FAILED_LOG, True, "failed", 1),
        (_state("failed", "failed"), None, None, "failed", 1),
        (_state("activating", "start"), None, None, "starting", 3),
        (_state("activating", "auto-restart"), None, None, "starting", 3),
        (_state("inactive", "dead"), None, None, "unknown", 3),
        (_state("inactive", "dead", "not-found"), None, None, "unknown", 3),
        (_state("active"), None, None, "unknown", 3),
    ],
)
def test_derive_covers_every_branch(state, diagnosis, answers, verdict, code):
    """Each combination of unit state, journal verdict and probe maps to one verdict and exit code."""
    v, why = service.derive(service.Look(state, diagnosis, answers))
    assert (v.value, v.exit_code) == (verdict, code)
    assert why
