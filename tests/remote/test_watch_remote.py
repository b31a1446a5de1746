"""watch --host follows a unit's journal or a log file over ssh, across dropped connections."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders.sshd import REPO, SshServer, require_sshd, running_sshd, ssh_env, write_ssh_config

OOM = (
    "(EngineCore pid=2) ERROR 11-30 09:47:02 [core.py:700] torch.OutOfMemoryError: CUDA out of memory "
    "occurred when warming up sampler with 1024 dummy requests."
)

JOURNALCTL = """
import json, os, select, sys, time
argv = sys.argv[1:]
parent = os.getppid()
hangup = select.poll()
hangup.register(sys.stdout.fileno(), 0)  # POLLERR/POLLHUP only: the reader went away
open(CALLS, "a").write(" ".join(argv) + "\\n")
seen = 0
if "--after-cursor" in argv:
    cursor = argv[argv.index("--after-cursor") + 1]
    seen = int(cursor.removeprefix("c")) + 1
while True:  # follow the entries file like journalctl -f
    lines = open(ENTRIES).read().splitlines()
    for line in lines[seen:]:
        print(line, flush=True)
    seen = max(seen, len(lines))
    # like journalctl -f, end when nobody reads any more (else a fake that never writes again
    # outlives its ssh session: make test left one running)
    if hangup.poll(0) or os.getppid() != parent:
        sys.exit(0)
    time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SshServer, Path, Path]]:
    """An sshd whose sessions find fake journalctl/systemctl first on PATH; its ssh_config; the fakes' folder."""
    require_sshd()
    base = tmp_path_factory.mktemp("watch")
    bin_dir = base / "bin"
    bin_dir.mkdir()
    consts = f"CALLS = {str(base / 'calls.txt')!r}\nENTRIES = {str(base / 'entries.jsonl')!r}\n"
    _script(bin_dir / "journalctl", consts + JOURNALCTL)
    _script(bin_dir / "systemctl", f"print(open({str(base / 'state.txt')!r}).read(), end='')\n")
    with running_sshd(base / "sshd", extra_path=bin_dir) as server:
        yield server, write_ssh_config(server, base / "config"), base


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(0o755)


class Watch:
    """``bringup watch ... --host`` in a subprocess; its output lines collected as they come."""

    def __init__(self, args: list[str], config: Path) -> None:
        env = {**ssh_env(config), "PYTHONPATH": str(REPO / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bringup", "watch", *args],
            env=env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout_seconds: float = 30.0) -> None:
        end = time.monotonic() + timeout_seconds
        while not any(text in line for line in self.lines):
            assert time.monotonic() < end, f"no {text!r} in {self.lines[-20:]}"
            assert self.proc.poll() is None or self.reader.is_alive(), (
                f"watch ended: {self.lines[-20:]}"
            )
            time.sleep(0.05)

    def finish(self) -> int:
        code = self.proc.wait(timeout=60)
        self.reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()


def _drop_connection(server: SshServer) -> None:
    """Kill the per-connection sshd processes: every ssh session to the server ends at once."""
    pids = server.session_pids()
    assert pids, "no ssh connection to drop"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)


def _numbered(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("line ")]


def _watch_args(server: SshServer) -> list[str]:
    return [
        "--host",
        server.target_text,
        "--stall",
        "0",
        "--deadline",
        "90s",
        "--url",
        "http://127.0.0.1:1",
    ]


def test_watch_log_survives_a_dropped_connection(
    world: tuple[SshServer, Path, Path], tmp_path: Path
) -> None:
    """watch --log over ssh: after a forced disconnect every line arrives exactly once, in order, and the reconnect is said."""
    server, config, _ = world
    log = tmp_path / "server.log"
    with log.open("w") as f:
        f.writelines(f"line {i:04d}\n" for i in range(40))
    watch = Watch(["--log", str(log), *_watch_args(server)], config)
    try:
        watch.wait_for("line 0039")
        _drop_connection(server)
        with log.open("a") as f:
            f.writelines(f"line {i:04d}\n" for i in range(40, 80))
            f.write(OOM + "\n")
        code = watch.finish()
    finally:
        watch.kill()
    assert code == 1  # the root cause after the reconnect was seen: failed
    assert _numbered(watch.lines) == [f"line {i:04d}" for i in range(80)]
    assert any("reconnected" in line and "resuming" in line for line in watch.lines)
    assert any("CUDA out of memory" in line for line in watch.lines)


def test_watch_unit_resumes_from_the_journal_cursor(world: tuple[SshServer, Path, Path]) -> None:
    """watch --unit over ssh: journalctl runs there; after a disconnect it resumes after the last cursor."""
    server, config, base = world
    (base / "state.txt").write_text(
        "ActiveState=activating\nSubState=start\nMainPID=4242\nInvocationID=inv1\nExecMainStatus=0\n"
        "ExecMainCode=0\nLoadState=loaded\nExecStart={ path=/usr/bin/vllm ; argv[]=/usr/bin/vllm serve m --port 1 ; }\n"
    )
    entries = base / "entries.jsonl"

    def append(first: int, last: int, extra: list[str] = []) -> None:  # noqa: B006 - never mutated
        with entries.open("a") as f:
            for i, message in enumerate(
                [f"line {n:04d}" for n in range(first, last)] + extra, start=first
            ):
                f.write(json.dumps({"__CURSOR": f"c{i}", "MESSAGE": message}) + "\n")

    entries.write_text("")
    append(0, 30)
    watch = Watch(["--unit", "vllm", *_watch_args(server)], config)
    try:
        watch.wait_for("line 0029")
        _drop_connection(server)
        append(30, 60, [OOM])
        code = watch.finish()
    finally:
        watch.kill()
    assert code == 1
    assert _numbered(watch.lines) == [f"line {i:04d}" for i in range(60)]
    assert any("reconnected" in line for line in watch.lines)
    calls = (base / "calls.txt").read_text().splitlines()
    assert "_SYSTEMD_INVOCATION_ID=inv1" in calls[0]
    assert any(call.endswith("--after-cursor c29") for call in calls[1:])


VERSION = (
    "(APIServer pid=1) INFO 11-30 09:46:00 [api_server.py:1800] vLLM API server version 0.11.0"
)
LOADING = "(EngineCore pid=2) INFO 11-30 09:46:10 [gpu_model_runner.py:2000] Starting to load model /models/m..."
KV = (
    "(EngineCore pid=2) ERROR 11-30 09:50:02 [core.py:700] ValueError: To serve at least one request "
    "with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the "
    "available KV cache memory (4.00 GiB). Based on the available memory, the estimated maximum "
    "model length is 32768."
)


def test_watch_log_over_ssh_follows_the_newest_attempt(
    world: tuple[SshServer, Path, Path], tmp_path: Path
) -> None:
    """A log whose first attempt died of the OOM and whose second is loading: over ssh, too,
    the watch follows the second (before: it reported the first attempt's OOM at once). The
    offset counts the file's bytes, not their decoding (the first attempt holds bad UTF-8)."""
    server, config, _ = world
    log = tmp_path / "server.log"
    first = "\n".join([VERSION, LOADING, OOM]).encode() + b"\n\xff\xfe not UTF-8 \xe2\x82\n"
    log.write_bytes(first + ("\n".join([VERSION, LOADING, "line 0000"]) + "\n").encode())
    watch = Watch(["--log", str(log), *_watch_args(server)], config)
    try:
        watch.wait_for("line 0000")
        with log.open("a") as f:
            f.write("line 0001\n" + KV + "\n")
        code = watch.finish()
    finally:
        watch.kill()
    assert code == 1
    out = "\n".join(watch.lines)
    assert "holds 2 attempts: following the newest" in out
    assert "kv_cache" in out, out
    assert "CUDA out of memory" not in out, out
    assert _numbered(watch.lines) == ["line 0000", "line 0001"]


def test_watch_log_over_ssh_from_end(world: tuple[SshServer, Path, Path], tmp_path: Path) -> None:
    """--from-end over ssh: only lines written after the watch began (before: ignored, and
    the OOM already in the file was reported)."""
    server, config, _ = world
    log = tmp_path / "server.log"
    log.write_text("\n".join([VERSION, LOADING, "line 0000", OOM]) + "\n")
    watch = Watch(["--log", str(log), "--from-end", *_watch_args(server)], config)
    try:
        watch.wait_for("from its end")
        with log.open("a") as f:
            f.write("\n".join([VERSION, LOADING, "line 0001", KV]) + "\n")
        code = watch.finish()
    finally:
        watch.kill()
    assert code == 1
    out = "\n".join(watch.lines)
    assert "CUDA out of memory" not in out, out
    assert "kv_cache" in out, out
    assert _numbered(watch.lines) == ["line 0001"]


def test_remote_newest_attempt_reads_only_the_end_of_a_large_log(
    world: tuple[SshServer, Path, Path], tmp_path: Path
) -> None:
    """A 20 MiB log whose newest attempt is its last few lines: over ssh only the first 1 MiB
    read comes over (before: the last 16 MiB), counted in bytes; the offset is exact."""
    from bringup.adapters.sources.items import NoteItem
    from bringup.adapters.sources.remote_file import FIRST_SCAN_BYTES, RemoteFileSource
    from bringup.adapters.ssh import SshRunner

    from builders.sshd import target_for

    server, _, _ = world
    log = tmp_path / "big.log"
    filler = "(EngineCore pid=2) INFO 11-30 09:47:01 [core.py:1] " + "x" * 60 + "\n"
    old = VERSION + "\n" + LOADING + "\n" + filler * ((20 << 20) // len(filler)) + OOM + "\n"
    newest = VERSION + "\n" + LOADING + "\n"
    log.write_text(old + newest)
    source = RemoteFileSource(str(log), SshRunner(target_for(server)))
    notes: list[NoteItem] = []
    source._skip_to_start(notes.append)  # where `watch` begins following, and nothing more
    assert source.scanned_bytes == FIRST_SCAN_BYTES
    assert source.offset_bytes == len(old.encode())  # the newest attempt's first byte
    want = f"{log} holds at least 2 attempts: following the newest (its first 2 lines), "
    assert [n.text for n in notes] == [want + "not the earlier ones"]
