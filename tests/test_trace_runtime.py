"""ASTRA-sim's runtime keys in the trace replay (`model/trace_runtime.py`, issue 33): a trace
set of one graph on every rank is `step.simulate_step` under random runtimes (every
algorithm, both backends; trees over several chunks); pg_name rings
under Themis / round robin / SmallestFirst / active chunks against hand-reasoned times; the
real-system presets (their steps have groups over part of a dimension) under Themis."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from libra_jax.model import (algorithms, runtime, step, step_stages, step_trace, timing,
                             trace_copies)
from libra_jax.model.trace_runtime import TraceRuntime
from libra_jax.model.trace_setup import Geometry, Shapes
from libra_jax.types import (Block, Collective, CommGroup, RankTrace, StepNode, TraceNode,
                             TraceSet)

AR, RS, AG, A2A = (Collective.ALLREDUCE, Collective.REDUCESCATTER, Collective.ALLGATHER,
                   Collective.ALLTOALL)
TM = timing.TimingModel(model="pipelined", chunks=1, endpoint_delay_ns=0.0,
                        queues_per_dim=1, max_inflight_collectives=4)
NPD = [4, 2, 3]
BLOCKS = [Block.RING, Block.SWITCH, Block.FULLYCONNECTED]
BW = [100.0, 40.0, 75.0]


def _graph(rng, n, first_always=False):
    """A random step graph whose collectives span whole dimensions (the first one always
    when ``first_always``: a direct dimension must be in every group)."""
    nodes = []
    for i in range(n):
        deps = tuple(sorted(set(rng.choice(i, size=min(i, rng.integers(0, 3)),
                                           replace=False).tolist()))) if i else ()
        if rng.random() < 0.45:
            nodes.append(StepNode(name=f"c{i}", kind="compute", deps=deps,
                                  duration_ns=float(rng.integers(0, 50)) * 100.0))
            continue
        inv = tuple(bool(x) for x in rng.random(len(NPD)) < 0.6)
        if first_always or not any(inv):
            inv = (True,) + inv[1:]
        nodes.append(StepNode(
            name=f"m{i}", kind="comm", deps=deps, collective=int(rng.choice([AR, RS, AG, A2A])),
            size_bytes=float(rng.integers(1, 64)) * 2**16 + float(rng.integers(0, 3)),
            involved=inv, group=tuple(NPD[d] if v else 1 for d, v in enumerate(inv))))
    return nodes


def _runtime(rng, backend, algorithm=None):
    return dataclasses.replace(
        TM, training_loop="dp_overlap", network_backend=backend, algorithm=algorithm,
        inter_dim_scheduling=str(rng.choice(["ascending", "themis", "themis_flex",
                                             "round_robin"])),
        intra_dim_scheduling=str(rng.choice(["fifo", "smallest_first"])),
        collective_optimization=str(rng.choice(["local_bw_aware", "baseline"])),
        active_chunks_per_dim=int(rng.integers(1, 4)), queues_per_dim=int(rng.choice([1, 2, 4])),
        chunks=int(rng.integers(1, 5)), latency_ns=[50.0, 20.0, 10.0], endpoint_delay_ns=10.0,
        queue_policy=str(rng.choice(["lifo", "fifo"])))


def _same(nodes, tm):
    ref = step.simulate_step(nodes, BLOCKS, NPD, BW, tm)
    got = step_trace.simulate_trace(step_trace.trace_from_nodes(nodes, NPD), BLOCKS, NPD, BW,
                                    tm)
    assert len(set(got.class_of.tolist())) == 1
    assert got.time_ns == pytest.approx(ref.time_ns, rel=1e-12)
    start, end = got.rank_times(7)
    np.testing.assert_allclose(end, ref.end_ns, rtol=1e-12)
    np.testing.assert_allclose(start, ref.start_ns, rtol=1e-12)
    np.testing.assert_allclose(got.busy_ns, ref.busy_ns, rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("seed", range(12))
def test_one_graph_under_random_runtimes_is_simulate_step(seed):
    """Ring on every dimension, both backends: every node's start and end as
    `simulate_step` (per-stream stages, Themis loads and the round-robin counter carried
    per rank, active chunks, SmallestFirst)."""
    rng = np.random.default_rng(100 + seed)
    _same(_graph(rng, 30), _runtime(rng, ("unaware", "aware")[seed % 2]))


@pytest.mark.parametrize("seed", range(6))
def test_other_algorithms_unaware_are_simulate_step(seed):
    """Direct and halving-doubling phases (timed by their exact time alone), unaware."""
    rng = np.random.default_rng(200 + seed)
    algo = [("direct", "ring", "ring"), ("halving_doubling", "halving_doubling", "ring"),
            ("direct", "halving_doubling", "ring")][seed % 3]
    _same(_graph(rng, 30, first_always=True), _runtime(rng, "unaware", algo))


ALGOS = [("direct", "ring", "ring"), ("halving_doubling", "halving_doubling", "ring"),
         ("direct", "halving_doubling", "direct"),
         ("double_binary_tree", "double_binary_tree", "ring"),
         ("double_binary_tree", "direct", "direct"),
         ("halving_doubling", "double_binary_tree", "direct")]


@pytest.mark.parametrize("seed", range(18))
def test_other_algorithms_aware_are_simulate_step(seed, monkeypatch):
    """Direct / halving-doubling / double-binary-tree dimensions under the aware backend
    (and the tree under the unaware one): each rank's `PhaseDriver` sends its messages on its
    own links (sharing them with its other stages), tree chunks chain in their queue. The
    trace replay runs a tree (and aware halving-doubling on a Ring) on one NPU standing for
    all: `simulate_step` without its copies (one per position, `step.copy_dims`)."""
    monkeypatch.setattr(step_stages, "MAX_COPIES", 1)
    rng = np.random.default_rng(300 + seed)
    algo = ALGOS[seed % len(ALGOS)]
    backend = "unaware" if seed >= 12 else "aware"
    tm = _runtime(rng, backend, algo)
    if backend == "aware" and seed % 2:  # (system.whole_ns: both count whole ns)
        tm = dataclasses.replace(tm, whole_ns=True)
    _same(_graph(rng, 30, first_always=True), tm)


def _chunked(backend, chunks):
    """All-reduces of several chunks, one queue per dimension (trees chain in it)."""
    nodes = [StepNode(name="c0", kind="compute", duration_ns=1000.0)]
    for i, (size, inv) in enumerate([(3 * 2**20, (True, True, False)), (2**19, (True, False,
                                                                              False)),
                                     (5 * 2**18, (False, True, True)), (2**21, (True, True,
                                                                            True))]):
        nodes.append(StepNode(name=f"m{i}", kind="comm", deps=(len(nodes) - 1,), collective=AR,
                              size_bytes=float(size), involved=inv,
                              group=tuple(n if v else 1 for n, v in zip(NPD, inv))))
    nodes.append(StepNode(name="m4", kind="comm", deps=(0,), collective=AR,
                          size_bytes=float(2**20), involved=(True, False, False),
                          group=(4, 1, 1)))
    tm = dataclasses.replace(TM, network_backend=backend, chunks=chunks, training_loop="dp_overlap",
                             algorithm=("double_binary_tree", "double_binary_tree", "direct"),
                             latency_ns=[50.0, 20.0, 10.0], endpoint_delay_ns=10.0)
    return nodes, tm


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize("chunks", [2, 5, 8])
def test_tree_chunks_chain_as_simulate_step(backend, chunks, monkeypatch):
    """Trees over several chunks: a chunk ends at max(its start, the queue's previous chunk's
    start + `tree_follow_ns`) + its time alone, handing the queue on early; RootMax /
    RootMin alternate per dimension in issue order: the same step as `simulate_step` on one
    NPU standing for all (no copies)."""
    monkeypatch.setattr(step_stages, "MAX_COPIES", 1)
    _same(*_chunked(backend, chunks))


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize("dim", [0, 1])
def test_lone_tree_all_reduce_is_the_every_npu_tree_replay(backend, dim):
    """One all-reduce of k chunks on a tree dimension: the chained chunks end as
    `algorithms.tree_chunks_time_ns` (every NPU of both trees replayed), well before k times
    a chunk alone where the trees overlap."""
    inv = tuple(d == dim for d in range(3))
    tm = dataclasses.replace(_chunked(backend, 1)[1], training_loop="no_overlap")
    lat, n, blk = tm.latency_ns[dim], NPD[dim], int(BLOCKS[dim])
    link = BW[dim] / runtime.link_share("double_binary_tree", n)
    for k in (1, 2, 3, 8):
        node = StepNode(name="m", kind="comm", collective=AR, size_bytes=float(k * 2**20),
                        involved=inv, group=tuple(NPD[d] if v else 1 for d, v in enumerate(inv)))
        got = step_trace.simulate_trace(step_trace.trace_from_nodes([node], NPD), BLOCKS, NPD,
                                        BW, dataclasses.replace(tm, chunks=k)).time_ns
        args = (n, blk, float(2**20))
        rest = (link, lat, 10.0, tm.local_mem_bw_gbps, tm.gb_is_gib, backend)
        assert got == pytest.approx(algorithms.tree_chunks_time_ns(*args, k, *rest), rel=1e-12)
        alone = algorithms.phase_time_ns("double_binary_tree", AR, *args, *rest)
        if k > 1 and not (backend == "aware" and dim == 0):  # (aware 4-NPU Ring: the two
            assert got < 0.9 * k * alone  # trees' messages share its links: little overlap)


# ------------------------------------------------------------------------------ pg rings


def _pg_trace(code, size, npd, pre=()):
    """Every rank: the collectives ``pre`` (code, bytes, involved) in a chain, then
    ``code`` over its dimension-0 ring as a pg_name group (NPUs listed in order)."""
    rings = [tuple(range(s, s + npd[0])) for s in range(0, int(np.prod(npd)), npd[0])]
    groups = [CommGroup(name=f"d{j}", involved=inv) for j, (_, _, inv) in enumerate(pre)]
    groups += [CommGroup(name=f"pg{j}", ranks=m) for j, m in enumerate(rings)]
    nodes = list(pre) + [(code, size, None)]
    n = len(nodes)
    ranks = []
    for r in range(int(np.prod(npd))):
        grp = [j if j < len(pre) else len(pre) + r // npd[0] for j in range(n)]
        ranks.append(RankTrace(
            rank=r, path=f"t.{r}", node_id=np.arange(n, dtype=np.int64),
            name=tuple(f"n{i}" for i in range(n)),
            kind=np.full(n, int(TraceNode.COLLECTIVE), np.int8), duration_ns=np.zeros(n),
            collective=np.asarray([c for c, _, _ in nodes], np.int8),
            size_bytes=np.asarray([float(s) for _, s, _ in nodes]),
            group=np.asarray(grp, np.int32), peer=np.full(n, -1, np.int32),
            tag=np.full(n, -1, np.int64), dep_ptr=(np.arange(n + 1, dtype=np.int64) - 1).clip(0),
            deps=np.arange(n - 1, dtype=np.int32)))
    return TraceSet(prefix="t", ranks=tuple(ranks), groups=tuple(groups), skipped={})


def _run(trace, tm, npd=(4, 2), bw=(100.0, 100.0), blocks=(Block.RING, Block.RING)):
    return step_trace.simulate_trace(trace, list(blocks), list(npd), list(bw), tm).time_ns


def test_pg_ring_is_not_ordered_by_ascending_or_round_robin():
    """A pg ring runs on the one dimension of its RingTopology, always on dimension 0's
    queues: ascending, round robin and baseline give the default time, both backends."""
    tr = _pg_trace(AR, 8e6 + 3, [4, 2])
    for backend in ("unaware", "aware"):
        tm0 = dataclasses.replace(TM, network_backend=backend, chunks=4, latency_ns=[50.0, 9.0],
                                  endpoint_delay_ns=10.0)
        ref = _run(tr, tm0)
        for kw in (dict(inter_dim_scheduling="round_robin"),
                   dict(collective_optimization="baseline"),
                   dict(inter_dim_scheduling="round_robin", intra_dim_scheduling="smallest_first")):
            assert _run(tr, dataclasses.replace(tm0, **kw)) == pytest.approx(ref, rel=1e-12), kw


def test_pg_ring_active_chunks_run_side_by_side():
    """Unaware: k chunks of an all-gather on one queue take k chunk times one after another;
    with k active chunks per dimension they run together: the time of one."""
    tr = _pg_trace(AG, 4e6, [4, 2])
    tm = dataclasses.replace(TM, chunks=4, latency_ns=[50.0, 9.0], endpoint_delay_ns=10.0)
    # 3 steps of a chunk's 1 MB message, and steps + 1 endpoint delays (Ring.cc)
    one = 3 * (1e6 / 100.0 + 50.0 + 10.0) + 10.0
    assert _run(tr, tm) == pytest.approx(4 * one, rel=1e-12)
    assert _run(tr, dataclasses.replace(tm, active_chunks_per_dim=4)) == pytest.approx(
        one, rel=1e-12)
    assert _run(tr, dataclasses.replace(tm, active_chunks_per_dim=2)) == pytest.approx(
        2 * one, rel=1e-12)


def test_pg_ring_under_themis_takes_the_least_loaded_dimensions_queue():
    """Themis schedules a pg chunk as one over the whole machine: the first chunk (no load
    yet) goes ascending, on dimension 0's queue, and loads dimension 0 with 3/4 of it and
    dimension 1 with 1/8; the second then goes on dimension 1's queue, so the two chunks'
    rings (a reduce-scatter, then an all-gather: 6 steps of S / 8) run side by side, where
    ascending runs them one after another on dimension 0's queue."""
    S = 8e6
    tr = _pg_trace(AR, S, [4, 2])
    tm = dataclasses.replace(TM, chunks=2, latency_ns=[50.0, 9.0], endpoint_delay_ns=10.0)
    chunk = 6 * (S / 8 / 100.0 + 50.0 + 10.0) + 10.0  # steps + 1 endpoint delays
    assert _run(tr, tm) == pytest.approx(2 * chunk, rel=1e-12)
    # (Themis: the all-reduce is a reduce-scatter phase and an all-gather phase, each with
    # its own extra endpoint delay)
    assert _run(tr, dataclasses.replace(tm, inter_dim_scheduling="themis")) == pytest.approx(
        chunk + 10.0, rel=1e-12)


def test_pg_ring_themis_last_chunk_carries_the_rest():
    """Themis: chunks of size // chunks while they fit, the last one the rest (ascending:
    every stream a whole chunk). An all-gather of 2c + 1 bytes, 2 chunks, over a 4-ring with
    1 queue: ascending 3 chunks of c (size // 2), Themis c, c and 1 byte; unaware, its
    chunks one after another on one queue (only dimension 0 is involved: 4 x 1)."""
    c = 1_000_000
    tr = _pg_trace(AG, 2 * c + 1, [4, 1])
    tm = dataclasses.replace(TM, chunks=2, latency_ns=[50.0, 0.0], endpoint_delay_ns=10.0)
    step_ns = lambda b: 3 * (b / 100.0 + 50.0 + 10.0) + 10.0  # noqa: E731 (steps + 1 ep)
    kw = dict(npd=(4, 1), bw=(100.0, 100.0))
    assert _run(tr, tm, **kw) == pytest.approx(3 * step_ns(c), rel=1e-12)
    assert _run(tr, dataclasses.replace(tm, inter_dim_scheduling="themis"), **kw) == \
        pytest.approx(2 * step_ns(c) + step_ns(1), rel=1e-12)


def test_round_robin_counter_across_pg_rings():
    """ASTRA-sim's round-robin counter: a chunk over the 3 dimensions moves it 0 -> 1; a pg
    chunk (a ring of one dimension) then moves it to 2 (it resets only on reaching 1), so
    the next reduce-scatter over every dimension starts on dimension 2; a pg chunk at 0
    leaves it at 0."""
    npd = [4, 2, 3]
    inv = (True, True, True)
    tr = _pg_trace(AR, 1e6, npd, pre=[(RS, 6e6, inv)])
    tm = dataclasses.replace(TM, inter_dim_scheduling="round_robin")
    geo = Geometry([0, 0, 0], npd, np.full(3, 100.0), [0.0] * 3, 1.0)
    rt = TraceRuntime(tr, Shapes(tr, geo, [0, 0, 0], tm, False), geo, [0, 0, 0], tm,
                      np.full(3, 100.0))
    assert [s[0] for s in rt.streams(0, RS, 6e6, 0, 0.0)[0]] == [0, 1, 2]
    pg = rt.streams(0, AR, 1e6, 1, 0.0)
    assert [[s[0] for s in x] for x in pg] == [[0]]
    assert rt.states[0][1] == 2
    assert [s[0] for s in rt.streams(0, RS, 6e6, 0, 0.0)[0]] == [2, 0, 1]
    assert rt.states[0][1] == 0
    rt.streams(0, AR, 1e6, 1, 0.0)
    assert rt.states[0][1] == 0


def test_pg_classes_agree_with_every_rank_under_a_runtime():
    """Pg rings that cross dimensions (positions differ) under Themis and SmallestFirst:
    one representative per class gives every rank's time."""
    rings = [(0, 1, 5, 4), (2, 3, 7, 6)]
    groups = (CommGroup(name="all", involved=(True, True)),) + tuple(
        CommGroup(name=f"pg{j}", ranks=m) for j, m in enumerate(rings))
    base = _pg_trace(AR, 3e6, [4, 2], pre=[(RS, 5e6, (True, True))])
    ranks = tuple(dataclasses.replace(
        tr, group=np.asarray([0, 1 if r in rings[0] else 2], np.int32))
        for r, tr in enumerate(base.ranks))
    trace = TraceSet(prefix="t", ranks=ranks, groups=groups, skipped={})
    for backend in ("unaware", "aware"):
        tm = dataclasses.replace(TM, network_backend=backend, chunks=3, queues_per_dim=2,
                                 inter_dim_scheduling="themis", latency_ns=[30.0, 40.0],
                                 intra_dim_scheduling="smallest_first", endpoint_delay_ns=5.0)
        a = step_trace.simulate_trace(trace, [Block.RING, Block.SWITCH], [4, 2], [100.0, 50.0], tm)
        b = step_trace.simulate_trace(trace, [Block.RING, Block.SWITCH], [4, 2], [100.0, 50.0], tm,
                                      classes=False)
        np.testing.assert_allclose(a.rank_end_ns, b.rank_end_ns, rtol=1e-12)


# ------------------------------------------------------------------------------ presets


def _preset(name):
    from hydra import compose, initialize_config_dir

    from libra_jax.cli import config
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"conf={name}", "model=pipelined"])
    network, workload, _, _ = config.to_inputs(cfg)
    tm, _ = config.to_timing(cfg, network.num_dims, network)
    return network, workload, tm


@pytest.mark.parametrize("preset", ["h100_dgx", "tpu_v4",
                                    pytest.param("gb200_nvl72", marks=pytest.mark.slow)])
def test_real_system_presets_under_themis(preset):
    """The real-system presets (collectives over part of a dimension: pg_name rings through
    `simulate_trace`) evaluate under Themis with 4 chunks, to at least the step's compute."""
    network, workload, tm0 = _preset(preset)
    bw = np.full(network.num_dims, 100.0)
    tm = dataclasses.replace(tm0, inter_dim_scheduling="themis", chunks=4)
    t = timing.step_time_ns(workload, network, tm, bw)
    assert np.isfinite(t) and t >= float(np.sum(workload.compute_ns))


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_one_graph_with_trees_runs_simulate_step_copies(backend):
    """A trace set whose ranks all run one graph with tree dimensions goes to
    `simulate_step`'s copies (`trace_copies.as_copies`): the same step, each rank the times
    of the copy at its tree positions; with sends or recvs it stays in the trace replay."""
    nodes, tm = _chunked(backend, 4)
    ref = step.simulate_step(nodes, BLOCKS, NPD, BW, tm)
    assert ref.copy_dims == (0, 1) and len(ref.copies) == 8
    got = step_trace.simulate_trace(step_trace.trace_from_nodes(nodes, NPD), BLOCKS, NPD, BW, tm)
    assert got.time_ns == ref.time_ns
    for r in range(24):  # NPU r sits at (r % 4, r // 4 % 2) on the two tree dimensions
        c = ref.copies.index((r % 4, r // 4 % 2))
        np.testing.assert_array_equal(got.rank_times(r)[1], ref.copy_end_ns[c])
        assert got.rank_end_ns[r] == np.nanmax(ref.copy_end_ns[c])
    assert len(set(got.class_of.tolist())) == 8
    assert trace_copies.step_nodes(step_trace.trace_from_nodes(
        [nodes[0], StepNode(name="p", kind="comm", deps=(0,), collective=Collective.SENDRECV,
                            size_bytes=64.0, involved=(True, False, False), group=(4, 1, 1))],
        NPD), NPD) is None
