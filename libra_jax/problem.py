"""The optimisation problem as a pytree of arrays, and its host-side construction.

A LIBRA problem over the per-NPU bandwidth vector ``bw`` [D] (GB/s) is

    minimise   step_time(bw) = compute + sum_k weight_k * max_d traffic_kd / bw_d
    subject to lo <= bw <= hi,  a_eq @ bw == b_eq,  a_in @ bw <= b_in

(``perf``), or step_time(bw) * cost_rate @ bw (``perf_per_cost``). Models beyond LIBRA's
(latency and chunking, other schedules, overlap of compute and communication) add general
rows (`ModelRows`): step_time gains sum_j w_j max_{r in j} (c_r + sum_d a_rd / bw_d) + c0,
still convex in bw, so the same solver and certificates apply. ``traffic_kd`` is what the
k-th distinct communicating phase puts on dimension d (GB, so GB / (GB/s) = s); identical phases
are merged and counted by ``weight``. The total-bandwidth constraint, the user's linear
constraints and the cost budget are all rows of (a_eq, b_eq) or (a_in, b_in), each scaled to
unit norm so that violations are comparable.

`build_problem` validates everything on the host (numpy + an LP from scipy's HiGHS for the
feasibility, boundedness and interior-point checks, which also name the constraints that
conflict) and raises `LibraInputError`; nothing inside jit raises.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

from libra_jax.collectives import traffic_bytes
from libra_jax.linear import parse_linear_constraints
from libra_jax.types import LibraInputError


@dataclasses.dataclass(frozen=True)
class ModelRows:
    """A communication-time model as general rows (host-side numpy input).

    comm_time(bw) = const0_s + sum_j weight_j * time_j,
    time_j = max_{r: piece_r == j} (const_s_r + sum_d coef_gb_rd / bw_d + sum_i nest_ri time_i)

    ``nest`` lets a piece's rows add the times of earlier pieces (i < j): critical paths of a
    dependency graph, e.g. gradient collectives queued behind the backward pass. With
    coef_gb >= 0, nest >= 0 and weight >= 0 every time_j is convex in bw (sums and maxima of
    convex functions), and so is the total. LIBRA's model is the special case of one row per
    (phase, dimension) and no nesting.

    Attributes:
      weight: [J] weight of each piece (>= 0), e.g. how many times a collective occurs.
      piece: [R] int, the piece of each row (0 <= piece < J).
      const_s: [R] constant term of each row (s), e.g. latency.
      coef_gb: [R, D] coefficient of 1 / bw_d (GB, so GB / (GB/s) = s), >= 0.
      const0_s: communication time no bandwidth changes (s).
      nest: [R, J] coefficient of piece i's time in row r (>= 0, only for i < piece_r), or
        None for none.
    """

    weight: np.ndarray
    piece: np.ndarray
    const_s: np.ndarray
    coef_gb: np.ndarray
    const0_s: float = 0.0
    nest: np.ndarray | None = None


def _check_rows(rows: ModelRows | None, d: int):
    """Validated float64/int32 arrays of ``rows`` (empty ones for None); drops pieces of weight
    0 and their rows (they cannot change the time and would leave their variable free)."""
    if rows is None:
        return (np.zeros(0), np.zeros(0, np.int32), np.zeros(0), np.zeros((0, d)),
                np.zeros((0, 0)), 0.0)
    w = np.asarray(rows.weight, np.float64).reshape(-1)
    piece = np.asarray(rows.piece).reshape(-1)
    c = np.asarray(rows.const_s, np.float64).reshape(-1)
    a = np.asarray(rows.coef_gb, np.float64)
    c0 = float(rows.const0_s)
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
            else np.asarray(rows.nest, np.float64))
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
    return (w[needed], new_index[piece[keep_row]].astype(np.int32), c[keep_row],
            a[keep_row], nest[keep_row][:, needed], c0)


@dataclasses.dataclass
class ConstraintSpec:
    """User constraints on the bandwidth vector (GB/s per NPU per dimension).

    Attributes:
      total_bw_gbps: sum of per-dimension bandwidths, or None for no such constraint.
      total_bw_mode: "eq" (sum == total) or "le" (sum <= total).
      lower_gbps: per-dimension lower bounds [D] or None (0 everywhere).
      upper_gbps: per-dimension upper bounds [D] or None (none); entries may be None.
      linear: linear constraint strings, e.g. "bw[0] >= bw[1]" (see `linear.py`).
      max_cost_usd: network cost budget ($) or None.
    """

    total_bw_gbps: float | None = None
    total_bw_mode: str = "eq"
    lower_gbps: Sequence[float] | None = None
    upper_gbps: Sequence[float | None] | None = None
    linear: Sequence[str] = ()
    max_cost_usd: float | None = None


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Problem:
    """One bandwidth-allocation problem. Array leaves only; sizes come from shapes."""

    traffic_gb: jax.Array  # [K, D] GB each distinct communicating phase moves per dim
    weight: jax.Array  # [K] how many times that phase occurs in one step
    compute_s: jax.Array  # [] total compute time of one step (s)
    cost_rate: jax.Array  # [D] $ per (GB/s per NPU) on each dim; 0 without a cost model
    lo: jax.Array  # [D] lower bound (GB/s), >= 0
    hi: jax.Array  # [D] upper bound (GB/s), +inf for none
    upper: jax.Array  # [D] finite upper bound implied by all constraints (GB/s)
    a_eq: jax.Array  # [E, D] equality rows, unit norm
    b_eq: jax.Array  # [E]
    a_in: jax.Array  # [I, D] inequality rows (a_in @ bw <= b_in), unit norm
    b_in: jax.Array  # [I]
    lo_tight: jax.Array  # [D] bool: lower bound holds with equality on all of the set
    hi_tight: jax.Array  # [D] bool: upper bound holds with equality on all of the set
    in_tight: jax.Array  # [I] bool: inequality row holds with equality on all of the set
    interior: jax.Array  # [D] a point strictly inside every non-tight inequality
    min_cost_bw: jax.Array  # [D] a feasible point of least network cost
    total_bw_gbps: jax.Array  # [] the total of the equal split baseline (see baseline)
    # A communication model beyond LIBRA's (`model=pipelined`, overlap training loops) as
    # general rows; empty ([0]) for LIBRA's model. See `ModelRows`.
    piece_weight: jax.Array  # [J] weight of each piece (max over its rows)
    row_piece: jax.Array  # [R] int32 piece of each row
    row_const_s: jax.Array  # [R] constant term of each row (s)
    row_gb: jax.Array  # [R, D] coefficient of 1 / bw_d in each row (GB; GB / (GB/s) = s)
    row_nest: jax.Array  # [R, J] coefficient of earlier pieces' times in each row (>= 0)
    row_on: jax.Array  # [R] bool: rows that take part (False only in batch padding)
    comm_const_s: jax.Array  # [] communication time that no bandwidth changes (s)
    # Static: only read on the host. (Row names are not stored here: a static field that
    # holds values would recompile for every new constraint value.)
    has_cost: bool = dataclasses.field(metadata=dict(static=True), default=False)

    @property
    def num_dims(self) -> int:
        return self.traffic_gb.shape[-1]


def merge_phases(traffic: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drops phases that move no bytes and merges identical ones.

    Args:
      traffic: [N, D] per-phase traffic (any unit).

    Returns:
      (unique [K, D], count [K]) in first-appearance order.
    """
    traffic = np.asarray(traffic, np.float64)
    traffic = traffic[(traffic > 0).any(axis=1)]
    return _merge_weighted(traffic, np.ones(traffic.shape[0]))


def _merge_weighted(traffic: np.ndarray, weight: np.ndarray):
    """Merges identical rows of traffic [K, D], summing their weights (first-appearance order)."""
    if traffic.shape[0] == 0:
        return traffic, weight
    uniq, first, inverse = np.unique(traffic, axis=0, return_index=True, return_inverse=True)
    sums = np.zeros(uniq.shape[0])
    np.add.at(sums, inverse.reshape(-1), weight)
    order = np.argsort(first)
    return uniq[order], sums[order]


def _vector(values, num_dims: int, field: str, default: float) -> np.ndarray:
    if values is None:
        return np.full(num_dims, default, np.float64)
    values = list(values)
    if len(values) != num_dims:
        raise LibraInputError(
            f"{field} = {values}: has {len(values)} entries but the network has {num_dims} "
            "dimensions (give one value per dimension, or null)."
        )
    out = np.empty(num_dims, np.float64)
    for i, v in enumerate(values):
        if v is None:
            out[i] = default
            continue
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise LibraInputError(f"{field}[{i}] = {v!r}: not a number.") from None
        if math.isnan(out[i]):
            raise LibraInputError(f"{field}[{i}] = {v!r}: not a number.")
    return out


def _linprog(c, a_ub, b_ub, a_eq, b_eq, bounds):
    return scipy.optimize.linprog(
        c,
        A_ub=a_ub if len(b_ub) else None,
        b_ub=b_ub if len(b_ub) else None,
        A_eq=a_eq if len(b_eq) else None,
        b_eq=b_eq if len(b_eq) else None,
        bounds=bounds,
        method="highs",
    )


@dataclasses.dataclass
class _Rows:
    """Named linear constraints (host side), for diagnosis and assembly."""

    a: list
    b: list
    eq: list
    names: list

    def add(self, a, b, eq, name):
        a = np.asarray(a, np.float64)
        norm = np.linalg.norm(a)
        if norm == 0.0:
            raise LibraInputError(f"{name}: has no bandwidth term.")
        self.a.append(a / norm)
        self.b.append(float(b) / norm)
        self.eq.append(bool(eq))
        self.names.append(name)

    def arrays(self, keep=None):
        idx = [i for i in range(len(self.b)) if keep is None or i in keep]
        d = len(self.a[0]) if self.a else 0
        a = np.array([self.a[i] for i in idx]).reshape(len(idx), d)
        b = np.array([self.b[i] for i in idx])
        eq = np.array([self.eq[i] for i in idx], bool)
        return a[eq], b[eq], a[~eq], b[~eq]


def _feasible(rows: _Rows, keep, lo, hi, keep_box) -> bool:
    d = len(lo)
    a_eq, b_eq, a_in, b_in = rows.arrays(keep)
    bounds = [
        (lo[i] if ("lo", i) in keep_box else None,
         hi[i] if ("hi", i) in keep_box and np.isfinite(hi[i]) else None)
        for i in range(d)
    ]
    res = _linprog(np.zeros(d), a_in, b_in, a_eq, b_eq, bounds)
    return res.status == 0


def _conflict(rows: _Rows, lo, hi, lower_field, upper_field) -> list[str]:
    """Deletion filter: a minimal set of constraints that cannot hold together."""
    keep = set(range(len(rows.b)))
    keep_box = {("lo", i) for i in range(len(lo))} | {
        ("hi", i) for i in range(len(hi)) if np.isfinite(hi[i])
    }
    for i in sorted(keep):
        if not _feasible(rows, keep - {i}, lo, hi, keep_box):
            keep.discard(i)
    for item in sorted(keep_box):
        if not _feasible(rows, keep, lo, hi, keep_box - {item}):
            keep_box.discard(item)
    names = [rows.names[i] for i in sorted(keep)]
    for kind, i in sorted(keep_box):
        if kind == "lo":
            names.append(f"{lower_field}[{i}] = {lo[i]:g} (bandwidth >= lower bound)")
        else:
            names.append(f"{upper_field}[{i}] = {hi[i]:g}")
    return names


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
    d = network.num_dims
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
    """
    traffic_gb = np.asarray(traffic_gb, np.float64)
    weight = np.asarray(weight, np.float64)
    if traffic_gb.ndim != 2 or weight.shape != traffic_gb.shape[:1]:
        raise LibraInputError(
            f"traffic_gb has shape {traffic_gb.shape} and weight {weight.shape}: expected "
            "[K, D] and [K]."
        )
    if not (np.all(np.isfinite(traffic_gb)) and np.all(traffic_gb >= 0)):
        raise LibraInputError("traffic_gb: every entry must be a finite number >= 0.")
    if not (np.all(np.isfinite(weight)) and np.all(weight >= 0)):
        raise LibraInputError("weight: every entry must be a finite number >= 0.")
    if not (np.isfinite(compute_s) and compute_s >= 0):
        raise LibraInputError(f"compute_s = {compute_s}: must be a finite number >= 0.")
    d = traffic_gb.shape[1]
    piece_w, row_piece, row_c, row_a, row_nest, comm_c0 = _check_rows(rows, d)
    keep = (weight > 0) & (traffic_gb > 0).any(axis=1)
    traffic_gb, weight = _merge_weighted(traffic_gb[keep], weight[keep])
    f = field_prefix
    has_cost = cost_rates_usd_per_gbps is not None
    rates = (
        np.zeros(d) if not has_cost else np.asarray(cost_rates_usd_per_gbps, np.float64)
    )
    lo = _vector(spec.lower_gbps, d, f"{f}.lower_gbps", 0.0)
    hi = _vector(spec.upper_gbps, d, f"{f}.upper_gbps", math.inf)
    for i in range(d):
        if lo[i] < 0 or not np.isfinite(lo[i]):
            raise LibraInputError(
                f"{f}.lower_gbps[{i}] = {lo[i]:g}: a bandwidth bound must be a finite number >= 0."
            )
        if hi[i] <= 0:
            raise LibraInputError(f"{f}.upper_gbps[{i}] = {hi[i]:g}: must be > 0.")
        if hi[i] < lo[i]:
            raise LibraInputError(
                f"{f}.upper_gbps[{i}] = {hi[i]:g} is below {f}.lower_gbps[{i}] = {lo[i]:g}."
            )

    rows = _Rows([], [], [], [])
    total = spec.total_bw_gbps
    if total is not None:
        total = float(total)
        if not total > 0 or not np.isfinite(total):
            raise LibraInputError(f"{f}.total_bw_gbps = {spec.total_bw_gbps}: must be > 0.")
        if spec.total_bw_mode not in ("eq", "le"):
            raise LibraInputError(
                f"{f}.total_bw_mode = {spec.total_bw_mode!r}: must be 'eq' or 'le'."
            )
        rows.add(np.ones(d), total, spec.total_bw_mode == "eq",
                 f"{f}.total_bw_gbps = {total:g} (sum of bandwidths "
                 f"{'==' if spec.total_bw_mode == 'eq' else '<='} {total:g})")
    elif spec.total_bw_mode not in ("eq", "le"):
        raise LibraInputError(f"{f}.total_bw_mode = {spec.total_bw_mode!r}: must be 'eq' or 'le'.")
    linear = list(spec.linear or ())
    parse_linear_constraints(linear, d, f"{f}.linear")  # errors name the index in the list
    # One string at a time, to keep each row's name for conflict messages.
    for i, text in enumerate(linear):
        ae, be, ai, bi = parse_linear_constraints([text], d, f"{f}.linear")
        for a, b in zip(ae, be):
            rows.add(a, b, True, f'{f}.linear[{i}] = "{text}"')
        for a, b in zip(ai, bi):
            rows.add(a, b, False, f'{f}.linear[{i}] = "{text}"')
    if spec.max_cost_usd is not None:
        budget = float(spec.max_cost_usd)
        if not has_cost:
            raise LibraInputError(
                f"{f}.max_cost_usd = {spec.max_cost_usd}: a cost budget needs a cost model "
                "(set cost_model.file)."
            )
        if not budget > 0:
            raise LibraInputError(f"{f}.max_cost_usd = {spec.max_cost_usd}: must be > 0.")
        rows.add(rates, budget, False, f"{f}.max_cost_usd = {budget:g} (network cost <= budget)")

    a_eq, b_eq, a_in, b_in = rows.arrays()
    bounds = [(lo[i], hi[i] if np.isfinite(hi[i]) else None) for i in range(d)]
    res = _linprog(np.zeros(d), a_in, b_in, a_eq, b_eq, bounds)
    if res.status == 2:
        names = _conflict(rows, lo, hi, f"{f}.lower_gbps", f"{f}.upper_gbps")
        raise LibraInputError(
            "the constraints cannot all hold: no bandwidth vector satisfies "
            + "; ".join(names)
            + ". Relax or remove one of them."
        )
    if res.status != 0:
        raise LibraInputError(f"could not check the constraints ({res.message}).")

    # Upper bound of each dim over the feasible set (bounded problems only).
    upper = np.empty(d)
    for i in range(d):
        c = np.zeros(d)
        c[i] = -1.0
        r = _linprog(c, a_in, b_in, a_eq, b_eq, bounds)
        if r.status == 3:
            raise LibraInputError(
                f"the bandwidth of dimension {i} is unbounded under the given constraints: "
                f"set {f}.total_bw_gbps, {f}.upper_gbps[{i}] or {f}.max_cost_usd."
            )
        upper[i] = -r.fun

    # Which inequalities hold with equality on the whole set (implicit equalities)? The
    # barrier needs a strict interior, so those become equalities there.
    def min_over_set(c):
        return _linprog(np.asarray(c, np.float64), a_in, b_in, a_eq, b_eq, bounds).fun

    tol = 1e-9 * max(1.0, float(np.max(np.abs(upper))))
    unit = np.eye(d)
    lo_tight = np.array([upper[i] - lo[i] <= tol for i in range(d)], bool)
    hi_tight = np.array(
        [bool(np.isfinite(hi[i]) and hi[i] - min_over_set(unit[i]) <= tol) for i in range(d)],
        bool,
    )
    in_tight = np.array(
        [b_in[j] - min_over_set(a_in[j]) <= tol for j in range(len(b_in))], bool
    )

    # Interior: maximise the smallest slack of the non-tight inequalities.
    interior = _interior_point(lo, hi, lo_tight, hi_tight, a_in, b_in, in_tight, a_eq, b_eq, upper)
    used = (traffic_gb > 0).any(axis=0) | (row_a > 0).any(axis=0)
    for i in range(d):
        if used[i] and upper[i] <= 0:
            raise LibraInputError(
                f"dimension {i} carries traffic but the constraints force its bandwidth to 0."
            )
    if has_cost:
        r = _linprog(rates, a_in, b_in, a_eq, b_eq, bounds)
        min_cost_bw = np.clip(r.x, lo, np.where(np.isfinite(hi), hi, np.inf))
    else:
        min_cost_bw = interior.copy()
    if total is None:
        # Baseline total: the largest equal split the constraints allow, else the interior's.
        total_base = float(np.sum(interior))
    else:
        total_base = total
    return Problem(
        traffic_gb=jnp.asarray(traffic_gb.reshape(-1, d)),
        weight=jnp.asarray(weight),
        compute_s=jnp.asarray(compute_s, jnp.float64),
        cost_rate=jnp.asarray(rates),
        lo=jnp.asarray(lo),
        hi=jnp.asarray(hi),
        upper=jnp.asarray(upper),
        a_eq=jnp.asarray(a_eq.reshape(-1, d)),
        b_eq=jnp.asarray(b_eq),
        a_in=jnp.asarray(a_in.reshape(-1, d)),
        b_in=jnp.asarray(b_in),
        lo_tight=jnp.asarray(lo_tight),
        hi_tight=jnp.asarray(hi_tight),
        in_tight=jnp.asarray(in_tight),
        interior=jnp.asarray(interior),
        min_cost_bw=jnp.asarray(min_cost_bw),
        total_bw_gbps=jnp.asarray(total_base, jnp.float64),
        piece_weight=jnp.asarray(piece_w),
        row_piece=jnp.asarray(row_piece, jnp.int32),
        row_const_s=jnp.asarray(row_c),
        row_gb=jnp.asarray(row_a.reshape(-1, d)),
        row_nest=jnp.asarray(row_nest.reshape(row_piece.shape[0], piece_w.shape[0])),
        row_on=jnp.ones(row_piece.shape, bool),
        comm_const_s=jnp.asarray(comm_c0, jnp.float64),
        has_cost=has_cost,
    )


def _interior_point(lo, hi, lo_tight, hi_tight, a_in, b_in, in_tight, a_eq, b_eq, upper):
    """A point of the set that maximises the smallest slack of its non-tight inequalities.

    Tight inequalities become equalities, so the point lies in the relative interior.
    """
    d = len(lo)
    cap = max(1.0, float(np.max(upper)))
    # Variables (bw [D], r): maximise r subject to slack_i >= r for every non-tight row.
    rows_a, rows_b = [], []
    eq_a, eq_b = [list(a) + [0.0] for a in a_eq], list(b_eq)
    for j in range(len(b_in)):
        if in_tight[j]:
            eq_a.append(list(a_in[j]) + [0.0])
            eq_b.append(b_in[j])
        else:
            rows_a.append(list(a_in[j]) + [1.0])
            rows_b.append(b_in[j])
    for i in range(d):
        e = np.zeros(d + 1)
        e[i] = 1.0
        if lo_tight[i]:
            eq_a.append(list(e))
            eq_b.append(lo[i])
            continue
        if hi_tight[i]:
            eq_a.append(list(e))
            eq_b.append(hi[i])
            continue
        e_lo = -e.copy()
        e_lo[d] = 1.0
        rows_a.append(list(e_lo))
        rows_b.append(-lo[i])
        if np.isfinite(hi[i]):
            e_hi = e.copy()
            e_hi[d] = 1.0
            rows_a.append(list(e_hi))
            rows_b.append(hi[i])
    c = np.zeros(d + 1)
    c[d] = -1.0
    bounds = [(None, None)] * d + [(None, cap)]
    r = _linprog(c, np.array(rows_a).reshape(-1, d + 1), np.array(rows_b),
                 np.array(eq_a).reshape(-1, d + 1), np.array(eq_b), bounds)
    if r.status != 0 or r.x[d] <= 0:
        raise LibraInputError(
            "could not find a point strictly inside the constraints "
            f"({r.message}); check for constraints that only touch at a point."
        )
    return r.x[:d]
