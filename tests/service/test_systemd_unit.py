"""Unit text as pure functions: golden files, quoting, secrets kept out, the retry drop-in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.core import secrets as sec
from bringup.core import systemd_unit as su
from bringup.errors import UsageError

GOLDEN = Path(__file__).parent.parent / "fixtures" / "units"
BRINGUP = "/opt/bringup/bin/bringup"
VLLM = (
    "/opt/vllm/bin/vllm",
    "serve",
    "meta-llama/Llama-3.1-70B-Instruct",
    "--tensor-parallel-size",
    "4",
    "--api-key",
    "sk-live-0123456789",
    "--port",
    "8000",
)


def golden(name: str, text: str) -> None:
    """Compare with tests/fixtures/units/NAME; BRINGUP_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("BRINGUP_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


def system_spec() -> su.UnitSpec:
    secrets = sec.split_secrets(["HF_TOKEN=hf_abcdef", *VLLM])
    return su.UnitSpec(
        name="vllm-llama70b",
        description="Llama 3.1 70B on 4 GPUs",
        exec_start=su.run_command(BRINGUP, secrets.argv),
        exec_start_pre=su.guard_command(
            BRINGUP, max_used="1000MiB", timeout="300s", kill_stale=False, command=secrets.argv
        ),
        environment=(*su.gpu_environment("0,1,2,3"), ("VLLM_LOGGING_LEVEL", "INFO")),
        environment_file="/etc/bringup/vllm-llama70b.env",
        secret_names=tuple(secrets.env),
        watchdog_seconds=60.0,
    )


def test_golden_system_unit_with_secrets() -> None:
    """A system unit: notify, guard, GPUs, env file, watchdog; no secret value in the text."""
    text = su.render_unit(system_spec())
    golden("vllm-llama70b.service", text)
    assert "sk-live" not in text
    assert "hf_abcdef" not in text
    assert "--api-key ${API_KEY}" in text


def test_golden_user_unit_with_uuid_and_kill_stale() -> None:
    """A user unit with GPU UUIDs, kill-stale guard, and no secrets."""
    cmd = (
        "/home/ana/venv/bin/python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/Qwen 2.5 7B",
        "--mem-fraction-static",
        "0.85",
    )
    spec = su.UnitSpec(
        name="sglang-qwen",
        description="Qwen 2.5 7B (dev, 100% of one GPU)",
        exec_start=su.run_command(BRINGUP, cmd),
        exec_start_pre=su.guard_command(
            BRINGUP, max_used="2GiB", timeout="10m", kill_stale=True, command=cmd
        ),
        environment=su.gpu_environment("GPU-5f2c8d7e-1a2b"),
        user=True,
        restart_seconds=10.0,
        timeout_start_seconds=3600.0,
        timeout_stop_seconds=90.0,
    )
    golden("sglang-qwen.service", su.render_unit(spec))


def test_golden_retry_dropin() -> None:
    """The retry drop-in resets ExecStart= and sets the remedied command line."""
    secrets = sec.split_secrets([*VLLM, "--max-num-seqs", "128"])
    text = su.render_retry_dropin(
        su.run_command(BRINGUP, secrets.argv),
        ["attempt 2 of 3: cuda_oom in warmup; --max-num-seqs 256 -> 128"],
    )
    golden("vllm-llama70b.service.d/bringup-retry.conf", text)
    assert su.retry_dropin_path("vllm-llama70b") == "vllm-llama70b.service.d/bringup-retry.conf"
    assert "sk-live" not in text


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("serve", "serve"),
        ("a b", '"a b"'),
        ("100%", "100%%"),
        ("$HOME", "$$HOME"),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", "back\\\\slash"),
        ("it's", '"it\'s"'),
        ("", '""'),
        (";", "\\;"),
        ("line\nbreak", '"line\\nbreak"'),
        (su.EnvRef("API_KEY"), "${API_KEY}"),
    ],
)
def test_quote_word(word: su.Word, expected: str) -> None:
    """Each word survives systemd's specifier, variable and quote processing."""
    assert su.quote_word(word) == expected


def test_env_file_quoting() -> None:
    """Values are single-quoted, or double-quoted with escapes when they hold a quote."""
    text = su.render_env_file("x", [("A", "plain $x"), ("B", 'it\'s "$y"')])
    assert text.splitlines()[1:] == ["A='plain $x'", 'B="it\'s \\"\\$y\\""']


def test_gpu_environment() -> None:
    """Indices pin CUDA to PCI bus order (what nvidia-smi and the guard use); UUIDs need not."""
    assert su.gpu_environment("0, 2") == (
        ("CUDA_VISIBLE_DEVICES", "0,2"),
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),
    )
    assert su.gpu_environment("GPU-abc") == (("CUDA_VISIBLE_DEVICES", "GPU-abc"),)
    with pytest.raises(UsageError, match="neither a GPU index"):
        su.gpu_environment("first")


@pytest.mark.parametrize("bad", ["", "a/b", "x y", ".service"])
def test_bad_unit_names(bad: str) -> None:
    """Names systemd would refuse are refused here first."""
    with pytest.raises(UsageError):
        su.unit_name(bad)
