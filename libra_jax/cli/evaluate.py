"""Command line: ``libra-evaluate conf=gpt3_4d bandwidth_gbps=[...] [key=value ...]`` (or
``python -m libra_jax.evaluate``).

Evaluates a given design (no optimisation) with the same configs as ``libra_jax.train``: the
step time of the configured workload at the given per-dimension bandwidths under the chosen
step-time model (``model``, ``schedule``, ``training_loop``, ``network.latency_ns``,
``system.*``), its network cost, whether it meets the configured constraints, and where the
time goes: a per-collective, per-dimension breakdown (bandwidth, latency, local reduction,
pipeline fill/drain). This is also how to check the model against one's own measurements.

Prints a table and writes ``result.json`` (README "Evaluate a design"); logs the status
(``<run dir>/evaluate.log``); bad input logs one ``error:`` paragraph and exits non-zero, as
``libra-train`` does. :func:`main` returns the design's objective value (step time in ns, or
step time x network cost in ns*$ for ``objective=perf_per_cost``), so a sweeper plugin can
search designs.
"""

from __future__ import annotations

import logging
import pathlib

import hydra
import numpy as np
from omegaconf import DictConfig

from libra_jax.cli import config, jobs, report, runtime
from libra_jax.cli.config import LibraConfig
from libra_jax.model import timing
from libra_jax.model.linear import parse_linear_constraints
from libra_jax.types import LibraInputError, float64

log = logging.getLogger(__name__)

#: Keys of an evaluate ``result.json``, in order.
EVALUATE_KEYS = (
    "status", "bandwidth_gbps", "step_time_ns", "comm_time_ns", "compute_time_ns",
    "network_cost_usd", "time_x_cost", "step_time_libra_ns", "constraints", "timing_model",
    "network", "workload", "breakdown",
)


def _design(c: LibraConfig, num_dims: int) -> np.ndarray:
    bw = c.bandwidth_gbps
    if bw is None:
        raise LibraInputError(
            "bandwidth_gbps is null: give the design to evaluate, one GB/s per dimension, e.g. "
            f"bandwidth_gbps=[{', '.join(['100'] * num_dims)}].")
    bw = list(bw)
    if len(bw) != num_dims:
        raise LibraInputError(
            f"bandwidth_gbps = {bw}: has {len(bw)} entries but the network has {num_dims} "
            "dimensions.")
    out = np.empty(num_dims)
    for i, v in enumerate(bw):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) \
                or v < 0:
            raise LibraInputError(
                f"bandwidth_gbps[{i}] = {v!r}: must be a finite number >= 0 (GB/s).")
        out[i] = float(v)
    return out


def constraint_report(spec, bw: np.ndarray, cost_usd: float | None) -> dict:
    """Which configured constraints the design meets (GB/s; tolerance 1e-9 relative)."""
    d = bw.shape[0]
    tol = 1e-9 * max(1.0, float(np.sum(bw)))
    violated = []
    if spec.total_bw_gbps is not None:
        total = float(np.sum(bw))
        bad = (abs(total - spec.total_bw_gbps) > tol if spec.total_bw_mode == "eq"
               else total > spec.total_bw_gbps + tol)
        if bad:
            op = "==" if spec.total_bw_mode == "eq" else "<="
            violated.append(f"constraints.total_bw_gbps: sum(bw) = {total:g} but must be "
                            f"{op} {spec.total_bw_gbps:g}")
    for field, values, sign in (("lower_gbps", spec.lower_gbps, 1),
                                ("upper_gbps", spec.upper_gbps, -1)):
        for i, v in enumerate(values or []):
            if v is not None and sign * (bw[i] - float(v)) < -tol:
                violated.append(f"constraints.{field}[{i}] = {float(v):g}: bw[{i}] = {bw[i]:g}")
    linear = list(spec.linear or [])
    for i, text in enumerate(linear):
        a_eq, b_eq, a_in, b_in = parse_linear_constraints([text], d, "constraints.linear")
        if np.any(np.abs(a_eq @ bw - b_eq) > tol) or np.any(a_in @ bw - b_in > tol):
            violated.append(f'constraints.linear[{i}] = "{text}"')
    if spec.max_cost_usd is not None and cost_usd is not None \
            and cost_usd > spec.max_cost_usd * (1 + 1e-9):
        violated.append(f"constraints.max_cost_usd = {spec.max_cost_usd:g}: cost = "
                        f"{cost_usd:g}")
    return {"satisfied": not violated, "violated": violated}


def run(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """Evaluate the configured design, print the table, write ``result.json``; returns the
    objective value (ns, or ns*$ for ``objective=perf_per_cost``)."""
    if c.workloads is not None or c.cosearch.enabled:
        raise LibraInputError(
            "libra_jax.evaluate evaluates one workload: workloads=... and cosearch.enabled "
            "are libra_jax.train options.")
    network, workload, cost_rates, spec = config.to_inputs(c)
    tm, chunk_counts = config.to_timing(c, network.num_dims)
    if chunk_counts is not None:
        raise LibraInputError(
            f"system.chunks = {chunk_counts}: evaluate takes one chunk count (a list is a "
            "search, which libra_jax.train runs).")
    bw = _design(c, network.num_dims)
    coll_ns, breakdown = timing.collective_times_ns(workload, network, tm, bw)
    for i, part in enumerate(breakdown):
        if not np.isfinite(part["time_ns"]):
            used = [d for d, b in enumerate(part["bandwidth_ns"]) if not np.isfinite(b)]
            raise LibraInputError(
                f"bandwidth_gbps[{used[0] if used else '?'}] = 0 but that dimension carries "
                f"{part['collective']} traffic of layer {part['layer']} ({part['phase']}).")
    compute_ns = float(np.sum(workload.compute_ns))
    step_ns = timing.loop_step_time_ns(workload.compute_ns, coll_ns, tm.training_loop)
    libra_ns = None
    if not tm.is_reference:
        ref_ns, _ = timing.collective_times_ns(workload, network, timing.TimingModel(), bw)
        libra_ns = timing.loop_step_time_ns(workload.compute_ns, ref_ns, "no_overlap")
    cost = None if cost_rates is None else float(np.asarray(cost_rates) @ bw)
    workload_file = (None if c.workload.file is None
                     else config.resolve_path(c.workload.file, "workload.file"))
    data = {
        "status": "ok",
        "bandwidth_gbps": bw.tolist(),
        "step_time_ns": step_ns,
        "comm_time_ns": step_ns - compute_ns,
        "compute_time_ns": compute_ns,
        "network_cost_usd": cost,
        "time_x_cost": None if cost is None else step_ns * cost,
        "step_time_libra_ns": libra_ns,
        "constraints": constraint_report(spec, bw, cost),
        "timing_model": report.timing_dict(tm),
        "network": report.network_dict(network),
        "workload": report.workload_dict(workload, workload_file),
        "breakdown": breakdown,
    }
    print(report.format_evaluation(data, network, workload, tm), flush=True)
    jobs.export_astrasim(c, output_dir, network, bw, tm)
    report.write_json(output_dir / "result.json", data)
    key = jobs.objective_key(c.objective)
    value = runtime.objective_value(data[key])
    log.info("design %s GB/s: %s %.10g, constraints %s", data["bandwidth_gbps"], key, value,
             "met" if data["constraints"]["satisfied"] else "VIOLATED")
    log.info("result: %s", output_dir / "result.json")
    return value


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
@float64
def main(cfg: DictConfig) -> float:
    """Hydra entry point (one job): the design's objective value; +inf if the job failed."""
    return runtime.run_job(cfg, run)


def cli() -> None:
    config.check_command_line("libra_jax.evaluate",
                              "conf=gpt3_4d bandwidth_gbps=[125,125,125,125]")
    main()
    runtime.exit_on_failures()

