"""ASTRA-sim's runtime in the model (`model/runtime.py`, `step.py`, `timing_rows.py`): the
replay of ``Sys::generate_collective`` against hand-computed orders and times, the default
runtime left untouched, the convex bound below the simulation, and a pinned sample of the
simulator's own runs (`experiments/results/astrasim_runtime`)."""

from __future__ import annotations

import dataclasses
import pathlib
import random
import sys

import numpy as np
import pytest

from libra_jax import LibraInputError
from libra_jax.model import algorithms, runtime, step, timing
from libra_jax.model.timing_spec import TimingModel, check_timing
from libra_jax.types import Block, Collective, StepNode

ROOT = pathlib.Path(__file__).resolve().parents[1]
RING, FC, SW = int(Block.RING), int(Block.FULLYCONNECTED), int(Block.SWITCH)
MIB = 1048576


def _node(code, size, group, deps=()):
    return StepNode(name="c", kind="comm", deps=deps, collective=int(code), size_bytes=float(size),
                    involved=tuple(g > 1 for g in group), group=tuple(group))


def test_themis_orders_by_hand():
    """OfflineGreedy on FC(4) 100 GB/s x Switch(8) 50 GB/s, an all-reduce of 8 chunks of
    1 MiB. Loads (MiB over the bandwidth relative to dim 0): chunk 0 ascending (all loads
    0): dim 0 += 0.75, dim 1 += 0.25 x 7/8 / 0.5 = 0.4375; chunk 1: dim 1 is less loaded,
    the difference 0.3125 is 187,245 B >= 65,536 (1/16 chunk) so dim 1 goes first: dim 1 +=
    1.75, dim 0 += 0.09375; chunks 2-6 dim 0 first (dim 0 0.84 .. 3.84 below dim 1), chunk
    7 dim 1 first (4.375 < 4.59375)."""
    tm = TimingModel(model="pipelined", chunks=8, inter_dim_scheduling="themis")
    st = runtime.RuntimeState()
    streams = runtime.collective_streams(Collective.ALLREDUCE, 8 * MIB, (4, 8), [FC, SW], tm,
                                         [100.0, 50.0], st)
    assert [s[0].dim for s in streams] == [0, 1, 0, 0, 0, 0, 0, 1]
    assert sorted(st.loads) == [[0, 4.6875], [1, 6.125]]
    # Themis's all-reduce: reduce-scatter up every dimension, all-gather back down
    assert [(s.dim, s.com, s.kind) for s in streams[1]] == [
        (1, Collective.REDUCESCATTER, "first"), (0, Collective.REDUCESCATTER, "first"),
        (0, Collective.ALLGATHER, "last"), (1, Collective.ALLGATHER, "last")]
    # a new collective at a later tick starts from zero loads: ascending first
    again = runtime.collective_streams(Collective.ALLREDUCE, 8 * MIB, (4, 8), [FC, SW], tm,
                                       [100.0, 50.0], st, now=5.0)
    assert again[0][0].dim == 0 and [s[0].dim for s in again] == [0, 1, 0, 0, 0, 0, 0, 1]


def test_themis_first_issuer_by_hand():
    """``npu0_first``: NPU 0 issuing first at a new tick restarts the loads before it
    schedules; another NPU first schedules with the loads as they are (dim 1 at 6.125 > dim 0
    at 4.6875, so dim 0 goes first until it has caught up), and NPU 0's own call later in
    that tick (`runtime.npu0_issues`) restarts them for the next collective."""
    tm = TimingModel(model="pipelined", chunks=8, inter_dim_scheduling="themis")
    args = (Collective.ALLREDUCE, 8 * MIB, (4, 8), [FC, SW], tm, [100.0, 50.0])
    st = runtime.RuntimeState()
    first = [s[0].dim for s in runtime.collective_streams(*args, st, now=1.0, npu0_first=True)]
    runtime.npu0_issues(st, 1.0)  # (NPU 0 was first: its call changes nothing more)
    carried = [s[0].dim for s in runtime.collective_streams(*args, st, now=5.0,
                                                            npu0_first=False)]
    assert carried != first and carried[:2] == [0, 0]
    runtime.npu0_issues(st, 5.0)  # NPU 0 calls later in that tick: the loads restart
    assert all(load == 0.0 for _, load in st.loads) and st.tick == 5.0
    again = [s[0].dim for s in runtime.collective_streams(*args, st, now=9.0,
                                                          npu0_first=False)]
    assert again == first
    # NPU 0 first at the same tick as its last call: no restart (the loads carry on)
    st2 = runtime.RuntimeState()
    runtime.collective_streams(*args, st2, now=1.0, npu0_first=True)
    same = [s[0].dim for s in runtime.collective_streams(*args, st2, now=1.0,
                                                         npu0_first=True)]
    assert same == carried


def test_round_robin_counter_runs_across_collectives():
    tm = TimingModel(model="pipelined", chunks=3, inter_dim_scheduling="round_robin")
    st = runtime.RuntimeState()
    first = runtime.collective_streams(Collective.REDUCESCATTER, 3 * MIB, (2, 4), [RING, SW],
                                       tm, [1.0, 1.0], st)
    second = runtime.collective_streams(Collective.REDUCESCATTER, 3 * MIB, (2, 4), [RING, SW],
                                        tm, [1.0, 1.0], st)
    assert [[s.dim for s in x] for x in first] == [[0, 1], [1, 0], [0, 1]]
    assert [[s.dim for s in x] for x in second] == [[1, 0], [0, 1], [1, 0]]
    # an all-gather's base order is descending, then rotated
    st = runtime.RuntimeState()
    ag = runtime.collective_streams(Collective.ALLGATHER, 3 * MIB, (2, 4), [RING, SW], tm,
                                    [1.0, 1.0], st)
    assert [[s.dim for s in x] for x in ag] == [[1, 0], [0, 1], [1, 0]]


def test_baseline_all_reduce_by_hand():
    """``baseline``: a full all-reduce of the chunk on every dimension: Ring(4) then FC(8),
    1 chunk of 8 MiB, 100 / 50 GB/s, latency 200 ns, endpoint 10 ns: 2(n-1) steps of c/n per
    dimension: 6 x (2 MiB / 100 + 210) + 14 x (1 MiB / 50 + 210) ns, and one endpoint delay
    more per phase (steps + 1, Ring.cc)."""
    c = 8 * MIB
    tm = TimingModel(model="pipelined", chunks=1, collective_optimization="baseline",
                     latency_ns=[200.0, 200.0], endpoint_delay_ns=10.0)
    t = step.simulate_step([_node(Collective.ALLREDUCE, c, (4, 8))], [RING, FC], [4, 8],
                           [100.0, 50.0], tm).time_ns
    want = 6 * (c / 4 / 100 + 210) + 14 * (c / 8 / 50 + 210) + 2 * 10.0
    assert t == pytest.approx(want, rel=1e-12)


def test_active_chunks_run_side_by_side_unaware():
    """Two active chunks on one queue: the congestion-unaware backend gives each the whole
    bandwidth, so 2 chunks take one chunk's time; with 1 they take two."""
    c = 4 * MIB
    node = [_node(Collective.REDUCESCATTER, c, (8,))]
    one = dataclasses.replace(TimingModel(model="pipelined", chunks=2), active_chunks_per_dim=1)
    two = dataclasses.replace(one, active_chunks_per_dim=2)
    chunk = 7 * (c / 2 / 8) / 100.0
    assert step.simulate_step(node, [RING], [8], [100.0], one).time_ns == pytest.approx(
        2 * chunk, rel=1e-12)
    assert step.simulate_step(node, [RING], [8], [100.0], two).time_ns == pytest.approx(
        chunk, rel=1e-12)


def _random_steps(seed, count):
    rng = random.Random(seed)
    for _ in range(count):
        d = rng.randint(1, 3)
        npd = [rng.choice([2, 4, 8]) for _ in range(d)]
        blocks = [rng.choice([RING, FC, SW]) for _ in range(d)]
        bw = [rng.uniform(25, 400) for _ in range(d)]
        tm = TimingModel(model="pipelined", chunks=rng.choice([1, 2, 4, 7]),
                         latency_ns=[rng.choice([0.0, 500.0])] * d,
                         endpoint_delay_ns=rng.choice([1.0, 10.0]),
                         local_mem_bw_gbps=rng.choice([None, 1600.0]), gb_is_gib=True,
                         network_backend=rng.choice(["unaware", "aware"]),
                         queues_per_dim=rng.choice([1, 2]),
                         queue_policy=rng.choice(["lifo", "fifo"]))
        nodes = []
        for j in range(rng.randint(1, 3)):
            inv = [rng.random() < 0.7 for _ in range(d)]
            inv[rng.randrange(d)] = True
            nodes.append(_node(rng.choice([1, 2, 3, 4]), rng.choice([1 << 16, 3 * MIB + 4096]),
                               tuple(n if i else 1 for n, i in zip(npd, inv)),
                               deps=() if j == 0 or rng.random() < 0.5 else (j - 1,)))
        yield nodes, blocks, npd, bw, tm, rng


def test_runtime_path_reproduces_the_default(monkeypatch):
    """The runtime replay with the default keys gives the default path's step to rounding
    (every stream a whole chunk, the same queues and order)."""
    cases = list(_random_steps(0, 60))
    base = [step.simulate_step(n, b, p, w, tm).time_ns for n, b, p, w, tm, _ in cases]
    monkeypatch.setattr(TimingModel, "is_default_runtime", property(lambda self: False))
    for (n, b, p, w, tm, _), want in zip(cases, base):
        assert step.simulate_step(n, b, p, w, tm).time_ns == pytest.approx(want, rel=1e-12)


def test_bound_below_simulation_on_random_runtimes():
    """`timing_rows`' convex pieces bound every collective's simulated time from below,
    whatever the order, the optimisation, the queues and the active chunks."""
    from libra_jax.model.timing_rows import collective_pieces
    from libra_jax.inputs.topology import network_from_lists
    names = {RING: "Ring", FC: "FullyConnected", SW: "Switch"}
    checked = 0
    for nodes, blocks, npd, bw, tm, rng in _random_steps(1, 80):
        tm = dataclasses.replace(
            tm, inter_dim_scheduling=rng.choice(["ascending", "themis", "themis_flex",
                                                 "round_robin"]),
            intra_dim_scheduling=rng.choice(["fifo", "smallest_first"]),
            collective_optimization=rng.choice(["local_bw_aware", "baseline"]),
            active_chunks_per_dim=rng.choice([1, 2, 4]))
        if tm.is_default_runtime:
            continue
        net = network_from_lists([names[b] for b in blocks], npd, source="t")
        for nd in nodes:
            sim = step.simulate_step([dataclasses.replace(nd, deps=())], blocks, npd, bw,
                                     tm).time_ns
            (c0, w, c, a, on), = collective_pieces(
                [(nd.collective, nd.size_bytes, tuple(g if g > 1 else -1 for g in nd.group))],
                net, tm)
            rows = c + (a / np.asarray(bw)[None, None, :]).sum(-1)
            bound = 1e9 * (c0 + float((w * np.where(on, rows, 0).max(-1)).sum()))
            assert bound <= sim * (1 + 1e-9)
            checked += 1
    assert checked > 60


def test_model_libra_and_traces_refuse_runtime_keys():
    with pytest.raises(LibraInputError, match="system.inter_dim_scheduling"):
        check_timing(TimingModel(inter_dim_scheduling="themis"), 2)
    with pytest.raises(LibraInputError, match=r"system.algorithm\[1\]"):
        check_timing(TimingModel(model="pipelined", algorithm=["ring", "tree"]), 2)
    with pytest.raises(LibraInputError, match="system.active_chunks_per_dim"):
        check_timing(TimingModel(model="pipelined", active_chunks_per_dim=0), 2)


# ------------------------------------------------------------ the simulator's own numbers
sys.path.insert(0, str(ROOT / "experiments"))


def _sample(kind: str, every: int):
    import astrasim_workload as aw
    rows = aw.load(ROOT / "experiments/results/astrasim_runtime" / kind)
    return [(c, r) for i, (c, r) in enumerate(rows) if i % every == 0]


#: Tuning runs outside 2% (docs/runtime.md, "Where it departs"): an aware Switch's ties,
#: double binary trees under Themis-flex unaware (rs11_0290, rs11_0029 and rs11_0270,
#: halving-doubling on a Ring, are within 0.03% since a copy takes a message once its
#: receive is posted; rt13_0054 aware is exact since trees and rings share a dimension's
#: links).
DEPARTS = {"rs11_0142_aware", "rs11_0178_aware", "rs11_0258_aware", "rs11_0143_unaware",
           "rt13_0054_unaware"}


@pytest.mark.parametrize("kind,every", [("single", 5), ("step", 3)])
def test_pinned_astrasim_runtime_sample(kind, every):
    """A sample of the tuning runs, every policy and algorithm libra_jax models (trees over
    several chunks and dimensions included): within 2% of ASTRA-sim, the listed departures
    within 12% (the full sets' statistics are in docs/runtime.md)."""
    import astrasim_workload as aw
    checked = 0
    for case, res in _sample(kind, every):
        if not res.get("astra_max_ns") or not aw.modelled(case):
            continue
        pred = aw.predict_ns(case)
        ref = float(res["astra_max_ns"])
        bar = 0.12 if case["case_id"] in DEPARTS else 0.02
        assert abs(pred - ref) <= bar * ref, (case["case_id"], pred, ref)
        checked += 1
    assert checked >= 20


@pytest.mark.parametrize("case_id,ref_ns", [
    ("rs11_0111_aware", 355249), ("rs11_0172_aware", 8395855), ("rs11_0073_unaware", 45652),
    ("rs11_0114_aware", 61134)])
def test_trees_over_several_dimensions_match_astrasim(case_id, ref_ns):
    """Double binary trees over several dimensions and chunks: every tree position its own
    copy (`step.copy_dims`), each NPU leaving a tree at its own time (these were 5.9-13.7%
    off with one NPU standing for all)."""
    import astrasim_workload as aw
    case = next(c for c, _ in aw.load(ROOT / "experiments/results/astrasim_runtime/single")
                if c["case_id"] == case_id)
    assert aw.predict_ns(case) == pytest.approx(ref_ns, rel=2e-3)


def test_ring_copies_take_a_message_only_once_its_receive_is_posted():
    """ASTRA-sim's halving-doubling posts the receive from a partner when it sends to that
    partner and matches messages by source: a message that arrives earlier waits, and is
    taken 0 ns after that send. All-gather on a Ring of 4 (offsets 2 then 1): NPU 0 sends to
    NPU 2, then to NPU 1."""
    ring = algorithms.RingCopies(0, 4, lambda a: a)
    streams = [type("S", (), {})() for _ in range(4)]

    def group():
        return algorithms.PhaseDriver.group("halving_doubling", Collective.ALLGATHER, 4,
                                            100.0, 7.0, None)

    assert ring.start("x", 0, streams[0], 0.0, group) == [(7.0, streams[0], 0)]
    # NPU 1's message (its step 2) reaches NPU 0 before NPU 0 sent anything: it waits
    assert ring.deliver("x", 1, 0, 3.0) == []
    sends = streams[0].driver.general(7.0, 0)
    assert [d for d, *_ in sends] == [2] and streams[0].driver.taken == []
    # NPU 2's message (step 1) comes after NPU 0 posted the receive from 2: taken at once
    assert ring.deliver("x", 2, 0, 20.0) == [(27.0, streams[0], 0)]
    # NPU 0's second send goes to NPU 1 and finds NPU 1's message waiting: taken then
    sends = streams[0].driver.general(27.0, 0)
    assert [d for d, *_ in sends] == [1] and streams[0].driver.taken == [(ring, "x", 0)]
    assert ring.receive("x", 0, 27.0) == [(34.0, streams[0], 0)]


@pytest.mark.parametrize("case_id,ref_ns,rel", [("rs15_0008_aware", 87931, 2e-3),
                                                ("rs11_0290_aware", 121246, 1e-3),
                                                ("rs19_0107_aware", 212274, 0.0)])
def test_halving_doubling_on_rings_every_npu_a_copy(case_id, ref_ns, rel):
    """Aware halving-doubling on Rings of more than 2: each NPU its own copy, starting the
    stage from its own queue, messages hop by hop over the links of the NPUs they leave
    (`algorithms.RingCopies`; +6.9% and -5.2% with every NPU starting together), each
    taking a partner's message once it has posted its receive (rs19_0107, two streams on a
    Ring of 16: -12.3% when a later step's message that overtook an earlier one was taken
    first)."""
    import astrasim_workload as aw
    folder = {"rs15": "single_s15", "rs19": "single_s19"}.get(case_id[:4], "single")
    case = next(c for c, _ in aw.load(ROOT / "experiments/results/astrasim_runtime" / folder)
                if c["case_id"] == case_id)
    assert aw.predict_ns(case) == pytest.approx(ref_ns, rel=rel)


def test_whole_ns_times_aware_links_as_astrasim():
    """rs19_0107 (two streams of halving-doubling on a Ring of 16, 15 chunks): in whole ns,
    as ASTRA-sim's links count (the harness's setting for the aware backend), the step is
    ASTRA-sim's to the ns; in real-valued time its ties fall otherwise (-4.3%). The key
    needs the aware link model."""
    import astrasim_workload as aw
    case = next(c for c, _ in aw.load(ROOT / "experiments/results/astrasim_runtime/single_s19")
                if c["case_id"] == "rs19_0107_aware")
    network, workload, tm, bw = aw.case_inputs(case)
    assert tm.whole_ns
    assert timing.step_time_ns(workload, network, tm, bw) == 212274
    real = timing.step_time_ns(workload, network, dataclasses.replace(tm, whole_ns=False), bw)
    assert real == pytest.approx(212274 * (1 - 0.0432), rel=1e-3)
    with pytest.raises(LibraInputError, match="system.whole_ns"):
        check_timing(dataclasses.replace(tm, network_backend="unaware"), 1)
    with pytest.raises(LibraInputError, match="system.whole_ns"):
        check_timing(TimingModel(whole_ns=True), 1)


@pytest.mark.parametrize("case_id,ref_ns", [("rt13_0074_unaware", 8402194),
                                            ("rt13_0074_aware", 12692857),
                                            ("rt13_0009_aware", None)])
def test_themis_first_issuer_keeps_the_loads(case_id, ref_ns):
    """Themis where another NPU than 0 schedules a collective first (here: a tree's NPUs
    leave it at their own times, NPU 8 first), with the loads as they are (NPU 0 restarts
    them when it issues): a Themis-flex step whose second all-reduce runs as one chunk (-25%
    when the loads were restarted)."""
    import astrasim_workload as aw
    case, res = next((c, r) for c, r in aw.load(
        ROOT / "experiments/results/astrasim_runtime/step") if c["case_id"] == case_id)
    ref = float(res["astra_max_ns"])
    assert ref_ns is None or ref == ref_ns
    assert aw.predict_ns(case) == pytest.approx(ref, rel=0.01)


def test_evaluate_reports_the_runtime(tmp_path):
    """``libra-evaluate`` with runtime keys: the step is the simulated one under that runtime,
    the printed summary and result.json name the runtime."""
    import json

    from hydra import compose, initialize_config_dir

    from libra_jax.cli import config
    from libra_jax.cli import evaluate as cli_evaluate
    over = ["conf=turing_nlg", "model=pipelined", "system.chunks=4",
            "bandwidth_gbps=[100,200,50]", "system.inter_dim_scheduling=themis"]
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=over)
    c = config._as_config(cfg)
    cli_evaluate.run(c, tmp_path)
    out = json.loads((tmp_path / "result.json").read_text())
    assert out["timing_model"]["runtime"]["inter_dim_scheduling"] == "themis"
    network, workload, _, _ = config.to_inputs(cfg)
    tm, _ = config.to_timing(c, network.num_dims, network)
    want = timing.step_time_ns(workload, network, tm, np.array([100.0, 200.0, 50.0]))
    default = timing.step_time_ns(workload, network,
                                  dataclasses.replace(tm, inter_dim_scheduling="ascending"),
                                  np.array([100.0, 200.0, 50.0]))
    assert out["step_time_ns"] == pytest.approx(want, rel=1e-12)
    assert want != pytest.approx(default, rel=1e-6)  # Themis moves this step


@pytest.mark.parametrize("inter", ["themis", "round_robin"])
def test_partial_group_bound_below_simulation(inter):
    """h100_dgx (groups over part of a dimension: pg_name rings): under Themis a ring's
    chunks may go on any dimension's queues and its last chunk carries only the rest, and
    the convex bound stays below the simulated step (it was 0.3% above on tpu_v4 before
    `pg_ring_piece` knew it)."""
    from hydra import compose, initialize_config_dir

    from libra_jax.cli import config
    from libra_jax.model import objective
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "conf=h100_dgx", "model=pipelined", "system.chunks=8",
            f"system.inter_dim_scheduling={inter}"])
    c = config._as_config(cfg)
    network, workload, cost, spec = config.to_inputs(cfg)
    tm, _ = config.to_timing(c, network.num_dims, network)
    bw = np.asarray(c.reference_bw_gbps, np.float64)
    sim = timing.step_time_ns(workload, network, tm, bw)
    problem = timing.build_timed_problem(network, workload, cost, spec, tm)
    assert float(objective.step_time_s(bw, problem)) * 1e9 <= sim * (1 + 1e-6)


@pytest.mark.parametrize("backend", ["unaware", "aware"])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_tree_copies_lone_all_reduce_is_the_every_npu_replay(backend, k):
    """A lone all-reduce of k chunks on a tree dimension of 4 with one queue: every NPU a
    copy (`step.copy_dims`), each taking the next chunk when it leaves the last one, ends as
    `algorithms.tree_chunks_time_ns` (every NPU of both trees replayed in one event loop)."""
    npd, blocks, bw = [4, 2], [FC, SW], [100.0, 40.0]
    tm = TimingModel(model="pipelined", chunks=k, network_backend=backend,
                     algorithm=("double_binary_tree", "ring"), latency_ns=[50.0, 20.0],
                     endpoint_delay_ns=10.0, queues_per_dim=1)
    node = _node(Collective.ALLREDUCE, k * MIB, (4, 1))
    assert step.copy_dims([node], npd, tm.algorithm, blocks, backend == "aware") == [0]
    got = step.simulate_step([node], blocks, npd, bw, tm).time_ns
    link = bw[0] / runtime.link_share("double_binary_tree", 4)
    ref = algorithms.tree_chunks_time_ns(4, FC, float(MIB), k, link, 50.0, 10.0,
                                         tm.local_mem_bw_gbps, tm.gb_is_gib, backend)
    assert got == pytest.approx(ref, rel=1e-12)


def _issuers():
    import json
    return json.loads((ROOT / "experiments/results/astrasim_runtime/themis_issuers.json")
                      .read_text())


def test_themis_first_issuer_follows_the_event_queue_on_probes():
    """1-D probes (three collectives in a row, one chunk) traced in ASTRA-sim: a ring phase
    moves the first NPU of a tick one NPU per message step in its queue's direction (an
    all-gather on the anticlockwise half), a direct phase one NPU, a halving-doubling
    reduce-scatter / all-gather to its partner of every round (XOR n-1); `simulate_step`'s
    first issuers equal the traced ones on every congestion-unaware probe."""
    import themis_issuers as ti
    data = _issuers()
    probes = [c for cid, c in data["cases"].items() if c["backend"] == "unaware"]
    assert len(probes) == 24
    for case in probes:
        traced = [n for _, n, _, _ in data["issuers"][case["case_id"]]]
        assert [n for _, n in ti.model_issuers(case)] == traced, case["case_id"]
    # congestion-aware: messages carry it, a bundle where the NPU's first one of the tick
    # put it; 20 of 24 (not: direct all-reduces, all-to-all rings through a Switch)
    aware = [c for cid, c in data["cases"].items() if c["backend"] == "aware"]
    same = [[n for _, n in ti.model_issuers(c)] == [n for _, n, _, _ in
                                                   data["issuers"][c["case_id"]]] for c in aware]
    assert len(aware) == 24 and sum(same) >= 20


@pytest.mark.parametrize("case_id", ["rt13_0069_unaware", "rt13_0021_unaware",
                                     "rt13_0041_unaware", "rt13_0050_aware"])
def test_themis_first_issuers_of_whole_steps(case_id):
    """Whole steps traced in ASTRA-sim (Themis over two or three dimensions, ring, direct
    and halving-doubling, both backends): every collective's first issuer is the traced one,
    and the step is within 0.1% (rt13_0069 aware was -10.3% when NPU 0 was taken never to
    be first once a collective had ended)."""
    import astrasim_workload as aw
    import themis_issuers as ti
    traced = [n for _, n, _, _ in _issuers()["issuers"][case_id]]
    kind = "step" if case_id.startswith("rt13") else "step_s17"
    case, res = next((c, r) for c, r in aw.load(ROOT / "experiments/results/astrasim_runtime"
                                                 / kind) if c["case_id"] == case_id)
    assert [n for _, n in ti.model_issuers(case)] == traced
    assert aw.predict_ns(case) == pytest.approx(float(res["astra_max_ns"]), rel=1e-3)


@pytest.mark.parametrize("inter", ["themis", "themis_flex"])
def test_themis_with_a_dimension_given_no_bandwidth(inter):
    """A design with 0 GB/s on a dimension (a search may try one): ASTRA-sim's doubles make
    that dimension's load infinite, so Themis puts it last for every chunk; no error."""
    tm = TimingModel(model="pipelined", chunks=4, inter_dim_scheduling=inter)
    for bw in ([100.0, 0.0], [0.0, 100.0]):
        st = runtime.RuntimeState()
        for now in (1.0, 2.0):  # (the second collective: the loads carried, infinite)
            streams = runtime.collective_streams(Collective.REDUCESCATTER, 8 * MIB, (4, 8),
                                                 [FC, SW], tm, bw, st, now=now,
                                                 npu0_first=False)
            assert streams and all(len(s) == 2 for s in streams)
        # the second collective starts from the first's loads: the dimension with no
        # bandwidth (infinite load) goes last in every chunk
        assert all(s[0].dim == bw.index(100.0) for s in streams)


def test_tree_links_run_each_npu_of_a_tree_on_the_step_links():
    """`algorithms.TreeLinks` by hand: ASTRA-sim's first tree of 4 (root 3 -> 1 -> 0, 2)
    through a Switch, endpoint delay 5 ns, no reductions. A leaf sends up after its
    endpoint delay; a node waits for every child's data and for its own start; the root
    sends down and leaves; a leaf leaves when its parent's data is through its memory bus.
    Messages go on the sender's up and the receiver's down link of their copies."""
    g = algorithms.TreeLinks(2, 4, Block.SWITCH, lambda a: 10 + a, 5.0, None)
    s = [type("S", (), {})() for _ in range(4)]
    assert g.start("x", 0, s[0], 0.0, 0, 100) == [(5.0, s[0], "up")]
    assert g.start("x", 1, s[1], 0.0, 0, 100) == []
    assert s[0].driver.general(5.0, "up") == [
        (1, (("abs", 10, (2, "up")), ("abs", 11, (2, "down"))), 100.0, 1)]
    assert g.deliver("x", 0, 1, 20.0) == []  # one child of two
    assert g.deliver("x", 2, 1, 30.0) == [(35.0, s[1], "up")]
    assert [m[0] for m in s[1].driver.general(35.0, "up")] == [3]
    assert g.deliver("x", 1, 3, 50.0) == []  # the root has not taken the chunk yet
    assert g.start("x", 3, s[3], 60.0, 0, 100) == [(65.0, s[3], "down")]
    assert [m[0] for m in s[3].driver.general(65.0, "down")] == [1]
    assert s[3].driver.done == 65.0
    assert g.deliver("x", 3, 1, 80.0) == [(85.0, s[1], "down")]
    assert [m[0] for m in s[1].driver.general(85.0, "down")] == [0, 2]
    assert g.deliver("x", 1, 0, 90.0) == [(95.0, s[0], "end")]
    assert s[0].driver.general(95.0, "end") == [] and s[0].driver.done == 95.0
    assert g.start("x", 2, s[2], 0.0, 0, 100) == [(5.0, s[2], "up")]
    s[2].driver.general(5.0, "up")
    g.deliver("x", 1, 2, 90.0)
    s[2].driver.general(95.0, "end")
    assert g.ch == {}  # every NPU left: the chunk is forgotten


def test_ring_copies_of_a_ring_receive_from_the_npu_before():
    """A ring on a copied dimension (`algorithms.RingCopies` with ``ring=True``): NPU 0
    sends to NPU 1 (anticlockwise: NPU 3) over its copy's up and the receiver's down link,
    and takes the message of the NPU before it (3; anticlockwise 1), not its receiver's."""
    for sign, to, frm in ((1, 1, 3), (-1, 3, 1)):
        ring = algorithms.RingCopies(0, 4, lambda a: 20 + a, Block.SWITCH, ring=True)
        st = type("S", (), {})()

        def group():
            return algorithms.PhaseDriver.group("ring", Collective.REDUCESCATTER, 4, 400.0,
                                                7.0, None)

        assert ring.start("r", 0, st, 0.0, group, sign=sign) == [(7.0, st, 0)]
        sends = st.driver.general(7.0, 0)
        assert sends == [(to, (("abs", 20, (0, "up")), ("abs", 20 + to, (0, "down"))),
                          100.0, sign)]
        assert ring.deliver("r", to, 0, 9.0) == []  # not the NPU it receives from
        assert ring.deliver("r", frm, 0, 10.0) == [(17.0, st, 0)]


def test_trees_and_rings_share_a_dimensions_links():
    """rt13_0054 (double binary trees on S2xS2xS8 under Themis-flex, the tensor-parallel
    rings on the same dimensions): every NPU of a tree its own copy on the step's links
    (`algorithms.TreeLinks`) and the rings on a copied dimension each NPU its own
    (`algorithms.RingCopies`), so a ring's message waits behind a tree's on a shared link:
    ASTRA-sim's step to the ns (-11.5% with the tree's links replayed apart)."""
    import astrasim_workload as aw
    case = next(c for c, _ in aw.load(ROOT / "experiments/results/astrasim_runtime/step")
                if c["case_id"] == "rt13_0054_aware")
    assert aw.predict_ns(case) == pytest.approx(7252338, abs=1.0)
