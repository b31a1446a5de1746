"""The longer texts vLLM 0.33 prints: the logo, the config dump, the tracebacks.

Tracebacks show the frames a real vLLM 0.33 install prints (paths under
``/usr/local/lib/python3.12/dist-packages``), so a reader can match on what it would see.
"""

from __future__ import annotations

from bringup.twin.config import VLLM_VERSION, TwinConfig

SITE = "/usr/local/lib/python3.12/dist-packages"
VLLM = f"{SITE}/vllm"
LIB = "/usr/lib/python3.12"

SAMPLER_OOM = (
    "CUDA out of memory occurred when warming up sampler with {n} dummy requests. Please try "
    "lowering `max_num_seqs` or `gpu_memory_utilization` when initializing the engine."
)


def logo(model: str) -> str:
    """The 0.33 banner record (message starts with a newline)."""
    return (
        "\n"
        "       █     █     █▄   ▄█\n"
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {VLLM_VERSION}\n"
        f"  █▄█▀ █     █     █     █  model   {model}\n"
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀\n"
    )


def engine_config(cfg: TwinConfig) -> str:
    """The ``Initializing a V1 LLM engine`` config string."""
    return (
        f"model='{cfg.model}', speculative_config=None, tokenizer='{cfg.model}', "
        "skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, "
        "trust_remote_code=True, dtype=torch.bfloat16, "
        f"max_seq_len={cfg.max_model_len}, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={cfg.tp}, pipeline_parallel_size=1, data_parallel_size=1, "
        "disable_custom_all_reduce=False, quantization=fp8, enforce_eager=False, "
        "kv_cache_dtype=auto, device_config=cuda, seed=0, "
        f"served_model_name={cfg.model}, enable_prefix_caching=True, "
        "enable_chunked_prefill=True, pooler_config=None, "
        "compilation_config={'level': 3, 'mode': 3, 'backend': 'inductor', "
        "'cudagraph_mode': <CUDAGraphMode.FULL_AND_PIECEWISE: (2, 1)>, 'use_inductor_graph_partition': False}"
    )


def _frames(*frames: tuple[str, int, str, str]) -> str:
    return "".join(
        f'  File "{path}", line {line}, in {fn}\n    {code}\n' for path, line, fn, code in frames
    )


def torch_oom(
    gpu: int,
    tried_gib: float,
    total_gib: float,
    free_gib: float,
    in_use_gib: float,
    graphs_gib: float,
) -> str:
    return (
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {tried_gib:.2f} GiB. "
        f"GPU {gpu} has a total capacity of {total_gib:.2f} GiB of which {free_gib:.2f} GiB is free. "
        f"Including non-PyTorch memory, this process has {in_use_gib:.2f} GiB memory in use. "
        f"Of the allocated memory {in_use_gib - graphs_gib - 0.9:.2f} GiB is allocated by PyTorch, "
        f"with {graphs_gib:.2f} GiB allocated in private pools (e.g., CUDA Graphs), and 0.31 GiB is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
        "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def sampler_traceback(oom_line: str, n: int, in_worker: bool) -> str:
    """Root cause of oom_warmup: the torch OOM inside the sampler, re-raised by vLLM."""
    outer = (
        [
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                866,
                "worker_busy_loop",
                "output = func(*args, **kwargs)",
            )
        ]
        if in_worker
        else []
    )
    return (
        "Traceback (most recent call last):\n"
        + _frames(
            (
                f"{VLLM}/v1/worker/gpu_model_runner.py",
                4871,
                "_dummy_sampler_run",
                "sampler_output = self.sampler(logits=logits, sampling_metadata=dummy_metadata)",
            ),
            (
                f"{SITE}/torch/nn/modules/module.py",
                1775,
                "_wrapped_call_impl",
                "return self._call_impl(*args, **kwargs)",
            ),
            (
                f"{VLLM}/v1/sample/sampler.py",
                96,
                "forward",
                "sampled, processed_logprobs = self.sample(logits, sampling_metadata)",
            ),
            (
                f"{VLLM}/v1/sample/ops/topk_topp_sampler.py",
                240,
                "apply_top_k_top_p_pytorch",
                "logits_sort, logits_idx = logits.sort(dim=-1, descending=False)",
            ),
        )
        + oom_line
        + "\n\nThe above exception was the direct cause of the following exception:\n\n"
        + "Traceback (most recent call last):\n"
        + _frames(
            *outer,
            (
                f"{VLLM}/v1/worker/gpu_worker.py",
                540,
                "compile_or_warm_up_model",
                "self.model_runner._dummy_sampler_run(hidden_states=last_hidden_states)",
            ),
            (
                f"{VLLM}/v1/worker/gpu_model_runner.py",
                4878,
                "_dummy_sampler_run",
                "raise RuntimeError(",
            ),
        )
        + f"RuntimeError: {SAMPLER_OOM.format(n=n)}\n"
    )


def load_oom_traceback(oom_line: str, in_worker: bool) -> str:
    """The weights overflow the GPU while loading."""
    outer = (
        [
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                712,
                "worker_main",
                "worker = WorkerProc(*args, **kwargs)",
            ),
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                552,
                "__init__",
                "self.worker.load_model()",
            ),
        ]
        if in_worker
        else []
    )
    return (
        "Traceback (most recent call last):\n"
        + _frames(
            *outer,
            (
                f"{VLLM}/v1/worker/gpu_worker.py",
                301,
                "load_model",
                "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
            ),
            (
                f"{VLLM}/v1/worker/gpu_model_runner.py",
                4340,
                "load_model",
                "self.model = model_loader.load_model(",
            ),
            (
                f"{VLLM}/model_executor/model_loader/default_loader.py",
                310,
                "load_weights",
                "loaded_weights = model.load_weights(self.get_all_weights(model_config, model))",
            ),
            (
                f"{SITE}/torch/utils/_device.py",
                104,
                "__torch_function__",
                "return func(*args, **kwargs)",
            ),
        )
        + oom_line
        + "\n"
    )


def free_memory_traceback(message: str, in_worker: bool) -> str:
    outer = (
        [
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                712,
                "worker_main",
                "worker = WorkerProc(*args, **kwargs)",
            ),
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                540,
                "__init__",
                "self.worker.init_device()",
            ),
        ]
        if in_worker
        else []
    )
    return (
        "Traceback (most recent call last):\n"
        + _frames(
            *outer,
            (
                f"{VLLM}/v1/worker/worker_base.py",
                326,
                "init_device",
                "self.worker.init_device()  # type: ignore",
            ),
            (
                f"{VLLM}/v1/worker/gpu_worker.py",
                268,
                "init_device",
                "self.requested_memory = request_memory(init_snapshot, self.cache_config)",
            ),
            (f"{VLLM}/v1/worker/utils.py", 412, "request_memory", "raise ValueError("),
        )
        + f"ValueError: {message}\n"
    )


_ENGINE_FRAMES = (
    (
        f"{VLLM}/v1/engine/core.py",
        1071,
        "run_engine_core",
        "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
    ),
    (f"{VLLM}/v1/engine/core.py", 812, "__init__", "super().__init__("),
)


def engine_wrapper(final_line: str, stage: str) -> str:
    """EngineCore's own traceback around a failure in ``stage`` (executor, kv, warmup)."""
    tail = {
        "executor": [
            (
                f"{VLLM}/v1/engine/core.py",
                104,
                "__init__",
                "self.model_executor = executor_class(vllm_config)",
            ),
            (f"{VLLM}/v1/executor/abstract.py", 103, "__init__", "self._init_executor()"),
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                174,
                "_init_executor",
                "self.workers = WorkerProc.wait_for_ready(unready_workers)",
            ),
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                660,
                "wait_for_ready",
                "raise e from None",
            ),
        ],
        "kv": [
            (
                f"{VLLM}/v1/engine/core.py",
                118,
                "__init__",
                "num_gpu_blocks, num_cpu_blocks, kv_cache_config = self._initialize_kv_caches(",
            ),
            (
                f"{VLLM}/v1/engine/core.py",
                245,
                "_initialize_kv_caches",
                "kv_cache_configs = get_kv_cache_configs(",
            ),
            (
                f"{VLLM}/v1/core/kv_cache_planning.py",
                1412,
                "get_kv_cache_configs",
                "_check_enough_kv_cache_memory(",
            ),
            (
                f"{VLLM}/v1/core/kv_cache_planning.py",
                688,
                "_check_enough_kv_cache_memory",
                "raise ValueError(",
            ),
        ],
        "warmup": [
            (
                f"{VLLM}/v1/engine/core.py",
                118,
                "__init__",
                "num_gpu_blocks, num_cpu_blocks, kv_cache_config = self._initialize_kv_caches(",
            ),
            (
                f"{VLLM}/v1/engine/core.py",
                265,
                "_initialize_kv_caches",
                "self.model_executor.initialize_from_config(kv_cache_configs)",
            ),
            (
                f"{VLLM}/v1/executor/abstract.py",
                116,
                "initialize_from_config",
                'self.collective_rpc("compile_or_warm_up_model")',
            ),
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                397,
                "collective_rpc",
                "return aggregate(get_response())",
            ),
            (
                f"{VLLM}/v1/executor/multiproc_executor.py",
                380,
                "get_response",
                "raise RuntimeError(",
            ),
        ],
        "inline": [
            (
                f"{VLLM}/v1/engine/core.py",
                118,
                "__init__",
                "num_gpu_blocks, num_cpu_blocks, kv_cache_config = self._initialize_kv_caches(",
            ),
            (
                f"{VLLM}/v1/engine/core.py",
                265,
                "_initialize_kv_caches",
                "self.model_executor.initialize_from_config(kv_cache_configs)",
            ),
            (
                f"{VLLM}/v1/executor/abstract.py",
                116,
                "initialize_from_config",
                'self.collective_rpc("compile_or_warm_up_model")',
            ),
            (
                f"{VLLM}/v1/executor/uniproc_executor.py",
                78,
                "collective_rpc",
                "result = run_method(self.driver_worker, method, args, kwargs)",
            ),
        ],
    }[stage]
    return (
        "Traceback (most recent call last):\n" + _frames(*_ENGINE_FRAMES, *tail) + final_line + "\n"
    )


def process_banner(name: str, wrapper: str) -> str:
    """What multiprocessing prints on stderr when the EngineCore target raises."""
    head = _frames(
        (f"{LIB}/multiprocessing/process.py", 314, "_bootstrap", "self.run()"),
        (
            f"{LIB}/multiprocessing/process.py",
            108,
            "run",
            "self._target(*self._args, **self._kwargs)",
        ),
        (f"{VLLM}/v1/engine/core.py", 1084, "run_engine_core", "raise e"),
    )
    body = wrapper.split("\n", 1)[1]
    return f"Process {name}:\nTraceback (most recent call last):\n{head}{body}"


_CLI_FRAMES = (
    ("/usr/local/bin/vllm", 10, "<module>", "sys.exit(main())"),
    (f"{VLLM}/entrypoints/cli/main.py", 73, "main", "args.dispatch_function(args)"),
    (f"{VLLM}/entrypoints/cli/serve.py", 112, "cmd", "uvloop.run(run_server(args))"),
    (f"{SITE}/uvloop/__init__.py", 96, "run", "return __asyncio.run("),
    (f"{LIB}/asyncio/runners.py", 195, "run", "return runner.run(main)"),
    (f"{LIB}/asyncio/runners.py", 118, "run", "return self._loop.run_until_complete(task)"),
    ("uvloop/loop.pyx", 1518, "uvloop.loop.Loop.run_until_complete", ""),
    (f"{SITE}/uvloop/__init__.py", 48, "wrapper", "return await main"),
)


def _cli(*frames: tuple[str, int, str, str]) -> str:
    text = "Traceback (most recent call last):\n" + _frames(*_CLI_FRAMES, *frames)
    return text.replace("\n    \n", "\n")


def api_engine_failed(failed: str) -> str:
    """The API server's uncaught traceback after EngineCore died during startup."""
    return (
        _cli(
            (
                f"{VLLM}/entrypoints/launchers/api_server/entry.py",
                201,
                "run_server",
                "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
            ),
            (
                f"{VLLM}/entrypoints/launchers/api_server/entry.py",
                221,
                "run_server_worker",
                "async with build_async_engine_client(",
            ),
            (f"{LIB}/contextlib.py", 210, "__aenter__", "return await anext(self.gen)"),
            (
                f"{VLLM}/entrypoints/common/engine_client.py",
                148,
                "build_async_engine_client_from_engine_args",
                "async_llm = AsyncLLM.from_vllm_config(",
            ),
            (f"{VLLM}/v1/engine/async_llm.py", 222, "from_vllm_config", "return cls("),
            (
                f"{VLLM}/v1/engine/async_llm.py",
                134,
                "__init__",
                "self.engine_core = EngineCoreClient.make_async_mp_client(",
            ),
            (
                f"{VLLM}/v1/engine/core_client.py",
                102,
                "make_async_mp_client",
                "return AsyncMPClient(*client_args)",
            ),
            (f"{VLLM}/v1/engine/core_client.py", 770, "__init__", "super().__init__("),
            (
                f"{VLLM}/v1/engine/core_client.py",
                448,
                "__init__",
                "with launch_core_engines(vllm_config, executor_class, log_stats) as (",
            ),
            (f"{LIB}/contextlib.py", 144, "__exit__", "next(self.gen)"),
            (f"{VLLM}/v1/engine/utils.py", 947, "launch_core_engines", "wait_for_engine_startup("),
            (f"{VLLM}/v1/engine/utils.py", 1096, "wait_for_engine_startup", "raise RuntimeError("),
        )
        + f"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {failed}\n"
    )


def api_bind_failed(exc_text: str) -> str:
    """The API server's uncaught traceback when the port cannot be bound."""
    return (
        _cli(
            (
                f"{VLLM}/entrypoints/launchers/api_server/entry.py",
                196,
                "run_server",
                "listen_address, sock = setup_server(args)",
            ),
            (
                f"{VLLM}/entrypoints/launchers/launcher.py",
                112,
                "setup_server",
                "sock = create_server_socket(sock_addr)",
            ),
            (
                f"{VLLM}/entrypoints/launchers/launcher.py",
                68,
                "create_server_socket",
                "sock.bind(addr)",
            ),
        )
        + f"OSError: {exc_text}\n"
    )


def api_config_failed(message: str) -> str:
    """The API server's traceback for a config error (phase 3)."""
    return (
        _cli(
            (
                f"{VLLM}/entrypoints/launchers/api_server/entry.py",
                221,
                "run_server_worker",
                "async with build_async_engine_client(",
            ),
            (
                f"{VLLM}/engine/arg_utils.py",
                1610,
                "create_engine_config",
                "parallel_config = ParallelConfig(",
            ),
            (
                f"{SITE}/pydantic/_internal/_dataclasses.py",
                121,
                "__init__",
                "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)",
            ),
        )
        + f"pydantic_core._pydantic_core.ValidationError: 1 validation error for ParallelConfig\n  Value error, {message} [type=value_error]\n"
    )
