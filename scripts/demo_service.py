"""``make demo-service``: the seed's story as a service, against a real systemd 252.

A systemd boots as PID 1 of its own namespaces (tests/builders/systemd_ns.py); bringup reaches
it only through ``BRINGUP_COMMAND_PREFIX``. The engine twin plays MiniMax-M2.5 in FP8 with
tensor parallel 4 on four 96 GB GPUs, whose sampler warmup runs out of memory at
``--max-num-seqs 1024``:

1. ``bringup unit minimax --install -- bringup twin vllm --scenario oom_warmup ...``
2. ``bringup up minimax``: while ``systemctl is-active`` says activating, ``up`` says FAILED
   with the sampler-warmup OOM and the remedy (``--max-num-seqs 256``);
3. ``bringup up minimax --retry 1``: the drop-in, daemon-reload, the change checked in systemd,
   restart, ready.

Needs root (namespaces); elsewhere it says so in one line and exits 0.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from builders.systemd_ns import BootError, SystemdNamespace, why_not  # noqa: E402

BRINGUP = str(Path(sys.executable).with_name("bringup"))
UNIT = "minimax"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def say(text: str) -> None:
    print(text, flush=True)


def bringup(sd: SystemdNamespace, *args: str, show: bool = True) -> int:
    """Run bringup with its runner pointed at ``sd``; its own lines shown, the echoed server
    lines left out unless they carry the root cause."""
    say(f"$ bringup {' '.join(args)}")
    proc = subprocess.Popen(
        [BRINGUP, *args], env=sd.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if show and (line.startswith("bringup") or "CUDA out of memory occurred" in line):
            sys.stdout.write("  " + line)
    return proc.wait()


def main(time_scale: str = "0.02") -> int:
    reason = why_not()
    if reason is not None:
        say(f"demo-service: a real systemd cannot boot here ({reason}); try `make demo` instead")
        return 0
    work = Path(tempfile.mkdtemp(prefix="bringup-demo-service-"))
    try:
        try:
            sd = SystemdNamespace.start(work / "systemd", name="bringup-demo-service")
        except BootError as exc:
            say(f"demo-service: a real systemd cannot boot here ({exc}); try `make demo` instead")
            return 0
        try:
            return story(sd, work, time_scale)
        finally:
            sd.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)  # the demo's unit, journal and readings


def story(sd: SystemdNamespace, work: Path, time_scale: str) -> int:
    from bringup.demo import write_readings

    gpus = work / "gpus.json"
    write_readings(gpus)
    say(f"systemd 252 booted as PID 1 of its own namespaces (host pid {sd.pid})")
    code = bringup(
        sd,
        "unit", UNIT, "--install", "--gpus-from", str(gpus), "--bringup", BRINGUP,
        "--restart-sec", "30s", "--",
        BRINGUP, "twin", "vllm", "--scenario", "oom_warmup", "--port", str(free_port()),
        "--host", "127.0.0.1", "--gpus-file", str(gpus), "--time-scale", time_scale,
    )  # fmt: skip
    if code != 0:
        return code
    seen: list[str] = []
    stop = threading.Event()

    def watch_systemd() -> None:
        while not stop.is_set():
            state = sd.systemctl("is-active", f"{UNIT}.service", check=False).stdout.strip()
            if not seen or seen[-1] != state:
                seen.append(state)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch_systemd, daemon=True)
    watcher.start()
    failed = bringup(sd, "up", UNIT, "--gpus-from", str(gpus), "--deadline", "5m")
    at_verdict = sd.systemctl("is-active", f"{UNIT}.service", check=False).stdout.strip()
    stop.set()
    watcher.join()
    say(f"  (exit {failed}; meanwhile `systemctl is-active {UNIT}` said: {', '.join(seen)}; "
        f"at the verdict: {at_verdict})")  # fmt: skip
    status = sd.systemctl("status", f"{UNIT}.service", "--no-pager", "-n", "0", check=False)
    say("$ systemctl status minimax  (at that moment)")
    for line in status.stdout.splitlines()[:4]:
        say("  " + line)
    ready = bringup(sd, "up", UNIT, "--retry", "1", "--gpus-from", str(gpus), "--deadline", "5m")
    say(f"  (exit {ready})")
    active = sd.systemctl("is-active", f"{UNIT}.service", check=False).stdout.strip()
    say(f"$ systemctl is-active {UNIT}\n  {active}")
    sd.systemctl("stop", f"{UNIT}.service", check=False)
    ok = (
        failed == 1 and at_verdict in ("activating", "active") and ready == 0 and active == "active"
    )
    say("demo-service: the story as told" if ok else "demo-service: the story did NOT go as told")
    return 0 if ok else 1


if __name__ == "__main__":
    if os.environ.get("BRINGUP_DEMO_TIME_SCALE"):
        sys.exit(main(os.environ["BRINGUP_DEMO_TIME_SCALE"]))
    sys.exit(main())
