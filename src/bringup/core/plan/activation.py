"""The forward pass's peak in vLLM's profile run: the tensors one decoder layer holds at once.

The profile run pushes ``t = max_num_batched_tokens`` dummy tokens through the model (V0
without chunked prefill: ``max(max_model_len, 2048)``, see ``settings``). Layers run one
after the other and free their intermediates, so the peak is one layer's live tensors, read
from the layer code (``vllm/model_executor/models/llama.py`` and ``qwen2_moe.py``/
``qwen3_moe.py``, the same shape in every family), per rank (``d`` the activation dtype's
bytes, ``h`` the hidden size, ``i`` the MLP size, sharded 1/TP):

- **across the layer**: the residual stream and the normed input the sub-block is called
  with (``hidden_states, residual = self.post_attention_layernorm(hidden_states, residual)``
  then ``self.mlp(hidden_states)``: both stay referenced): ``2·t·h·d``;
- **dense MLP** (``LlamaMLP.forward``: ``gate_up = self.gate_up_proj(x)``; ``x =
  self.act_fn(gate_up)``; ``x = self.down_proj(x)``): ``gate_up`` stays bound while the
  activation's output and the down projection's output exist: ``t·(2i + i + h)·d``;
- **fused MoE** (``fused_moe.py``, ``TritonExperts.workspace_shapes`` / the
  ``intermediate_cache1..3`` of ``fused_experts_impl``): ``[M, topk, 2i]``, ``[M·topk, i]``
  and ``[M, topk, h]``, then the ``[M, h]`` output, with ``M = t`` (every rank computes all
  tokens' slots, its non-local experts masked by the expert map, so expert parallelism does not
  shrink them), plus the router's ``[t, E]`` logits in float32;
- **attention** (``LlamaAttention.forward``): the QKV projection's output, the attention
  output and ``o_proj``'s output: ``t·((q + 2kv)·hd/TP + q·hd/TP + h)·d``, below the MLP's in
  every model here; the larger of the two is taken.

The 2.07 and 2.99 GiB that a V0 profile of Llama-3.1-8B measured at 20,000 and 29,000 tokens
(vllm-project/vllm#10517) are 3·t·(h + i)·d within 0.5 %.
"""

from __future__ import annotations

from bringup.core.plan.arch import Architecture

ROUTER_LOGIT_BYTES = 4  # the router's logits, float32 (fused_moe's topk_softmax input)


def forward_peak_bytes(
    arch: Architecture, tp: int, tokens: int, *, expert_parallel: bool = False, dp: int = 1
) -> int:
    """The largest set of live tensors of one decoder layer on one rank (module docstring)."""
    t, h, d = tokens, arch.hidden_size, arch.dtype_bytes
    stream = 2 * t * h * d
    mlp = _mlp_bytes(arch, tp, t, expert_parallel=expert_parallel, dp=dp)
    return stream + max(_attention_bytes(arch, tp, t), mlp)


def _attention_bytes(arch: Architecture, tp: int, t: int) -> int:
    q = arch.num_heads * arch.head_dim // tp
    kv = max(1, arch.num_kv_heads // tp) * arch.head_dim
    return t * (q + 2 * kv + q + arch.hidden_size) * arch.dtype_bytes


def _mlp_bytes(arch: Architecture, tp: int, t: int, *, expert_parallel: bool, dp: int = 1) -> int:
    h, d = arch.hidden_size, arch.dtype_bytes
    # an ungated MLP (Nemotron's up_proj, relu², down_proj) has an up output of i, not 2i
    up = 2 if arch.gated_mlp else 1
    if arch.moe is None:
        i = arch.intermediate_size // tp
        return t * ((up + 1) * i + h) * d
    moe = arch.moe
    # the fused kernel's N: each expert sharded 1/TP, or whole under expert parallelism
    i = moe.intermediate_size if expert_parallel else moe.intermediate_size // (tp * dp)
    # under data parallelism the MoE layer works on every DP rank's tokens: the default
    # all2all backend (config/parallel.py: "allgather_reducescatter"; moe_runner.py's naive
    # dispatch for kernels outside the modular framework) gathers them first, and the profile
    # run's DP ranks all run the same dummy size (0.32). Not modelled: the releases of late
    # 2025 whose FusedMoE chunked the gathered tokens (VLLM_MOE_DP_CHUNK_SIZE, vllm#27220)
    t *= dp
    slots = t * moe.experts_per_token
    caches = slots * (up * i + i + h) * d
    return caches + t * h * d + t * moe.num_experts * ROUTER_LOGIT_BYTES
