"""`bringup watch --unit` against a real systemd 252: attached while the unit is loading, and
attached while systemd waits to restart it after a failed run. Each watch reaches the verdict
of the run it follows; no line of an earlier run (same unit, same journal) is taken as its."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from systemd_real.conftest import BRINGUP, free_port, install_twin, readings, twin_command, unique

from builders.systemd_ns import SystemdNamespace


def _watch(sd: SystemdNamespace, unit: str, gpus: Path) -> subprocess.Popen[str]:
    """`bringup watch --unit` as its own process (it is attached at a chosen moment)."""
    return subprocess.Popen(
        [BRINGUP, "watch", "--unit", unit, "--deadline", "120s", "--gpus-from", str(gpus)],
        env=sd.env({"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _until(what: str, predicate: object, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.1)


def test_watch_attached_during_auto_restart_and_mid_load_follows_this_run(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """Run 1 dies at bind (the test holds the port: OSError [Errno 98]); systemd waits 15 s to
    restart it (4 s let run 2 begin before the watch had attached at load 18). A watch attached
    in that wait follows run 2, not run 1's failure; the port is then freed, and a second watch
    attached while run 2 loads its weights follows it too.
    Both end ready (exit 0), neither reports the bind error run 1 wrote in the same journal."""
    name = unique("i13-watch")
    unit = f"{name}.service"
    gpus = readings(workdir)
    port = free_port()
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    squatter.listen(1)
    command = twin_command(port, gpus, "ready", "--time-scale", "0.03")
    install_twin(systemd, name, command, gpus, "--restart-sec", "15s")
    try:
        systemd.start_unit(unit, block=False)
        systemd.wait_for(unit, lambda s: s["SubState"] == "auto-restart", timeout=90)
        first = systemd.show(unit, "InvocationID")["InvocationID"]
        assert "Errno 98" in systemd.journal(unit)
        waiting = _watch(systemd, unit, gpus)
        assert waiting.stdout is not None
        # the watch says it waits for the next run before the port is freed for that run
        seen = waiting.stdout.readline()
        lines = [seen]
        while "next run" not in seen:
            seen = waiting.stdout.readline()
            assert seen, "".join(lines)
            lines.append(seen)
        assert systemd.show(unit, "InvocationID")["InvocationID"] == first, "".join(lines)
    finally:
        squatter.close()
    _until("run 2 loads its weights", lambda: "Loading safetensors" in systemd.journal(unit))
    assert systemd.show(unit, "ActiveState")["ActiveState"] == "activating"
    loading = _watch(systemd, unit, gpus)
    out_waiting = "".join(lines) + waiting.communicate(timeout=150)[0]
    out_loading = loading.communicate(timeout=150)[0]
    assert waiting.returncode == 0, out_waiting
    assert loading.returncode == 0, out_loading
    for out in (out_waiting, out_loading):
        assert "READY" in out, out
        assert "Errno 98" not in out, out
        assert "FAILED" not in out, out
        assert f"127.0.0.1:{port}" in out, out
    systemd.systemctl("stop", unit)


def test_watch_reports_the_exit_of_its_run_not_the_next_runs_state(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """A server that exits 3 without a root-cause line, Restart=on-failure: the watch attached
    to that run ends failed with ITS exit status as systemd recorded it (the unit's main
    process, `bringup run`, exits 1 for a failed start), seen in auto-restart, not the next
    run's state (before: "exit code 0", "unit ... is activating")."""
    name = unique("i13-exit")
    unit = f"{name}.service"
    gpus = readings(workdir)
    script = workdir / "server.sh"
    script.write_text("#!/bin/sh\necho 'INFO loading the model'\nsleep 3\nexit 3\n")
    script.chmod(0o755)
    # a long RestartSec=: the watch (polling each second) sees the auto-restart wait itself
    install_twin(
        systemd, name, [str(script), "--port", str(free_port())], gpus, "--restart-sec", "30s"
    )
    systemd.start_unit(unit, block=False)
    _until("the run logs", lambda: "loading the model" in systemd.journal(unit))
    watch = _watch(systemd, unit, gpus)
    out = watch.communicate(timeout=150)[0]
    assert watch.returncode == 1, out
    assert "(exit code 1)" in out, out
    assert f"unit {unit} is activating/auto-restart" in out, out
    systemd.systemctl("stop", unit)


FAKE_OLLAMA = Path(__file__).resolve().parents[1] / "run" / "fake_ollama.py"


def _ollama_unit(
    sd: SystemdNamespace, folder: Path, port: int, post: str, *, start: bool = True
) -> str:
    """A unit serving the Ollama stand-in (`ollama serve`, OLLAMA_HOST); ``post``: its
    ExecStartPost= arguments to `ollama` (its `pull` is a no-op here), or "" for none."""
    exe = folder / "bin" / "ollama"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(
        f'#!/bin/sh\n[ "$1" = pull ] && exit 0\nexec "{sys.executable}" "{FAKE_OLLAMA}" "$@"\n'
    )
    exe.chmod(0o755)
    unit = f"{unique('i22-ollama')}.service"
    lines = ["[Service]", f"Environment=OLLAMA_HOST=127.0.0.1:{port} FAKE_OLLAMA_LOAD_SECONDS=0.3"]
    lines.append(f"ExecStart={exe} serve")
    if post:
        lines.append(f"ExecStartPost={exe} {post}")
    (sd.etc / unit).write_text("\n".join(lines) + "\n")
    sd.systemctl("daemon-reload")
    if start:
        sd.start_unit(unit)
    return unit


def test_watch_ollama_unit_takes_the_model_from_the_unit_or_asks_for_it(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """`watch --unit` of an Ollama unit without --model: the model its ExecStartPost= pulls is
    the one the smoke request names (and loads), at the OLLAMA_HOST of its Environment=:
    ready. A unit that names none: one line that the smoke request needs --model, exit 2
    (before: probes with no model, at the default port, never ready)."""
    gpus = readings(workdir)
    port = free_port()
    unit = _ollama_unit(systemd, workdir, port, "pull tiny:1b")
    try:
        done = subprocess.run(
            [BRINGUP, "watch", "--unit", unit, "--json", "--deadline", "60s",
             "--gpus-from", str(gpus)],
            env=systemd.env({"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
        summary = json.loads(done.stdout.splitlines()[-1])
        assert summary["outcome"] == "ready"
        smoke = [e for e in map(json.loads, done.stdout.splitlines()) if e.get("probe") == "smoke"]
        assert smoke[-1]["ok"], smoke
        assert smoke[-1]["model"] == "tiny:1b", smoke
    finally:
        systemd.systemctl("stop", unit)
    unit = _ollama_unit(systemd, workdir, free_port(), "")
    try:
        done = subprocess.run(
            [BRINGUP, "watch", "--unit", unit, "--deadline", "60s", "--gpus-from", str(gpus)],
            env=systemd.env({"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        said = [line for line in done.stderr.splitlines() if line.startswith("bringup: error:")]
        want = (
            "bringup: error: the smoke request needs --model: ollama loads its model at the "
            f"first request that names it, and neither the command line nor unit {unit} "
            "names one (give the model to load and ask with --model NAME; `ollama list` shows them)"
        )
        assert said == [want], done.stderr
    finally:
        systemd.systemctl("stop", unit)
    unit = _ollama_unit(systemd, workdir, free_port(), "", start=False)
    done = subprocess.run(  # `up` says the same before it starts anything
        [BRINGUP, "up", unit, "--deadline", "60s", "--gpus-from", str(gpus)],
        env=systemd.env({"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the smoke request needs --model" in done.stderr
    assert systemd.show(unit, "ActiveState")["ActiveState"] == "inactive"


def test_watch_ollama_unit_written_by_bringup_reads_its_model(
    systemd: SystemdNamespace, workdir: Path
) -> None:
    """`bringup unit --model` writes `bringup run --notify --model NAME -- ollama serve`:
    systemd marks it active only once that model answered, and `watch --unit` (no --model)
    takes the model from that ExecStart=: ready, its smoke request naming it."""
    gpus = readings(workdir)
    port = free_port()
    exe = workdir / "bin" / "ollama"
    exe.parent.mkdir(exist_ok=True)
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_OLLAMA}" "$@"\n')
    exe.chmod(0o755)
    name = unique("i22-bollama")
    install_twin(systemd, name, [str(exe), "serve"], gpus, "--model", "tiny:1b",
                 "--env", f"OLLAMA_HOST=127.0.0.1:{port}")  # fmt: skip
    unit = f"{name}.service"
    try:
        systemd.start_unit(unit)  # Type=notify: returns at READY=1, once tiny:1b answered
        done = subprocess.run(
            [BRINGUP, "watch", "--unit", unit, "--json", "--deadline", "60s",
             "--gpus-from", str(gpus)],
            env=systemd.env({"PATH": "/usr/bin:/bin", "NO_COLOR": "1"}),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
        events = [json.loads(line) for line in done.stdout.splitlines()]
        smoke = [e for e in events if e.get("probe") == "smoke"]
        assert smoke[-1]["ok"], smoke
        assert smoke[-1]["model"] == "tiny:1b"
        assert smoke[-1]["url"].startswith(f"http://127.0.0.1:{port}/"), smoke
    finally:
        systemd.systemctl("stop", unit)
