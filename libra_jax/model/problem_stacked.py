"""`problems_from_stacked`: a batch of problems of one constraint form built at once, as one
`Problem` with a leading batch axis, vectorised over the batch (the closed form; the few
problems it leaves to the LP path built one at a time by `problem_build.build`)."""

from __future__ import annotations

import math

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_numbers, as_str
from libra_jax.model.closed_form import closed_form as _closed_form
from libra_jax.model.closed_form import over_dims as _over_dims
from libra_jax.model.problem_build import (
    MAX_COMPUTE_S,
    MAX_RATE_USD_PER_GBPS,
    MAX_TRAFFIC_GB,
    batch_range,
    build,
    check_bounds,
)
from libra_jax.model.problem_spec import ConstraintSpec, check_mode
from libra_jax.model.problem_tree import Problem, check_finite_result, no_rows
from libra_jax.types import LibraInputError


def _batch_array(values, shape, field: str, default: float | None = None) -> np.ndarray:
    """float64 array of ``shape`` ([B, ...]) from ``values`` of that shape, or of shape[1:]
    (the same for every problem of the batch; a fresh copy either way)."""
    if values is None:
        return np.full(shape, default, np.float64)
    x = as_numbers(values, field)
    if x.shape != tuple(shape) and x.shape != tuple(shape[1:]):
        raise LibraInputError(
            f"{field} has shape {x.shape}: expected {list(shape)} (or {list(shape[1:])} for "
            "the same values in every problem)."
        )
    return np.array(np.broadcast_to(x, shape), np.float64)


def _first_bad(bad: np.ndarray, values: np.ndarray, field: str, rule: str):
    """Raises for the first True entry of ``bad`` (problem index first), naming it."""
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        where = "".join(f"[{i}]" for i in index)
        raise LibraInputError(f"{field}{where} = {values[index]:g}: {rule}")


def problems_from_stacked(
    traffic_gb,
    weight,
    compute_s,
    *,
    total_bw_gbps=None,
    total_bw_mode: str = "eq",
    lower_gbps=None,
    upper_gbps=None,
    cost_rates_usd_per_gbps=None,
    max_cost_usd=None,
    field_prefix: str = "constraints",
) -> Problem:
    """B problems of one constraint form at once, as ONE `Problem` with a leading batch axis.

    Vectorised over the batch (no Python loop over problems): validation, then the closed form
    of `_closed_form` for the constraint fields. Each problem's constraint fields equal
    `problem_from_arrays` on it. Phases are not merged: a phase with weight 0 or no traffic
    stays, as a row of zero traffic with weight 0 (the solver's padding), so all problems keep
    the same K. The few problems the closed form leaves to the LP path (see `_closed_form`) are
    built by it one at a time, which also words their errors (infeasible: the LP's minimal
    conflicting subset; unbounded), prefixed with the problem's index.

    Args:
      traffic_gb: [B, K, D] GB each phase moves on each dim.
      weight: [B, K] how many times each phase occurs in a step (>= 0).
      compute_s: [B] compute time of a step (s), or one value for all.
      total_bw_gbps: [B] or one total (> 0), or None for no total.
      total_bw_mode: "eq" (sum == total) or "le" (sum <= total), for the whole batch.
      lower_gbps, upper_gbps: [B, D] or [D] bounds, or None (0 / none); upper +inf for none.
      cost_rates_usd_per_gbps: [B, D] or [D] $ per GB/s of each dim (finite, >= 0), or None
        without a cost model.
      max_cost_usd: [B] or one cost budget (finite, > 0), or None; needs cost rates.
      field_prefix: config prefix used in error messages.

    Returns:
      A `Problem` whose array leaves have a leading axis B (numpy): traffic_gb [B, K, D],
      weight [B, K], compute_s [B], the constraint fields ([B, D], a_eq [B, E, D] with one row
      per equality: the total in mode "eq"; a_in [B, I, D]: the total in mode "le", then the
      budget), and empty general-model rows (piece_weight [B, 0], row_gb [B, 0, D], ...).

    Raises:
      LibraInputError: naming the field, the problem index (and dim) and the value.
    """
    f = as_str(field_prefix, "field_prefix")
    traffic = np.array(as_numbers(traffic_gb, "traffic_gb"), np.float64)  # a copy: see below
    if traffic.ndim != 3:
        raise LibraInputError(f"traffic_gb has shape {traffic.shape}: expected [B, K, D].")
    nb, k, d = traffic.shape
    if d > LIMITS.max_dims:
        raise LibraInputError(
            f"traffic_gb has {d} dimensions; at most {LIMITS.max_dims} are supported "
            "(LIMITS.max_dims).")
    weight = _batch_array(weight, (nb, k), "weight")
    compute = _batch_array(compute_s, (nb,), "compute_s")
    finite_rule = "must be a finite number >= 0."
    batch_range(traffic, "traffic_gb", finite_rule, hi=MAX_TRAFFIC_GB,
                 unit=" (GB, LIMITS.max_bytes x LIMITS.max_npus / 1e9)")
    batch_range(weight, "weight", finite_rule)
    batch_range(compute, "compute_s", finite_rule, hi=MAX_COMPUTE_S,
                 unit=" (s, 3 x LIMITS.max_layers x LIMITS.max_ns / 1e9)")
    lo = _batch_array(lower_gbps, (nb, d), f"{f}.lower_gbps", 0.0)
    hi = _batch_array(upper_gbps, (nb, d), f"{f}.upper_gbps", np.inf)
    _first_bad(np.isnan(lo), lo, f"{f}.lower_gbps", "not a number.")
    _first_bad(np.isnan(hi), hi, f"{f}.upper_gbps", "not a number.")
    bad = ~((lo >= 0) & (lo < np.inf) & (hi > 0) & (hi >= lo))
    if bad.any():
        b = int(np.argwhere(bad)[0, 0])
        check_bounds(lo[b], hi[b], f, f"[{b}]")
    gbps_unit = " (GB/s per NPU, LIMITS.max_gbps)"
    batch_range(lo, f"{f}.lower_gbps", "", hi=LIMITS.max_gbps, unit=gbps_unit)
    batch_range(hi, f"{f}.upper_gbps", "", lo_open=True, hi=LIMITS.max_gbps, unit=gbps_unit,
                 inf_ok=True)
    total = None
    if total_bw_gbps is not None:
        total = _batch_array(total_bw_gbps, (nb,), f"{f}.total_bw_gbps")
        batch_range(total, f"{f}.total_bw_gbps", "must be > 0.", lo_open=True,
                     hi=LIMITS.max_gbps, unit=gbps_unit)
    total_bw_mode = check_mode(total_bw_mode, f)
    has_cost = cost_rates_usd_per_gbps is not None
    rates = None
    if has_cost:
        rates = _batch_array(cost_rates_usd_per_gbps, (nb, d), "cost_rates_usd_per_gbps")
        batch_range(rates, "cost_rates_usd_per_gbps", finite_rule, hi=MAX_RATE_USD_PER_GBPS,
                     unit=" ($ per GB/s, LIMITS.max_usd)")
    budget = None
    if max_cost_usd is not None:
        if not has_cost:
            raise LibraInputError(
                f"{f}.max_cost_usd: a cost budget needs a cost model (set cost_model.file)."
            )
        budget = _batch_array(max_cost_usd, (nb,), f"{f}.max_cost_usd")
        batch_range(budget, f"{f}.max_cost_usd", "must be a finite number > 0.",
                     lo_open=True, hi=LIMITS.max_usd, unit=" ($, LIMITS.max_usd)")

    # Phases that cannot change the step time become padding: no traffic, weight 0.
    keep = (weight > 0) & _over_dims(np.logical_or, traffic > 0)
    traffic *= keep[:, :, None]
    weight *= keep
    fields, ok = _closed_form(lo, hi, total, total_bw_mode == "eq", rates, budget,
                              (traffic > 0).any(axis=1))
    for b in np.flatnonzero(~ok):
        spec = ConstraintSpec(
            total_bw_gbps=None if total is None else float(total[b]),
            total_bw_mode=total_bw_mode, lower_gbps=list(lo[b]), upper_gbps=list(hi[b]),
            max_cost_usd=None if budget is None else float(budget[b]))
        try:
            p = build(traffic[b], weight[b], float(compute[b]),
                       None if rates is None else rates[b], spec, f, None, closed_form=False)
        except LibraInputError as e:
            raise LibraInputError(f"problem {b} of the batch: {e}") from None
        for name, value in fields.items():
            value[b] = getattr(p, name)
    _check_finite_stacked(fields, traffic, weight, compute, has_cost, f)
    return Problem(traffic_gb=traffic, weight=weight, compute_s=compute, **fields,
                   **no_rows((nb,), d), has_cost=has_cost)


def _check_finite_stacked(fields: dict, traffic, weight, compute, has_cost: bool,
                          f: str) -> None:
    """`check_finite_result` for a stacked batch. First a bound over the whole batch from
    a few reductions (the largest compute, weight, traffic and cost rate, the least
    interior bandwidth and the largest ``upper``): when it is finite, so is every problem's
    step time and cost, and that is all (a few ms for 10^5 problems). Otherwise the
    problems are evaluated one by one (vectorised) and the first that overflows is
    named."""
    x, upper = fields["interior"], fields["upper"]
    if x.size == 0:
        return
    k, d = traffic.shape[1:]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        step = (compute.max(initial=0.0) + k * weight.max(initial=0.0)
                * traffic.max(initial=0.0) / x.min()) * 1e9
        cost = (d * fields["cost_rate"].max(initial=0.0) * upper.max(initial=0.0)
                if has_cost else 0.0)
        if math.isfinite(step) and math.isfinite(cost) and math.isfinite(step * cost):
            return
        used = traffic > 0
        t = np.where(used, traffic / np.where(used, x[:, None, :], 1.0), 0.0)
        step = (compute + _over_dims(np.add, weight * _over_dims(np.maximum, t))) * 1e9
        cost = _over_dims(np.add, fields["cost_rate"] * upper) if has_cost else np.zeros_like(step)
        bad = ~(np.isfinite(step) & np.isfinite(cost) & np.isfinite(step * cost))
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        one = {name: value[b] for name, value in fields.items()}
        check_finite_result(one, traffic[b], weight[b], float(compute[b]), no_rows((), d),
                             has_cost, f, problem=f"problem {b} of the batch: ")
