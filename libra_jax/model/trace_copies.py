"""A trace set whose ranks all run one step graph over whole dimensions, timed with
`step.simulate_step`'s copies where the NPUs of a dimension differ (`step.copy_dims`: a
double binary tree, a congestion-aware halving-doubling Ring): the trace replay
(`step_trace.simulate_trace`) runs one NPU per class of ranks, and every rank of such a trace
is one class, which cannot follow a tree's NPUs leaving it at their own times
(``docs/runtime.md``, "The model"). `as_copies` hands such a trace to `simulate_step` and
maps each copy back to its ranks; any other trace set (different graphs, sends and recvs,
``pg_name`` groups, no copied dimension) is left to the trace replay.

Units: ns, bytes, GB/s.
"""

from __future__ import annotations

import math

import numpy as np

from libra_jax.model import step
from libra_jax.model.trace_setup import TraceTiming
from libra_jax.types import StepNode, TraceNode, TraceSet

_FIELDS = ("kind", "duration_ns", "collective", "size_bytes", "group", "dep_ptr", "deps")


def step_nodes(trace: TraceSet, npd) -> list[StepNode] | None:
    """The step graph of rank 0 of ``trace``, or None when a node is a send / recv, a
    collective of a ``pg_name`` group, or waits for a later node (`same_graph` says whether
    every rank runs it)."""
    first = trace.ranks[0]
    nodes = []
    for i in range(len(first.kind)):
        deps = tuple(int(d) for d in first.deps[first.dep_ptr[i]:first.dep_ptr[i + 1]])
        if any(d >= i for d in deps):
            return None
        if first.kind[i] == TraceNode.COMPUTE:
            nodes.append(StepNode(name=first.name[i], kind="compute", deps=deps,
                                  duration_ns=float(first.duration_ns[i])))
            continue
        if first.kind[i] != TraceNode.COLLECTIVE:
            return None
        inv = trace.groups[int(first.group[i])].involved
        if inv is None:
            return None
        inv = tuple(bool(v) and n > 1 for v, n in zip(inv, npd))
        nodes.append(StepNode(name=first.name[i], kind="comm", deps=deps,
                              collective=int(first.collective[i]),
                              size_bytes=float(first.size_bytes[i]), involved=inv,
                              group=tuple(n if v else 1 for v, n in zip(inv, npd))))
    return nodes


def same_graph(trace: TraceSet) -> bool:
    """Whether every rank runs rank 0's graph (nodes, sizes, groups, dependencies)."""
    first = trace.ranks[0]
    return all(np.array_equal(getattr(r, f), getattr(first, f))
               for r in trace.ranks[1:] for f in _FIELDS)


def as_copies(trace: TraceSet, blocks, npd, bandwidth_gbps, tm) -> TraceTiming | None:
    """`simulate_step` of the graph every rank runs, each rank given the times of its copy
    (its position on the copied dimensions; the class of a rank is its copy), or None when
    the trace is not one graph (`step_nodes`, `same_graph`) or has no copied dimension and
    is not scheduled by Themis (whose first issuer within a tick `simulate_step` follows)."""
    if tm.is_default_runtime:
        return None
    nodes = step_nodes(trace, npd)
    algos = tm.algorithm or ("ring",) * len(npd)
    themis = tm.themis_scheduling
    if not nodes or not (themis or step.copy_dims(nodes, npd, algos, blocks,
                                                  tm.network_backend == "aware")) \
            or not same_graph(trace):
        return None  # (the ranks compared last: only where copies would be needed)
    got = step.simulate_step(nodes, blocks, npd, bandwidth_gbps, tm)
    strides = [math.prod(npd[:d]) for d in range(len(npd))]
    at = {pos: c for c, pos in enumerate(got.copies)}
    copy_of = np.asarray([at[tuple(r // strides[d] % npd[d] for d in got.copy_dims)]
                          for r in range(trace.num_ranks)], np.int64)
    rep = {}  # copy -> its first rank
    for r, c in enumerate(copy_of):
        rep.setdefault(int(c), r)
    ends = np.nanmax(got.copy_end_ns, axis=1) if len(nodes) else np.zeros(len(got.copies))
    return TraceTiming(got.time_ns, ends[copy_of], np.asarray([rep[int(c)] for c in copy_of]),
                       {r: got.copy_start_ns[c] for c, r in rep.items()},
                       {r: got.copy_end_ns[c] for c, r in rep.items()}, got.busy_ns)
