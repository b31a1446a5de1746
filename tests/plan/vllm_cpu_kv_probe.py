"""Run with real vLLM's python: start the CPU engine for tiny models, print its KV lines.

    VLLM_CPU_KVCACHE_SPACE=1 <vllm-venv>/bin/python vllm_cpu_kv_probe.py SPEC.json

``SPEC.json`` is a list of ``{"name", "dir", "max_model_len", "max_num_batched_tokens"}``; each
``dir`` holds a config.json only. Weights are vLLM's dummy loader's (random, nothing read from
disk), the tokenizer is skipped: the KV cache is sized from the config alone, exactly as for a
real checkpoint. One process does every model (the engine core in-process,
``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so vLLM is imported once); the engine is built, its
``CPU KV cache size: N tokens`` line is captured, and it is shut down without serving. One JSON
line per model on stdout: ``{"name", "tokens", "line"}`` (``tokens`` null with ``error``).
"""

from __future__ import annotations

import gc
import io
import json
import re
import sys

LINE = re.compile(r"CPU KV cache size: ([\d,]+) tokens")


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as fh:
        specs = json.load(fh)
    real_stdout = sys.stdout
    # vLLM's log handler writes to sys.stdout as it is at import: this buffer gets its lines
    log = io.StringIO()
    sys.stdout = log
    from vllm import LLM

    for spec in specs:
        log.seek(0)
        log.truncate()
        result: dict[str, object] = {"name": spec["name"], "tokens": None}
        try:
            llm = LLM(
                model=spec["dir"],
                load_format="dummy",
                skip_tokenizer_init=True,
                enforce_eager=True,
                dtype="float32",
                max_model_len=spec["max_model_len"],
                max_num_batched_tokens=spec["max_num_batched_tokens"],
                max_num_seqs=spec.get("max_num_seqs", 128),
            )
            found = [m for m in log.getvalue().splitlines() if LINE.search(m)]
            if found:
                result["line"] = found[-1]
                result["tokens"] = int(LINE.search(found[-1]).group(1).replace(",", ""))  # type: ignore[union-attr]
            else:
                tokens = llm.llm_engine.vllm_config.cache_config.kv_cache_size_tokens
                result["tokens"] = tokens
                result["line"] = f"(cache_config.kv_cache_size_tokens) {tokens}"
            llm.llm_engine.engine_core.shutdown()
            del llm
            gc.collect()
        except Exception as exc:  # one model's failure is reported, the others still run
            result["error"] = f"{type(exc).__name__}: {exc}"[:500]
        real_stdout.write(json.dumps(result) + "\n")
        real_stdout.flush()


if __name__ == "__main__":
    main()
