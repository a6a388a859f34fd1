"""`simulate_trace` runs a chain of kernels (each compute the only child of the one before,
its only parent) as one compute event while nothing else wants the compute unit, and
splits it back into one event per kernel when something does (`split_chain`): node times
by hand on a 2-rank trace where a compute becomes ready in the middle of a chain, with
the two tie orders (the node of lower index takes the compute unit first)."""

from __future__ import annotations

import numpy as np
import pytest

from libra_jax.inputs.chakra_export import build_rank_trace
from libra_jax.model import timing
from libra_jax.model.step_trace import simulate_trace
from libra_jax.types import Block, TraceNode, TraceSet

K = TraceNode


def _trace(x_first: bool) -> TraceSet:
    """Rank 0: kernels k1 -> k2 -> k3 (10 ns each) and recv -> x (5 ns); rank 1 sends 10
    bytes at 0 (5 ns latency + 10 bytes / 1 GB/s = 15 ns: the recv ends mid-k2). x is
    node 1 (before the chain's next kernel k3) when ``x_first``, else the last node."""
    chain = [dict(id=10, name="k1", kind=K.COMPUTE, duration_ns=10.0),
             dict(id=11, name="k2", kind=K.COMPUTE, duration_ns=10.0, deps=[10]),
             dict(id=12, name="k3", kind=K.COMPUTE, duration_ns=10.0, deps=[11])]
    other = [dict(id=20, name="recv", kind=K.RECV, peer=1, tag=7, size_bytes=10),
             dict(id=21, name="x", kind=K.COMPUTE, duration_ns=5.0, deps=[20])]
    nodes0 = ([chain[0], other[1], other[0], chain[1], chain[2]] if x_first
              else chain + other)
    nodes1 = [dict(id=30, name="send", kind=K.SEND, peer=0, tag=7, size_bytes=10)]
    return TraceSet(prefix="chains", ranks=(build_rank_trace(0, nodes0),
                                            build_rank_trace(1, nodes1)),
                    groups=(), skipped={})


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize("x_first", [True, False])
def test_chain_split_when_a_compute_waits(backend, x_first):
    tm = timing.TimingModel(model="pipelined", latency_ns=[5.0], chunks=1,
                            endpoint_delay_ns=0.0, gb_is_gib=False, network_backend=backend)
    t = simulate_trace(_trace(x_first), [Block.RING], [2], [1.0], tm)
    start, end = t.rank_times(0)
    names = [n for n in _trace(x_first).ranks[0].name]
    got = {n: (start[i], end[i]) for i, n in enumerate(names)}
    assert got["k1"] == (0.0, 10.0) and got["k2"] == (10.0, 20.0)
    assert got["recv"] == (0.0, 15.0)  # x ready at 15, mid-k2: it waits for the unit
    if x_first:  # at 20, x (lower index) goes before k3
        assert got["x"] == (20.0, 25.0) and got["k3"] == (25.0, 35.0)
    else:
        assert got["k3"] == (20.0, 30.0) and got["x"] == (30.0, 35.0)
    assert t.time_ns == 35.0
    assert np.array_equal(t.rank_end_ns, [35.0, 15.0])
