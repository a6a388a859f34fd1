"""ASTRA-sim runs of single collectives under every per-dimension collective algorithm
(`ring`, `direct`, `halvingDoubling`, `doubleBinaryTree`, `oneRing`, ...), to check
`libra_jax/model/algorithms.py` (docs/algorithms.md).

One case = one collective (one layer, zero compute: a chain ``F -> COLL -> B -> W``, every
compute node 0 us) on a 1-3 dimension network; ASTRA-sim's finish time (max over NPUs) is
``astra_ns``. Uses the stock (unpatched) analytical binaries in ``$WS/bin_stock``.

Usage:
  python experiments/astrasim_algorithms.py --out experiments/results/astrasim_algorithms \
      [--ws /work/astra_ws] [--gen /work/shared/reference/astrasim_workload/gen_workload_et.py]
      [--sweep single|multi|all] [--limit N]
Writes ``<out>/runs.csv`` (every input column, astra_ns, the model's ns and the error).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import random
import re
import shlex
import subprocess
import sys

EXE = {"unaware": "AstraSim_Analytical_Congestion_Unaware",
       "aware": "AstraSim_Analytical_Congestion_Aware"}
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")
TOPO = {"RI": "Ring", "FC": "FullyConnected", "SW": "Switch"}
COLLS = ("reduce_scatter", "all_gather", "all_reduce", "all_to_all")
COLUMNS = ("case_id", "backend", "blocks", "npus_per_dim", "bandwidth_GBps", "latency_ns",
           "impl", "coll", "bytes", "chunks", "endpoint_delay_ns", "local_mem_bw_GBps",
           "collective_optimization", "astra_ns", "rc", "error")


def network_yaml(case):
    def lst(xs):
        return "[ " + ", ".join(str(x) for x in xs) + " ]"
    return (f"topology: {lst([TOPO[b] for b in case['blocks']])}\n"
            f"npus_count: {lst(case['npus_per_dim'])}\n"
            f"bandwidth: {lst(case['bandwidth_GBps'])}\n"
            f"latency: {lst(case['latency_ns'])}\n")


def system_json(case):
    impl = list(case["impl"])
    return {"scheduling-policy": "LIFO", "endpoint-delay": case["endpoint_delay_ns"],
            "active-chunks-per-dimension": 1, "preferred-dataset-splits": case["chunks"],
            "all-reduce-implementation": impl, "all-gather-implementation": impl,
            "reduce-scatter-implementation": impl, "all-to-all-implementation": impl,
            "collective-optimization": case["collective_optimization"],
            "local-mem-bw": case["local_mem_bw_GBps"], "boost-mode": 0}


def workload_case(case):
    d = len(case["npus_per_dim"])
    return {"npus_per_dim": case["npus_per_dim"], "deps": "chain",
            "layers": [{"fwd_us": 0, "bwd_in_us": 0, "bwd_w_us": 0,
                        "tp_fwd": {"coll": case["coll"], "bytes": case["bytes"],
                                   "group": "tp"}, "tp_bwd": None, "dp": None}],
            "groups": {"tp": {"dims": list(range(d))}}}


def run_case(case, ws, gen, runs_dir, timeout=120.0):
    """Write the run directory, generate the ETs (cached per workload), run -> the row."""
    wl = workload_case(case)
    key = f"et_{'x'.join(map(str, case['npus_per_dim']))}_{case['coll']}_{case['bytes']}"
    et_dir = os.path.join(runs_dir, "ets", key)
    if not os.path.isdir(et_dir):
        os.makedirs(os.path.dirname(et_dir), exist_ok=True)
        with open(et_dir + ".json", "w") as f:
            json.dump(wl, f)
        chakra = f"{ws}/astra-sim/extern/graph_frontend/chakra"
        env = dict(os.environ, PYTHONPATH=f"{chakra}/schema/protobuf:"
                   f"{chakra}/src/third_party/utils")
        subprocess.run([f"{ws}/venv/bin/python", gen, et_dir + ".json", et_dir], env=env,
                       check=True, capture_output=True)
    run_dir = os.path.join(runs_dir, case["case_id"])
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "network.yml"), "w") as f:
        f.write(network_yaml(case))
    with open(os.path.join(run_dir, "system.json"), "w") as f:
        json.dump(system_json(case), f, indent=1)
    with open(os.path.join(run_dir, "memory.json"), "w") as f:
        json.dump({"memory-type": "NO_MEMORY_EXPANSION"}, f)
    cmd = [f"{ws}/bin_stock/{EXE[case['backend']]}", f"--workload-configuration={et_dir}/wl",
           "--comm-group-configuration=empty",
           f"--system-configuration={run_dir}/system.json",
           f"--remote-memory-configuration={run_dir}/memory.json",
           f"--network-configuration={run_dir}/network.yml"]
    with open(os.path.join(run_dir, "cmd.sh"), "w") as f:
        f.write(shlex.join(cmd) + "\n")
    row = {k: case[k] for k in COLUMNS if k in case}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=run_dir)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired:
        out, rc = "", 124
    with open(os.path.join(run_dir, "sim.log"), "w") as f:
        f.write(out)
    fin = {int(m.group(1)): int(m.group(2)) for m in FINISHED.finditer(out)}
    n = 1
    for x in case["npus_per_dim"]:
        n *= x
    row["rc"] = rc
    row["astra_ns"] = max(fin.values()) if len(fin) == n and rc == 0 else ""
    row["error"] = "" if row["astra_ns"] != "" else (
        f"rc {rc}, {len(fin)}/{n} finished: "
        + " | ".join(ln.strip() for ln in out.splitlines()[-3:])[:200])
    return row


def flat(row):
    out = dict(row)
    for k in ("blocks", "npus_per_dim", "bandwidth_GBps", "latency_ns", "impl"):
        if isinstance(out.get(k), (list, tuple)):
            out[k] = "|".join(str(x) for x in out[k])
    return out


def single_cases(seed=1):
    """One dimension: every block, algorithm, collective, backend; n, sizes, latency,
    endpoint delay, chunks drawn."""
    rng = random.Random(seed)
    cases = []
    algos = ("ring", "direct", "direct2", "halvingDoubling", "doubleBinaryTree", "oneRing",
             "oneDirect", "oneHalvingDoubling")
    i = 0
    for algo, blk, coll, backend in itertools.product(algos, ("RI", "FC", "SW"), COLLS,
                                                       ("unaware", "aware")):
        for _ in range(3):
            n = rng.choice([2, 3, 4, 5, 6, 8, 12, 16] if "alving" not in algo
                           else [2, 4, 8, 16])
            cases.append(dict(
                case_id=f"s{i:04d}", backend=backend, blocks=[blk], npus_per_dim=[n],
                bandwidth_GBps=[rng.choice([25, 50, 100, 200])],
                latency_ns=[rng.choice([0, 100, 250, 500, 1000])], impl=[algo], coll=coll,
                bytes=rng.choice([1 << 20, 3 << 20, 1 << 22, 5 << 18]) * rng.choice([1, 2]),
                chunks=rng.choice([1, 1, 2, 4]), endpoint_delay_ns=rng.choice([1, 5, 10]),
                local_mem_bw_GBps=rng.choice([1e6, 50, 1600]),
                collective_optimization="baseline"))
            i += 1
    return cases


def multi_cases(seed=2):
    rng = random.Random(seed)
    cases = []
    algos = ("ring", "direct", "halvingDoubling", "doubleBinaryTree")
    for i in range(80):
        d = rng.choice([2, 2, 3])
        blocks = [rng.choice(("RI", "FC", "SW")) for _ in range(d)]
        impl = [rng.choice(algos) for _ in range(d)]
        npd = [rng.choice([2, 4, 8]) if "h" in a else rng.choice([2, 3, 4, 6])
               for a in impl]
        cases.append(dict(
            case_id=f"m{i:04d}", backend=rng.choice(("unaware", "aware")), blocks=blocks,
            npus_per_dim=npd, bandwidth_GBps=[rng.choice([25, 50, 100, 200]) for _ in range(d)],
            latency_ns=[rng.choice([0, 100, 500]) for _ in range(d)], impl=impl,
            coll=rng.choice(COLLS), bytes=rng.choice([1 << 20, 3 << 20, 1 << 22]),
            chunks=rng.choice([1, 2]), endpoint_delay_ns=rng.choice([1, 10]),
            local_mem_bw_GBps=rng.choice([1e6, 1600]),
            collective_optimization=rng.choice(("baseline", "localBWAware"))))
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="experiments/results/astrasim_algorithms")
    ap.add_argument("--ws", default="/work/astra_ws")
    ap.add_argument("--gen", default="/work/shared/reference/astrasim_workload/gen_workload_et.py")
    ap.add_argument("--runs", default="/work/astra_ws/runs_algos")
    ap.add_argument("--sweep", default="single")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--csv", default="runs.csv")
    a = ap.parse_args(argv)
    cases = {"single": single_cases, "multi": multi_cases}
    todo = []
    for s in (("single", "multi") if a.sweep == "all" else (a.sweep,)):
        todo += cases[s]()
    if a.limit:
        todo = todo[:a.limit]
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, a.csv)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for c in todo:
            r = flat(run_case(c, a.ws, a.gen, a.runs))
            w.writerow(r)
            f.flush()
            print(r["case_id"], r["impl"], r["blocks"], r["coll"], r["backend"], r["astra_ns"],
                  r["error"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
