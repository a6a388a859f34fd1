"""The constraints of a problem as the interior-point kernel (`ipm.py`) sees them: the
linear inequality rows (`linear_rows`), the equality rows (`equality_rows`), the fixed dims
(`fixed_dims`), the slacks of an iterate (`slacks`), the strictly feasible start (`start`),
the largest violation (`violation`), and the certified closed-form Lagrangian lower bound
(`lagrangian_bound`) with the multipliers made stationary (`normalised_rows`). Pure and
traceable."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from libra_jax.model import objective as model
from libra_jax.model.problem import Problem


def linear_rows(p: Problem, cap, cap_on):
    """Linear inequality rows on bw, G bw <= h: [a_in | cost cap | -bw <= -lo | bw <= hi],
    with ``on`` [M] marking rows that take part (tight rows are equalities or fixed dims,
    all-zero rows are batch padding). Returns (g [M, D], h [M], on [M], n_gen): the first
    n_gen rows are the user rows and the cap (the others are the box)."""
    d = p.lo.shape[-1]
    eye = jnp.eye(d, dtype=p.lo.dtype)
    rate_norm = jnp.sqrt(jnp.sum(p.cost_rate**2))
    safe_norm = jnp.where(rate_norm > 0, rate_norm, 1.0)
    fixed, _ = fixed_dims(p)
    hi_fin = jnp.isfinite(p.hi)
    g = jnp.concatenate([p.a_in, (p.cost_rate / safe_norm)[None, :], -eye, eye])
    h = jnp.concatenate([p.b_in, jnp.reshape(cap / safe_norm, (1,)), -p.lo,
                         jnp.where(hi_fin, p.hi, 0.0)])
    on = jnp.concatenate([~p.in_tight & jnp.any(p.a_in != 0, axis=1),
                          jnp.reshape(cap_on & (rate_norm > 0), (1,)), ~fixed,
                          hi_fin & ~fixed])
    return g, h, on, p.a_in.shape[0] + 1


def equality_rows(p: Problem):
    """Equality rows on bw, E bw = f: [a_eq | tight a_in]; ``on`` [E] marks the rows that
    take part (batch padding rows are all zero)."""
    e = jnp.concatenate([p.a_eq, p.a_in])
    f = jnp.concatenate([p.b_eq, p.b_in])
    on = jnp.concatenate([jnp.any(p.a_eq != 0, axis=1), p.in_tight])
    return e, f, on


def fixed_dims(p: Problem):
    """Dims the constraints fix (lower or upper bound tight on the whole set; batch padding
    fixes its dims at 1): (mask [D], value [D])."""
    fixed = p.lo_tight | p.hi_tight
    value = jnp.where(p.lo_tight, p.lo, jnp.where(p.hi_tight, p.hi, 0.0))
    return fixed, value


def pieces_free(p: Problem):
    """[J] bool: pieces with no row taking part (batch padding); pinned at 0."""
    j = p.piece_weight.shape[0]
    count = jax.ops.segment_sum(p.row_on.astype(jnp.int32), p.row_piece, num_segments=j)
    return count == 0


class _Slacks(NamedTuple):
    pair: jax.Array  # [K, D] (1 where unused)
    row: jax.Array  # [R] (1 where off)
    lin: jax.Array  # [M] (1 where off)
    inside: jax.Array  # [] bool


def slacks(bw, tk, tj, p: Problem, g, h, g_on) -> _Slacks:
    used = p.traffic_gb > 0
    pos = jnp.where(used, bw[None, :], 1.0)
    pair = jnp.where(used, tk[:, None] - p.traffic_gb / pos, 1.0)
    r_used = p.row_on[:, None] & (p.row_gb > 0)
    r_bw = jnp.where(r_used, bw[None, :], 1.0)
    val = p.row_const_s + jnp.sum(jnp.where(r_used, p.row_gb / r_bw, 0.0), axis=1)
    val = val + p.row_nest @ tj
    row = jnp.where(p.row_on, tj[p.row_piece] - val, 1.0)
    lin = jnp.where(g_on, h - g @ bw, 1.0)
    inside = (jnp.all(pair > 0) & jnp.all(row > 0) & jnp.all(lin > 0) & jnp.all(pos > 0)
              & jnp.all(r_bw > 0))
    return _Slacks(pair, row, lin, inside)


def _normalised_pairs(p: Problem, lam_pair):
    """Pair multipliers rescaled so that each phase's sum is its weight (stationarity in
    t_k)."""
    tot = jnp.sum(lam_pair, axis=1, keepdims=True)
    return jnp.where(tot > 0, lam_pair * (p.weight[:, None] / jnp.where(tot > 0, tot, 1.0)),
                     0.0)


def normalised_rows(p: Problem, lam_row):
    """General-row multipliers rescaled so that the Lagrangian is stationary in every piece
    variable: sum_{r in j} mu_r = w_j + sum_r mu_r nest_rj. Without nesting that is one
    rescaling per piece; with nesting the pieces are rescaled from the last down (a piece's
    rows nest only earlier pieces, so its requirement is final when its turn comes).
    Returns (mu [R], ok): ok is False when a piece that needs weight has no multiplier.

    (`certificate._stationary` is the host twin: numpy over every epigraph group, pairs
    included; this one runs traced in the vmapped kernel's dtype, where a host call would
    compile once per problem shape.)"""
    mu = jnp.where(p.row_on, lam_row, 0.0)
    num = p.piece_weight.shape[0]
    if num == 0:
        return mu, jnp.asarray(True)

    def body(i, mu):
        j = num - 1 - i
        need = p.piece_weight[j] + mu @ p.row_nest[:, j]
        mine = p.row_piece == j
        tot = jnp.sum(jnp.where(mine, mu, 0.0))
        return jnp.where(mine, mu * jnp.where(tot > 0, need / jnp.where(tot > 0, tot, 1.0),
                                              0.0), mu)

    mu = jax.lax.fori_loop(0, num, body, mu)
    need = p.piece_weight + mu @ p.row_nest
    tot = jax.ops.segment_sum(mu, p.row_piece, num_segments=num)
    ok = jnp.all(jnp.abs(tot - need) <= 1e-6 * jnp.maximum(need, 1e-30) + 1e-300)
    return mu, ok


def lagrangian_bound(p: Problem, lam_pair, lam_row, lam_gen, nu, cap):
    """Certified lower bound (s) on the optimal step time, for any multipliers.

    With pair / row multipliers mu >= 0 made stationary in every epigraph variable, inequality
    multipliers lam >= 0 of the user rows and the cap (g_gen bw <= h_gen), and any nu of the
    equality rows, weak duality gives, for every feasible bw (which lies in the box
    B = [lo, upper], collapsed to the value on fixed dims):

        step(bw) >= compute + c0 + mu_r @ c_r + sum_d min_{x in B_d} (a_d / x + c_d x)
                    - lam @ h_gen - nu @ f,
        a = sum_k mu_kd T_kd + mu_r @ A_rows,   c = g_gen^T lam + E^T nu,

    each one-dimensional minimum in closed form (sqrt(a / c) clipped to the box, or an end).
    """
    g, h, _, n_gen = linear_rows(p, cap, jnp.asarray(True))
    e, f, e_on = equality_rows(p)
    fixed, value = fixed_dims(p)
    mu = _normalised_pairs(p, lam_pair)
    mu_r, rows_ok = normalised_rows(p, lam_row)
    lam = jnp.maximum(lam_gen, 0.0)
    nu = jnp.where(e_on, nu, 0.0)
    a = jnp.sum(mu * p.traffic_gb, axis=0) + mu_r @ p.row_gb
    const = p.compute_s + p.comm_const_s + mu_r @ p.row_const_s
    c = g[:n_gen].T @ lam + e.T @ nu
    lo = jnp.where(fixed, value, p.lo)
    up = jnp.where(fixed, value, p.upper)
    x_int = jnp.sqrt(jnp.where((a > 0) & (c > 0), a / jnp.where(c > 0, c, 1.0), 1.0))
    x = jnp.where(c > 0, jnp.where(a > 0, jnp.clip(x_int, lo, up), lo), up)
    term = jnp.where(a > 0, a / jnp.where(x > 0, x, 1.0), 0.0) + c * x
    term = jnp.where((a > 0) & (x <= 0), jnp.inf, term)
    return jnp.where(rows_ok, const + jnp.sum(term) - lam @ h[:n_gen] - nu @ f, -jnp.inf)


def inputs_finite(p: Problem):
    """Whether the model's data of ``p`` (traffic, weights, times, rows, prices) is finite."""
    fields = (p.traffic_gb, p.weight, p.compute_s, p.comm_const_s, p.row_gb, p.row_const_s,
              p.piece_weight, p.cost_rate)
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in fields]))


def violation(bw, p: Problem, cap, cap_on):
    """Largest violation (GB/s) of the problem's rows and of the cost cap (when ``cap_on``),
    every row unit-norm."""
    rate_norm = jnp.sqrt(jnp.sum(p.cost_rate**2))
    cap_viol = jnp.where(cap_on & (rate_norm > 0), (model.network_cost_usd(bw, p) - cap)
                         / jnp.where(rate_norm > 0, rate_norm, 1.0), 0.0)
    return jnp.maximum(model.max_violation(bw, p), cap_viol)


def start(p: Problem, cap, cap_on):
    """Strictly feasible start: the interior point (moved towards the least-cost point when
    the cost cap cuts it off, to halfway between the least cost and the cap), phases and
    pieces 50% above their rows."""
    bw0 = p.interior
    c_int = model.network_cost_usd(bw0, p)
    c_min = model.network_cost_usd(p.min_cost_bw, p)
    target = 0.5 * (cap + c_min)
    theta = jnp.clip((c_int - target) / jnp.where(c_int > c_min, c_int - c_min, 1.0), 0.0, 1.0)
    bw0 = jnp.where(cap_on & (c_int >= cap), bw0 + theta * (p.min_cost_bw - bw0), bw0)
    fixed, value = fixed_dims(p)
    bw0 = jnp.where(fixed, value, bw0)
    phase = jnp.max(model.dim_times_s(bw0, p), axis=1, initial=0.0)
    tk = jnp.where(phase > 0, 1.5 * phase + 1e-12, 0.0)

    def above(vals, _):
        top = model.piece_max(vals, p)
        return top + 0.5 * jnp.abs(top) + 1e-12

    tj = jnp.where(pieces_free(p), 0.0, model.piece_times_s(bw0, p, above))
    return bw0, tk, tj
