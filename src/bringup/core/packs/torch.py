"""PyTorch's own messages, which every Python engine (vLLM, SGLang, TGI's shards) prints."""

from __future__ import annotations

# The CUDA caching allocator's OOM (torch 2.1-2.9 spellings, ROCm's HIP) and the bare driver form.
TORCH_OOM = (
    r"(?:torch\.)?(?:cuda\.)?OutOfMemoryError: (?:CUDA|HIP) out of memory"
    r"|CUDA out of memory\. Tried to allocate"
    r"|CUDA error: out of memory"
)

# Any accelerator's allocator: HIP and Ascend's NPU say it in their own words, Inductor's
# autotuning wraps it ("InductorError: ... CUDA out of memory"), a message cut after "GPU".
ACCELERATOR_OOM = TORCH_OOM + r"|(?:CUDA|HIP|NPU|XPU) out of memory|hipErrorOutOfMemory"
