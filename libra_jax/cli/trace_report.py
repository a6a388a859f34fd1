"""What ``libra-evaluate`` and ``libra-train`` print and write for an imported Chakra trace
set (``workload.chakra_et=...``, `studies.job.trace`): the table, ``result.json`` and the
ASTRA-sim export. Units: GB/s per NPU per dimension, ns (the tables also show ms), $, W, J.
"""

from __future__ import annotations

import logging
import pathlib
from typing import Any

import numpy as np

from libra_jax.cli import report, runtime
from libra_jax.cli.tables import constraints_text, design_override, text_table, time_text
from libra_jax.studies.job import trace as study
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.export import export_astrasim_trace

log = logging.getLogger(__name__)


def trace_dict(inputs: study.TraceInputs) -> dict:
    """``result.json``'s ``workload`` for a trace set: where it came from, its size and what
    reading it skipped, with the rules applied."""
    t = inputs.trace
    return {"name": pathlib.Path(inputs.prefix).name, "file": None,
            "chakra_et": str(inputs.prefix), "ranks": t.num_ranks,
            "nodes": int(sum(r.num_nodes for r in t.ranks)),
            "skipped": {str(k): int(v) for k, v in t.skipped.items()},
            "notes": list(t.notes)}


def classes_list(timing: Any) -> list[dict]:
    """The ranks grouped by class (identical graphs), each class's ranks and its last end
    (ns), slowest first."""
    cls = np.asarray(timing.class_of)
    end = np.asarray(timing.rank_end_ns, np.float64)
    out = []
    for c in np.unique(cls):
        ranks = np.nonzero(cls == c)[0]
        out.append({"ranks": ranks.tolist(), "end_ns": float(end[ranks].max())})
    return sorted(out, key=lambda x: -x["end_ns"])


def _compute_ns(inputs: study.TraceInputs) -> float:
    """The most compute any rank runs (ns)."""
    return max((float(np.sum(r.duration_ns)) for r in inputs.trace.ranks), default=0.0)


def evaluation_dict(ev: study.TraceEvaluation) -> dict:
    """``result.json`` of ``libra-evaluate`` on a trace set."""
    step_ns, cost = float(ev.timing.time_ns), ev.network_cost_usd
    compute = _compute_ns(ev.inputs)
    return {
        "status": "ok",
        "bandwidth_gbps": ev.bandwidth_gbps.tolist(),
        "step_time_ns": step_ns,
        "comm_time_ns": step_ns - compute,
        "compute_time_ns": compute,
        "lower_bound_ns": ev.lower_bound_ns,
        "network_cost_usd": cost,
        "time_x_cost": None if cost is None else step_ns * cost,
        **report.power_of(ev.bandwidth_gbps.tolist(), step_ns, ev.power),
        "constraints": ev.constraints,
        "timing_model": report.timing_dict(ev.inputs.timing_model),
        "network": report.network_dict(ev.inputs.network),
        "workload": trace_dict(ev.inputs),
        "classes": classes_list(ev.timing),
        "rank_end_ns": np.asarray(ev.timing.rank_end_ns, np.float64).tolist(),
        "simulate_seconds": ev.simulate_seconds,
    }


def train_dict(run: study.TraceRun, objective: str) -> dict:
    """``result.json`` of ``libra-train`` on a trace set."""
    r = run.result
    bw = np.asarray(run.bandwidth_gbps, np.float64)
    step_ns = run.exact_step_ns
    rates = run.inputs.cost_rates
    cost = None if rates is None else float(rates @ bw)
    power = report.power_of(bw.tolist(), step_ns, run.power)
    base_power = report.power_of(run.baseline_bw_gbps.tolist(), run.baseline_exact_ns,
                                 run.power)
    base_cost = None if rates is None else float(rates @ run.baseline_bw_gbps)
    return {
        "objective": objective,
        "status": r.status,
        "bandwidth_gbps": bw.tolist(),
        "step_time_ns": step_ns,
        "model_optimum_gbps": np.asarray(r.bandwidth_gbps, np.float64).tolist(),
        "lower_bound": report.json_num(r.lower_bound),
        "exact_optimality_gap": _exact_gap(r, objective, step_ns, cost, power),
        "designs_simulated": run.searched,
        "model_optimality_gap": report.json_num(r.optimality_gap),
        "max_violation": run.max_violation,
        "network_cost_usd": cost,
        "time_x_cost": None if cost is None else step_ns * cost,
        **power,
        "equal_split": {"bandwidth_gbps": run.baseline_bw_gbps.tolist(),
                        "step_time_ns": run.baseline_exact_ns,
                        "network_cost_usd": base_cost,
                        "time_x_cost": None if base_cost is None
                        else run.baseline_exact_ns * base_cost,
                        "energy_per_step_j": base_power.get("energy_per_step_j")},
        "speedup_vs_equal_split": run.baseline_exact_ns / step_ns if step_ns > 0 else None,
        "cutting_plane": {"rounds": run.rounds, "converged": run.converged},
        "solve_seconds": run.solve_seconds,
        "compile_seconds": run.compile_seconds,
        "timing_model": report.timing_dict(run.inputs.timing_model),
        "network": report.network_dict(run.inputs.network),
        "workload": trace_dict(run.inputs),
        "classes": classes_list(run.timing),
    }


def _exact_gap(r: Any, objective: str, step_ns: float, cost: float | None,
               power: dict) -> float | None:
    """(the design's simulated objective - the solver's certified lower bound of the
    model's) / that bound: certified, since the model's step is below the simulated one at
    every design. The bound is in ns (perf), ns x $ (perf_per_cost) or ns x W
    (perf_per_watt); None without one."""
    bound = report.json_num(getattr(r, "lower_bound", None))
    if bound is None or bound <= 0:
        return None
    if objective == "perf_per_cost":
        value = None if cost is None else step_ns * cost
    elif objective == "perf_per_watt":
        watts = power.get("total_power_w")
        value = None if watts is None else step_ns * watts
    else:
        value = step_ns
    return None if value is None else (value - bound) / bound


def _head(title: str, inputs: study.TraceInputs) -> list[str]:
    n, t, tm = inputs.network, inputs.trace, inputs.timing_model
    nodes = sum(r.num_nodes for r in t.ranks)
    lines = [f"{title}: trace set {inputs.prefix} ({t.num_ranks:,} ranks, {nodes:,} nodes) on "
             f"{n.notation} ({n.num_npus:,} NPUs, {n.num_dims} dimensions)",
             f"step simulated as ASTRA-sim runs it: {tm.chunks} chunk(s), "
             f"{tm.queues_per_dim} queue(s) per dimension ({tm.queue_policy}), "
             f"{tm.network_backend} network backend"]
    skipped = ", ".join(f"{v:,} {k}" for k, v in t.skipped.items() if v)
    if skipped:
        lines.append(f"skipped while reading: {skipped} (see the log for the rules)")
    return lines


def _stage_rows(timing: Any, limit: int = 8) -> list[str]:
    classes = classes_list(timing)
    rows = [("ranks", "finish")]
    for c in classes[:limit]:
        ranks = c["ranks"]
        text = (", ".join(map(str, ranks)) if len(ranks) <= 6
                else f"{', '.join(map(str, ranks[:4]))}, ... ({len(ranks)} ranks)")
        rows.append((text, time_text(c["end_ns"])))
    lines = [f"finish per class of identical ranks ({len(classes)} classes"
             + (f", slowest {limit} shown" if len(classes) > limit else "") + "):"]
    return lines + text_table(rows, "lr")


def format_evaluation(data: dict, ev: study.TraceEvaluation) -> str:
    """The summary ``libra-evaluate`` prints for a trace set."""
    n = ev.inputs.network
    lines = _head("Design evaluation", ev.inputs) + [""]
    tiers = n.cost_tiers or ("-",) * n.num_dims
    rows = [("dim", "block", "NPUs", "cost tier", "GB/s")]
    for d in range(n.num_dims):
        rows.append((str(d), n.blocks[d], str(n.npus[d]), tiers[d],
                     f"{data['bandwidth_gbps'][d]:.3f}"))
    lines += text_table(rows, "rlrlr") + [""]
    rows = [("step time (max over ranks)", time_text(data["step_time_ns"])),
            ("compute (busiest rank)", time_text(data["compute_time_ns"])),
            ("lower bound (path or queue work)", time_text(data["lower_bound_ns"])),
            ("network cost", "-" if data["network_cost_usd"] is None
             else f"${data['network_cost_usd']:,.2f}")]
    if data.get("energy_per_step_j") is not None:
        rows.append(("energy per step", f"{data['energy_per_step_j']:,.4f} J"))
    c = data["constraints"]
    rows.append(("constraints", "met" if c["satisfied"]
                 else "VIOLATED: " + "; ".join(c["violated"])))
    lines += text_table(rows, "ll") + [""] + _stage_rows(ev.timing)
    return "\n".join(lines)


def design_lines(n: Any, spec: Any, data: dict) -> list[str]:
    """The constraints, the optimum and the equal split per dimension (``data``'s
    ``bandwidth_gbps`` and ``equal_split.bandwidth_gbps``) and the full-precision design."""
    lines = [("constraints: " if i == 0 else "             ") + text
             for i, text in enumerate(constraints_text(spec))] + [""]
    tiers = n.cost_tiers or ("-",) * n.num_dims
    rows = [("dim", "block", "NPUs", "cost tier", "optimum GB/s", "equal split GB/s")]
    for d in range(n.num_dims):
        rows.append((str(d), n.blocks[d], str(n.npus[d]), tiers[d],
                     f"{data['bandwidth_gbps'][d]:.3f}",
                     f"{data['equal_split']['bandwidth_gbps'][d]:.3f}"))
    lines += text_table(rows, "rlrlrr") + ["(bandwidth is per NPU, per dimension)"]
    design = design_override(data["bandwidth_gbps"])
    if design is not None:
        lines.append(f"design at full precision, for libra-evaluate: {design}")
    return lines + [""]


def format_train(data: dict, run: study.TraceRun) -> str:
    """The summary ``libra-train`` prints for a trace set."""
    n = run.inputs.network
    lines = _head("Bandwidth optimisation", run.inputs)
    lines.append(f"objective:   {data['objective']}")
    lines += design_lines(n, run.inputs.spec, data)
    gap = data["exact_optimality_gap"]
    rows = [("", "optimum", "equal split"),
            ("step time (simulated)", time_text(data["step_time_ns"]),
             time_text(data["equal_split"]["step_time_ns"]))]
    if data["network_cost_usd"] is not None:
        rows.append(("network cost", f"${data['network_cost_usd']:,.2f}",
                     f"${data['equal_split']['network_cost_usd']:,.2f}"))
    if data.get("energy_per_step_j") is not None:
        rows.append(("energy per step", f"{data['energy_per_step_j']:,.4f} J",
                     f"{data['equal_split']['energy_per_step_j']:,.4f} J"))
    lines += text_table(rows, "lrr") + [""]
    speed = data["speedup_vs_equal_split"]
    lines.append(f"speed-up over the equal split: {speed:.3f}x" if speed else "")
    what = {"perf": "step", "perf_per_cost": "step x cost",
            "perf_per_watt": "energy per step"}[data["objective"]]
    bound = data["lower_bound"]
    bound_text = (time_text(bound) if data["objective"] == "perf" else "-" if bound is None
                  else time_text(bound, "*$") if data["objective"] == "perf_per_cost"
                  else f"{bound * 1e-9:,.4f} J")
    lines.append(
        f"certified gap to the best simulated {what}: "
        + ("-" if gap is None else f"{100 * gap:.3f}%")
        + f" (lower bound {bound_text}; cutting plane: "
        f"{data['cutting_plane']['rounds']} paths, "
        f"{'converged' if data['cutting_plane']['converged'] else 'stopped at the limit'}; "
        f"{data['designs_simulated']} designs simulated)")
    if data["status"] != "ok":
        lines.append(f"warning: solver status is {data['status']!r}; treat the numbers above "
                     "with care.")
    lines += [""] + _stage_rows(run.timing)
    return "\n".join(lines)


def evaluate(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """``libra-evaluate`` on a trace set: the table, ``result.json``, the export; returns
    the objective value."""
    ev = study.evaluate_trace(c)
    data = evaluation_dict(ev)
    print(format_evaluation(data, ev), flush=True)
    export_astrasim_trace(c, output_dir, ev.inputs, ev.bandwidth_gbps)
    report.write_json(output_dir / "result.json", data)
    key = report.objective_key(c.objective)
    value = runtime.objective_value(data[key])
    log.info("design %s GB/s: %s %.10g", data["bandwidth_gbps"], key, value)
    log.info("result: %s", output_dir / "result.json")
    return value


def train(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """``libra-train`` on a trace set: the table, ``result.json``, the export; returns the
    objective value at the simulated step."""
    run = study.train_trace(c)
    data = train_dict(run, str(c.objective))
    print(format_train(data, run), flush=True)
    export_astrasim_trace(c, output_dir, run.inputs, np.asarray(run.bandwidth_gbps))
    report.write_json(output_dir / "result.json", data)
    key = report.objective_key(c.objective)
    value = runtime.objective_value(data[key])
    log.info("status %s, %s %.10g (simulated); %d cutting-plane rounds, solve %.3f s, "
             "compile %.3f s", run.result.status, key, value, run.rounds, run.solve_seconds,
             run.compile_seconds)
    log.info("result: %s", output_dir / "result.json")
    return value
