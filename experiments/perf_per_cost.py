"""Experiment 2: perf-per-cost optimum vs the equal split (and vs the perf optimum).

    python experiments/perf_per_cost.py [key=value ...]

(config: experiments/conf/perf_per_cost.yaml)

Same grid as experiment 1 (workload x network x total budget, sum of per-NPU bandwidths ==
budget). For each case: the certified global minimum of step time x network cost
(`solve.solve(p, "perf_per_cost")`, one case at a time), the perf optimum (`batch.solve_batch`)
and the equal split. Reports the gain in time x cost over the equal split and what it costs in
step time (ratio > 1: the cheaper design is slower). Writes <output_dir>/<name>.md,
<name>_ratios.png (gain, step-time and cost ratios vs budget) and <name>_bandwidth_{3d,4d}.png.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
from omegaconf import DictConfig

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speedup as common  # noqa: E402  (shared helpers)

from libra_jax.model.problem import ConstraintSpec  # noqa: E402
from libra_jax.solvers.batch import solve_batch  # noqa: E402
from libra_jax.solvers.solve import equal_split, solve  # noqa: E402


def run(cfg: DictConfig) -> list[dict]:
    cases = common.load_cases(cfg)
    budgets = [float(b) for b in cfg.budgets_gbps]
    items = [(c, b) for c in cases for b in budgets]
    problems = [c.problem(ConstraintSpec(total_bw_gbps=b)) for c, b in items]
    perf = solve_batch(problems)
    rows = []
    for i, ((case, b), p) in enumerate(zip(items, problems)):
        r = solve(p, cfg.objective)
        base = equal_split(p)
        perf_step = float(perf.step_time_ns[i])
        perf_cost = float(case.rates @ perf.bandwidth_gbps[i])
        rows.append(dict(
            case=case, budget=b, bw=np.asarray(r.bandwidth_gbps),
            step_ms=r.step_time_ns / 1e6, cost=r.network_cost_usd, txc=r.time_x_cost,
            equal_ms=base.step_time_ns / 1e6, equal_cost=base.network_cost_usd,
            equal_txc=base.time_x_cost,
            perf_ms=perf_step / 1e6, perf_cost=perf_cost, perf_txc=perf_step * perf_cost,
            gain=base.time_x_cost / r.time_x_cost,
            step_ratio=r.step_time_ns / base.step_time_ns,  # > 1: slower than equal split
            cost_ratio=r.network_cost_usd / base.network_cost_usd,
            step_vs_perf=r.step_time_ns / perf_step,
            perf_gain=base.time_x_cost / (perf_step * perf_cost),
            gap=float(r.optimality_gap), status=r.status, seconds=r.solve_seconds,
        ))
    return rows


def _slower(ratio: float) -> str:
    pct = 100 * (ratio - 1)
    word = "slower" if ratio > 1 + 1e-12 else "faster" if ratio < 1 - 1e-12 else "same"
    return f"{pct:+.1f}% ({word})"


def plot_ratios(cfg, cases, budgets, by, path: Path) -> None:
    specs = [("gain", "time x cost gain over equal split (x)", True),
             ("step_ratio", "step time / equal-split step time\n(> 1: slower)", False),
             ("step_vs_perf", "step time / perf-optimum step time", False),
             ("cost_ratio", "network cost / equal-split cost", False)]
    nets = list(cfg.networks)
    fig, axes = plt.subplots(len(specs), len(nets), figsize=(6.0 * len(nets), 3.4 * len(specs)),
                             squeeze=False)
    for j, net in enumerate(nets):
        for i, (key, ylabel, logy) in enumerate(specs):
            ax = axes[i, j]
            for k, c in enumerate([c for c in cases if c.net == net]):
                ax.plot(budgets, [by[id(c), b][key] for b in budgets], marker="o", ms=4,
                        color=f"C{k}", label=c.label)
            ax.axhline(1.0, color="k", lw=0.8, ls=":")
            ax.set_xscale("log")
            ax.set_xticks(budgets, [f"{b:g}" for b in budgets], rotation=45)
            ax.minorticks_off()
            ax.set_xlabel("total budget (GB/s per NPU, log scale)")
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
            if i == 0:
                ax.set_title(common.network_title(cases, net), fontsize=10)
    fig.suptitle("Perf-per-cost optimum (min step time x network cost) vs equal split",
                 fontsize=11)
    fig.tight_layout()
    common.save(fig, path)


def write_outputs(cfg: DictConfig, rows: list[dict], seconds: float) -> Path:
    out = common.output_dir(cfg)
    cases = list(dict.fromkeys(r["case"] for r in rows))
    budgets = sorted({r["budget"] for r in rows})
    by = {(id(r["case"]), r["budget"]): r for r in rows}
    pngs = [f"{cfg.name}_ratios.png"]
    plot_ratios(cfg, cases, budgets, by, out / pngs[0])
    for net in cfg.networks:
        groups = [(c, budgets, [by[id(c), b]["bw"] for b in budgets]) for c in cases
                  if c.net == net]
        name = f"{cfg.name}_bandwidth_{net}.png"
        common.plot_bandwidth_bars(groups, out / name, "Perf-per-cost optimal bandwidth per "
                                   f"dimension, {common.network_title(cases, net)} "
                                   "(dotted: equal split)")
        pngs.append(name)

    lines = ["# Experiment 2: perf-per-cost optimum vs equal split", "",
             f"Generated by `python experiments/perf_per_cost.py` "
             f"(experiments/conf/{cfg.name}.yaml) in {seconds:.0f} s. Constraint: sum of per-NPU "
             "bandwidths == budget. Objective: minimise step time x network cost (certified "
             "global optimum). gain = equal-split (time x cost) / optimum (time x cost); "
             "step-time change and cost change are the perf-per-cost design relative to the "
             "equal split (positive step-time change: the cheaper design is slower). Step times "
             "in ms, costs in $M.", "",
             "Plots: " + ", ".join(f"`{p}`" for p in pngs), "",
             "## Summary per workload and network (over the budgets)", ""]
    summ = []
    for c in cases:
        rs = [by[id(c), b] for b in budgets]
        lo, hi = min(rs, key=lambda r: r["gain"]), max(rs, key=lambda r: r["gain"])
        at = by.get((id(c), 500.0))
        summ.append([
            c.label, c.notation,
            f"{lo['gain']:.2f} - {hi['gain']:.2f}",
            f"{min(r['step_ratio'] for r in rs):.3f} - {max(r['step_ratio'] for r in rs):.3f}",
            f"{min(r['cost_ratio'] for r in rs):.3f} - {max(r['cost_ratio'] for r in rs):.3f}",
            f"{at['gain']:.2f}x, step {_slower(at['step_ratio'])}" if at else "-",
            f"{min(r['perf_gain'] for r in rs):.2f} - {max(r['perf_gain'] for r in rs):.2f}",
            f"{min(r['perf_txc'] / r['txc'] for r in rs):.3f} - "
            f"{max(r['perf_txc'] / r['txc'] for r in rs):.3f}",
            f"{min(r['step_vs_perf'] for r in rs):.3f} - {max(r['step_vs_perf'] for r in rs):.3f}",
        ])
    lines += common.md_table(
        ["workload", "network", "time x cost gain (x)", "step time / equal split",
         "cost / equal split", "at 500 GB/s", "perf optimum's time x cost gain (x)",
         "perf-per-cost gain over perf optimum (x)", "step time / perf optimum"], summ)
    lines += ["", "## All solves", ""]
    full = []
    for c in cases:
        for b in budgets:
            r = by[id(c), b]
            full.append([
                c.label, c.notation, f"{b:g}", common.fmt_bw(r["bw"]),
                f"{r['equal_ms']:.3f}", f"{r['step_ms']:.3f}", f"{r['perf_ms']:.3f}",
                f"{r['equal_cost'] / 1e6:.3f}", f"{r['cost'] / 1e6:.3f}",
                f"{r['perf_cost'] / 1e6:.3f}",
                f"{r['gain']:.3f}", _slower(r["step_ratio"]),
                f"{100 * (r['cost_ratio'] - 1):+.1f}%", f"{100 * (r['step_vs_perf'] - 1):+.1f}%",
                common.fmt_gap(r["gap"]), r["status"]])
    lines += common.md_table(
        ["workload", "network", "budget (GB/s)", "perf-per-cost bw per dim (GB/s)",
         "equal split (ms)", "perf-per-cost (ms)", "perf optimum (ms)", "equal split ($M)",
         "perf-per-cost ($M)", "perf optimum ($M)", "time x cost gain", "step time vs equal",
         "cost vs equal", "step time vs perf opt.", "gap", "status"], full)
    md = out / f"{cfg.name}.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def main(overrides: list[str] | None = None) -> list[dict]:
    start = time.perf_counter()
    cfg = common.load_experiment("perf_per_cost", overrides)
    if cfg.objective != "perf_per_cost":
        raise ValueError(f"objective={cfg.objective}: this experiment is perf_per_cost "
                         "(see speedup.py for perf)")
    rows = run(cfg)
    md = write_outputs(cfg, rows, time.perf_counter() - start)
    print(f"wrote {md} ({len(rows)} solves, {time.perf_counter() - start:.1f} s)")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
