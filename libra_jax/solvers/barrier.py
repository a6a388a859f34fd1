"""Log-barrier interior-point method for small, dense problems over bandwidths, in pure JAX.

Two host-side solves use it (the `perf` optimum itself comes from the batch engine's
interior-point kernel, `ipm.py`): the projection of the equal split onto the feasible set
(`solve.equal_split`) and the worst-slowdown design of `multi.py`. The problem is written in
epigraph form over z = (bw [D], t [K]):

    minimise   obj(z)                      (e.g. a distance, or an epigraph variable)
    subject to t_k >= traffic_kd / bw_d    for every (k, d) with traffic_kd > 0
               G z <= h,  E z == f         (linear rows: box, user constraints, budget)

and solved by the barrier method (Boyd & Vandenberghe, Convex Optimization, Sec. 11.3): for an
increasing sequence of s, minimise s * obj(z) - sum(log(slacks)) subject to E z == f by
Newton's method with equality constraints (a dense null-space Newton step; D + K is small)
and a backtracking line search that never leaves the domain. The centred point for s gives the
dual point lambda_i = 1 / (s * slack_i) (nu from the KKT solve divided by s), from which
`multi.py` builds a certified lower bound on the worst slowdown.

All loops are `lax` loops with fixed bounds; nothing raises inside jit; the result carries
whether the last centring converged and whether everything stayed finite.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp


class BarrierData(NamedTuple):
    """Constraint data of one barrier problem. z = (bw [D], t [K])."""

    g: jax.Array  # [M, n] inequality rows on z (G z <= h)
    h: jax.Array  # [M]
    g_on: jax.Array  # [M] bool, rows that take part
    e: jax.Array  # [E, n] equality rows on z
    f: jax.Array  # [E]
    e_on: jax.Array  # [E] bool
    epi_traffic: jax.Array  # [K, D] traffic (GB) of the epigraph constraints
    epi_on: jax.Array  # [K, D] bool, pairs with traffic > 0


class BarrierConfig(NamedTuple):
    """Static loop lengths and tolerances (hashable: changes recompile)."""

    num_outer: int = 16  # most barrier parameter updates
    mu: float = 20.0  # factor by which s grows per update
    gap_tol: float = 1e-10  # stop when (barrier terms) / s <= gap_tol * |obj|
    max_newton: int = 50  # most Newton steps per centring
    newton_tol: float = 1e-12  # stop centring when the Newton decrement^2 / 2 is below
    max_backtrack: int = 40  # trial steps 2^0 .. 2^-39 of one line search (evaluated at once)


class BarrierResult(NamedTuple):
    z: jax.Array  # [n] final iterate
    s: jax.Array  # [] final barrier parameter
    nu: jax.Array  # [E] equality multipliers of the original problem (KKT nu / s)
    lam: jax.Array  # [M] inequality multipliers 1 / (s * slack), 0 on rows not taking part
    mu_epi: jax.Array  # [K, D] epigraph multipliers, 0 on unused pairs
    newton_steps: jax.Array  # [] total Newton steps
    centred: jax.Array  # [] bool: last centring met its tolerance
    finite: jax.Array  # [] bool: every quantity stayed finite
    started_inside: jax.Array  # [] bool: z0 was strictly feasible (else nothing was solved)


def _slacks(z: jax.Array, data: BarrierData):
    d, k = data.epi_traffic.shape[1], data.epi_traffic.shape[0]
    bw, t = z[:d], z[d:]
    lin = jnp.where(data.g_on, data.h - data.g @ z, 1.0)
    used = data.epi_on
    safe_bw = jnp.where(used, bw[None, :], 1.0)
    epi = jnp.where(used, t[:k, None] - data.epi_traffic / safe_bw, 1.0)
    inside = jnp.all(lin > 0) & jnp.all(epi > 0) & jnp.all(safe_bw > 0)
    return lin, epi, inside


def _t_free(data: BarrierData):
    """[T] bool: epigraph variables no constraint bounds below (padding); pinned at 0."""
    n_t = data.g.shape[1] - data.epi_traffic.shape[1]
    k = data.epi_traffic.shape[0]
    has = jnp.zeros((n_t,), bool).at[:k].set(jnp.any(data.epi_on, axis=1))
    return ~has


def barrier_value(z: jax.Array, data: BarrierData) -> jax.Array:
    """-sum(log(slacks)), +inf outside the domain.

    A padded phase (no constraint on its t) is left free with zero weight; the term t^2 / 2
    pins it at 0 so that the Newton system stays non-singular (padding must not change a
    result, and does not: that t appears nowhere else).
    """
    lin, epi, inside = _slacks(z, data)
    d = data.epi_traffic.shape[1]
    t_free = _t_free(data)
    val = (
        -jnp.sum(jnp.log(jnp.where(lin > 0, lin, 1.0)))
        - jnp.sum(jnp.log(jnp.where(epi > 0, epi, 1.0)))
        + 0.5 * jnp.sum(jnp.where(t_free, z[d:] ** 2, 0.0))
    )
    return jnp.where(inside, val, jnp.inf)


def barrier_derivatives(z: jax.Array, data: BarrierData):
    """Gradient [n] and Hessian [n, n] of `barrier_value` in closed form (inside the domain).

    Linear rows, slack l = h - g z:   grad += g / l,        hess += g g^T / l^2.
    Epigraph pairs, slack e = t_k - T/b_d, with v = T / b_d^2 (= de/db_d) and u = 1 / e:
      grad_t_k -= u,  grad_b_d -= u v,
      hess_tt += u^2, hess_bb += u^2 v^2 + 2 u T / b_d^3, hess_tb += u^2 v.
    Pinned (padded) variables add t to the gradient and 1 to the Hessian diagonal.
    About KD + M n + n^2 work instead of the n reverse passes of `jax.hessian`.
    """
    d, k = data.epi_traffic.shape[1], data.epi_traffic.shape[0]
    n_t = z.shape[0] - d
    bw, t = z[:d], z[d:]
    lin, epi, _ = _slacks(z, data)
    inv_l = jnp.where(data.g_on, 1.0 / lin, 0.0)
    grad = data.g.T @ inv_l
    hess = (data.g * (inv_l**2)[:, None]).T @ data.g
    used = data.epi_on
    safe_bw = jnp.where(used, bw[None, :], 1.0)
    u = jnp.where(used, 1.0 / epi, 0.0)  # [K, D]
    v = jnp.where(used, data.epi_traffic / safe_bw**2, 0.0)
    g_b = -jnp.sum(u * v, axis=0)
    t_free = _t_free(data)
    g_t = jnp.zeros((n_t,), z.dtype).at[:k].add(-jnp.sum(u, axis=1)) + jnp.where(t_free, t, 0.0)
    h_bb = jnp.sum(u**2 * v**2 + 2.0 * u * v / safe_bw, axis=0)
    h_tt = jnp.zeros((n_t,), z.dtype).at[:k].add(jnp.sum(u**2, axis=1))
    h_tt = h_tt + jnp.where(t_free, 1.0, 0.0)
    h_tb = jnp.zeros((n_t, d), z.dtype).at[:k].set(u**2 * v)  # [T, D]
    grad = grad + jnp.concatenate([g_b, g_t])
    epi_hess = jnp.block([[jnp.diag(h_bb), h_tb.T], [h_tb, jnp.diag(h_tt)]])
    return grad, hess + epi_hess


def _nullspace_basis(e_act: jax.Array, n: int):
    """Orthonormal basis of {dz : E dz = 0} as the masked columns of V (from E's SVD).

    Returns (basis [n, n] with the columns outside the null space zeroed, mask [n])."""
    _, sv, vt = jnp.linalg.svd(e_act, full_matrices=True)
    sv = jnp.concatenate([sv, jnp.zeros((max(n - sv.shape[0], 0),), sv.dtype)])[:n]
    tol = 1e-12 * jnp.maximum(jnp.max(sv, initial=0.0), 1.0)
    mask = sv <= tol
    return vt.T * mask[None, :], mask


def _nullspace_newton(hess, grad, basis, mask, pinv_e, resid):
    """Newton direction restricted to {dz : E dz = 0}, plus the correction of a residual.

    In the coordinates y of the null-space basis N (dz = N dy) the step solves
    (N^T H N) dy = -N^T g, with Jacobi scaling: near the end of the barrier path the diagonal
    spans many orders of magnitude (a tight constraint's 1/slack^2 next to a dimension that
    barely matters) and the unscaled solve loses the small directions. E dz == 0 holds to
    rounding. Also returns the equality multipliers nu of the KKT system H dz + E^T nu = -g.
    """
    hy = basis.T @ hess @ basis
    gy = basis.T @ grad
    scale = jnp.where(mask, 1.0 / jnp.sqrt(jnp.maximum(jnp.abs(jnp.diag(hy)), 1e-300)), 0.0)
    # Unit diagonal after scaling; the 1e-13 ridge only matters when two tight constraints are
    # (numerically) parallel near the end of the path, where it keeps the solve finite.
    mat = scale[:, None] * hy * scale[None, :] + jnp.diag(jnp.where(mask, 1e-13, 1.0))
    dy = scale * jnp.linalg.solve(mat, -(scale * gy))
    dz = basis @ dy
    nu = -pinv_e.T @ (grad + hess @ dz)
    return dz - pinv_e @ resid, nu


def barrier_minimize(
    obj: Callable[[jax.Array, object], jax.Array],
    obj_params,
    z0: jax.Array,
    data: BarrierData,
    config: BarrierConfig = BarrierConfig(),
) -> BarrierResult:
    """Minimises a smooth convex ``obj(z, obj_params)`` over the barrier domain of ``data``.

    Args:
      obj: convex objective; static (jit this function with ``obj`` closed over).
      obj_params: pytree of arrays passed to ``obj``.
      z0: [n] strictly feasible start (every slack > 0); equalities should hold (a residual is
        corrected by the first full Newton step).
      data: the constraints.
      config: loop lengths.

    Returns:
      `BarrierResult`; the duality gap of the final centred point is (number of barrier
      terms) / s.
    """
    num_terms = jnp.sum(data.g_on) + jnp.sum(data.epi_on)
    obj0 = obj(z0, obj_params)
    s0 = num_terms / jnp.maximum(jnp.abs(obj0), 1e-30)
    m_eq = data.e.shape[0]
    e_act = jnp.where(data.e_on[:, None], data.e, 0.0)
    pinv_e = jnp.linalg.pinv(e_act)  # [n, E]
    basis, mask = _nullspace_basis(e_act, z0.shape[0])

    def merit(z, s):
        return s * obj(z, obj_params) + barrier_value(z, data)

    # All trial steps of the backtracking line search are evaluated at once (one vmap over
    # alpha = 2^-j), so the whole method is ONE while loop: nested data-dependent loops under
    # vmap intermittently wedged XLA:CPU's runtime (seen with jax 0.10 on 2 cores).
    alphas = 0.5 ** jnp.arange(config.max_backtrack, dtype=z0.dtype)

    def step(carry):
        z, s, nu_prev, it, n_outer, n_centre, done, centred = carry
        val = merit(z, s)
        b_grad, b_hess = barrier_derivatives(z, data)
        grad = s * jax.grad(obj)(z, obj_params) + b_grad
        hess = s * jax.hessian(obj)(z, obj_params) + b_hess
        resid = jnp.where(data.e_on, data.e @ z - data.f, 0.0)
        dz, nu = _nullspace_newton(hess, grad, basis, mask, pinv_e, resid)
        nu = jnp.where(jnp.all(jnp.isfinite(nu)), nu, nu_prev)
        slope = grad @ dz
        dec = -slope
        # Near the centre (Newton decrement^2 < 0.1) the full step is taken as long as it
        # stays in the domain: there s * obj dwarfs the decrease of the merit, which rounding
        # would hide from an Armijo test (B&V 9.6.4, quadratic phase).
        quadratic = dec < 0.1
        trial = jax.vmap(lambda a: merit(z + a * dz, s))(alphas)
        ok = (trial <= val + 0.01 * alphas * slope) | (quadratic & jnp.isfinite(trial))
        ok = ok & jnp.isfinite(trial)
        first = jnp.argmax(ok)
        stalled = ~jnp.any(ok) | ~jnp.isfinite(dec)
        z_new = jnp.where(stalled, z, z + alphas[first] * dz)
        # Centred (or unable to improve in this precision): raise s, or stop.
        is_centred = (dec / 2 <= config.newton_tol) | stalled | (n_centre + 1 >= config.max_newton)
        gap_ok = num_terms / s <= config.gap_tol * jnp.abs(obj(z_new, obj_params))
        last = n_outer + 1 >= config.num_outer
        finish = is_centred & (gap_ok | last)
        advance = is_centred & ~finish
        return (
            z_new,
            jnp.where(advance, s * config.mu, s),
            nu,
            it + 1,
            n_outer + advance.astype(n_outer.dtype),
            jnp.where(is_centred, 0, n_centre + 1),
            finish,
            (dec / 2 <= config.newton_tol) | stalled,
        )

    def cond(carry):
        *_, it, _, _, done, _ = carry
        return (it < config.num_outer * config.max_newton) & ~done

    zero = jnp.asarray(0, jnp.int32)
    init = (z0, s0, jnp.zeros((m_eq,), z0.dtype), zero, zero, zero, jnp.asarray(False),
            jnp.asarray(False))
    z, s, nu, total, _, _, _, centred = jax.lax.while_loop(cond, step, init)
    lin, epi, inside = _slacks(z, data)
    lam = jnp.where(data.g_on, 1.0 / (s * lin), 0.0)
    mu_epi = jnp.where(data.epi_on, 1.0 / (s * epi), 0.0)
    finite = jnp.all(jnp.isfinite(z)) & jnp.all(jnp.isfinite(nu)) & inside
    return BarrierResult(
        z=z, s=s, nu=nu / s, lam=lam, mu_epi=mu_epi, newton_steps=total,
        centred=centred, finite=finite, started_inside=_slacks(z0, data)[2],
    )
