"""What ``libra-evaluate`` and ``libra-train`` print and write for a multi-workload run with
a trace set among its ``workloads`` (`studies.trace_multi`): the table and ``result.json``.
Units: GB/s per NPU per dimension, ns (the tables also show ms), $; the objective in ns
(sum_time) or ns x $ (sum_time_x_cost).
"""

from __future__ import annotations

import logging
import pathlib

import numpy as np

from libra_jax.cli import report, runtime
from libra_jax.cli.tables import text_table, time_text
from libra_jax.cli.trace_report import design_lines
from libra_jax.studies import trace_multi as study
from libra_jax.studies.job.config import LibraConfig
from libra_jax.types import LibraInputError

log = logging.getLogger(__name__)


def _workload_dict(wl: study.TimedWorkload) -> dict:
    """A workload's source: name, weight, file or trace prefix (with the trace's ranks,
    nodes and what reading it skipped)."""
    out = {"name": wl.name, "weight": wl.weight,
           "file": wl.path if wl.source == "file" else None,
           "chakra_et": wl.path if wl.source == "chakra_et" else None}
    if wl.trace_inputs is not None:
        t = wl.trace_inputs.trace
        out.update(ranks=t.num_ranks, nodes=int(sum(r.num_nodes for r in t.ranks)),
                   skipped={str(k): int(v) for k, v in t.skipped.items()},
                   notes=list(t.notes))
    return out


def _objective_text(objective: str, value) -> str:
    v = report.json_num(value)
    if v is None:
        return "-"
    return time_text(v) if objective == "sum_time" else time_text(v, "*$")


def _head(title: str, inputs: study.TimedMultiInputs) -> list[str]:
    n, tm = inputs.network, inputs.workloads[0].timing_model
    names = ", ".join(w.name for w in inputs.workloads)
    return [f"{title}: {len(inputs.workloads)} workloads ({names}) on {n.notation} "
            f"({n.num_npus:,} NPUs, {n.num_dims} dimensions)",
            f"every step simulated as ASTRA-sim runs it: {tm.chunks} chunk(s), "
            f"{tm.queues_per_dim} queue(s) per dimension ({tm.queue_policy}), "
            f"{tm.network_backend} network backend",
            f"objective: {inputs.objective} (weighted sum of simulated steps"
            + (" x network cost)" if inputs.objective == "sum_time_x_cost" else ")")]


def evaluation_dict(ev: study.TimedMultiEvaluation) -> dict:
    """``result.json`` of ``libra-evaluate`` on a multi-workload run with a trace set."""
    inp = ev.inputs
    total = float(inp.weights @ ev.steps_ns)
    return {
        "status": "ok",
        "objective": inp.objective,
        "bandwidth_gbps": ev.bandwidth_gbps.tolist(),
        "objective_value": ev.objective_value,
        "step_time_ns": total,
        "network_cost_usd": ev.network_cost_usd,
        "time_x_cost": None if ev.network_cost_usd is None else total * ev.network_cost_usd,
        "constraints": ev.constraints,
        "timing_model": report.timing_dict(inp.workloads[0].timing_model),
        "network": report.network_dict(inp.network),
        "workloads": [dict(_workload_dict(w), step_time_ns=float(s))
                      for w, s in zip(inp.workloads, ev.steps_ns)],
        "simulate_seconds": ev.simulate_seconds,
    }


def format_evaluation(data: dict, ev: study.TimedMultiEvaluation) -> str:
    """The summary ``libra-evaluate`` prints."""
    lines = _head("Design evaluation", ev.inputs) + [""]
    rows = [("workload", "source", "weight", "simulated step")]
    for w in data["workloads"]:
        rows.append((w["name"], "trace" if w["chakra_et"] else "file", f"{w['weight']:g}",
                     time_text(w["step_time_ns"])))
    lines += text_table(rows, "llrr") + [""]
    c = data["constraints"]
    rows = [("design GB/s", ", ".join(f"{x:.3f}" for x in data["bandwidth_gbps"])),
            ("objective value", _objective_text(data["objective"], data["objective_value"])),
            ("network cost", "-" if data["network_cost_usd"] is None
             else f"${data['network_cost_usd']:,.2f}"),
            ("constraints", "met" if c["satisfied"] else "VIOLATED: " + "; ".join(c["violated"]))]
    return "\n".join(lines + text_table(rows, "ll"))


def train_dict(run: study.TimedMultiRun) -> dict:
    """``result.json`` of ``libra-train`` on a multi-workload run with a trace set."""
    inp, r = run.inputs, run.result
    rates = inp.cost_rates
    cost = None if rates is None else float(rates @ run.bandwidth_gbps)
    base_cost = None if rates is None else float(rates @ run.baseline_bw_gbps)
    total = float(inp.weights @ run.steps_ns)
    base_total = float(inp.weights @ run.baseline_steps_ns)
    return {
        "objective": inp.objective,
        "status": r.status,
        "bandwidth_gbps": run.bandwidth_gbps.tolist(),
        "objective_value": run.objective_value,
        "step_time_ns": total,
        "lower_bound": report.json_num(r.lower_bound),
        "exact_optimality_gap": run.gap,
        "model_optimum_gbps": np.asarray(r.bandwidth_gbps, np.float64).tolist(),
        "model_optimality_gap": report.json_num(r.optimality_gap),
        "designs_simulated": run.searched,
        "max_violation": run.max_violation,
        "network_cost_usd": cost,
        "time_x_cost": None if cost is None else total * cost,
        "equal_split": {"bandwidth_gbps": run.baseline_bw_gbps.tolist(),
                        "objective_value": run.baseline_objective_value,
                        "step_time_ns": base_total, "network_cost_usd": base_cost},
        "gain_vs_equal_split": (run.baseline_objective_value / run.objective_value
                                if run.objective_value > 0 else None),
        "cutting_plane": {"rounds": run.rounds, "converged": run.converged,
                          "paths": [None if p is None else len(p) for p in run.paths]},
        "solve_seconds": run.solve_seconds,
        "compile_seconds": run.compile_seconds,
        "timing_model": report.timing_dict(inp.workloads[0].timing_model),
        "network": report.network_dict(inp.network),
        "workloads": [dict(_workload_dict(w), step_time_ns=float(s),
                           equal_split_step_time_ns=float(b))
                      for w, s, b in zip(inp.workloads, run.steps_ns, run.baseline_steps_ns)],
    }


def format_train(data: dict, run: study.TimedMultiRun) -> str:
    """The summary ``libra-train`` prints."""
    obj = data["objective"]
    lines = _head("Bandwidth optimisation", run.inputs)
    lines += design_lines(run.inputs.network, run.inputs.spec, data)
    rows = [("workload", "source", "weight", "simulated step", "equal split", "speed-up")]
    for w in data["workloads"]:
        rows.append((w["name"], "trace" if w["chakra_et"] else "file", f"{w['weight']:g}",
                     time_text(w["step_time_ns"]), time_text(w["equal_split_step_time_ns"]),
                     f"{w['equal_split_step_time_ns'] / w['step_time_ns']:.3f}x"
                     if w["step_time_ns"] > 0 else "-"))
    lines += text_table(rows, "llrrrr") + [""]
    gap = data["exact_optimality_gap"]
    rows = [("objective value (simulated)", _objective_text(obj, data["objective_value"])),
            ("at the equal split", _objective_text(obj, data["equal_split"]["objective_value"])),
            ("certified lower bound", _objective_text(obj, data["lower_bound"])),
            ("network cost", "-" if data["network_cost_usd"] is None
             else f"${data['network_cost_usd']:,.2f}")]
    lines += text_table(rows, "ll") + [""]
    cp = data["cutting_plane"]
    lines.append(
        "certified gap to the best simulated objective: "
        + ("-" if gap is None else f"{100 * gap:.3f}%")
        + f" (cutting plane: {cp['rounds']} round{'' if cp['rounds'] == 1 else 's'}, "
        + f"{'converged' if cp['converged'] else 'stopped at the limit'}; "
        + f"{data['designs_simulated']} designs simulated)")
    if data["status"] != "ok":
        lines.append(f"warning: solver status is {data['status']!r}; treat the numbers above "
                     "with care.")
    return "\n".join(lines)


def _no_export(c: LibraConfig) -> None:
    if c.export_astrasim:
        raise LibraInputError(
            "export_astrasim=true with workloads: the export writes one workload's "
            "ASTRA-sim files; run each workload alone (workload.chakra_et=... or "
            "workload.file=...) with the design to export it.")


def evaluate(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """``libra-evaluate``: the table, ``result.json``; returns the objective value."""
    _no_export(c)
    ev = study.evaluate_timed_multi(c)
    data = evaluation_dict(ev)
    print(format_evaluation(data, ev), flush=True)
    report.write_json(output_dir / "result.json", data)
    value = runtime.objective_value(data["objective_value"])
    log.info("design %s GB/s: %s %.10g", data["bandwidth_gbps"], data["objective"], value)
    log.info("result: %s", output_dir / "result.json")
    return value


def train(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """``libra-train``: the table, ``result.json``; returns the simulated objective."""
    _no_export(c)
    run = study.train_timed_multi(c)
    data = train_dict(run)
    print(format_train(data, run), flush=True)
    report.write_json(output_dir / "result.json", data)
    value = runtime.objective_value(data["objective_value"])
    log.info("status %s, %s %.10g (simulated); %d cutting-plane rounds, solve %.3f s, "
             "compile %.3f s", run.result.status, data["objective"], value, run.rounds,
             run.solve_seconds, run.compile_seconds)
    log.info("result: %s", output_dir / "result.json")
    return value
