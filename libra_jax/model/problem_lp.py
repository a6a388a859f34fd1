"""The LP path of the constraint fields of a `Problem` (any linear rows, a power cap, and
the problems the closed form leaves to it): feasibility, with a minimal conflicting subset
of the constraints in the error, ``upper`` and the tight sets by one HiGHS LP per dimension
and row, the interior point, the least-cost point (`lp_fields`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from libra_jax.model import lp
from libra_jax.model.linear import parse_linear_constraints
from libra_jax.types import LibraInputError


def linprog(c, a_ub, b_ub, a_eq, b_eq, bounds):
    return lp.linprog(c, a_ub, b_ub, a_eq, b_eq, bounds, method="highs")


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
    res = linprog(np.zeros(d), a_in, b_in, a_eq, b_eq, bounds)
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


def lp_fields(lo, hi, rates, has_cost, total, mode, linear, budget, f, used, power=None,
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
    res = linprog(np.zeros(d), a_in, b_in, a_eq, b_eq, bounds)
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
        r = linprog(c, a_in, b_in, a_eq, b_eq, bounds)
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
        return linprog(np.asarray(c, np.float64), a_in, b_in, a_eq, b_eq, bounds).fun

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
        r = linprog(rates, a_in, b_in, a_eq, b_eq, bounds)
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
    res = linprog(a, a_in, b_in, a_eq, b_eq, bounds)
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
    res = linprog(rates, a_in, b_in, a_eq, b_eq, bounds)
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
    r = linprog(c, np.array(rows_a).reshape(-1, d + 1), np.array(rows_b),
                 np.array(eq_a).reshape(-1, d + 1), np.array(eq_b), bounds)
    if r.status != 0 or r.x[d] <= 0:
        raise LibraInputError(
            "could not find a point strictly inside the constraints "
            f"({r.message}); check for constraints that only touch at a point."
        )
    return r.x[:d]
