"""Certified lower bounds for the `perf` problem from a tangent-plane LP (host side).

Every epigraph row is r(y) = c_r + sum_d a_rd / y_d with a >= 0 (LIBRA's phase times
T_kd / y_d are the rows with one coefficient), convex for y > 0, so

    a / y_d >= 2 a / x_d - (a / x_d^2) y_d                     (tangent at x)

and for any multipliers mu >= 0 of the rows that are stationary in every epigraph variable
(sum of mu over a variable's rows = its weight + what rows nesting it pass on: see
`_stationary`), the weighted sum of the epigraph variables is at least sum_r mu_r r(y).
Hence, for every y in the feasible set P,

    step(y) >= compute + c0 + sum_r mu_r (c_r + sum_d 2 a_rd / x_d) + xi(mu) @ y,
    xi_d(mu) = -sum_r mu_r a_rd / x_d^2,

and min over P of the right-hand side is a lower bound on the optimum. Maximising that bound
over mu (and the LP dual multipliers of P) is a linear program; its value equals the optimum
when x is optimal (the tangent planes touch there). We solve it with HiGHS (`lp.linprog`), then
re-evaluate the bound from its multipliers in closed form (`bound_from_multipliers`), with the
box [lo, upper] as the domain, so that a slightly inexact LP solution still yields a valid
bound. Both steps use float64 numpy on the host.

The status rule (`status_codes`) lives here too: a result is ``ok`` when its certified gap and
its violation are within tolerance; single solves, batches, the first-order kernel and the
multi-workload driver all take their status from it.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.model import lp
from libra_jax.types import Status

GAP_TOL = 1e-6  # relative optimality gap required for status ok (float64)
VIOLATION_TOL = 1e-9  # relative constraint violation required for status ok (float64)
#: (gap, violation) tolerances of status ok by kernel dtype (float32: its rounding).
TOLERANCES = {np.dtype(np.float64): (GAP_TOL, VIOLATION_TOL),
              np.dtype(np.float32): (1e-4, 1e-6)}


def status_codes(started_inside, finite, gap, rel_viol, gap_tol: float = GAP_TOL,
                 viol_tol: float = VIOLATION_TOL):
    """The status rule (`types.Status` codes), elementwise: numpy on the host, jnp for jax
    arrays (inside jit too; a host call in jnp would compile six small programs):
    INFEASIBLE where the start was not strictly inside, else NONFINITE where a quantity is
    not finite, else OK where the certified relative gap <= ``gap_tol`` and the relative
    violation <= ``viol_tol``, else NOT_CONVERGED (a method that certifies nothing passes
    gap = +inf)."""
    args = (started_inside, finite, gap, rel_viol)
    xp = jnp if any(isinstance(a, jax.Array) for a in args) else np
    inside = xp.asarray(started_inside, bool)
    finite = xp.asarray(finite, bool)
    ok = (xp.asarray(gap) <= gap_tol) & (xp.asarray(rel_viol) <= viol_tol)
    return xp.where(~inside, int(Status.INFEASIBLE),
                    xp.where(~finite, int(Status.NONFINITE),
                             xp.where(ok, int(Status.OK), int(Status.NOT_CONVERGED))))


def relative_gap(value, lb):
    """(value - lb) / lb clipped at 0, +inf where the bound is not positive, elementwise:
    numpy on the host, jnp for jax arrays (inside jit too)."""
    xp = jnp if isinstance(value, jax.Array) or isinstance(lb, jax.Array) else np
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.where(lb > 0, xp.maximum(value - lb, 0.0) / xp.where(lb > 0, lb, 1.0),
                        xp.inf)


class EpigraphRows(NamedTuple):
    """Every epigraph row of a problem (`epigraph_rows`)."""

    group: np.ndarray  # [R] int, the epigraph variable the row bounds
    weight: np.ndarray  # [G] weight of each epigraph variable
    const: np.ndarray  # [R] constant (s)
    coef: np.ndarray  # [R, D] coefficient of 1 / bw_d (GB)
    nest: np.ndarray  # [R, G] coefficient of other groups' variables in the row


class TangentLp(NamedTuple):
    """The tangent-plane LP's bound and multipliers (`tangent_lp_multipliers`)."""

    bound_s: float  # certified lower bound of the optimal step time (s)
    mu: np.ndarray  # [R] >= 0, stationary epigraph multipliers (rows of `epigraph_rows`)
    lam: np.ndarray  # [I(+1)] >= 0, unit-norm inequality rows a_in, then the cap
    nu: np.ndarray  # [E] unit-norm equality rows a_eq


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


def epigraph_rows(p) -> EpigraphRows:
    """Every epigraph row as `EpigraphRows` (group [R], group weight [G], constant [R] s,
    coef [R, D] GB, nest [R, G]): LIBRA's (phase, dimension) pairs (constant 0, one
    coefficient) first, then the general rows of `problem.ModelRows`; group = the epigraph variable the row bounds,
    nest = the coefficients of other groups' variables in the row."""
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
    nest = np.zeros((group.size, weight.size))
    row_nest = np.asarray(p.row_nest, np.float64).reshape(on.size, weight.size - k)[on]
    nest[kk.size:, k:] = row_nest
    return EpigraphRows(group, weight, const, coef, nest)


def _stationary(mu, group, weight, nest):
    """Rescales row multipliers mu [R] >= 0 so that every epigraph variable's stationarity
    holds exactly: sum_{r in g} mu_r = w_g + sum_r mu_r nest_rg. Groups are rescaled from the
    last down (a row nests only lower groups). Returns None when a group that needs weight
    has no multiplier. (Host numpy twin of the kernel's `ipm.normalised_rows`: see there.)"""
    mu = np.maximum(np.asarray(mu, np.float64), 0.0)
    for g in range(weight.size - 1, -1, -1):
        mine = group == g
        need = weight[g] + mu @ nest[:, g]
        tot = mu[mine].sum()
        if tot > 0:
            mu[mine] *= need / tot
        elif need > 0:
            return None
    return mu


def _tangent_terms(p, x, mu):
    """(constant, xi [D]) of the tangent-plane minorant for stationary row multipliers mu [R]:
    step(y) >= constant + xi @ y."""
    _, _, const, coef, _ = epigraph_rows(p)
    used = coef > 0
    safe_x = np.where(used, x[None, :], 1.0)
    value = const + np.sum(np.where(used, 2 * coef / safe_x, 0.0), axis=1)
    total = (float(np.asarray(p.compute_s)) + float(np.asarray(p.comm_const_s))
             + float(mu @ value))
    xi = -np.sum(mu[:, None] * np.where(used, coef / safe_x**2, 0.0), axis=0)
    return total, xi


def bound_from_multipliers(p, x, mu, lam, nu, cap=None) -> float:
    """The tangent-plane lower bound (s) for row multipliers mu [R] (rows of
    `epigraph_rows`, made exactly stationary first), lam [I(+1)] >= 0 and nu [E]."""
    a_in, b_in, a_eq, b_eq = _arrays(p, cap)
    x = np.asarray(x, np.float64)
    group, weight, _, _, nest = epigraph_rows(p)
    mu = _stationary(mu, group, weight, nest)
    if mu is None:
        return -np.inf
    const, xi = _tangent_terms(p, x, mu)
    lam = np.maximum(np.asarray(lam, np.float64), 0.0)
    nu = np.asarray(nu, np.float64)
    r = xi + a_in.T @ lam + a_eq.T @ nu
    lo = np.asarray(p.lo, np.float64)
    up = np.asarray(p.upper, np.float64)
    box = np.sum(np.minimum(r * lo, r * up))
    return const - lam @ b_in - nu @ b_eq + box


def tangent_lp_multipliers(p, x, cap=None) -> TangentLp | None:
    """The tangent-plane LP at x: the best bound and its multipliers.

    Args:
      p: the `Problem`.
      x: [D] bandwidths (GB/s) where the tangents are taken, > 0 on used dims.
      cap: optional network cost cap ($), an extra inequality row (the last of ``lam``).

    Returns:
      None when the LP fails, else `TangentLp`. At an optimal x its multipliers are
      optimal dual multipliers of the problem.
    """
    a_in, b_in, a_eq, b_eq = _arrays(p, cap)
    x = np.asarray(x, np.float64)
    group, weight, const, coef, nest = epigraph_rows(p)
    d = x.shape[0]
    used = coef > 0
    if np.any(used & (x[None, :] <= 0)):
        return None
    lo = np.asarray(p.lo, np.float64)
    up = np.asarray(p.upper, np.float64)
    safe_x = np.where(used, x[None, :], 1.0)
    n_mu, n_in, n_eq = group.size, len(b_in), len(b_eq)
    # Variables: mu (rows) >= 0, lam >= 0, nu free, alpha >= 0 (lo), beta >= 0 (upper).
    n = n_mu + n_in + n_eq + 2 * d
    c = np.zeros(n)  # linprog minimises: minus the bound (without the constants)
    c[:n_mu] = -(const + np.sum(np.where(used, 2 * coef / safe_x, 0.0), axis=1))
    c[n_mu:n_mu + n_in] = b_in
    c[n_mu + n_in:n_mu + n_in + n_eq] = b_eq
    c[n_mu + n_in + n_eq:n_mu + n_in + n_eq + d] = -lo
    c[n_mu + n_in + n_eq + d:] = up
    # Stationarity in bw: xi(mu) + a_in^T lam + a_eq^T nu - alpha + beta == 0  (D rows)
    a_stat = np.zeros((d, n))
    a_stat[:, :n_mu] = -np.where(used, coef / safe_x**2, 0.0).T
    a_stat[:, n_mu:n_mu + n_in] = a_in.T
    a_stat[:, n_mu + n_in:n_mu + n_in + n_eq] = a_eq.T
    a_stat[:, n_mu + n_in + n_eq:n_mu + n_in + n_eq + d] = -np.eye(d)
    a_stat[:, n_mu + n_in + n_eq + d:] = np.eye(d)
    # Stationarity in each epigraph variable: sum_{r in g} mu_r - sum_r mu_r nest_rg == w_g.
    n_grp = weight.size
    a_grp = np.zeros((n_grp, n))
    a_grp[group, np.arange(n_mu)] = 1.0
    a_grp[:, :n_mu] -= nest.T
    keep = np.any(a_grp != 0, axis=1) | (weight != 0)
    bounds = ([(0, None)] * n_mu + [(0, None)] * n_in + [(None, None)] * n_eq
              + [(0, None)] * (2 * d))
    # Scale the stationarity rows so that HiGHS sees entries of order one.
    row_scale = np.maximum(np.max(np.abs(a_stat), axis=1), 1e-300)
    res = lp.linprog(
        c, a_eq=np.vstack([a_stat / row_scale[:, None], a_grp[keep]]),
        b_eq=np.concatenate([np.zeros(d), weight[keep]]), bounds=bounds, method="highs",
    )
    if res.status != 0:
        return None
    z = res.x
    mu = _stationary(z[:n_mu], group, weight, nest)
    if mu is None:
        return None
    lam = np.maximum(z[n_mu:n_mu + n_in], 0.0)
    nu = z[n_mu + n_in:n_mu + n_in + n_eq]
    bound = bound_from_multipliers(p, x, mu, lam, nu, cap)
    return TangentLp(bound_s=float(bound), mu=mu, lam=lam, nu=nu)


def tangent_lp_bound(p, x, cap=None):
    """Best tangent-plane lower bound (s) at x (see `tangent_lp_multipliers`).

    Returns:
      (bound_s, lam_cap): the certified lower bound on the optimal step time of the problem
      (with the cap), and the multiplier of the cap row in s per $ (0 without a cap), i.e.
      bound(c) >= bound_s - lam_cap * (c - cap) for every other cap c.
      Returns (-inf, 0) when the LP fails.
    """
    out = tangent_lp_multipliers(p, x, cap)
    if out is None:
        return -np.inf, 0.0
    lam_cap = 0.0
    if cap is not None:
        lam_cap = max(out.lam[-1], 0.0) / np.linalg.norm(np.asarray(p.cost_rate))
    return out.bound_s, float(lam_cap)
