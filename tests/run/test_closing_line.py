"""The closing line of run/up/watch takes its phase and outcome from the verdict's result,
the one the FAILED line above it was made from."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

from bringup.cli.main import Context, main
from bringup.core.diagnosis import Failure, FailureEvent, PhaseEvent, TimelineEntry
from bringup.core.live import StartupResult
from bringup.core.startup import StartupMachine, StartupPolicy, summary_json
from bringup.core.vocab import FailureClass, Outcome, Phase
from bringup.render.live import format_ending
from run.helpers import cli, events, fake, free_port


def _ended(failure_phase: Phase, reached: Phase, outcome: Outcome) -> list[str]:
    m = StartupMachine(StartupPolicy(), start=100.0)
    m.on_event(PhaseEvent(TimelineEntry(reached, 3, None)), 101.0)
    cause = Failure(
        FailureClass.KV_CACHE_INSUFFICIENT, failure_phase, "ValueError: ...", 9, "too small"
    )
    m.on_event(FailureEvent(cause), 102.0)
    result = StartupResult(
        outcome=outcome,
        exit_code=1,
        failure=cause,
        argv=("vllm", "serve", "m"),
        time_to_ready_seconds=None,
        summary=summary_json(m, 103.0),
        url="http://127.0.0.1:8000",
    )
    return format_ending(result, m.snapshot(103.0))


def test_failed_in_the_failures_phase() -> None:
    """`FAILED: kv_cache_insufficient during kv_cache_alloc` ends `failed in kv_cache_alloc`,
    not in the memory_profiling the log had reached."""
    lines = _ended(Phase.KV_CACHE_ALLOC, Phase.MEMORY_PROFILING, Outcome.FAILED)
    assert lines[0] == "failed in kv_cache_alloc"


class _Terminal(io.StringIO):
    """stdout as a terminal: bringup draws its live frame (rich) on it."""

    def isatty(self) -> bool:
        return True


_ERASE = re.compile(r"(?:\x1b\[2K)?(?:\x1b\[1A\x1b\[2K)+|\r\x1b\[2K")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_the_live_frames_last_state_is_the_final_one() -> None:
    """`run --exit-when-ready` on a terminal, the server listening 1.5 s after its log says it
    starts the API server: frames show `probe health: connection refused` meanwhile, and the
    last frame drawn (before it is cleared for `ready in ...`) is the ready state with every
    probe ok, not the refused probe under `starting the API server`."""
    port = free_port()
    out = _Terminal()
    code = main(
        ["run", "--exit-when-ready", "--", *fake("ready", port, "--listen-delay", "1.5")],
        Context(
            stdout=out,
            stderr=io.StringIO(),
            stdin=io.StringIO(),
            environ={"PATH": os.environ.get("PATH", "")},
        ),
    )
    raw = out.getvalue()
    frames = [_ANSI.sub("", f) for f in _ERASE.split(raw[: raw.rindex("\x1b[?25h")])]
    closing = _ANSI.sub("", raw[raw.rindex("\x1b[?25h") :])
    assert code == 0
    assert any("probe health: connection refused" in f for f in frames)  # the premise
    last = frames[-1]
    assert last.startswith("bringup run: ready"), last
    assert "connection refused" not in last
    assert "probe health: ok" in last
    assert "probe smoke: ok" in last
    assert "ready in " in closing
    assert "connection refused" not in closing


def test_a_stall_says_stalled_in_run_and_watch(tmp_path: Path) -> None:
    """A stall's live event line and closing line say "stalled" (run and watch; up follows
    with the same observers), never `FAILED: timeouts`; its JSON failure event carries
    `"outcome": "stalled"` next to the class, as the summary does."""
    port = free_port()
    code, out, _ = cli(
        ["run", "--quiet", "--stall", "3s", "--grace", "2s", "--", *fake("hang", port)]
    )
    assert code == 4
    assert "FAILED" not in out
    assert re.search(
        r"^bringup: \[ *[0-9.]+m?s\] STALLED during distributed_init \(timeouts\)$", out, re.M
    )
    assert "bringup: stalled in distributed_init: no new phase" in out

    code, out, _ = cli(
        ["run", "--json", "--stall", "3s", "--grace", "2s", "--", *fake("hang", free_port())]
    )
    failure = next(e for e in events(out) if e["event"] == "failure")
    assert (code, failure["outcome"], failure["class"]) == (4, "stalled", "timeouts")
    assert events(out)[-1]["outcome"] == "stalled"

    log = tmp_path / "vllm.log"
    log.write_text(
        "(APIServer pid=6) INFO 11-30 09:47:00 [api_server.py:1] vLLM server version 0.33.0, serving model m\n"
        "(EngineCore pid=7) INFO 11-30 09:47:03 [gpu_model_runner.py:4327] Starting to load model m...\n"
    )
    code, out, _ = cli(
        ["watch", "--log", str(log), "--stall", "2s", "--url", f"http://127.0.0.1:{free_port()}"]
    )
    assert code == 4
    assert "FAILED" not in out
    assert "STALLED during weights_loading (timeouts)" in out
    assert "bringup: stalled in weights_loading:" in out


def test_a_root_cause_still_says_failed() -> None:
    """The other side: a root cause in the log is `FAILED: <class> during <phase>`, its JSON
    failure event `"outcome": "failed"`."""
    code, out, _ = cli(["run", "--json", "--", *fake("config", free_port(), "--teardown", "0.2")])
    failure = next(e for e in events(out) if e["event"] == "failure")
    assert (code, failure["outcome"]) == (1, "failed")
    code, out, _ = cli(["run", "--quiet", "--", *fake("config", free_port(), "--teardown", "0.2")])
    assert code == 1
    assert "FAILED: " in out
    assert "STALLED" not in out
