"""A generated step with collectives over part of a dimension, timed as ASTRA-sim runs its
only Chakra form (issue 32; ``docs/step_simulation.md`` section 7, "Groups over part of a
dimension").

A collective whose group takes some but not all of a dimension's NPUs (e.g. tensor
parallelism over 4 of 8 NPUs, `Workload.communicator`) has no ``involved_dim`` form in a
Chakra trace: the export writes it as a ``pg_name`` group per block of NPUs
(`trace_setup.trace_from_nodes` with ``partial_as_pg``), which ASTRA-sim runs as one flat
ring over the group's NPUs on dimension 0's queue. ``model=pipelined`` times such a step
the same way, so that the step libra_jax reports is the one the exported files give:

* `simulate_graph_ns`: the step of a `step.step_graph` node list. Without a group over
  part of a dimension it is `step.simulate_step` (unchanged); with one, the node list as
  its Chakra trace set (`trace_from_nodes(partial_as_pg=True)`) through
  `step_trace.simulate_trace` (both backends, every system knob).
* `pg_ring_piece`: the convex lower bound of such a collective (a flat ring) that the
  solver's rows use (`timing_rows.collective_pieces`) and that bounds an imported
  ``pg_name`` collective (`trace_rows.TraceBound`), the same for every member.

Units: ns, bytes, GB/s; the piece in s and GB (as `problem.ModelRows`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from libra_jax.model import pipelined, step, step_trace
from libra_jax.model.trace_setup import Geometry, block_members, spans_part_of_a_dimension
from libra_jax.types import Block, Collective, StepNode

__all__ = ["has_partial_groups", "partial_members", "partial_trace", "pg_ring_piece",
           "simulate_graph_ns"]


def has_partial_groups(nodes: Sequence[StepNode], npus_per_dim) -> bool:
    """Whether any collective of the node list spans part of a dimension
    (`trace_setup.spans_part_of_a_dimension`)."""
    npd = [int(n) for n in npus_per_dim]
    return any(spans_part_of_a_dimension(nd, npd) for nd in nodes)


def simulate_graph_ns(nodes: Sequence[StepNode], blocks, npus_per_dim, bandwidth_gbps,
                      tm) -> float:
    """The step (ns) of a `step.step_graph` node list as ASTRA-sim runs its Chakra export:
    `step.simulate_step` when every collective spans whole dimensions, else the trace set
    with each group over part of a dimension as ``pg_name`` flat rings
    (`trace_setup.trace_from_nodes`, ``partial_as_pg``) through
    `step_trace.simulate_trace` (the slowest rank)."""
    if not has_partial_groups(nodes, npus_per_dim):
        return step.simulate_step(nodes, blocks, npus_per_dim, bandwidth_gbps, tm).time_ns
    return step_trace.simulate_trace(partial_trace(nodes, npus_per_dim), blocks, npus_per_dim,
                                     bandwidth_gbps, tm).time_ns


_TRACES: dict = {}  # (nodes, NPUs per dimension) -> its trace set, the last few


def partial_trace(nodes: Sequence[StepNode], npus_per_dim):
    """The node list's trace set with its groups over part of a dimension as ``pg_name``
    rings (`trace_setup.trace_from_nodes`, ``partial_as_pg``), kept for the next call: it
    does not depend on the bandwidths, and building it is most of a step's simulation on a
    large preset (gb200_nvl72: 26 of 32 s), which a design search repeats at every point."""
    key = (tuple(nodes), tuple(int(n) for n in npus_per_dim))
    if key not in _TRACES:
        if len(_TRACES) >= 4:
            _TRACES.pop(next(iter(_TRACES)))
        _TRACES[key] = step_trace.trace_from_nodes(nodes, npus_per_dim, partial_as_pg=True)
    return _TRACES[key]


def partial_members(group, npus_per_dim) -> tuple[int, ...]:
    """NPU 0's ``pg_name`` ring of a collective over ``group`` NPUs per dimension (every
    other block is a translate of it, `trace_setup.block_members`)."""
    npd = [int(n) for n in npus_per_dim]
    return block_members(0, group, npd, [math.prod(npd[:d]) for d in range(len(npd))])


def pg_ring_piece(collective: int, size_bytes: float, members: Sequence[int], network, tm):
    """A convex lower bound of a ``pg_name`` collective on ``members`` (a flat ring, as
    `trace_setup.Shapes` times it), the same for every member: (const_s, coef_gb [D]);
    time_s >= const_s + sum_d coef_gb[d] / bw_d. None when the ring has fewer than 2 NPUs.

    The collective is ``k`` chunks (`step.chunk_split`), each a ring stage of ``steps``
    messages of ``m`` bytes. Member i's message j leaves after its message j-1 from its
    sender arrived, so every member's stage is at least the ``steps`` hops before it on the
    ring (each at its time alone, `Geometry.hop_ns` / the sum over its route's links under
    the congestion-aware backend, plus the endpoint delay per message and one after the last
    receipt). Any ``steps =
    a n + r`` consecutive hops of an n-ring hold every hop ``a`` times and ``r`` others: per
    dimension, at least ``a`` x the ring's sum plus its ``r`` smallest hops. A member's chunk
    stage is between the ring's mean and that member's own (`Shapes.ring_ns`), so at least
    that bound; its ``k`` chunks share dimension 0's queues (an all-reduce the first half),
    so at least ``ceil(k / queues)`` of them run one after another on one queue."""
    members = [int(m) for m in members]
    n = len(members)
    if n < 2:
        return None
    d = network.num_dims
    npd = [int(x) for x in network.npus]
    blocks = [int(b) for b in network.block_codes]
    lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
    total = math.prod(npd)
    k, chunk = step.chunk_split(collective, size_bytes, int(tm.chunks), total)
    st = pipelined.chunk_stages(
        collective, float(k * chunk), np.asarray([n], np.int32),
        np.asarray([Block.RING], np.int32), latency_ns=np.zeros(1), chunks=k,
        endpoint_delay_ns=tm.endpoint_delay_ns, local_mem_bw_gbps=tm.local_mem_bw_gbps,
        gb_is_gib=tm.gb_is_gib)
    s = int(np.flatnonzero(st.enabled)[0])
    steps = max(int(round(float(st.steps[s]))), 1)
    msg = float(st.bytes_coef[s]) / steps  # bytes (/ GiB per GB) of one message
    geo = Geometry(blocks, npd, np.ones(d), lat, 1.0)
    aware = tm.network_backend == "aware"
    hop_c, hop_a = np.zeros(n), np.zeros((n, d))  # each hop alone: c_i + sum_d a_id / bw_d
    for i in range(n):
        a, b = members[i], members[(i + 1) % n]
        if aware:
            for _, dim in geo.route(a, b, "a pg_name ring", local=False):
                hop_c[i] += lat[dim]
                hop_a[i, dim] += msg
        else:
            dim = next(x for x in range(d) if geo.coord(a, x) != geo.coord(b, x))
            hop_c[i] = geo.hop_ns(a, b, 0.0, "a pg_name ring")  # its hops' latency
            hop_a[i, dim] = msg
    rounds, rest = divmod(steps, n)

    def window(v):  # the least sum of `steps` consecutive hops' values v [n]
        return rounds * float(np.sum(v)) + float(np.sum(np.sort(v)[:rest]))

    q = int(tm.queues_per_dim)
    if tm.is_default_runtime:
        queues = max(q // 2, 1) if collective == Collective.ALLREDUCE else q
        serial = serial_bytes = -(-k // queues)
    else:
        # another runtime (`trace_runtime.py`): Themis puts each chunk on the queues of the
        # dimension it ranks first (any of the D) and its last chunk carries only the rest
        # (Themis-flex sizes its own: at least one chunk); a queue runs ceil(active / q)
        # streams at once. At least the chunks' latency over the lanes, their bytes spread
        # evenly over them.
        themis = tm.themis_scheduling
        lanes = (d if themis else 1) * q * -(-int(tm.active_chunks_per_dim) // q)
        chunks = size_bytes / chunk if themis else float(k)
        serial = 1 if tm.inter_dim_scheduling == "themis_flex" else -(-math.ceil(chunks) // lanes)
        serial_bytes = chunks / lanes
    const_ns = serial * (window(hop_c) + (steps + 1) * float(tm.endpoint_delay_ns))
    coef = np.asarray([serial_bytes * window(hop_a[:, x]) for x in range(d)])
    return const_ns / 1e9, coef / 1e9
