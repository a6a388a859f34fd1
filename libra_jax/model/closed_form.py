"""The constraint fields of `problem.Problem` in closed form, for a batch of problems whose
only constraints are a box, a total bandwidth (== or <=) and a cost budget: no LP
(`closed_form`; moved here from problem.py, where the LP path and the builders are).
Vectorised over the batch; a batch of one gives the same numbers, to the last bit, as a row
of a large batch for fewer than 8 dims (see `over_dims`)."""

from __future__ import annotations

import math

import numpy as np

# Relative violation of the total or of the cost budget that the closed form still accepts
# (rounding of inputs such as lower bounds that sum exactly to the total); beyond it the LP
# path decides (HiGHS' own tolerance is far looser) and words the error.
_FEASIBILITY_RTOL = 1e-12


# Batch arrays are [B, D] (or [B, n, D]) with few dims D. numpy reduces such short last axes
# row by row (some 30 ns a row), so on a large batch a loop over the dims, each step
# vectorised over the batch, is 10-30x faster; a small array takes numpy's one call. Both add
# in the same order for D < 8 (numpy sums 8 or more in pairs).
_LOOP_OVER_DIMS_SIZE = 1024


def over_dims(ufunc, x):
    """ufunc.reduce(x, axis=-1), e.g. np.add for a sum, np.minimum for a min; for a count of
    True entries pass an integer array (np.add of bools is a logical or)."""
    if x.size < _LOOP_OVER_DIMS_SIZE:
        return ufunc.reduce(x, axis=-1)
    out = x[..., 0]
    for i in range(1, x.shape[-1]):
        out = ufunc(out, x[..., i])
    return out


def _excl_cumsum(x):
    """Exclusive prefix sums along the last axis, out[..., k] = sum(x[..., :k]), for finite x
    (cumsum - x: exact at k = 0, within an ulp of the running sum elsewhere)."""
    if x.size < _LOOP_OVER_DIMS_SIZE:
        return np.cumsum(x, axis=-1) - x
    out = np.array(x, np.float64)
    for i in range(1, x.shape[-1]):
        out[..., i] += out[..., i - 1]
    return out - x


def _cheapest_fill(ix, width, amount):
    """Least-cost y with 0 <= y <= width and sum(y) = amount (fractional knapsack): fill the
    dims in increasing cost rate up to their width.

    Args:
      ix: (rows [B, 1], order [B, D]) fancy index putting each problem's dims in increasing
        rate (a stable argsort of the rates).
      width: [B, D] finite widths. amount: [B] (<= 0 gives y = 0).
    """
    w_sorted = width[ix]
    y_sorted = np.minimum(np.maximum(amount[:, None] - _excl_cumsum(w_sorted), 0.0), w_sorted)
    y = np.empty_like(y_sorted)
    y[ix] = y_sorted
    return y


def _cost_line_range(ix, rates, width, s0, c0):
    """Range of y_i = bw_i - lo_i that a cost budget allows under a total equality, per dim.

    With the total equality the other dims carry s0 - y_i (s0 = total - sum(lo)); the least
    they can pay for it is g_i(s0 - y_i), g_i the fractional-knapsack cost of the others: convex
    and piecewise linear, the maximum of its segment lines Q_k + rho_k (s - W_k) (k over the
    others in increasing rate rho_k; W_k, Q_k the width and cost of the others filled before
    k). So y_i is allowed iff rates_i y_i + g_i(s0 - y_i) <= c0 (c0 = budget - rates @ lo), i.e.
    for every k: (rates_i - rho_k) y_i <= c0 - Q_k - rho_k (s0 - W_k), an upper bound on y_i
    where rho_k < rates_i and a lower bound where rho_k > rates_i. O(D^2) per problem.

    Args:
      ix: dims in increasing rate (see `_cheapest_fill`).
      rates: [B, D] >= 0. width: [B, D] widths hi - lo clipped to max(s0, 0) (finite; that
        leaves g_i on [0, s0] as it is). s0, c0: [B].

    Returns:
      (y_min, y_max) [B, D], -inf / +inf where no line bounds y_i.
    """
    d = rates.shape[-1]
    r_sorted, w_sorted = rates[ix], width[ix]
    w_before, q_before = _excl_cumsum(w_sorted), _excl_cumsum(r_sorted * w_sorted)
    pos = np.empty_like(ix[1])
    pos[ix] = np.arange(d)  # pos[b, i]: rank of dim i
    k = np.arange(d)
    i_before_k = pos[:, :, None] < k  # [B, i, k]
    # Prefix sums of the others (dim i left out).
    w_ik = w_before[:, None, :] - i_before_k * width[:, :, None]
    q_ik = q_before[:, None, :] - i_before_k * (rates * width)[:, :, None]
    rhs = c0[:, None, None] - q_ik - r_sorted[:, None, :] * (s0[:, None, None] - w_ik)
    slope = rates[:, :, None] - r_sorted[:, None, :]  # 0 at dim i's own rank: no line
    ratio = rhs / slope
    y_max = over_dims(np.minimum, np.where(slope > 0, ratio, np.inf))
    y_min = over_dims(np.maximum, np.where(slope < 0, ratio, -np.inf))
    return y_min, y_max


def _water_fill(a, b, target, rows):
    """clip(lam, a, b) with lam such that the sum is ``target``: the point of the box [a, b]
    nearest the equal split (water-filling). f(lam), the sum of the clipped values, is
    piecewise linear and non-decreasing with knots at a and b: evaluate it at all 2D knots and
    interpolate on the segment holding the target (a target below sum(a) / above sum(b) gives
    a / b). a, b [B, D] finite with a <= b, target [B], rows [B, 1] = arange(B)."""
    knots = np.sort(np.concatenate([a, b], axis=-1), axis=-1)  # [B, 2D]
    f = over_dims(np.add, np.minimum(np.maximum(knots[:, :, None], a[:, None, :]), b[:, None, :]))
    # The segment [knot j - 1, knot j] with f(j - 1) < target <= f(j), j in [1, 2D - 1].
    j = over_dims(np.add, (f[:, 1:-1] < target[:, None]).astype(np.intp)) + 1
    rows, i = rows[:, 0], j - 1
    k0, k1, f0, f1 = knots[rows, i], knots[rows, j], f[rows, i], f[rows, j]
    lam = np.where(f1 > f0, k0 + (target - f0) * (k1 - k0) / (f1 - f0), k1)
    return np.minimum(np.maximum(lam[:, None], a), b)


def _choose(cond, always, when_true, when_false):
    """np.where(cond, when_true(), when_false()) for cond [B] and values [B] or [B, D], calling
    a branch only if some problem takes it (``always``: cond is known to hold everywhere)."""
    if always:
        return when_true()
    if not cond.any():
        return when_false()
    yes, no = when_true(), when_false()
    return np.where(cond.reshape(cond.shape + (1,) * (np.ndim(yes) - 1)), yes, no)


def closed_form(lo, hi, total, eq, rates, budget, used=None):
    """The constraint fields of `Problem` without LPs, for a batch of problems whose only
    constraints are the box lo <= bw <= hi, a total sum(bw) == T (``eq``) or <= T, and a cost
    budget rates @ bw <= C (rates >= 0). Vectorised over the batch; the fields equal the LP
    path's (`problem_lp.lp_fields`) where its optimum is unique, and are optima of the same
    LPs otherwise.

    With y = bw - lo, w = hi - lo, s0 = T - sum(lo) and c0 = C - rates @ lo:

      * feasible iff s0 >= 0 (and s0 <= sum(w) for ``eq``), c0 >= 0, and, for ``eq`` with a
        budget, the least cost (the fractional knapsack `_cheapest_fill`: s0 into the
        cheapest dims first) is <= C;
      * max y_i (``upper``): the other dims stay at lo, so min(w_i, s0, c0 / rates_i); with
        ``eq`` and a budget the others must carry s0 - y_i instead: min(w_i, s0) and the cost
        lines of `_cost_line_range`;
      * min y_i (for ``hi_tight``): 0; with ``eq``, max(0, s0 - the other widths) and the cost
        lines. Least total: sum(lo); least cost: rates @ lo, with ``eq`` the knapsack's. The
        tight sets compare these with the LP path's tolerance (`_tight_tol`);
      * least-cost point: lo, with ``eq`` the knapsack fill;
      * interior (`_interior_point`'s LP): fix the tight dims, make tight rows equalities, and
        maximise the smallest slack r of the rest (unit-norm rows: the total row
        ones / sqrt(D), the cost row rates / ||rates||; r <= max(1, max(upper))). For a given
        r the free dims F lie in the shrunk box [lo + r, hi - r], where lo + r has the least
        sum and cost, so r* is the least of: (hi_i - lo_i) / 2; under a total equality
        s0_F / |F| and (sum_F hi - T_F) / |F|; under a total inequality s0_F / (|F| + sqrt(D));
        for a budget without a total equality c0_F / (sum_F rates + ||rates||); with one, the
        knapsack cost in the shrunk box is again a maximum of lines, now linear in r as well,
        L_m(r) = Q_m - 2 r P_m + rho_m (s0_F - |F| r - W_m + 2 m r) (m-th cheapest free dim;
        P_m, W_m, Q_m the rates, widths and costs of the free dims before it), and every m
        bounds r by c0_F - (sum_F rates + ||rates||) r >= L_m(r). (_F: what is left to the
        free dims once the fixed ones are paid for.) The point: water-fill towards the equal
        split in [lo + r*, hi - r*] (to the total, or to the middle of the sums allowed), then,
        if that breaks the budget, move towards the least-cost point of the shrunk set until
        the budget's slack is r*.

    Returns (fields, ok): the `Problem` constraint fields with a leading batch axis, and ok
    [B], False where the LP path has to decide: infeasible (beyond a 1e-12 relative rounding),
    unbounded, no strictly interior point, a zero rate vector with a budget, or a tight budget
    that the tight dims and total do not already imply (free dims of different rates under a
    total equality, or of nonzero rates without one: the budget would be a second, independent
    equality).

    Args:
      lo, hi: [B, D] bounds (hi +inf for none), 0 <= lo <= hi.
      total: [B] totals (> 0) or None. eq: whether the total is an equality.
      rates: [B, D] cost rates (finite, >= 0) or None without a cost model.
      budget: [B] cost budgets (finite, > 0) or None; needs rates.
      used: [B, D] bool, the dims that carry traffic, or None: ok is False where one of them
        is held at about 0 (``upper`` <= the tight tolerance); the LP path words that error
        (or, where ``upper`` is not <= 0 to it, builds the problem as before).
    """
    nb, d = lo.shape
    has_total, has_budget, has_cost = total is not None, budget is not None, rates is not None
    eq = bool(eq) and has_total
    r = rates if has_cost else np.zeros((nb, d))
    rows = np.arange(nb)[:, None]
    ix = (rows, np.argsort(r, axis=-1, kind="stable")) if has_cost else None
    w = hi - lo
    sum_lo = over_dims(np.add, lo)
    ok = np.ones(nb, bool)
    y_max, y_min = w, 0.0
    fill = None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # Bounds of y over the set, feasibility, least cost.
        if has_total:
            s0 = total - sum_lo
            rounding = _FEASIBILITY_RTOL * total
            ok &= s0 >= -rounding
            y_max = np.minimum(w, s0[:, None])
            if eq:
                ok &= s0 <= over_dims(np.add, w) + rounding
                width = np.minimum(w, np.maximum(s0, 0.0)[:, None])
                y_min = np.maximum(s0[:, None] - (over_dims(np.add, width)[:, None] - width), 0.0)
                if has_cost:
                    fill = _cheapest_fill(ix, width, s0)
        if has_budget:
            norm_r = np.sqrt(over_dims(np.add, r * r))
            ok &= norm_r > 0
            cost_lo = over_dims(np.add, r * lo)
            c0 = budget - cost_lo
            least = cost_lo if fill is None else over_dims(np.add, r * (lo + fill))
            ok &= least <= budget * (1.0 + _FEASIBILITY_RTOL)
            if eq:
                line_min, line_max = _cost_line_range(ix, r, width, s0, c0)
                y_max = np.minimum(y_max, line_max)
                y_min = np.maximum(y_min, line_min)
            else:
                y_max = np.minimum(y_max, np.where(r > 0, c0[:, None] / r, np.inf))
        upper = lo + y_max
        # max(1, max |upper|): the scale of the LP path's tolerance (`_tight_tol`) and, as
        # upper >= 0 when feasible, its cap on the interior's slack (`_interior_point`).
        scale = np.maximum(1.0, over_dims(np.maximum, np.abs(upper)))
        ok &= scale < np.inf  # bounded
        tol = 1e-9 * scale
        lo_tight = upper - lo <= tol[:, None]
        hi_tight = hi - (lo + y_min) <= tol[:, None]  # False for hi = inf
        if used is not None:  # traffic on a dim held at (about) 0
            ok &= ~over_dims(np.logical_or, used & (upper <= tol[:, None]))

        # Rows in the LP path's order: the total (equality or inequality), then the budget.
        n_in = int(has_total and not eq) + int(has_budget)
        a_eq, b_eq = np.empty((nb, int(eq), d)), np.empty((nb, int(eq)))
        a_in, b_in = np.empty((nb, n_in, d)), np.empty((nb, n_in))
        in_tight = np.empty((nb, n_in), bool)
        total_tight = np.full(nb, eq)  # the total holds with equality on the whole set
        if has_total:
            root_d = math.sqrt(d)
            (a_eq if eq else a_in)[:, 0] = 1.0 / root_d
            (b_eq if eq else b_in)[:, 0] = total / root_d
            if not eq:
                total_tight = in_tight[:, 0] = total / root_d - sum_lo / root_d <= tol
        if has_budget:
            a_in[:, -1] = r / norm_r[:, None]
            b_in[:, -1] = budget / norm_r
            cost_tight = in_tight[:, -1] = budget / norm_r - least / norm_r <= tol

        # Interior. The fixed dims sit at their tight bound; base / top are lo / hi with the
        # fixed dims at that value, so sums over all dims count what the fixed ones take.
        free = ~(lo_tight | hi_tight)
        n_free = over_dims(np.add, free.astype(np.intp))
        base = np.where(hi_tight & ~lo_tight, hi, lo)
        top = np.where(lo_tight, lo, hi)
        r_star = np.minimum(scale, over_dims(np.minimum, np.where(free, w, np.inf)) / 2)
        if has_total:
            s0_f = total - over_dims(np.add, base)  # what the free dims carry above lo

            def bound_eq():
                bound = np.minimum(s0_f, over_dims(np.add, top) - total)
                return np.where(n_free > 0, bound / n_free, np.inf)

            r_star = np.minimum(r_star, _choose(total_tight, eq, bound_eq,
                                                lambda: s0_f / (n_free + root_d)))
        if has_budget:
            r_free = r * free
            top_rate = over_dims(np.maximum, np.where(free, r, -np.inf))
            same_rate = top_rate <= over_dims(np.minimum, np.where(free, r, np.inf))
            ok &= ~cost_tight | np.where(total_tight, same_rate, top_rate <= 0)
            c0_f = budget - over_dims(np.add, r * base)
            rates_f = over_dims(np.add, r_free)

            def lines():
                # The lines L_m over the free dims in increasing rate (fixed dims: width 0).
                w_s = np.minimum(top - base, 3.0 * np.maximum(s0_f, 0.0)[:, None])[ix]
                free_s, r_s = free[ix], r_free[ix]
                m = _excl_cumsum(free_s.astype(np.float64))
                beta = (rates_f + norm_r)[:, None] - 2.0 * _excl_cumsum(r_s) + r_s * (
                    2.0 * m - n_free[:, None])
                num = c0_f[:, None] - _excl_cumsum(r_s * w_s) - r_s * (
                    s0_f[:, None] - _excl_cumsum(w_s))
                return over_dims(np.minimum, np.where(free_s, num / beta, np.inf))

            bound = _choose(total_tight, eq, lines, lambda: c0_f / (rates_f + norm_r))
            r_star = np.where(cost_tight, r_star, np.minimum(r_star, bound))
        ok &= r_star > 0

        # The point: water-fill in the shrunk box [a, b] (a = b on the fixed dims), then mind
        # the budget.
        shift = r_star[:, None] * free
        a = base + shift
        sum_a = over_dims(np.add, a)
        # Under a total equality the free dims carry total - sum_a above a, together.
        b = np.maximum(a, _choose(
            total_tight, eq, lambda: np.minimum(top - shift, a + (total - sum_a)[:, None]),
            lambda: np.minimum(top, upper) - shift))

        def middle():  # the middle of the sums allowed
            most = over_dims(np.add, b)
            if has_total:
                most = np.minimum(most, total - root_d * r_star)
            return (sum_a + most) / 2

        target = _choose(total_tight, eq, lambda: total, middle)
        interior = _water_fill(a, b, target, rows)
        if has_budget:
            cheap = _choose(total_tight, eq,
                            lambda: a + _cheapest_fill(ix, b - a, target - sum_a), lambda: a)
            allowed = budget - norm_r * r_star
            cost_point = over_dims(np.add, r * interior)
            cost_cheap = over_dims(np.add, r * cheap)
            theta = np.minimum(np.maximum(
                (allowed - cost_cheap) / (cost_point - cost_cheap), 0.0), 1.0)
            theta = np.where(~cost_tight & (cost_point > allowed), theta, 1.0)
            interior = cheap + theta[:, None] * (interior - cheap)

    fields = dict(
        cost_rate=r, lo=lo, hi=hi, upper=upper, a_eq=a_eq, b_eq=b_eq, a_in=a_in, b_in=b_in,
        lo_tight=lo_tight, hi_tight=hi_tight, in_tight=in_tight, interior=interior,
        min_cost_bw=(interior.copy() if not has_cost else lo + fill if fill is not None
                     else lo.copy()),
        total_bw_gbps=total if has_total else over_dims(np.add, interior),
    )
    return fields, ok


