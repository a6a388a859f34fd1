"""libra_jax against ASTRA-sim on whole training steps (issue 18).

Reads the whole-step ASTRA-sim runs (``cases.json`` + ``results.csv`` of
``shared/reference/astrasim_workload``, or the held-out set of
``experiments/results/astrasim_heldout``), builds each case as libra_jax inputs (network,
workload, timing model, system model), times the step with `libra_jax.model.step` and
prints libra_jax vs ASTRA-sim per case and per group. A case whose groups are given by
pg_name (explicit NPU lists, the ``g5_E_pg`` runs) is timed as the trace set every NPU runs
(`simulate_case`: `model.step_trace.simulate_trace`, flat rings over the listed NPUs); with
``--trace`` every case is.

    python experiments/astrasim_workload.py [--data DIR] [--csv OUT.csv] [--trace]
"""

from __future__ import annotations

import argparse
import csv
import json
import pathlib
import sys

import numpy as np

from libra_jax.inputs.topology import network_from_lists
from libra_jax.inputs.workload import Workload
from libra_jax.model import runtime, step, step_trace, timing
from libra_jax.types import Collective, CommGroup, LibraInputError, RankTrace, TraceSet

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "reference" / "astrasim_workload"
CODES = {"all_reduce": Collective.ALLREDUCE, "reduce_scatter": Collective.REDUCESCATTER,
         "all_gather": Collective.ALLGATHER, "all_to_all": Collective.ALLTOALL}


def _group(case, name):
    g = case["groups"][name]
    if "dims" not in g:
        raise LibraInputError(
            f"{case['case_id']}: group {name} is given by pg_name (explicit NPU lists); "
            "ASTRA-sim runs such a group as one flat ring over the listed NPUs on dimension "
            "0's queue, whatever dimensions its NPUs span, which is not a hierarchical "
            "collective: libra_jax does not model it (give groups by dimensions).")
    npd = case["npus_per_dim"]
    return [npd[d] if d in g["dims"] else -1 for d in range(len(npd))]


def case_inputs(case):
    """(network, workload, TimingModel, bandwidth_gbps [D]) of one case.

    Layers map one to one (forward: F + tensor-parallel collective; input gradient: B + its
    collective; weight gradient: W + the data-parallel collective). An expert-parallel
    all-to-all pair becomes two extra layers after the layer (dispatch, then expert compute
    + combine), whose backward phases are empty."""
    npd = case["npus_per_dim"]
    network = network_from_lists(case["topology"], npd, source=case["case_id"])
    rows, names = [], []
    none = (0, 0.0, [-1] * len(npd))

    def coll(c):
        if not c:
            return none
        return (CODES[c["coll"]], float(c["bytes"]), _group(case, c["group"]))

    for i, ly in enumerate(case["layers"], 1):
        dp = ly.get("dp")
        zero = dp[1:] if isinstance(dp, list) else []
        dp = dp[0] if isinstance(dp, list) else dp
        for j, extra in enumerate(reversed(zero)):  # ZeRO: the all-gather after the RS
            rows.append(((0.0, 0.0, 0.0), (none, none, coll(extra))))
            names.append(f"L{i}.zero{len(zero) - j}")
        rows.append(((ly["fwd_us"] * 1e3, ly["bwd_in_us"] * 1e3, ly["bwd_w_us"] * 1e3),
                     (coll(ly.get("tp_fwd")), coll(ly.get("tp_bwd")), coll(dp))))
        names.append(f"L{i}")
        if ly.get("ep_a2a"):
            rows.append(((0.0, 0.0, 0.0), (coll(ly["ep_a2a"]), none, none)))
            names.append(f"L{i}.dispatch")
            rows.append(((ly.get("ep_us", 0) * 1e3, 0.0, 0.0),
                         (coll(ly.get("ep_a2a_back") or ly["ep_a2a"]), none, none)))
            names.append(f"L{i}.combine")
    workload = Workload(
        name=case["case_id"], layer_names=tuple(names),
        compute_ns=np.asarray([r[0] for r in rows], np.float64),
        collective=np.asarray([[c[0] for c in r[1]] for r in rows], np.int32),
        size_bytes=np.asarray([[c[1] for c in r[1]] for r in rows], np.float64),
        communicator=np.asarray([[c[2] for c in r[1]] for r in rows], np.int32),
        source=case["case_id"])
    tm = timing.TimingModel(
        model="pipelined", training_loop={"chain": "no_overlap"}.get(case["deps"], case["deps"]),
        latency_ns=[float(x) for x in case["latency_ns"]], chunks=int(case["chunks"]),
        endpoint_delay_ns=float(case["endpoint_delay_ns"]),
        local_mem_bw_gbps=float(case["local_mem_bw_GBps"]), gb_is_gib=True,
        queue_policy=case["scheduling_policy"].lower(),
        queues_per_dim=int(case["queues_per_dim"]), network_backend=case["backend"],
        max_inflight_collectives=int(case.get("max_inflight_comm", 4)),
        whole_ns=case["backend"] == "aware",  # (ASTRA-sim's links count whole ns)
        **runtime_keys(case))
    bw = np.asarray(case["bandwidth_GBps"], np.float64)
    if tm.algorithm is not None:  # the YAML's link bandwidth -> libra_jax's per NPU
        bw = bw * np.asarray([runtime.link_share(a, n)
                              for a, n in zip(tm.algorithm, npd)], np.float64)
    return network, workload, tm, bw


#: ASTRA-sim's names of the runtime keys (the patched simulator's system.json) -> libra_jax's
INTER = {"ascending": "ascending", "offlineGreedy": "themis",
         "offlineGreedyFlex": "themis_flex", "roundRobin": "round_robin"}
INTRA = {"FIFO": "fifo", "smallestFirst": "smallest_first"}
OPTIMIZATION = {"localBWAware": "local_bw_aware", "baseline": "baseline"}
ALGORITHM = {"ring": "ring", "direct": "direct", "halvingDoubling": "halving_doubling",
             "doubleBinaryTree": "double_binary_tree", "oneRing": "ring",
             "oneDirect": "direct", "oneHalvingDoubling": "halving_doubling"}


#: ASTRA-sim algorithms libra_jax does not model: the ``one*`` variants make every NPU of
#: the network one flat ring (GeneralComplexTopology)
NOT_MODELLED = ("oneRing", "oneDirect", "oneHalvingDoubling")


def modelled(case) -> bool:
    """Whether libra_jax models the case's runtime (its algorithms)."""
    impl = case.get("impl_per_coll") or {}
    return not any(a in NOT_MODELLED for names in impl.values() for a in names) and not any(
        a in NOT_MODELLED for a in case.get("impl_per_dim") or ())


def runtime_keys(case) -> dict:
    """The `TimingModel` runtime fields of a case (absent keys: ASTRA-sim's defaults)."""
    impl = case.get("impl_per_dim")
    algo = None
    if impl is not None and any(ALGORITHM[a] != "ring" for a in impl):
        algo = [ALGORITHM[a] for a in impl]
    return dict(
        inter_dim_scheduling=INTER[case.get("inter_dim_scheduling", "ascending")],
        intra_dim_scheduling=INTRA[case.get("intra_dim_scheduling", "FIFO")],
        collective_optimization=OPTIMIZATION[case.get("collective_optimization",
                                                      "localBWAware")],
        algorithm=algo, active_chunks_per_dim=int(case.get("active_chunks_per_dim", 1)))


def predict_ns(case) -> float:
    """libra_jax's step time of the case (ns), as libra-evaluate computes it."""
    network, workload, tm, bw = case_inputs(case)
    return timing.step_time_ns(workload, network, tm, bw)


def case_trace(case):
    """(TraceSet, network, TimingModel, bandwidth_gbps [D]) of one case, as the per-NPU
    Chakra ETs of ``gen_workload_et.py`` describe it: every NPU runs `case_inputs`'s step
    graph; a collective of a group given by dimensions runs over them, one of a pg_name
    group over the listed NPUs of the list that holds the NPU."""
    npd = case["npus_per_dim"]
    names = list(case["groups"])
    # each group gets a distinct stand-in set of dimensions to build the step graph with
    subsets = [[d for d in range(len(npd)) if m >> d & 1] for m in range(1, 2 ** len(npd))]
    if len(names) > len(subsets):
        raise LibraInputError(f"{case['case_id']}: more groups than dimension subsets.")
    stand_in = {name: ({"dims": case["groups"][name]["dims"]} if "dims" in case["groups"][name]
                       else {"dims": subsets[-1 - j]}) for j, name in enumerate(names)}
    if len({tuple(g["dims"]) for g in stand_in.values()}) < len(names):
        stand_in = {name: {"dims": subsets[-1 - j]} for j, name in enumerate(names)}
    network, workload, tm, bw = case_inputs(dict(case, groups=stand_in))
    nodes = step.step_graph(workload, tm.training_loop)
    group_of = {tuple(npd[d] if d in g["dims"] else 1 for d in range(len(npd))): name
                for name, g in stand_in.items()}
    base = step_trace.trace_from_nodes(
        [n if n.kind == "compute" else
         step.StepNode(**{**n.__dict__, "group": tuple(1 if not v else npd[d]
                                                       for d, v in enumerate(n.involved))})
         for n in nodes], npd, prefix=case["case_id"])
    groups, index = [], {}

    def group_index(name, rank):
        g = case["groups"][name]
        if "dims" in g:
            key = (name,)
            grp = CommGroup(name=name, involved=tuple(d in g["dims"] for d in range(len(npd))))
        else:
            members = next(tuple(m) for m in g["pg"] if rank in m)
            key = (name, members)
            grp = CommGroup(name=f"{name}{g['pg'].index(list(members))}", ranks=members)
        if key not in index:
            index[key] = len(groups)
            groups.append(grp)
        return index[key]

    comm = [i for i, n in enumerate(nodes) if n.kind == "comm"]
    ranks = []
    for r, tr in enumerate(base.ranks):
        group = tr.group.copy()
        for i in comm:
            group[i] = group_index(group_of[nodes[i].group], r)
        ranks.append(RankTrace(**{**tr.__dict__, "group": group}))
    return (TraceSet(prefix=case["case_id"], ranks=tuple(ranks), groups=tuple(groups),
                     skipped={}), network, tm, bw)


def simulate_case(case):
    """`step_trace.simulate_trace` of the case's trace set (`case_trace`)."""
    trace, network, tm, bw = case_trace(case)
    return step_trace.simulate_trace(trace, network.block_codes, network.npus, bw, tm)


def load(data: pathlib.Path):
    cases = json.loads((data / "cases.json").read_text())
    with open(data / "results.csv", newline="") as f:
        results = {(r["case_id"], r.get("backend")): r for r in csv.DictReader(f)}
    out = []
    for c in cases:
        r = results.get((c["case_id"], c["backend"])) or results.get((c["case_id"], None))
        if r is None:
            r = next(v for (cid, _), v in results.items() if cid == c["case_id"])
        out.append((c, r))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=pathlib.Path, default=DEFAULT_DATA)
    ap.add_argument("--csv", type=pathlib.Path, default=None)
    ap.add_argument("--trace", action="store_true",
                    help="time every case as a trace set (step_trace), not only pg_name ones")
    args = ap.parse_args(argv)
    rows = []
    for case, res in load(args.data):
        astra = float(res["astra_max_ns"]) if res.get("astra_max_ns") else float("nan")
        pg = any("dims" not in g for g in case["groups"].values())
        try:
            if pg or args.trace:
                ours, note = simulate_case(case).time_ns, "trace"
            else:
                ours, note = predict_ns(case), ""
        except LibraInputError as e:
            ours, note = float("nan"), str(e).split(":")[1][:60]
        err = (ours - astra) / astra
        rows.append((case["case_id"], case.get("group", ""), case["backend"], astra, ours, err,
                     note))
        print(f"{case['case_id']:45s} {case['backend']:8s} {astra:14.0f} {ours:14.0f} "
              f"{100 * err:+7.2f}% {note}")
    for backend in ("unaware", "aware"):
        errs = np.asarray([abs(r[5]) for r in rows if r[2] == backend and np.isfinite(r[5])])
        if errs.size:
            print(f"{backend}: {errs.size} cases, max |err| {100 * errs.max():.2f}%, "
                  f"within 2%: {np.sum(errs <= 0.02)}, within 5%: {np.sum(errs <= 0.05)}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["case_id", "group", "backend", "astra_ns", "libra_jax_ns", "rel_err",
                        "note"])
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
