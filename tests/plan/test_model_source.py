"""Model names as vLLM takes them: paths, `org/name` in the Hugging Face cache, bundled names."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bringup.adapters.model_source import hf_cache_dirs, locate_model, resolve_model
from bringup.cli.main import Context, main
from bringup.errors import InputError

from builders.safetensors import write_checkpoint

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def _cache_repo(hub: Path, repo_id: str, rev: str = "a" * 40, *, weights: bool = True) -> Path:
    repo = hub / ("models--" + repo_id.replace("/", "--"))
    snap = repo / "snapshots" / rev
    if weights:
        write_checkpoint(
            snap,
            n_shards=1,
            hidden=256,
            layers=2,
            heads=4,
            kv_heads=2,
            intermediate=512,
            vocab=1000,
            config=CONFIG,
        )
    else:
        snap.mkdir(parents=True)
        (snap / "config.json").write_text(json.dumps(CONFIG))
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    return snap


def test_cache_dirs_follow_huggingface_hub_order(tmp_path: Path) -> None:
    """HF_HUB_CACHE wins over HF_HOME/hub, which wins over XDG_CACHE_HOME and ~/.cache."""
    home = str(tmp_path / "home")
    assert hf_cache_dirs({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}, home)[0] == Path("/a")
    assert hf_cache_dirs({"HF_HOME": "/b"}, home)[0] == Path("/b/hub")
    assert hf_cache_dirs({"XDG_CACHE_HOME": "/c"}, home)[0] == Path("/c/huggingface/hub")
    assert hf_cache_dirs({}, home) == [Path(home) / ".cache/huggingface/hub"]


@pytest.mark.parametrize("var", ["HF_HUB_CACHE", "HF_HOME", "HOME"])
def test_org_name_is_found_in_the_cache(tmp_path: Path, var: str) -> None:
    """`org/name` resolves to the snapshot refs/main names, under each way of naming the cache."""
    hub = {
        "HF_HUB_CACHE": tmp_path,
        "HF_HOME": tmp_path / "hub",
        "HOME": tmp_path / ".cache/huggingface/hub",
    }[var]
    snap = _cache_repo(hub, "acme/tiny-llama")
    environ = {var: str(tmp_path)}
    source = locate_model("acme/tiny-llama", environ)
    assert source.kind == "checkpoint"
    assert source.path == snap
    loaded = resolve_model("acme/tiny-llama", environ)
    assert loaded.tensors
    assert loaded.config["hidden_size"] == 256


def test_revision_picks_its_snapshot(tmp_path: Path) -> None:
    """`--revision` (from the command) picks refs/<revision> or the snapshot of that hash."""
    _cache_repo(tmp_path, "acme/m", "a" * 40)
    other = _cache_repo(tmp_path, "acme/m", "b" * 40, weights=False)
    (tmp_path / "models--acme--m" / "refs" / "main").write_text("a" * 40)
    assert locate_model("acme/m", {"HF_HUB_CACHE": str(tmp_path)}, revision="b" * 40).path == other


def test_partial_download_plans_from_its_config(tmp_path: Path) -> None:
    """A snapshot holding only config.json loads its config, with no tensors (synthesised later)."""
    _cache_repo(tmp_path, "acme/cfg-only", weights=False)
    loaded = resolve_model("acme/cfg-only", {"HF_HUB_CACHE": str(tmp_path)})
    assert loaded.tensors is None
    assert loaded.config["num_hidden_layers"] == 2


def test_bundled_name_when_not_in_the_cache(tmp_path: Path) -> None:
    """A name not in the cache falls back to a bundled config by its last part."""
    source = locate_model("meta-llama/Llama-3.1-8B", {"HF_HUB_CACHE": str(tmp_path)})
    assert source.kind == "bundled"


def test_unknown_name_says_where_it_looked(tmp_path: Path) -> None:
    """Nothing found: one InputError naming the cache folder searched."""
    with pytest.raises(InputError) as err:
        locate_model("nobody/nothing", {"HF_HUB_CACHE": str(tmp_path)})
    assert str(tmp_path) in err.value.message


def test_any_json_file_is_a_config(tmp_path: Path) -> None:
    """A config JSON file under any name is read as the config."""
    path = tmp_path / "my-model.json"
    path.write_text(json.dumps(CONFIG))
    assert resolve_model(str(path), {}).config["vocab_size"] == 1000


def test_plan_reads_the_cache_from_the_server_command(tmp_path: Path) -> None:
    """`plan -- vllm serve org/name` plans the cached checkpoint (its real tensors)."""
    _cache_repo(tmp_path, "acme/tiny-llama")
    out = io.StringIO()
    code = main(
        ["plan", "--gpu", "H100", "--json", "--", "vllm", "serve", "acme/tiny-llama"],
        Context(stdout=out, stderr=io.StringIO(), environ={"HF_HUB_CACHE": str(tmp_path)}),
    )
    assert code == 0
    data = json.loads(out.getvalue())
    assert data["model"]["architecture"] == "LlamaForCausalLM"
    assert data["settings"]["max_model_len"] == 4096
