"""Words that are right: counts and plurals from one helper (bringup.core.words), verdicts
said once, progress units not said twice, a small model's size not "0.0B"."""

from __future__ import annotations

import io
from pathlib import Path

from bringup.cli.main import Context, main
from bringup.core.live import Progress
from bringup.core.vocab import Phase
from bringup.render.live import PlainObserver

from builders.gguf import write_tiny_llama_gguf
from builders.safetensors import write_safetensors


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        argv, Context(stdout=out, stderr=err, stdin=io.StringIO(), environ={"NO_COLOR": "1"})
    )
    return code, out.getvalue(), err.getvalue()


def test_one_gpu_is_available_not_are() -> None:
    """-tp 2 on one GPU: "only 1 is available"."""
    _, out, _ = _run(["plan", "Llama-3.1-8B", "--gpu", "H100", "-tp", "2", "--gpus", "1"])
    assert "but only 1 is available" in out
    assert "only 1 are" not in out


def test_a_fitting_verdict_says_fits_once() -> None:
    """Not "verdict: FITS - fits: ..."."""
    _, out, _ = _run(["plan", "Llama-3.1-8B", "--gpu", "H100"])
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert verdict.startswith("verdict: FITS - ")
    assert "fits:" not in verdict.lower().replace("verdict: fits - ", "")


def test_a_tiny_gguf_has_its_size_and_one_slot(tmp_path: Path) -> None:
    """108,224 parameters is not "0.0B parameters"; one slot is "1 slot", not "1 slot(s)"."""
    model = write_tiny_llama_gguf(tmp_path / "tiny.gguf")[0]
    argv = ["plan", str(model), "--gpu-memory", "1GiB", "--memory-bandwidth", "100GB/s"]
    _, out, _ = _run(argv)
    assert "0.0B" not in out
    assert "1 slot," in out
    assert "slot(s)" not in out


def test_gguf_layout_refusal_reads_as_a_sentence(tmp_path: Path) -> None:
    """-tp for a GGUF: "-tp 2 is a vLLM layout flag, not used by a GGUF plan: ..."."""
    model = write_tiny_llama_gguf(tmp_path / "tiny.gguf")[0]
    code, _, err = _run(["plan", str(model), "--gpu-memory", "1GiB", "-tp", "2"])
    assert code == 2
    assert "-tp 2 is a vLLM layout flag, not used by a GGUF plan: llama.cpp" in err
    assert "(drop -tp)" in err


def test_verify_counts_one_tensor(tmp_path: Path) -> None:
    """A checkpoint of one tensor: "1 tensor", not "1 tensors"."""
    write_safetensors(tmp_path / "model.safetensors", {"w": ("F16", (8, 8))}, fill=True)
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    _, out, _ = _run(["verify", str(tmp_path)])
    assert "1 file, 1 tensor," in out


def test_graph_capture_progress_says_graphs_once() -> None:
    """ "capturing CUDA graphs 51/51", not "... 51/51 graphs"; weights keep their unit."""
    stream = io.StringIO()
    observer = PlainObserver(stream)
    observer.event(Progress(5.0, Phase.CUDA_GRAPH_CAPTURE, 51, 51, "graphs", None, None))
    observer.event(Progress(6.0, Phase.WEIGHTS_LOADING, 3, 3, "shards", None, None))
    text = stream.getvalue()
    assert "capturing CUDA graphs 51/51" in text
    assert "51/51 graphs" not in text
    assert "loading weights 3/3 shards" in text


def test_no_string_of_bringup_makes_a_plural_with_parentheses() -> None:
    """No "1 restart(s)", "2 GPU(s)": every count in bringup's own words goes through
    core.words. The twin is left out: it reproduces the engines' own text ("proc(s)")."""
    import re
    import tokenize

    import bringup

    root = Path(bringup.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if "twin" in path.relative_to(root).parts:
            continue
        with path.open("rb") as f:
            for tok in tokenize.tokenize(f.readline):
                text = tok.string.lstrip("rbufRBUF").replace("http(s)", "")  # a scheme
                if (
                    tok.type == tokenize.STRING
                    and re.search(r"[A-Za-z]\(s\)", text)
                    and not text.startswith(('"""', "'''"))  # docstrings
                ):
                    found.append(f"{path.relative_to(root)}:{tok.start[0]}")
    assert found == []
