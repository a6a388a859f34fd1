"""Tests for the LP-free problem building in libra_jax.model.problem: the closed form of
`problem_from_arrays` against the LP path (kept as `problem_build.build(..., closed_form=False)`),
the stacked batch builder `problems_from_stacked` against `problem_from_arrays`, and the error
messages of both."""

import dataclasses
import math

import numpy as np
import pytest
import scipy.optimize

from libra_jax.model import closed_form, problem, problem_build, problem_lp
from libra_jax.model.problem import (
    ConstraintSpec,
    problem_from_arrays,
    problems_from_stacked,
)
from libra_jax.types import LibraInputError

CONSTRAINT_FIELDS = tuple(f.name for f in problem.ARRAY_FIELDS
                          if f.metadata["group"] == "constraints")


def _lp(traffic, rates, spec, weight=None):
    """The LP path (the reference)."""
    weight = np.ones(traffic.shape[0]) if weight is None else weight
    return problem_build.build(traffic, weight, 1.0, rates, spec, "constraints", None,
                          closed_form=False)


def _closed(traffic, rates, spec, weight=None):
    weight = np.ones(traffic.shape[0]) if weight is None else weight
    return problem_from_arrays(traffic, weight, 1.0, rates, spec)


def _cost_range(lo, hi, mode, total, rates):
    """(least, most) network cost over the box and total, by HiGHS (independent of the closed
    form), or None if the most is unbounded."""
    d = len(lo)
    kw = {}
    if mode == "eq":
        kw = dict(A_eq=np.ones((1, d)), b_eq=[total])
    elif mode == "le":
        kw = dict(A_ub=np.ones((1, d)), b_ub=[total])
    bounds = [(lo[i], hi[i] if np.isfinite(hi[i]) else None) for i in range(d)]
    least = scipy.optimize.linprog(rates, bounds=bounds, method="highs", **kw)
    most = scipy.optimize.linprog(-rates, bounds=bounds, method="highs", **kw)
    if least.status != 0:
        return None
    return least.fun, (-most.fun if most.status == 0 else None)


def _random_case(rng, d, mode, with_cost, with_budget):
    """A random constraint set of one form, often with tight parts: lower bounds summing to
    the total, upper == lower, budget == least cost, infinite upper bounds, tied rates."""
    lo = np.where(rng.random(d) < 0.5, 0.0, rng.integers(1, 50, d) * 0.5)
    hi = np.where(rng.random(d) < 0.4, np.inf, lo + rng.integers(1, 200, d) * 0.25)
    hi = np.where((rng.random(d) < 0.15) & (lo > 0), lo, hi)  # upper == lower
    if mode is None and not with_budget:
        hi = np.where(np.isfinite(hi), hi, lo + 10.0)  # bounded without a total or budget
    total = None
    if mode is not None:
        u = rng.random()
        if u < 0.15:
            # Lower bounds summing exactly to the total (> 0 each: a dim held at 0 with
            # traffic is an error).
            lo = np.maximum(lo, rng.integers(1, 9, d) * 0.5)
            hi = np.maximum(hi, lo)
            total = lo.sum()
        elif u < 0.25 and mode == "eq" and np.isfinite(hi.sum()):
            total = hi.sum()
        else:
            top = hi.sum() if np.isfinite(hi.sum()) else lo.sum() + 400.0
            total = lo.sum() + rng.uniform(0.05, 1.0) * (top - lo.sum()) + 0.5
    rates = budget = None
    if with_cost:
        if rng.random() < 0.5:
            rates = rng.choice([0.5, 1.0, 2.0, 3.5], d)  # ties
        else:
            rates = rng.uniform(0.2, 10.0, d)
        if mode is None:  # rate 0 only where the bandwidth is bounded anyway
            rates = np.where(np.isfinite(hi) & (rng.random(d) < 0.2), 0.0, rates)
    if with_budget:
        rng_cost = _cost_range(lo, hi, mode, total, rates)
        if rng_cost is None:
            return None
        least, most = rng_cost
        most = least * 2 + 100.0 if most is None else most
        u = rng.random()
        budget = least if u < 0.2 else least + rng.uniform(0.02, 1.0) * (most - least)
        if budget <= 0:
            return None
    spec = ConstraintSpec(
        total_bw_gbps=total, total_bw_mode=mode or "eq", lower_gbps=list(lo),
        upper_gbps=[None if np.isinf(h) else h for h in hi], max_cost_usd=budget)
    traffic = rng.uniform(0.0, 2.0, (3, d)) * (rng.random((3, d)) < 0.85)
    return traffic, rates, spec


def _slacks(p, x):
    """Slacks of x in the rows `_interior_point` maximises the least of (and its cap)."""
    lo, hi = np.asarray(p.lo), np.asarray(p.hi)
    out = [max(1.0, float(np.max(p.upper)))]
    for i in range(len(lo)):
        if not (p.lo_tight[i] or p.hi_tight[i]):
            out.append(x[i] - lo[i])
            if np.isfinite(hi[i]):
                out.append(hi[i] - x[i])
    out += [p.b_in[j] - p.a_in[j] @ x for j in range(len(p.b_in)) if not p.in_tight[j]]
    return np.array(out)


def _assert_matches_lp(got, ref, rates, spec):
    """The closed form ``got`` against the LP path ``ref``: equal where the LP optimum is
    unique, an optimum of the same LP where it is not (interior, least-cost point)."""
    scale = max(1.0, float(np.max(ref.upper)))
    tol = 1e-12 * scale
    for name in ("cost_rate", "lo", "hi", "upper", "a_eq", "b_eq", "a_in", "b_in"):
        a, b = np.asarray(getattr(got, name)), np.asarray(getattr(ref, name))
        assert a.shape == b.shape, name
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=tol, err_msg=name)
    for name in ("lo_tight", "hi_tight", "in_tight"):
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), err_msg=name)
    x = np.asarray(got.interior)
    # The interior: the tight dims at their bound, on the equality and tight rows, and the
    # same max-min slack r* as the LP's.
    fixed = np.where(got.lo_tight, got.lo, got.hi)
    tight = np.asarray(got.lo_tight | got.hi_tight)
    np.testing.assert_array_equal(x[tight], fixed[tight])
    np.testing.assert_allclose(got.a_eq @ x, got.b_eq, rtol=0, atol=tol)
    np.testing.assert_allclose(got.a_in[got.in_tight] @ x, got.b_in[got.in_tight], rtol=0,
                               atol=1e-9 * scale)
    r_got, r_ref = _slacks(ref, x).min(), _slacks(ref, np.asarray(ref.interior)).min()
    assert r_got > 0
    assert r_got == pytest.approx(r_ref, rel=1e-8, abs=1e-9 * scale)
    if rates is None:
        np.testing.assert_array_equal(got.min_cost_bw, got.interior)
    else:
        m = np.asarray(got.min_cost_bw)
        assert np.all(m >= got.lo) and np.all(m <= got.hi)
        np.testing.assert_allclose(got.a_eq @ m, got.b_eq, rtol=0, atol=tol)
        assert np.all(got.a_in @ m <= got.b_in + tol)
        assert rates @ m == pytest.approx(rates @ np.asarray(ref.min_cost_bw), rel=1e-12,
                                          abs=1e-12)
    total = spec.total_bw_gbps
    assert float(got.total_bw_gbps) == pytest.approx(np.sum(x) if total is None else total,
                                                     rel=1e-15)


FORMS = [(mode, cost, budget) for mode in ("eq", "le", None) for cost, budget in
         ((False, False), (True, False), (True, True))]


@pytest.mark.parametrize("mode,with_cost,with_budget", FORMS)
def test_closed_form_matches_lp(mode, with_cost, with_budget, monkeypatch):
    rng = np.random.default_rng(FORMS.index((mode, with_cost, with_budget)))
    checked = errors = 0
    for _ in range(40):
        d = int(rng.integers(1, 9))
        case = _random_case(rng, d, mode, with_cost, with_budget)
        if case is None:
            continue
        traffic, rates, spec = case
        try:
            ref = _lp(traffic, rates, spec)
        except LibraInputError as e:
            # Errors: the closed form leaves them to the LP path, same message.
            with pytest.raises(LibraInputError) as got:
                _closed(traffic, rates, spec)
            assert str(got.value) == str(e)
            errors += 1
            continue
        used = (traffic > 0).any(axis=0)
        if (used & (ref.upper <= 1e-9 * max(1.0, ref.upper.max()))).any():
            # Traffic on a dim held at about 0 (rounding left the LP's upper a hair above 0,
            # so it builds the problem): the closed form leaves it to the LP path.
            got = _closed(traffic, rates, spec)
            for name in CONSTRAINT_FIELDS:
                np.testing.assert_array_equal(getattr(got, name), getattr(ref, name))
            continue
        with monkeypatch.context() as m:  # no LP on this path
            m.setattr(problem_lp, "linprog", None)
            got = _closed(traffic, rates, spec)
        _assert_matches_lp(got, ref, rates, spec)
        checked += 1
    assert checked >= 25 and errors <= 10


def test_tight_cases_by_hand():
    t = np.ones((1, 3))
    # Lower bounds summing to the total: every dim fixed at its lower bound.
    p = _closed(t, None, ConstraintSpec(total_bw_gbps=60.0, lower_gbps=[10.0, 20.0, 30.0]))
    assert p.lo_tight.all() and not p.hi_tight.any()
    np.testing.assert_array_equal(p.interior, [10.0, 20.0, 30.0])
    np.testing.assert_array_equal(p.upper, [10.0, 20.0, 30.0])
    # ... as an inequality: the total row is tight.
    p = _closed(t, None, ConstraintSpec(total_bw_gbps=60.0, total_bw_mode="le",
                                        lower_gbps=[10.0, 20.0, 30.0]))
    assert p.in_tight.tolist() == [True] and p.lo_tight.all()
    # Upper == lower on one dim: fixed there (lower bound first), the rest water-filled.
    p = _closed(t, None, ConstraintSpec(total_bw_gbps=100.0, lower_gbps=[5.0, 0.0, 0.0],
                                        upper_gbps=[5.0, None, None]))
    assert p.lo_tight.tolist() == [True, False, False]
    assert p.hi_tight.tolist() == [True, False, False]
    np.testing.assert_allclose(p.interior, [5.0, 47.5, 47.5], rtol=1e-15)
    # Budget == least cost under a total: the cheapest dim takes it all (traffic only there:
    # on the others it would be an error).
    rates = np.array([3.0, 1.0, 2.0])
    p = _closed(np.array([[0.0, 1.0, 0.0]]), rates,
                ConstraintSpec(total_bw_gbps=100.0, max_cost_usd=100.0))
    assert p.in_tight.tolist() == [True]
    assert p.lo_tight.tolist() == [True, False, True]
    assert p.hi_tight.tolist() == [False, False, False]
    np.testing.assert_array_equal(p.upper, [0.0, 100.0, 0.0])
    np.testing.assert_array_equal(p.interior, [0.0, 100.0, 0.0])
    np.testing.assert_array_equal(p.min_cost_bw, [0.0, 100.0, 0.0])


def test_interior_is_water_filled():
    # r* = 5 from dim 0's box [0, 10]; the other dims share the rest equally.
    p = _closed(np.ones((1, 4)), None,
                ConstraintSpec(total_bw_gbps=100.0, upper_gbps=[10.0, None, None, None]))
    np.testing.assert_allclose(p.interior, [5.0, 95 / 3, 95 / 3, 95 / 3], rtol=1e-15)
    np.testing.assert_array_equal(p.upper, [10.0, 100.0, 100.0, 100.0])
    # Total only: the equal split (as scan.fast_problem); least cost on the cheapest dim.
    p = _closed(np.ones((2, 3)), np.array([2.0, 1.0, 1.0]), ConstraintSpec(total_bw_gbps=90.0))
    np.testing.assert_allclose(p.interior, [30.0, 30.0, 30.0], rtol=1e-15)
    np.testing.assert_array_equal(p.min_cost_bw, [0.0, 90.0, 0.0])


def test_interior_centred_between_the_sums_allowed():
    # sum <= 100, bw0 <= 10, bw1 <= 100: r* = 5 (dim 0's box). The free sums run from
    # sum(lo + r*) = 10 to 100 - sqrt(2) r* (the total row's slack r*); the interior
    # water-fills to the middle: dim 0 stays at 5, dim 1 takes the rest.
    p = _closed(np.ones((1, 2)), None, ConstraintSpec(
        total_bw_gbps=100.0, total_bw_mode="le", upper_gbps=[10.0, 100.0]))
    middle = (10.0 + 100.0 - math.sqrt(2) * 5.0) / 2
    np.testing.assert_allclose(p.interior, [5.0, middle - 5.0], rtol=1e-14)
    # No total: the middle of the box sums, here the box centre.
    p = _closed(np.ones((1, 2)), None, ConstraintSpec(upper_gbps=[10.0, 30.0]))
    np.testing.assert_allclose(p.interior, [5.0, 15.0], rtol=1e-14)


def test_budget_with_total_upper_bounds_by_hand():
    # sum = 100, cost bw0 + 3 bw1 + 2 bw2 <= 250, bw0 <= 20 (least cost 20 + 2 * 80 = 180).
    # max bw1: the rest cheapest (20 on dim 0, then dim 2): 3 y + 20 + 2 (80 - y) <= 250 ->
    # y <= 70. bw2: with y <= 80 the rest is 20 on dim 0 and 80 - y on dim 1: 2 y + 20 +
    # 3 (80 - y) <= 250 -> y >= 10 (no upper bound but the total). bw0: 20, down to 0.
    rates = np.array([1.0, 3.0, 2.0])
    p = _closed(np.ones((1, 3)), rates, ConstraintSpec(
        total_bw_gbps=100.0, max_cost_usd=250.0, upper_gbps=[20.0, None, None]))
    np.testing.assert_allclose(p.upper, [20.0, 70.0, 100.0], rtol=1e-14)
    assert not p.hi_tight.any() and not p.lo_tight.any() and p.in_tight.tolist() == [False]
    # At the least cost, 180: dim 0 at its upper bound, dim 1 at 0, dim 2 takes the rest.
    p = _closed(np.array([[1.0, 0.0, 1.0]]), rates, ConstraintSpec(
        total_bw_gbps=100.0, max_cost_usd=180.0, upper_gbps=[20.0, None, None]))
    np.testing.assert_allclose(p.upper, [20.0, 0.0, 80.0], rtol=1e-14, atol=1e-12)
    assert p.hi_tight.tolist() == [True, False, False]
    assert p.lo_tight.tolist() == [False, True, False] and p.in_tight.tolist() == [True]
    np.testing.assert_allclose(p.interior, [20.0, 0.0, 80.0], rtol=1e-14)


def test_degenerate_budget_goes_to_lp():
    # A budget tight to 1e-9 (in_tight) with a free dim of nonzero rate (dim 1 can still
    # move 5e-7): the budget would be a second equality, so the closed form declines and
    # problem_from_arrays gives the LP path's fields.
    rates = np.array([1.0, 1e-3])
    spec = ConstraintSpec(upper_gbps=[None, 5.0], max_cost_usd=5e-10)
    t = np.array([[0.0, 1.0]])
    _, ok = closed_form.closed_form(np.zeros((1, 2)), np.array([[np.inf, 5.0]]), None, True,
                                 rates[None], np.array([5e-10]))
    assert not ok[0]
    ref = _lp(t, rates, spec)
    assert ref.in_tight.tolist() == [True] and ref.lo_tight.tolist() == [True, False]
    got = _closed(t, rates, spec)
    for name in CONSTRAINT_FIELDS:
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), err_msg=name)


@pytest.mark.parametrize("spec,traffic", [
    (ConstraintSpec(total_bw_gbps=500.0, lower_gbps=[300.0, 300.0]), [[1.0, 1.0]]),
    (ConstraintSpec(total_bw_gbps=50.0, upper_gbps=[10.0, 10.0]), [[1.0, 1.0]]),
    (ConstraintSpec(total_bw_gbps=50.0, lower_gbps=[10.0, 0.0], max_cost_usd=5.0), [[1.0, 1.0]]),
    (ConstraintSpec(upper_gbps=[10.0, None]), [[1.0, 1.0]]),
    (ConstraintSpec(total_bw_gbps=100.0, lower_gbps=[100.0, 0.0]), [[1.0, 1.0]]),
    (ConstraintSpec(total_bw_gbps=100.0, max_cost_usd=100.0), [[1.0, 1.0]]),
])
def test_errors_match_lp_path(spec, traffic):
    t = np.asarray(traffic)
    rates = np.array([1.0, 2.0]) if spec.max_cost_usd is not None else None
    with pytest.raises(LibraInputError) as ref:
        _lp(t, rates, spec)
    with pytest.raises(LibraInputError) as got:
        _closed(t, rates, spec)
    assert str(got.value) == str(ref.value)


def test_numpy_fields():
    p = _closed(np.ones((2, 3)), np.ones(3), ConstraintSpec(total_bw_gbps=10.0))
    for f in dataclasses.fields(p):
        if not f.metadata.get("static"):
            assert type(getattr(p, f.name)) is np.ndarray, f.name
    assert p.interior.dtype == np.float64 and p.lo_tight.dtype == bool
    assert p.row_piece.dtype == np.int32 and p.compute_s.shape == ()


# --------------------------------------------------------------------------- stacked builder


def _stacked_case(rng, nb, d, k, mode, with_cost, with_budget):
    """A batch of one form (some entries tight) and the per-problem specs."""
    cases = []
    while len(cases) < nb:
        case = _random_case(rng, d, mode, with_cost, with_budget)
        if case is None:
            continue
        try:
            _closed(*case)
        except LibraInputError:
            continue
        cases.append(case)
    traffic = rng.uniform(0.0, 2.0, (nb, k, d)) * (rng.random((nb, k, d)) < 0.7)
    weight = rng.integers(0, 4, (nb, k)).astype(np.float64)
    traffic[:, 0] = traffic[:, 1]  # identical phases: merged in problem_from_arrays only
    specs = [c[2] for c in cases]
    kw = dict(
        total_bw_gbps=None if mode is None else [s.total_bw_gbps for s in specs],
        total_bw_mode=mode or "eq",
        lower_gbps=[s.lower_gbps for s in specs],
        upper_gbps=[[np.inf if u is None else u for u in s.upper_gbps] for s in specs],
        cost_rates_usd_per_gbps=None if not with_cost else [c[1] for c in cases],
        max_cost_usd=None if not with_budget else [s.max_cost_usd for s in specs],
    )
    return traffic, weight, rng.uniform(0, 1, nb), kw, cases


@pytest.mark.parametrize("mode,with_cost,with_budget", FORMS)
def test_stacked_equals_problem_from_arrays(mode, with_cost, with_budget):
    rng = np.random.default_rng(100 + FORMS.index((mode, with_cost, with_budget)))
    nb, d, k = 24, int(rng.integers(1, 9)), 5
    traffic, weight, compute, kw, cases = _stacked_case(rng, nb, d, k, mode, with_cost,
                                                        with_budget)
    inputs = (traffic.copy(), weight.copy())
    ps = problems_from_stacked(traffic, weight, compute, **kw)
    np.testing.assert_array_equal(traffic, inputs[0])  # the caller's arrays stay as they were
    np.testing.assert_array_equal(weight, inputs[1])
    assert ps.traffic_gb.shape == (nb, k, d) and ps.weight.shape == (nb, k)
    assert ps.a_eq.shape == (nb, int(mode == "eq"), d)
    assert ps.a_in.shape == (nb, int(mode == "le") + int(with_budget), d)
    assert ps.piece_weight.shape == (nb, 0) and ps.row_gb.shape == (nb, 0, d)
    assert ps.row_nest.shape == (nb, 0, 0) and ps.comm_const_s.shape == (nb,)
    assert ps.has_cost == with_cost
    for b, (_, rates, spec) in enumerate(cases):
        one = problem_from_arrays(traffic[b], weight[b], compute[b], rates, spec)
        for name in CONSTRAINT_FIELDS:
            got, ref = getattr(ps, name)[b], np.asarray(getattr(one, name))
            assert got.shape == ref.shape and got.dtype == ref.dtype, name
            np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13, err_msg=name)
        # Phases: the same after merging; padding rows have no traffic and weight 0.
        on = ps.weight[b] > 0
        assert np.all(ps.traffic_gb[b][~on] == 0)
        merged = problem.merge_weighted_phases(ps.traffic_gb[b][on], ps.weight[b][on])
        np.testing.assert_array_equal(merged[0], one.traffic_gb)
        np.testing.assert_allclose(merged[1], one.weight, rtol=1e-15)
        assert ps.compute_s[b] == one.compute_s


def test_stacked_shared_values_and_lp_fallback():
    # [D] rates and one total for the whole batch; problem 1 has a budget tight to 1e-9 with
    # free dims of different rates, which the closed form leaves to the LP path.
    rates = np.array([1.0, 1e-3])
    ps = problems_from_stacked(
        np.array([[[1.0, 1.0]], [[0.0, 1.0]]]), np.ones((2, 1)), 0.5,
        upper_gbps=[[100.0, 5.0], [np.inf, 5.0]], cost_rates_usd_per_gbps=rates,
        max_cost_usd=[50.0, 5e-10])
    ref = _lp(np.array([[0.0, 1.0]]), rates, ConstraintSpec(
        upper_gbps=[None, 5.0], max_cost_usd=5e-10))
    for name in CONSTRAINT_FIELDS:
        np.testing.assert_array_equal(getattr(ps, name)[1], getattr(ref, name), err_msg=name)
    np.testing.assert_array_equal(ps.cost_rate, [rates, rates])
    np.testing.assert_array_equal(ps.compute_s, [0.5, 0.5])


def _stack_kw(nb=20, d=3, **kw):
    base = dict(total_bw_gbps=np.full(nb, 100.0), upper_gbps=np.full((nb, d), 80.0))
    base.update(kw)
    return np.ones((nb, 2, d)), np.ones((nb, 2)), np.zeros(nb), base


@pytest.mark.parametrize("change,message", [
    (dict(upper_gbps=np.where(np.arange(60).reshape(20, 3) == 17 * 3 + 2, -1.0, 80.0)),
     r"^constraints\.upper_gbps\[17\]\[2\] = -1: must be > 0\.$"),
    (dict(lower_gbps=np.where(np.arange(60).reshape(20, 3) == 5 * 3 + 1, 90.0, 0.0)),
     r"^constraints\.upper_gbps\[5\]\[1\] = 80 is below constraints\.lower_gbps\[5\]\[1\] = 90"),
    (dict(lower_gbps=np.where(np.arange(60).reshape(20, 3) == 3, -2.0, 0.0)),
     r"^constraints\.lower_gbps\[1\]\[0\] = -2: a bandwidth bound must be a finite"),
    (dict(upper_gbps=np.where(np.arange(60).reshape(20, 3) == 4, np.nan, 80.0)),
     r"^constraints\.upper_gbps\[1\]\[1\] = nan: not a number\.$"),
    (dict(total_bw_gbps=np.where(np.arange(20) == 9, 0.0, 100.0)),
     r"^constraints\.total_bw_gbps\[9\] = 0: must be > 0\.$"),
    (dict(total_bw_mode="ge"), r"total_bw_mode = 'ge': must be 'eq' or 'le'"),
    (dict(max_cost_usd=np.full(20, 5.0)), r"max_cost_usd: a cost budget needs a cost model"),
    (dict(cost_rates_usd_per_gbps=[1.0, -1.0, 1.0], max_cost_usd=np.full(20, 5.0)),
     r"^cost_rates_usd_per_gbps\[0\]\[1\] = -1: must be a finite number >= 0\.$"),
    (dict(cost_rates_usd_per_gbps=[1.0, 1.0, 1.0], max_cost_usd=np.arange(20.0) + 1 - 3),
     r"^constraints\.max_cost_usd\[0\] = -2: must be a finite number > 0\.$"),
    (dict(upper_gbps=np.full((20, 4), 80.0)),
     r"constraints\.upper_gbps has shape \(20, 4\): expected \[20, 3\]"),
])
def test_stacked_bad_values(change, message):
    traffic, weight, compute, kw = _stack_kw()
    kw.update(change)
    with pytest.raises(LibraInputError, match=message):
        problems_from_stacked(traffic, weight, compute, **kw)


@pytest.mark.parametrize("field,value,message", [
    ("traffic", -1.0, r"^traffic_gb\[4\]\[1\]\[2\] = -1: must be a finite number >= 0\.$"),
    ("traffic", np.inf, r"^traffic_gb\[4\]\[1\]\[2\] = inf: must be a finite"),
    ("weight", np.nan, r"^weight\[4\]\[1\] = nan: must be a finite number >= 0\.$"),
    ("compute", -3.0, r"^compute_s\[4\] = -3: must be a finite number >= 0\.$"),
])
def test_stacked_bad_arrays(field, value, message):
    traffic, weight, compute, kw = _stack_kw()
    {"traffic": lambda: traffic.__setitem__((4, 1, 2), value),
     "weight": lambda: weight.__setitem__((4, 1), value),
     "compute": lambda: compute.__setitem__(4, value)}[field]()
    with pytest.raises(LibraInputError, match=message):
        problems_from_stacked(traffic, weight, compute, **kw)


def test_stacked_infeasible_names_problem_and_conflict():
    traffic, weight, compute, kw = _stack_kw()
    lower = np.zeros((20, 3))
    lower[13] = [30.0, 40.0, 50.0]  # sum 120 > total 100
    lower[16] = [60.0, 60.0, 0.0]
    kw["lower_gbps"] = lower
    with pytest.raises(LibraInputError) as e:
        problems_from_stacked(traffic, weight, compute, **kw)
    msg = str(e.value)
    assert msg.startswith("problem 13 of the batch: the constraints cannot all hold")
    assert "constraints.total_bw_gbps = 100" in msg and "constraints.lower_gbps[2] = 50" in msg
    with pytest.raises(LibraInputError) as one:
        _lp(traffic[13], None, ConstraintSpec(total_bw_gbps=100.0, lower_gbps=lower[13],
                                              upper_gbps=[80.0] * 3))
    assert msg == f"problem 13 of the batch: {one.value}"


def test_stacked_unbounded_and_forced_to_zero():
    traffic, weight, compute, kw = _stack_kw()
    kw.pop("total_bw_gbps")
    upper = np.full((20, 3), 80.0)
    upper[6, 1] = np.inf
    kw["upper_gbps"] = upper
    with pytest.raises(LibraInputError, match=r"^problem 6 of the batch: the bandwidth of "
                                              r"dimension 1 is unbounded"):
        problems_from_stacked(traffic, weight, compute, **kw)
    traffic, weight, compute, kw = _stack_kw()
    lower = np.zeros((20, 3))
    lower[2] = [20.0, 80.0, 0.0]  # dim 2 forced to 0 but carries traffic
    kw["lower_gbps"] = lower
    with pytest.raises(LibraInputError, match=r"^problem 2 of the batch: dimension 2 carries "
                                              r"traffic but the constraints force"):
        problems_from_stacked(traffic, weight, compute, **kw)
    # Without traffic on dim 2 (or with weight 0 there) it is fine, with dim 2 held at 0.
    traffic[2, :, 2] = [0.0, 1.0]
    weight[2] = [1.0, 0.0]
    ps = problems_from_stacked(traffic, weight, compute, **kw)
    assert ps.interior[2, 2] == 0.0 and ps.lo_tight[2].tolist() == [True, True, True]
    assert ps.traffic_gb[2, 1].tolist() == [0.0, 0.0, 0.0]


def test_stacked_large_batch_no_lp(monkeypatch):
    # A large batch of feasible problems is built without any LP (and with the loops over the
    # dims of `_over_dims`), and matches the LP path and problem_from_arrays. Budgets between
    # the least and the most cost, so that the cost lines bound the bandwidths.
    rng = np.random.default_rng(3)
    nb, k, d = 2000, 11, 4
    traffic = rng.uniform(0, 2, (nb, k, d))
    upper = rng.uniform(50, 400, (nb, d))
    total = upper.sum(axis=1) * rng.uniform(0.2, 0.9, nb)
    rates = rng.uniform(1, 5, (nb, d))

    def fill_cost(order):  # the cost of the total filled into the dims in this order
        w, r = np.take_along_axis(upper, order, 1), np.take_along_axis(rates, order, 1)
        return (r * np.clip(total[:, None] - (np.cumsum(w, 1) - w), 0, w)).sum(axis=1)

    least, most = fill_cost(np.argsort(rates, 1)), fill_cost(np.argsort(-rates, 1))
    budget = least + rng.uniform(0.05, 0.95, nb) * (most - least)
    with monkeypatch.context() as m:
        m.setattr(problem_lp, "linprog", None)
        ps = problems_from_stacked(traffic, np.ones((nb, k)), np.ones(nb), total_bw_gbps=total,
                                   upper_gbps=upper, cost_rates_usd_per_gbps=rates,
                                   max_cost_usd=budget)
    for b in rng.choice(nb, 8, replace=False):
        spec = ConstraintSpec(total_bw_gbps=total[b], max_cost_usd=budget[b],
                              upper_gbps=list(upper[b]))
        one = _lp(traffic[b], rates[b], spec)
        got = dataclasses.replace(one, **{name: getattr(ps, name)[b] for name in
                                          CONSTRAINT_FIELDS})
        _assert_matches_lp(got, one, rates[b], spec)
        single = _closed(traffic[b], rates[b], spec)
        for name in CONSTRAINT_FIELDS:
            np.testing.assert_allclose(getattr(got, name), getattr(single, name), rtol=1e-13,
                                       atol=1e-13, err_msg=name)
