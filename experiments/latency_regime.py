"""Validation in the latency regime (issue 34 point 5): small collectives through ASTRA-sim.

Draws seeded single-collective cases where latency and per-message overheads dominate
(all-reduce, reduce-scatter, all-gather, all-to-all of 4 KiB - 1 MiB per NPU, a whole
number of 4 KiB x chunks; 8-128 NPUs on
1-4 dimensions of 2-8 NPUs each, Ring / FullyConnected / Switch; 25-400 GB/s per dimension;
per-hop latency 100-1,000 ns (one value or one per dimension); endpoint delay 1-100 ns
(log-uniform); 1-4 chunks; ring on every dimension, ascending, FIFO, localBWAware, one
queue and one active chunk per dimension: ASTRA-sim's default runtime, the one
``model=pipelined`` replays), runs each through ASTRA-sim's congestion-unaware *and*
congestion-aware analytical backends, and compares libra_jax with the collective's span.

The ETs, configs and simulator calls are those of ``astrasim_heldout.py`` (`run_draw`), the
single-collective layer and output files those of ``astrasim_runtime.py`` (a 1 us compute,
then the collective: ``coll_span_ns`` = ASTRA-sim's time - 1000 ns), the case -> libra_jax
inputs of ``astrasim_workload.py`` (`case_inputs`); nothing is copied.

Two libra_jax numbers per run, both of the collective alone:

* ``pipelined_ns``: ``model=pipelined``'s collective time (`timing.collective_times_ns`, the
  JAX list schedule of `pipelined.py`, with the backend's link factor);
* ``step_ns``: the whole-step simulation (`timing.step_time_ns`, `step.simulate_step`) less
  the 1 us compute.

Sets: ``tuning`` (seed 341, 150 draws = 300 runs) and ``heldout`` (seed 342, 150 draws, drawn
the same way, never tuned on). Per set, ``experiments/results/latency_regime/<set>/`` holds
``cases.json``, ``results.csv`` (ASTRA-sim), ``run_info.json`` and ``model.csv`` (one row per
run: the case's parameters, ASTRA-sim's span and libra_jax's numbers; ``--column before``
stores them as ``*_before_ns`` columns, which later predictions keep);
``experiments/results/latency_regime.md`` is the summary of every set and column.

    python experiments/latency_regime.py simulate --set tuning      # ASTRA-sim, ~2 min
    python experiments/latency_regime.py simulate --set heldout
    python experiments/latency_regime.py predict --set tuning --set heldout [--column before]
    python experiments/latency_regime.py summary
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import pathlib
import random
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import astrasim_heldout as H  # noqa: E402
import astrasim_runtime as R  # noqa: E402

SETS = {"tuning": 341, "heldout": 342}
DRAWS = 150
OUT = HERE / "results" / "latency_regime"
SUMMARY = HERE / "results" / "latency_regime.md"
COLLS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
BARS = (0.01, 0.02, 0.05)
CASE_KEYS = ("network", "npus", "collective", "coll_bytes", "chunks", "latency_ns",
             "endpoint_delay_ns", "bandwidth_GBps", "local_mem_bw_GBps", "scheduling_policy")
MODELS = ("pipelined", "step")


def draw_case(seed: int, index: int) -> dict:
    """One small collective; ``draw_id`` lr<seed>_<index> (module docstring's space)."""
    rng = random.Random(seed * 1_000_003 + index + 34_000_005)
    while True:
        D = rng.choices((1, 2, 3, 4), weights=(0.1, 0.35, 0.35, 0.2))[0]
        npd = [rng.randint(2, 8) for _ in range(D)]
        n = math.prod(npd)
        if 8 <= n <= 128:
            break
    topo = [rng.choice(H.TOPOLOGIES) for _ in range(D)]
    bw = [int(round(H._log_uniform(rng, 25, 400))) for _ in range(D)]
    lat = ([rng.randint(100, 1000)] * D if rng.random() < 0.5
           else [rng.randint(100, 1000) for _ in range(D)])
    coll = rng.choice(COLLS)
    chunks = rng.randint(1, 4)
    # whole 4 KiB-multiple chunks: ASTRA-sim runs a size that ``chunks`` does not divide as
    # one stream more (`step.chunk_split`), which `pipelined.collective_time_ns` does not model
    nbytes = H._big(rng, 4 / 1024, 1, unit=4 * H.KIB * chunks)
    layer = {"fwd_us": 1, "bwd_in_us": 0, "bwd_w_us": 0,
             "tp_fwd": H._coll(coll, nbytes, "tp"), "tp_bwd": None, "dp": None}
    return {
        "draw_id": f"lr{seed}_{index:04d}",
        "group": "latency_regime",
        "kind": "single",
        "network": "x".join(f"{H.SHORT_TOPO[t]}{k}" for t, k in zip(topo, npd)),
        "topology": topo,
        "npus_per_dim": npd,
        "npus": n,
        "bandwidth_GBps": bw,
        "latency_ns": lat,
        "endpoint_delay_ns": int(round(H._log_uniform(rng, 1, 100))),
        "chunks": chunks,
        "impl_per_dim": ["ring"] * D,
        "impl_per_coll": {c: ["ring"] * D for c in COLLS},
        "algorithm_family": "ring",
        "collective_optimization": "localBWAware",
        "inter_dim_scheduling": "ascending",
        "intra_dim_scheduling": "FIFO",
        "scheduling_policy": rng.choice(("LIFO", "FIFO")),
        "active_chunks_per_dim": 1,
        "queues_per_dim": 1,
        "local_mem_bw_GBps": 1e6 if rng.random() < 0.85 else 1600.0,
        "max_inflight_comm": 1,
        "deps": "chain",
        "groups": {"tp": {"dims": list(range(D))}, "dp": {"dims": list(range(D))}},
        "layers": [layer],
        "collective": coll,
        "coll_bytes": nbytes,
        "note": f"kind=latency_regime; {coll} {nbytes} B",
    }


def simulate_set(name: str, ws: str, gen: str, timeout: float, runs_dir: str | None,
                 cases: int = DRAWS, verbose: bool = True) -> dict:
    """ASTRA-sim on every draw of the set (both backends) -> run_info."""
    out = OUT / name
    runs_dir = runs_dir or os.path.join(ws, f"runs_lr_{name}")
    os.makedirs(out, exist_ok=True)
    os.makedirs(runs_dir, exist_ok=True)
    all_cases, rows, t0 = [], [], time.time()
    for i in range(cases):
        for case, row in H.run_draw(draw_case(SETS[name], i), runs_dir, ws, gen, timeout,
                                    prepare_fn=R.prepare):
            row["coll_span_ns"] = ("" if row["astra_max_ns"] == ""
                                   else row["astra_max_ns"] - R.SINGLE_PRE_NS)
            all_cases.append(case)
            rows.append(row)
            if verbose:
                print(f"[{len(rows):4d}] {case['case_id']:20s} {case['network']:16s} "
                      f"{case['collective']:14s} {case['coll_bytes']:>8d} B k={case['chunks']} "
                      f"ep={case['endpoint_delay_ns']:3d} span={row['coll_span_ns']!s:>9s} "
                      f"rc={row['rc']} {row['error']}", flush=True)
    failed = [r for r in rows if r["error"]]
    info = {"command": " ".join(sys.argv), "set": name, "seed": SETS[name],
            "cases_drawn": cases, "runs": len(rows), "failed_runs": len(failed),
            "failed": [(r["case_id"], r["error"]) for r in failed],
            "total_wall_s": round(time.time() - t0, 1),
            "sim_wall_s_sum": round(sum(float(r["wall_s"]) for r in rows), 1),
            "astra_ws": ws, "generator": gen, "runs_dir": runs_dir}
    R.write_out(str(out), all_cases, rows, info)
    return info


# ----------------------------------------------------------------------------- libra_jax
def predict(case: dict) -> dict:
    """libra_jax's time of the case's collective (ns): ``pipelined`` and ``step``."""
    import astrasim_workload as aw

    from libra_jax.model import timing

    network, workload, tm, bw = aw.case_inputs(case)
    times, _ = timing.collective_times_ns(workload, network, tm, bw)
    step_ns = timing.step_time_ns(workload, network, tm, bw) - R.SINGLE_PRE_NS
    return {"pipelined": float(times[0, 0]), "step": float(step_ns)}


def _read_csv(path: pathlib.Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def predict_set(name: str, column: str = "") -> list[dict]:
    """Write ``model.csv`` of a set: its runs' parameters, ASTRA-sim's span and libra_jax's
    numbers into ``<model>{column}_ns`` (e.g. ``pipelined_before_ns``); other columns of an
    existing ``model.csv`` are kept."""
    import astrasim_workload as aw

    folder = OUT / name
    old = {r["case_id"]: r for r in _read_csv(folder / "model.csv")}
    rows = []
    for case, res in aw.load(folder):
        row = {"case_id": case["case_id"], "backend": case["backend"]}
        row.update({k: (" ".join(map(str, case[k])) if isinstance(case[k], list) else case[k])
                    for k in CASE_KEYS})
        row["astra_span_ns"] = res.get("coll_span_ns", "")
        row.update({k: v for k, v in old.get(case["case_id"], {}).items() if k not in row})
        if row["astra_span_ns"] not in ("", None):
            p = predict(case)
            for m in MODELS:
                row[f"{m}{column}_ns"] = f"{p[m]:.3f}"
        rows.append(row)
    fields = list(rows[0])
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(folder / "model.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    return rows


# ----------------------------------------------------------------------------- summary
def errors(rows, col: str, backend: str) -> list[float]:
    """Relative errors (model - ASTRA-sim) / ASTRA-sim of ``col`` over a backend's runs."""
    out = []
    for r in rows:
        if r["backend"] == backend and r.get(col) not in (None, "") and r["astra_span_ns"]:
            ref = float(r["astra_span_ns"])
            out.append((float(r[col]) - ref) / ref)
    return out


def stats_row(label: str, errs: list[float]) -> str:
    n = len(errs)
    if not n:
        return f"| {label} | 0 | | | | | | |"
    within = [sum(abs(e) <= b + 1e-12 for e in errs) for b in BARS]
    worst = max(errs, key=abs)
    low = sum(e < -1e-6 for e in errs)
    high = sum(e > 1e-6 for e in errs)
    return (f"| {label} | {n} | " + " | ".join(f"{w} ({w / n:.0%})" for w in within)
            + f" | {worst:+.2%} | {low} | {high} |")


HEADER = ["| set / backend / model | runs | within 1% | within 2% | within 5% | worst | low | "
          "high |", "|---|---|---|---|---|---|---|---|"]


def summary_table(sets=tuple(SETS)) -> list[str]:
    lines = list(HEADER)
    for name in sets:
        rows = _read_csv(OUT / name / "model.csv")
        for backend in H.BACKENDS:
            for m in MODELS:
                for col, tag in ((f"{m}_before_ns", "before"), (f"{m}_ns", "after")):
                    if any(r.get(col) for r in rows):
                        lines.append(stats_row(f"{name} / {backend} / {m} {tag}",
                                               errors(rows, col, backend)))
    return lines


def worst_table(name: str, col: str, count: int = 8) -> list[str]:
    rows = [r for r in _read_csv(OUT / name / "model.csv") if r.get(col)]
    errs = [((float(r[col]) - float(r["astra_span_ns"])) / float(r["astra_span_ns"]), r)
            for r in rows]
    pick = sorted(errs, key=lambda x: -abs(x[0]))[:count]
    lines = ["| run | network | collective | bytes | chunks | latency ns | endpoint ns | "
             "ASTRA-sim ns | libra_jax ns | error |", "|---|---|---|---|---|---|---|---|---|---|"]
    for e, r in pick:
        lines.append(f"| {r['case_id']} | {r['network']} | {r['collective']} | "
                     f"{r['coll_bytes']} | {r['chunks']} | {r['latency_ns']} | "
                     f"{r['endpoint_delay_ns']} | {float(r['astra_span_ns']):.0f} | "
                     f"{float(r[col]):.0f} | {e:+.2%} |")
    return lines


def write_summary() -> str:
    lines = ["# Latency regime: small collectives against ASTRA-sim (issue 34 point 5)", "",
             "Written by `experiments/latency_regime.py summary` (see its docstring and "
             "`docs/pipelined_model.md`, \"Latency regime\"). Relative error of libra_jax's "
             "collective time against ASTRA-sim's span of the collective, per set "
             f"(tuning seed {SETS['tuning']}, held-out seed {SETS['heldout']}, never tuned "
             "on), backend and model (`pipelined`: `model=pipelined`'s collective time; "
             "`step`: the whole-step simulation). *before*: the model as it was (steps "
             "endpoint delays per ring phase); *after*: steps + 1. low / high: runs below / "
             "above ASTRA-sim.", ""]
    lines += summary_table() + [""]
    for name in SETS:
        for col in ("pipelined_before_ns", "pipelined_ns"):
            if any(r.get(col) for r in _read_csv(OUT / name / "model.csv")):
                lines += [f"## Largest errors, {name}, `{col}`", ""] + worst_table(name, col)
                lines.append("")
    text = "\n".join(lines)
    SUMMARY.write_text(text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("simulate", "predict", "summary"))
    ap.add_argument("--set", action="append", choices=tuple(SETS), default=None)
    ap.add_argument("--cases", type=int, default=DRAWS)
    ap.add_argument("--column", default="", help="suffix of the model columns (e.g. before)")
    ap.add_argument("--astra-ws", default="/work/astra_ws")
    ap.add_argument("--gen", default=os.path.join(H.REF, "gen_workload_et.py"))
    ap.add_argument("--runs-dir", default=None, help="default: <astra-ws>/runs_lr_<set>")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    sets = a.set or list(SETS)
    if a.what == "simulate":
        ws = os.path.abspath(a.astra_ws)
        for b in H.BACKENDS:
            exe = f"{ws}/astra-sim/build/astra_analytical/build/bin/{H.EXE[b]}"
            if not os.access(exe, os.X_OK):
                sys.exit(f"no ASTRA-sim binary {exe} (build it as in {H.REF}/README.md)")
        for name in sets:
            info = simulate_set(name, ws, os.path.abspath(a.gen), a.timeout, a.runs_dir,
                                a.cases, not a.quiet)
            print(f"{name}: {info['runs']} runs, {info['failed_runs']} failed, "
                  f"{info['total_wall_s']} s")
    elif a.what == "predict":
        col = f"_{a.column}" if a.column else ""
        for name in sets:
            t0 = time.time()
            predict_set(name, col)
            print(f"{name}: predicted in {time.time() - t0:.1f} s")
        print("\n".join(summary_table(sets)))
    else:
        print(write_summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
