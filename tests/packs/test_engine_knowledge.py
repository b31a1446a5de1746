"""Engine knowledge lives in the packs: the flags remedies and retries set, the entry points
that name an engine, the tokenizer endpoints. A flag of one engine never reaches another."""

from __future__ import annotations

import pytest

from bringup.adapters import openai_stream
from bringup.core import engine_args, packs, retry_policy
from bringup.core.analyzer import LogAnalyzer
from bringup.core.diagnosis import Failure
from bringup.core.packs import memory_remedies, remedies
from bringup.core.packs.types import Pack, RemedyContext
from bringup.core.vocab import Engine, Phase
from bringup.follow.retry import wanted_share

# values for every named group a remedy builder reads (and none: each builder's fallbacks)
GROUPS = {
    "port": "8000",
    "estimated": "89568",
    "derived": "32768",
    "free_gib": "20.5",
    "weights_gib_per_gpu": "10",
    "total_gib": "79.19",
    "requests": "1024",
    "tokens": "4096",
    "minimum": "0.8",
    "seconds": "600",
    "mem_fraction_static": "0.88",
    "gpu_memory_utilization": "0.9",
    "tensor_parallel_size": "2",
    "max_num_seqs": "256",
    "max_num_batched_tokens": "8192",
    "n_ctx": "131072",
    "ctx": "131072",
}
FACTS = ({}, GROUPS, {**GROUPS, "llama_server_build": "4000", "layers_offloaded": 33})
PACKS = packs.all_packs()
# Ollama reads llama.cpp's runner lines with llama.cpp's signatures, whose remedies name
# llama-server's flags; Ollama takes none of them (it is set through OLLAMA_* variables), so
# the analyzer leaves them out (remedies.own) and only their advice in words remains.
INHERITED: dict[Engine, set[str]] = {
    Engine.OLLAMA: {
        "-c",
        "--n_ctx",
        "--type_k",
        "--cache-type-k",
        "-ngl",
        "--n_gpu_layers",
        "-np",
        "--port",
    }
}


def contexts(pack: Pack) -> list[RemedyContext]:
    return [
        RemedyContext(groups, facts, phase, pack.flags)
        for phase in Phase
        for groups in ({}, GROUPS)
        for facts in FACTS
    ]


def builders(pack: Pack) -> list[tuple[str, object]]:
    # one per builder: the message tables' signatures share their class's builder
    named = list({id(sig.remedy): (sig.name, sig.remedy) for sig in pack.signatures}.values())
    # the analyzer's own: a death without a cause, the OOM killer, a hang, an NCCL hang
    return [
        *named,
        ("engine_died", remedies.engine_died),
        ("host_oom", remedies.host_oom),
        ("stalled", remedies.stalled),
        ("nccl", remedies.nccl),
    ]


def vocabulary(pack: Pack) -> frozenset[str]:
    model_flags = {f for ep in pack.entry_points for f in ep.model_flags}
    return pack.flags.vocabulary() | model_flags


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.engine.value)
def test_every_flag_a_remedy_sets_belongs_to_that_engine(pack: Pack):
    """Each remedy of each signature, in every phase, names only its own engine's flags."""
    known = vocabulary(pack)
    strangers = {
        r.flag
        for _, build in builders(pack)
        for ctx in contexts(pack)
        for r in build(ctx)  # type: ignore[operator]
        if r.flag is not None and r.flag not in known
    }
    assert strangers <= INHERITED.get(pack.engine, set())
    kept = {
        r.flag
        for _, build in builders(pack)
        for ctx in contexts(pack)
        for r in remedies.own(pack.flags, build(ctx))  # type: ignore[operator]
        if r.flag is not None
    }
    assert kept <= known


def test_ollama_never_gets_llama_servers_flags():
    """A llama.cpp runner's host-RAM failure read in an Ollama log: advice, but no -c/--n_ctx."""
    analyzer = LogAnalyzer(Engine.OLLAMA)
    analyzer.feed(
        'time=2025-02-01T10:00:00.000Z level=INFO source=server.go:1 msg="starting llama server"'
    )
    analyzer.feed("ggml_aligned_malloc: insufficient memory (attempted to allocate 4096.00 MB)")
    failure = analyzer.finish(1).failure
    assert failure is not None
    assert failure.remedy
    assert [r.flag for r in failure.remedy if r.flag] == []


def command_of(pack: Pack) -> list[str]:
    ep = pack.entry_points[0]
    head = [ep.program, ep.subcommand] if ep.program else ["python", "-m", ep.module]
    model = [ep.model_flags[0], "some/model"] if ep.model_flags else []
    return [w for w in head if w] + model


@pytest.mark.parametrize("pack", PACKS, ids=lambda p: p.engine.value)
def test_every_flag_a_retry_sets_belongs_to_that_engine(pack: Pack):
    """Every change ``decide`` makes, retried to the end for every signature and phase, is the
    engine's own flag."""
    known = vocabulary(pack)
    strangers = set()
    distinct = {(sig.failure_class, id(sig.remedy)): sig for sig in pack.signatures}.values()
    for sig in distinct:
        for ctx in contexts(pack)[::4]:
            failure = Failure(
                sig.failure_class, ctx.phase, "line", 1, "summary", sig.remedy(ctx), True
            )
            argv, history = command_of(pack), []
            for _ in range(10):
                d = retry_policy.decide(failure, argv, pack=pack, history=history, facts=GROUPS)
                if d.change is None:
                    break
                if d.change.flag is not None and d.change.flag not in known:
                    strangers.add((sig.name, ctx.phase.value, d.change.flag))
                history.append(d.change)
                argv = retry_policy.apply(argv, d.change)
    assert strangers == set()


SGLANG_GRAPH_OOM = [
    "[2025-01-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen2.5-7B', mem_fraction_static=0.88, tp_size=1)",
    "[2025-01-01 10:00:05] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=60.00 GB",
    "[2025-01-01 10:00:06] Capture cuda graph begin. This can take up to several minutes.",
    "[2025-01-01 10:00:09] Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
]


def test_sglang_graph_capture_oom_retries_with_sglangs_own_flags():
    """The SGLang retry bug: --mem-fraction-static twice, --cuda-graph-max-bs, then
    --disable-cuda-graph; never vLLM's --gpu-memory-utilization or --enforce-eager."""
    analyzer = LogAnalyzer(None)
    for line in SGLANG_GRAPH_OOM:
        analyzer.feed(line)
    diagnosis = analyzer.finish(1)
    assert diagnosis.failure is not None
    assert diagnosis.failure.phase is Phase.CUDA_GRAPH_CAPTURE
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen2.5-7B"]
    pack, history = packs.get(Engine.SGLANG), []
    while (
        d := retry_policy.decide(
            diagnosis.failure, argv, pack=pack, history=history, facts=diagnosis.facts
        )
    ).change is not None:
        history.append(d.change)
        argv = retry_policy.apply(argv, d.change)
    assert [(c.flag, c.value) for c in history] == [
        ("--mem-fraction-static", "0.83"),
        ("--mem-fraction-static", "0.78"),
        ("--cuda-graph-max-bs", "64"),
        ("--disable-cuda-graph", None),
    ]
    assert argv[-5:] == [
        "--mem-fraction-static",
        "0.78",
        "--cuda-graph-max-bs",
        "64",
        "--disable-cuda-graph",
    ]


def test_sglang_memory_taken_asks_for_the_free_share_with_its_own_flag():
    """Another process holds memory on some GPUs: the free share is SGLang's --mem-fraction-static."""
    pack = packs.get(Engine.SGLANG)
    ctx = RemedyContext(
        {},
        {"free_gib": 40.0, "total_gib": 80.0, "weights_gib_per_gpu": 10.0},
        Phase.DISTRIBUTED_INIT,
        pack.flags,
    )
    flags = [r.flag for r in memory_remedies.free_memory(ctx) if r.flag]
    assert flags == ["--mem-fraction-static"]


def test_nccl_remedies_name_the_all_reduce_flag_only_where_it_exists():
    """--disable-custom-all-reduce is vLLM's and SGLang's; TGI and llama.cpp have none."""
    for engine, has in (
        (Engine.VLLM, True),
        (Engine.SGLANG, True),
        (Engine.TGI, False),
        (Engine.LLAMACPP, False),
    ):
        ctx = RemedyContext({}, {}, Phase.DISTRIBUTED_INIT, packs.get(engine).flags)
        flags = [r.flag for r in remedies.nccl(ctx)]
        assert ("--disable-custom-all-reduce" in flags) is has, engine


@pytest.mark.parametrize(
    ("argv", "engine", "model"),
    [
        (["vllm", "serve", "m"], Engine.VLLM, "m"),
        (["/opt/venv/bin/vllm", "serve", "--model", "m"], Engine.VLLM, "m"),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], Engine.VLLM, "m"),
        (["python", "-m", "sglang.launch_server", "--model-path", "m"], Engine.SGLANG, "m"),
        (["sglang", "serve", "--model-path", "m"], Engine.SGLANG, "m"),
        (["text-generation-launcher", "--model-id", "m"], Engine.TGI, "m"),
        (["llama-server", "-m", "m.gguf"], Engine.LLAMACPP, "m.gguf"),
        (["python", "-m", "llama_cpp.server", "--model", "m.gguf"], Engine.LLAMACPP, "m.gguf"),
        (["env", "A=1", "vllm", "serve", "m"], Engine.VLLM, "m"),
        (["bringup", "twin", "vllm", "--model", "m"], Engine.VLLM, "m"),
        (["vllm", "chat"], None, None),
        (["python", "-m", "my_server"], None, None),
    ],
)
def test_the_packs_entry_points_name_the_engine(argv, engine, model):
    """Command recognition comes from each pack's entry points."""
    command = engine_args.parse_server_command(argv)
    assert (command.engine, command.model) == (engine, model)


def test_every_entry_point_of_every_pack_is_recognised():
    """Each declared entry point parses to its own engine."""
    for pack in PACKS:
        for ep in pack.entry_points:
            head = [ep.program, ep.subcommand] if ep.program else ["python", "-m", ep.module]
            argv = [w for w in head if w] + ([ep.model_flags[0], "x"] if ep.model_flags else [])
            assert engine_args.parse_server_command(argv).engine is pack.engine, argv


def test_valueless_flags_and_aliases_come_from_the_packs():
    """A pack's boolean flag never swallows the next word; vLLM's -tp is --tensor-parallel-size."""
    argv = ["sglang", "serve", "--disable-cuda-graph", "--model-path", "m"]
    assert engine_args.get_flag(argv, "--model-path") == "m"
    assert engine_args.has_flag(argv, "--disable-cuda-graph")
    assert engine_args.get_flag(["vllm", "serve", "m", "-tp", "4"], "--tensor-parallel-size") == "4"
    assert all(pack.flags.boolean <= engine_args.BOOLEAN_FLAGS for pack in PACKS)


def test_tokenizer_endpoints_are_the_packs():
    """The bench's tokenizer tries are what the packs name, each once, vLLM's first."""
    tries = [(t.path, t.style) for t in openai_stream.tokenize_tries()]
    assert tries == [
        ("/tokenize", "vllm"),
        ("/tokenize", "llamacpp"),
        ("/extras/tokenize/count", "llama-cpp-python"),
    ]
    assert packs.get(Engine.SGLANG).http.tokenize == packs.get(Engine.VLLM).http.tokenize


def test_the_memory_share_to_wait_for_is_the_engines_own():
    """Waiting for free GPUs wants the share the command asks for, by its engine's flag."""
    sglang = ["python", "-m", "sglang.launch_server", "--model-path", "m"]
    assert wanted_share([*sglang, "--mem-fraction-static", "0.7"], None) == 0.7
    assert wanted_share(["vllm", "serve", "m", "--gpu-memory-utilization", "0.8"], None) == 0.8
    assert wanted_share(["vllm", "serve", "m"], None) == 0.9
    assert wanted_share([*sglang, "--gpu-memory-utilization", "0.5"], None) == 0.9
