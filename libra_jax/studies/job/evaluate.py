"""What ``libra-evaluate`` computes for a given design (no optimisation): the step time of the
configured workload at the given per-dimension bandwidths under the chosen step-time model, its
network cost and power, whether it meets the configured constraints, and where the time goes (a
per-collective, per-dimension breakdown: bandwidth, latency, local reduction, pipeline
fill/drain), as an :class:`Evaluation`. The command (`libra_jax.cli.evaluate`) prints and writes
it.
"""

from __future__ import annotations

import dataclasses
import decimal
from typing import Any

import numpy as np

from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import Network
from libra_jax.inputs.workload import Workload
from libra_jax.model import timing
from libra_jax.model.linear import parse_linear_constraints
from libra_jax.model.problem import ConstraintSpec
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.inputs import to_inputs, to_timing
from libra_jax.studies.job.train import Power, power_of_run
from libra_jax.types import LibraInputError, show


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """A design evaluated (:func:`evaluate`).

    Attributes:
      network, workload, spec, timing_model: the run's inputs.
      bandwidth_gbps: [D] the design, GB/s per NPU per dimension.
      step_time_ns, compute_time_ns: the step and its compute, ns (communication: the rest).
      step_time_libra_ns: the step under LIBRA's model (no overlap) when the run's model is
        another, else None.
      network_cost_usd: the design's network cost, $, or None without a cost model.
      power: (rates [D] W per GB/s, static W), or None without the tiers' Energy.
      constraints: {satisfied, violated: [messages]} (`constraint_report`).
      breakdown: per collective and dimension, where the time goes
        (`model.timing.collective_times_ns`).
      workload_file: the workload file as resolved, or None for a generated workload.
    """

    network: Network
    workload: Workload
    spec: ConstraintSpec
    timing_model: timing.TimingModel
    bandwidth_gbps: np.ndarray
    step_time_ns: float
    compute_time_ns: float
    step_time_libra_ns: float | None
    network_cost_usd: float | None
    power: Power
    constraints: dict
    breakdown: list
    workload_file: Any


def evaluate(c: LibraConfig) -> Evaluation:
    """Evaluate the configured design (``bandwidth_gbps``) on the configured workload."""
    if c.workloads is not None or c.cosearch.enabled:
        raise LibraInputError(
            "libra_jax.evaluate evaluates one workload: workloads=... and cosearch.enabled "
            "are libra_jax.train options.")
    network, workload, cost_rates, spec = to_inputs(c)
    tm, chunk_counts = to_timing(c, network.num_dims, network)
    if chunk_counts is not None:
        raise LibraInputError(
            f"system.chunks = {show(chunk_counts)}: evaluate takes one chunk count (a list is a "
            "search, which libra_jax.train runs).")
    bw = design_bandwidths(c, network.num_dims)
    check_lengths(spec, network.num_dims)
    coll_ns, breakdown = timing.collective_times_ns(workload, network, tm, bw)
    for i, part in enumerate(breakdown):
        if not np.isfinite(part["time_ns"]):
            used = [d for d, b in enumerate(part["bandwidth_ns"]) if not np.isfinite(b)]
            raise LibraInputError(
                f"bandwidth_gbps[{used[0] if used else '?'}] = 0 but that dimension carries "
                f"{part['collective']} traffic of layer {part['layer']} ({part['phase']}).")
    step_ns = timing.step_time_ns(workload, network, tm, bw)
    libra_ns = None
    if not tm.is_reference:
        ref_ns, _ = timing.collective_times_ns(workload, network, timing.TimingModel(), bw)
        libra_ns = timing.loop_step_time_ns(workload.compute_ns, ref_ns, "no_overlap")
    cost = None if cost_rates is None else float(np.asarray(cost_rates) @ bw)
    return Evaluation(
        network=network, workload=workload, spec=spec, timing_model=tm, bandwidth_gbps=bw,
        step_time_ns=step_ns, compute_time_ns=float(np.sum(workload.compute_ns)),
        step_time_libra_ns=libra_ns, network_cost_usd=cost,
        power=power_of_run(c, network, spec),
        constraints=constraint_report(spec, bw, cost, cost_rates), breakdown=breakdown,
        workload_file=(None if c.workload.file is None
                       else resolve_path(c.workload.file, "workload.file")))


def design_bandwidths(c: LibraConfig, num_dims: int) -> np.ndarray:
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


def check_lengths(spec, num_dims: int) -> None:
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
