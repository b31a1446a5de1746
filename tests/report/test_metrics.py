"""The metrics of a followed startup (adapters.metrics), from events and through the CLI:
the exposition text parsed by prometheus-client's own parser."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bringup.adapters.metrics import StartupMetrics
from bringup.core.diagnosis import Failure
from bringup.core.live import FailureFound, GpuSample, GpuUse, PhaseReached, Ready
from bringup.core.vocab import FailureClass, Phase
from run.helpers import cli, fake, free_port, processes_running


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_events_become_metrics(tmp_path: Path) -> None:
    textfile = tmp_path / "bringup.prom"
    m = StartupMetrics(unit="vllm.service", textfile=str(textfile))
    m.attempt()
    m.event(PhaseReached(0.0, Phase.START, 1))
    m.event(PhaseReached(2.0, Phase.WEIGHTS_LOADING, 10))
    m.event(GpuSample(2.5, (GpuUse(0, 3 << 30, 80 << 30),)))
    m.event(PhaseReached(7.0, Phase.READY, 40))
    m.event(Ready(9.5, 9.5, "m", "http://127.0.0.1:8000"))
    m.facts({"weights_gib_per_gpu": 2.0, "kv_cache_tokens": 1000})
    m.plan({"weights_bytes": 2.1 * 2**30, "kv_cache_tokens": 1200.0})
    got = samples(textfile.read_text())
    assert got[("bringup_ready", ())] == 1
    assert got[("bringup_time_to_ready_seconds", ())] == 9.5
    assert got[("bringup_attempts_total", ())] == 1
    assert got[("bringup_phase_seconds", (("phase", "start"),))] == 2.0
    assert got[("bringup_phase_seconds", (("phase", "weights_loading"),))] == 5.0
    assert got[("bringup_phase_seconds", (("phase", "ready"),))] == 2.5
    assert got[("bringup_startup_phase", (("phase", "ready"), ("unit", "vllm.service")))] == 1
    assert got[("bringup_startup_phase", (("phase", "start"), ("unit", "vllm.service")))] == 0
    assert got[("bringup_gpu_memory_used_bytes", (("gpu", "0"),))] == 3 << 30
    assert got[("bringup_measured", (("quantity", "weights_bytes"),))] == 2 * 2**30
    assert got[("bringup_predicted", (("quantity", "kv_cache_tokens"),))] == 1200
    m.attempt()  # a retry: not ready, no failure, the count goes on
    m.event(FailureFound(1.0, Failure(FailureClass.CUDA_OOM, Phase.START, "x", 3, "oom")))
    got = samples(m.text())
    assert got[("bringup_attempts_total", ())] == 2
    assert got[("bringup_ready", ())] == 0
    assert got[("bringup_failure", (("class", "cuda_oom"),))] == 1
    m.close()


def test_a_textfile_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    code, _, err = cli(
        [
            "run",
            "--metrics-textfile",
            str(tmp_path / "no" / "such" / "x.prom"),
            "--",
            *fake("ready", port),
        ]
    )
    assert code == 2
    assert err.count("\n") == 1
    assert "--metrics-textfile" in err
    assert processes_running(port) == []


def test_run_writes_the_textfile_of_a_failed_start(tmp_path: Path) -> None:
    textfile = tmp_path / "bringup.prom"
    port = free_port()
    code, _, err = cli(
        [
            "run",
            "--metrics-textfile",
            str(textfile),
            "--grace",
            "2s",
            "--",
            *fake("config", port, "--teardown", "0.2"),
        ]
    )
    assert code == 1, err
    got = samples(textfile.read_text())
    assert got[("bringup_failure", (("class", "config_error"),))] == 1
    assert got[("bringup_ready", ())] == 0
    assert got[("bringup_attempts_total", ())] == 1
    assert not list(tmp_path.glob("*.tmp*")), list(tmp_path.iterdir())  # written atomically


def test_a_metrics_port_in_use_is_one_line() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        port = free_port()
        code, _, err = cli(["run", "--metrics-port", str(taken), "--", *fake("ready", port)])
    assert code == 2
    assert err.count("\n") == 1
    assert "--metrics-port" in err
    assert processes_running(port) == []
