"""The Markdown report builder (core.report.markdown): sections, hostile text, redaction."""

from __future__ import annotations

from bringup.core.report.markdown import build_markdown
from bringup.core.report.model import (
    GpuLine,
    Gpus,
    PlanRow,
    PlanSection,
    Remedy,
    ReportData,
    RootCause,
    TimelineRow,
)
from bringup.core.report.redact import redactor
from report.md_check import check_report, render

API_KEY = "sk-live-0123456789abcdefXYZ"
HF = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
SHORT = "pw1"  # a very short secret: replaced where it stands alone
ENV_SECRET = "envsecret-7f3a9c"
ARGV = (
    "vllm",
    "serve",
    "/home/alice/models/qwen",
    "--api-key",
    API_KEY,
    "--hf-token=" + HF,
    "--admin-password",
    SHORT,
    "--host",
    "10.20.30.40",
    "-tp",
    "2",
)
ENV = (("OPENAI_API_KEY", ENV_SECRET), ("HOME", "/home/alice"))
SECRETS = (API_KEY, HF, ENV_SECRET)


def data(log: tuple[str, ...], **over: object) -> ReportData:
    cause_line = log[-2] if len(log) > 1 else log[0]
    fields: dict[str, object] = {
        "title": "bringup run",
        "outcome": "failed",
        "phase": "weights_loading",
        "engine": "vllm 0.11.0",
        "exit_code": 1,
        "server_exit": "server exit status 1",
        "versions": (
            ("bringup", "0.1.0"),
            ("vllm", "0.11.0"),
            ("torch", "2.8.0"),
            ("CUDA (torch built for)", "12.8"),
        ),
        "gpus": Gpus(
            (
                GpuLine(0, "NVIDIA H100 80GB HBM3", 85520809984, 1 << 30),
                GpuLine(1, "NVIDIA H100 80GB HBM3", 85520809984),
            ),
            "570.86.15",
            "12.8",
            (("", "GPU0", "GPU1"), ("GPU0", "X", "NV18"), ("GPU1", "NV18", "X")),
        ),
        "command": ARGV,
        "plan": PlanSection(
            "Qwen3ForCausalLM: 8.2B parameters",
            (PlanRow("weights", "15.3 GiB", "19.3%", "this rank's share | of it"),),
            ("KV cache: 144 bytes per token",),
            "DOES NOT FIT: cuda_oom at memory_profiling: too big",
            ("--max-model-len 8192",),
        ),
        "timeline": (
            TimelineRow("start", 1, "0ms", "2.0s"),
            TimelineRow("weights_loading", 3, "2.0s", "1.0s"),
        ),
        "facts": (("model", "/home/alice/models/qwen"),),
        "cause": RootCause(
            "missing_or_corrupt_weights",
            "weights_loading",
            "A shard is missing.",
            cause_line,
            len(log) - 1,
            tuple(enumerate(log, start=1))[-4:],
            (Remedy("Download the model again with `hf download`.", "--load-format safetensors"),),
        ),
        "log_tail": log,
        "log_lines": 500,
        "log_source": "the server's output",
    }
    fields.update(over)
    return ReportData(**fields)  # type: ignore[arg-type]


HOSTILE_LOG = (
    f"INFO 12-02 00:41:09 non-default args: {{'api_key': '{API_KEY}', 'hf_token': '{HF}'}}",
    "INFO a fence ``` and a longer one ```` inside a line",
    "INFO </details> <script>alert(1)</script> | pipes | and *stars* _under_",
    "INFO \x1b[31mred\x1b[0m and a bell \x07 from gpu-node-7.example.com at 10.20.30.40 /home/alice/x",
    f"ERROR FileNotFoundError: shard missing (token {SHORT} was set; Authorization: Bearer {ENV_SECRET})",
    "INFO the end",
)

SECTIONS = ("Versions", "GPUs", "Command", "Plan", "Timeline", "Root cause", "Remedies")


def test_every_section_renders_and_no_secret_is_left() -> None:
    red = redactor(ARGV, ENV)
    text = build_markdown(data(HOSTILE_LOG), red)
    page = check_report(text, SECTIONS, SECRETS)
    assert page.headings()[0].startswith("bringup run: FAILED in")
    assert page.tables() >= 5  # versions, GPUs, plan, timeline, facts
    fences = page.fences()
    command = next(f for f in fences if f.startswith("vllm serve"))
    assert "--api-key <redacted>" in command
    assert "--hf-token=<redacted>" in command
    assert "--admin-password <redacted>" in command
    assert "-tp 2" in command
    # the log keeps its lines verbatim inside one fence (escapes stripped, unprintables shown)
    log = fences[-1].splitlines()
    assert len(log) == len(HOSTILE_LOG)
    assert log[1] == HOSTILE_LOG[1]
    assert log[2] == HOSTILE_LOG[2]
    assert "red and a bell \\x07" in log[3]
    assert "<script>" not in page.html  # the log is code, never HTML
    assert "the last 6 of 500 lines" in text
    # the cause's context marks its line
    context = next(f for f in fences if "| ERROR" in f)
    assert any(
        line.startswith(">") and "FileNotFoundError" in line for line in context.splitlines()
    )
    # topology and driver
    assert "NV18" in text
    assert "570.86.15" in text
    # the remedy and its flag
    assert "`--load-format safetensors`" in text


def test_hosts_stay_unless_asked_and_go_when_asked() -> None:
    kept = build_markdown(data(HOSTILE_LOG), redactor(ARGV, ENV))
    assert "10.20.30.40" in kept
    assert "gpu-node-7.example.com" in kept
    assert "/home/alice" in kept
    gone = build_markdown(
        data(HOSTILE_LOG), redactor(ARGV, ENV, hosts=True, host_names=["gpu-node-7.example.com"])
    )
    check_report(gone, SECTIONS, (*SECRETS, "10.20.30.40", "gpu-node-7", "/home/alice", "alice"))
    assert "~/models/qwen" in gone
    assert "[ip]" in gone
    assert "[host]" in gone


def test_short_secret_only_where_it_stands_alone() -> None:
    red = redactor(("vllm", "serve", "m", "--api-key", "ab"), ())
    assert red.text("--api-key ab; tab and abc stay") == "--api-key <redacted>; tab and abc stay"


def test_ipv6_and_local_addresses() -> None:
    red = redactor((), (), hosts=True)
    assert red.text("bound to fe80::1ff:fe23:4567:890a and 2001:db8::8a2e:370:7334") == (
        "bound to [ip] and [ip]"
    )
    assert red.text("at 12:34:56 on 127.0.0.1 and 0.0.0.0, http://localhost:8000") == (
        "at 12:34:56 on 127.0.0.1 and 0.0.0.0, http://localhost:8000"
    )
    assert red.text("ssh bob@gpu7 https://user@internal.corp:9000/x") == (
        "ssh [user]@[host] https://[user]@[host]:9000/x"
    )
    assert red.text("version 0.11.1.2 is not 300.1.1.1") == "version [ip] is not 300.1.1.1"


def test_a_ready_report_has_no_root_cause_and_an_empty_one_still_renders() -> None:
    text = build_markdown(
        data(("INFO ready",), outcome="ready", cause=None, time_to_ready_seconds=42.0),
        redactor((), ()),
    )
    page = render(text)
    assert "Root cause" not in page.headings()
    assert "ready in 42.0s" in text
    bare = build_markdown(
        ReportData(title="bringup diagnose -", outcome="incomplete"), redactor((), ())
    )
    assert render(bare).headings() == ["bringup diagnose -: INCOMPLETE"]
