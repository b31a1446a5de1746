"""`plan ORG/NAME` online: huggingface_hub reads config.json and the safetensors headers, not
the weights. The Hub cannot be reached from here, so the real huggingface_hub talks to a local
server on loopback that speaks the Hub's endpoints (hub_server.py; HF_ENDPOINT points at it)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bringup.cli.main import Context, main
from plan.hub_server import serve

from builders.safetensors import write_checkpoint


def _run(environ: dict[str, str], *argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = {"NO_COLOR": "1", **environ}
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ=env))
    return code, out.getvalue(), err.getvalue()


def test_a_repo_on_the_hub_is_planned_from_its_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id not on disk and not bundled: its config and every shard's header come over HTTP
    range requests; the plan equals the plan of the same folder on disk; no weights cross, and
    nothing lands in the user's hub cache (huggingface_hub's own default, read at its import:
    a snapshot with the shard index and no shards would later plan as a broken checkpoint)."""
    import huggingface_hub.constants

    user_cache = tmp_path / "user-cache"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(user_cache))
    folder = write_checkpoint(tmp_path / "repo", n_shards=3, hidden=1024)
    env = {"HF_HUB_CACHE": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    _, local, _ = _run(env, str(folder), "--gpu", "H100", "--json")
    with serve({"someorg/tiny-llama": folder}) as hub:
        code, out, err = _run(
            {**env, "HF_ENDPOINT": hub.url}, "someorg/tiny-llama", "--gpu", "H100", "--json"
        )
        assert code == 0, err
        planned = json.loads(out)
        assert planned["model"] == json.loads(local)["model"]
        assert planned["per_gpu"] == json.loads(local)["per_gpu"]
        weights = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
        assert hub.bytes_sent(".safetensors") < min(weights, 3 * 100_001 + 1)
        assert any(p.endswith("model.safetensors.index.json") for _, p, _, _ in hub.requests)
        assert all(
            r.startswith("bytes=")
            for m, p, r, _ in hub.requests
            if m == "GET" and p.endswith(".safetensors")
        )
    assert not (tmp_path / "cache").exists()  # nothing left in the user's cache
    assert not user_cache.exists()


def test_a_config_only_repo_is_planned_from_its_config(tmp_path: Path) -> None:
    """A repo with a config.json and no safetensors: planned from the config, synthesised."""
    folder = tmp_path / "repo"
    folder.mkdir()
    config = json.loads((write_checkpoint(tmp_path / "w", n_shards=1) / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config))
    with serve({"someorg/config-only": folder}) as hub:
        code, out, err = _run(
            {"HF_ENDPOINT": hub.url, "HOME": str(tmp_path)},
            "someorg/config-only",
            "--gpu",
            "H100",
            "--json",
        )
    assert code == 0, err
    assert json.loads(out)["model"]["parameters"] > 0


def test_a_missing_repo_offline_and_unreachable_are_one_line_each(tmp_path: Path) -> None:
    """A repo the Hub does not have, HF_HUB_OFFLINE, and a Hub that cannot be reached: one
    line, exit 2, never a traceback."""
    home = {"HOME": str(tmp_path)}
    with serve({}) as hub:
        code, out, err = _run({**home, "HF_ENDPOINT": hub.url}, "nobody/nothing", "--gpu", "H100")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "nobody/nothing" in err
    code, _, err = _run({**home, "HF_HUB_OFFLINE": "1"}, "nobody/nothing", "--gpu", "H100")
    assert code == 2
    assert err.count("\n") == 1
    assert "no such model" in err
    # a port nothing listens on
    code, _, err = _run(
        {**home, "HF_ENDPOINT": "http://127.0.0.1:9"}, "nobody/nothing", "--gpu", "H100"
    )
    assert code == 2
    assert err.count("\n") == 1
    assert "could not be read" in err
    assert "http://127.0.0.1:9" in err


def test_a_bundled_id_never_asks_the_hub(tmp_path: Path) -> None:
    """A bundled model's id plans offline from the bundled config: the Hub is not asked."""
    with serve({}) as hub:
        code, _, _ = _run(
            {"HF_ENDPOINT": hub.url, "HOME": str(tmp_path)}, "Qwen/Qwen3-8B", "--gpu", "H100"
        )
        assert code == 0
        assert hub.requests == []
