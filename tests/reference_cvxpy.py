"""Exact reference solvers for the LIBRA `perf` problem with cvxpy (Clarabel), for tests.

Independent of libra_jax: every constraint is given here as plain numpy arrays, built by the
test from its own description of the problem (not from `Problem`'s rows). The epigraph form

    minimise   compute + w @ t
    subject to t_k >= T_kd / bw_d        for every (k, d) with T_kd > 0
               lo <= bw <= hi,  a_eq @ bw == b_eq,  a_in @ bw <= b_in,  rates @ bw <= cap

is solved after scaling bandwidths and times to O(1) (Clarabel is exact here only after
scaling; see the inputs README). Clarabel's answer may violate a constraint by ~1e-10 of the
bandwidth scale, which lowers its value below the true optimum (by ~1e-9 relative, enough to
make a valid certificate look wrong), so by default every inequality is tightened by a margin
(1e-8 of the bandwidth scale) and the answer is projected exactly onto the equality rows: the
returned point is then feasible for the original problem to rounding, and its value exceeds the
optimum by O(1e-8) relative. Callers must re-evaluate the returned bandwidths with libra_jax's
own model and compare values, never the solver's objective.
"""

from __future__ import annotations

import dataclasses
import warnings

import cvxpy as cp
import numpy as np

CLARABEL_OPTS = dict(
    tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, tol_ktratio=1e-8, max_iter=500
)


def _solve(prob: cp.Problem) -> str:
    # "optimal_inaccurate" warns; callers re-check every point with their own model anyway.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Solution may be inaccurate")
        prob.solve(solver=cp.CLARABEL, **CLARABEL_OPTS)
    return prob.status


@dataclasses.dataclass
class RefConstraints:
    """Constraints on bw [D] (GB/s). Empty rows: shapes (0, D) / (0,)."""

    lo: np.ndarray  # [D] >= 0
    hi: np.ndarray  # [D], +inf for none
    a_eq: np.ndarray  # [E, D]
    b_eq: np.ndarray  # [E]
    a_in: np.ndarray  # [I, D]  (a_in @ bw <= b_in)
    b_in: np.ndarray  # [I]

    def violation(self, bw: np.ndarray) -> float:
        """Largest absolute violation (GB/s-ish; rows are not normalised)."""
        v = [0.0, float(np.max(self.lo - bw)), float(np.max(bw - self.hi))]
        if len(self.b_eq):
            v.append(float(np.max(np.abs(self.a_eq @ bw - self.b_eq))))
        if len(self.b_in):
            v.append(float(np.max(self.a_in @ bw - self.b_in)))
        return max(v)


class PerfReference:
    """A cvxpy perf problem, built once; `solve(cap)` re-solves with a new cost cap.

    Args:
      traffic_gb: [K, D]; weight: [K]; compute_s: scalar.
      cons: the constraints.
      rates: [D] cost rates ($ per GB/s) when a cost cap is wanted, else None.
      bw_scale: typical bandwidth (GB/s) used to scale the variables to O(1); default: the
        largest total bandwidth the constraints allow, over D.
      margin: inequalities are tightened by margin * bw_scale (GB/s, rows normalised).
    """

    def __init__(self, traffic_gb, weight, compute_s, cons: RefConstraints, rates=None,
                 bw_scale=None, margin=1e-8):
        traffic = np.asarray(traffic_gb, np.float64)
        weight = np.asarray(weight, np.float64)
        k, d = traffic.shape
        if bw_scale is None:  # the mean bandwidth of the point of largest total
            bw_scale = max(-min_linear(-np.ones(d), cons)[0] / d, 1e-6)
        self.bw_scale = sb = float(bw_scale)
        self.cons = cons
        dlt = margin  # in scaled units (y = bw / sb)
        used = traffic > 0
        # time scale: typical phase time at bandwidth bw_scale
        st = float(np.max(traffic[used])) / sb if used.any() else 1.0
        self.t_scale = st
        y = cp.Variable(d)  # bw = sb * y
        tau = cp.Variable(k)  # t = st * tau
        cons_list = [y >= cons.lo / sb + dlt]
        fin = np.isfinite(cons.hi)
        if fin.any():
            cons_list.append(y[np.flatnonzero(fin)] <= cons.hi[fin] / sb - dlt)
        if len(cons.b_eq):
            cons_list.append(cons.a_eq @ y == cons.b_eq / sb)
        if len(cons.b_in):
            norms = np.linalg.norm(cons.a_in, axis=1)
            cons_list.append((cons.a_in / norms[:, None]) @ y <= cons.b_in / (norms * sb) - dlt)
        rows, cols = np.nonzero(used)
        if rows.size:  # tau_k >= T_kd / (sb st) * 1 / y_d, one vectorised constraint
            coef = traffic[rows, cols] / (sb * st)
            cons_list.append(tau[rows] >= cp.multiply(coef, cp.inv_pos(y[cols])))
        self.cap = None
        if rates is not None:
            rates = np.asarray(rates, np.float64)
            self.cap = cp.Parameter(nonneg=True)
            rn = float(np.linalg.norm(rates))
            cons_list.append((rates / rn) @ y <= self.cap / (sb * rn) - dlt)
        wn = weight / max(float(np.max(weight)), 1e-300) if k else weight
        self.prob = cp.Problem(cp.Minimize(wn @ tau), cons_list)
        self.y = y
        self.d = d

    def solve(self, cap: float | None = None) -> np.ndarray:
        """Optimal bandwidths [D] (GB/s) (with network cost <= cap when given)."""
        if cap is not None:
            self.cap.value = float(cap)
        if _solve(self.prob) not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"reference solve failed: {self.prob.status}")
        bw = np.asarray(self.y.value, np.float64) * self.bw_scale
        a, b = self.cons.a_eq, self.cons.b_eq
        if len(b):  # exact least-change correction onto the equality rows
            bw = bw - np.linalg.pinv(a) @ (a @ bw - b)
        return bw


def min_linear(c, cons: RefConstraints) -> tuple[float, np.ndarray]:
    """min c @ bw over the constraint set (a cvxpy LP); returns (value, argmin)."""
    d = len(cons.lo)
    x = cp.Variable(d)
    cl = [x >= cons.lo]
    fin = np.isfinite(cons.hi)
    if fin.any():
        cl.append(x[np.flatnonzero(fin)] <= cons.hi[fin])
    if len(cons.b_eq):
        cl.append(cons.a_eq @ x == cons.b_eq)
    if len(cons.b_in):
        cl.append(cons.a_in @ x <= cons.b_in)
    prob = cp.Problem(cp.Minimize(np.asarray(c, np.float64) @ x), cl)
    if _solve(prob) not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"reference LP failed: {prob.status}")
    return float(prob.value), np.asarray(x.value, np.float64)


def level_search(value, lo: float, hi: float, best: float, coarse: int = 12, fine: int = 6,
                 zooms: int = 2) -> float:
    """Brute-force minimum of ``value(level)`` over levels in (lo, hi]: a grid denser near
    ``lo`` (``coarse`` points), zoomed ``zooms`` times around the best level (``fine``
    points each); returns the least value found, at most ``best``."""
    levels = lo + (hi - lo) * np.linspace(0.0, 1.0, coarse + 1)[1:] ** 2
    for _ in range(zooms + 1):
        vals = [value(c) for c in levels]
        best = min(best, min(vals))
        i = int(np.argmin(vals))
        left = levels[i - 1] if i > 0 else lo
        right = levels[min(i + 1, len(levels) - 1)]
        levels = np.linspace(left, right, fine + 2)[1:-1]
    return best
