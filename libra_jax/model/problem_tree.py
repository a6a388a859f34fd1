"""The `Problem` pytree: its array fields with their axes, padding and dtype
(`ARRAY_FIELDS`), sizes (`problem_sizes`), the empty general model (`no_rows`), phase
merging, and how checked inputs become a `Problem` (`assemble`: the constraint fields in
closed form or from the LP path, a finite step time and cost checked), built at once or on
first access to a field (`materialise`)."""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import jax
import numpy as np

from libra_jax.model.closed_form import closed_form as _closed_form
from libra_jax.model.problem_lp import lp_fields
from libra_jax.types import LibraInputError, show


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


FIELD_GROUPS = {f.name: f.metadata["group"] for f in ARRAY_FIELDS}


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


def assemble(x: Inputs, closed_form: bool = True) -> Problem:
    """The `Problem` of checked inputs: phases merged, the constraint fields in closed form
    (`_closed_form`) or from the LP path (`lp_fields`, which words the errors of
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
        fields = lp_fields(x.lo, x.hi, x.rates, x.has_cost, x.total, x.mode, x.linear,
                            x.budget, x.f, used, x.power, x.cap)
    check_finite_result(fields, traffic_gb, weight, x.compute, x.model_rows, x.has_cost, x.f)
    return Problem(traffic_gb=traffic_gb.reshape(-1, d), weight=weight,
                   compute_s=np.asarray(x.compute, np.float64), **fields, **x.model_rows,
                   has_cost=x.has_cost)


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


def check_finite_result(fields: dict, traffic_gb, weight, compute_s, rows: dict,
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
