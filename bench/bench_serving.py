"""`bringup bench` measured against servers whose rates are known, and the real llama.cpp server.

1. The engine twin at several token rates (its decode rate per request is set by
   ``--token-rate``): measured single-stream decode and TPOT against the configured rate,
   and output throughput at each concurrency against ``concurrency x rate``.
2. llama-cpp-python's server on a tiny GGUF: what it delivers at concurrency 1, 2, 4, beside
   the plan's decode speed for the GGUF on an L4 (meaningless for a CPU run; it shows the
   arithmetic), and with its default ``interrupt_requests=True``, what happens to
   concurrent streams.

Writes bench/results/bench.md. A measurement, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx2

from bringup.bench_runner import BenchConfig, run_bench
from bringup.cli.commands.bench import predict
from bringup.cli.main import command_parser
from bringup.core.bench_report import BenchReport

HERE = Path(__file__).parent
RESULTS = HERE / "results" / "bench.md"
RATES = (50.0, 200.0, 1000.0)
LEVELS = (1, 4, 16)
OUTPUT = 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(
    argv: list[str],
    port: int,
    log: Path,
    *,
    env: dict[str, str] | None = None,
    ready_seconds: float = 90.0,
    priority: bool = False,
    start_seconds: float | None = None,
) -> Iterator[str]:
    """Start a server process (its own session), wait for /v1/models, stop its whole group.

    The wait for readiness starts when the server first writes to its log (a wrapper may
    wait for a machine-wide slot before it starts the server), which ``start_seconds`` bounds
    (``NotStarted`` past it). ``priority``: give the server's session the highest CPU priority (its scheduler autogroup:
    with autogroups, ``nice`` alone only ranks processes of one session against each other)."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
        if priority:
            prioritize(proc.pid)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + ready_seconds
            give_up = time.monotonic() + start_seconds if start_seconds else None
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"{argv[:5]} exited {proc.returncode}; see {log}")
                if log.stat().st_size == 0:  # still waiting (e.g. for a machine-wide slot)
                    deadline = time.monotonic() + ready_seconds
                    if give_up is not None and time.monotonic() > give_up:
                        raise NotStarted(f"{argv[0]} did not start within {start_seconds:.0f} s")
                if time.monotonic() > deadline:
                    raise SystemExit(f"{argv[:5]} not ready in {ready_seconds:.0f} s; see {log}")
                try:
                    if httpx2.get(f"{url}/v1/models", timeout=1.0).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                time.sleep(0.2)
            yield url
        finally:
            _stop_group(proc)


class NotStarted(Exception):
    """The server (or the wrapper in front of it) did not start in time."""


def prioritize(pid: int) -> None:
    """Nice -20 for ``pid`` and its scheduler autogroup (root; ignored where not allowed)."""
    with suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, -20)
    with suppress(OSError), open(f"/proc/{pid}/autogroup", "w", encoding="ascii") as f:
        f.write("-20")


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group (a wrapper and its children), SIGKILL after 30 s."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def twin_rows(work: Path) -> list[str]:
    rows = [
        "| configured rate (tok/s) | concurrency | requests | measured decode (tok/s/stream) | mean TPOT (ms) | expected TPOT (ms) | output throughput (tok/s) | expected throughput (tok/s) | median TTFT (ms) | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rate in RATES:
        port = _free_port()
        argv = [
            sys.executable,
            "-m",
            "bringup",
            "twin",
            "vllm",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--time-scale",
            "0.01",
            "--token-rate",
            str(rate),
            "--gpus-file",
            str(work / f"gpus-{rate:.0f}.json"),
        ]
        with serving(argv, port, work / f"twin-{rate:.0f}.log") as url:
            report = run_bench(
                BenchConfig(
                    url,
                    input_tokens=256,
                    output_tokens=OUTPUT,
                    concurrency=LEVELS,
                    requests=16,
                    duration_seconds=120,
                )
            )
        for lv in report.levels:
            decode = lv.decode_tokens_per_second or 0.0
            # every request in parallel: c streams, each 64 tokens in TTFT + 63 / rate seconds
            expected = (
                lv.concurrency * OUTPUT / ((lv.mean_ttft_ms or 0) / 1000 + (OUTPUT - 1) / rate)
            )
            rows.append(
                f"| {rate:.0f} | {lv.concurrency} | {lv.completed + lv.failed} | {decode:.1f} | "
                f"{lv.mean_tpot_ms or 0:.3f} | {1000 / rate:.3f} | {lv.output_throughput:.1f} | "
                f"{expected:.1f} | {lv.median_ttft_ms or 0:.1f} | {lv.failed} |"
            )
        print(
            f"twin {rate:.0f} tok/s: single-stream {report.single_stream_decode_tokens_per_second:.1f}",
            flush=True,
        )
    return rows


def llamacpp_section(work: Path) -> list[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        return ["llama-cpp-python is not installed here; not measured."]
    sys.path.insert(0, str(HERE.parent / "tests"))
    from builders.gguf import write_tiny_llama_gguf

    model = write_tiny_llama_gguf(work / "tiny.gguf")[0]
    lines: list[str] = []
    for interrupt in ("False", "True"):
        port = _free_port()
        argv = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--interrupt_requests",
            interrupt,
        ]
        predicted, _ = predict(_bench_args(str(model)), os.environ)
        with serving(argv, port, work / f"llamacpp-{interrupt}.log") as url:
            report = run_bench(
                BenchConfig(
                    url,
                    input_tokens=256,
                    output_tokens=64,
                    concurrency=(1, 2, 4),
                    requests=12,
                    duration_seconds=120,
                    predicted=predicted,
                )
            )
        lines += [f"### `--interrupt_requests {interrupt}`", "", *_level_table(report), ""]
        lines += _ceiling_lines(report)
        print(f"llama.cpp interrupt_requests={interrupt}: stop={report.stop_reason}", flush=True)
    return lines


def _bench_args(checkpoint: str) -> argparse.Namespace:
    """``bringup bench``'s own flags for the prediction (its parser, so they never drift)."""
    return command_parser("bench").parse_args(
        ["http://127.0.0.1:9", "--gpu", "L4", "--checkpoint", checkpoint, "--input-tokens", "256"]
    )


def _level_table(report: BenchReport) -> list[str]:
    rows = [
        "| concurrency | completed | failed | output tok/s | mean TTFT (ms) | mean TPOT (ms) | p99 ITL (ms) | mean E2EL (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows.extend(
        f"| {lv.concurrency} | {lv.completed} | {lv.failed} | {lv.output_throughput:.1f} | "
        f"{lv.mean_ttft_ms or 0:.1f} | {lv.mean_tpot_ms or 0:.3f} | {lv.p99_itl_ms or 0:.3f} | "
        f"{lv.mean_e2el_ms or 0:.1f} |"
        for lv in report.levels
    )
    errors = {e.message for lv in report.levels for e in lv.errors}
    if errors:
        rows += ["", *(f"- error: {m}" for m in sorted(errors))]
    rows.append(
        f"\nPrompt: {report.prompt.tokens} tokens ({report.prompt.method}: {report.prompt.detail});"
        f" stop reason: {report.stop_reason}; not run: {list(report.skipped_concurrency)}"
    )
    return rows


def _ceiling_lines(report: BenchReport) -> list[str]:
    d = report.decode
    single = report.single_stream_decode_tokens_per_second
    if d.plan is None:
        return [f"Plan: {d.note}", ""]
    return [
        (
            f"Single-stream decode {single or 0:.1f} tok/s; the plan for an L4: "
            f"{d.plan.ceiling_line()}; measured/ceiling {d.measured_over_ceiling or 0:.4f}."
        ),
        "",
    ]


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        work = Path(tmp)
        started = time.time()
        twin = twin_rows(work)
        llama = llamacpp_section(work)
        took = time.time() - started
    text = "\n".join(
        [
            "# `bringup bench` measured (issue 9)",
            "",
            (
                f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
                f" no GPU; shared with other work while measuring. Script: `bench/bench_serving.py`"
                f" ({took:.0f} s). Client: bringup's own streaming client (threads + httpx2)."
            ),
            "",
            "## Against the engine twin: known token rate",
            "",
            (
                "Twin: `bringup twin vllm --time-scale 0.01 --token-rate R` (prefill 10 ms + 20 us per prompt"
                " token, then one token every 1/R s per request, every request in parallel). Bench: 256"
                " prompt tokens (sized with the twin's /tokenize), 64 output tokens, 16 requests per level."
                " Expected throughput = concurrency x 64 / (measured mean TTFT + 63 / rate)."
            ),
            "",
            *twin,
            "",
            "## Against the real llama.cpp server (llama-cpp-python, CPU, tiny random GGUF)",
            "",
            "256 prompt tokens, 64 output tokens, 12 requests per level, concurrency 1, 2, 4.",
            "",
            *llama,
        ]
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
