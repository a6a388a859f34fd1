"""Themis's first issuer of every collective in ASTRA-sim's runs, traced, against libra_jax's
(issue 33; docs/runtime.md, "Themis's first issuer").

Under Themis (``offlineGreedy``, ``-Flex``) the first NPU to call ``Sys::generate_collective``
for a collective schedules all its chunks with the loads as they stand, and NPU 0 restarts the
loads when it calls at a new tick. Which NPU is first within a tick is the order of ASTRA-sim's
event queue. ``simulate_step`` follows it (``StepTiming.issuers``); this script checks that
against the simulator's own order, read from runs of the patched binary with the tracing patch
(``astrasim/trace_prints.patch``, ``ASTRA_THEMIS_TRACE=1``: one line per NPU and chunk, in the
order the NPUs schedule it).

* ``trace``: runs ASTRA-sim on the Themis runs of the step sets (their run directories, as
  ``astrasim_runtime.py`` wrote them) and on the small cases of `PROBES` (1-D networks, three
  collectives in a row: how a phase of each algorithm moves the first NPU), and writes the
  first issuer of each collective (the first NPU to schedule its first chunk) to ``--out``.
* ``compare``: libra_jax's first issuers against those, per backend and algorithm family:
  the share of collectives where both say whether NPU 0 is first (what decides the loads).

    python experiments/themis_issuers.py trace --sets experiments/results/astrasim_runtime/step \\
        experiments/results/astrasim_runtime/step_s17 --runs-dir /work/astra_ws/runs_rt \\
        --out experiments/results/astrasim_runtime/themis_issuers.json
    python experiments/themis_issuers.py compare experiments/results/astrasim_runtime/themis_issuers.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import astrasim_heldout as H  # noqa: E402
import astrasim_runtime as R  # noqa: E402

LINE = re.compile(r"THEMIS npu=(\d+) tick=(\d+) chunk=(\d+) type=(\d+)")
#: 1-D probes: (topology, NPUs, algorithm, the three collectives one after the other)
PROBES = [(topo, n, alg, colls)
          for topo, n, alg in (("Ring", 5, "ring"), ("Ring", 4, "ring"),
                               ("FullyConnected", 5, "direct"), ("FullyConnected", 4, "direct"),
                               ("Switch", 4, "halvingDoubling"), ("Switch", 8, "halvingDoubling"))
          for colls in (("reduce_scatter", "all_gather", "reduce_scatter"),
                        ("all_gather", "all_gather", "all_gather"),
                        ("reduce_scatter", "all_to_all", "reduce_scatter"),
                        ("all_reduce", "all_reduce", "all_reduce"))]


def first_issuers(stderr: str) -> list[list[int]]:
    """[[tick, NPU, first chunk id, ComType]] per collective: the first NPU to schedule its
    first chunk (chunk ids are the NPUs' stream counters, alike on every NPU)."""
    first = {}
    for line in stderr.splitlines():
        m = LINE.match(line)
        if m:
            npu, tick, chunk, typ = map(int, m.groups())
            first.setdefault(chunk, (tick, npu, chunk, typ))
    out = []
    for ch in sorted(first):  # a collective's chunks: scheduled by one NPU in one call
        t, n, _, ty = first[ch]
        if not (out and out[-1][0] == t and out[-1][1] == n and out[-1][3] == ty):
            out.append([t, n, ch, ty])
    return sorted(out)


def _traced(case: dict, run_dir: str, ws: str) -> list[list[int]]:
    env = dict(os.environ, ASTRA_THEMIS_TRACE="1",
               ASTRASIM_MAX_INFLIGHT_COMM=str(case["max_inflight_comm"]))
    p = subprocess.run(H.sim_command(ws, case, run_dir), capture_output=True, text=True,
                       env=env, cwd=run_dir, timeout=600)
    return first_issuers(p.stderr)


def probe_case(base: dict, topo: str, n: int, alg: str, colls, backend: str) -> dict:
    """A one-layer step on a 1-D network: three collectives of 1 MiB over it in a row."""
    lists = {k: [alg] for k in ("all_reduce", "reduce_scatter", "all_gather")}
    lists["all_to_all"] = ["ring" if alg == "halvingDoubling" else alg]
    code = {"reduce_scatter": "rs", "all_gather": "ag", "all_to_all": "a2a", "all_reduce": "ar"}
    name = f"probe_{topo[0]}{n}_{alg}_{'_'.join(code[c] for c in colls)}"
    layer = {"fwd_us": 1, "bwd_in_us": 1, "bwd_w_us": 1,
             "tp_fwd": {"coll": colls[0], "bytes": 1 << 20, "group": "tp"},
             "tp_bwd": {"coll": colls[1], "bytes": 1 << 20, "group": "tp"},
             "dp": {"coll": colls[2], "bytes": 1 << 20, "group": "dp"}}
    case = {k: v for k, v in base.items()}
    case.update(case_id=f"{name}_{backend}", draw_id=name, backend=backend, topology=[topo],
                npus_per_dim=[n], npus=n, network=f"{topo[0]}{n}", bandwidth_GBps=[100],
                latency_ns=[500], chunks=1, impl_per_dim=[alg], impl_per_coll=lists,
                algorithm_family=alg, collective_optimization="localBWAware",
                inter_dim_scheduling="offlineGreedy", intra_dim_scheduling="FIFO",
                active_chunks_per_dim=1, queues_per_dim=1, max_inflight_comm=1, deps="chain",
                groups={"tp": {"dims": [0]}, "dp": {"dims": [0]}}, layers=[layer],
                note="themis_issuers probe")
    return case


def trace(sets, runs_dir: str, ws: str, out: str, gen: str) -> dict:
    result = {"cases": {}, "issuers": {}}
    for folder in sets:
        for case in json.load(open(pathlib.Path(folder) / "cases.json")):
            if not case["inter_dim_scheduling"].startswith("offlineGreedy"):
                continue
            run_dir = os.path.join(runs_dir, case["case_id"])
            if not os.path.exists(os.path.join(run_dir, "et")):
                continue  # (a run ASTRA-sim could not start)
            result["issuers"][case["case_id"]] = _traced(case, run_dir, ws)
    base = json.load(open(pathlib.Path(sets[0]) / "cases.json"))[0]
    for probe in PROBES:
        for backend in H.BACKENDS:
            case = probe_case(base, *probe, backend)
            run_dir = os.path.join(runs_dir, case["case_id"])
            err = R.prepare(case, run_dir, ws, gen)
            if err:
                raise SystemExit(f"{case['case_id']}: {err}")
            result["cases"][case["case_id"]] = case
            result["issuers"][case["case_id"]] = _traced(case, run_dir, ws)
    with open(out, "w") as f:
        json.dump(result, f, separators=(",", ":"))
    return result


def model_issuers(case: dict) -> list[tuple[float, int]]:
    """libra_jax's [(ns, NPU)] first issuers of the case, in time order."""
    import astrasim_workload as aw

    from libra_jax.model import step
    network, workload, tm, bw = aw.case_inputs(case)
    got = step.simulate_step(step.step_graph(workload, tm.training_loop),
                             network.block_codes, network.npus, bw, tm)
    return sorted((t, n) for t, _, n in got.issuers)


def compare(path: str, sets=None) -> list[str]:
    data = json.load(open(path))
    cases = dict(data["cases"])
    for folder in sets or ():
        cases.update({c["case_id"]: c for c in json.load(open(pathlib.Path(folder) /
                                                                "cases.json"))})
    agg = collections.defaultdict(lambda: [0, 0])
    for cid, traced in data["issuers"].items():
        if cid not in cases:
            continue
        case = cases[cid]
        model = model_issuers(case)
        key = (case["backend"], case["algorithm_family"])
        agg[key][0] += sum((a[1] == 0) == (b[1] == 0) for a, b in zip(traced, model))
        agg[key][1] += len(traced)
    lines = ["| backend | algorithm | collectives | NPU 0 first or not, as ASTRA-sim |",
             "|---|---|---|---|"]
    for (backend, alg), (ok, n) in sorted(agg.items()):
        lines.append(f"| {backend} | {alg} | {n} | {100.0 * ok / max(n, 1):.1f}% |")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trace")
    t.add_argument("--sets", nargs="+", required=True)
    t.add_argument("--runs-dir", required=True)
    t.add_argument("--astra-ws", default="/work/astra_ws")
    t.add_argument("--gen", default=os.path.join(H.REF, "gen_workload_et.py"))
    t.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("path")
    c.add_argument("--sets", nargs="*", default=["experiments/results/astrasim_runtime/step",
                                                 "experiments/results/astrasim_runtime/step_s17"])
    a = ap.parse_args(argv)
    if a.cmd == "trace":
        got = trace(a.sets, a.runs_dir, os.path.abspath(a.astra_ws), a.out, a.gen)
        print(f"{len(got['issuers'])} runs traced -> {a.out}")
    else:
        print("\n".join(compare(a.path, a.sets)))


if __name__ == "__main__":
    raise SystemExit(main())
