"""Reference cases for ASTRA-sim's runtime options (issue 33 point 4), simulated with ASTRA-sim.

Draws seeded cases that set every runtime key of ASTRA-sim's system layer, runs each one through
the congestion-unaware *and* congestion-aware analytical backends, and records ASTRA-sim's times.
Nothing here imports libra_jax. The drawing of networks, the configs, the ET generator and the
simulator calls are those of ``astrasim_heldout.py`` (imported, not copied); this file adds the
runtime keys:

* ``inter_dim_scheduling``: ascending | offlineGreedy | offlineGreedyFlex | roundRobin
  (system JSON ``inter-dimension-scheduling``; parsed only with ``astrasim/runtime_keys.patch``);
* ``intra_dim_scheduling``: FIFO | smallestFirst (``intra-dimension-scheduling``, same patch);
* ``collective_optimization``: localBWAware | baseline;
* ``impl_per_dim``: the algorithm of every dim (ring, direct, halvingDoubling, doubleBinaryTree,
  oneRing, oneDirect, oneHalvingDoubling or a per-dim mix), and ``impl_per_coll``: the list
  actually written for each collective kind (``{"all_reduce": [...], "reduce_scatter": [...],
  "all_gather": [...], "all_to_all": [...]}``): equal to ``impl_per_dim`` except where an
  algorithm does not support that collective (then ``ring`` on that dim; rules in
  ``astrasim/README.md``);
* ``active_chunks_per_dim``: 1, 2 or 4 (``active-chunks-per-dimension``).

Kinds:

* ``--kind single`` (:func:`draw_single`, ``draw_id`` rs<seed>_<index>): ONE collective per NPU
  (all_reduce / reduce_scatter / all_gather / all_to_all) over all dims of a 1-4 dim network of
  8-1024 NPUs (Ring / FullyConnected / Switch, 2-16 NPUs per dim). The ET is the reference
  generator's with one layer: ``F1`` (1 us compute) -> ``TPf1`` (the collective) -> ``B1``,
  ``W1`` (0 us computes, which ASTRA-sim skips). ``coll_span_ns`` in results.csv = ASTRA-sim's
  time - 1000 ns (the compute before the collective) = the collective's own span.
* ``--kind step`` (:func:`draw_step`, ``draw_id`` rt<seed>_<index>): whole training steps of
  ``astrasim_heldout.draw_case`` (chain / dp_overlap, TP / DP / EP groups, mixed collectives),
  with the runtime keys drawn on top.

The main keys are stratified by the draw index (``index % 4`` -> inter-dim policy,
``(index // 4) % n`` -> algorithm family), the rest drawn at random, so every value gets many
runs. Outputs (``--out``): ``cases.json`` (one dict per run, the schema of astrasim_heldout plus
the keys above and ``kind``), ``results.csv`` (astrasim_heldout's columns plus ``coll_span_ns``;
empty for steps), ``run_info.json`` (counts per key value and backend, deadlocks with their
configuration). Results are written after every draw, so a partial set is always readable.

    python experiments/astrasim_runtime.py --kind single --cases 300 --seed 11 \
        --out experiments/results/astrasim_runtime/single --runs-dir /work/astra_ws/runs_rt11
"""
from __future__ import annotations

import argparse
import collections
import csv
import json
import math
import os
import random
import shlex
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import astrasim_heldout as H  # noqa: E402

INTER = ("ascending", "offlineGreedy", "offlineGreedyFlex", "roundRobin")
INTRA = ("FIFO", "smallestFirst")
COLL_OPT = ("localBWAware", "baseline")
COLLS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
SINGLE_FAMILIES = ("ring", "direct", "halvingDoubling", "doubleBinaryTree", "mixed",
                   "oneRing", "oneDirect", "oneHalvingDoubling")
STEP_FAMILIES = ("ring", "direct", "halvingDoubling", "doubleBinaryTree", "mixed",
                 "oneRing", "oneDirect")
ONE = ("oneRing", "oneDirect", "oneHalvingDoubling")
COLUMNS = H.COLUMNS + ("coll_span_ns",)
SINGLE_PRE_NS = 1000  # the 1 us compute F1 before the collective


def _pow2(n: int) -> bool:
    return n >= 2 and (n & (n - 1)) == 0


def impl_lists(family: str, npd: list[int], coll_opt: str, inter: str,
               rng: random.Random) -> tuple[list[str], dict]:
    """(impl_per_dim, impl_per_coll) of one algorithm family on the network ``npd``.

    Rules (astrasim/README.md): halvingDoubling does RS / AG / AR only and needs a power-of-2
    dim (all_to_all -> ring there); doubleBinaryTree needs a power-of-2 dim (the caller
    draws such networks; a 3-NPU dim segfaults) and is an all-reduce algorithm (its phase
    always does a full all-reduce), so it stands only where the all-reduce runs an AR phase:
    on every dim with ``baseline``, on the last dim with ``localBWAware`` + ascending (the
    caller makes sure), and never for RS / AG / A2A (-> ring); the ``one*`` variants turn the
    whole machine into one ring (only impl[0] is read) and are written on every dim."""
    D = len(npd)
    if family in ONE:
        per_dim = [family] * D
        per_coll = {c: list(per_dim) for c in COLLS}
        if family == "oneHalvingDoubling":
            per_coll["all_to_all"] = ["oneRing"] * D
        return per_dim, per_coll
    if family == "ring" or family == "direct":
        per_dim = [family] * D
    elif family == "halvingDoubling":
        per_dim = ["halvingDoubling" if _pow2(n) else "ring" for n in npd]
    elif family == "doubleBinaryTree":
        if coll_opt == "baseline":
            per_dim = [("doubleBinaryTree" if rng.random() < 0.7
                        else rng.choice(("ring", "direct"))) for _ in range(D)]
            if "doubleBinaryTree" not in per_dim:
                per_dim[rng.randrange(D)] = "doubleBinaryTree"
        else:  # localBWAware, ascending: the AR phase is on the last dim
            per_dim = [rng.choice(("ring", "direct")) for _ in range(D - 1)] + ["doubleBinaryTree"]
    elif family == "mixed":
        while True:
            per_dim = [rng.choice(("ring", "direct", "halvingDoubling") if _pow2(n)
                                  else ("ring", "direct")) for n in npd]
            if D == 1 or len(set(per_dim)) > 1:
                break
    else:
        raise ValueError(family)
    per_coll = {}
    for c in COLLS:
        lst = list(per_dim)
        for d, a in enumerate(lst):
            if a == "halvingDoubling" and c == "all_to_all":
                lst[d] = "ring"
            if a == "doubleBinaryTree" and c != "all_reduce":
                lst[d] = "ring"
        per_coll[c] = lst
    return per_dim, per_coll


def _fix_keys(family: str, inter: str, coll_opt: str, D: int, colls: set[str]):
    """Make (inter, coll_opt) valid for ``family``: -> (inter, coll_opt, note)."""
    note = ""
    if family in ONE and inter in ("offlineGreedy", "offlineGreedyFlex") and colls - {"all_to_all"}:
        # Themis maps chunks onto the physical dims; a one* topology has a single dim
        inter, note = "roundRobin", "one*: offlineGreedy* -> roundRobin"
    if family == "doubleBinaryTree" and coll_opt == "localBWAware" and D > 1 \
            and inter != "ascending":
        # the AR phase moves off the last dim (roundRobin) or disappears (Themis: RS + AG)
        coll_opt, note = "baseline", "doubleBinaryTree: localBWAware -> baseline"
    return inter, coll_opt, note


def _runtime_keys(rng: random.Random, index: int, families) -> dict:
    """Stratified by ``index``: inter-dim policy = index % 4; algorithm family = (index // 4)
    cycling over the families, without the one* ones under Themis (they cannot run together)."""
    inter = INTER[index % 4]
    if inter.startswith("offline"):
        families = tuple(f for f in families if f not in ONE)
    return {"inter_dim_scheduling": inter,
            "family": families[(index // 4) % len(families)],
            "intra_dim_scheduling": rng.choice(INTRA),
            "collective_optimization": rng.choice(COLL_OPT),
            "active_chunks_per_dim": rng.choices((1, 2, 4), weights=(0.34, 0.33, 0.33))[0]}


def draw_single(seed: int, index: int) -> dict:
    """One single-collective case; ``draw_id`` rs<seed>_<index>."""
    rng = random.Random(seed * 1_000_003 + index + 33_000_033)
    rt = _runtime_keys(rng, index, SINGLE_FAMILIES)
    fam = rt["family"]
    cap = 128 if fam in ONE else 1024  # one* = one ring over all NPUs: O(N) steps per chunk
    while True:
        D = rng.choices((1, 2, 3, 4), weights=(0.15, 0.3, 0.3, 0.25))[0]
        if fam in ("halvingDoubling", "oneHalvingDoubling", "doubleBinaryTree"):
            npd = [rng.choice((2, 4, 8, 16)) for _ in range(D)]
        else:
            npd = [rng.randint(2, 16) for _ in range(D)]
        n = math.prod(npd)
        if 8 <= n <= cap and (fam != "oneHalvingDoubling" or _pow2(n)):
            break
    topo = [rng.choice(H.TOPOLOGIES) for _ in range(D)]
    bw = [int(round(H._log_uniform(rng, 25, 400))) for _ in range(D)]
    if rng.random() < 0.35:
        lat = [0] * D
    elif rng.random() < 0.5:
        lat = [rng.randint(100, 1000)] * D
    else:
        lat = [rng.randint(100, 1000) for _ in range(D)]
    if fam == "doubleBinaryTree":
        coll = "all_reduce"
    elif fam in ("halvingDoubling", "oneHalvingDoubling"):
        coll = rng.choice(COLLS[:3])
    else:
        coll = rng.choice(COLLS)
    inter, copt, note = _fix_keys(fam, rt["inter_dim_scheduling"], rt["collective_optimization"],
                                  D, {coll})
    per_dim, per_coll = impl_lists(fam, npd, copt, inter, rng)
    chunks = rng.randint(1, 16)
    # Themis (offlineGreedy*) cuts a last chunk of size % chunks bytes, which trips the network's
    # `chunk_size > 0` assertion when it is smaller than the group; most of its draws therefore
    # (and half of the others) use a size that splits into whole 4 KiB-multiple chunks.
    exact = rng.random() < (0.8 if inter.startswith("offline") else 0.5)
    nbytes = H._big(rng, 64 / 1024, 256, unit=4 * H.KIB * (chunks if exact else 1))
    # 1024 NPUs x 16 chunks x 256 MiB still runs in seconds; one* rings are capped at 128 NPUs
    layer = {"fwd_us": 1, "bwd_in_us": 0, "bwd_w_us": 0,
             "tp_fwd": H._coll(coll, nbytes, "tp"), "tp_bwd": None, "dp": None}
    return {
        "draw_id": f"rs{seed}_{index:04d}",
        "group": "runtime_single",
        "kind": "single",
        "network": "x".join(f"{H.SHORT_TOPO[t]}{k}" for t, k in zip(topo, npd)),
        "topology": topo,
        "npus_per_dim": npd,
        "npus": n,
        "bandwidth_GBps": bw,
        "latency_ns": lat,
        "endpoint_delay_ns": rng.randint(1, 10),
        "chunks": chunks,
        "impl_per_dim": per_dim,
        "impl_per_coll": per_coll,
        "algorithm_family": fam,
        "collective_optimization": copt,
        "inter_dim_scheduling": inter,
        "intra_dim_scheduling": rt["intra_dim_scheduling"],
        "scheduling_policy": rng.choice(("LIFO", "FIFO")),
        "active_chunks_per_dim": rt["active_chunks_per_dim"],
        "queues_per_dim": rng.choices((1, 2), weights=(0.6, 0.4))[0],
        "local_mem_bw_GBps": 1e6 if rng.random() < 0.85 else 1600.0,
        "max_inflight_comm": 1,
        "deps": "chain",
        "groups": {"tp": {"dims": list(range(D))}, "dp": {"dims": list(range(D))}},
        "layers": [layer],
        "collective": coll,
        "coll_bytes": nbytes,
        "note": f"kind=single; {coll} {nbytes} B" + (f"; {note}" if note else ""),
    }


def draw_step(seed: int, index: int) -> dict:
    """One training step of astrasim_heldout.draw_case with the runtime keys; rt<seed>_<index>.

    halvingDoubling, doubleBinaryTree: every dim 2, 4 or 8 NPUs; one*: TP / DP / EP groups
    all on every dim (a one* topology is one ring of all NPUs: a group without dim 0 would
    skip its collectives, a group with it would span the whole machine); doubleBinaryTree:
    baseline (the AR phase is on the last dim of each group, which differs between TP and
    DP)."""
    case = H.draw_case(seed, index)
    rng = random.Random(seed * 1_000_003 + index + 44_000_044)
    rt = _runtime_keys(rng, index, STEP_FAMILIES)
    fam = rt["family"]
    npd = list(case["npus_per_dim"])
    D = len(npd)
    if fam in ("halvingDoubling", "doubleBinaryTree"):
        while True:
            npd = [rng.choice((2, 4, 8)) for _ in range(D)]
            if math.prod(npd) <= H.MAX_NPUS:
                break
        case["npus_per_dim"], case["npus"] = npd, math.prod(npd)
        case["network"] = "x".join(f"{H.SHORT_TOPO[t]}{k}" for t, k in zip(case["topology"], npd))
        for ly in case["layers"]:  # ZeRO all-gather shard = RS size / DP group: keep it exact
            if isinstance(ly.get("dp"), list):
                g = H._group_size(npd, case["groups"]["dp"]["dims"])
                rs = ly["dp"][0]["bytes"]
                rs = max(4 * H.KIB * g, (rs // (4 * H.KIB * g)) * 4 * H.KIB * g)
                ly["dp"][0]["bytes"], ly["dp"][1]["bytes"] = rs, rs // g
    if fam in ONE:
        for g in case["groups"].values():
            g["dims"] = list(range(D))
        for ly in case["layers"]:
            if isinstance(ly.get("dp"), list):
                g = case["npus"]
                rs = ly["dp"][0]["bytes"]
                rs = max(4 * H.KIB * g, (rs // (4 * H.KIB * g)) * 4 * H.KIB * g)
                ly["dp"][0]["bytes"], ly["dp"][1]["bytes"] = rs, rs // g
        case["note"] += "; one*: all groups on all dims"
    colls = set()
    for ly in case["layers"]:
        for k in ("tp_fwd", "tp_bwd", "ep_a2a", "ep_a2a_back"):
            if ly.get(k):
                colls.add(ly[k]["coll"])
        dp = ly.get("dp")
        for c in (dp if isinstance(dp, list) else [dp]):
            if c:
                colls.add(c["coll"])
    copt = rt["collective_optimization"]
    if fam == "doubleBinaryTree" and D > 1:
        copt = "baseline"
    inter, copt, note = _fix_keys(fam, rt["inter_dim_scheduling"], copt, D, colls)
    per_dim, per_coll = impl_lists(fam, npd, copt, inter, rng)
    if rng.random() < (0.8 if inter.startswith("offline") else 0.5):
        _exact_chunks(case)  # as in draw_single: whole 4 KiB-multiple chunks
    out = {}
    for k, v in case.items():
        if k == "draw_id":
            v = f"rt{seed}_{index:04d}"
        elif k == "group":
            v = "runtime_step"
        out[k] = v
        if k == "group":
            out["kind"] = "step"
        if k == "impl_per_dim":
            out[k] = per_dim
            out["impl_per_coll"] = per_coll
            out["algorithm_family"] = fam
        elif k == "collective_optimization":
            out[k] = copt
            out["inter_dim_scheduling"] = inter
            out["intra_dim_scheduling"] = rt["intra_dim_scheduling"]
        elif k == "active_chunks_per_dim":
            out[k] = rt["active_chunks_per_dim"]
    if note:
        out["note"] += f"; {note}"
    return out


def _exact_chunks(case: dict) -> None:
    """Round every ET size down to a multiple of 4 KiB x chunks (ZeRO: RS a multiple of
    4 KiB x chunks x DP group, AG = RS / DP group), so every chunk is a whole 4 KiB multiple."""
    unit = 4 * H.KIB * case["chunks"]

    def rnd(b, u):
        return max(u, (b // u) * u)

    for ly in case["layers"]:
        for k in ("tp_fwd", "tp_bwd", "ep_a2a", "ep_a2a_back"):
            if ly.get(k):
                ly[k]["bytes"] = rnd(ly[k]["bytes"], unit)
        dp = ly.get("dp")
        if isinstance(dp, list):
            g = H._group_size(case["npus_per_dim"], case["groups"]["dp"]["dims"])
            dp[0]["bytes"] = rnd(dp[0]["bytes"], unit * g)
            dp[1]["bytes"] = dp[0]["bytes"] // g
        elif dp:
            dp["bytes"] = rnd(dp["bytes"], unit)


DRAWERS = {"single": draw_single, "step": draw_step}


def system_json(case: dict) -> dict:
    """astrasim_heldout.system_json with the per-collective lists and the scheduling keys."""
    sj = H.system_json(case)
    pc = case["impl_per_coll"]
    sj["all-reduce-implementation"] = pc["all_reduce"]
    sj["all-gather-implementation"] = pc["all_gather"]
    sj["reduce-scatter-implementation"] = pc["reduce_scatter"]
    sj["all-to-all-implementation"] = pc["all_to_all"]
    sj["inter-dimension-scheduling"] = case["inter_dim_scheduling"]
    sj["intra-dimension-scheduling"] = case["intra_dim_scheduling"]
    return sj


def prepare(case: dict, run_dir: str, ws: str, gen: str, et_from: str | None = None):
    err = H.prepare(case, run_dir, ws, gen, et_from=et_from)
    with open(os.path.join(run_dir, "system.json"), "w") as f:  # overwrite with runtime keys
        json.dump(system_json(case), f, indent=2)
    return err


KEYS = ("inter_dim_scheduling", "intra_dim_scheduling", "collective_optimization",
        "algorithm_family", "active_chunks_per_dim", "collective")


def summarise(cases, rows) -> dict:
    counts = {k: collections.defaultdict(lambda: collections.Counter()) for k in KEYS}
    failed = []
    for c, r in zip(cases, rows):
        ok = "ok" if not r["error"] else "failed"
        for k in KEYS:
            if k in c:
                counts[k][str(c[k])][f"{c['backend']}_{ok}"] += 1
        if r["error"]:
            failed.append({"case_id": c["case_id"], "rc": r["rc"], "error": r["error"],
                           "network": c["network"], "npus": c["npus"],
                           "inter": c["inter_dim_scheduling"], "intra": c["intra_dim_scheduling"],
                           "coll_opt": c["collective_optimization"],
                           "impl": c["impl_per_dim"], "active_chunks": c["active_chunks_per_dim"],
                           "chunks": c["chunks"], "queues": c["queues_per_dim"],
                           "collective": c.get("collective", c["deps"])})
    return {"counts": {k: {v: dict(cnt) for v, cnt in d.items()} for k, d in counts.items()},
            "failed": failed}


def write_out(out, cases, rows, info):
    with open(os.path.join(out, "cases.json"), "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases) + "\n]\n")
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out, "run_info.json"), "w") as f:
        json.dump(info, f, indent=1)


def run_all(seed, n_cases, out, ws, gen, timeout, kind, runs_dir, start=0, verbose=True):
    os.makedirs(out, exist_ok=True)
    os.makedirs(runs_dir, exist_ok=True)
    cases, rows = [], []
    t_start = time.time()
    info = {}
    for i in range(start, start + n_cases):
        for case, row in H.run_draw(DRAWERS[kind](seed, i), runs_dir, ws, gen, timeout,
                                    prepare_fn=prepare):
            row["coll_span_ns"] = ""
            if kind == "single" and row["astra_max_ns"] != "":
                row["coll_span_ns"] = row["astra_max_ns"] - SINGLE_PRE_NS
            cases.append(case)
            rows.append(row)
            if verbose:
                print(f"[{len(rows):4d}] {case['case_id']:18s} {case['network']:18s} "
                      f"{case['inter_dim_scheduling'][:9]:9s} {case['algorithm_family'][:8]:8s} "
                      f"{case['collective_optimization'][:5]} a{case['active_chunks_per_dim']} "
                      f"max={row['astra_max_ns']!s:>12s} {row['wall_s']:>6s}s rc={row['rc']} "
                      f"{row['error']}", flush=True)
        total = time.time() - t_start
        failed = [r for r in rows if r["error"]]
        info = {"command": " ".join(shlex.quote(a) for a in sys.argv), "seed": seed,
                "kind": kind, "first_index": start, "cases_drawn": i - start + 1,
                "runs": len(rows), "failed_runs": len(failed),
                "total_wall_s": round(total, 1),
                "sim_wall_s_sum": round(sum(float(r["wall_s"]) for r in rows), 1),
                "sim_wall_s_max": max(float(r["wall_s"]) for r in rows),
                "timeout_s": timeout, "astra_ws": ws, "generator": gen, "runs_dir": runs_dir}
        info.update(summarise(cases, rows))
        write_out(out, cases, rows, info)
    return cases, rows, info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kind", choices=tuple(DRAWERS), required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--cases", type=int, default=100, help="drawn cases (x2 backends = runs)")
    ap.add_argument("--start", type=int, default=0, help="first draw index")
    ap.add_argument("--out", required=True)
    ap.add_argument("--astra-ws", default="/work/astra_ws")
    ap.add_argument("--gen", default=os.path.join(H.REF, "gen_workload_et.py"))
    ap.add_argument("--runs-dir", default=None, help="default: <astra-ws>/runs_rt<seed>")
    ap.add_argument("--timeout", type=float, default=60.0, help="per simulator run, seconds")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    ws = os.path.abspath(a.astra_ws)
    for b in H.BACKENDS:
        exe = f"{ws}/astra-sim/build/astra_analytical/build/bin/{H.EXE[b]}"
        if not os.access(exe, os.X_OK):
            sys.exit(f"no ASTRA-sim binary {exe} (build it as in experiments/astrasim/README.md)")
    runs_dir = a.runs_dir or os.path.join(ws, f"runs_rt{a.seed}")
    _, _, info = run_all(a.seed, a.cases, os.path.abspath(a.out), ws, os.path.abspath(a.gen),
                         a.timeout, a.kind, runs_dir, start=a.start, verbose=not a.quiet)
    print(f"{info['runs']} runs, {info['failed_runs']} failed, {info['total_wall_s']} s wall "
          f"(simulator {info['sim_wall_s_sum']} s)")


if __name__ == "__main__":
    main()
