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

import decimal
import logging
import pathlib

import hydra
import numpy as np
from omegaconf import DictConfig

from libra_jax.cli import config, jobs, report, runtime, tables
from libra_jax.cli.config import LibraConfig
from libra_jax.model import timing
from libra_jax.model.linear import parse_linear_constraints
from libra_jax.types import LibraInputError, float64, show

log = logging.getLogger(__name__)

#: Keys of an evaluate ``result.json``, in order.
EVALUATE_KEYS = (
    "status", "bandwidth_gbps", "step_time_ns", "comm_time_ns", "compute_time_ns",
    "network_cost_usd", "time_x_cost", "network_power_w", "total_power_w", "energy_per_step_j",
    "step_time_libra_ns", "constraints", "timing_model",
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
            f"bandwidth_gbps = {show(bw)}: has {len(bw)} entries but the network has "
            f"{num_dims} dimensions.")
    out = np.empty(num_dims)
    for i, v in enumerate(bw):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) \
                or v < 0:
            raise LibraInputError(
                f"bandwidth_gbps[{i}] = {show(v)}: must be a finite number >= 0 (GB/s).")
        out[i] = float(v)
    return out


def _check_lengths(spec, num_dims: int) -> None:
    """Per-dimension bounds have one entry per dimension (the constraint values themselves
    are checked when the spec is made)."""
    for field in ("lower_gbps", "upper_gbps"):
        values = getattr(spec, field)
        if values is not None and len(values) != num_dims:
            raise LibraInputError(
                f"constraints.{field} = {show(list(values))}: has {len(values)} entries but "
                f"the network has {num_dims} dimensions (give one value per dimension, or "
                "null).")


def rounding_gbps(bw: np.ndarray) -> np.ndarray:
    """[D] half a unit in the last digit of each bandwidth as written (its shortest repr,
    e.g. 338.45 -> 0.005): how far it may be from the number it was rounded from. 0 for a
    whole number, taken as exact."""
    out = np.zeros(len(bw))
    for i, v in enumerate(np.asarray(bw, dtype=np.float64)):
        if np.isfinite(v) and not float(v).is_integer():
            out[i] = 0.5 * 10.0 ** decimal.Decimal(repr(float(v))).as_tuple().exponent
    return out


def _num(x: float) -> str:
    """A number in a constraint message: 10 significant digits (499.999 is not 500)."""
    return f"{x:.10g}"


def constraint_report(spec, bw: np.ndarray, cost_usd: float | None,
                      cost_rates: np.ndarray | None = None) -> dict:
    """Which configured constraints the design meets (GB/s; tolerance 1e-9 relative).

    A violation no larger than the rounding of the digits the bandwidths were given with
    (:func:`rounding_gbps`; e.g. a design copied from a table printed to 3 decimals) says
    so, and points to the full-precision ``bandwidth_gbps`` line libra-train prints."""
    d = bw.shape[0]
    tol = 1e-9 * max(1.0, float(np.sum(bw)))
    half = rounding_gbps(bw)
    violated = []

    def add(text: str, amount: float, slack: float) -> None:
        if 0 < amount <= slack + tol:
            text += (f" (off by {amount:.3g}, within the rounding of the digits given: up to "
                     f"{slack:.3g}; evaluate the full-precision 'bandwidth_gbps=[...]' line "
                     "libra-train prints)")
        violated.append(text)

    if spec.total_bw_gbps is not None:
        total = float(np.sum(bw))
        gap = (abs(total - spec.total_bw_gbps) if spec.total_bw_mode == "eq"
               else total - spec.total_bw_gbps)
        if gap > tol:
            op = "==" if spec.total_bw_mode == "eq" else "<="
            add(f"constraints.total_bw_gbps: sum(bw) = {_num(total)} but must be {op} "
                f"{_num(spec.total_bw_gbps)}", gap, float(np.sum(half)))
    for field, values, sign in (("lower_gbps", spec.lower_gbps, 1),
                                ("upper_gbps", spec.upper_gbps, -1)):
        for i, v in enumerate(values or []):
            if v is not None and sign * (bw[i] - float(v)) < -tol:
                add(f"constraints.{field}[{i}] = {_num(float(v))}: bw[{i}] = {_num(bw[i])}",
                    abs(bw[i] - float(v)), half[i])
    linear = list(spec.linear or [])
    for i, text in enumerate(linear):
        a_eq, b_eq, a_in, b_in = parse_linear_constraints([text], d, "constraints.linear")
        gaps = np.concatenate([np.abs(a_eq @ bw - b_eq), a_in @ bw - b_in])
        slack = np.concatenate([np.abs(a_eq) @ half, np.abs(a_in) @ half])
        if np.any(gaps > tol):
            k = int(np.argmax(gaps))
            add(f'constraints.linear[{i}] = "{text}"', float(gaps[k]), float(slack[k]))
    if spec.max_cost_usd is not None and cost_usd is not None \
            and cost_usd > spec.max_cost_usd * (1 + 1e-9):
        slack = 0.0 if cost_rates is None else float(np.abs(cost_rates) @ half)
        add(f"constraints.max_cost_usd = {_num(spec.max_cost_usd)}: cost = {_num(cost_usd)}",
            cost_usd - spec.max_cost_usd, slack)
    if getattr(spec, "max_power_w", None) is not None:
        rates = np.asarray(spec.power_rates_w_per_gbps, np.float64)
        watts = float(rates @ bw)
        if watts > spec.max_power_w * (1 + 1e-9):
            add(f"constraints.max_power_w = {_num(spec.max_power_w)}: network power = "
                f"{_num(watts)} W", watts - spec.max_power_w, float(np.abs(rates) @ half))
    return {"satisfied": not violated, "violated": violated}


def run(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """Evaluate the configured design, print the table, write ``result.json``; returns the
    objective value (ns, or ns*$ for ``objective=perf_per_cost``)."""
    if c.workloads is not None or c.cosearch.enabled:
        raise LibraInputError(
            "libra_jax.evaluate evaluates one workload: workloads=... and cosearch.enabled "
            "are libra_jax.train options.")
    network, workload, cost_rates, spec = config.to_inputs(c)
    tm, chunk_counts = config.to_timing(c, network.num_dims, network)
    if chunk_counts is not None:
        raise LibraInputError(
            f"system.chunks = {show(chunk_counts)}: evaluate takes one chunk count (a list is a "
            "search, which libra_jax.train runs).")
    bw = _design(c, network.num_dims)
    _check_lengths(spec, network.num_dims)
    coll_ns, breakdown = timing.collective_times_ns(workload, network, tm, bw)
    for i, part in enumerate(breakdown):
        if not np.isfinite(part["time_ns"]):
            used = [d for d, b in enumerate(part["bandwidth_ns"]) if not np.isfinite(b)]
            raise LibraInputError(
                f"bandwidth_gbps[{used[0] if used else '?'}] = 0 but that dimension carries "
                f"{part['collective']} traffic of layer {part['layer']} ({part['phase']}).")
    compute_ns = float(np.sum(workload.compute_ns))
    step_ns = timing.step_time_ns(workload, network, tm, bw)
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
        **report.power_of(bw.tolist(), step_ns, jobs.power_of_run(c, network, spec)),
        "step_time_libra_ns": libra_ns,
        "constraints": constraint_report(spec, bw, cost, cost_rates),
        "timing_model": report.timing_dict(tm),
        "network": report.network_dict(network),
        "workload": report.workload_dict(workload, workload_file),
        "breakdown": breakdown,
    }
    print(tables.format_evaluation(data, network, workload, tm), flush=True)
    jobs.export_astrasim(c, output_dir, network, bw, tm, workload)
    report.write_json(output_dir / "result.json", data)
    key = jobs.objective_key(c.objective)
    value = runtime.objective_value(data[key])
    violated = data["constraints"]["violated"]
    verdict = "met" if not violated else "VIOLATED" + (
        " (within the rounding of the digits given)"
        if all("within the rounding" in v for v in violated) else "")
    log.info("design %s GB/s: %s %.10g, constraints %s", data["bandwidth_gbps"], key, value,
             verdict)
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
    runtime.compose_once()
    main()
    runtime.exit_on_failures()
    runtime.end_process()

