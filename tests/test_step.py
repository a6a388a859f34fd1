"""Whole training steps as ASTRA-sim runs them (`model/step.py`): the step graph, the stream
split, the event replay against the 78 shared ASTRA-sim runs and the held-out runs, the
convex lower bound of `train`, and the Chakra export of the step."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import pathlib

import numpy as np
import pytest

from libra_jax.inputs import chakra
from libra_jax.inputs.topology import network_from_lists
from libra_jax.inputs.workload import Workload
from libra_jax.model import step, timing
from libra_jax.model.problem import ConstraintSpec
from libra_jax.solvers.solve import solve
from libra_jax.types import Collective, LibraInputError

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT / "tests" / "fixtures" / "astrasim_workload"
HELDOUT = ROOT / "experiments" / "results" / "astrasim_heldout"
# a second draw (seed 2), made after the message-level link model was written: never tuned on
HELDOUT2 = ROOT / "experiments" / "results" / "astrasim_heldout2"
# issue 30 point 4: communication-bound dp_overlap steps (experiments/astrasim_heldout.py
# --kind overlap_comm). The model was fixed on the seed-102 draws (_tuning); seed 3 was drawn
# after the fix and never tuned on.
HELDOUT3 = ROOT / "experiments" / "results" / "astrasim_heldout3"
HELDOUT3_TUNING = ROOT / "experiments" / "results" / "astrasim_heldout3_tuning"
AR, RS, AG, NONE = (Collective.ALLREDUCE, Collective.REDUCESCATTER, Collective.ALLGATHER,
                    Collective.NONE)


def _experiment(name: str = "astrasim_workload"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _errors(data, ids=None):
    exp = _experiment()
    out = {}
    for case, res in exp.load(data):
        key = (case["case_id"], case["backend"])
        if ids is not None and case["case_id"] not in ids:
            continue
        if not res["astra_max_ns"]:  # the simulator failed on this case: no reference
            out[key] = "ASTRA-sim: " + res.get("error", "")
            continue
        try:
            ours = exp.predict_ns(case)
        except LibraInputError as e:
            out[key] = str(e)
            continue
        out[key] = ours / float(res["astra_max_ns"]) - 1.0
    return out


def test_the_78_shared_runs():
    """Issue 18's bar: every congestion-unaware case within 2%, every congestion-aware one
    within 5%; the 8 pg_name cases are refused with the reason. Measured: 0.07% / 0.07%
    (0.81% / 0.79% before issue 30's issue order, both g3_Dov_dp_overlap: a collective held
    back by the in-flight limit goes ahead of the waiting DP streams), pinned at 0.1%."""
    errs = _errors(SHARED)
    assert len(errs) == 78
    refused = {k: v for k, v in errs.items() if isinstance(v, str)}
    assert len(refused) == 8 and all(k[0].startswith("g5_E_pg") for k in refused)
    assert all("flat ring" in v and "pg_name" in v for v in refused.values())
    for (cid, backend), e in errs.items():
        if isinstance(e, str):
            continue
        assert abs(e) <= (0.02 if backend == "unaware" else 0.05), (cid, backend, e)
        assert abs(e) <= 1e-3, (cid, backend, e)
    # the contention cases are exact to a few 1e-4 (ticks, ASTRA-sim's integer message sizes)
    for cid in ("g8_Bov_pair_dp_overlap_unaware_k4_L0_q1", "g8_Bov_pair_dp_overlap_aware_k4_L0_q2",
                "g8_Bov_pair_dp_overlap_unaware_k4_L0_q1_FIFO", "g2_C_dp_overlap_aware_k4_L0_stock"):
        backend = "aware" if "_aware_" in cid else "unaware"
        assert abs(errs[(cid, backend)]) < 2e-4


def _heldout_check(errs, pin=None):
    """Issue 18's bar (each backend: >= 95% within 5%, none beyond 10%) and the measured
    maxima as a regression pin (default: unaware 0.10%, aware 1.40% over the first two draws;
    unaware 2.21% before issue 30's issue order)."""
    pin = pin or {"unaware": 0.002, "aware": 0.015}
    for backend in ("unaware", "aware"):
        e = np.asarray([abs(v) for (c, b), v in errs.items() if b == backend
                        and not isinstance(v, str)])
        assert e.size and np.mean(e <= 0.05) >= 0.95, (backend, np.sort(e)[-5:])
        assert e.max() <= 0.10, (backend, np.sort(e)[-5:])
        assert e.max() <= pin[backend], (backend, np.sort(e)[-5:])


def test_heldout_runs_first_draws():
    """Randomised whole steps (experiments/astrasim_heldout.py; all collectives, ZeRO, EP
    all-to-all pairs, 1-8 chunks, latencies, overlapping groups, FIFO/LIFO, 1-2 queues,
    stock in-flight limit), kept apart from the model's development: the first 20 draws of
    each set, and the three aware draws the earlier fluid link rule had 4-24% off."""
    ids = {f"h{k}_{i:04d}_{b}" for k in (1, 2) for i in range(20)
           for b in ("unaware", "aware")}
    ids |= {f"h1_{i:04d}_aware" for i in (39, 63, 99)}
    errs = _errors(HELDOUT, ids)
    errs.update(_errors(HELDOUT2, ids))
    _heldout_check(errs)


@pytest.mark.slow
def test_heldout_runs_all():
    errs = _errors(HELDOUT)
    errs.update(_errors(HELDOUT2))
    # the one draw ASTRA-sim itself could not finish (a deadlock, both backends) has no time
    assert sum(1 for (c, b) in errs if c.startswith("h2_0080")) == 2
    _heldout_check({k: v for k, v in errs.items() if not k[0].startswith("h2_0080")})


# ASTRA-sim's own deadlocks in the overlap_comm sets (event queue drained, no NPU finished;
# all ZeRO beside TP all-reduces on every dimension, 2 queues, 8 chunks): no reference time
_DEADLOCKED3 = {("c3_0005", "aware"), ("c3_0051", "aware"), ("c3_0082", "unaware"),
                ("c3_0096", "aware"), ("c3_0133", "unaware"), ("c3_0133", "aware")}
# draws beyond 5% before issue 30's issue order: seed 3 (held out) -7.56%, -6.82%, -5.67%;
# seed 102 (tuned on) -5.12%, -7.06%, -8.43%, -10.34% (both backends alike, no Switch)
_LOW_BEFORE3 = ("c3_0050", "c3_0149", "c3_0135", "c102_0001", "c102_0002", "c102_0033",
                "c102_0063")
_PIN3 = {"unaware": 0.001, "aware": 0.001}  # measured 0.05% / 0.06% (held out), 0.04% (tuned)


def _check_overlap_comm(errs):
    failed = {(c.rsplit("_", 1)[0], b) for (c, b), v in errs.items()
              if isinstance(v, str) and v.startswith("ASTRA-sim")}
    assert failed <= _DEADLOCKED3, failed - _DEADLOCKED3
    assert not any(isinstance(v, str) for (c, b), v in errs.items()
                   if (c.rsplit("_", 1)[0], b) not in failed), errs  # nothing refused
    _heldout_check({k: v for k, v in errs.items() if not isinstance(v, str)}, _PIN3)


def test_heldout_overlap_comm_first_draws():
    """Issue 30 point 4: dp_overlap steps bound by their collectives (large TP all-reduces,
    short backward computes): TP on dims {0, 1} and DP on {2, 3} of a Switch / Ring mix, or
    TP over all four dims beside ZeRO on {1, 2, 3} of a FullyConnected / Ring mix; 1 or 8
    chunks, 200-1000 ns per hop, local memory 1600 GB/s in 3 of 4. The first 25 draws of the
    held-out set and the seven draws the model had 5-10% low (each backend)."""
    ids = {f"c3_{i:04d}_{b}" for i in range(25) for b in ("unaware", "aware")}
    ids |= {f"{d}_{b}" for d in _LOW_BEFORE3 for b in ("unaware", "aware")}
    errs = _errors(HELDOUT3, ids)
    errs.update(_errors(HELDOUT3_TUNING, ids))
    assert len(errs) == 64
    _check_overlap_comm(errs)


@pytest.mark.slow
def test_heldout_overlap_comm_all():
    errs = _errors(HELDOUT3)
    assert len(errs) == 300
    _check_overlap_comm(errs)
    errs = _errors(HELDOUT3_TUNING)
    assert len(errs) == 300
    _check_overlap_comm(errs)


# issue 30 point 4's disjoint-dims words taken literally (experiments/astrasim_heldout.py
# --kind disjoint_comm, seed 4; drawn after issue 30's issue-order fix, never tuned on): 4-D
# Switch (4-8 NPUs) / Ring (2-4) mixes, TP all-reduces 16-64 MiB on dims {0, 1}, DP all-reduce
# or ZeRO on {2, 3}, computes 1-50 us, 3-8 layers, 1 or 8 chunks, 200-1000 ns, 1600 GB/s local
# memory, LIFO / FIFO, 1 or 2 queues, in-flight limit 4 or 1. ASTRA-sim deadlocked on two
# unaware runs (ZeRO, 2 queues, 8 chunks, LIFO: event queue drained, no NPU finished).
HELDOUT4 = ROOT / "experiments" / "results" / "astrasim_heldout4"
_DEADLOCKED4 = {("d4_0055", "unaware"), ("d4_0060", "unaware")}
_PIN4 = {"unaware": 0.001, "aware": 0.001}  # measured 0.03% / 0.03%


def _check_disjoint_comm(errs):
    failed = {(c.rsplit("_", 1)[0], b) for (c, b), v in errs.items()
              if isinstance(v, str) and v.startswith("ASTRA-sim")}
    assert failed <= _DEADLOCKED4, failed - _DEADLOCKED4
    assert not any(isinstance(v, str) for (c, b), v in errs.items()
                   if (c.rsplit("_", 1)[0], b) not in failed), errs  # nothing refused
    _heldout_check({k: v for k, v in errs.items() if not isinstance(v, str)}, _PIN4)


def test_heldout_disjoint_comm_first_draws():
    """The first 25 draws of the disjoint_comm held-out set (both backends) within 0.1%."""
    ids = {f"d4_{i:04d}_{b}" for i in range(25) for b in ("unaware", "aware")}
    errs = _errors(HELDOUT4, ids)
    assert len(errs) == 50
    _check_disjoint_comm(errs)


@pytest.mark.slow
def test_heldout_disjoint_comm_all():
    errs = _errors(HELDOUT4)
    assert len(errs) == 300
    assert {(c.rsplit("_", 1)[0], b) for (c, b), v in errs.items()
            if isinstance(v, str)} == _DEADLOCKED4
    _check_disjoint_comm(errs)


def _hand_case(kind: str, policy: str) -> dict:
    """One Ring(4) dimension at 100 GB/s (GiB in the YAML), 1 chunk, no latency, endpoint
    1 ns, local memory 1e6 GB/s, dp_overlap; written as an ASTRA-sim case (experiments/
    astrasim_workload.py reads it as the held-out runs)."""
    mib = 2**20
    case = {"case_id": f"hand_{kind}_{policy}", "topology": ["Ring"], "npus_per_dim": [4],
            "npus": 4, "bandwidth_GBps": [100], "latency_ns": [0], "endpoint_delay_ns": 1,
            "chunks": 1, "backend": "unaware", "scheduling_policy": policy,
            "queues_per_dim": 1, "local_mem_bw_GBps": 1e6, "max_inflight_comm": 4,
            "deps": "dp_overlap", "groups": {"tp": {"dims": [0]}, "dp": {"dims": [0]}}}

    def coll(kind, size, group):
        return {"coll": kind, "bytes": size, "group": group}

    tp_last = {"fwd_us": 1, "bwd_in_us": 1, "bwd_w_us": 10}  # layer 1: backward last
    if kind == "zero":
        case["layers"] = [
            dict(tp_last, tp_bwd=coll("all_reduce", 8 * mib, "tp")),
            {"fwd_us": 1, "bwd_in_us": 1, "bwd_w_us": 1,
             "dp": [coll("reduce_scatter", 8 * mib, "dp"), coll("all_gather", 2 * mib, "dp")]}]
    else:
        case["max_inflight_comm"] = 2
        case["layers"] = [dict(tp_last, tp_bwd=coll("all_reduce", 4 * mib, "tp"))] + [
            {"fwd_us": 1, "bwd_in_us": 1, "bwd_w_us": 1, "dp": coll("all_reduce", 8 * mib, "dp")}
            for _ in range(2)]
    return case


@pytest.mark.parametrize("kind", ["zero", "inflight"])
def test_collective_issued_at_a_collective_end_goes_first(kind):
    """Issue 30 point 4: when a collective ends, ASTRA-sim tells the workload before its last
    stream leaves its queue, so what that frees is issued first: a LIFO (newer, higher
    priority) collective issued then goes ahead of the streams already waiting there.

    ``zero``: the DP reduce-scatter (RS, issued at 4 us) runs; the TP all-reduce (AR, ready at
    5 us) waits on the same queue; the RS's end frees the ZeRO all-gather (AG), which goes
    first under LIFO; the step is 4 us + RS + AG + AR + W1 (10 us), where handing the queue
    to the AR first (FIFO) gives 4 us + RS + AR + max(W1, AG): 4% less.
    ``inflight``: two DP all-reduces (D, issued at 5 and 7 us, 2 in flight at most); the TP
    AR is ready at 8 us but held back by the limit until the first D ends, then goes ahead of
    the second one: 5 us + D + AR + max(W1, D) under LIFO, 5 us + 2 D + AR + W1 under FIFO.
    Times per stage: n-1 ring steps per pass of m = stage bytes / steps each, m / bw + 1 ns,
    one endpoint delay more per stage (steps + 1, Ring.cc), plus 3 m / 1e6 on the reducing
    steps. ASTRA-sim's ticks (c459ab6, both local patches; it
    truncates each reduction to whole ns): zero 248,423 / 238,423 ns, inflight 298,028 /
    308,028 ns (LIFO / FIFO)."""
    exp = _experiment()
    gib = 100 * 2**30 / 1e9  # bytes per ns
    mib = 2**20

    def stage(nbytes, steps, reducing):
        m = nbytes / steps
        return steps * (m / gib + 1.0) + 1.0 + reducing * 3 * m / 1e6

    rs, ag = stage(6 * mib, 3, 3), stage(6 * mib, 3, 0)  # 8 MiB RS / AG of a 2 MiB shard
    ar8, ar4 = stage(12 * mib, 6, 3), stage(6 * mib, 6, 3)
    want = {("zero", "LIFO"): 4e3 + rs + ag + ar8 + 1e4,
            ("zero", "FIFO"): 4e3 + rs + ar8 + max(1e4, ag),
            ("inflight", "LIFO"): 5e3 + ar8 + ar4 + max(1e4, ar8),
            ("inflight", "FIFO"): 5e3 + 2 * ar8 + ar4 + 1e4}
    astra = {("zero", "LIFO"): 248423, ("zero", "FIFO"): 238423,
             ("inflight", "LIFO"): 298028, ("inflight", "FIFO"): 308028}
    for policy in ("LIFO", "FIFO"):
        ours = exp.predict_ns(_hand_case(kind, policy))
        assert ours == pytest.approx(want[(kind, policy)], rel=1e-12)
        assert ours == pytest.approx(astra[(kind, policy)], rel=3e-5)


def test_chunk_split_as_astrasim():
    """floor(size / chunks)-byte streams until the size is used up; at least total_npus bytes
    each (all-gather excepted)."""
    assert step.chunk_split(AR, 12 * 2**20, 4, 64) == (4, 3 * 2**20)
    assert step.chunk_split(AR, 4096, 3, 8) == (4, 1365)  # 3 x 1365 = 4095: a 4th stream
    assert step.chunk_split(AR, 100, 4, 64) == (4, 64)  # too small: 4 streams of 64 B
    assert step.chunk_split(AG, 100, 4, 64) == (4, 25)


def _wl(compute, coll, size, comm):
    return Workload(name="t", layer_names=tuple(f"l{i}" for i in range(len(compute))),
                    compute_ns=np.asarray(compute, float), collective=np.asarray(coll, np.int32),
                    size_bytes=np.asarray(size, float), communicator=np.asarray(comm, np.int32),
                    source="test")


def test_step_graph_dependencies():
    """chain / dp_overlap / full_overlap, and a ZeRO all-gather waiting for its RS."""
    comm = [[[4, -1], [4, -1], [-1, 8]]] * 2
    wl = _wl([[1e3, 2e3, 3e3]] * 2, [[AR, AR, AR]] * 2, [[1e6] * 3] * 2, comm)
    chain = step.step_graph(wl, "no_overlap")
    assert [n.name[:3] for n in chain] == ["F0", "fwd", "F1", "fwd", "B1", "ig1", "W1", "wg1",
                                          "B0", "ig0", "W0", "wg0"]
    assert all(n.deps == ((i - 1,) if i else ()) for i, n in enumerate(chain))
    ov = step.step_graph(wl, "dp_overlap")
    assert ov[7].deps == (6,) and ov[8].deps == (6,)  # B0 waits for W1, not for its DP
    full = step.step_graph(wl, "full_overlap")
    assert full[1].deps == () and full[2].deps == (0, 1)  # fwd collective beside F0
    zero = _wl([[0.0] * 3, [1e3] * 3], [[NONE, NONE, AG], [NONE, NONE, RS]],
               [[0, 0, 1e6], [0, 0, 4e6]], [[[-1, -1]] * 2 + [[4, 8]]] * 2)
    g = step.step_graph(zero, "dp_overlap")
    rs = next(i for i, n in enumerate(g) if n.collective == RS)
    ag = next(i for i, n in enumerate(g) if n.collective == AG)
    assert ag > rs and rs in g[ag].deps


def test_hand_computed_contention():
    """Two all-reduces on one Ring(4) dimension, 8 MiB each, 100 GB/s, 1 chunk, no latency:
    alone each takes 2 x 3/4 x 8 MiB / 100 = 125,829.12 ns. Issued together (dp_overlap: the
    DP one at 0, and nothing waits for it; zero compute) the dimension serves them one after
    the other: 251,658.24 ns; with 2 queues (unaware) they run side by side: max of the two."""
    net = network_from_lists(["Ring"], [4])
    wl = _wl([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[NONE, NONE, AR], [NONE, NONE, AR]],
             [[0, 0, 2**23], [0, 0, 2**23]], [[[4]] * 3] * 2)
    tm = timing.TimingModel(model="pipelined", training_loop="dp_overlap")
    one = 2 * 0.75 * 2**23 / 100
    assert timing.step_time_ns(wl, net, tm, [100.0]) == pytest.approx(2 * one, rel=1e-12)
    tm2 = dataclasses.replace(tm, queues_per_dim=2)
    # an all-reduce on a single dimension is one stage on the first half: both on queue 0
    assert timing.step_time_ns(wl, net, tm2, [100.0]) == pytest.approx(2 * one, rel=1e-12)
    tm3 = dataclasses.replace(tm, queues_per_dim=3)  # first half = queue 0 only, as above
    assert timing.step_time_ns(wl, net, tm3, [100.0]) == pytest.approx(2 * one, rel=1e-12)
    rs = _wl([[0.0] * 3] * 2, [[NONE, NONE, RS]] * 2, [[0, 0, 2**23]] * 2, [[[4]] * 3] * 2)
    alone = 0.75 * 2**23 / 100
    assert timing.step_time_ns(rs, net, tm, [100.0]) == pytest.approx(2 * alone, rel=1e-12)
    # reduce-scatters take the queues round robin: with 2 they run together (unaware) ...
    assert timing.step_time_ns(rs, net, tm2, [100.0]) == pytest.approx(alone, rel=1e-12)
    # ... and the aware backend: opposite directions round a Ring(4) use different links
    aw = dataclasses.replace(tm2, network_backend="aware")
    assert timing.step_time_ns(rs, net, aw, [100.0]) == pytest.approx(alone, rel=1e-12)
    # whole ns (system.whole_ns), as ASTRA-sim's links: each of the 3 messages floor(t / 3)
    whole = dataclasses.replace(aw, whole_ns=True)
    assert timing.step_time_ns(rs, net, whole, [100.0]) == 3 * math.floor(alone / 3) == 62913
    # on a Ring(2) both directions are one link: shared, each at half speed
    net2 = network_from_lists(["Ring"], [2])
    rs2 = _wl([[0.0] * 3] * 2, [[NONE, NONE, RS]] * 2, [[0, 0, 2**23]] * 2, [[[2]] * 3] * 2)
    half = 0.5 * 2**23 / 100
    assert timing.step_time_ns(rs2, net2, aw, [100.0]) == pytest.approx(2 * half, rel=1e-12)
    # stock ASTRA-sim: one collective in flight, the same as one queue here
    one_q = dataclasses.replace(tm2, max_inflight_collectives=1)
    assert timing.step_time_ns(rs, net, one_q, [100.0]) == pytest.approx(2 * alone, rel=1e-12)
    # through a Switch the aware backend stores and forwards: twice the bandwidth time
    sw = network_from_lists(["Switch"], [4])
    aw1 = dataclasses.replace(tm, network_backend="aware")
    assert timing.step_time_ns(rs, sw, aw1, [100.0]) == pytest.approx(4 * alone, rel=1e-12)
    # two reduce-scatters at once through a Switch (2 queues, aware): every ring message
    # goes NPU -> switch (t) then switch -> NPU (t), each link a FIFO. Switch(2), one step of
    # 4 MiB, t = 41,943.04 ns: A up [0, t], down [t, 2t]; B up [t, 2t], down [2t, 3t]
    s2 = network_from_lists(["Switch"], [2])
    t = 2**22 / 100
    assert timing.step_time_ns(rs2, s2, aw, [100.0]) == pytest.approx(3 * t, rel=1e-12)
    # Switch(4): three steps of 2 MiB each (t'): once B is one message behind A they never
    # meet again (A's next message goes up while B's goes down), so 2 x 3t' + t' = 7t'
    t4 = 2**21 / 100
    assert timing.step_time_ns(rs, sw, aw, [100.0]) == pytest.approx(7 * t4, rel=1e-12)
    # unaware: side by side, no link model
    assert timing.step_time_ns(rs, sw, tm2, [100.0]) == pytest.approx(3 * t4, rel=1e-12)


@pytest.mark.parametrize("case_id", ["g3_Bov_dp_overlap_unaware_k4_L500",
                                     "g8_Bov_pair_dp_overlap_aware_k4_L0_q2",
                                     "g7_A6_dp_overlap_aware_k4_L500_mem1600"])
def test_train_lower_bound_and_exact_time(case_id):
    """The convex model `train` optimises is a lower bound of the simulated step at every
    design (given and optimal), and the solver's certified bound bounds the simulated step
    at the optimum from below: an honest gap."""
    exp = _experiment()
    case = next(c for c in json.loads((SHARED / "cases.json").read_text())
                if c["case_id"] == case_id)
    net, wl, tm, bw = exp.case_inputs(case)
    # (the bounds are of the real-valued model: whole ns, which the harness takes for the
    # aware backend as ASTRA-sim counts, may put a step up to 1 ns per message below them)
    tm = dataclasses.replace(tm, whole_ns=False)
    spec = ConstraintSpec(total_bw_gbps=float(np.sum(bw)))
    p = timing.build_timed_problem(net, wl, None, spec, tm)
    res = solve(p)
    exact = timing.step_time_ns(wl, net, tm, res.bandwidth_gbps)
    assert res.lower_bound <= exact * (1 + 1e-9)
    assert res.step_time_ns <= exact * (1 + 1e-9)
    # no design (here the case's own) beats the certified bound
    assert timing.step_time_ns(wl, net, tm, bw) >= res.lower_bound * (1 - 1e-9)


def test_new_system_keys_are_checked():
    net = network_from_lists(["Ring", "Switch"], [4, 8])
    wl = _wl([[1.0] * 3], [[AR, NONE, NONE]], [[1e6, 0, 0]], [[[4, -1]] * 3])
    base = timing.TimingModel(model="pipelined")
    for bad, key in ((dict(queue_policy="random"), "system.queue_policy"),
                     (dict(queues_per_dim=0), "system.queues_per_dim"),
                     (dict(network_backend="garnet"), "system.network_backend"),
                     (dict(max_inflight_collectives=0), "system.max_inflight_collectives")):
        with pytest.raises(LibraInputError, match=key.replace(".", r"\.")):
            timing.check_timing(dataclasses.replace(base, **bad), 2)
    with pytest.raises(LibraInputError, match="only apply to model=pipelined"):
        timing.check_timing(timing.TimingModel(network_backend="aware"), 2)
    assert timing.step_time_ns(wl, net, base, [100.0, 100.0]) > 0


def test_step_exports_as_chakra_traces(tmp_path):
    """The step graph written as Chakra ETs parses back to the same graph on every NPU."""
    comm = [[[4, -1], [4, -1], [-1, 2]]] * 2
    wl = _wl([[1e3, 2e3, 3e3]] * 2, [[AR, RS, AR]] * 2, [[1e6] * 3] * 2, comm)
    nodes = step.step_graph(wl, "dp_overlap")
    paths = chakra.write_traces(nodes, [4, 2], tmp_path)
    assert len(paths) == 8
    for path in paths:
        _, et = chakra.read_trace(path)
        assert [n["name"] for n in et] == [n.name for n in nodes]
        assert [tuple(n["data_deps"]) for n in et] == [n.deps for n in nodes]
        for n, e in zip(nodes, et):
            if n.kind == "comm":
                assert e["attrs"]["involved_dim"] == list(n.involved)
                assert e["attrs"]["comm_size"] == int(n.size_bytes)
            else:
                assert e["duration_micros"] == round(n.duration_ns / 1e3)


@pytest.mark.parametrize("preset",
                         ["turing_nlg", pytest.param("dlrm_4d", marks=pytest.mark.slow)])
def test_train_on_presets_with_contention(preset):
    """Issue 18: `train` with dp_overlap on the shipped presets, each link model and queue
    setting: the convex optimum, the simulated step there and an honest certified gap
    (bound <= simulated). All presets: experiments/step_presets.py (56/56 honest; gaps <= 9.3e-13,
    aware presets with groups over part of a dimension up to 4.3%)."""
    exp = _experiment("step_presets")
    for backend, q, policy in exp.SETTINGS:
        r = exp.run(preset, backend, q, policy)
        assert r["status"] == "ok", r
        assert r["honest"], r
        assert r["lower_bound_ns"] <= r["model_ns"] * (1 + 1e-9)
        assert 0 <= r["exact_optimality_gap"] <= 1e-6, r
