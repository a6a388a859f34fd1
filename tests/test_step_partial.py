"""Generated steps with collectives over part of a dimension (issue 32, `model.step_partial`):
``model=pipelined`` times them as ASTRA-sim runs their only Chakra form (one ``pg_name`` flat
ring per block of NPUs on dimension 0's queue), by hand and against `simulate_trace` of the
exported trace set; steps without one are `step.simulate_step`'s, unchanged; the solver's
rows (`step_partial.pg_ring_piece`) stay below the simulated step at random designs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from libra_jax.inputs.topology import network_from_lists
from libra_jax.inputs.workload import Workload
from libra_jax.model import step, step_partial, step_trace, timing
from libra_jax.model.problem import ConstraintSpec
from libra_jax.solvers.solve import solve
from libra_jax.types import Collective, CommGroup, StepNode, TraceSet

AR, RS, AG, NONE = (int(Collective.ALLREDUCE), int(Collective.REDUCESCATTER),
                    int(Collective.ALLGATHER), int(Collective.NONE))


def _wl(compute, coll, size, comm):
    return Workload(name="t", layer_names=tuple(f"l{i}" for i in range(len(compute))),
                    compute_ns=np.asarray(compute, float), collective=np.asarray(coll, np.int32),
                    size_bytes=np.asarray(size, float), communicator=np.asarray(comm, np.int32),
                    source="test")


def test_a_group_over_part_of_a_ring_is_a_flat_ring_by_hand():
    """A 1 us compute then an 8 MB all-reduce over 2 of a Ring(4)'s NPUs (x Switch(2)): a
    flat ring of 2 moves 2 (n - 1) / n S = S per NPU over the one hop between them (dim 0,
    100 GB/s), one chunk: 1000 + 8e6 / 100 ns, both backends (a Ring hop is one link). The
    hierarchical replay would time the same ring as a dimension of 2: the same here, but
    the step goes through the trace set (`simulate_graph_ns`)."""
    net = network_from_lists(["Ring", "Switch"], [4, 2])
    wl = _wl([[1000.0, 0.0, 0.0]], [[AR, NONE, NONE]], [[8e6, 0, 0]], [[[2, -1]] * 3])
    for backend in ("unaware", "aware"):
        tm = timing.TimingModel(model="pipelined", chunks=1, network_backend=backend)
        got = timing.step_time_ns(wl, net, tm, [100.0, 100.0])
        assert got == pytest.approx(1000.0 + 8e6 / 100.0, rel=1e-12)


def test_a_partial_group_across_a_wrap_uses_dimension_0_then_both():
    """An all-gather over 2 x 2 of Ring(4) x FullyConnected(4): ring 0 -> 1 -> 4 -> 5 -> 0 (NPU
    ids), hops 1 -> 4 and 5 -> 0 differ on both dimensions. Unaware: every hop is timed on
    its first differing dimension (0), so the bandwidth of dimension 1 does not matter;
    an all-gather of S on a ring of 4 sends 3 messages of S per NPU (as ASTRA-sim: S is each
    NPU's part): 3 S / bw0. Aware: a message 1 -> 4 crosses dimension 0
    (one Ring hop) then dimension 1 (store and forward), so dimension 1's bandwidth
    counts."""
    net = network_from_lists(["Ring", "FullyConnected"], [4, 4])
    wl = _wl([[0.0, 0.0, 0.0]], [[AG, NONE, NONE]], [[4e6, 0, 0]], [[[2, 2]] * 3])
    tm = timing.TimingModel(model="pipelined", chunks=1)
    for bw1 in (10.0, 1000.0):
        got = timing.step_time_ns(wl, net, tm, [100.0, bw1])
        assert got == pytest.approx(3 * 4e6 / 100.0, rel=1e-12)
    aware = dataclasses.replace(tm, network_backend="aware")
    slow = timing.step_time_ns(wl, net, aware, [100.0, 10.0])
    fast = timing.step_time_ns(wl, net, aware, [100.0, 1000.0])
    assert slow > fast >= 3 * 4e6 / 100.0 * (1 - 1e-12)


def _partial_workload():
    """Tensor parallel over 2 of Ring(4)'s NPUs, data parallel over the Switch(2), a ZeRO
    reduce-scatter / all-gather pair over part of a dimension."""
    comm_tp, comm_dp = [2, -1], [-1, 2]
    return _wl([[2e4, 3e4, 1e4], [1e4, 2e4, 3e4]],
               [[AR, AR, AR], [AR, RS, AG]],
               [[4e6, 2e6, 8e6], [6e6, 4e6, 4e6]],
               [[comm_tp, comm_tp, comm_dp], [comm_tp, [2, 2], [2, 2]]])


NET = network_from_lists(["Ring", "Switch"], [4, 2])


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_step_time_is_the_exported_trace_sets(backend):
    """`timing.step_time_ns` of a step with groups over part of a dimension is
    `simulate_trace` of its ``pg_name`` trace set (what the export writes); a step without
    one is `step.simulate_step`'s, bit for bit."""
    wl = _partial_workload()
    bw = [120.0, 40.0]
    for q, chunks in ((1, 1), (2, 3)):
        tm = timing.TimingModel(model="pipelined", training_loop="dp_overlap", chunks=chunks,
                                queues_per_dim=q, network_backend=backend,
                                latency_ns=[300.0, 700.0], endpoint_delay_ns=10.0)
        nodes = step.step_graph(wl, "dp_overlap")
        assert step_partial.has_partial_groups(nodes, NET.npus)
        trace = step_trace.trace_from_nodes(nodes, NET.npus, partial_as_pg=True)
        want = step_trace.simulate_trace(trace, NET.block_codes, NET.npus, bw, tm).time_ns
        assert timing.step_time_ns(wl, NET, tm, bw) == pytest.approx(want, rel=1e-12)
        assert want != pytest.approx(
            step.simulate_step(nodes, NET.block_codes, NET.npus, bw, tm).time_ns, rel=1e-6)
        whole = dataclasses.replace(wl, communicator=np.where(wl.communicator == 2,
                                                              np.asarray([4, 2]), -1))
        nodes = step.step_graph(whole, "dp_overlap")
        assert not step_partial.has_partial_groups(nodes, NET.npus)
        assert timing.step_time_ns(whole, NET, tm, bw) == step.simulate_step(
            nodes, NET.block_codes, NET.npus, bw, tm).time_ns


def test_the_trace_set_is_built_once_per_graph():
    """`partial_trace` keeps the last few trace sets (they do not depend on the bandwidths):
    a design search gets the same steps, at any bandwidths, as with a fresh trace each time."""
    wl = _partial_workload()
    tm = timing.TimingModel(model="pipelined", training_loop="dp_overlap", chunks=2,
                            queues_per_dim=2, latency_ns=[300.0, 700.0], endpoint_delay_ns=10.0,
                            inter_dim_scheduling="themis")
    nodes = step.step_graph(wl, "dp_overlap")
    step_partial._TRACES.clear()
    first = step_partial.partial_trace(nodes, NET.npus)
    assert step_partial.partial_trace(list(nodes), list(NET.npus)) is first
    for bw in ([120.0, 40.0], [30.0, 400.0], [120.0, 40.0]):
        fresh = step_trace.simulate_trace(step_trace.trace_from_nodes(
            nodes, NET.npus, partial_as_pg=True), NET.block_codes, NET.npus, bw, tm).time_ns
        assert timing.step_time_ns(wl, NET, tm, bw) == fresh
    for k in range(6):  # a bounded memory: the oldest go
        step_partial.partial_trace(nodes[:len(nodes) - k], NET.npus)
    assert len(step_partial._TRACES) == 4


def _lone_ring_ns(code, size, members, npd, blocks, bw, tm):
    """One collective on a pg_name ring alone (every other NPU idle), simulated."""
    R = int(np.prod(npd))
    nodes = [dict(id=0, name="c", kind=1, collective=code, size_bytes=size, group=1)]
    from libra_jax.inputs.chakra_export import build_rank_trace
    groups = (CommGroup("none", involved=tuple(False for _ in npd)),
              CommGroup("1", ranks=tuple(members)))
    ranks = tuple(build_rank_trace(r, nodes if r in members else [], path=f"m.{r}")
                  for r in range(R))
    return step_trace.simulate_trace(TraceSet("m", ranks, groups, {}), blocks, npd, bw,
                                     tm).time_ns


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_pg_ring_piece_is_below_the_ring_at_random_designs(backend):
    """`pg_ring_piece` <= the simulated ring alone, on rings whose hops cross different
    dimensions (hops far slower than others: the chain bound, not each hop's messages x
    steps), for each collective, chunk count and queue count."""
    npd, blocks = [4, 2, 2], [0, 2, 1]  # Ring(4) x Switch(2) x FullyConnected(2)
    net = network_from_lists(["Ring", "Switch", "FullyConnected"], npd)
    rng = np.random.default_rng(7)
    rings = [(0, 1, 4, 5), (0, 1, 2, 3, 4, 5, 6, 7), (0, 2, 8, 10), (0, 1, 8, 9, 4, 5)]
    for trial in range(16):
        members = rings[trial % len(rings)]
        code = (AR, RS, AG, int(Collective.ALLTOALL))[trial % 4]
        tm = timing.TimingModel(model="pipelined", network_backend=backend,
                                chunks=int(rng.integers(1, 5)),
                                queues_per_dim=int(rng.integers(1, 3)),
                                latency_ns=list(rng.uniform(0, 800, 3)),
                                endpoint_delay_ns=float(rng.uniform(0, 20)))
        bw = np.exp(rng.uniform(np.log(2.0), np.log(800.0), 3))
        size = float(rng.uniform(1e5, 3e7))
        const_s, coef_gb = step_partial.pg_ring_piece(code, size, members, net, tm)
        bound = (const_s + float(np.sum(coef_gb / bw))) * 1e9
        sim = _lone_ring_ns(code, size, members, npd, blocks, bw, tm)
        assert 0 < bound <= sim * (1 + 1e-9), (trial, members, code, bound, sim)


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_certified_bound_below_the_simulated_step(backend):
    """The solver's certified lower bound of a step with groups over part of a dimension is
    below the simulated step at its optimum and at random designs of the same budget."""
    wl = _partial_workload()
    rng = np.random.default_rng(3)
    for q, chunks in ((1, 2), (2, 1)):
        tm = timing.TimingModel(model="pipelined", training_loop="dp_overlap", chunks=chunks,
                                queues_per_dim=q, network_backend=backend,
                                latency_ns=[200.0, 500.0], endpoint_delay_ns=10.0)
        p = timing.build_timed_problem(NET, wl, None, ConstraintSpec(total_bw_gbps=300.0), tm)
        res = solve(p)
        assert res.status == "ok"
        exact = timing.step_time_ns(wl, NET, tm, res.bandwidth_gbps)
        assert res.lower_bound <= exact * (1 + 1e-9)
        for _ in range(6):
            share = rng.uniform(0.05, 0.95)
            bw = [300.0 * share, 300.0 * (1 - share)]
            assert res.lower_bound <= timing.step_time_ns(wl, NET, tm, bw) * (1 + 1e-9)
