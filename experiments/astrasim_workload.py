"""libra_jax against ASTRA-sim on whole training steps (issue 18).

Reads the whole-step ASTRA-sim runs (``cases.json`` + ``results.csv`` of
``shared/reference/astrasim_workload``, or the held-out set of
``experiments/results/astrasim_heldout``), builds each case as libra_jax inputs (network,
workload, timing model, system model), times the step with `libra_jax.model.step` and
prints libra_jax vs ASTRA-sim per case and per group.

    python experiments/astrasim_workload.py [--data DIR] [--csv OUT.csv]
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
from libra_jax.model import step, timing
from libra_jax.types import Collective, LibraInputError

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
        max_inflight_collectives=int(case.get("max_inflight_comm", 4)))
    return network, workload, tm, np.asarray(case["bandwidth_GBps"], np.float64)


def predict_ns(case) -> float:
    """libra_jax's step time of the case (ns), as libra-evaluate computes it."""
    network, workload, tm, bw = case_inputs(case)
    return timing.step_time_ns(workload, network, tm, bw)


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
    args = ap.parse_args(argv)
    rows = []
    for case, res in load(args.data):
        astra = float(res["astra_max_ns"]) if res.get("astra_max_ns") else float("nan")
        try:
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
