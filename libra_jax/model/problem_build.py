"""The one-by-one builders of a `Problem`: `build_problem` (a network and workload),
`problem_from_arrays` (traffic arrays; a problem sure to build is left unbuilt until a field
is read), `with_workload` (another workload on a problem's constraints), `with_cost_rates`
(other prices), and every check of their arguments, in the order of their messages."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from libra_jax.inputs.limits import (
    LIMITS,
    as_instance,
    as_numbers,
    as_real,
    as_str,
)
from libra_jax.inputs.topology import Network
from libra_jax.inputs.workload import Workload
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model import quick_checks
from libra_jax.model.linear import parse_linear_constraints
from libra_jax.model.problem_lp import linprog
from libra_jax.model.problem_spec import ConstraintSpec, ModelRows, check_spec, power_row, vector
from libra_jax.model.problem_tree import (
    ARRAY_FIELDS,
    FIELD_GROUPS,
    Inputs,
    Problem,
    assemble,
    check_finite_result,
    merge_phases,
    merge_weighted_phases,
    no_rows,
)
from libra_jax.types import LibraInputError, show


#: Largest traffic of one phase on one dimension (GB): a collective of ``LIMITS.max_bytes``
#: all-gathered over ``LIMITS.max_npus`` NPUs, the most any collective of the loaders' limits
#: moves (`collectives.traffic_bytes`).
MAX_TRAFFIC_GB = LIMITS.max_bytes * LIMITS.max_npus / 1e9


#: Longest compute time of a step (s): every phase of ``LIMITS.max_layers`` layers computing
#: for ``LIMITS.max_ns``.
MAX_COMPUTE_S = 3 * LIMITS.max_layers * LIMITS.max_ns / 1e9


#: Highest cost rate ($ per GB/s per NPU of a dimension): one GB/s may cost at most the
#: largest cost budget, ``LIMITS.max_usd``.
MAX_RATE_USD_PER_GBPS = LIMITS.max_usd


def _check_rows(rows: ModelRows | None, d: int) -> dict:
    """The general-model fields of `Problem` (group "rows") from ``rows``, validated (`no_rows`
    for None); drops pieces of weight 0 and their rows (they cannot change the time and
    would leave their variable free)."""
    if rows is None:
        return no_rows((), d)
    as_instance(rows, ModelRows, "rows")
    w = as_numbers(rows.weight, "model rows: weight").astype(np.float64).reshape(-1)
    piece = as_numbers(rows.piece, "model rows: piece").reshape(-1)
    c = as_numbers(rows.const_s, "model rows: const_s").astype(np.float64).reshape(-1)
    a = as_numbers(rows.coef_gb, "model rows: coef_gb").astype(np.float64)
    c0 = as_real(rows.const0_s, "model rows: const0_s", None, None)
    if a.ndim != 2 or a.shape != (piece.shape[0], d) or c.shape != piece.shape:
        raise LibraInputError(
            f"model rows: coef_gb has shape {a.shape}, const_s {c.shape} and piece "
            f"{piece.shape}; expected [R, {d}], [R] and [R]."
        )
    if not (np.all(np.isfinite(w)) and np.all(w >= 0)):
        raise LibraInputError("model rows: every piece weight must be a finite number >= 0.")
    if not (np.all(np.isfinite(a)) and np.all(a >= 0)):
        raise LibraInputError("model rows: every coef_gb entry must be a finite number >= 0.")
    if not (np.all(np.isfinite(c)) and math.isfinite(c0)):
        raise LibraInputError("model rows: const_s and const0_s must be finite numbers.")
    if piece.size and (not np.issubdtype(piece.dtype, np.integer) or piece.min() < 0
                       or piece.max() >= w.shape[0]):
        raise LibraInputError(f"model rows: piece indices must be integers in [0, {len(w)}).")
    nest = (np.zeros((piece.shape[0], w.shape[0])) if rows.nest is None
            else as_numbers(rows.nest, "model rows: nest").astype(np.float64))
    if nest.shape != (piece.shape[0], w.shape[0]):
        raise LibraInputError(
            f"model rows: nest has shape {nest.shape}; expected [R, J] = "
            f"{(piece.shape[0], w.shape[0])}.")
    if not (np.all(np.isfinite(nest)) and np.all(nest >= 0)):
        raise LibraInputError("model rows: every nest entry must be a finite number >= 0.")
    if piece.size and np.any(nest[np.arange(w.shape[0])[None, :] >= piece[:, None]] != 0):
        raise LibraInputError("model rows: a row may only nest pieces of lower index.")
    # Pieces that count: weight > 0, or nested in one that counts (walk down the order).
    needed = w > 0
    for j in range(w.shape[0] - 1, -1, -1):
        if needed[j]:
            needed |= np.any(nest[piece == j] > 0, axis=0)
    if np.any(np.bincount(piece, minlength=w.shape[0])[needed] == 0):
        raise LibraInputError("model rows: a piece that counts has no row.")
    new_index = np.cumsum(needed) - 1
    keep_row = needed[piece]
    return dict(piece_weight=w[needed], row_piece=new_index[piece[keep_row]].astype(np.int32),
                row_const_s=c[keep_row], row_gb=a[keep_row],
                row_nest=nest[keep_row][:, needed], row_on=np.ones(int(keep_row.sum()), bool),
                comm_const_s=np.asarray(c0, np.float64))


def with_cost_rates(p: Problem, rates) -> Problem:
    """``p`` priced by other rates (e.g. network power, W per GB/s): ``cost_rate`` replaced
    and ``min_cost_bw`` the feasible point of least ``rates @ bw`` (an LP over p's rows and
    bounds). ``perf_per_watt`` is the ``perf_per_cost`` search of this problem. Host only."""
    as_instance(p, Problem, "p")
    d = p.num_dims
    r = _rates(rates, d)
    lo, hi = np.asarray(p.lo, np.float64), np.asarray(p.hi, np.float64)
    a_in = np.asarray(p.a_in, np.float64).reshape(-1, d)
    a_eq = np.asarray(p.a_eq, np.float64).reshape(-1, d)
    bounds = [(lo[i], hi[i] if np.isfinite(hi[i]) else None) for i in range(d)]
    res = linprog(r, a_in, np.asarray(p.b_in, np.float64), a_eq,
                   np.asarray(p.b_eq, np.float64), bounds)
    least = (np.clip(res.x, lo, hi) if res.status == 0
             else np.asarray(p.interior, np.float64).copy())
    return dataclasses.replace(p, cost_rate=r, min_cost_bw=least, has_cost=True)


def build_problem(
    network,
    workload,
    cost_rates_usd_per_gbps: np.ndarray | None,
    spec: ConstraintSpec,
    *,
    field_prefix: str = "constraints",
    rows: ModelRows | None = None,
) -> Problem:
    """Validates the inputs and builds the `Problem` (float64 arrays).

    Args:
      network: `topology.Network`.
      workload: `workload.Workload` already checked against the network.
      cost_rates_usd_per_gbps: [D] $ per GB/s of each dim, or None without a cost model.
      spec: the constraints.
      field_prefix: config prefix used in error messages.
      rows: a communication model beyond LIBRA's (`ModelRows`); it replaces the LIBRA
        traffic of the workload, whose compute time is kept.

    Raises:
      LibraInputError: bad values, unbounded bandwidth, or constraints that cannot hold
        together (the message lists a minimal conflicting subset).
    """
    as_instance(network, Network, "network")
    as_instance(workload, Workload, "workload")
    d = network.num_dims
    if workload.num_dims != d:
        raise LibraInputError(
            f"workload {show(workload.name)}: its communicators have {workload.num_dims} entries "
            f"but the network {network.notation} has {d} dimensions.")
    traffic = np.asarray(
        traffic_bytes(
            np.asarray(workload.collective),
            np.asarray(workload.size_bytes, np.float64),
            np.asarray(workload.communicator),
        ),
        np.float64,
    ).reshape(-1, d)
    traffic_gb, weight = merge_phases(traffic / 1e9)  # (problem_from_arrays would too)
    compute_s = float(np.sum(workload.compute_ns)) / 1e9
    if rows is not None:
        traffic_gb, weight = np.zeros((0, d)), np.zeros(0)
    return problem_from_arrays(
        traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec,
        field_prefix=field_prefix, rows=rows,
    )


def problem_from_arrays(
    traffic_gb: np.ndarray,
    weight: np.ndarray,
    compute_s: float,
    cost_rates_usd_per_gbps: np.ndarray | None,
    spec: ConstraintSpec,
    *,
    field_prefix: str = "constraints",
    rows: ModelRows | None = None,
) -> Problem:
    """`build_problem` from traffic arrays: traffic_gb [K, D] (GB), weight [K], compute_s (s).

    Phases that move nothing or have weight 0 are dropped and identical phases merged (their
    weights summed): they cannot change the step time, and a weight-0 phase would leave its
    epigraph variable unbounded in the solver. ``rows`` adds a general communication model
    (`ModelRows`); pass ``traffic_gb`` of shape [0, D] to use only that model.

    Without ``spec.linear`` rows the feasibility checks, bounds, tight sets and the interior
    and least-cost points come in closed form (`_closed_form`, no LP); with linear rows, and
    for the few problems the closed form leaves to them (infeasible, unbounded or degenerate
    ones, see `_closed_form`), from HiGHS LPs (`lp_fields`), which also word the errors.
    Fields are numpy arrays (float64, bool, int32).

    Every argument is checked here, and every error raised here. A problem that is certain
    to build (`quick_checks.surely_builds`: no linear rows, power cap or ``rows``,
    constraints that hold strictly, a finite step time) is returned unbuilt: it is built on
    first access to a field (`materialise`), or, in a list given to `batch.solve_batch` or
    `warm_up`, together with the others in one vectorised pass (`bulk.build_all`); either
    way its arrays are, to the last bit, those of building it here, without the per-problem
    cost (`Problem` pickles built).
    """
    if rows is None and type(spec) is ConstraintSpec:
        quick = _quick(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec,
                       field_prefix)
        if quick is not None and quick_checks.surely_builds(*quick):
            p = object.__new__(Problem)
            p.__dict__.update(_lazy=quick[0], has_cost=quick[0].has_cost)
            return p
    return build(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec, field_prefix,
                  rows, closed_form=True)


def _quick_inputs(traffic_gb, weight, compute_s, cost_rates, spec: ConstraintSpec,
                  field_prefix) -> Inputs | None:
    """`_checked` by the fast paths of `quick_checks`, for plain inputs that pass every
    check (no linear rows, power cap or general model); None for anything else, which
    `_checked` then accepts or refuses. The bound and rate vectors come as tuples of floats
    (`quick_checks.surely_builds` reads them; `with_arrays` makes them arrays), the linear
    rows as (): a tuple of untracked objects leaves Python's garbage collector, whose full
    collections, scanning every container, took a third of building 10,000 problems when
    each kept three lists."""
    quick = _quick(traffic_gb, weight, compute_s, cost_rates, spec, field_prefix)
    return None if quick is None else quick[0]


def _quick(traffic_gb, weight, compute_s, cost_rates, spec: ConstraintSpec,
           field_prefix) -> tuple[Inputs, float] | None:
    """(`_quick_inputs`, a bound of the load sum_k w_k max_d T_kd: the weights' sum times
    the largest traffic) or None."""
    if not quick_checks.spec_ok(spec, field_prefix, bounds=False):
        return None  # (the bounds: `bound_list` below, with the dims)
    t = quick_checks.checked(traffic_gb, MAX_TRAFFIC_GB)
    w = quick_checks.checked(weight, None)
    if t is None or w is None:
        return None
    traffic, weight = t[0], w[0]
    if traffic.ndim != 2 or weight.shape != traffic.shape[:1]:
        return None
    d = traffic.shape[1]
    if d == 0 or d > LIMITS.max_dims:
        return None
    compute = quick_checks.real(compute_s, 0.0, MAX_COMPUTE_S)
    if compute is None:
        return None
    has_cost = cost_rates is not None
    rates = (0.0,) * d
    if has_cost:
        given = quick_checks.in_range(cost_rates, MAX_RATE_USD_PER_GBPS)
        if given is None or given.shape != (d,):
            return None
        rates = tuple(given.tolist())
    lo = quick_checks.bound_list(spec.lower_gbps, d, upper=False)
    hi = quick_checks.bound_list(spec.upper_gbps, d, upper=True)
    if lo is None or hi is None or any(map(float.__gt__, lo, hi)):  # (floats)
        return None
    budget = None if spec.max_cost_usd is None else float(spec.max_cost_usd)
    if budget is not None and not has_cost:
        return None
    total = None if spec.total_bw_gbps is None else float(spec.total_bw_gbps)
    return Inputs(traffic, weight, compute, rates, has_cost, lo, hi, total,
                  spec.total_bw_mode, (), budget, None, None, field_prefix, None), t[1] * w[2]


def with_workload(template: Problem, traffic_gb, weight, compute_s, *,
                  field_prefix: str = "constraints") -> Problem:
    """``template`` (one problem) with another workload: its constraint fields (and general
    model rows) and the traffic, weights and compute given, checked as `problem_from_arrays`
    checks them (types, magnitudes, a finite step time and cost), with phases merged. Far
    cheaper than building each problem anew when many workloads share the constraints
    (the mapping co-search)."""
    as_instance(template, Problem, "template")
    if np.ndim(template.lo) != 1:
        raise LibraInputError("template: a stacked batch of problems; expected one Problem.")
    f = as_str(field_prefix, "field_prefix")
    d = template.num_dims
    traffic_gb, weight, compute_s = _check_workload_arrays(traffic_gb, weight, compute_s)
    if traffic_gb.shape[1] != d:
        raise LibraInputError(
            f"traffic_gb has shape {traffic_gb.shape}: expected [K, {d}] (the template's "
            "dimensions).")
    traffic_gb, weight, _ = merge_weighted_phases(traffic_gb, weight)
    fields = {fl.name: np.asarray(getattr(template, fl.name)) for fl in ARRAY_FIELDS}
    rows = {name: value for name, value in fields.items()
            if FIELD_GROUPS[name] == "rows"}
    check_finite_result(fields, traffic_gb, weight, compute_s, rows, template.has_cost, f)
    return dataclasses.replace(template, traffic_gb=traffic_gb.reshape(-1, d), weight=weight,
                               compute_s=np.asarray(compute_s, np.float64))


def _check_workload_arrays(traffic_gb, weight, compute_s):
    """(traffic_gb [K, D], weight [K] float64, compute_s float), checked: numbers (no
    bools or strings), traffic finite in [0, `MAX_TRAFFIC_GB`], weights finite >= 0,
    compute in [0, `MAX_COMPUTE_S`], D <= ``LIMITS.max_dims``."""
    traffic_gb = as_numbers(traffic_gb, "traffic_gb").astype(np.float64)
    weight = as_numbers(weight, "weight").astype(np.float64)
    if traffic_gb.ndim != 2 or weight.shape != traffic_gb.shape[:1]:
        raise LibraInputError(
            f"traffic_gb has shape {traffic_gb.shape} and weight {weight.shape}: expected "
            "[K, D] and [K]."
        )
    if traffic_gb.shape[1] > LIMITS.max_dims:
        raise LibraInputError(
            f"traffic_gb has {traffic_gb.shape[1]} dimensions; at most {LIMITS.max_dims} are "
            "supported (LIMITS.max_dims).")
    batch_range(traffic_gb, "traffic_gb", "must be a finite number >= 0.", hi=MAX_TRAFFIC_GB,
                 unit=" (GB, LIMITS.max_bytes x LIMITS.max_npus / 1e9)")
    batch_range(weight, "weight", "must be a finite number >= 0.")
    compute_s = as_real(compute_s, "compute_s", 0.0, MAX_COMPUTE_S,
                        unit=" (s, 3 x LIMITS.max_layers x LIMITS.max_ns / 1e9)")
    return traffic_gb, weight, compute_s


def build(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec, field_prefix, rows,
           closed_form: bool) -> Problem:
    """`problem_from_arrays`, built now; ``closed_form=False`` takes the LP path for every
    problem (the reference the closed form is tested against)."""
    return assemble(_checked(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec,
                              field_prefix, rows), closed_form)


def _checked(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec, field_prefix,
             rows) -> Inputs:
    """Every check of the arguments of `problem_from_arrays` (types, shapes, magnitudes,
    bounds, linear rows, a budget without a cost model), in the order of its messages."""
    f = as_str(field_prefix, "field_prefix")
    check_spec(spec, f)  # (again: a ConstraintSpec's fields can change after it is made)
    traffic_gb, weight, compute_s = _check_workload_arrays(traffic_gb, weight, compute_s)
    d = traffic_gb.shape[1]
    model_rows = _check_rows(rows, d)
    has_cost = cost_rates_usd_per_gbps is not None
    rates = _rates(cost_rates_usd_per_gbps, d) if has_cost else np.zeros(d)
    lo = vector(spec.lower_gbps, d, f"{f}.lower_gbps", 0.0)
    hi = vector(spec.upper_gbps, d, f"{f}.upper_gbps", math.inf)
    if not ((lo >= 0) & (lo < math.inf) & (hi > 0) & (hi >= lo)).all():
        check_bounds(lo, hi, f, "")
    total = None if spec.total_bw_gbps is None else float(spec.total_bw_gbps)
    linear = list(spec.linear or ())
    if linear:
        parse_linear_constraints(linear, d, f"{f}.linear")  # errors name the index in the list
    budget = None
    if spec.max_cost_usd is not None:
        budget = float(spec.max_cost_usd)
        if not has_cost:
            raise LibraInputError(
                f"{f}.max_cost_usd = {show(spec.max_cost_usd)}: a cost budget needs a "
                "cost model (set cost_model.file)."
            )
    power = power_row(spec, d)
    cap = None if power is None else float(spec.max_power_w)
    return Inputs(traffic_gb, weight, compute_s, rates, has_cost, lo, hi, total,
                   spec.total_bw_mode, linear, budget, power, cap, f, model_rows)


def _rates(values, d: int) -> np.ndarray:
    """[d] cost rates, each finite in [0, `MAX_RATE_USD_PER_GBPS`]."""
    x = as_numbers(values, "cost_rates_usd_per_gbps").astype(np.float64)
    if x.shape != (d,):
        raise LibraInputError(
            f"cost_rates_usd_per_gbps has shape {x.shape}: expected [{d}] (one rate per "
            "dimension).")
    batch_range(x, "cost_rates_usd_per_gbps", "must be a finite number >= 0.",
                 hi=MAX_RATE_USD_PER_GBPS, unit=" ($ per GB/s, LIMITS.max_usd)")
    return x


def batch_range(x: np.ndarray, field: str, rule: str, *, lo_open: bool = False,
                 hi: float | None = None, unit: str = "", inf_ok: bool = False) -> None:
    """Raises for the first entry of ``x`` (index first: ``field[b][d]``) that is NaN,
    negative (0 too with ``lo_open``), +inf (unless ``inf_ok``) or above ``hi``. A finite
    value above ``hi`` is worded by `limits.as_real` (naming the limit), anything else by
    ``rule``. Vectorised: one pass when every entry is fine."""
    ok = x > 0 if lo_open else x >= 0
    if hi is not None:
        ok &= (x <= hi) | (x == np.inf) if inf_ok else x <= hi
    elif not inf_ok:
        ok &= x < np.inf
    if ok.all():
        return
    index = tuple(int(i) for i in np.argwhere(~ok)[0])
    name = field + "".join(f"[{i}]" for i in index)
    v = float(x[index])
    if hi is not None and math.isfinite(v) and v > hi:
        as_real(v, name, 0.0, hi, lo_open=lo_open, unit=unit)  # raises, naming the limit
    raise LibraInputError(f"{name} = {v:g}: {rule}")


def check_bounds(lo, hi, f, index):
    """Raises for the first dim with a bad bound (``index``: "[b]" of a problem in a batch)."""
    for i in range(len(lo)):
        if lo[i] < 0 or not np.isfinite(lo[i]):
            raise LibraInputError(
                f"{f}.lower_gbps{index}[{i}] = {lo[i]:g}: a bandwidth bound must be a finite "
                "number >= 0."
            )
        if hi[i] <= 0:
            raise LibraInputError(f"{f}.upper_gbps{index}[{i}] = {hi[i]:g}: must be > 0.")
        if hi[i] < lo[i]:
            raise LibraInputError(
                f"{f}.upper_gbps{index}[{i}] = {hi[i]:g} is below {f}.lower_gbps{index}[{i}] = "
                f"{lo[i]:g}."
            )
