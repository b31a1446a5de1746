"""`bringup watch` and its sources: a real log file, a real process, and recorded
systemctl/journalctl/docker outputs replayed by fake executables first on PATH."""

from __future__ import annotations

import json
import os
import queue
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from bringup.adapters.sources.container import ContainerSource
from bringup.adapters.sources.items import ExitItem, LineItem, LinesItem
from bringup.adapters.sources.logfile import FileSource
from bringup.adapters.sources.unit import UnitSource
from bringup.core.journal import journal_message
from run.helpers import cli, events, fake, free_port

OOM = "(EngineCore pid=7) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: CUDA out of memory occurred when warming up sampler with 1024 dummy requests."
BANNER = "(APIServer pid=6) INFO 11-30 09:47:00 [api_server.py:1] vLLM server version 0.33.0, serving model m"


def collect(q: queue.SimpleQueue[Any], want: int, timeout: float = 20.0) -> list[Any]:
    items: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(lines_of(items)) < want and time.monotonic() < deadline:
        try:
            items.append(q.get(timeout=0.1))
        except queue.Empty:
            continue
    return items


def lines_of(items: list[Any]) -> list[str]:
    """The lines of one item each or of several (a file source emits what one read found)."""
    out: list[str] = []
    for i in items:
        if isinstance(i, LineItem):
            out.append(i.text)
        elif isinstance(i, LinesItem):
            out.extend(i.texts)
    return out


def test_file_source_follows_renames_and_truncation(tmp_path: Path):
    """Like tail -F: every line once, across a rename (rotation) and a truncation."""
    log = tmp_path / "server.log"
    log.write_text("one\ntwo\n")
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    src = FileSource(str(log), poll_seconds=0.02)
    src.start(q.put)
    try:
        got = collect(q, 2)
        with log.open("a") as f:
            f.write("three\npart")
        got += collect(q, 1)
        with log.open("a") as f:
            f.write("ial\n")
        got += collect(q, 1)
        log.rename(tmp_path / "server.log.1")
        log.write_text("five\n")
        got += collect(q, 1)
        time.sleep(0.2)
        log.write_text("")  # truncated
        time.sleep(0.2)
        log.write_text("six\n")
        got += collect(q, 1)
    finally:
        src.stop(0)
    assert lines_of(got) == ["one", "two", "three", "partial", "five", "six"]


def test_watch_log_failure_verdict(tmp_path: Path):
    """watch --log: a root-cause line in a followed file gives failed, exit 1, with its class."""
    log = tmp_path / "vllm.log"
    log.write_text(BANNER + "\n" + OOM + "\n")
    code, out, _ = cli(
        ["watch", "--log", str(log), "--json", "--url", f"http://127.0.0.1:{free_port()}"]
    )
    summary = events(out)[-1]
    assert code == 1
    assert summary["failure"]["class"] == "cuda_oom"


def test_watch_pid_ready_and_never_signals():
    """watch --pid on a server bringup did not start: ready through the probes; the server lives on."""
    port = free_port()
    server = subprocess.Popen(
        fake("ready", port, "--shards", "0"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        code, out, _ = cli(["watch", "--pid", str(server.pid), "--json"])
        assert code == 0
        assert events(out)[-1]["outcome"] == "ready"
        assert server.poll() is None
    finally:
        server.kill()
        server.wait()


def test_watch_pid_death_is_failure():
    """watch --pid: the process ending before ready is a failure (exit 1)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    code, out, _ = cli(
        ["watch", "--pid", str(proc.pid), "--json", "--url", f"http://127.0.0.1:{free_port()}"]
    )
    proc.wait()
    assert code == 1
    assert events(out)[-1]["outcome"] == "failed"


def test_watch_pid_missing_is_usage_error():
    """watch --pid with no such process: exit 2, one line."""
    pid = 2**22 + 12345
    assert not psutil.pid_exists(pid)
    code, _, err = cli(["watch", "--pid", str(pid)])
    assert code == 2
    assert f"no process with pid {pid}" in err


def _script(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _journal_entries(n: int) -> list[dict[str, Any]]:
    entries = [
        {"__CURSOR": f"s=abc;i={i}", "MESSAGE": f"line {i}", "_SYSTEMD_INVOCATION_ID": "inv1"}
        for i in range(n)
    ]
    entries[2]["MESSAGE"] = list(
        "bytes \xff line 2".encode("latin-1")
    )  # not UTF-8: an array of bytes
    return entries


def fake_systemd(tmp_path: Path, entries: list[dict[str, Any]], split: int) -> tuple[Path, Path]:
    """systemctl show from a state file; journalctl replays entries, disconnecting after ``split``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    state = tmp_path / "state.txt"
    state.write_text(
        "ActiveState=activating\nSubState=start\nMainPID=4242\nInvocationID=inv1\nExecMainStatus=0\nExecMainCode=0\nLoadState=loaded\n"
        "ExecStart={ path=/usr/bin/vllm ; argv[]=/usr/bin/vllm serve m --port 1 ; ignore_errors=no }\n"
    )
    (tmp_path / "entries.json").write_text(json.dumps(entries))
    _script(bin_dir, "systemctl", f"import sys\nprint(open({str(state)!r}).read(), end='')\n")
    _script(
        bin_dir,
        "journalctl",
        f"""
import json, sys, time
argv = sys.argv[1:]
open({str(calls)!r}, "a").write(" ".join(argv) + "\\n")
entries = json.load(open({str(tmp_path / "entries.json")!r}))
if "--after-cursor" in argv:
    cursor = argv[argv.index("--after-cursor") + 1]
    start = [e["__CURSOR"] for e in entries].index(cursor) + 1
    chunk = entries[start:]
else:
    chunk = entries[:{split}]
for e in chunk:
    print(json.dumps(e), flush=True)
if "--after-cursor" in argv:
    time.sleep(60)
""",
    )
    return bin_dir, state


def test_unit_source_reconnects_after_cursor_without_loss_or_repeat(tmp_path: Path):
    """The journal follower resumes after the last __CURSOR: no line lost, none shown twice."""
    entries = _journal_entries(6)
    bin_dir, state = fake_systemd(tmp_path, entries, split=3)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    src = UnitSource("vllm.service", env, poll_seconds=0.05)
    src.start(q.put)
    try:
        got = collect(q, 6)
        state.write_text(
            state.read_text()
            .replace("activating", "failed")
            .replace("ExecMainStatus=0", "ExecMainStatus=1")
            .replace("ExecMainCode=0", "ExecMainCode=1")
        )
        deadline = time.monotonic() + 10
        while not any(isinstance(i, ExitItem) for i in got) and time.monotonic() < deadline:
            try:
                got.append(q.get(timeout=0.1))
            except queue.Empty:
                continue
    finally:
        src.stop(0)
    assert lines_of(got) == [
        "line 0",
        "line 1",
        "bytes \ufffd line 2",
        "line 3",
        "line 4",
        "line 5",
    ]
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert "_SYSTEMD_INVOCATION_ID=inv1" in calls[0]
    assert calls[1].endswith("--after-cursor s=abc;i=2")
    assert [i.code for i in got if isinstance(i, ExitItem)] == [1]
    assert src.command() == ["/usr/bin/vllm", "serve", "m", "--port", "1"]


def test_watch_unit_failure_verdict(tmp_path: Path):
    """watch --unit: a root cause in the journal gives failed and exit 1."""
    entries = [
        {"__CURSOR": f"c{i}", "MESSAGE": m, "_SYSTEMD_INVOCATION_ID": "inv1"}
        for i, m in enumerate([BANNER, OOM])
    ]
    bin_dir, _ = fake_systemd(tmp_path, entries, split=2)
    code, out, _ = cli(
        ["watch", "--unit", "vllm.service", "--json"], {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    )
    assert code == 1
    assert events(out)[-1]["failure"]["class"] == "cuda_oom"


def test_watch_container_exit_is_failure(tmp_path: Path):
    """watch --container: docker logs lines (timestamps stripped), then the container exits 0 before ready: failed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    count = tmp_path / "inspects"
    _script(
        bin_dir,
        "docker",
        f"""
import json, os, sys
argv = sys.argv[1:]
if argv[0] == "inspect":
    n = int(open({str(count)!r}).read()) if os.path.exists({str(count)!r}) else 0
    open({str(count)!r}, "w").write(str(n + 1))
    running = n == 0
    print(json.dumps([{{"State": {{"Status": "running" if running else "exited", "Running": running, "ExitCode": 0}},
                       "Config": {{"Entrypoint": ["vllm"], "Cmd": ["serve", "m", "--port", "1"]}}}}]))
elif argv[0] == "logs":
    print("2026-11-30T09:47:00.000000000Z {BANNER}", flush=True)
    print("2026-11-30T09:47:01.000000000Z (EngineCore pid=7) INFO 11-30 09:47:01 [core.py:139] vLLM is using nccl==2.21.5", flush=True)
""",
    )
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    src = ContainerSource("llm", env)
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    src.start(q.put)
    items = collect(q, 2)
    while not any(isinstance(i, ExitItem) for i in items):
        items.append(q.get(timeout=10))
    assert lines_of(items)[0] == BANNER
    assert src.command() == ["vllm", "serve", "m", "--port", "1"]
    count.unlink()
    code, out, _ = cli(["watch", "--container", "llm", "--json"], env)
    assert code == 1
    assert events(out)[-1]["phase"] == "distributed_init"


def test_journal_message_forms():
    """A journal MESSAGE is a string, an array of bytes, or absent."""
    assert journal_message("x") == "x"
    assert journal_message([104, 105]) == "hi"
    assert journal_message(None) is None


LOADING = (
    "(EngineCore pid=9) INFO 11-30 09:50:03 [gpu_model_runner.py:4327] Starting to load model m..."
)
BANNER_2 = BANNER.replace("pid=6", "pid=8").replace("09:47:00", "09:50:00")


def test_watch_log_follows_only_the_newest_attempt(tmp_path: Path):
    """A log that holds a failed attempt and a new one still loading: watch follows the new
    one (no old failure taken for this run's), says so once, and stalls on the new attempt."""
    log = tmp_path / "vllm.log"
    log.write_text("\n".join([BANNER, LOADING, OOM, BANNER_2, LOADING]) + "\n")
    code, out, err = cli(
        [
            "watch",
            "--log",
            str(log),
            "--json",
            "--stall",
            "2s",
            "--url",
            f"http://127.0.0.1:{free_port()}",
        ]
    )
    summary = events(out)[-1]
    assert code == 4, out[-2000:]
    assert summary["outcome"] == "stalled"
    assert summary["failure"]["class"] == "timeouts"
    assert "holds 2 attempts: following the newest (its first 2 lines)" in err
    code, out, _ = cli(  # every attempt, as before: the old attempt's OOM is the verdict
        [
            "watch",
            "--log",
            str(log),
            "--json",
            "--from-start",
            "--url",
            f"http://127.0.0.1:{free_port()}",
        ]
    )
    assert (code, events(out)[-1]["failure"]["class"]) == (1, "cuda_oom")


def test_file_source_from_end_takes_only_new_lines(tmp_path: Path):
    """start="end" (`watch --log FILE --from-end`): nothing already in the file, every new line."""
    log = tmp_path / "server.log"
    log.write_text(f"{BANNER}\n{OOM}\n")
    q: queue.SimpleQueue[Any] = queue.SimpleQueue()
    src = FileSource(str(log), poll_seconds=0.02, start="end")
    src.start(q.put)
    try:
        time.sleep(0.3)
        with log.open("a") as f:
            f.write(BANNER_2 + "\n")
        got = collect(q, 1)
    finally:
        src.stop(0)
    assert lines_of(got) == [BANNER_2]


def test_from_end_only_applies_to_a_log(tmp_path: Path):
    code, _, err = cli(["watch", "--pid", "1", "--from-end"])
    assert code == 2
    assert "apply to --log FILE only" in err


def test_a_phases_late_progress_line_is_not_shown_after_the_next_phase(tmp_path: Path):
    """The last shard's progress line (tqdm, on stderr) read after "Model loading took" (the
    next phase, on stdout): no `loading weights 2/2` after `phase weights_loaded`, a step
    back; the progress lines before it still show."""
    log = tmp_path / "vllm.log"
    log.write_text(
        "\n".join(
            [
                BANNER,
                "(EngineCore pid=7) INFO 11-30 09:47:03 [gpu_model_runner.py:4327] Starting to load model m...",
                "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00it/s]",
                "(EngineCore pid=7) INFO 11-30 09:47:05 [gpu_model_runner.py:4400] Model loading took 1.50 GiB memory and 2.000000 seconds",
                "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00,  1.00it/s]",
            ]
        )
        + "\n"
    )
    code, out, _ = cli(
        [
            "watch",
            "--log",
            str(log),
            "--quiet",
            "--stall",
            "2s",
            "--url",
            f"http://127.0.0.1:{free_port()}",
        ]
    )
    assert code == 4
    said = [line.split("] ", 1)[-1] for line in out.splitlines()]
    loaded = said.index("phase weights_loaded: weights loaded")
    assert "loading weights 1/2 shards" in said[:loaded]
    assert not [s for s in said[loaded:] if s.startswith("loading weights")]
