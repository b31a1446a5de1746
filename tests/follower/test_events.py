"""The follower's typed events and the renderers' read-only snapshot."""

from __future__ import annotations

import dataclasses

import pytest

from bringup.core.diagnosis import Failure, Remedy
from bringup.core.live import (
    Exited,
    FailureFound,
    GpuSample,
    GpuUse,
    PhaseReached,
    ProbeSeen,
    Progress,
    Ready,
)
from bringup.core.probes import ProbeKind, ProbeObservation
from bringup.core.startup import StartupMachine, StartupPolicy
from bringup.core.vocab import FailureClass, Phase
from follower.fakes import exit_at
from follower.test_loop import World, startup

FAILURE = Failure(
    FailureClass.CUDA_OOM, Phase.WARMUP, "boom", 7, "it broke", (Remedy("Lower it.", "--x", "1"),)
)
SMOKE = ProbeObservation(
    ProbeKind.SMOKE, "http://h:1", True, 200, latency_seconds=0.01234, text="hi"
)


@pytest.mark.parametrize(
    ("event", "json"),
    [
        (
            PhaseReached(1.23456, Phase.WEIGHTS_LOADING, 12),
            {"event": "phase", "t": 1.235, "phase": "weights_loading", "line_number": 12},
        ),
        (
            Progress(2.0, Phase.WEIGHTS_LOADING, 3, 5, "shards"),
            {
                "event": "progress",
                "t": 2.0,
                "phase": "weights_loading",
                "done": 3,
                "total": 5,
                "unit": "shards",
            },
        ),
        (
            GpuSample(3.0, (GpuUse(0, 10, 80),)),
            {"event": "gpu", "t": 3.0, "gpus": [{"index": 0, "used_bytes": 10, "total_bytes": 80}]},
        ),
        (
            ProbeSeen(4.0, SMOKE),
            {
                "event": "probe",
                "t": 4.0,
                "probe": "smoke",
                "url": "http://h:1",
                "ok": True,
                "status": 200,
                "refused": False,
                "error": None,
                "latency_seconds": 0.0123,
                "model": None,
                "answer": "hi",
            },
        ),
        (
            FailureFound(5.0, FAILURE),
            {
                "event": "failure",
                "t": 5.0,
                "class": "cuda_oom",
                "phase": "warmup",
                "line": "boom",
                "remedy": [{"text": "Lower it.", "flag": "--x", "value": "1", "env": None}],
                "line_number": 7,
                "summary": "it broke",
                "outcome": "failed",
            },
        ),
        (
            Ready(6.0, 6.00049, "m", "http://h:1"),
            {
                "event": "ready",
                "t": 6.0,
                "time_to_ready_seconds": 6.0,
                "model": "m",
                "url": "http://h:1",
            },
        ),
        (Exited(7.0, -9), {"event": "exited", "t": 7.0, "code": -9}),
    ],
)
def test_each_event_is_one_json_lines_object(event, json):
    """The JSON Lines shape of every event type; ``event``/``fields`` are its JSON view."""
    assert event.to_json() == json
    assert event.event == json["event"]
    assert dict(event.fields) == {k: v for k, v in json.items() if k not in ("event", "t")}


def test_events_are_frozen():
    """An event cannot be changed after it is reported."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        Ready(1.0, 1.0, "m", "u").t = 2.0  # type: ignore[misc]


def test_the_snapshot_is_a_read_only_copy():
    """A snapshot does not move with the machine, and cannot be changed."""
    m = StartupMachine(StartupPolicy(), start=10.0)
    m.probe_sent(ProbeKind.HEALTH)
    m.on_probe(ProbeObservation(ProbeKind.HEALTH, "u", False, refused=True), 11.0)
    snap = m.snapshot(12.0)
    assert (snap.elapsed_seconds, snap.phase, snap.state.value) == (2.0, Phase.START, "starting")
    with pytest.raises(TypeError):
        snap.probes[ProbeKind.SMOKE] = SMOKE  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.phase = Phase.READY  # type: ignore[misc]
    m.probe_sent(ProbeKind.HEALTH)
    m.on_probe(ProbeObservation(ProbeKind.HEALTH, "u", True, 200), 13.0)
    assert snap.probes[ProbeKind.HEALTH].ok is False


def test_an_exit_is_reported_before_its_failure():
    """The server's exit is an event of its own, with its status, then the verdict."""
    w = World([*startup(), exit_at(4.0, 3)])
    w.run()
    names = w.observer.names()
    assert names[-2:] == ["exited", "failure"]
    exited = next(e for e in w.observer.events if isinstance(e, Exited))
    assert exited.code == 3
