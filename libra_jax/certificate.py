"""Certified lower bounds for the `perf` problem from a tangent-plane LP (host side).

Every epigraph row is r(y) = c_r + sum_d a_rd / y_d with a >= 0 (LIBRA's phase times
T_kd / y_d are the rows with one coefficient), convex for y > 0, so

    a / y_d >= 2 a / x_d - (a / x_d^2) y_d                     (tangent at x)

and for any pi in the simplex over the rows of one epigraph variable (a phase or a piece),
max_r r(y) >= sum_r pi_r r(y). Hence, for every y in the feasible set P,

    step(y) >= compute + c0 + sum_r w_r pi_r (c_r + sum_d 2 a_rd / x_d) + xi(pi) @ y,
    xi_d(pi) = -sum_r w_r pi_r a_rd / x_d^2,

and min over P of the right-hand side is a lower bound on the optimum. Maximising that bound
over pi (and the LP dual multipliers of P) is a linear program; its value equals the optimum
when x is optimal (the tangent planes touch there). We solve it with scipy's HiGHS, then
re-evaluate the bound from its multipliers in closed form (`bound_from_multipliers`), with the
box [lo, upper] as the domain, so that a slightly inexact LP solution still yields a valid
bound. Both steps use float64 numpy on the host.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize


def _arrays(p, cap):
    rates = np.asarray(p.cost_rate, np.float64)
    a_in = np.asarray(p.a_in, np.float64).reshape(-1, p.num_dims)
    b_in = np.asarray(p.b_in, np.float64)
    if cap is not None:
        norm = np.linalg.norm(rates)
        a_in = np.vstack([a_in, rates / norm])
        b_in = np.append(b_in, cap / norm)
    a_eq = np.asarray(p.a_eq, np.float64).reshape(-1, p.num_dims)
    b_eq = np.asarray(p.b_eq, np.float64)
    return a_in, b_in, a_eq, b_eq


def _epigraph_rows(p):
    """Every epigraph row as (group [R], group weight [G], constant [R] s, coef [R, D] GB):
    LIBRA's (phase, dimension) pairs (constant 0, one coefficient) first, then the general
    rows of `problem.ModelRows`; group = the epigraph variable the row bounds."""
    t = np.asarray(p.traffic_gb, np.float64)
    k, d = t.shape
    kk, dd = np.nonzero(t > 0)
    a_pairs = np.zeros((kk.size, d))
    a_pairs[np.arange(kk.size), dd] = t[kk, dd]
    on = np.asarray(p.row_on, bool)
    group = np.concatenate([kk, k + np.asarray(p.row_piece)[on]]).astype(int)
    weight = np.concatenate([np.asarray(p.weight, np.float64),
                             np.asarray(p.piece_weight, np.float64)])
    const = np.concatenate([np.zeros(kk.size), np.asarray(p.row_const_s, np.float64)[on]])
    coef = np.vstack([a_pairs, np.asarray(p.row_gb, np.float64).reshape(-1, d)[on]])
    return group, weight, const, coef


def _tangent_terms(p, x, pi):
    """(constant, xi [D]) of the tangent-plane minorant for row weights pi [R] (per group in
    the simplex): step(y) >= constant + xi @ y."""
    group, weight, const, coef = _epigraph_rows(p)
    used = coef > 0
    safe_x = np.where(used, x[None, :], 1.0)
    wpi = weight[group] * pi
    value = const + np.sum(np.where(used, 2 * coef / safe_x, 0.0), axis=1)
    total = (float(np.asarray(p.compute_s)) + float(np.asarray(p.comm_const_s))
             + float(wpi @ value))
    xi = -np.sum(wpi[:, None] * np.where(used, coef / safe_x**2, 0.0), axis=0)
    return total, xi


def bound_from_multipliers(p, x, pi, lam, nu, cap=None) -> float:
    """The tangent-plane lower bound (s) for row weights pi [R] (rows of `_epigraph_rows`),
    lam [I(+1)] >= 0 and nu [E]."""
    a_in, b_in, a_eq, b_eq = _arrays(p, cap)
    x = np.asarray(x, np.float64)
    group, weight, _, _ = _epigraph_rows(p)
    pi = np.maximum(np.asarray(pi, np.float64), 0.0)
    tot = np.bincount(group, weights=pi, minlength=weight.shape[0])
    pi = np.where(tot[group] > 0, pi / np.where(tot[group] > 0, tot[group], 1.0), 0.0)
    const, xi = _tangent_terms(p, x, pi)
    lam = np.maximum(np.asarray(lam, np.float64), 0.0)
    nu = np.asarray(nu, np.float64)
    r = xi + a_in.T @ lam + a_eq.T @ nu
    lo = np.asarray(p.lo, np.float64)
    up = np.asarray(p.upper, np.float64)
    box = np.sum(np.minimum(r * lo, r * up))
    return const - lam @ b_in - nu @ b_eq + box


def tangent_lp_bound(p, x, cap=None):
    """Best tangent-plane lower bound (s) at x, with its multipliers.

    Args:
      p: the `Problem`.
      x: [D] bandwidths (GB/s) where the tangents are taken, > 0 on used dims.
      cap: optional network cost cap ($), an extra inequality row.

    Returns:
      (bound_s, lam_cap): the certified lower bound on the optimal step time of the problem
      (with the cap), and the multiplier of the cap row in s per $ (0 without a cap), i.e.
      bound(c) >= bound_s - lam_cap * (c - cap) for every other cap c.
      Returns (-inf, 0) when the LP fails.
    """
    a_in, b_in, a_eq, b_eq = _arrays(p, cap)
    x = np.asarray(x, np.float64)
    group, weight, const, coef = _epigraph_rows(p)
    d = x.shape[0]
    n_grp = weight.shape[0]
    used = coef > 0
    if np.any(used & (x[None, :] <= 0)):
        return -np.inf, 0.0
    lo = np.asarray(p.lo, np.float64)
    up = np.asarray(p.upper, np.float64)
    safe_x = np.where(used, x[None, :], 1.0)
    n_pi, n_in, n_eq = group.size, len(b_in), len(b_eq)
    # Variables: pi (rows) >= 0, lam >= 0, nu free, alpha >= 0 (lo), beta >= 0 (upper).
    n = n_pi + n_in + n_eq + 2 * d
    c = np.zeros(n)  # linprog minimises: minus the bound (without the constants)
    wgt = weight[group]
    c[:n_pi] = -wgt * (const + np.sum(np.where(used, 2 * coef / safe_x, 0.0), axis=1))
    c[n_pi:n_pi + n_in] = b_in
    c[n_pi + n_in:n_pi + n_in + n_eq] = b_eq
    c[n_pi + n_in + n_eq:n_pi + n_in + n_eq + d] = -lo
    c[n_pi + n_in + n_eq + d:] = up
    # Stationarity: xi(pi) + a_in^T lam + a_eq^T nu - alpha + beta == 0  (D rows)
    a_stat = np.zeros((d, n))
    a_stat[:, :n_pi] = -(wgt[:, None] * np.where(used, coef / safe_x**2, 0.0)).T
    a_stat[:, n_pi:n_pi + n_in] = a_in.T
    a_stat[:, n_pi + n_in:n_pi + n_in + n_eq] = a_eq.T
    a_stat[:, n_pi + n_in + n_eq:n_pi + n_in + n_eq + d] = -np.eye(d)
    a_stat[:, n_pi + n_in + n_eq + d:] = np.eye(d)
    # Simplex: the row weights of each epigraph variable sum to 1 (groups with rows only).
    has_rows = np.bincount(group, minlength=n_grp) > 0
    a_simp = np.zeros((n_grp, n))
    a_simp[group, np.arange(n_pi)] = 1.0
    a_simp = a_simp[has_rows]
    bounds = ([(0, None)] * n_pi + [(0, None)] * n_in + [(None, None)] * n_eq
              + [(0, None)] * (2 * d))
    # Scale the stationarity rows so that HiGHS sees entries of order one.
    row_scale = np.maximum(np.max(np.abs(a_stat), axis=1), 1e-300)
    res = scipy.optimize.linprog(
        c, A_eq=np.vstack([a_stat / row_scale[:, None], a_simp]),
        b_eq=np.concatenate([np.zeros(d), np.ones(a_simp.shape[0])]), bounds=bounds,
        method="highs",
    )
    if res.status != 0:
        return -np.inf, 0.0
    z = res.x
    pi = z[:n_pi]
    lam = z[n_pi:n_pi + n_in]
    nu = z[n_pi + n_in:n_pi + n_in + n_eq]
    bound = bound_from_multipliers(p, x, pi, lam, nu, cap)
    lam_cap = 0.0
    if cap is not None:
        lam_cap = max(lam[-1], 0.0) / np.linalg.norm(np.asarray(p.cost_rate))
    return float(bound), float(lam_cap)
