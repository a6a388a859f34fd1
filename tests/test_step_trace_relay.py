"""Aware sends whose route leaves through other NPUs' links (issue 32, held-out case g2_015):
a pipeline on one Ring(8), 2 NPUs per stage, so every send crosses 2 hops and the forward
and backward messages of different stages meet on the links between them. ASTRA-sim queues
each hop on the link of the NPU the chunk is at (`Chunk::chunk_arrived_next_device` ->
`Device::send` -> `Link::send`, a FIFO), so `simulate_trace` then simulates every rank and
queues each hop on that NPU's link. The case is the smallest of a bisection of g2_015
(``docs/step_simulation.md`` section 7, "Routes through other NPUs' links"); its ASTRA-sim
per-NPU ends were measured with the shared build (congestion-aware, 1 queue, 1 chunk)."""

from __future__ import annotations

import pathlib
import sys

import numpy as np

from libra_jax.model.step_trace import simulate_trace

EXP = pathlib.Path(__file__).resolve().parents[1] / "experiments"

KIB = 1024
CASE = {
    "case_id": "relay_r8", "set": "test", "kind": "generated", "network": "R8",
    "topology": ["Ring"], "npus_per_dim": [8], "npus": 8, "bandwidth_GBps": [37],
    "latency_ns": [196], "endpoint_delay_ns": 6, "chunks": 1, "impl_per_dim": ["ring"],
    "collective_optimization": "localBWAware", "scheduling_policy": "FIFO",
    "active_chunks_per_dim": 1, "queues_per_dim": 1, "local_mem_bw_GBps": 1e6,
    "max_inflight_comm": 4, "parallel": {"tp": 1, "dp": 2, "pp": 4}, "schedule": "1f1b",
    "micro_batches": 2, "act_bytes": 10276864, "tp_coll": "all_reduce", "dp_kind": "zero",
    "dp_mode": "end", "recv_post": "early", "force_pg": {"tp": False, "dp": False},
    "global_ar": None,
    "stages": [{"layers": [{"fwd_us": f, "bwd_in_us": b, "bwd_w_us": w,
                            "tp_fwd_bytes": 4 * KIB, "tp_bwd_bytes": 4 * KIB,
                            "dp_bytes": 16 * KIB}], "extra_us": x}
               for f, b, w, x in ((19, 22, 19, 125), (7, 6, 7, 0), (74, 83, 86, 0),
                                  (21, 18, 17, 11))],
}
#: ASTRA-sim's "sys[i] finished" cycles, NPUs 0-7 (congestion-aware)
ASTRA_AWARE_NS = [4567155, 4566959, 4525311, 4525115, 3994565, 3994369, 3307819, 3138623]


def _inputs(backend: str):
    if str(EXP) not in sys.path:
        sys.path.insert(0, str(EXP))
    import astrasim_traces
    trace, _ = astrasim_traces.trace_set(CASE)
    return trace, astrasim_traces._libra_inputs(CASE, backend)


def test_relayed_hops_queue_on_the_npus_links():
    trace, (blocks, npd, bw, tm) = _inputs("aware")
    t = simulate_trace(trace, blocks, npd, bw, tm)
    # every rank simulated: the two NPUs of a stage load different links
    assert np.array_equal(t.class_of, np.arange(8))
    ref = np.asarray(ASTRA_AWARE_NS, np.float64)
    # each NPU within 0.01% (before: the relayed hops timed but not queued, -15.0%)
    assert np.all(np.abs(t.rank_end_ns - ref) <= 1e-4 * ref), (t.rank_end_ns, ref)
    assert abs(t.time_ns - ref.max()) <= 1e-4 * ref.max()


def test_unaware_keeps_classes():
    trace, (blocks, npd, bw, tm) = _inputs("unaware")
    t = simulate_trace(trace, blocks, npd, bw, tm)
    assert len(set(t.class_of.tolist())) < 8  # no links: the classes stand
    full = simulate_trace(trace, blocks, npd, bw, tm, classes=False)
    assert t.time_ns == full.time_ns
