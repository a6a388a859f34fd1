"""Experiment 5: the same 4,096 NPUs as a 3D and as a 4D network at equal network cost.

    python experiments/dims_3d_vs_4d.py [key=value ...]      # config: experiments/conf/dims_3d_vs_4d.yaml

Networks: LIBRA's 3D RI(16)_FC(8)_SW(32) and 4D RI(4)_FC(8)_RI(4)_SW(32), each priced with its
shipped cost model. For each workload and 4D budget B (sum of per-NPU bandwidths == B GB/s):

1. solve the 4D network at sum == B (LIBRA's setting); its network cost is C;
2. solve both networks with only "network cost <= C" (no bandwidth-sum row; the positive cost
   rates bound every dimension), so each spends the same dollars as well as it can;
3. equal splits at equal cost: the 4D equal split of B costs C_eq; the 3D equal split with
   the same cost gives every dimension C_eq / sum(3D cost rates) GB/s.

The plot <name>_cost_curves.png traces the optimal step time against the cost cap for both
networks (and both equal splits), per workload. Writes <output_dir>/<name>.md and the PNG.
"""

from __future__ import annotations

import pathlib
import sys
import time

import matplotlib

matplotlib.use("Agg")
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from libra_jax.cli.config import resolve_path  # noqa: E402
from libra_jax.inputs.cost import cost_rates_usd_per_gbps, load_cost_model  # noqa: E402
from libra_jax.inputs.topology import load_network_file  # noqa: E402
from libra_jax.inputs.workload import check_workload_network, load_workload  # noqa: E402
from libra_jax.model import objective as model  # noqa: E402
from libra_jax.model.problem import ConstraintSpec, build_problem  # noqa: E402
from libra_jax.solvers.solve import equal_split, solve  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import speedup as common  # noqa: E402  (shared helpers: config loading, output folder)

REPO = pathlib.Path(__file__).resolve().parents[1]
NETS = ("3d", "4d")


def load_config(name: str, overrides=()):
    """Composes experiments/conf/<name>.yaml with command-line style overrides."""
    return common.load_experiment(name, list(overrides))


output_dir = common.output_dir


def selected_workloads(cfg):
    """The workload entries of the config, restricted to ``select_workloads`` when set."""
    keep = cfg.get("select_workloads")
    ws = [w for w in cfg.workloads if keep is None or str(w.name) in [str(k) for k in keep]]
    if not ws:
        raise ValueError(f"select_workloads = {list(keep)}: matches no workload name.")
    return ws


def load_inputs(cfg):
    """{net: (Network, rates)} and {(workload name, net): Workload}."""
    nets, wls = {}, {}
    for key in NETS:
        spec = cfg.networks[key]
        net = load_network_file(resolve_path(spec.file, f"networks.{key}.file", REPO))
        rates = cost_rates_usd_per_gbps(net, load_cost_model(
            resolve_path(spec.cost_model_file, f"networks.{key}.cost_model_file", REPO)))
        nets[key] = (net, rates)
    for i, w in enumerate(selected_workloads(cfg)):
        for key in NETS:
            net = nets[key][0]
            comm = w[f"communicator_{key}"]
            wl = load_workload(resolve_path(w.file, f"workloads[{i}].file", REPO),
                               resolve_path(comm, f"workloads[{i}].communicator_{key}", REPO),
                               net.num_dims)
            check_workload_network(wl, net)
            wls[(str(w.name), key)] = wl
    return nets, wls


def _capped(nets, wls, name, key, cost):
    """Optimum of network `key` with network cost <= cost, and its problem."""
    net, rates = nets[key]
    p = build_problem(net, wls[(name, key)], rates, ConstraintSpec(max_cost_usd=float(cost)))
    return solve(p, "perf"), p


def _equal_at_cost(p, rates, cost):
    """Step time (ns) of the equal split whose network cost is `cost`."""
    bw = np.full(len(rates), float(cost) / float(np.sum(rates)))
    return float(model.step_time_s(jnp.asarray(bw), p)) * 1e9, bw


def run(cfg) -> dict:
    start = time.perf_counter()
    nets, wls = load_inputs(cfg)
    names = [str(w.name) for w in selected_workloads(cfg)]
    rows, statuses = [], []
    for name in names:
        net4, rates4 = nets["4d"]
        for budget in cfg.budgets_gbps:
            p4 = build_problem(net4, wls[(name, "4d")], rates4,
                               ConstraintSpec(total_bw_gbps=float(budget)))
            r4 = solve(p4, "perf")
            e4 = equal_split(p4)
            cost = r4.network_cost_usd
            r4c, _ = _capped(nets, wls, name, "4d", cost)
            r3c, p3 = _capped(nets, wls, name, "3d", cost)
            e3_ns, e3_bw = _equal_at_cost(p3, nets["3d"][1], e4.network_cost_usd)
            statuses += [r4.status, r4c.status, r3c.status]
            rows.append(dict(
                workload=name, budget=float(budget), cost=cost,
                t4_sum=r4.step_time_ns, t4=r4c.step_time_ns, t3=r3c.step_time_ns,
                bw4=r4c.bandwidth_gbps, bw3=r3c.bandwidth_gbps,
                sum4=float(np.sum(r4c.bandwidth_gbps)), sum3=float(np.sum(r3c.bandwidth_gbps)),
                cost_eq=e4.network_cost_usd, te4=e4.step_time_ns, te3=e3_ns,
                sum_e3=float(np.sum(e3_bw)),
                gap=max(r.optimality_gap for r in (r4, r4c, r3c)),
            ))
    curves = _curves(cfg, nets, wls, names)
    out = output_dir(cfg)
    stem = str(cfg.name)
    paths = dict(md=out / f"{stem}.md", curves_png=out / f"{stem}_cost_curves.png")
    _plot(curves, names, nets, paths["curves_png"])
    seconds = time.perf_counter() - start
    paths["md"].write_text(_markdown(cfg, nets, rows, statuses, seconds, paths))
    return dict(rows=rows, curves=curves, statuses=statuses, paths=paths, seconds=seconds)


def _curves(cfg, nets, wls, names):
    """Per workload: cost levels and step times (optimum and equal split) of both networks."""
    lo_b, hi_b = (float(x) for x in cfg.curve_budget_range_gbps)
    rates4 = nets["4d"][1]
    levels = np.geomspace(lo_b * np.sum(rates4) / 4, hi_b * np.sum(rates4) / 4,
                          int(cfg.curve_points))
    curves = {}
    for name in names:
        c = {"cost": levels}
        for key in NETS:
            opt, eq = [], []
            for lvl in levels:
                r, p = _capped(nets, wls, name, key, lvl)
                opt.append(r.step_time_ns)
                eq.append(_equal_at_cost(p, nets[key][1], lvl)[0])
            c[f"opt_{key}"], c[f"eq_{key}"] = np.array(opt), np.array(eq)
        curves[name] = c
    return curves


def _markdown(cfg, nets, rows, statuses, seconds, paths) -> str:
    n3, n4 = nets["3d"][0].notation, nets["4d"][0].notation
    ok = sum(s == "ok" for s in statuses)
    lines = [
        f"# Experiment 5: 3D {n3} vs 4D {n4} at equal network cost (4,096 NPUs each)",
        "",
        "Generated by `python experiments/dims_3d_vs_4d.py` (config "
        f"`experiments/conf/dims_3d_vs_4d.yaml`) in {seconds:.0f} s. For each 4D budget B "
        "(sum of per-NPU bandwidths == B GB/s) the 4D optimum costs C; then both networks "
        "are re-solved with only *network cost <= C* (no bandwidth-sum row), so each spends "
        "the same dollars as well as it can. Step times in ms; cost in M$ (shipped cost "
        "models: 3D `3d_cost_model.yml`, 4D `4d_cost_model.yml`). "
        "*3D/4D* > 1 means the 4D network trains faster at the same cost. "
        f"{ok}/{len(statuses)} solves certified (status ok); largest certified gap "
        f"{max(r['gap'] for r in rows):.1e}.",
        "",
        "**Optimal designs at equal cost**",
        "",
        "| workload | 4D budget B (GB/s) | cost C (M$) | 4D, sum == B (ms) | 4D, cost <= C (ms) "
        "| 3D, cost <= C (ms) | 3D / 4D | 4D sum of bw (GB/s) | 3D sum of bw (GB/s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['budget']:g} | {r['cost'] / 1e6:.2f} | "
            f"{r['t4_sum'] / 1e6:.2f} | {r['t4'] / 1e6:.2f} | {r['t3'] / 1e6:.2f} | "
            f"{r['t3'] / r['t4']:.3f}x | {r['sum4']:.0f} | {r['sum3']:.0f} |")
    lines += [
        "",
        "**Equal splits at equal cost** (the 4D equal split of B costs C_eq; the 3D equal "
        "split with the same cost):",
        "",
        "| workload | 4D budget B (GB/s) | C_eq (M$) | 4D equal split (ms) | 3D equal split "
        "(ms) | 3D / 4D | 3D equal split sum of bw (GB/s) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['workload']} | {r['budget']:g} | {r['cost_eq'] / 1e6:.2f} | "
            f"{r['te4'] / 1e6:.2f} | {r['te3'] / 1e6:.2f} | {r['te3'] / r['te4']:.3f}x | "
            f"{r['sum_e3']:.0f} |")
    dims3 = " / ".join(n3.split("_"))
    dims4 = " / ".join(n4.split("_"))
    lines += ["", f"Optimal bandwidths (GB/s per NPU) at equal cost, 4D ({dims4}) and 3D "
              f"({dims3}):", "", "| workload | B (GB/s) | 4D, cost <= C | 3D, cost <= C |",
              "|---|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['budget']:g} | "
                     + " / ".join(f"{x:.1f}" for x in r["bw4"]) + " | "
                     + " / ".join(f"{x:.1f}" for x in r["bw3"]) + " |")
    lines += ["", f"Plot: `{paths['curves_png'].name}` (optimal and equal-split step time vs "
              "network cost cap, per workload).", ""]
    return "\n".join(lines)


def _plot(curves, names, nets, path):
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4.2), squeeze=False)
    colors = {"3d": "tab:blue", "4d": "tab:red"}
    for ax, name in zip(axes[0], names):
        c = curves[name]
        for key in NETS:
            label = f"{key.upper()} {nets[key][0].notation}"
            ax.plot(c["cost"] / 1e6, c[f"opt_{key}"] / 1e6, "-", color=colors[key],
                    label=f"{label}, optimum")
            ax.plot(c["cost"] / 1e6, c[f"eq_{key}"] / 1e6, "--", color=colors[key],
                    label=f"{label}, equal split")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("network cost cap (M$)")
        ax.set_ylabel("training step time (ms)")
        ax.set_title(name)
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Step time at equal network cost: 3D vs 4D, 4,096 NPUs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    return common.run_and_report("dims_3d_vs_4d", load_config, run, argv)


if __name__ == "__main__":
    main()
