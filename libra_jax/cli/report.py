"""What a run leaves on disk: the ``result.json`` dictionaries (single, multi-workload and
co-search runs, and a run that stopped on an error) and the numbers they hold; the printed
tables are in :mod:`libra_jax.cli.tables`.

Host-side only (plain Python floats); nothing here touches JAX. Units: bandwidth GB/s per NPU
per dimension, time ns, cost $, time x cost ns*$.

``result.json`` (docs/reference/outputs.md) has exactly the keys of :data:`RESULT_KEYS`;
a run that failed on bad input writes the same keys, all null except ``status`` ("error") and
``objective`` where known, plus ``error`` (the message).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

RESULT_KEYS = (
    "objective",
    "status",
    "bandwidth_gbps",
    "step_time_ns",
    "comm_time_ns",
    "network_cost_usd",
    "time_x_cost",
    "network_power_w",
    "total_power_w",
    "energy_per_step_j",
    "optimality_gap",
    "max_violation",
    "solve_seconds",
    "compile_seconds",
    "speedup",
    "perf_per_cost_gain",
    "baseline",
    "network",
    "workload",
    "timing_model",
    "step_time_exact_ns",
    "exact_optimality_gap",
    "chunk_search",
    "sensitivities",
    "bandwidth_limits",
    "reference_design",
)


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------


def objective_key(objective: str) -> str:
    """The ``result.json`` key of the value a single-workload ``objective`` minimises."""
    return {"perf_per_cost": "time_x_cost",
            "perf_per_watt": "energy_per_step_j"}.get(objective, "step_time_ns")


def json_num(x: Any) -> float | None:
    """A JSON-safe float: None for None and for non-finite values (JSON has no NaN/inf)."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def json_nums(xs: Any) -> list[float | None] | None:
    """:func:`json_num` of each entry; None for None."""
    if xs is None:
        return None
    return [json_num(x) for x in list(xs)]


def ratio(num: Any, den: Any) -> float | None:
    """num / den, or None when either is missing, non-finite, or den is not positive."""
    a, b = json_num(num), json_num(den)
    if a is None or b is None or b <= 0.0:
        return None
    return a / b


def speedup(result: Any, baseline: Any) -> float | None:
    """Equal-split step time / optimal step time (> 1: the optimum is faster)."""
    return ratio(baseline.step_time_ns, result.step_time_ns)


def perf_per_cost_gain(result: Any, baseline: Any) -> float | None:
    """Equal-split time x cost / optimal time x cost (> 1: better performance per dollar)."""
    return ratio(getattr(baseline, "time_x_cost", None), getattr(result, "time_x_cost", None))


def power_of(bw: Any, step_time_ns: Any, power: Any) -> dict:
    """{network_power_w, total_power_w, energy_per_step_j} of a design, all None without
    ``power`` = (rates [D] W per GB/s, static W: all NPUs apart from the network)."""
    out = dict(network_power_w=None, total_power_w=None, energy_per_step_j=None)
    if power is None or power[0] is None or bw is None:
        return out
    rates, static = power
    net = float(sum(float(r) * float(b) for r, b in zip(rates, bw)))
    total = float(static) + net
    step = json_num(step_time_ns)
    return dict(network_power_w=json_num(net), total_power_w=json_num(total),
                energy_per_step_j=None if step is None else json_num(step * 1e-9 * total))


def perf_per_watt_gain(result: Any, baseline: Any, power: Any) -> float | None:
    """Equal-split energy per step / optimal energy per step (> 1: less energy per step)."""
    a = power_of(json_nums(baseline.bandwidth_gbps), baseline.step_time_ns, power)
    b = power_of(json_nums(result.bandwidth_gbps), result.step_time_ns, power)
    return ratio(a["energy_per_step_j"], b["energy_per_step_j"])


# --------------------------------------------------------------------------------------------
# result.json
# --------------------------------------------------------------------------------------------


def network_dict(network: Any) -> dict | None:
    if network is None:
        return None
    tiers = getattr(network, "cost_tiers", None)
    return {
        "notation": network.notation,
        "blocks": list(network.blocks),
        "npus": [int(n) for n in network.npus],
        "cost_tiers": None if tiers is None else list(tiers),
    }


def workload_dict(workload: Any, workload_file: str | None) -> dict | None:
    if workload is None and workload_file is None:
        return None
    return {
        "name": None if workload is None else getattr(workload, "name", None),
        "file": None if workload_file is None else str(workload_file),
    }


def result_dict(
    result: Any,
    baseline: Any,
    network: Any,
    workload: Any,
    workload_file: str | None = None,
    extras: dict | None = None,
    compile_seconds: float | None = None,
    power: Any = None,
) -> dict:
    """The ``result.json`` dictionary of a finished solve.

    Args:
      result: the ``solve.SolveResult``.
      baseline: the ``solve.equal_split`` baseline.
      network: the ``topology.Network``.
      workload: the ``workload.Workload``.
      workload_file: the workload path as resolved from the config.
      extras: values of the keys beyond the core ones (``timing_model``,
        ``step_time_exact_ns``, ``exact_optimality_gap``, ``chunk_search``, ``sensitivities``); missing ones are null.
      compile_seconds: JAX compilation during the solve (``solve_seconds`` excludes it).
      power: (rates [D] W per GB/s, static W) when the tiers give Energy, else None: the
        result's and the baseline's network power, total power and energy per step.

    Returns:
      A JSON-serialisable dict with exactly the keys of :data:`RESULT_KEYS`; non-finite numbers
      and quantities that do not apply (e.g. cost without a cost model) are ``None``.
    """
    pw = power_of(json_nums(result.bandwidth_gbps), result.step_time_ns, power)
    base_pw = power_of(json_nums(baseline.bandwidth_gbps), baseline.step_time_ns, power)
    return {
        "objective": result.objective,
        "status": result.status,
        "bandwidth_gbps": json_nums(result.bandwidth_gbps),
        "step_time_ns": json_num(result.step_time_ns),
        "comm_time_ns": json_num(result.comm_time_ns),
        "network_cost_usd": json_num(result.network_cost_usd),
        "time_x_cost": json_num(result.time_x_cost),
        **pw,
        "optimality_gap": json_num(result.optimality_gap),
        "max_violation": json_num(result.max_violation),
        "solve_seconds": json_num(result.solve_seconds),
        "compile_seconds": json_num(compile_seconds),
        "speedup": speedup(result, baseline),
        "perf_per_cost_gain": perf_per_cost_gain(result, baseline),
        "baseline": {
            "bandwidth_gbps": json_nums(baseline.bandwidth_gbps),
            "step_time_ns": json_num(baseline.step_time_ns),
            "network_cost_usd": json_num(baseline.network_cost_usd),
            "time_x_cost": json_num(baseline.time_x_cost),
            **base_pw,
            "projected": bool(baseline.projected),
        },
        "network": network_dict(network),
        "workload": workload_dict(workload, workload_file),
        **{k: (extras or {}).get(k) for k in RESULT_KEYS[RESULT_KEYS.index("timing_model"):]},
    }


def error_dict(
    message: str, objective: str | None = None, workload_file: str | None = None
) -> dict:
    """The ``result.json`` dictionary of a run that stopped on an error.

    Same keys as :func:`result_dict` (null) with ``status`` "error", plus ``error``: the message.
    """
    d: dict[str, Any] = {k: None for k in RESULT_KEYS}
    d["objective"] = objective
    d["status"] = "error"
    d["workload"] = workload_dict(None, workload_file)
    d["error"] = message
    return d


def write_json(path: str | os.PathLike, data: dict) -> None:
    """Write ``data`` as strict JSON (no NaN / Infinity), pretty-printed."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, allow_nan=False)
        f.write("\n")


# --------------------------------------------------------------------------------------------
# Multi-workload runs (libra_jax/studies/multi.py)
# --------------------------------------------------------------------------------------------


#: Keys a multi-workload ``result.json`` adds after :data:`RESULT_KEYS`.
MULTI_EXTRA_KEYS = ("objective_value", "workloads")
#: Keys of each entry of the ``workloads`` list.
MULTI_WORKLOAD_KEYS = (
    "name",
    "weight",
    "step_time_ns",
    "own_optimum_step_time_ns",
    "equal_split_step_time_ns",
)


def multi_result_dict(result: Any, network: Any, compile_seconds: float | None = None) -> dict:
    """The ``result.json`` dictionary of a multi-workload run (``multi.MultiResult``).

    The keys of :data:`RESULT_KEYS` (``objective`` is the multi objective; ``step_time_ns``,
    ``comm_time_ns``, ``time_x_cost``, ``speedup`` and ``baseline`` refer to the weighted sum
    of step times; ``workload`` is null), then ``objective_value`` (ns, ns*$ or a ratio) and
    ``workloads``: one dict per workload with the keys of :data:`MULTI_WORKLOAD_KEYS`.
    """
    d = result_dict(result, result.baseline, network, None, compile_seconds=compile_seconds)
    d["objective_value"] = json_num(result.objective_value)
    d["workloads"] = [
        {
            "name": w.name,
            "weight": json_num(w.weight),
            "step_time_ns": json_num(w.step_time_ns),
            "own_optimum_step_time_ns": json_num(w.own_optimum_step_time_ns),
            "equal_split_step_time_ns": json_num(w.equal_split_step_time_ns),
        }
        for w in result.workloads
    ]
    return d


# --------------------------------------------------------------------------------------------
# Beyond LIBRA's model: timing model, exact time, chunk search
# --------------------------------------------------------------------------------------------


def timing_dict(tm: Any) -> dict:
    """``result.json``'s ``timing_model``: the step-time model of the run."""
    return {
        "model": tm.model,
        "schedule": tm.schedule if tm.model == "pipelined" else None,
        "training_loop": tm.training_loop,
        "latency_ns": None if tm.latency_ns is None else [float(x) for x in tm.latency_ns],
        "chunks": int(tm.chunks) if tm.model == "pipelined" else None,
        "endpoint_delay_ns": float(tm.endpoint_delay_ns),
        "local_mem_bw_gbps": json_num(tm.local_mem_bw_gbps),
        "gb_is_gib": bool(tm.gb_is_gib),
        "queue_policy": tm.queue_policy if tm.model == "pipelined" else None,
        "queues_per_dim": int(tm.queues_per_dim) if tm.model == "pipelined" else None,
        "network_backend": tm.network_backend if tm.model == "pipelined" else None,
        "max_inflight_collectives": tm.max_inflight_collectives,
        **({} if getattr(tm, "is_default_runtime", True) else {"runtime": {
            "inter_dim_scheduling": tm.inter_dim_scheduling,
            "intra_dim_scheduling": tm.intra_dim_scheduling,
            "collective_optimization": tm.collective_optimization,
            "algorithm": None if tm.algorithm is None else list(tm.algorithm),
            "active_chunks_per_dim": int(tm.active_chunks_per_dim)}}),
    }


def reference_dict(ref: Any, cost_rates: Any, power: Any) -> dict | None:
    """``reference_design`` of result.json: the shipped design (``reference_bw_gbps``) and
    the optima at its network power and at its network cost, each with its step time, cost
    and power (`studies.job.train.ReferenceDesign`); None without one."""
    if ref is None:
        return None

    def summary(bw, step_ns, status=None, gap=None):
        out = dict(bandwidth_gbps=[float(x) for x in bw], step_time_ns=float(step_ns),
                   network_cost_usd=None if cost_rates is None else float(cost_rates @ bw),
                   **power_of(list(bw), step_ns, power))
        if status is not None:
            out.update(status=status, optimality_gap=gap)
        return out

    data = dict(shipped=summary(ref.bandwidth_gbps, ref.step_time_ns), same_power=None,
                same_cost=None)
    for key in ("same_power", "same_cost"):
        r = getattr(ref, key)
        if r is not None:
            data[key] = summary(r.bandwidth_gbps, r.step_time_ns, r.status, r.optimality_gap)
    return data


#: Keys of an evaluate ``result.json``, in order.
EVALUATE_KEYS = (
    "status", "bandwidth_gbps", "step_time_ns", "comm_time_ns", "compute_time_ns",
    "network_cost_usd", "time_x_cost", "network_power_w", "total_power_w", "energy_per_step_j",
    "step_time_libra_ns", "constraints", "timing_model",
    "network", "workload", "breakdown",
)


def evaluation_dict(ev: Any) -> dict:
    """An evaluate ``result.json`` (:data:`EVALUATE_KEYS`) of a
    `studies.job.evaluate.Evaluation`."""
    step_ns, cost = ev.step_time_ns, ev.network_cost_usd
    return {
        "status": "ok",
        "bandwidth_gbps": ev.bandwidth_gbps.tolist(),
        "step_time_ns": step_ns,
        "comm_time_ns": step_ns - ev.compute_time_ns,
        "compute_time_ns": ev.compute_time_ns,
        "network_cost_usd": cost,
        "time_x_cost": None if cost is None else step_ns * cost,
        **power_of(ev.bandwidth_gbps.tolist(), step_ns, ev.power),
        "step_time_libra_ns": ev.step_time_libra_ns,
        "constraints": ev.constraints,
        "timing_model": timing_dict(ev.timing_model),
        "network": network_dict(ev.network),
        "workload": workload_dict(ev.workload, ev.workload_file),
        "breakdown": ev.breakdown,
    }


def chunk_search_list(choice: Any) -> list:
    """``result.json``'s ``chunk_search``: one entry per candidate chunk count."""
    return [{"chunks": k, "status": r.status, "step_time_ns": json_num(r.step_time_ns),
             "time_x_cost": json_num(r.time_x_cost), "optimality_gap": json_num(r.optimality_gap),
             "bandwidth_gbps": json_nums(r.bandwidth_gbps), "best": i == choice.best}
            for i, (k, r) in enumerate(zip(choice.chunks, choice.results))]


def exact_gap(result: Any, exact_ns: float | None) -> float | None:
    """Certified bound on (simulated step - best simulated step) / best, for
    ``objective=perf``: the solver's certified lower bound of the
    convex model, which bounds the simulated step from below (``result.lower_bound``).
    None otherwise."""
    bound = json_num(getattr(result, "lower_bound", None))
    if exact_ns is None or bound is None or bound <= 0 or result.objective != "perf":
        return None
    return (exact_ns - bound) / bound


# ------------------------------------------------------------------ mapping co-search


def cosearch_mapping_dict(r: Any, reference: Any) -> dict:
    """JSON form of one mapping."""
    t, p, d = r.degrees
    return {
        "mapping": r.description,
        "tp": {"degree": t, "per_dim": list(r.placement.tp)},
        "pp": {"degree": p, "per_dim": list(r.placement.pp)},
        "dp": {"degree": d, "per_dim": list(r.placement.dp)},
        "step_time_ns": json_num(r.step_time_ns),
        "comm_time_ns": json_num(r.comm_time_ns),
        "bandwidth_gbps": json_nums(r.bandwidth_gbps),
        "speedup_vs_reference": None if reference is None else ratio(
            reference.step_time_ns, r.step_time_ns),
        "optimality_gap": json_num(r.optimality_gap),
        "status": r.status,
        "memory_gb": json_num(r.memory.total_bytes / 1e9),
        "fits_memory": bool(r.memory.fits),
    }


def cosearch_dict(res: Any, top_k: int) -> dict:
    """The ``cosearch`` entry of result.json."""
    return {
        "best": cosearch_mapping_dict(res.best, res.reference),
        "reference": None if res.reference is None else cosearch_mapping_dict(res.reference,
                                                                      res.reference),
        "top_k": [cosearch_mapping_dict(r, res.reference) for r in res.ranked[:top_k]],
        "placements_enumerated": res.enumerated,
        "placements_solved": len(res.ranked) + (
            1 if res.reference is not None and res.reference not in res.ranked else 0),
        "duplicates": res.duplicates,
        "dropped": dict(res.dropped),
        "dropped_examples": dict(res.dropped_examples),
        "solve_seconds": res.solve_seconds,
        "total_seconds": res.total_seconds,
    }


# ------------------------------------------------------------------ runtime co-design


#: The unit of a runtime run's objective values and lower bounds, by objective.
OBJECTIVE_UNITS = {"perf": "ns", "perf_per_cost": "ns*$", "perf_per_watt": "J"}


def runtime_dict(tm: Any) -> dict:
    """``result.json``'s ``runtime``: the runtime fields of a timing model."""
    return {"inter_dim_scheduling": tm.inter_dim_scheduling,
            "intra_dim_scheduling": tm.intra_dim_scheduling,
            "collective_optimization": tm.collective_optimization,
            "algorithm": None if tm.algorithm is None else list(tm.algorithm),
            "active_chunks_per_dim": int(tm.active_chunks_per_dim)}


def runtime_result_dict(run: Any) -> dict:
    """``result.json`` of a runtime run (`studies.job.train.RuntimeRun`): the chosen
    runtime and design, its simulated step, the certified bound and gap, the equal split
    and, for ``runtime=search``, every candidate and the table."""
    inp, opt, search = run.inputs, run.optimum, run.search
    bw = [float(x) for x in opt.bandwidth_gbps]
    rates = inp.cost_rates

    def cost(b):
        return None if rates is None else float(sum(float(r) * float(x) for r, x in zip(rates, b)))

    base_bw = [float(x) for x in opt.equal_split_gbps]
    c, bc = cost(bw), cost(base_bw)
    res = opt.model_result
    return {
        "objective": inp.objective,
        "status": res.status,
        "bandwidth_gbps": bw,
        "step_time_ns": opt.step_time_ns,
        "network_cost_usd": c,
        "time_x_cost": None if c is None else opt.step_time_ns * c,
        **power_of(bw, opt.step_time_ns, inp.power),
        "runtime_mode": "fixed" if search is None else "search",
        "runtime": runtime_dict(opt.timing_model),
        "objective_value": opt.objective_value,
        "objective_unit": OBJECTIVE_UNITS[inp.objective],
        "lower_bound": json_num(opt.lower_bound if search is None else search.lower_bound),
        "exact_optimality_gap": json_num(opt.gap if search is None else search.gap),
        "model_optimum_gbps": json_nums(res.bandwidth_gbps),
        "model_optimum_step_time_ns": opt.model_step_ns,
        "designs_simulated": opt.searched,
        "equal_split": {"bandwidth_gbps": base_bw, "step_time_ns": opt.equal_split_step_ns,
                        "network_cost_usd": bc,
                        "time_x_cost": None if bc is None else opt.equal_split_step_ns * bc},
        "speedup_vs_equal_split": ratio(opt.equal_split_step_ns, opt.step_time_ns),
        "runtime_search": None if search is None else {
            "candidates": [{"runtime": runtime_dict(o.timing_model),
                            "bandwidth_gbps": json_nums(o.bandwidth_gbps),
                            "step_time_ns": o.step_time_ns,
                            "objective_value": o.objective_value,
                            "lower_bound": json_num(o.lower_bound),
                            "exact_optimality_gap": json_num(o.gap)}
                           for o in search.candidates],
            "best": search.best,
            "table": [{"name": r.name, "runtime": runtime_dict(r.timing_model),
                       "bandwidth_gbps": json_nums(r.bandwidth_gbps),
                       "step_time_ns": r.step_time_ns, "network_cost_usd": r.network_cost_usd,
                       "objective_value": r.objective_value,
                       "speedup_vs_default": json_num(r.speedup),
                       "gain_vs_default": json_num(r.gain)} for r in search.rows]},
        "solve_seconds": (opt.seconds if search is None else search.seconds)
        - run.compile_seconds,
        "compile_seconds": run.compile_seconds,
        "timing_model": timing_dict(opt.timing_model),
        "network": network_dict(inp.network),
        "workload": workload_dict(inp.workload, run.workload_file),
    }
