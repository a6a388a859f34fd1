"""Many problems built at once (issue 30).

Building one problem (`problem.assemble`: phases merged, the closed form of its constraint
fields, a finite step time checked) is ~100 numpy calls on arrays of a few entries: a few
hundred microseconds of Python, more than solving it in a batch. `problem_from_arrays`
therefore checks its arguments and returns a problem that surely builds
(`quick_checks.surely_builds`) unbuilt; `build_all` builds the unbuilt problems of a list
(`batch.solve_batch`, `warm_up`) together: phases merged and the closed form computed
vectorised, one pass per group of one constraint form (D, total and mode, cost model,
budget), stacked by size into blocks that the batch engine takes as they are
(`problem.place`). Each problem's arrays equal, to the last bit, those of building it alone:
the same operations in the same order on each row (a group of 8 or more dims, where numpy
would sum a row in another order than the vectorised pass, is built problem by problem).
"""

from __future__ import annotations

import numpy as np

from libra_jax.model import problem as P
from libra_jax.model.closed_form import closed_form, over_dims
from libra_jax.model.quick_checks import FINITE_BOUND
from libra_jax.types import LibraInputError


def build_all(problems) -> list[tuple[P.Problem, list[int]]]:
    """Builds together the unbuilt problems of ``problems`` that no block holds yet (see the
    module docstring), placing each in its block. A problem whose building raises (which
    `surely_builds` rules out) raises here, named by its index in ``problems``. Returns the
    blocks made, each with the index in ``problems`` of each of its rows, in order."""
    groups: dict[tuple, tuple[list[int], list]] = {}
    unbuilt, problem = P.unbuilt, P.Problem
    for i, p in enumerate(problems):
        x = unbuilt(p) if isinstance(p, problem) else None
        if x is not None:
            key = (len(x.lo), x.total is None, x.mode, x.has_cost, x.budget is None)
            group = groups.get(key)
            if group is None:
                groups[key] = group = ([], [])
            group[0].append(i)
            group[1].append(x)
    return [made for idx, xs in groups.values() for made in _build_group(problems, idx, xs)]


#: Odd multipliers of the row hash of `_merge_many` (any values work: equal hashes of
#: different rows are detected, and the group then sorted row by row).
_HASH = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9],
                 np.uint64)


def _merge_many(traffic: list, weight: list, d: int):
    """`problem.merge_weighted_phases` of many problems at once (their phases concatenated):
    the merged rows [M, D] and weights [M] sorted by problem then first appearance, and the
    number of merged phases of each problem. A stable sort by (problem, traffic) puts each
    problem's identical rows together in input order, so each merged weight is the sum of
    the same numbers in the same order as for the problem alone. The sort is by a hash of
    the row and its problem (one key, not D + 1; its low bits the position): identical rows
    hash equally, so they are still together and in input order; where two different rows
    hash equally (then not surely together), the rows are sorted lexicographically
    instead."""
    counts = np.fromiter(map(len, weight), np.int64, len(weight))
    t = np.concatenate(traffic) if traffic else np.zeros((0, d))
    w = np.concatenate(weight) if weight else np.zeros(0)
    owner = np.repeat(np.arange(len(weight)), counts)
    keep = (w > 0) & over_dims(np.logical_or, t > 0)
    t, w, owner = t[keep], w[keep], owner[keep]
    bits = (t + 0.0).view(np.uint64)  # (+ 0.0: -0.0 is 0.0, as the comparisons have it)
    h = owner.astype(np.uint64)
    for j in range(d):
        h = h * _HASH[j % 3] + bits[:, j]  # (wraps around)
    # The hash's low bits replaced by the position: unique keys, in input order among equal
    # hashes whatever the sort.
    shift = np.uint64(max(1, int(h.size).bit_length()))
    h = ((h >> shift) << shift) | np.arange(h.size, dtype=np.uint64)
    order = np.argsort(h)
    hashed = h[order] >> shift
    pair = np.flatnonzero(hashed[1:] == hashed[:-1])
    a, b = order[pair], order[pair + 1]
    alike = over_dims(np.logical_and, t[a] == t[b]) & (owner[a] == owner[b])
    equal = np.zeros(max(order.size - 1, 0), bool)
    equal[pair] = alike
    if not alike.all():  # different rows of equal hashes: sorted row by row
        order = np.lexsort(tuple(t.T[::-1]) + (owner,))
        ordered, own = t[order], owner[order]
        equal = over_dims(np.logical_and, ordered[1:] == ordered[:-1]) & (own[1:] == own[:-1])
    new = np.empty(order.size, bool)
    new[:1] = True
    np.logical_not(equal, out=new[1:])
    group = np.cumsum(new) - 1
    sums = np.bincount(group, weights=w[order], minlength=int(new.sum()))
    first = order[new]  # each merged row's first appearance (positions are by problem)
    is_first = np.zeros(order.size, bool)
    is_first[first] = True
    rank = np.cumsum(is_first) - 1  # a first appearance's merged row, in appearance order
    merged = np.empty(first.size)
    merged[rank[first]] = sums
    merged_counts = np.bincount(owner[is_first], minlength=len(weight))
    return t[is_first], merged, merged_counts


def _build_group(problems, idx: list[int], xs: list) -> list[tuple[P.Problem, list[int]]]:
    """`build_all` for the problems ``idx`` (inputs ``xs``) of one constraint form."""
    x0 = xs[0]
    d = len(x0.lo)
    if d >= 8:  # numpy sums 8 or more entries of a row pairwise: built one by one
        for i in idx:
            try:
                P.materialise(problems[i])
            except LibraInputError as e:
                raise LibraInputError(f"problems[{i}]: {e}") from None
        return []
    nb = len(idx)
    traffic, weight, counts = _merge_many([x.traffic for x in xs], [x.weight for x in xs], d)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    used = np.zeros((nb, d), bool)  # (each problem's merged rows are consecutive)
    some = counts > 0
    if some.any():
        used[some] = np.logical_or.reduceat(traffic > 0, starts[some], axis=0)
    lo = np.array([x.lo for x in xs], np.float64)
    hi = np.array([x.hi for x in xs], np.float64)
    total = None if x0.total is None else np.array([x.total for x in xs])
    rates = np.array([x.rates for x in xs], np.float64) if x0.has_cost else None
    budget = None if x0.budget is None else np.array([x.budget for x in xs])
    fields, ok = closed_form(lo, hi, total, x0.mode == "eq", rates, budget, used)
    compute = np.array([x.compute for x in xs])
    unsafe = _unsafe(fields, traffic, weight, starts, some, compute, x0.has_cost)
    # Problems the closed form leaves to the LP path, or whose step time or cost is not
    # far below overflow: built alone (which raises, naming the problem, where it must).
    for b in np.flatnonzero(~ok | unsafe):
        built = _one(problems, idx[b], xs[b])
        for name, value in fields.items():
            value[b] = getattr(built, name)
    made = []
    for k in np.unique(counts):
        rows = np.flatnonzero(counts == k)
        phase = starts[rows][:, None] + np.arange(k)
        block = P.Problem(traffic_gb=traffic[phase].reshape(len(rows), k, d),
                          weight=weight[phase].reshape(len(rows), k),
                          compute_s=compute[rows],
                          **{name: value[rows] for name, value in fields.items()},
                          **P.no_rows((len(rows),), d), has_cost=x0.has_cost)
        block_idx = [idx[r] for r in rows.tolist()]
        for j, i in enumerate(block_idx):
            P.place(problems[i], block, j)
        made.append((block, block_idx))
    return made


def _one(problems, i: int, x: P.Inputs) -> P.Problem:
    """Problem ``i`` built alone (`problem.assemble`), its error named by its index."""
    try:
        return P.assemble(P.with_arrays(x))
    except LibraInputError as e:
        raise LibraInputError(f"problems[{i}]: {e}") from None


def _unsafe(fields, traffic, weight, starts, some, compute, has_cost) -> np.ndarray:
    """[B] problems of a group whose step time at the interior point or cost at ``upper``
    (`problem_tree.check_finite_result`) a few vectorised reductions cannot bound far below
    overflow (`FINITE_BOUND`); ``some``: the problems with phases, whose merged rows start
    at ``starts``."""
    x, upper = fields["interior"], fields["upper"]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        load = np.zeros(len(starts))
        if some.any():
            load[some] = np.add.reduceat(weight * traffic.max(axis=1), starts[some])
        step = (compute + load / x.min(axis=1)) * 1e9
        cost = (fields["cost_rate"] * upper).sum(axis=1) if has_cost else 1.0
        return ~((step < FINITE_BOUND) & (cost < FINITE_BOUND) & (step * cost < FINITE_BOUND))
