"""The pieces `step.simulate_step` is built from that other modules use too: the queue
allocation of ASTRA-sim's ``QueueLevelHandler`` (`Queues`), the chunk split of
``Sys::generate_collective`` (`chunk_split`), a default-runtime collective's stages
(`stages_of`), the aware backend's link crossings (`link_factor`) and the dimensions whose NPUs
the step runs one copy each (`copy_dims`). Units: ns, bytes, GB/s.
"""

from __future__ import annotations

import numpy as np

from libra_jax.model import pipelined
from libra_jax.types import Block, Collective, StepNode

class Queues:
    """Per-dimension queue allocation, as ``QueueLevelHandler``: round robin over all queues
    (the second half anticlockwise), the first half (all-reduce up) or the second (down)."""

    def __init__(self, num_dims: int, q: int):
        self.q = q
        self.any = [0] * num_dims
        self.first = [0] * num_dims
        self.last = [q // 2] * num_dims

    def next(self, dim: int, kind: str) -> tuple[int, int]:
        """(queue index within the dimension, direction: 0 clockwise / 1 anticlockwise)."""
        q, half = self.q, self.q // 2
        if kind == "any":
            i = self.any[dim]
            direction = 1 if (q > 1 and i >= half) else 0
            self.any[dim] = 0 if i + 1 >= q else i + 1
            return i, direction
        if kind == "first":
            i = self.first[dim]
            self.first[dim] = 0 if i + 1 >= half else i + 1
            return i, 0
        i = self.last[dim]
        self.last[dim] = half if i + 1 >= q else i + 1
        return i, 1


def chunk_split(collective: int, size_bytes: float, chunks: int, total_npus: int):
    """(streams, bytes per stream) of a collective, as ``Sys::generate_collective`` splits
    it: streams of ``floor(size / chunks)`` bytes until the size is used up, so a size that
    ``chunks`` does not divide gets one stream more (all of full size); a stream is at least
    ``total_npus`` bytes (all-gather excepted), else the collective becomes ``chunks``
    streams of that."""
    size = int(round(size_bytes))
    chunk = size // chunks
    if collective != Collective.ALLGATHER and total_npus > chunk:
        chunk, size = total_npus, chunks * total_npus
    chunk = max(chunk, 1)
    return -(-size // chunk), chunk


def stages_of(node: StepNode, blocks, tm, cache: dict, total_npus: int):
    """(streams, [(dim, bytes_coef, fixed_ns, kind, steps, reduction_ns)]) of a comm node:
    its stream count and one stream's stages (cached per shape)."""
    key = (node.collective, node.size_bytes, node.group)
    if key not in cache:
        d = len(blocks)
        lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
        if node.collective == Collective.SENDRECV:
            # one message of the whole buffer to the next NPU of the first involved dim
            dim = node.involved.index(True)
            gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
            hops = 2.0 if blocks[dim] == Block.SWITCH else 1.0
            cache[key] = (1, [(dim, node.size_bytes / gib,
                               hops * lat[dim] + tm.endpoint_delay_ns, "any", 1.0, 0.0)])
        else:
            k, chunk = chunk_split(node.collective, node.size_bytes, int(tm.chunks),
                                   total_npus)
            st = pipelined.chunk_stages(
                node.collective, float(k * chunk), np.asarray(node.group, np.int32),
                np.asarray(blocks, np.int32), latency_ns=lat, chunks=k,
                endpoint_delay_ns=tm.endpoint_delay_ns,
                local_mem_bw_gbps=tm.local_mem_bw_gbps, gb_is_gib=tm.gb_is_gib)
            ar = node.collective == Collective.ALLREDUCE
            stages = [(int(st.dims[s]), float(st.bytes_coef[s]), float(st.fixed_ns[s]),
                       ("last" if st.down[s] else "first") if ar else "any",
                       float(st.steps[s]), float(st.reduction_ns[s]))
                      for s in range(len(st.dims)) if st.enabled[s]]
            cache[key] = (k, stages)
    return cache[key]


def link_factor(blocks, network_backend: str) -> np.ndarray:
    """[D] how many times a stage's bytes cross a link of its own: 2 through a Switch under
    the congestion-aware backend (NPU -> switch -> NPU, store and forward), else 1."""
    blocks = np.asarray(blocks)
    return np.where((blocks == Block.SWITCH) & (network_backend == "aware"), 2.0, 1.0)


#: Most copies `simulate_step` runs (one per position in the tree dimensions); beyond it the
#: trees run on one NPU standing for all (every NPU entering a tree at the same time).
MAX_COPIES = 1024


def copy_dims(nodes, npd, algos, blocks, aware) -> list[int]:
    """The dimensions whose NPUs `simulate_step` runs one copy each (their NPUs run their
    own timelines): those that run ``double_binary_tree`` for some all-reduce (a tree's NPUs
    leave it at their own times) and, congestion-aware, a Ring of more than 2 running
    ``halving_doubling`` for some collective other than all-to-all (each NPU goes its own
    way round), where every collective over them spans the whole dimension; [] when the
    copies would be more than `MAX_COPIES`."""
    def runs(d, algo, colls):
        return any(nd.kind == "comm" and nd.collective in colls and nd.group[d] > 1
                   for nd in nodes)
    dims = [d for d in range(len(npd)) if npd[d] > 1 and (
        (algos[d] == "double_binary_tree" and runs(d, algos[d], (Collective.ALLREDUCE,)))
        or (aware and algos[d] == "halving_doubling" and int(blocks[d]) == Block.RING
            and npd[d] > 2 and runs(d, algos[d], (Collective.ALLREDUCE,
                                                   Collective.REDUCESCATTER,
                                                   Collective.ALLGATHER))))
            and all(nd.kind != "comm" or nd.group[d] in (1, npd[d]) for nd in nodes)]
    return dims if int(np.prod([npd[d] for d in dims])) <= MAX_COPIES else []
