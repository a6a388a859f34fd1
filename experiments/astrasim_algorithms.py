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


def multi_cases(seed=2, count=80, prefix="m", valid_only=False):
    """2-3 dimensions; ``valid_only``: no tree but for a baseline all-reduce, no
    halving-doubling all-to-all (what ASTRA-sim refuses or the model does not take), one
    chunk (one chunk's phases in turn; several chunks pipeline, `step.py`'s part)."""
    rng = random.Random(seed)
    cases = []
    algos = ("ring", "direct", "halvingDoubling", "doubleBinaryTree")
    for i in range(count):
        d = rng.choice([2, 2, 3])
        blocks = [rng.choice(("RI", "FC", "SW")) for _ in range(d)]
        coll = rng.choice(COLLS)
        opt = rng.choice(("baseline", "localBWAware"))
        ok = list(algos)
        if valid_only:
            if not (coll == "all_reduce" and opt == "baseline"):
                ok.remove("doubleBinaryTree")
            if coll == "all_to_all":
                ok.remove("halvingDoubling")
        impl = [rng.choice(ok) for _ in range(d)]
        npd = [rng.choice([2, 4, 8]) if "h" in a else rng.choice([2, 3, 4, 6])
               for a in impl]
        backend = rng.choice(("unaware", "aware"))
        if valid_only and backend == "aware":  # the aware backend aborts on a Ring of 2
            npd = [max(x, 3) if (b == "RI" and "h" not in a) else (max(x, 4) if b == "RI"
                   else x) for x, b, a in zip(npd, blocks, impl)]
        cases.append(dict(
            case_id=f"{prefix}{i:04d}", backend=backend, blocks=blocks,
            npus_per_dim=npd, bandwidth_GBps=[rng.choice([25, 50, 100, 200]) for _ in range(d)],
            latency_ns=[rng.choice([0, 100, 500]) for _ in range(d)], impl=impl,
            coll=coll, bytes=rng.choice([1 << 20, 3 << 20, 1 << 22]),
            chunks=1 if valid_only else rng.choice([1, 2]),
            endpoint_delay_ns=rng.choice([1, 10]),
            local_mem_bw_GBps=rng.choice([1e6, 1600]), collective_optimization=opt))
    return cases


def endpoint_cases():
    """A large endpoint delay (1000 ns), no latency: the phase passes steps + 1 memory-bus
    bundles (one endpoint delay more per phase and chunk than `pipelined_work.chunk_work`);
    every algorithm on FullyConnected 4 and Ring 6 (aware: Ring 6 multi-hop queueing)."""
    cases, i = [], 0
    for algo, blk, coll, k, backend in itertools.product(
            ("ring", "direct", "halvingDoubling"), ("FC", "RI"), COLLS, (1, 3),
            ("unaware", "aware")):
        if algo == "halvingDoubling" and coll == "all_to_all":
            continue
        n = 4 if (blk == "FC" or algo == "halvingDoubling") else 6
        cases.append(dict(case_id=f"e{i:03d}", backend=backend, blocks=[blk],
                          npus_per_dim=[n], bandwidth_GBps=[100], latency_ns=[0 if k == 1
                                                                           else 300],
                          impl=[algo], coll=coll, bytes=3 << 20, chunks=k,
                          endpoint_delay_ns=1000, local_mem_bw_GBps=1e6,
                          collective_optimization="baseline"))
        i += 1
    return cases


def tree_chunk_cases(seed=5):
    """One dimension, a double-binary-tree all-reduce of 1-16 chunks (the chunks pipeline
    through the two trees, `algorithms.tree_chunks_time_ns`): n = 2..16, every block, both
    backends (not the aware one-dimension Ring of 2, which aborts), latency, size, endpoint
    delay and local-mem-bw drawn."""
    rng = random.Random(seed)
    cases, i = [], 0
    for n, blk, backend, k in itertools.product((2, 4, 8, 16), ("RI", "FC", "SW"),
                                                ("unaware", "aware"), (1, 2, 3, 4, 8, 16)):
        if backend == "aware" and blk == "RI" and n == 2:
            continue
        cases.append(dict(
            case_id=f"t{i:04d}", backend=backend, blocks=[blk], npus_per_dim=[n],
            bandwidth_GBps=[rng.choice([25, 50, 100, 200])],
            latency_ns=[rng.choice([0, 100, 500, 1000])], impl=["doubleBinaryTree"],
            coll="all_reduce", bytes=rng.choice([1 << 20, 3 << 20, 1 << 22, 5 << 18]),
            chunks=k, endpoint_delay_ns=rng.choice([1, 10, 100]),
            local_mem_bw_GBps=rng.choice([1e6, 50, 1600]),
            collective_optimization="baseline"))
        i += 1
    return cases


# ------------------------------------------------------------------------- the model
ALGO = {"ring": ("ring", -1), "oneRing": ("ring", -1), "direct": ("direct", -1),
        "oneDirect": ("direct", -1), "halvingDoubling": ("halving_doubling", -1),
        "oneHalvingDoubling": ("halving_doubling", -1),
        "doubleBinaryTree": ("double_binary_tree", -1)}


def algo_of(name):
    """ASTRA-sim's implementation name -> (algorithms.ALGORITHMS name, direct window)."""
    if name in ALGO:
        return ALGO[name]
    if name.startswith("oneDirect"):
        return "direct", int(name[9:])
    if name.startswith("direct"):
        return "direct", int(name[6:])
    raise ValueError(name)


def model_ns(row, ticks=True):
    """The model's time of a stored run (`algorithms.multi_dim_time_ns` x chunks; a tree
    runs an all-reduce whatever the collective); None where the model refuses the case or
    several chunks would pipeline over several dimensions."""
    from libra_jax.model import algorithms as A
    from libra_jax.types import Block, Collective, LibraInputError
    blk = {"RI": Block.RING, "FC": Block.FULLYCONNECTED, "SW": Block.SWITCH}
    col = {"reduce_scatter": Collective.REDUCESCATTER, "all_gather": Collective.ALLGATHER,
           "all_reduce": Collective.ALLREDUCE, "all_to_all": Collective.ALLTOALL}
    sp = lambda k, f: [f(x) for x in str(row[k]).split("|")]  # noqa: E731
    impl = sp("impl", algo_of)
    npd, k = sp("npus_per_dim", int), int(row["chunks"])
    if k > 1 and len(npd) == 1 and impl[0][0] == "double_binary_tree":
        # the chunks pipeline through the two trees: every NPU's replay; ASTRA-sim's
        # split (streams of floor(size / chunks) bytes, one more for a remainder)
        chunk = int(row["bytes"]) // k
        return A.tree_chunks_time_ns(
            npd[0], blk[row["blocks"]], chunk, -(-int(row["bytes"]) // chunk),
            float(row["bandwidth_GBps"]), float(row["latency_ns"]),
            float(row["endpoint_delay_ns"]), float(row["local_mem_bw_GBps"]), True,
            row["backend"], ticks)
    if k > 1 and (len(npd) > 1 or impl[0][0] == "double_binary_tree"):
        return None
    windows = {w for _, w in impl}
    coll = col[row["coll"]]
    if [a for a, _ in impl] == ["double_binary_tree"]:
        coll = Collective.ALLREDUCE
    try:
        return k * A.multi_dim_time_ns(
            [a for a, _ in impl], coll, npd, sp("blocks", lambda b: blk[b]),
            int(row["bytes"]) / k, sp("bandwidth_GBps", float), sp("latency_ns", float),
            float(row["endpoint_delay_ns"]), float(row["local_mem_bw_GBps"]), True,
            row["backend"], row["collective_optimization"], max(windows), ticks)
    except LibraInputError:
        return None


def check(paths, ticks=True):
    """-> {(impl, backend): (runs, worst relative error)} over the stored runs."""
    out = {}
    for path in paths:
        with open(path) as f:
            for row in csv.DictReader(f):
                if not row["astra_ns"]:
                    continue
                m = model_ns(row, ticks)
                if m is None:
                    continue
                impl = row["impl"].split("|")
                key = (impl[0] if len(impl) == 1 else f"{len(impl)}-dim mixes",
                       row["backend"])
                err = abs(m - float(row["astra_ns"])) / float(row["astra_ns"])
                runs, worst = out.get(key, (0, 0.0))
                out[key] = (runs + 1, max(worst, err))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="experiments/results/astrasim_algorithms")
    ap.add_argument("--ws", default="/work/astra_ws")
    ap.add_argument("--gen", default="/work/shared/reference/astrasim_workload/gen_workload_et.py")
    ap.add_argument("--runs", default="/work/astra_ws/runs_algos")
    ap.add_argument("--sweep", default="single")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--csv", default="runs.csv")
    ap.add_argument("--check", action="store_true",
                    help="compare the stored runs in --out with the model, run nothing")
    a = ap.parse_args(argv)
    if a.check:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        paths = [os.path.join(a.out, f) for f in sorted(os.listdir(a.out))
                 if f.endswith(".csv")]
        for ticks in (True, False):
            for key, (runs, worst) in sorted(check(paths, ticks).items()):
                print(f"ticks={ticks!s:5} {key[0]:>40} {key[1]:>7} runs {runs:3d} "
                      f"worst {worst:.2e}")
        return 0
    cases = {"single": single_cases, "multi": multi_cases, "endpoint": endpoint_cases,
             "multi_valid": lambda: multi_cases(3, 60, "v", True),
             "tree_chunks": tree_chunk_cases}
    todo = []
    for s in (("single", "multi", "multi_valid", "endpoint") if a.sweep == "all"
              else (a.sweep,)):
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
