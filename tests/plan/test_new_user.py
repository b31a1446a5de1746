"""`plan` as a new user meets it: Hugging Face ids, the catalogs, sizes with units."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from bringup.adapters import model_catalog
from bringup.cli.main import Context, main
from bringup.core import gpu_catalog
from bringup.core.plan import parse_architecture
from bringup.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
# ../shared from the repository root (a worktree under wt/ has it two levels up)
SHARED_CONFIGS = (
    next(
        (p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared").is_dir()),
        ROOT.parent / "shared",
    )
    / "corpus/memory/hf_configs"
)


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], Context(stdout=out, stderr=err, environ={"NO_COLOR": "1"}))
    return code, out.getvalue(), err.getvalue()


def test_a_hugging_face_id_of_a_bundled_model_plans_without_a_download() -> None:
    """The README's own id plans from the bundled config (it failed: 'no such model')."""
    code, out, err = _run(
        "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "-tp", "2", "--json"
    )
    assert code in (0, 1), err
    data = json.loads(out)
    assert data["model"]["architecture"] == "LlamaForCausalLM"
    assert 70e9 < data["model"]["parameters"] < 71e9


@pytest.mark.parametrize(
    ("name", "bundled"),
    [
        ("meta-llama/Llama-3.1-70B-Instruct", "Llama-3.1-70B"),
        ("META-LLAMA/llama-3.1-70b-instruct", "Llama-3.1-70B"),
        ("Llama-3.1-70B-Instruct", "Llama-3.1-70B"),
        ("Llama-3.1-70B", "Llama-3.1-70B"),
        ("Qwen/Qwen3-30B-A3B", "Qwen3-30B-A3B"),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "Mixtral-8x7B"),
        ("openai/gpt-oss-20b", "gpt-oss-20b"),
        ("moonshotai/Kimi-K2-Instruct", "Kimi-K2"),
    ],
)
def test_catalog_finds_ids_and_names(name: str, bundled: str) -> None:
    """Full repo ids, bundled names and an id's last part, any case."""
    found = model_catalog.find(name)
    assert found is not None
    assert found.name == bundled


def test_catalog_is_large_unique_sourced_and_parses() -> None:
    """At least 50 models, every id once, every entry with a source, every config planned."""
    models = model_catalog.catalog()
    assert len(models) >= 50
    ids = [i.lower() for m in models for i in m.hf_ids]
    assert len(ids) == len(set(ids))
    families = {m.name.split("-")[0].lower() for m in models}
    for family in ("llama", "qwen3", "qwen2.5", "mixtral", "deepseek", "gpt", "gemma", "phi"):
        assert any(f.startswith(family) for f in families), family
    for m in models:
        assert m.source
        assert m.hf_ids
        arch = parse_architecture(model_catalog.config(m))
        assert arch.num_layers > 0
        assert arch.hidden_size > 0


_COMPARED = (
    "architectures",
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "intermediate_size",
    "moe_intermediate_size",
    "vocab_size",
    "max_position_embeddings",
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "num_experts_per_tok",
    "kv_lora_rank",
    "q_lora_rank",
    "quantization_config",
    "sliding_window",
)


def _shared_copies() -> dict[str, dict[str, Any]]:
    if not SHARED_CONFIGS.is_dir():
        pytest.skip(f"../shared absent: no {SHARED_CONFIGS}")
    return {p.stem.lower(): json.loads(p.read_text()) for p in SHARED_CONFIGS.glob("*.json")}


def test_bundled_configs_equal_the_shipped_copies_field_by_field() -> None:
    """Each bundled model with a copy of its config.json in ../shared equals it on every
    field the planner reads (the copies are read here, never put in the repository)."""
    copies = _shared_copies()
    compared = 0
    for m in model_catalog.catalog():
        for repo_id in m.hf_ids:
            copy = copies.get(repo_id.rsplit("/", 1)[-1].lower())
            if copy is None:
                continue
            ours = model_catalog.config(m)
            ours_text, copy_text = ours.get("text_config", ours), copy.get("text_config", copy)
            for key in _COMPARED:
                if key in copy_text:
                    assert ours_text.get(key) == copy_text[key], (m.name, repo_id, key)
            # the weights' type as the planner reads it (a copy without torch_dtype: bfloat16)
            assert parse_architecture(ours).dtype_bytes == parse_architecture(copy).dtype_bytes
            compared += 1
    assert compared >= 8


def test_list_models_and_gpus() -> None:
    """--list-models and --list-gpus print the catalogs; --json gives their objects."""
    code, out, _ = _run("--list-models", "--json")
    models = json.loads(out)["models"]
    assert code == 0
    assert len(models) >= 50
    assert {"name", "hf_ids", "architecture", "source"} <= set(models[0])
    code, out, _ = _run("--list-gpus", "--json")
    gpus = json.loads(out)["gpus"]
    assert code == 0
    assert {"memory_bytes", "memory_bandwidth_bytes_per_second", "source", "unified_memory"} <= set(
        gpus[0]
    )
    code, out, _ = _run("--list-gpus")
    assert code == 0
    assert "MI355X" in out
    assert "GB10" in out


@pytest.mark.parametrize("name", ["A100", "V100", "MI50", "GH200"])
def test_an_ambiguous_gpu_is_refused_with_the_choices(name: str) -> None:
    """--gpu A100 names three parts; it is refused with them (it meant the 80 GB one)."""
    with pytest.raises(UsageError) as err:
        gpu_catalog.lookup(name)
    assert "ambiguous" in str(err.value)
    code, _, err_text = _run("Llama-3.1-8B", "--gpu", name)
    assert code == 2
    assert err_text.count("\n") == 1
    if name == "A100":
        assert "A100 80GB" in err_text
        assert "A100 40GB" in err_text


@pytest.mark.parametrize(
    "name",
    [
        "T4", "V100 32GB", "L4", "L40S", "A10", "RTX A6000", "RTX 3090", "RTX 4090", "RTX 5090",
        "H100 PCIe", "H100 SXM", "H100 NVL", "H200", "GH200 144GB", "B200", "B300",
        "MI50 32GB", "MI60", "MI100", "MI210", "MI250X", "MI300X", "MI325X", "MI355X",
        "7900 XTX", "GB10",
    ],
)  # fmt: skip
def test_the_catalog_covers_the_parts_people_serve_on(name: str) -> None:
    """Each part is known, with a datasheet cited."""
    gpu = gpu_catalog.lookup(name)
    assert gpu.source.startswith("https://")
    assert gpu.memory_bytes > 10 * 1024**3


def test_a_unified_memory_part_says_so_in_the_plan() -> None:
    """GB10 (DGX Spark) shares its memory with the CPU: the plan warns."""
    assert gpu_catalog.lookup("DGX Spark").unified
    code, _, err = _run("Qwen3-8B", "--gpu", "GB10", "--max-model-len", "8192")
    assert code == 0
    assert "shared with the CPU" in err


@pytest.mark.parametrize(
    ("argv", "form"),
    [
        (["--gpu-memory", "24"], "24GiB"),
        (["--gpu", "H100", "--memory-bandwidth", "3350"], "3350GB/s"),
        (["--gpu", "H100", "--gpu-free", "70"], "70GiB"),
    ],
)
def test_sizes_need_a_unit(argv: list[str], form: str) -> None:
    """A bare number is refused with the form to use (it was read as bytes)."""
    code, out, err = _run("Llama-3.1-8B", *argv)
    assert code == 2
    assert out == ""
    assert "needs a unit" in err
    assert form in err
    assert err.count("\n") == 1


def test_a_checkpoint_with_a_missing_shard_is_refused_unless_forced(tmp_path: Path) -> None:
    """A missing shard was planned as a smaller model without a word: it is refused with the
    verify problem named; --force plans the tensors that are there."""
    from builders.safetensors import write_checkpoint

    folder = write_checkpoint(tmp_path / "m", n_shards=2)
    whole_code, whole, _ = _run(str(folder), "--gpu", "H100", "--json")
    assert whole_code == 0
    shards = sorted(folder.glob("*.safetensors"))
    shards[-1].unlink()
    code, out, err = _run(str(folder), "--gpu", "H100")
    assert code == 2
    assert out == ""
    assert "missing_shard" in err
    assert shards[-1].name in err
    assert "--force" in err
    assert err.count("\n") == 1
    code, out, _ = _run(str(folder), "--gpu", "H100", "--json")  # --json: the error as JSON
    assert code == 2
    assert "missing_shard" in json.loads(out)["error"]
    code, out, _ = _run(str(folder), "--gpu", "H100", "--json", "--force")
    assert code == 0
    forced = json.loads(out)["model"]["weights_bytes_total"]
    assert forced < json.loads(whole)["model"]["weights_bytes_total"]


def test_the_moe_caveat_stands_on_the_expected_line() -> None:
    """The MoE/MLA caveat on "expected" was only in the README: it is on the line now."""
    _, out, _ = _run("Qwen3-30B-A3B", "--gpu", "H100", "--max-model-len", "8192")
    line = next(x for x in out.splitlines() if x.startswith("decode expected"))
    assert "caveat: MOE setups have run from 0.3x to 1.6x this" in line
    _, out, _ = _run("DeepSeek-V2-Lite", "--gpu", "H100", "--max-model-len", "8192")
    line = next(x for x in out.splitlines() if x.startswith("decode expected"))
    assert "caveat: MLA" in line
    _, out, _ = _run("Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "8192")
    line = next(x for x in out.splitlines() if x.startswith("decode expected"))
    assert "caveat" not in line
