"""The pre-flight probe bringup runs on every node (``python3 -c SCRIPT ARGS_JSON``).

Standard library only, and it never imports the engine: the versions come from the
engine interpreter's package metadata (tens of milliseconds, where ``import vllm`` takes
seconds). It prints one JSON object. With ``{"listen": [addr, port, seconds]}`` it instead
listens on the master address for the other nodes' connect test, prints ``LISTENING`` (or
``LISTEN-ERROR <why>``) and serves until stdin closes or the time is up.

Model files are identified by a digest that is cheap for a 500 GB checkpoint: files up to
16 MiB whole; weight files by their header and three 64 KiB slices (start, middle, end) of
the data, so two nodes with other weights at the same path differ.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import time

SMALL = 16 * 2**20
SLICE = 64 * 1024
VERSIONS = """
import json, sys, platform
from importlib import metadata
out = {}
for name in json.loads(sys.argv[1]):
    try:
        out[name] = metadata.version(name)
    except Exception:
        out[name] = None
print(json.dumps({"python_version": platform.python_version(), "packages": out}))
"""


def interfaces() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    ip = shutil.which("ip") or ("/usr/sbin/ip" if os.path.exists("/usr/sbin/ip") else None)
    if ip:
        try:
            text = subprocess.run(
                [ip, "-o", "addr", "show"], capture_output=True, text=True, timeout=10
            ).stdout
            for name in os.listdir("/sys/class/net"):
                found.setdefault(name, [])
            for line in text.splitlines():
                parts = line.split()
                if len(parts) >= 4 and parts[2] in ("inet", "inet6"):
                    name = parts[1].split("@")[0]
                    found.setdefault(name, []).append(parts[3].split("/")[0])
            return found
        except (OSError, subprocess.SubprocessError):
            pass
    for name in os.listdir("/sys/class/net") if os.path.isdir("/sys/class/net") else []:
        found[name] = []
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                packed = struct.pack("256s", name.encode()[:15])
                addr = fcntl.ioctl(s.fileno(), 0x8915, packed)[20:24]  # SIOCGIFADDR
                found[name].append(socket.inet_ntoa(addr))
        except OSError:
            pass
    return found


def engine_facts(program: str, packages: list[str]) -> dict[str, object]:
    path = program if "/" in program else shutil.which(program)
    if not path or not os.access(path, os.X_OK):
        return {"path": None}
    python = path
    if not os.path.basename(path).startswith("python"):
        try:
            with open(path, "rb") as f:
                first = f.readline(512).decode("utf-8", "replace").strip()
        except OSError:
            first = ""
        if first.startswith("#!"):
            words = first[2:].split()
            python = (
                words[1] if words and words[0].endswith("/env") and len(words) > 1 else words[0]
            )
            python = shutil.which(python) or python
    out: dict[str, object] = {"path": os.path.realpath(path), "python": python}
    try:
        proc = subprocess.run(
            [python, "-c", VERSIONS, json.dumps(packages)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        out["error"] = f"cannot read the engine's versions with {python}: {exc}"
    return out


def resolve_model(model: str) -> tuple[str | None, str | None]:
    path = os.path.expanduser(model)
    if os.path.exists(path):
        return os.path.realpath(path), None
    if model.startswith(("/", ".", "~")) or model.count("/") != 1:
        return None, "no such file or folder"
    hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub"
    )
    repo = os.path.join(hub, "models--" + model.replace("/", "--"))
    snapshots = os.path.join(repo, "snapshots")
    if not os.path.isdir(snapshots):
        return None, "download"
    try:
        with open(os.path.join(repo, "refs", "main")) as f:
            snap = os.path.join(snapshots, f.read().strip())
        if os.path.isdir(snap):
            return snap, None
    except OSError:
        pass
    names = sorted(
        os.listdir(snapshots), key=lambda n: os.path.getmtime(os.path.join(snapshots, n))
    )
    return (os.path.join(snapshots, names[-1]), None) if names else (None, "download")


def digest(path: str, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        if size <= SMALL:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            return h.hexdigest()
        start = 0
        if path.endswith(".safetensors"):
            head = f.read(8)
            h.update(head)
            if len(head) == 8:
                n = int.from_bytes(head, "little")
                if n < 100 * 2**20:
                    h.update(f.read(n))
                    start = 8 + n
        for offset in (start, start + (size - start) // 2, max(size - SLICE, start)):
            f.seek(offset)
            h.update(f.read(SLICE))
    return h.hexdigest()


def model_facts(model: str) -> dict[str, object]:
    path, error = resolve_model(model)
    if path is None:
        return {"path": None, "files": None, "error": error}
    files: dict[str, dict[str, object]] = {}
    try:
        if os.path.isfile(path):
            entries = [(os.path.basename(path), path)]
        else:
            entries = []
            for root, dirs, names in os.walk(path, followlinks=True):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(names):
                    if not name.startswith("."):
                        full = os.path.join(root, name)
                        entries.append((os.path.relpath(full, path), full))
        for rel, full in entries:
            size = os.path.getsize(full)
            files[rel] = {"size": size, "digest": digest(full, size)}
    except OSError as exc:
        return {"path": path, "files": None, "error": f"cannot read it: {exc.strerror or exc}"}
    return {"path": path, "files": files, "error": None}


def gpu_facts() -> dict[str, object]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {"count": None, "error": "nvidia-smi not found"}
    try:
        text = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"count": None, "error": str(exc)}
    count = sum(1 for line in text.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = min(count, len([v for v in visible.split(",") if v.strip()]))
    return {"count": count, "error": None}


def connect(addr: str, port: int) -> dict[str, object]:
    try:
        with socket.create_connection((addr, port), timeout=5):
            return {"ok": True, "error": None}
    except OSError as exc:
        return {"ok": False, "error": exc.strerror or str(exc) or type(exc).__name__}


def listen(addr: str, port: int, seconds: float) -> None:
    try:
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        # as torch's store does; and the clients close first, so no TIME_WAIT is left on the port
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((addr, port))
        server.listen(64)
    except OSError as exc:
        why = "port in use" if exc.errno == 98 else (exc.strerror or str(exc))
        print(f"LISTEN-ERROR {why}", flush=True)
        return
    print("LISTENING", flush=True)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select([server, sys.stdin], [], [], 0.5)
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1024):
            break
        if server in ready:
            conn, _ = server.accept()
            conn.settimeout(2.0)
            with contextlib.suppress(OSError):
                conn.recv(1)  # until the client closes
            conn.close()
    server.close()


def main() -> None:
    args = json.loads(sys.argv[1])
    if "listen" in args:
        addr, port, seconds = args["listen"]
        listen(addr, int(port), float(seconds))
        return
    out: dict[str, object] = {}
    name = socket.gethostname()
    out["hostname"] = name
    try:
        out["hostname_addresses"] = sorted({i[4][0] for i in socket.getaddrinfo(name, None)})
    except OSError:
        out["hostname_addresses"] = []
    out["interfaces"] = interfaces()
    out["env"] = {
        k: os.environ[k] for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if k in os.environ
    }
    out["offline"] = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes")
    out["engine"] = engine_facts(args["program"], args["packages"])
    if args.get("ray"):  # the Ray CLI, and what its Python (the Ray workers' Python) sees
        out["ray"] = engine_facts("ray", args["packages"])
    out["model"] = model_facts(args["model"]) if args.get("model") else {"files": None}
    out["gpus"] = gpu_facts()
    try:
        st = os.statvfs("/dev/shm")
        out["shm"] = {"total": st.f_blocks * st.f_frsize}
    except OSError:
        out["shm"] = {}
    if args.get("connect"):
        out["connect"] = connect(args["connect"][0], int(args["connect"][1]))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
