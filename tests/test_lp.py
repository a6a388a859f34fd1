"""Host linear programs (`libra_jax.model.lp`): HiGHS through highspy, in SciPy's form."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.optimize

from libra_jax.model import lp


def _random_lp(rng, n, m_ub, m_eq):
    a_ub = rng.normal(size=(m_ub, n))
    x0 = rng.uniform(0.5, 2.0, n)  # a feasible point inside the bounds
    b_ub = a_ub @ x0 + rng.uniform(0.1, 1.0, m_ub)
    a_eq = rng.normal(size=(m_eq, n))
    b_eq = a_eq @ x0
    bounds = [(0.0, float(h)) if rng.random() < 0.7 else (None, None)
              for h in rng.uniform(3.0, 6.0, n)]
    c = rng.normal(size=n)
    return c, a_ub, b_ub, a_eq, b_eq, bounds


@pytest.mark.parametrize("method", ["highs", "highs-ds"])
def test_random_lps_match_scipy_linprog(method):
    """60 random feasible LPs (bounded, free and mixed variables, equality and inequality
    rows): the same status as scipy.optimize.linprog, optimal values within 1e-9, and
    solutions that satisfy every row and bound."""
    rng = np.random.default_rng(7)
    seen = set()
    for _ in range(60):
        n = int(rng.integers(2, 8))
        c, a_ub, b_ub, a_eq, b_eq, bounds = _random_lp(rng, n, int(rng.integers(0, 6)),
                                                        int(rng.integers(0, min(n, 3))))
        ours = lp.linprog(c, a_ub, b_ub, a_eq, b_eq, bounds, method=method, tolerance=1e-10)
        ref = scipy.optimize.linprog(
            c, A_ub=a_ub if len(b_ub) else None, b_ub=b_ub if len(b_ub) else None,
            A_eq=a_eq if len(b_eq) else None, b_eq=b_eq if len(b_eq) else None,
            bounds=bounds, method=method,
            options=dict(primal_feasibility_tolerance=1e-10, dual_feasibility_tolerance=1e-10))
        assert ours.status == ref.status, (ours.message, ref.message)
        seen.add(ours.status)
        if ours.status == 0:
            assert ours.fun == pytest.approx(ref.fun, rel=1e-9, abs=1e-9)
            assert ours.fun == pytest.approx(float(c @ ours.x), rel=1e-9, abs=1e-9)
            assert np.all(a_ub @ ours.x <= b_ub + 1e-8)
            np.testing.assert_allclose(a_eq @ ours.x, b_eq, atol=1e-8)
            lo = np.array([-np.inf if b[0] is None else b[0] for b in bounds])
            hi = np.array([np.inf if b[1] is None else b[1] for b in bounds])
            assert np.all(ours.x >= lo - 1e-9) and np.all(ours.x <= hi + 1e-9)
        else:
            assert np.all(np.isnan(ours.x)) and np.isnan(ours.fun)
    assert 0 in seen and 3 in seen  # (free variables make some of them unbounded)


def test_statuses_by_hand():
    """x >= 0 (the default bounds): min x0 + x1 with x0 + x1 >= 2 is 2; x0 <= -1 is
    infeasible (2); min -x0 is unbounded (3); no rows at all is fine."""
    r = lp.linprog([1.0, 1.0], a_ub=[[-1.0, -1.0]], b_ub=[-2.0])
    assert r.status == 0 and r.fun == pytest.approx(2.0) and np.sum(r.x) == pytest.approx(2.0)
    r = lp.linprog([1.0, 1.0], a_ub=[[1.0, 0.0]], b_ub=[-1.0])
    assert r.status == 2 and "nfeasible" in r.message
    assert lp.linprog([-1.0, 0.0]).status == 3
    r = lp.linprog([1.0, 2.0], bounds=[(1.0, 3.0), (-1.0, None)])
    assert r.status == 0 and r.x.tolist() == [1.0, -1.0] and r.fun == pytest.approx(-1.0)


def test_highs_prints_nothing():
    """HiGHS's banner (its C++ constructor writes it to stdout before options apply) never
    reaches stdout, where the commands print their tables."""
    p = subprocess.run([sys.executable, "-c",
                        "from libra_jax.model import lp; print('before'); "
                        "r = lp.linprog([1.0], a_ub=[[-1.0]], b_ub=[-1.0]); "
                        "print('after', r.status, r.fun)"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["before", "after", "0", "1.0"], p.stdout
