"""`bringup unit --run-as USER[:GROUP]`, --working-directory, --hf-home, --limit-memlock."""

from __future__ import annotations

import io
import os
import pwd
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bringup.cli.main import Context, main
from bringup.core import access
from service.test_unit_cli import _verify

SK = "sk-live-DO-NOT-LEAK-0123456789"


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("vllm", "bringup"):
        exe = d / name
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    return d


@pytest.fixture
def public(tmp_path: Path) -> Iterator[Path]:
    """A folder every user can enter (pytest's own tmp folders are root's, mode 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="bringup-runas-", dir="/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def needs_root_and_nobody(user: str = "nobody") -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (the env file is given to another user with chown)")
    try:
        pwd.getpwnam(user)
    except KeyError:
        pytest.skip(f"no user {user} on this machine")


def run_unit(args: list[str], bin_dir: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    environ = {"PATH": f"{bin_dir}:/usr/bin:/bin", "NO_COLOR": "1", "HOME": "/root"}
    code = main(
        ["unit", args[0], "--bringup", str(bin_dir / "bringup"), *args[1:]],
        Context(stdout=out, stderr=err, environ=environ),
    )
    return code, out.getvalue(), err.getvalue()


def test_run_as_sets_user_group_and_owns_the_env_file(bin_dir: Path, public: Path) -> None:
    """User=/Group= in the unit; the 0600 env file belongs to that user and group."""
    needs_root_and_nobody()
    hf = public / "hf"
    hf.mkdir(mode=0o755)
    unit = public / "svc.service"
    code, _, err = run_unit(
        ["svc", "--output", str(unit), "--run-as", "nobody:nogroup", "--hf-home", str(hf),
         "--working-directory", str(public), "--limit-memlock", "infinity",
         "--env", "VLLM_PORT=8001", "--", "vllm", "serve", "m", "--api-key", SK],
        bin_dir,
    )  # fmt: skip
    assert (code, err) == (0, "")
    lines = unit.read_text().splitlines()
    for want in ("User=nobody", "Group=nogroup", f"WorkingDirectory={public}",
                 "LimitMEMLOCK=infinity", f"Environment=HF_HOME={hf}",
                 "Environment=VLLM_PORT=8001"):  # fmt: skip
        assert want in lines
    assert SK not in unit.read_text()
    env_file = public / "svc.env"
    st = env_file.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600
    assert (st.st_uid, st.st_gid) == (pwd.getpwnam("nobody").pw_uid, 65534)


def test_run_as_refuses_an_hf_cache_the_user_cannot_read(
    bin_dir: Path, tmp_path: Path, public: Path
) -> None:
    """The cache under a root-only folder, and the default cache in a home that cannot be
    made, are named with the component that stops the user; nothing is written."""
    needs_root_and_nobody()
    private = tmp_path / "hf"
    private.mkdir()
    tmp_path.chmod(0o700)
    unit = public / "x.service"
    code, out, err = run_unit(
        ["x", "--output", str(unit), "--run-as", "nobody", "--hf-home", str(private), "--",
         "vllm", "serve", "m"],
        bin_dir,
    )  # fmt: skip
    assert (code, out) == (2, "")
    assert f"it cannot read its Hugging Face cache {private}" in err
    assert "(mode 0700, owner 0" in err
    assert len(err.splitlines()) == 1
    assert not unit.exists()
    home = pwd.getpwnam("nobody").pw_dir
    if not os.path.exists(home):
        code, _, err = run_unit(["x", "--run-as", "nobody", "--", "vllm", "serve", "m"], bin_dir)
        assert code == 2
        assert f"it cannot create its Hugging Face cache {home}/.cache/huggingface" in err


def test_run_as_checks_a_local_model_folder(bin_dir: Path, tmp_path: Path, public: Path) -> None:
    """A model path the service user cannot read is refused before the unit exists."""
    needs_root_and_nobody()
    model = tmp_path / "model"
    model.mkdir()
    tmp_path.chmod(0o700)
    hf = public / "hf"
    hf.mkdir(mode=0o755)
    code, _, err = run_unit(
        ["x", "--run-as", "nobody", "--hf-home", str(hf), "--", "vllm", "serve", str(model)],
        bin_dir,
    )
    assert code == 2
    assert f"it cannot read the model {model}" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run-as", "no-such-user-xyz"], "no user 'no-such-user-xyz' on this machine"),
        (["--run-as", "root:no-such-group-xyz"], "no group 'no-such-group-xyz'"),
        (["--run-as", "root", "--user"], "a --user unit runs as its manager's user"),
        (["--run-as", "a:b:c"], "give USER or USER:GROUP"),
        (["--working-directory", "/no/such/dir"], "no such folder"),
        (["--limit-memlock", "lots"], "not a size"),
    ],
)
def test_bad_service_settings_are_one_line(bin_dir: Path, args: list[str], message: str) -> None:
    code, out, err = run_unit(["x", *args, "--", "vllm", "serve", "m"], bin_dir)
    assert (code, out) == (2, "")
    assert message in err
    assert len(err.splitlines()) == 1


def test_memlock_sizes_are_bytes(bin_dir: Path) -> None:
    code, out, _ = run_unit(["x", "--limit-memlock", "64MiB", "--", "vllm"], bin_dir)
    assert code == 0
    assert "LimitMEMLOCK=67108864" in out.splitlines()


def test_run_as_under_root_is_written_as_given(bin_dir: Path, tmp_path: Path) -> None:
    """--install --root writes for another machine: its users are not looked up here."""
    root = tmp_path / "root"
    code, _, err = run_unit(
        ["x", "--install", "--root", str(root), "--run-as", "svc-elsewhere:gpu", "--", "vllm"],
        bin_dir,
    )
    assert (code, err) == (0, "")
    text = (root / "etc/systemd/system/x.service").read_text()
    assert {"User=svc-elsewhere", "Group=gpu"} <= set(text.splitlines())


@pytest.mark.parametrize(
    ("mode", "uid", "gid", "want", "ok"),
    [
        (0o700, 0, 0, "rx", False),
        (0o750, 0, 7, "rx", True),  # group member
        (0o705, 0, 0, "rx", True),  # others
        (0o640, 5, 0, "rx", False),  # owner without x
        (0o755, 0, 0, "w", False),
    ],
)
def test_access_rules(mode: int, uid: int, gid: int, want: str, ok: bool) -> None:
    """Owner bits for the owner, else group bits for a member, else the others' bits."""
    who = access.Who("svc", 5, frozenset({5, 7}))
    node = access.Node("/x", mode, uid, gid, is_dir=True)
    assert access.allows(node, who, want) is ok
    assert access.allows(node, access.Who("root", 0, frozenset({0})), want)


@pytest.mark.systemd
@pytest.mark.parametrize(
    "extra",
    [
        # systemd-analyze warns of User=nobody ("not safe"): a system user that owns nothing
        pytest.param(["--run-as", "daemon:daemon"], id="run-as"),
        pytest.param(["--working-directory", "{public}"], id="working-directory"),
        pytest.param(["--limit-memlock", "infinity"], id="memlock-infinity"),
        pytest.param(["--limit-memlock", "64MiB"], id="memlock-size"),
        pytest.param(["--env", "VLLM_PORT=8001", "--env", "HF_TOKEN=hf_x1"], id="env"),
        pytest.param(["--hf-home", "{public}/hf"], id="hf-home"),
    ],
)
def test_each_setting_passes_systemd_analyze_verify(
    bin_dir: Path, tmp_path: Path, public: Path, extra: list[str]
) -> None:
    """Every service setting alone gives a unit `systemd-analyze verify` has nothing to say of."""
    if "--run-as" in extra:
        needs_root_and_nobody("daemon")
    (public / "hf").mkdir(mode=0o755)
    unit = public / "units" / "svc.service"
    args = [e.replace("{public}", str(public)) for e in extra]
    code, _, err = run_unit(
        ["svc", "--output", str(unit), *args, "--hf-home", str(public / "hf"), "--",
         str(bin_dir / "vllm"), "serve", "m"],
        bin_dir,
    )  # fmt: skip
    assert (code, err) == (0, "")
    done = _verify(unit, user=False, tmp_path=tmp_path)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", "")
