"""bringup.core.secrets: one detector for secrets in a command, whatever wraps it, and in text."""

from __future__ import annotations

import shlex

import pytest

from bringup.core import secrets as sec
from bringup.core import wrappers
from bringup.core.systemd_unit import EnvRef
from bringup.errors import UsageError

HF = "hf_" + "A1b2C3d4" * 4  # token-shaped: 3 + 32 characters
SK = "sk-live-0123456789abcdefXYZ"


@pytest.mark.parametrize(
    ("argv", "moved", "env"),
    [
        pytest.param(
            ["env", f"HF_TOKEN={HF}", "vllm", "serve", "m"],
            ("env", "vllm", "serve", "m"),
            {"HF_TOKEN": HF},
            id="env-assignment",
        ),
        pytest.param(
            ["HF_TOKEN=x", "VLLM_PORT=1", "vllm", "serve"],
            ("VLLM_PORT=1", "vllm", "serve"),
            {"HF_TOKEN": "x"},
            id="bare-assignment",
        ),
        pytest.param(
            ["vllm", "serve", "m", "--api-key", SK, f"--hf-token={HF}"],
            (
                "vllm",
                "serve",
                "m",
                "--api-key",
                EnvRef("API_KEY"),
                "--hf-token",
                EnvRef("HF_TOKEN"),
            ),
            {"API_KEY": SK, "HF_TOKEN": HF},
            id="flags",
        ),
        pytest.param(
            [
                "docker",
                "run",
                "--gpus",
                "all",
                "-e",
                f"HF_TOKEN={HF}",
                "--env=DB_PASSWORD=pw1",
                "-eOPENAI_API_KEY=o1",
                "-e",
                "VLLM_PORT=1",
                "vllm/vllm-openai",
                "--api-key",
                SK,
            ],
            (
                "docker",
                "run",
                "--gpus",
                "all",
                "-e",
                "HF_TOKEN",
                "--env=DB_PASSWORD",
                "-eOPENAI_API_KEY",
                "-e",
                "VLLM_PORT=1",
                "vllm/vllm-openai",
                "--api-key",
                EnvRef("API_KEY"),
            ),
            {"HF_TOKEN": HF, "DB_PASSWORD": "pw1", "OPENAI_API_KEY": "o1", "API_KEY": SK},
            id="docker-e",
        ),
        pytest.param(
            ["podman", "run", "--env", "MY_SECRET=s1", "img"],
            ("podman", "run", "--env", "MY_SECRET", "img"),
            {"MY_SECRET": "s1"},
            id="podman-env",
        ),
        pytest.param(
            ["bash", "-c", f"HF_TOKEN={HF} exec vllm serve m --api-key '{SK}' && echo ok"],
            (
                "bash",
                "-c",
                'HF_TOKEN="${HF_TOKEN}" exec vllm serve m --api-key "${API_KEY}" && echo ok',
            ),
            {"HF_TOKEN": HF, "API_KEY": SK},
            id="bash-c",
        ),
        pytest.param(
            ["sh", "-ec", f"vllm serve m --api-key={SK}"],
            ("sh", "-ec", 'vllm serve m --api-key="${API_KEY}"'),
            {"API_KEY": SK},
            id="sh-ec-flag-equals",
        ),
        pytest.param(
            [
                "nice",
                "-n",
                "5",
                "numactl",
                "-N",
                "0",
                "taskset",
                "-c",
                "0-3",
                "env",
                "MY_KEY=k1",
                "vllm",
                "serve",
                "m",
                "--foo",
                HF,
            ],
            (
                "nice",
                "-n",
                "5",
                "numactl",
                "-N",
                "0",
                "taskset",
                "-c",
                "0-3",
                "env",
                "vllm",
                "serve",
                "m",
                "--foo",
                EnvRef("FOO"),
            ),
            {"MY_KEY": "k1", "FOO": HF},
            id="wrappers-and-token-shape",
        ),
        pytest.param(
            ["vllm", "serve", "m", "--hf-token", "--port", "8000"],
            ("vllm", "serve", "m", "--hf-token", "--port", "8000"),
            {},
            id="hf-token-without-value",  # vLLM's --hf-token takes an optional value
        ),
        pytest.param(
            ["vllm", "serve", "m", "--api-key", "${API_KEY}", "--max-num-batched-tokens", "8"],
            ("vllm", "serve", "m", "--api-key", "${API_KEY}", "--max-num-batched-tokens", "8"),
            {},
            id="references-and-token-counts",
        ),
    ],
)
def test_every_form_is_moved(
    argv: list[str], moved: tuple[object, ...], env: dict[str, str]
) -> None:
    """Each way of giving a secret: its value leaves the command, the env carries it."""
    split = sec.split_secrets(argv)
    assert split.argv == moved
    assert split.env == env
    text = " ".join(w if isinstance(w, str) else "${" + w.name + "}" for w in split.argv)
    for value in env.values():
        assert value not in text
    assert [s.value for s in sec.find_secrets(argv)] == list(env.values())


def test_find_secrets_says_where() -> None:
    """Each secret is described by name, value, how it was given and its word."""
    found = sec.find_secrets(["docker", "run", "-e", "HF_TOKEN=t1", "img", "--api-key", "k1"])
    assert found == [
        sec.Secret("HF_TOKEN", "t1", "docker -e HF_TOKEN", 3),
        sec.Secret("API_KEY", "k1", "--api-key", 6),
    ]


def test_the_shell_still_reads_the_same_words() -> None:
    """Filled in from the environment, the moved string splits into the original words."""
    text = f"vllm serve 'my model' --api-key \"{SK}\"; echo $HOME"
    split = sec.split_secrets(["bash", "-c", text])
    moved = split.argv[2]
    assert isinstance(moved, str)
    assert shlex.split(moved.replace("${API_KEY}", SK)) == shlex.split(text)
    assert split.env == {"API_KEY": SK}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["sudo", "-u", "svc", "HF_TOKEN=t1", "vllm"], "sudo resets it"),
        (["sudo", "env", "HF_TOKEN=t1", "vllm"], "sudo resets it"),
        (["tool", "HF_TOKEN=t1"], "is an argument of the command"),
        (["bash", "-c", f"curl -H 'Authorization: Bearer {SK}' x"], "cannot be moved out of"),
        (["HF_TOKEN=a", "docker", "run", "-e", "HF_TOKEN=b", "img"], "given twice"),
    ],
)
def test_secrets_that_cannot_move_are_refused(argv: list[str], message: str) -> None:
    """A secret that cannot be moved safely is refused in one line without its value."""
    with pytest.raises(UsageError, match=message) as caught:
        sec.split_secrets(argv)
    assert "t1" not in str(caught.value)
    assert SK not in str(caught.value)
    assert sec.find_secrets(argv)  # still found (for redaction), only not movable


def test_two_values_of_one_flag_get_two_names() -> None:
    """Two different keys are never collapsed into one variable; equal ones share it."""
    split = sec.split_secrets(["srv", "--api-key", "a", "--api-key=a", "--api-key", "b"])
    assert split.env == {"API_KEY": "a", "API_KEY_2": "b"}


@pytest.mark.parametrize(
    ("flag", "secret"),
    [
        ("--api-key", True),
        ("--hf-token", True),
        ("--hf_token", True),
        ("--admin-password", True),
        ("--api-key-file", False),
        ("--max-num-batched-tokens", False),
        ("--tokenizer", False),
        ("--port", False),
    ],
)
def test_secret_flags(flag: str, secret: bool) -> None:
    """Keys, tokens and passwords are secret; files naming them and token counts are not."""
    assert sec.is_secret_flag(flag) is secret


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("OPENAI_API_KEY", True),
        ("AWS_SECRET", True),
        ("DB_PASSWORD_FILE", True),
        ("PGPASSWORD", True),
        ("VLLM_PORT", False),
        ("MAX_TOKENS", False),
        ("PAD_TOKEN", False),
        ("CUDA_VISIBLE_DEVICES", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    """*_TOKEN, *_KEY, *_SECRET, *PASSWORD*; not counts or special-token names."""
    assert sec.is_secret_name(name) is secret


def test_executables_after_wrappers() -> None:
    """The first word and the command after env, sudo -u, nice, taskset, numactl."""
    argv = ["env", "-u", "X", "A=1", "sudo", "-u", "svc", "nice", "-n", "5", "taskset",
            "0x3", "numactl", "--membind", "0", "vllm", "serve"]  # fmt: skip
    assert wrappers.executables(argv) == (0, 4, 7, 10, 12, 15)
    assert wrappers.command_start(argv) == 15
    assert wrappers.command_start(["taskset", "-p", "42"]) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"loaded {HF} from cache", "loaded <redacted> from cache"),
        ("non-default args: {'api_key': ['k1'], 'port': 8000}",
         "non-default args: {'api_key': ['<redacted>'], 'port': 8000}"),
        ('{"hf_token": "t1", "model": "m"}', '{"hf_token": "<redacted>", "model": "m"}'),
        ("ExecStart=vllm --api-key k1 --port 1", "ExecStart=vllm --api-key <redacted> --port 1"),
        ("HF_TOKEN=t1 vllm --api-key=k2", "HF_TOKEN=<redacted> vllm --api-key=<redacted>"),
        ("Authorization: Bearer abcdefgh123", "Authorization: Bearer <redacted>"),
        ("pulled https://bob:pw1@host/x", "pulled https://bob:<redacted>@host/x"),
        ("--api-key ${API_KEY} max_num_batched_tokens=8192 pad_token=<pad>",
         "--api-key ${API_KEY} max_num_batched_tokens=8192 pad_token=<pad>"),
    ],
)  # fmt: skip
def test_redact_text(text: str, expected: str) -> None:
    """Free text loses secret values and keeps everything else, references included."""
    assert sec.redact_text(text) == expected


def test_redact_known_values() -> None:
    """Values found in the command are redacted wherever they show up in a log."""
    argv = ["vllm", "serve", "m", "--served-key-x", "plainvalue"]
    known = [s.value for s in sec.find_secrets(["srv", "--api-key", "plainvalue"])]
    assert sec.redact_text(" ".join(argv), known) == "vllm serve m --served-key-x <redacted>"
