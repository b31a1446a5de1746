"""`bringup unit`: secrets leave the unit text whatever wraps them, and env files are never lost."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from bringup.cli.main import Context, main

HF = "hf_" + "Q9w8E7r6" * 4
SK = "sk-live-DO-NOT-LEAK-0123456789"
PW = "pw-DO-NOT-LEAK-77"
WRAPPED = ("vllm", "docker", "podman", "sudo", "nice", "taskset", "numactl", "bringup")


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH folder with executables for the server, the wrappers and bringup."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in WRAPPED:
        exe = d / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    return d


def run_unit(args: list[str], bin_dir: Path, **env: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    environ = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NO_COLOR": "1", **env}
    code = main(
        ["unit", args[0], "--bringup", str(bin_dir / "bringup"), *args[1:]],
        Context(stdout=out, stderr=err, environ=environ),
    )
    return code, out.getvalue(), err.getvalue()


FORMS = [
    pytest.param(["env", f"HF_TOKEN={HF}", "vllm", "serve", "m"], [HF], id="env-VAR"),
    pytest.param([f"HF_TOKEN={HF}", "vllm", "serve", "m"], [HF], id="bare-VAR"),
    pytest.param(["vllm", "serve", "m", "--api-key", SK], [SK], id="api-key"),
    pytest.param(["vllm", "serve", "m", f"--api-key={SK}"], [SK], id="api-key="),
    pytest.param(["vllm", "serve", "m", "--hf-token", HF], [HF], id="hf-token"),
    pytest.param(["vllm", "serve", "m", "--served-model-name", "x", HF], [HF], id="token-shaped"),
    pytest.param(
        [
            "docker",
            "run",
            "--gpus",
            "all",
            "-e",
            f"HF_TOKEN={HF}",
            f"--env=DB_PASSWORD={PW}",
            "vllm/vllm-openai",
            "--model",
            "m",
            "--api-key",
            SK,
        ],
        [HF, PW, SK],
        id="docker-e",
    ),
    pytest.param(["podman", "run", "--env", f"MY_SECRET={PW}", "img"], [PW], id="podman-env"),
    pytest.param(
        ["bash", "-c", f"HF_TOKEN={HF} exec vllm serve m --api-key '{SK}'"],
        [HF, SK],
        id="bash-c",
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
            f"OPENAI_API_KEY={SK}",
            "vllm",
            "serve",
            "m",
        ],
        [SK],
        id="wrappers",
    ),
]


@pytest.mark.parametrize(("command", "values"), FORMS)
def test_no_secret_in_the_unit_text(
    bin_dir: Path, tmp_path: Path, command: list[str], values: list[str]
) -> None:
    """Every form: a grep of the unit for each secret finds nothing; the 0600 env file
    beside it, named after the unit file written, holds each one; Description= names
    the server's executable, never an argument."""
    unit = tmp_path / "out" / "vllm-x.service"
    code, out, err = run_unit(["vllm-x", "--output", str(unit), "--", *command], bin_dir)
    assert (code, err) == (0, "")
    text = unit.read_text()
    for value in values:
        assert value not in text
        assert value not in out
    env_file = tmp_path / "out" / "vllm-x.env"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    body = env_file.read_text()
    assert all(value in body for value in values)
    assert f"EnvironmentFile={env_file}" in text
    [description] = [line for line in text.splitlines() if line.startswith("Description=")]
    assert description == f"Description=vllm-x: {_server(command)} under bringup"


def _server(command: list[str]) -> str:
    return next(w for w in command if w in WRAPPED[:3] or w == "bash")


def test_docker_keeps_the_names_and_takes_values_from_its_environment(
    bin_dir: Path, tmp_path: Path
) -> None:
    """`-e NAME=VALUE` becomes `-e NAME`: docker copies the value from its environment,
    which the unit's EnvironmentFile= sets."""
    unit = tmp_path / "d.service"
    command = ["docker", "run", "-e", f"HF_TOKEN={HF}", "img", "--api-key", SK]
    assert run_unit(["d", "--output", str(unit), "--", *command], bin_dir)[0] == 0
    text = unit.read_text()
    assert f"-- {bin_dir}/docker run -e HF_TOKEN img --api-key ${{API_KEY}}" in text
    assert "HF_TOKEN=" in (tmp_path / "d.env").read_text()


def test_executables_after_wrappers_are_resolved(bin_dir: Path) -> None:
    """systemd's PATH does not hold a virtualenv: the command after env, sudo -u, nice,
    taskset and numactl is an absolute path, as the first word is."""
    command = ["env", "-u", "X", "sudo", "-u", "svc", "nice", "-n", "5", "taskset", "0x3",
               "numactl", "--membind", "0", "vllm", "serve", "m"]  # fmt: skip
    code, out, err = run_unit(["x", "--", *command], bin_dir)
    assert (code, err) == (0, "")
    b = bin_dir
    want = (f"-- /usr/bin/env -u X {b}/sudo -u svc {b}/nice -n 5 {b}/taskset 0x3 "
            f"{b}/numactl --membind 0 {b}/vllm serve m")  # fmt: skip
    assert any(line.endswith(want) for line in out.splitlines() if line.startswith("ExecStart="))


def test_plain_env_prefix_becomes_environment(bin_dir: Path) -> None:
    """`env A=1 vllm …` means Environment=A=1 and the server as the unit's command."""
    code, out, _ = run_unit(["x", "--", "env", "VLLM_PORT=8001", "vllm", "serve", "m"], bin_dir)
    assert code == 0
    assert "Environment=VLLM_PORT=8001" in out.splitlines()
    assert f"--notify -- {bin_dir}/vllm serve m" in out


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["sudo", "-u", "svc", f"HF_TOKEN={HF}", "vllm"], "sudo resets it"),
        (["vllm", "serve", "m", "--header", f"Authorization: Bearer {SK}"], "inside other text"),
        (["bash", "-c", f"curl -H 'Authorization: Bearer {SK}' x"], "cannot be moved out"),
    ],
)
def test_secrets_that_cannot_be_moved_are_refused(
    bin_dir: Path, tmp_path: Path, command: list[str], message: str
) -> None:
    """One line, exit 2, no value in it, nothing written."""
    unit = tmp_path / "x.service"
    code, out, err = run_unit(["x", "--output", str(unit), "--", *command], bin_dir)
    assert (code, out) == (2, "")
    assert message in err
    assert len(err.splitlines()) == 1
    assert HF not in err
    assert SK not in err
    assert not unit.exists()


def test_a_secret_in_the_description_is_refused(bin_dir: Path, tmp_path: Path) -> None:
    """The unit text is checked for every secret value before it is written."""
    code, _, err = run_unit(
        ["x", "--output", str(tmp_path / "x.service"), "--description", f"key {SK}", "--",
         "vllm", "--api-key", SK],
        bin_dir,
    )  # fmt: skip
    assert code == 2
    assert "API_KEY would be written into the unit text" in err
    assert SK not in err


def test_two_units_of_one_name_keep_their_own_env_files(bin_dir: Path, tmp_path: Path) -> None:
    """The env file is named after the unit file written, so a second unit of the same NAME
    elsewhere does not overwrite the first one's key."""
    first, second = tmp_path / "a" / "vllm.service", tmp_path / "b" / "vllm.service"
    assert run_unit(["vllm", "--output", str(first), "--", "vllm", "--api-key", "k-first"],
                    bin_dir)[0] == 0  # fmt: skip
    assert run_unit(["vllm", "--output", str(second), "--", "vllm", "--api-key", "k-second"],
                    bin_dir)[0] == 0  # fmt: skip
    assert "k-first" in (tmp_path / "a" / "vllm.env").read_text()
    assert "k-second" in (tmp_path / "b" / "vllm.env").read_text()
    other = tmp_path / "a" / "vllm-b.service"
    assert run_unit(["vllm", "--output", str(other), "--", "vllm", "--api-key", "k-third"],
                    bin_dir)[0] == 0  # fmt: skip
    assert "k-third" in (tmp_path / "a" / "vllm-b.env").read_text()
    assert "k-first" in (tmp_path / "a" / "vllm.env").read_text()


def test_an_env_file_with_other_secrets_is_replaced_only_with_force(
    bin_dir: Path, tmp_path: Path
) -> None:
    """The refusal names the keys that differ, never a value; --force replaces the file."""
    env_file = tmp_path / "x.env"
    env_file.write_text("API_KEY='old-value-1'\nOTHER_TOKEN='other-value-2'\n")
    env_file.chmod(0o600)
    args = ["x", "--output", str(tmp_path / "x.service"), "--", "vllm", "--api-key", "new-value-3",
            "--hf-token", HF]  # fmt: skip
    code, out, err = run_unit(args, bin_dir)
    assert (code, out) == (2, "")
    assert "API_KEY differs; HF_TOKEN only in this unit; OTHER_TOKEN only in the file" in err
    assert "--force" in err
    assert not any(v in err for v in ("old-value-1", "other-value-2", "new-value-3", HF))
    assert "old-value-1" in env_file.read_text()
    assert not (tmp_path / "x.service").exists()
    code, _, err = run_unit([args[0], "--force", *args[1:]], bin_dir)
    assert (code, err) == (0, "")
    assert "new-value-3" in env_file.read_text()
    assert "old-value-1" not in env_file.read_text()


def test_install_puts_env_files_under_etc_bringup(bin_dir: Path, tmp_path: Path) -> None:
    """--install: /etc/bringup/NAME.env; --user --install: ~/.config/bringup/NAME.env."""
    root = tmp_path / "root"
    code, out, _ = run_unit(
        ["x", "--install", "--root", str(root), "--", "vllm", "--api-key", SK], bin_dir
    )
    assert code == 0
    assert f"wrote {root}/etc/bringup/x.env (mode 0600: API_KEY)" in out
    assert (
        "EnvironmentFile=/etc/bringup/x.env" in (root / "etc/systemd/system/x.service").read_text()
    )
    home = "/home/ana"
    code, out, _ = run_unit(
        ["x", "--user", "--install", "--root", str(root), "--", "vllm", "--api-key", SK],
        bin_dir,
        HOME=home,
    )
    assert code == 0
    unit = root / "home/ana/.config/systemd/user/x.service"
    assert f"EnvironmentFile={home}/.config/bringup/x.env" in unit.read_text()
    assert SK in (root / "home/ana/.config/bringup/x.env").read_text()


def test_docker_env_file_is_made_absolute_and_checked(bin_dir: Path, tmp_path: Path) -> None:
    """`--env-file FILE` keeps its secrets in FILE: the unit names it by absolute path
    (systemd starts in /), and a FILE others can read is warned about."""
    secrets_file = tmp_path / "docker.env"
    secrets_file.write_text(f"HF_TOKEN={HF}\n")
    secrets_file.chmod(0o644)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, err = run_unit(["x", "--", "docker", "run", "--env-file", "docker.env", "img"],
                                  bin_dir)  # fmt: skip
    finally:
        os.chdir(cwd)
    assert code == 0
    assert f"run --env-file {secrets_file} img" in out
    assert f"{secrets_file} (docker --env-file) is readable by others (mode 0644)" in err
