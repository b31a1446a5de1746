"""``bringup plan``'s decode-speed flags (the "decode speed (batch 1)" group); the
:class:`~bringup.core.plan.decode.DecodeSetup` they make, each engine flag also read from the
server command after ``--``, is ``core.plan.flags.decode_setup``'s.
"""

from __future__ import annotations

import argparse

from bringup.core.plan import decode
from bringup.core.plan.decode_links import DEFAULT_NETWORK, NETWORKS
from bringup.core.plan.flags import reader


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The decode group of ``plan``'s flags."""
    dec = parser.add_argument_group("decode speed (batch 1)")
    dec.add_argument(
        "--interconnect",
        choices=decode.INTERCONNECTS,
        help="link between the GPUs of a node (default: the GPU catalog's); pcie-numa: GPUs "
        "split across CPU sockets without P2P between them (with P2P on across them: pcie)",
    )
    dec.add_argument(
        "-dcp",
        "--decode-context-parallel-size",
        dest="decode_context_parallel_size",
        type=reader("--decode-context-parallel-size", int),
        default=None,
        metavar="N",
        help="shard the KV cache over N GPUs of the TP group (vLLM's -dcp)",
    )
    dec.add_argument(
        "--context-tokens",
        type=int,
        default=0,
        metavar="N",
        help="tokens already in the context when decoding (default 0)",
    )
    dec.add_argument(
        "--memory-bandwidth",
        metavar="RATE",
        help="memory bandwidth of one GPU (or the CPU), e.g. 3.35TB/s, 20GB/s "
        "(default: the GPU catalog's peak; on a CPU, measured)",
    )
    dec.add_argument(
        "--disable-custom-all-reduce",
        action="store_true",
        default=None,
        help="the engine's TP all-reduces are NCCL's, not its custom all-reduce kernel "
        "(vLLM's and SGLang's flag): slower on NVLink",
    )
    dec.add_argument(
        "--nnodes",
        type=reader("--nnodes", int),
        default=None,
        metavar="N",
        help="nodes the instance's GPUs are split over, evenly (vLLM's and SGLang's --nnodes; "
        "default 1): a TP group larger than one node's GPUs crosses the network",
    )
    dec.add_argument(
        "--node-interconnect",
        choices=NETWORKS,
        default=None,
        help=f"network between the nodes of --nnodes (default {DEFAULT_NETWORK}): InfiniBand, "
        "RoCE, or plain Ethernet (NCCL's TCP sockets)",
    )
