"""Exact reference solvers for the LIBRA `perf` problem with cvxpy (Clarabel), for tests.

Independent of libra_jax: every constraint is given here as plain numpy arrays, built by the
test from its own description of the problem (not from `Problem`'s rows). The epigraph form

    minimise   compute + w @ t
    subject to t_k >= T_kd / bw_d        for every (k, d) with T_kd > 0
               lo <= bw <= hi,  a_eq @ bw == b_eq,  a_in @ bw <= b_in,  rates @ bw <= cap

is solved after scaling bandwidths and times to O(1) (Clarabel is exact here only after
scaling; see the inputs README). Callers must re-evaluate the returned bandwidths with
libra_jax's own model and compare values, never the solver's objective.
"""

from __future__ import annotations

import dataclasses

import cvxpy as cp
import numpy as np

CLARABEL_OPTS = dict(
    tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12, tol_ktratio=1e-10, max_iter=500
)


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
      bw_scale: typical bandwidth (GB/s) used to scale the variables to O(1).
    """

    def __init__(self, traffic_gb, weight, compute_s, cons: RefConstraints, rates=None,
                 bw_scale=None):
        traffic = np.asarray(traffic_gb, np.float64)
        weight = np.asarray(weight, np.float64)
        k, d = traffic.shape
        if bw_scale is None:
            fin = np.concatenate([cons.hi[np.isfinite(cons.hi)], cons.lo, np.abs(cons.b_eq)])
            bw_scale = max(float(np.max(fin)) if fin.size else 1.0, 1e-3)
        self.bw_scale = sb = float(bw_scale)
        used = traffic > 0
        # time scale: typical phase time at bandwidth bw_scale
        st = float(np.max(traffic[used])) / sb if used.any() else 1.0
        self.t_scale = st
        y = cp.Variable(d)  # bw = sb * y
        tau = cp.Variable(k)  # t = st * tau
        cons_list = [y >= cons.lo / sb]
        fin = np.isfinite(cons.hi)
        if fin.any():
            cons_list.append(y[np.flatnonzero(fin)] <= cons.hi[fin] / sb)
        if len(cons.b_eq):
            cons_list.append(cons.a_eq @ y == cons.b_eq / sb)
        if len(cons.b_in):
            cons_list.append(cons.a_in @ y <= cons.b_in / sb)
        for i in range(k):
            for j in range(d):
                if used[i, j]:
                    cons_list.append(tau[i] >= (traffic[i, j] / (sb * st)) * cp.inv_pos(y[j]))
        self.cap = None
        if rates is not None:
            rates = np.asarray(rates, np.float64)
            self.cap = cp.Parameter(nonneg=True)
            rn = float(np.linalg.norm(rates))
            cons_list.append((rates / rn) @ y <= self.cap / (sb * rn))
        wn = weight / max(float(np.max(weight)), 1e-300) if k else weight
        self.prob = cp.Problem(cp.Minimize(wn @ tau), cons_list)
        self.y = y
        self.d = d

    def solve(self, cap: float | None = None) -> np.ndarray:
        """Optimal bandwidths [D] (GB/s) (with network cost <= cap when given)."""
        if cap is not None:
            self.cap.value = float(cap)
        self.prob.solve(solver=cp.CLARABEL, **CLARABEL_OPTS)
        if self.prob.status not in ("optimal", "optimal_inaccurate"):
            raise RuntimeError(f"reference solve failed: {self.prob.status}")
        return np.asarray(self.y.value, np.float64) * self.bw_scale


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
    prob.solve(solver=cp.CLARABEL, **CLARABEL_OPTS)
    if prob.status != "optimal":
        raise RuntimeError(f"reference LP failed: {prob.status}")
    return float(prob.value), np.asarray(x.value, np.float64)
