"""Certified lower bounds for the `perf` problem from a tangent-plane LP (host side).

For any x > 0, every phase time h_kd(y) = T_kd / y_d is convex, so for y > 0

    T_kd / y_d >= 2 T_kd / x_d - (T_kd / x_d^2) y_d           (tangent at x)

and for any pi_k in the simplex over the dimensions phase k uses,
max_d h_kd(y) >= sum_d pi_kd h_kd(y). Hence, for every y in the feasible set P,

    step(y) >= compute + sum_kd w_k pi_kd (2 T_kd / x_d) + xi(pi) @ y,
    xi_d(pi) = -sum_k w_k pi_kd T_kd / x_d^2,

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


def bound_from_multipliers(p, x, pi, lam, nu, cap=None) -> float:
    """The tangent-plane lower bound (s) for given pi [K, D], lam [I(+1)] >= 0, nu [E]."""
    a_in, b_in, a_eq, b_eq = _arrays(p, cap)
    x = np.asarray(x, np.float64)
    t = np.asarray(p.traffic_gb, np.float64)
    w = np.asarray(p.weight, np.float64)
    used = t > 0
    pi = np.where(used, np.maximum(pi, 0.0), 0.0)
    tot = pi.sum(axis=1, keepdims=True)
    pi = np.where(tot > 0, pi / np.where(tot > 0, tot, 1.0), 0.0)
    safe_x = np.where(used, x[None, :], 1.0)
    const = float(np.asarray(p.compute_s)) + float(np.sum(w[:, None] * pi * 2 * t / safe_x))
    xi = -np.sum(w[:, None] * pi * t / safe_x**2, axis=0)
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
    t = np.asarray(p.traffic_gb, np.float64)
    w = np.asarray(p.weight, np.float64)
    k, d = t.shape
    if np.any((t > 0) & (x[None, :] <= 0)):
        return -np.inf, 0.0
    lo = np.asarray(p.lo, np.float64)
    up = np.asarray(p.upper, np.float64)
    pairs = [(i, j) for i in range(k) for j in range(d) if t[i, j] > 0]
    n_pi, n_in, n_eq = len(pairs), len(b_in), len(b_eq)
    # Variables: pi (pairs) >= 0, lam >= 0, nu free, alpha >= 0 (lo), beta >= 0 (upper).
    n = n_pi + n_in + n_eq + 2 * d
    c = np.zeros(n)  # linprog minimises: minus the bound (without the constant compute)
    for col, (i, j) in enumerate(pairs):
        c[col] = -(w[i] * 2 * t[i, j] / x[j])
    c[n_pi:n_pi + n_in] = b_in
    c[n_pi + n_in:n_pi + n_in + n_eq] = b_eq
    c[n_pi + n_in + n_eq:n_pi + n_in + n_eq + d] = -lo
    c[n_pi + n_in + n_eq + d:] = up
    # Stationarity: xi(pi) + a_in^T lam + a_eq^T nu - alpha + beta == 0  (D rows)
    a_stat = np.zeros((d, n))
    for col, (i, j) in enumerate(pairs):
        a_stat[j, col] = -w[i] * t[i, j] / x[j] ** 2
    a_stat[:, n_pi:n_pi + n_in] = a_in.T
    a_stat[:, n_pi + n_in:n_pi + n_in + n_eq] = a_eq.T
    a_stat[:, n_pi + n_in + n_eq:n_pi + n_in + n_eq + d] = -np.eye(d)
    a_stat[:, n_pi + n_in + n_eq + d:] = np.eye(d)
    # Simplex: sum_d pi_kd == 1 for each phase.
    a_simp = np.zeros((k, n))
    for col, (i, _) in enumerate(pairs):
        a_simp[i, col] = 1.0
    bounds = ([(0, None)] * n_pi + [(0, None)] * n_in + [(None, None)] * n_eq
              + [(0, None)] * (2 * d))
    # Scale the stationarity rows so that HiGHS sees entries of order one.
    row_scale = np.maximum(np.max(np.abs(a_stat), axis=1), 1e-300)
    res = scipy.optimize.linprog(
        c, A_eq=np.vstack([a_stat / row_scale[:, None], a_simp]),
        b_eq=np.concatenate([np.zeros(d), np.ones(k)]), bounds=bounds, method="highs",
    )
    if res.status != 0:
        return -np.inf, 0.0
    z = res.x
    pi = np.zeros((k, d))
    for col, (i, j) in enumerate(pairs):
        pi[i, j] = z[col]
    lam = z[n_pi:n_pi + n_in]
    nu = z[n_pi + n_in:n_pi + n_in + n_eq]
    bound = bound_from_multipliers(p, x, pi, lam, nu, cap)
    lam_cap = 0.0
    if cap is not None:
        lam_cap = max(lam[-1], 0.0) / np.linalg.norm(np.asarray(p.cost_rate))
    return float(bound), float(lam_cap)
