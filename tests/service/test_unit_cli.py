"""`bringup unit`: stdout, --output, --install through the command runner, systemd-analyze verify."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.adapters.commands import CommandResult, RecordedRunner
from bringup.cli.commands import unit as unit_cmd
from bringup.cli.main import Context, command_parser, main
from bringup.core import secrets as sec
from bringup.core import systemd_unit as su

SECRET = "sk-live-DO-NOT-LEAK-42"
HF = "hf_DO_NOT_LEAK_7"


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH directory with real executables: a fake `vllm` and a fake `bringup`."""
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("vllm", "bringup"):
        exe = d / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    return d


def env_for(bin_dir: Path, home: Path | None = None) -> dict[str, str]:
    env = {"PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "NO_COLOR": "1"}
    if home is not None:
        env["HOME"] = str(home)
    return env


def run_unit(args: list[str], environ: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["unit", *args], Context(stdout=out, stderr=err, environ=environ))
    return code, out.getvalue(), err.getvalue()


def test_unit_on_stdout_has_absolute_paths(bin_dir: Path) -> None:
    """The unit wraps the command in `bringup run --notify` with absolute executables."""
    code, out, err = run_unit(
        [
            "vllm-a",
            "--gpus",
            "2,3",
            "--bringup",
            str(bin_dir / "bringup"),
            "--",
            "vllm",
            "serve",
            "m",
        ],
        env_for(bin_dir),
    )
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert f"ExecStart={bin_dir}/bringup run --notify -- {bin_dir}/vllm serve m" in lines
    assert f"ExecStartPre={bin_dir}/bringup guard --max-used 1000MiB --timeout 300s" in lines
    assert "Environment=CUDA_VISIBLE_DEVICES=2,3" in lines
    assert {"Type=notify", "NotifyAccess=main", "Restart=on-failure", "KillMode=mixed"} <= set(
        lines
    )


def test_default_bringup_is_the_one_beside_python(bin_dir: Path) -> None:
    """Without --bringup the console script next to sys.executable is used."""
    code, out, _ = run_unit(["x", "--", "vllm", "serve", "m"], env_for(bin_dir))
    beside = Path(sys.executable).parent / "bringup"
    assert code == 0
    assert f"ExecStart={beside.absolute()} run --notify" in out


def test_secrets_on_stdout_need_an_env_file(bin_dir: Path) -> None:
    """Printing a unit whose command holds a key, with nowhere to keep it, is refused."""
    code, out, err = run_unit(
        ["x", "--", "vllm", "serve", "m", "--api-key", SECRET], env_for(bin_dir)
    )
    assert code == 2
    assert out == ""
    assert "never go into the unit text" in err
    assert SECRET not in err


def test_secrets_go_to_a_0600_env_file(bin_dir: Path, tmp_path: Path) -> None:
    """Keys from flags, leading assignments and --env land only in the mode-0600 env file."""
    env_file = tmp_path / "secrets" / "x.env"
    environ = {**env_for(bin_dir), "MY_TOKEN": "tok-from-env"}
    code, out, _ = run_unit(
        [
            "x",
            "--env-file",
            str(env_file),
            "--env",
            "MY_TOKEN",
            "--env",
            "VLLM_PORT=8000",
            "--",
            f"HF_TOKEN={HF}",
            "vllm",
            "serve",
            "m",
            f"--api-key={SECRET}",
        ],
        environ,
    )
    assert code == 0
    assert SECRET not in out
    assert HF not in out
    assert "tok-from-env" not in out
    assert f"EnvironmentFile={env_file}" in out
    assert "--api-key ${API_KEY}" in out
    assert "Environment=VLLM_PORT=8000" in out
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    body = env_file.read_text()
    assert f"API_KEY='{SECRET}'" in body
    assert f"HF_TOKEN='{HF}'" in body
    assert "MY_TOKEN='tok-from-env'" in body


def test_existing_env_file_is_made_private(bin_dir: Path, tmp_path: Path) -> None:
    """An env file that existed world-readable with these secrets is rewritten with mode 0600."""
    env_file = tmp_path / "x.env"
    env_file.write_text(f"HF_TOKEN='{HF}'\n")
    env_file.chmod(0o644)
    code, _, err = run_unit(
        ["x", "--env-file", str(env_file), "--", "vllm", "--hf-token", HF], env_for(bin_dir)
    )
    assert (code, err) == (0, "")
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600


def test_install_under_root_writes_there_and_never_touches_the_live_manager(
    bin_dir: Path, tmp_path: Path
) -> None:
    """--install --root writes etc/systemd/system/NAME.service and the env file under DIR, and
    runs nothing: no daemon-reload of the live manager (it reads other files)."""
    root = tmp_path / "root"
    args = command_parser("unit").parse_args(
        [
            "vllm-b",
            "--install",
            "--root",
            str(root),
            "--json",
            "--bringup",
            str(bin_dir / "bringup"),
        ]
    )
    args.passthrough = ["vllm", "serve", "m", "--api-key", SECRET]
    runner = RecordedRunner()
    out = io.StringIO()
    assert unit_cmd.run(args, Context(stdout=out, environ=env_for(bin_dir)), runner=runner) == 0
    unit_file = root / "etc/systemd/system/vllm-b.service"
    env_file = root / "etc/bringup/vllm-b.env"
    text = unit_file.read_text()
    assert "EnvironmentFile=/etc/bringup/vllm-b.env" in text  # the path on the target system
    assert SECRET not in text
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert runner.calls == []
    result = json.loads(out.getvalue())
    assert result == {
        "schema_version": 1,
        "name": "vllm-b",
        "unit_path": str(unit_file),
        "env_file": str(env_file),
        "secrets": ["API_KEY"],
        "installed": True,
        "daemon_reload": False,
        "user": False,
        # "m" is not a model here: no prediction, the 20 minutes
        "timeout_start": {
            "seconds": 1200.0,
            "source": "default",
            "guard_seconds": 0.0,
            "note": "",
            "service": None,
        },
        "text": text,
    }


def test_install_root_in_human_output_says_nothing_was_reloaded(
    bin_dir: Path, tmp_path: Path
) -> None:
    """A systemctl on PATH that records its calls is never run with --root."""
    calls = tmp_path / "calls"
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    systemctl.chmod(0o755)
    code, out, err = run_unit(
        [
            "x",
            "--install",
            "--root",
            str(tmp_path / "r"),
            "--bringup",
            str(bin_dir / "bringup"),
            "--",
            "vllm",
        ],
        env_for(bin_dir),
    )
    assert (code, err) == (0, "")
    assert not calls.exists()
    assert "--root: no service manager was reloaded" in out


def test_user_install_goes_to_config_and_reloads_the_user_manager(
    bin_dir: Path, tmp_path: Path
) -> None:
    """--user --install writes ~/.config/systemd/user and runs systemctl --user daemon-reload."""
    home = tmp_path / "home"
    args = command_parser("unit").parse_args(
        ["dev", "--user", "--install", "--bringup", str(bin_dir / "bringup")]
    )
    args.passthrough = ["vllm", "serve", "m"]
    runner = RecordedRunner({("systemctl", "--user", "daemon-reload"): CommandResult.ok()})
    out = io.StringIO()
    assert (
        unit_cmd.run(args, Context(stdout=out, environ=env_for(bin_dir, home)), runner=runner) == 0
    )
    path = home / ".config/systemd/user/dev.service"
    assert "WantedBy=default.target" in path.read_text()
    assert runner.calls == [("write", str(path)), ("systemctl", "--user", "daemon-reload")]
    assert "ran systemctl --user daemon-reload" in out.getvalue()


def test_failed_daemon_reload_is_one_line_exit_2(bin_dir: Path, tmp_path: Path) -> None:
    """A real (fake) systemctl on PATH that fails is reported with its stderr, exit 2."""
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(
        '#!/bin/sh\necho "$@" >> "$(dirname "$0")/calls"\necho \'Failed to reload daemon: Access denied\' >&2\nexit 1\n'
    )
    systemctl.chmod(0o755)
    code, _, err = run_unit(
        ["x", "--user", "--install", "--bringup", str(bin_dir / "bringup"), "--", "vllm"],
        env_for(bin_dir, tmp_path / "home"),
    )
    assert code == 2
    assert (
        err
        == "bringup: error: `systemctl --user daemon-reload` failed with exit code 1: Failed to reload daemon: Access denied\n"
    )
    assert (bin_dir / "calls").read_text() == "--user daemon-reload\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["x"], "no server command"),
        (["x", "--", "no-such-server-xyz"], "cannot find 'no-such-server-xyz' on PATH"),
        (["x", "--gpus", "first", "--", "vllm"], "neither a GPU index"),
        (["bad/name", "--", "vllm"], "not a valid unit name"),
        (
            ["x", "--guard-timeout", "30m", "--timeout-start", "10m", "--", "vllm"],
            "shorter than --timeout-start",
        ),
        (["x", "--root", "/tmp", "--", "vllm"], "--root only applies with --install"),
        (["x", "--env", "UNSET_VAR_XYZ", "--", "vllm"], "not set in the current environment"),
    ],
)
def test_bad_input_is_one_line_exit_2(bin_dir: Path, args: list[str], message: str) -> None:
    """Each mistake gets one line saying what is wrong, and exit 2."""
    code, out, err = run_unit(args, env_for(bin_dir))
    assert code == 2
    assert out == ""
    assert message in err
    assert len(err.strip().splitlines()) == 1


def _verify(unit: Path, *, user: bool, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        if os.environ.get("BRINGUP_REQUIRE_REAL") == "1":
            pytest.fail("systemd-analyze is required (BRINGUP_REQUIRE_REAL=1) but absent")
        pytest.skip("systemd-analyze not installed")
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "SYSTEMD_LOG_COLOR": "0"}
    argv = [analyze, *(["--user"] if user else []), "verify", str(unit)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)


VERIFY_CASES = [
    pytest.param("plain", [], id="plain"),
    pytest.param(
        "gpus-secrets",
        [
            "--gpus",
            "0,1",
            "--env-file",
            "{tmp}/s.env",
            "--env",
            "HF_TOKEN=hf_x",
            "--watchdog-sec",
            "60s",
            "--description",
            "100% Llama",
        ],
        id="gpus-secrets",
    ),
    pytest.param(
        "uuid-killstale",
        [
            "--gpus",
            "GPU-5f2c8d7e",
            "--kill-stale",
            "--restart-sec",
            "5s",
            "--timeout-start",
            "2h",
            "--timeout-stop",
            "90s",
        ],
        id="uuid-killstale",
    ),
    pytest.param("user", ["--user"], id="user"),
]


@pytest.mark.systemd
@pytest.mark.parametrize(("name", "extra"), VERIFY_CASES)
def test_generated_units_pass_systemd_analyze_verify(
    tmp_path: Path, name: str, extra: list[str]
) -> None:
    """Every generated unit, and the retry drop-in, verifies with no warning at all."""
    out_dir = tmp_path / "units"
    out_dir.mkdir()
    unit = out_dir / f"{name}.service"
    extra = [e.replace("{tmp}", str(tmp_path)) for e in extra]
    cmd = [
        sys.executable,
        "-m",
        "http.server",
        "--bind",
        "127.0.0.1",
        "a b",
        "$HOME",
        "--api-key",
        "k 1",
    ]
    code, _, err = run_unit(
        [name, "--output", str(unit), *extra, "--", *cmd], {"NO_COLOR": "1", "HOME": str(tmp_path)}
    )
    assert (code, err) == (0, "")
    secrets = sec.split_secrets(cmd)
    dropin = out_dir / su.retry_dropin_path(name)
    dropin.parent.mkdir()
    dropin.write_text(
        su.render_retry_dropin(
            su.run_command(sys.executable, [*secrets.argv, "--x", "1"]), ["retry"]
        )
    )
    done = _verify(unit, user="--user" in extra, tmp_path=tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", "")


def test_an_ollama_unit_names_its_model_or_is_refused(bin_dir: Path) -> None:
    """Ollama loads its model at the first request that names it: the unit's `bringup run`
    gets --model (what `watch --unit` and `up` then read back), and without it the unit is
    refused in one line (before: a unit whose `bringup run` exits 2 at every start)."""
    ollama = bin_dir / "ollama"
    ollama.write_text("#!/bin/sh\nexit 0\n")
    ollama.chmod(0o755)
    flags = ["ollama", "--bringup", str(bin_dir / "bringup")]
    code, out, err = run_unit([*flags, "--model", "qwen3:0.6b", "--", "ollama", "serve"],
                              env_for(bin_dir))  # fmt: skip
    assert (code, err) == (0, "")
    want = f"ExecStart={bin_dir}/bringup run --notify --model qwen3:0.6b -- {ollama} serve"
    assert want in out.splitlines()
    code, out, err = run_unit([*flags, "--", "ollama", "serve"], env_for(bin_dir))
    assert (code, out) == (2, "")
    assert err.startswith("bringup: error: ollama loads its model at the first request"), err
    assert len(err.splitlines()) == 1
