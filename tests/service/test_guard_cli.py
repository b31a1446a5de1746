"""`bringup guard` over readings files, with real processes as GPU holders."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.cli.main import Context, main
from service.gpu_readings import GiB, MiB, gpu, write_readings

SLEEPER = (
    "import signal, sys, time; "
    "sys.argv[2] == 'ignore-term' and signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(120)"
)


class Sleepers:
    """Real processes started by a test, each ended at teardown (and only those)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, marker: str, mode: str = "plain") -> subprocess.Popen[str]:
        proc = subprocess.Popen(self.argv(marker, mode), stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"  # handlers installed before any signal
        self.procs.append(proc)
        return proc

    @staticmethod
    def argv(marker: str, mode: str = "plain") -> list[str]:
        return [sys.executable, "-c", SLEEPER, marker, mode]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            if proc.stdout:
                proc.stdout.close()


@pytest.fixture
def sleepers() -> Iterator[Sleepers]:
    s = Sleepers()
    yield s
    s.close()


def run_guard(args: list[str], environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["guard", *args],
        Context(stdout=out, stderr=err, environ={"NO_COLOR": "1", **(environ or {})}),
    )
    return code, out.getvalue(), err.getvalue()


def when(stream: io.StringIO, text: str, then: object) -> threading.Thread:
    """Run ``then()`` in a thread once ``text`` has appeared on ``stream``."""

    def watch() -> None:
        for _ in range(6000):
            if text in stream.getvalue():
                break
            time.sleep(0.01)
        then()  # type: ignore[operator]

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_guard_waits_until_the_gpu_is_freed(tmp_path: Path, sleepers: Sleepers) -> None:
    """The guard names the holder while waiting and exits 0 once the memory is released."""
    holder = sleepers.start("old-model")
    path = write_readings(
        tmp_path / "gpus.json", [gpu(0, 70 * GiB, [(holder.pid, "python3", 69 * GiB)])]
    )
    out, err = io.StringIO(), io.StringIO()
    freer = when(err, f"PID {holder.pid}", lambda: write_readings(path, [gpu(0, 500 * MiB)]))
    code = main(
        ["guard", "--gpus-from", str(path), "--interval", "0.05s", "--timeout", "120s", "--json"],
        Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}),
    )
    freer.join(timeout=30)
    result = json.loads(out.getvalue())
    assert code == 0
    assert result["ok"] is True
    assert result["gpus"] == [
        {**result["gpus"][0], "index": 0, "used_bytes": 500 * MiB, "holders": []}
    ]
    assert result["waited_seconds"] > 0
    assert f"PID {holder.pid} python" in err.getvalue()
    assert "old-model" in err.getvalue()  # the command line is shown


def test_guard_times_out_with_exit_5_listing_holders(tmp_path: Path, sleepers: Sleepers) -> None:
    """A GPU never freed ends in exit 5 with its holders' pid, name, command line and bytes."""
    holder = sleepers.start("never-leaves")
    path = write_readings(
        tmp_path / "gpus.json",
        [gpu(0, 70 * GiB, [(holder.pid, "python3", 69 * GiB), (999_999_999, "ghost", 1 * GiB)])],
    )
    code, out, _ = run_guard(
        ["--gpus-from", str(path), "--timeout", "0.3s", "--interval", "0.1s", "--json"]
    )
    result = json.loads(out)
    assert code == 5
    assert result["ok"] is False
    assert set(result) >= {"ok", "waited_seconds", "gpus"}
    holders = result["gpus"][0]["holders"]
    assert [h["pid"] for h in holders] == [holder.pid, 999_999_999]
    assert holders[0]["name"].startswith("python")
    assert holders[0]["used_bytes"] == 69 * GiB
    assert holders[0]["cmdline"][-2:] == ["never-leaves", "plain"]
    assert set(holders[0]) >= {"pid", "name", "unit", "used_bytes"}
    assert holders[1] == {**holders[1], "name": "ghost", "unit": None, "cmdline": []}


def test_guard_human_output_on_timeout(tmp_path: Path) -> None:
    """Without --json the verdict says timed out and lists each holder with its bytes."""
    path = write_readings(
        tmp_path / "gpus.json", [gpu(0, 70 * GiB, [(999_999_998, "vllm", 69 * GiB)])]
    )
    code, out, _ = run_guard(["--gpus-from", str(path), "--timeout", "0.1s", "--interval", "0.05s"])
    assert code == 5
    assert out.splitlines()[0].startswith("timed out after")
    assert "PID 999999998 vllm, 69.00 GiB" in out


def test_cuda_visible_devices_remaps_gpu_indices(tmp_path: Path) -> None:
    """With CUDA_VISIBLE_DEVICES=2,3, --gpus 1 guards physical GPU 3 (the server's CUDA 1)."""
    path = write_readings(
        tmp_path / "gpus.json",
        [gpu(0, 70 * GiB), gpu(1, 70 * GiB), gpu(2, 70 * GiB), gpu(3, 10 * MiB)],
    )
    env = {"CUDA_VISIBLE_DEVICES": "2,3"}
    code, out, _ = run_guard(
        ["--gpus-from", str(path), "--gpus", "1", "--timeout", "0s", "--json"], env
    )
    assert code == 0
    assert [g["index"] for g in json.loads(out)["gpus"]] == [3]
    code, out, _ = run_guard(["--gpus-from", str(path), "--timeout", "0s", "--json"], env)
    assert code == 5
    assert [(g["index"], g["ok"]) for g in json.loads(out)["gpus"]] == [(2, False), (3, True)]


def test_gpu_outside_cuda_visible_devices_is_a_usage_error(tmp_path: Path) -> None:
    """Asking for a CUDA index the visible set does not have is one line and exit 2."""
    path = write_readings(tmp_path / "gpus.json", [gpu(i, 0) for i in range(4)])
    code, out, err = run_guard(
        ["--gpus-from", str(path), "--gpus", "2"], {"CUDA_VISIBLE_DEVICES": "2,3"}
    )
    assert code == 2
    assert out == ""
    assert err.startswith("bringup: error: --gpus: no visible GPU '2' (CUDA_VISIBLE_DEVICES=2,3)")
    assert len(err.strip().splitlines()) == 1


def test_gpus_selected_by_uuid(tmp_path: Path) -> None:
    """A UUID prefix selects that GPU whatever its index."""
    path = write_readings(tmp_path / "gpus.json", [gpu(0, 70 * GiB), gpu(1, 0), gpu(2, 70 * GiB)])
    code, out, _ = run_guard(
        ["--gpus-from", str(path), "--gpus", "GPU-11aa", "--timeout", "0s", "--json"]
    )
    assert code == 0
    assert [g["index"] for g in json.loads(out)["gpus"]] == [1]


def test_need_counts_free_bytes(tmp_path: Path) -> None:
    """--need SIZE is satisfied by free memory, whatever is used."""
    path = write_readings(tmp_path / "gpus.json", [gpu(0, 40 * GiB, total_bytes=80 * GiB)])
    assert run_guard(["--gpus-from", str(path), "--need", "30GiB", "--timeout", "0s"])[0] == 0
    assert run_guard(["--gpus-from", str(path), "--need", "50GiB", "--timeout", "0s"])[0] == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-used", "1GiB", "--need", "2GiB"], "not allowed with argument"),
        (["--max-used", "lots"], "not a size: 'lots'"),
        (["--timeout", "soon"], "not a duration: 'soon'"),
        (["--", "vllm", "serve"], "only used with --kill-stale"),
    ],
)
def test_bad_flags_are_one_line_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    """Bad flag values and combinations give one error line and exit 2."""
    path = write_readings(tmp_path / "gpus.json", [gpu(0, 0)])
    code, _, err = run_guard(["--gpus-from", str(path), *args])
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_missing_readings_file_is_exit_2(tmp_path: Path) -> None:
    """A readings file that does not exist is reported, not a traceback."""
    code, _, err = run_guard(["--gpus-from", str(tmp_path / "nope.json")])
    assert code == 2
    assert "GPU readings file not found" in err


def test_kill_stale_ends_same_cmdline_and_spares_the_foreign(
    tmp_path: Path, sleepers: Sleepers
) -> None:
    """--kill-stale ends the earlier instance of the service and only reports the other holder."""
    stale = sleepers.start("serve-model-a")
    foreign = sleepers.start("someone-elses-job")
    busy = [
        gpu(0, 70 * GiB, [(stale.pid, "python3", 69 * GiB)]),
        gpu(1, 60 * GiB, [(foreign.pid, "python3", 59 * GiB)]),
    ]
    path = write_readings(tmp_path / "gpus.json", busy)

    def release_when_stale_dies() -> None:
        stale.wait(timeout=60)
        write_readings(path, [gpu(0, 100 * MiB), busy[1]])

    releaser = threading.Thread(target=release_when_stale_dies, daemon=True)
    releaser.start()
    code, out, err = run_guard(
        [
            "--gpus-from",
            str(path),
            "--kill-stale",
            "--kill-grace",
            "5s",
            "--interval",
            "0.05s",
            "--timeout",
            "1s",
            "--json",
            "--",
            *Sleepers.argv("serve-model-a"),
        ]
    )
    releaser.join(timeout=60)
    result = json.loads(out)
    assert stale.returncode == -15  # SIGTERM
    assert foreign.poll() is None  # never touched
    assert code == 5
    assert result["killed"] == [
        {
            "pid": stale.pid,
            "name": result["killed"][0]["name"],
            "reason": "runs the service's command line",
            "outcome": "SIGTERM",
        }
    ]
    assert result["gpus"][0]["holders"] == []
    assert [h["pid"] for h in result["gpus"][1]["holders"]] == [foreign.pid]
    assert f"ended stale PID {stale.pid}" in err


def test_kill_stale_escalates_to_sigkill(tmp_path: Path, sleepers: Sleepers) -> None:
    """A stale holder that ignores SIGTERM gets SIGKILL after the grace period."""
    stubborn = sleepers.start("stubborn", "ignore-term")
    path = write_readings(
        tmp_path / "gpus.json", [gpu(0, 70 * GiB, [(stubborn.pid, "python3", 69 * GiB)])]
    )
    code, out, _ = run_guard(
        [
            "--gpus-from",
            str(path),
            "--kill-stale",
            "--kill-grace",
            "0.3s",
            "--interval",
            "0.05s",
            "--timeout",
            "0.2s",
            "--json",
            "--",
            *Sleepers.argv("stubborn", "ignore-term"),
        ]
    )
    assert code == 5  # the readings file still says busy
    assert stubborn.wait(timeout=30) == -9
    assert json.loads(out)["killed"][0]["outcome"] == "SIGKILL"


def test_kill_stale_without_proof_touches_nothing(tmp_path: Path, sleepers: Sleepers) -> None:
    """With --kill-stale but no service command and no unit, holders are only reported."""
    holder = sleepers.start("innocent")
    path = write_readings(
        tmp_path / "gpus.json", [gpu(0, 70 * GiB, [(holder.pid, "python3", 69 * GiB)])]
    )
    code, out, err = run_guard(
        ["--gpus-from", str(path), "--kill-stale", "--timeout", "0.1s", "--json"]
    )
    assert code == 5
    assert holder.poll() is None
    assert json.loads(out)["killed"] == []
    assert "no holder can be proved stale" in err


def test_impossible_need_is_refused_at_once_with_exit_2(tmp_path: Path) -> None:
    """--need above a GPU's whole memory can never be met: exit 2 at the first reading
    (not after --timeout), one line naming the GPU and the guard's own flags."""
    path = write_readings(
        tmp_path / "gpus.json",
        [gpu(0, 0, total_bytes=95 * GiB), gpu(1, 0, total_bytes=95 * GiB)],
    )
    code, out, err = run_guard(["--gpus-from", str(path), "--need", "1TB", "--timeout", "1h"])
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "--need 931.32 GiB can never be free: GPU 0, GPU 1 have 95.00 GiB" in err
    assert "--need below 95.00 GiB" in err
    assert "--gpus LIST" in err
    assert "--max-used" in err


def test_need_within_the_total_still_waits(tmp_path: Path) -> None:
    """A --need that fits the total but not the free memory is a wait, not a refusal."""
    path = write_readings(tmp_path / "gpus.json", [gpu(0, 60 * GiB, total_bytes=95 * GiB)])
    code, _, _ = run_guard(["--gpus-from", str(path), "--need", "90GiB", "--timeout", "0s"])
    assert code == 5


def test_nvml_hint_names_only_the_guards_own_flags() -> None:
    """Without a driver the guard's hint names --gpus-from, never plan's --gpu."""
    from bringup.adapters.gpus import open_source

    source = open_source(None)
    assert "--gpus-from FILE" in source.hint  # type: ignore[attr-defined]
    assert "--gpu " not in source.hint  # type: ignore[attr-defined]


def test_a_machine_without_gpus_has_nothing_to_wait_for(tmp_path: Path) -> None:
    """A CPU server (vLLM's CPU build under a unit): zero GPUs is free at once, exit 0."""
    path = write_readings(tmp_path / "gpus.json", [])
    code, out, err = run_guard(["--gpus-from", str(path)])
    assert (code, out.strip(), err) == (0, "no GPU on this machine: nothing to wait for", "")
    code, _, err = run_guard(["--gpus-from", str(path), "--gpus", "0"])
    assert code == 2  # naming a GPU that is not there is still a mistake
