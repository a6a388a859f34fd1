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

`build_problem` validates everything on the host and raises `LibraInputError`; nothing inside
jit raises. Feasibility, boundedness, the implicit equalities and the interior and least-cost
points come in closed form (numpy, `_closed_form`) for the constraints of a total, bounds and a
cost budget, and from LPs (HiGHS, `lp.linprog`, `_lp_fields`) with user linear rows; the LPs also
name the constraints that conflict. `problems_from_stacked` builds a whole batch of problems
of one constraint form at once, vectorised over the batch. Fields are numpy arrays.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import NamedTuple, Sequence

import jax
import numpy as np

from libra_jax.inputs.limits import (
    LIMITS,
    as_instance,
    as_list,
    as_numbers,
    as_real,
    as_str,
)
from libra_jax.inputs.topology import Network
from libra_jax.inputs.workload import Workload
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model import lp, quick_checks
from libra_jax.model.closed_form import closed_form as _closed_form
from libra_jax.model.closed_form import over_dims as _over_dims
from libra_jax.model.linear import parse_linear_constraints
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
      max_power_w: network power cap (W) or None: ``power_rates_w_per_gbps @ bw <= cap``.
      power_rates_w_per_gbps: [D] W of network power per GB/s of each dimension (from the
        tiers' ``Energy``, `cost.power_rates_w_per_gbps`); needed by ``max_power_w``.
    """

    total_bw_gbps: float | None = None
    total_bw_mode: str = "eq"
    lower_gbps: Sequence[float] | None = None
    upper_gbps: Sequence[float | None] | None = None
    linear: Sequence[str] = ()
    max_cost_usd: float | None = None
    max_power_w: float | None = None
    power_rates_w_per_gbps: Sequence[float] | None = None

    def __post_init__(self):
        check_spec(self)


def check_spec(spec: ConstraintSpec, field_prefix: str = "constraints") -> None:
    """Checks the types and magnitudes of a `ConstraintSpec` that do not depend on the
    network (the builders check the lengths against its dimensions, and feasibility):

      * ``total_bw_gbps``: None or a number in (0, ``LIMITS.max_gbps``];
      * ``total_bw_mode``: "eq" or "le";
      * ``lower_gbps``: None or a list of None / numbers in [0, ``LIMITS.max_gbps``];
      * ``upper_gbps``: None or a list of None / +inf (no bound) / numbers in
        (0, ``LIMITS.max_gbps``];
      * ``linear``: a list of strings (their syntax is `linear.py`'s);
      * ``max_cost_usd``: None or a number in (0, ``LIMITS.max_usd``].

    Bools, strings and mappings are not numbers, and a mapping or a string is not a list.

    Raises:
      LibraInputError: naming the field (``field_prefix``.name[index]), the value and the
        rule.
    """
    if type(spec) is ConstraintSpec and quick_checks.spec_ok(spec, field_prefix):
        return  # (plain values within range: what the checks below accept)
    as_instance(spec, ConstraintSpec, "spec")
    f = as_str(field_prefix, "field_prefix")
    if spec.total_bw_gbps is not None:
        as_real(spec.total_bw_gbps, f"{f}.total_bw_gbps", 0.0, LIMITS.max_gbps, lo_open=True,
                unit=" (GB/s per NPU, LIMITS.max_gbps)")
    _check_mode(spec.total_bw_mode, f)
    if spec.lower_gbps is not None:
        _vector(spec.lower_gbps, None, f"{f}.lower_gbps", 0.0)
    if spec.upper_gbps is not None:
        _vector(spec.upper_gbps, None, f"{f}.upper_gbps", math.inf)
    if spec.linear is not None:
        items = as_list(spec.linear, f"{f}.linear", what="a list of constraint strings")
        for i, text in enumerate(items):
            as_str(text, f"{f}.linear[{i}]")
    if spec.max_cost_usd is not None:
        as_real(spec.max_cost_usd, f"{f}.max_cost_usd", 0.0, LIMITS.max_usd, lo_open=True,
                unit=" ($, LIMITS.max_usd)")
    if spec.power_rates_w_per_gbps is not None:
        rates = as_list(spec.power_rates_w_per_gbps, "power_rates_w_per_gbps",
                        what="a list of W per GB/s, one per dimension")
        for i, r in enumerate(rates):
            as_real(r, f"power_rates_w_per_gbps[{i}]", 0.0, LIMITS.max_w_per_gbps,
                    unit=" (W per GB/s)")
    if spec.max_power_w is not None:
        as_real(spec.max_power_w, f"{f}.max_power_w", 0.0, LIMITS.max_w, lo_open=True,
                unit=" (W, LIMITS.max_w)")
        if spec.power_rates_w_per_gbps is None:
            raise LibraInputError(
                f"{f}.max_power_w = {show(spec.max_power_w)}: a power cap needs the network's "
                "power rates: a cost model whose tiers give Energy (e.g. "
                "cost_model.file=technologies.yaml).")


def power_row(spec: ConstraintSpec, d: int) -> np.ndarray | None:
    """[d] the power cap's row (W per GB/s), or None without a cap."""
    if spec.max_power_w is None:
        return None
    a = np.asarray(as_numbers(spec.power_rates_w_per_gbps, "power_rates_w_per_gbps"),
                   np.float64)
    if a.shape != (d,):
        raise LibraInputError(
            f"power_rates_w_per_gbps has {a.size} entries: expected {d} (one per dimension).")
    return a


def _check_mode(mode, f: str) -> str:
    if not isinstance(mode, str) or mode not in ("eq", "le"):
        raise LibraInputError(f"{f}.total_bw_mode = {show(mode)}: must be 'eq' or 'le'.")
    return str(mode)


def _leaf(axes: str, fill, dtype=np.float64, group: str = "constraints"):
    """A `Problem` array field. ``axes`` names its trailing axes by the letters of
    `types.py` (D K I E, J pieces, R rows); ``fill`` is its neutral padding value (see
    `batch.pad_stacked`); ``group`` is "workload", "constraints" or "rows" (the general
    model, empty for LIBRA's)."""
    return dataclasses.field(metadata=dict(axes=axes, fill=fill, dtype=np.dtype(dtype),
                                           group=group))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Problem:
    """One bandwidth-allocation problem. Array leaves only (numpy from the builders; a batch
    from `problems_from_stacked` has a leading axis on every leaf); sizes come from shapes.

    Each array field lists its axes, padding value and dtype once, in its metadata
    (`ARRAY_FIELDS`): padding (`batch.pad_stacked`), the empty general model (`no_rows`)
    and the sizes (`problem_sizes`) are derived from it."""

    # [K, D] GB each distinct communicating phase moves per dim
    traffic_gb: jax.Array = _leaf("KD", 0.0, group="workload")
    weight: jax.Array = _leaf("K", 0.0, group="workload")  # [K] times that phase occurs
    compute_s: jax.Array = _leaf("", 0.0, group="workload")  # [] compute of one step (s)
    # [D] $ per (GB/s per NPU) on each dim; 0 without a cost model
    cost_rate: jax.Array = _leaf("D", 0.0)
    lo: jax.Array = _leaf("D", 1.0)  # [D] lower bound (GB/s), >= 0
    hi: jax.Array = _leaf("D", np.inf)  # [D] upper bound (GB/s), +inf for none
    # [D] finite upper bound implied by all constraints (GB/s)
    upper: jax.Array = _leaf("D", 1.0)
    a_eq: jax.Array = _leaf("ED", 0.0)  # [E, D] equality rows, unit norm
    b_eq: jax.Array = _leaf("E", 0.0)  # [E]
    a_in: jax.Array = _leaf("ID", 0.0)  # [I, D] inequality rows (a_in @ bw <= b_in), unit norm
    b_in: jax.Array = _leaf("I", 1.0)  # [I]
    # [D] bool: lower bound holds with equality on all of the set
    lo_tight: jax.Array = _leaf("D", True, bool)
    # [D] bool: upper bound holds with equality on all of the set
    hi_tight: jax.Array = _leaf("D", False, bool)
    # [I] bool: inequality row holds with equality on all of the set
    in_tight: jax.Array = _leaf("I", False, bool)
    interior: jax.Array = _leaf("D", 1.0)  # [D] a point strictly inside every non-tight row
    min_cost_bw: jax.Array = _leaf("D", 1.0)  # [D] a feasible point of least network cost
    total_bw_gbps: jax.Array = _leaf("", 0.0)  # [] the total of the equal split baseline
    # A communication model beyond LIBRA's (`model=pipelined`, overlap training loops) as
    # general rows; empty ([0]) for LIBRA's model. See `ModelRows`.
    piece_weight: jax.Array = _leaf("J", 0.0, group="rows")  # [J] weight of each piece
    row_piece: jax.Array = _leaf("R", 0, np.int32, "rows")  # [R] int32 piece of each row
    row_const_s: jax.Array = _leaf("R", 0.0, group="rows")  # [R] constant of each row (s)
    # [R, D] coefficient of 1 / bw_d in each row (GB; GB / (GB/s) = s)
    row_gb: jax.Array = _leaf("RD", 0.0, group="rows")
    # [R, J] coefficient of earlier pieces' times in each row (>= 0)
    row_nest: jax.Array = _leaf("RJ", 0.0, group="rows")
    # [R] bool: rows that take part (False only in batch padding)
    row_on: jax.Array = _leaf("R", False, bool, "rows")
    # [] communication time that no bandwidth changes (s)
    comm_const_s: jax.Array = _leaf("", 0.0, group="rows")
    # Static: only read on the host. (Row names are not stored here: a static field that
    # holds values would recompile for every new constraint value.)
    has_cost: bool = dataclasses.field(metadata=dict(static=True), default=False)

    @property
    def num_dims(self) -> int:
        return self.traffic_gb.shape[-1]

    def __getattr__(self, name):
        # Only reached for an attribute not set: the fields of a problem that
        # `problem_from_arrays` left unbuilt are built on first access (`materialise`).
        if name.startswith("__") or "_lazy" not in self.__dict__:
            raise AttributeError(f"'Problem' object has no attribute {name!r}")
        materialise(self)
        return object.__getattribute__(self, name)

    def __getstate__(self):
        materialise(self)  # (pickled built: an unbuilt problem's state holds its block)
        return self.__dict__


#: The array fields of `Problem`, each with its metadata (axes, fill, dtype, group).
ARRAY_FIELDS = tuple(f for f in dataclasses.fields(Problem) if "axes" in f.metadata)
_FIELD_GROUPS = {f.name: f.metadata["group"] for f in ARRAY_FIELDS}
#: The size letters of `Problem`'s axes, in the order of `problem_sizes`.
SIZE_AXES = "DKIEJR"


#: (field name, axis counted from the end) that carries each size of `SIZE_AXES`: the first
#: array field whose metadata names it.
_SIZE_SOURCES = tuple(next((f.name, i - len(f.metadata["axes"])) for f in ARRAY_FIELDS
                           for i, a in enumerate(f.metadata["axes"]) if a == size)
                      for size in SIZE_AXES)


def problem_sizes(p: Problem) -> tuple[int, ...]:
    """(D, K, I, E, J, R) of a problem, or of a stacked batch (from the trailing axes)."""
    return tuple(np.shape(getattr(p, name))[axis] for name, axis in _SIZE_SOURCES)


def no_rows(lead: tuple[int, ...], num_dims: int) -> dict:
    """The general-model fields (group "rows") of LIBRA's model, no pieces and no rows, for
    problems of ``num_dims`` dims with leading (batch) axes ``lead``."""
    return {f.name: np.zeros(lead + tuple(num_dims if a == "D" else 0
                                          for a in f.metadata["axes"]), f.metadata["dtype"])
            for f in ARRAY_FIELDS if f.metadata["group"] == "rows"}


def merge_phases(traffic: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drops phases that move no bytes and merges identical ones.

    Args:
      traffic: [N, D] per-phase traffic (any unit).

    Returns:
      (unique [K, D], count [K]) in first-appearance order.
    """
    traffic = np.asarray(traffic, np.float64)
    return merge_weighted_phases(traffic, np.ones(traffic.shape[0]))[:2]


def merge_weighted_phases(traffic: np.ndarray, weight: np.ndarray):
    """Drops phases without traffic or weight and merges identical rows, summing weights.

    A stable lexicographic sort puts identical rows next to each other (in input order, so
    each group's sum adds the weights in input order and its first sorted row is its first
    appearance).

    Args:
      traffic: [N, D] per-phase traffic (any unit). weight: [N] >= 0.

    Returns:
      (unique [K, D], weight [K], index [N]) in first-appearance order; ``index`` maps each
      input row to its merged row (-1 for a dropped row).
    """
    traffic = np.asarray(traffic, np.float64)
    weight = np.asarray(weight, np.float64)
    keep = (weight > 0) & (traffic > 0).any(axis=1)
    index = np.full(traffic.shape[0], -1, np.int64)
    kept = np.flatnonzero(keep)
    if kept.size == 0:
        return np.zeros((0, traffic.shape[1])), np.zeros(0), index
    traffic, weight = traffic[kept], weight[kept]
    order = np.lexsort(traffic.T[::-1])
    ordered = traffic[order]
    new = np.empty(kept.size, bool)
    new[0] = True
    np.any(ordered[1:] != ordered[:-1], axis=1, out=new[1:])
    group = np.cumsum(new) - 1  # merged row of each sorted row, in sorted order
    sums = np.bincount(group, weights=weight[order])
    first = order[new]
    by_appearance = np.argsort(first)
    rank = np.empty_like(by_appearance)
    rank[by_appearance] = np.arange(by_appearance.size)
    index[kept[order]] = rank[group]
    return traffic[first[by_appearance]], sums[by_appearance], index


def float_vector(values, n: int | None, field: str, default: float, expected: str, *,
                 lo: float | None = None, hi: float | None = None, lo_open: bool = False,
                 unit: str = "", inf_ok: bool = False) -> np.ndarray:
    """[n] float64 from a list of numbers: None gives ``default`` everywhere, a None entry
    ``default`` there.

    Args:
      values: None or a list (tuple, 1-D array, Hydra ListConfig) of numbers or None.
      n: the length required (None: any).
      field: the name in messages (entries are named ``field[i]``).
      default: the value of None.
      expected: what a wrong length should say, e.g. "the network has 4 dimensions (...)".
      lo, hi, lo_open, unit: the range of an entry (`limits.as_real`).
      inf_ok: +inf is allowed (e.g. "no upper bound").

    Raises:
      LibraInputError: not a list, a length other than n, or an entry that is not a number
        (a bool or a string is not) or is out of range (the message names its index).
    """
    if values is None:
        return np.full(0 if n is None else n, default, np.float64)
    values = as_list(values, field, what="a list of numbers")
    if n is not None and len(values) != n:
        raise LibraInputError(
            f"{field} = {show(values)}: has {len(values)} entries but {expected}."
        )
    out = np.empty(len(values), np.float64)
    for i, v in enumerate(values):
        v = v
        if v is None:
            out[i] = default
        elif (inf_ok and isinstance(v, numbers.Real) and not isinstance(v, bool)
              and v == math.inf):
            out[i] = math.inf
        else:
            out[i] = as_real(v, f"{field}[{i}]", lo, hi, lo_open=lo_open, unit=unit)
    return out


def _vector(values, num_dims: int | None, field: str, default: float) -> np.ndarray:
    """A bound vector of a `ConstraintSpec` (``default`` 0: lower bounds in
    [0, max_gbps]; ``default`` inf: upper bounds in (0, max_gbps] or inf)."""
    upper = default == math.inf
    return float_vector(values, num_dims, field, default,
                        f"the network has {num_dims} dimensions (give one value per "
                        "dimension, or null)", lo=0.0, hi=LIMITS.max_gbps, lo_open=upper,
                        unit=" (GB/s per NPU, LIMITS.max_gbps)", inf_ok=upper)


def _linprog(c, a_ub, b_ub, a_eq, b_eq, bounds):
    return lp.linprog(c, a_ub, b_ub, a_eq, b_eq, bounds, method="highs")


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
    res = _linprog(r, a_in, np.asarray(p.b_in, np.float64), a_eq,
                   np.asarray(p.b_eq, np.float64), bounds)
    least = (np.clip(res.x, lo, hi) if res.status == 0
             else np.asarray(p.interior, np.float64).copy())
    return dataclasses.replace(p, cost_rate=r, min_cost_bw=least, has_cost=True)


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
    ones, see `_closed_form`), from HiGHS LPs (`_lp_fields`), which also word the errors.
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
        x = _quick_inputs(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec,
                          field_prefix)
        if x is not None and quick_checks.surely_builds(x):
            p = object.__new__(Problem)
            p.__dict__.update(_lazy=x, has_cost=x.has_cost)
            return p
    return _build(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec, field_prefix,
                  rows, closed_form=True)


def _quick_inputs(traffic_gb, weight, compute_s, cost_rates, spec: ConstraintSpec,
                  field_prefix) -> Inputs | None:
    """`_checked` by the fast paths of `quick_checks`, for plain inputs that pass every
    check (no linear rows, power cap or general model); None for anything else, which
    `_checked` then accepts or refuses. The bound and rate vectors come as lists of floats
    (`quick_checks.surely_builds` reads them; `with_arrays` makes them arrays)."""
    if not quick_checks.spec_ok(spec, field_prefix):
        return None
    traffic = quick_checks.in_range(traffic_gb, MAX_TRAFFIC_GB)
    weight = quick_checks.in_range(weight, None)
    if (traffic is None or weight is None or traffic.ndim != 2
            or weight.shape != traffic.shape[:1]):
        return None
    d = traffic.shape[1]
    if d == 0 or d > LIMITS.max_dims:
        return None
    compute = quick_checks.real(compute_s, 0.0, MAX_COMPUTE_S)
    if compute is None:
        return None
    has_cost = cost_rates is not None
    rates = [0.0] * d
    if has_cost:
        given = quick_checks.in_range(cost_rates, MAX_RATE_USD_PER_GBPS)
        if given is None or given.shape != (d,):
            return None
        rates = given.tolist()
    lo = quick_checks.bound_list(spec.lower_gbps, d, upper=False)
    hi = quick_checks.bound_list(spec.upper_gbps, d, upper=True)
    if lo is None or hi is None or any(a > b for a, b in zip(lo, hi)):
        return None
    budget = None if spec.max_cost_usd is None else float(spec.max_cost_usd)
    if budget is not None and not has_cost:
        return None
    total = None if spec.total_bw_gbps is None else float(spec.total_bw_gbps)
    return Inputs(traffic, weight, compute, rates, has_cost, lo, hi, total,
                  spec.total_bw_mode, [], budget, None, None, field_prefix, None)


def with_arrays(x: Inputs) -> Inputs:
    """Inputs of `_quick_inputs` as `assemble` takes them: the bound and rate vectors as
    float64 arrays, the (empty) general-model rows."""
    return x._replace(lo=np.array(x.lo, np.float64), hi=np.array(x.hi, np.float64),
                      rates=np.array(x.rates, np.float64),
                      model_rows=no_rows((), len(x.lo)))


def unbuilt(p: Problem) -> Inputs | None:
    """The checked inputs of a problem that `problem_from_arrays` left unbuilt and that no
    block holds yet (`place`); None otherwise."""
    state = p.__dict__
    return state["_lazy"] if "_lazy" in state and "_block" not in state else None


def block_row(p: Problem) -> tuple[Problem, int] | None:
    """(block, row) of an unbuilt problem that `place` put in a block, else None."""
    return p.__dict__.get("_block") if "_lazy" in p.__dict__ else None


def place(p: Problem, block: Problem, row: int) -> None:
    """Makes the unbuilt problem ``p`` row ``row`` of ``block`` (a stacked `Problem` built
    from its inputs, `bulk.build_all`): its fields will be views of that row."""
    p.__dict__["_block"] = (block, row)


def materialise(p: Problem) -> None:
    """Builds an unbuilt problem in place (nothing for a built one): the views of its row of
    a block, or built alone by `assemble`."""
    state = p.__dict__
    if "_lazy" not in state:
        return
    placed = state.get("_block")
    if placed is not None:
        block, row = placed
        fields = {f.name: np.asarray(getattr(block, f.name)[row]) for f in ARRAY_FIELDS}
    else:
        built = assemble(with_arrays(state["_lazy"]))
        fields = {f.name: getattr(built, f.name) for f in ARRAY_FIELDS}
    state.update(fields)
    del state["_lazy"]
    state.pop("_block", None)


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
            if _FIELD_GROUPS[name] == "rows"}
    _check_finite_result(fields, traffic_gb, weight, compute_s, rows, template.has_cost, f)
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
    _batch_range(traffic_gb, "traffic_gb", "must be a finite number >= 0.", hi=MAX_TRAFFIC_GB,
                 unit=" (GB, LIMITS.max_bytes x LIMITS.max_npus / 1e9)")
    _batch_range(weight, "weight", "must be a finite number >= 0.")
    compute_s = as_real(compute_s, "compute_s", 0.0, MAX_COMPUTE_S,
                        unit=" (s, 3 x LIMITS.max_layers x LIMITS.max_ns / 1e9)")
    return traffic_gb, weight, compute_s


class Inputs(NamedTuple):
    """The checked inputs of one problem (`_checked`), phases not yet merged."""

    traffic: np.ndarray  # [K, D]
    weight: np.ndarray  # [K]
    compute: float
    rates: np.ndarray  # [D] (zeros without a cost model)
    has_cost: bool
    lo: np.ndarray  # [D]
    hi: np.ndarray  # [D]
    total: float | None
    mode: str
    linear: list
    budget: float | None
    power: np.ndarray | None
    cap: float | None
    f: str
    model_rows: dict


def _build(traffic_gb, weight, compute_s, cost_rates_usd_per_gbps, spec, field_prefix, rows,
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
    lo = _vector(spec.lower_gbps, d, f"{f}.lower_gbps", 0.0)
    hi = _vector(spec.upper_gbps, d, f"{f}.upper_gbps", math.inf)
    if not ((lo >= 0) & (lo < math.inf) & (hi > 0) & (hi >= lo)).all():
        _check_bounds(lo, hi, f, "")
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


def assemble(x: Inputs, closed_form: bool = True) -> Problem:
    """The `Problem` of checked inputs: phases merged, the constraint fields in closed form
    (`_closed_form`) or from the LP path (`_lp_fields`, which words the errors of
    constraints that cannot hold), and a finite step time and cost checked."""
    d = x.lo.shape[0]
    traffic_gb, weight, _ = merge_weighted_phases(x.traffic, x.weight)
    used = (traffic_gb > 0).any(axis=0)
    used |= (x.model_rows["row_gb"] > 0).any(axis=0)
    fields = None
    if closed_form and not x.linear and x.power is None and d > 0:
        out, ok = _closed_form(
            x.lo[None], x.hi[None], None if x.total is None else np.array([x.total]),
            x.mode == "eq", x.rates[None] if x.has_cost else None,
            None if x.budget is None else np.array([x.budget]), used[None])
        if ok[0]:
            fields = {name: np.asarray(value[0]) for name, value in out.items()}
    if fields is None:
        fields = _lp_fields(x.lo, x.hi, x.rates, x.has_cost, x.total, x.mode, x.linear,
                            x.budget, x.f, used, x.power, x.cap)
    _check_finite_result(fields, traffic_gb, weight, x.compute, x.model_rows, x.has_cost, x.f)
    return Problem(traffic_gb=traffic_gb.reshape(-1, d), weight=weight,
                   compute_s=np.asarray(x.compute, np.float64), **fields, **x.model_rows,
                   has_cost=x.has_cost)


def _rates(values, d: int) -> np.ndarray:
    """[d] cost rates, each finite in [0, `MAX_RATE_USD_PER_GBPS`]."""
    x = as_numbers(values, "cost_rates_usd_per_gbps").astype(np.float64)
    if x.shape != (d,):
        raise LibraInputError(
            f"cost_rates_usd_per_gbps has shape {x.shape}: expected [{d}] (one rate per "
            "dimension).")
    _batch_range(x, "cost_rates_usd_per_gbps", "must be a finite number >= 0.",
                 hi=MAX_RATE_USD_PER_GBPS, unit=" ($ per GB/s, LIMITS.max_usd)")
    return x


def _batch_range(x: np.ndarray, field: str, rule: str, *, lo_open: bool = False,
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


def _step_time_s(x, traffic_gb, weight, compute_s, rows: dict) -> float:
    """The step time (s) of LIBRA's model plus the general rows at the bandwidths ``x``
    [D], on the host (`objective.step_time_s` in numpy; a dim a phase does not use adds 0
    whatever its bandwidth). Overflow gives inf (or NaN), never a warning."""
    x = np.asarray(x, np.float64)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        used = traffic_gb > 0
        t = np.where(used, traffic_gb / np.where(used, x, 1.0), 0.0)
        total = compute_s + float(weight @ np.max(t, axis=1, initial=0.0))
        gb = rows["row_gb"]
        num = rows["piece_weight"].shape[0]
        if gb.shape[0] and num:
            used = gb > 0
            base = rows["row_const_s"] + np.sum(
                np.where(used, gb / np.where(used, x, 1.0), 0.0), axis=1)
            piece, nest = rows["row_piece"], rows["row_nest"]
            times = np.full(num, -np.inf)
            if np.any(nest != 0):
                # Piece j nests only pieces < j: evaluate them in order, rows sorted by piece.
                order = np.argsort(piece, kind="stable")
                bounds = np.searchsorted(piece[order], np.arange(num + 1))
                times[:] = 0.0
                for j in range(num):
                    r = order[bounds[j]:bounds[j + 1]]
                    if r.size:
                        times[j] = np.max(base[r] + nest[r, :j] @ times[:j])
            else:
                np.maximum.at(times, piece, base)
            times = np.where(times == -np.inf, 0.0, times)
            total += float(rows["piece_weight"] @ times) + float(rows["comm_const_s"])
    return total


def _check_finite_result(fields: dict, traffic_gb, weight, compute_s, rows: dict,
                         has_cost: bool, f: str, problem: str = "") -> None:
    """Refuses a problem whose step time or network cost could be infinite (overflow):
    the step time (ns) at its interior point, which bounds the optimum's, the network cost
    at ``upper`` (the largest bandwidths the constraints allow, which bounds every feasible
    design's) and their product (the perf_per_cost objective, ns x $) must be finite."""
    x, upper = fields["interior"], fields["upper"]
    with np.errstate(over="ignore", invalid="ignore"):
        step_ns = _step_time_s(x, traffic_gb, weight, compute_s, rows) * 1e9
        cost = float(np.dot(fields["cost_rate"], upper)) if has_cost else 0.0
        product = step_ns * cost
    if not math.isfinite(step_ns):
        raise LibraInputError(
            f"{problem}the step time would not be a finite number: at the bandwidths "
            f"{show([float(v) for v in x])} GB/s, a feasible point of the constraints, "
            f"traffic / bandwidth is {show(step_ns)} ns (the largest float is {_FLOAT_MAX:g}). "
            f"The constraints allow too little bandwidth for the traffic: raise "
            f"{f}.total_bw_gbps, {f}.upper_gbps or {f}.max_cost_usd (or reduce the traffic).")
    if not (math.isfinite(cost) and math.isfinite(product)):
        raise LibraInputError(
            f"{problem}the network cost would not be a finite number: at the largest "
            f"bandwidths the constraints allow, {show([float(v) for v in upper])} GB/s, "
            f"the cost is {show(cost)} $ and step time x cost {show(product)} ns x $ (the "
            f"largest float is {_FLOAT_MAX:g}). Lower cost_rates_usd_per_gbps (the prices) "
            f"or {f}.total_bw_gbps / {f}.upper_gbps / {f}.max_cost_usd.")


_FLOAT_MAX = float(np.finfo(np.float64).max)


def _check_bounds(lo, hi, f, index):
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


def _lp_fields(lo, hi, rates, has_cost, total, mode, linear, budget, f, used, power=None,
               cap=None) -> dict:
    """The constraint fields of `Problem` from HiGHS LPs (any linear rows): feasibility (with a
    minimal conflicting subset in the error), ``upper`` and the tight sets by one LP per
    dimension and row, the interior by `_interior_point`, the least-cost point by one LP."""
    d = len(lo)
    rows = _Rows([], [], [], [])
    if total is not None:
        rows.add(np.ones(d), total, mode == "eq",
                 f"{f}.total_bw_gbps = {total:g} (sum of bandwidths "
                 f"{'==' if mode == 'eq' else '<='} {total:g})")
    # One string at a time, to keep each row's name for conflict messages.
    for i, text in enumerate(linear):
        ae, be, ai, bi = parse_linear_constraints([text], d, f"{f}.linear")
        for a, b in zip(ae, be):
            rows.add(a, b, True, f'{f}.linear[{i}] = "{text}"')
        for a, b in zip(ai, bi):
            rows.add(a, b, False, f'{f}.linear[{i}] = "{text}"')
    if budget is not None:
        rows.add(rates, budget, False, f"{f}.max_cost_usd = {budget:g} (network cost <= budget)")
    if power is not None:
        rows.add(power, cap, False, f"{f}.max_power_w = {cap:g} (network power <= cap)")

    a_eq, b_eq, a_in, b_in = rows.arrays()
    bounds = [(lo[i], hi[i] if np.isfinite(hi[i]) else None) for i in range(d)]
    res = _linprog(np.zeros(d), a_in, b_in, a_eq, b_eq, bounds)
    if res.status == 2:
        if power is not None:
            _check_cap_reachable(rows, power, bounds, cap, f"{f}.max_power_w",
                                 "network power", "W", "cap")
        if budget is not None:
            _check_budget_reachable(rows, rates, bounds, budget, f)
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
                f"set {f}.total_bw_gbps, {f}.upper_gbps[{i}], {f}.max_cost_usd or "
                f"{f}.max_power_w."
            )
        upper[i] = -r.fun

    # Which inequalities hold with equality on the whole set (implicit equalities)? The
    # barrier needs a strict interior, so those become equalities there.
    def min_over_set(c):
        return _linprog(np.asarray(c, np.float64), a_in, b_in, a_eq, b_eq, bounds).fun

    tol = _tight_tol(upper)
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
    # Baseline total: the user's total, else the interior's.
    total_base = float(np.sum(interior)) if total is None else total
    return dict(
        cost_rate=rates, lo=lo, hi=hi, upper=upper, a_eq=a_eq.reshape(-1, d), b_eq=b_eq,
        a_in=a_in.reshape(-1, d), b_in=b_in, lo_tight=lo_tight, hi_tight=hi_tight,
        in_tight=in_tight, interior=interior, min_cost_bw=min_cost_bw,
        total_bw_gbps=np.asarray(total_base, np.float64),
    )


def _check_cap_reachable(rows: _Rows, a, bounds, cap: float, field: str, what: str,
                         unit: str, word: str) -> None:
    """Raises when the cap (the last row of ``rows``) is all that makes the set empty,
    naming the least value of ``a @ bw`` the other constraints allow (an LP)."""
    a_eq, b_eq, a_in, b_in = rows.arrays(set(range(len(rows.b) - 1)))
    res = _linprog(a, a_in, b_in, a_eq, b_eq, bounds)
    if res.status == 0 and res.fun > cap * (1 + 1e-12):
        raise LibraInputError(
            f"{field} = {cap:g}: the {word} is below the least feasible {what}, "
            f"{res.fun:,.6g} {unit} (the design that meets the other constraints with the "
            f"least {what}); raise the {word} to at least that, or relax the other "
            "constraints (lower bounds, total bandwidth, linear rows, cost budget).")


def _check_budget_reachable(rows: _Rows, rates, bounds, budget: float, f: str) -> None:
    """Raises when the cost budget (the last row of ``rows``) is all that makes the set
    empty, naming the least network cost the other constraints allow (an LP)."""
    a_eq, b_eq, a_in, b_in = rows.arrays(set(range(len(rows.b) - 1)))
    res = _linprog(rates, a_in, b_in, a_eq, b_eq, bounds)
    if res.status == 0 and res.fun > budget:
        raise LibraInputError(
            f"{f}.max_cost_usd = {budget:g}: the budget is below the least feasible network "
            f"cost, ${res.fun:,.2f} (the cheapest design that meets the other constraints); "
            "raise the budget to at least that, or relax the other constraints (lower bounds, "
            "total bandwidth, linear rows)."
        )


def _tight_tol(upper):
    """Slack (GB/s) under which a bound or row counts as tight: 1e-9 of the largest ``upper``
    (at least 1e-9); ``upper`` [..., D]."""
    return 1e-9 * np.maximum(1.0, np.max(np.abs(upper), axis=-1))


# ------------------------------------------------------------------ batches (stacked arrays)


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
    _batch_range(traffic, "traffic_gb", finite_rule, hi=MAX_TRAFFIC_GB,
                 unit=" (GB, LIMITS.max_bytes x LIMITS.max_npus / 1e9)")
    _batch_range(weight, "weight", finite_rule)
    _batch_range(compute, "compute_s", finite_rule, hi=MAX_COMPUTE_S,
                 unit=" (s, 3 x LIMITS.max_layers x LIMITS.max_ns / 1e9)")
    lo = _batch_array(lower_gbps, (nb, d), f"{f}.lower_gbps", 0.0)
    hi = _batch_array(upper_gbps, (nb, d), f"{f}.upper_gbps", np.inf)
    _first_bad(np.isnan(lo), lo, f"{f}.lower_gbps", "not a number.")
    _first_bad(np.isnan(hi), hi, f"{f}.upper_gbps", "not a number.")
    bad = ~((lo >= 0) & (lo < np.inf) & (hi > 0) & (hi >= lo))
    if bad.any():
        b = int(np.argwhere(bad)[0, 0])
        _check_bounds(lo[b], hi[b], f, f"[{b}]")
    gbps_unit = " (GB/s per NPU, LIMITS.max_gbps)"
    _batch_range(lo, f"{f}.lower_gbps", "", hi=LIMITS.max_gbps, unit=gbps_unit)
    _batch_range(hi, f"{f}.upper_gbps", "", lo_open=True, hi=LIMITS.max_gbps, unit=gbps_unit,
                 inf_ok=True)
    total = None
    if total_bw_gbps is not None:
        total = _batch_array(total_bw_gbps, (nb,), f"{f}.total_bw_gbps")
        _batch_range(total, f"{f}.total_bw_gbps", "must be > 0.", lo_open=True,
                     hi=LIMITS.max_gbps, unit=gbps_unit)
    total_bw_mode = _check_mode(total_bw_mode, f)
    has_cost = cost_rates_usd_per_gbps is not None
    rates = None
    if has_cost:
        rates = _batch_array(cost_rates_usd_per_gbps, (nb, d), "cost_rates_usd_per_gbps")
        _batch_range(rates, "cost_rates_usd_per_gbps", finite_rule, hi=MAX_RATE_USD_PER_GBPS,
                     unit=" ($ per GB/s, LIMITS.max_usd)")
    budget = None
    if max_cost_usd is not None:
        if not has_cost:
            raise LibraInputError(
                f"{f}.max_cost_usd: a cost budget needs a cost model (set cost_model.file)."
            )
        budget = _batch_array(max_cost_usd, (nb,), f"{f}.max_cost_usd")
        _batch_range(budget, f"{f}.max_cost_usd", "must be a finite number > 0.",
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
            p = _build(traffic[b], weight[b], float(compute[b]),
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
    """`_check_finite_result` for a stacked batch. First a bound over the whole batch from
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
        _check_finite_result(one, traffic[b], weight[b], float(compute[b]), no_rows((), d),
                             has_cost, f, problem=f"problem {b} of the batch: ")


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
