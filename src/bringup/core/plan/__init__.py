"""The memory planner: per-GPU memory of a vLLM server, and the failure, before launch.

Modules, in the order the plan is made:

- :mod:`.arch` — the architecture from config.json;
- :mod:`.quant` and :mod:`.synth` — the tensor list from config.json alone (no download);
- :mod:`.weights` — weights per GPU rank (sharded, replicated, experts, vocab padding);
- :mod:`.kv` — KV bytes per token (GQA, MLA, sliding windows, linear state) and capacity;
- :mod:`.peaks` — activation peak, sampler warmup, CUDA graphs, non-torch memory;
- :mod:`.settings` — vLLM's flags and defaults by version and GPU;
- :mod:`.budget` — vLLM's budget rule and the first failure;
- :mod:`.planner`, :mod:`.recommend` and :mod:`.assemble` — the evaluation, flags that make it
  fit, and the plan made of both;
- :mod:`.confidence` — how sure the verdict is: the settings under what the facts leave open;
- :mod:`.calibrate` — corrections from a successful startup log.
"""

from __future__ import annotations

from bringup.core.plan.arch import Architecture, parse_architecture
from bringup.core.plan.budget import Calibration, GpuSet
from bringup.core.plan.planner import Planner
from bringup.core.plan.result import Plan
from bringup.core.plan.settings import Requested, Settings, resolve

__all__ = [
    "Architecture",
    "Calibration",
    "GpuSet",
    "Plan",
    "Planner",
    "Requested",
    "Settings",
    "parse_architecture",
    "resolve",
]
