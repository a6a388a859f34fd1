"""Interior point (ipm) vs Optax vs cvxpy on every shipped `perf` case: time, accuracy, gap;
then ipm vs Optax on every shipped `perf_per_cost` case.

    python experiments/bench_solvers.py [--repeats 5]

Times are wall-clock after compilation (median of ``--repeats`` runs). ipm: the whole
`solve.solve(p, "perf")` (includes its host-side certificate). Optax: `solve_first_order`
(jitted: the first-order scan, then the exact step on its active set, `active_set.py`, with
its in-kernel bound; "Optax kernel gap" is that bound's gap, "FO-only gap" the host LP's gap
at the first-order point alone, ``exact_step=False``, i.e. the method before the step). cvxpy: problem
construction + Clarabel, in scaled units (traffic GB, times s), its bandwidths re-evaluated
with our model. "rel err" is (step - pinned optimum) / pinned optimum
(tests/fixtures/libra_optima.json); "gap" is the certified (step - LB) / LB with LB from
`certificate.tangent_lp_bound` at that solver's bandwidths. perf_per_cost: the whole
`solve.solve(p, "perf_per_cost", method=...)` (ipm: the cost-level search; Optax: the price
continuation), median of ``--repeats`` warm runs, rel err of time x cost against the pinned
optimum and the search's own certified gap. Writes the Markdown tables to
experiments/results/bench_solvers.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import cvxpy as cp
import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.inputs.cost import cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_workload
from libra_jax.model import objective as model
from libra_jax.model.problem import ConstraintSpec, build_problem
from libra_jax.solvers.certificate import tangent_lp_bound
from libra_jax.solvers.first_order import (
    FirstOrderConfig,
    default_params,
    solve_first_order,
)
from libra_jax.solvers.solve import solve
from libra_jax.types import STATUS_NAMES, Status

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "libra_jax" / "data" / "libra_inputs"
OPTIMA = ROOT / "tests" / "fixtures" / "libra_optima.json"
OUT = ROOT / "experiments" / "results" / "bench_solvers.md"
SPECS = {
    "total_bw_500gbps": ConstraintSpec(total_bw_gbps=500),
    "multiple_constraints": ConstraintSpec(
        total_bw_gbps=1000,
        linear=["bw[0] == 500", "bw[0] >= bw[1]", "bw[1] >= bw[2]", "bw[2] + bw[3] == 200"],
    ),
}


def _cases(objective="perf"):
    for c in json.loads(OPTIMA.read_text())["cases"]:
        if c["objective"] != objective:
            continue
        net = load_network_file(INPUTS / "network" / f"{c['network']}_network.yml")
        cm = load_cost_model(INPUTS / "cost_model" / f"{c['network']}_cost_model.yml")
        w = load_workload(INPUTS / "workload" / f"{c['workload']}.txt",
                          INPUTS / "communicator" / c["communicator_file"])
        p = build_problem(net, w, cost_rates_usd_per_gbps(net, cm), SPECS[c["constraints"]])
        opt = c["step_time_ns"] * 1e-9 if objective == "perf" else c["time_x_cost"]
        yield f"{c['workload']} {c['network']} {c['constraints']}", p, opt


def _cvxpy_bw(p) -> np.ndarray:
    t = np.asarray(p.traffic_gb)
    w = np.asarray(p.weight)
    k, d = t.shape
    bw = cp.Variable(d)
    tk = cp.Variable(k)
    inv = cp.inv_pos(bw)
    cons = [tk[i] >= t[i, j] * inv[j] for i in range(k) for j in range(d) if t[i, j] > 0]
    cons += [bw >= np.asarray(p.lo)]
    hi = np.asarray(p.hi)
    if np.any(np.isfinite(hi)):
        fin = np.isfinite(hi)
        cons += [bw[fin] <= hi[fin]]
    if p.a_eq.shape[0]:
        cons += [np.asarray(p.a_eq) @ bw == np.asarray(p.b_eq)]
    if p.a_in.shape[0]:
        cons += [np.asarray(p.a_in) @ bw <= np.asarray(p.b_in)]
    prob = cp.Problem(cp.Minimize(float(p.compute_s) + w @ tk), cons)
    prob.solve(solver=cp.CLARABEL)
    return np.asarray(bw.value, np.float64)


def _timed(fn, repeats):
    out = fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, statistics.median(times)


def _row(p, opt, bw, seconds):
    bw = np.asarray(bw, np.float64)
    step = float(model.step_time_s(jnp.asarray(bw), p))
    lb, _ = tangent_lp_bound(p, bw)
    viol = float(model.max_violation(jnp.asarray(bw), p))
    return dict(ms=seconds * 1e3, rel=(step - opt) / opt, gap=(step - lb) / lb, viol=viol)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    jax.config.update("jax_enable_x64", True)  # as the command-line entry points do
    params = default_params()
    lines = [
        "| case | ipm ms | ipm rel err | ipm gap | Optax ms | Optax rel err "
        "| Optax gap | Optax kernel gap | Optax status | FO-only gap "
        "| cvxpy ms | cvxpy rel err | cvxpy gap |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    worst = dict(ipm=0.0, optax=0.0, kernel=0.0, fo=0.0, cvxpy=0.0)
    n_ok = 0
    fo_only = FirstOrderConfig(exact_step=False)
    for name, p, opt in _cases():
        res, t_b = _timed(lambda: solve(p, "perf"), args.repeats)
        b = _row(p, opt, res.bandwidth_gbps, t_b)
        fo, t_o = _timed(
            lambda: jax.block_until_ready(solve_first_order(p, params)), args.repeats)
        o = _row(p, opt, fo.bw, t_o)
        step, lb = float(fo.step_s), float(fo.lower_bound_s)
        k_gap = max(step - lb, 0.0) / lb if lb > 0 else float("inf")
        status = STATUS_NAMES[Status(int(fo.status))]
        n_ok += status == "ok"
        raw = solve_first_order(p, params, fo_only)
        f = _row(p, opt, raw.bw, float("nan"))
        bw_c, t_c = _timed(lambda: _cvxpy_bw(p), max(1, args.repeats // 2))
        c = _row(p, opt, bw_c, t_c)
        for key, g in (("ipm", b["gap"]), ("optax", o["gap"]), ("kernel", k_gap),
                       ("fo", f["gap"]), ("cvxpy", c["gap"])):
            worst[key] = max(worst[key], g)
        line = (f"| {name} | {b['ms']:.1f} | {b['rel']:.1e} | {b['gap']:.1e} "
                f"| {o['ms']:.1f} | {o['rel']:.1e} | {o['gap']:.1e} | {k_gap:.1e} | {status} "
                f"| {f['gap']:.1e} | {c['ms']:.1f} | {c['rel']:.1e} | {c['gap']:.1e} |")
        print(line, flush=True)
        lines.append(line)
    summary = (f"\nWorst certified gap: ipm {worst['ipm']:.1e}, "
               f"Optax {worst['optax']:.1e} (in-kernel bound {worst['kernel']:.1e}; "
               f"{n_ok} of 15 ok), first-order phase alone {worst['fo']:.1e}, "
               f"cvxpy {worst['cvxpy']:.1e}. "
               f"Device: {jax.devices()[0].platform}; Optax: adam, "
               f"lr {float(params.learning_rate):g}, 4000 steps, then the exact step.\n")
    print(summary)
    ppc = _perf_per_cost_table(args.repeats)
    text = "\n".join(lines) + "\n" + summary + "\n" + ppc
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)


def _perf_per_cost_table(repeats):
    lines = [
        "## perf_per_cost",
        "",
        "| case | ipm ms | ipm rel err | ipm gap | ipm status "
        "| Optax ms | Optax rel err | Optax gap | Optax status |",
        "|---|---:|---:|---:|---|---:|---:|---:|---|",
    ]
    totals = dict(ipm=0.0, optax=0.0)
    n_ok = 0
    for name, p, opt in _cases("perf_per_cost"):
        cells = []
        for method in ("ipm", "optax"):
            res, t = _timed(lambda m=method: solve(p, "perf_per_cost", method=m), repeats)
            totals[method] += t
            n_ok += method == "optax" and res.status == "ok"
            cells.append(f"{t * 1e3:.0f} | {(res.time_x_cost - opt) / opt:.1e} "
                         f"| {res.optimality_gap:.1e} | {res.status}")
        line = f"| {name} | " + " | ".join(cells) + " |"
        print(line, flush=True)
        lines.append(line)
    summary = (f"\nOptax {n_ok} of 15 ok. Total warm time for the 15 cases: ipm "
               f"{totals['ipm']:.1f} s, Optax {totals['optax']:.1f} s.\n")
    print(summary)
    return "\n".join(lines) + "\n" + summary


if __name__ == "__main__":
    main()
