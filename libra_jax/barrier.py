"""Log-barrier interior-point method for the (small, dense) LIBRA problems, in pure JAX.

The `perf` problem is written in epigraph form over z = (bw [D], t [K]):

    minimise   obj(z)                      (for perf: weight @ t)
    subject to t_k >= traffic_kd / bw_d    for every (k, d) with traffic_kd > 0
               G z <= h,  E z == f         (linear rows: box, user constraints, budget)

and solved by the barrier method (Boyd & Vandenberghe, Convex Optimization, Sec. 11.3): for an
increasing sequence of s, minimise s * obj(z) - sum(log(slacks)) subject to E z == f by
Newton's method with equality constraints (a dense null-space Newton step; D + K is small)
and a backtracking line search that never leaves the domain. The centred point for s gives the
dual point lambda_i = 1 / (s * slack_i) (nu from the KKT solve divided by s), from which
`solve.py` computes a certified lower bound on the optimum.

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

    num_outer: int = 14  # barrier parameter updates
    mu: float = 10.0  # factor by which s grows per update
    max_newton: int = 60  # Newton steps per centring
    newton_tol: float = 1e-12  # stop centring when the Newton decrement^2 / 2 is below
    max_backtrack: int = 60  # halvings in one line search


class BarrierResult(NamedTuple):
    z: jax.Array  # [n] final iterate
    s: jax.Array  # [] final barrier parameter
    nu: jax.Array  # [E] equality multipliers of the original problem (KKT nu / s)
    lam: jax.Array  # [M] inequality multipliers 1 / (s * slack), 0 on rows not taking part
    mu_epi: jax.Array  # [K, D] epigraph multipliers, 0 on unused pairs
    newton_steps: jax.Array  # [] total Newton steps
    centred: jax.Array  # [] bool: last centring met its tolerance
    finite: jax.Array  # [] bool: every quantity stayed finite


def _slacks(z: jax.Array, data: BarrierData):
    d = data.epi_traffic.shape[1]
    bw, t = z[:d], z[d:]
    lin = jnp.where(data.g_on, data.h - data.g @ z, 1.0)
    used = data.epi_on
    safe_bw = jnp.where(used, bw[None, :], 1.0)
    epi = jnp.where(used, t[:, None] - data.epi_traffic / safe_bw, 1.0)
    pos = jnp.where(used, bw[None, :], 1.0)
    inside = jnp.all(lin > 0) & jnp.all(epi > 0) & jnp.all(pos > 0)
    return lin, epi, inside


def barrier_value(z: jax.Array, data: BarrierData) -> jax.Array:
    """-sum(log(slacks)), +inf outside the domain."""
    lin, epi, inside = _slacks(z, data)
    val = -jnp.sum(jnp.log(jnp.where(lin > 0, lin, 1.0))) - jnp.sum(
        jnp.log(jnp.where(epi > 0, epi, 1.0))
    )
    return jnp.where(inside, val, jnp.inf)


def _nullspace_newton(hess, grad, proj, pinv_e, resid):
    """Newton direction restricted to {dz : E dz = 0}, plus the correction of a residual.

    With the orthogonal projector P onto the null space of E, the direction solves
    (P H P + c (I - P)) dz = -P g; the (I - P) block only makes the matrix invertible, and
    c = mean(diag H) keeps both blocks on one scale. Unlike the full KKT system this keeps
    E dz == 0 to rounding even when H has entries of 1e12 near the end of the barrier path.
    Returns the direction and the equality multipliers nu of the KKT system (H dz + E^T nu =
    -g) that the direction solves.
    """
    n = hess.shape[0]
    eye = jnp.eye(n, dtype=hess.dtype)
    c = jnp.maximum(jnp.mean(jnp.abs(jnp.diag(hess))), 1e-300)
    mat = proj @ hess @ proj + c * (eye - proj)
    dz = proj @ jnp.linalg.solve(mat, -(proj @ grad))
    # nu from H dz + E^T nu = -g  ->  nu = -(E^T)^+ (g + H dz)
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
    proj = jnp.eye(z0.shape[0], dtype=z0.dtype) - pinv_e @ e_act

    def centre(z, s):
        def merit(z):
            return s * obj(z, obj_params) + barrier_value(z, data)

        def step(carry):
            z, it, dec, _, nsteps = carry
            val, grad = jax.value_and_grad(merit)(z)
            hess = jax.hessian(merit)(z)
            resid = jnp.where(data.e_on, data.e @ z - data.f, 0.0)
            dz, nu = _nullspace_newton(hess, grad, proj, pinv_e, resid)
            slope = grad @ dz
            dec = -slope

            def ls_cond(c):
                alpha, k = c
                new = merit(z + alpha * dz)
                ok = new <= val + 0.01 * alpha * slope
                return (~ok) & (k < config.max_backtrack)

            alpha, _ = jax.lax.while_loop(
                ls_cond, lambda c: (0.5 * c[0], c[1] + 1), (jnp.asarray(1.0, z.dtype), 0)
            )
            z_new = z + alpha * dz
            accepted = jnp.isfinite(merit(z_new))
            z = jnp.where(accepted, z_new, z)
            return z, it + 1, jnp.where(accepted, dec, 0.0), nu, nsteps + 1

        def cond(carry):
            _, it, dec, _, _ = carry
            return (it < config.max_newton) & (dec / 2 > config.newton_tol) & jnp.isfinite(dec)

        init = (z, 0, jnp.asarray(1e300, z.dtype), jnp.zeros((m_eq,), z.dtype), 0)
        z, it, dec, nu, nsteps = jax.lax.while_loop(cond, step, init)
        return z, nu, dec / 2 <= config.newton_tol, nsteps

    def outer(i, carry):
        z, s, _, _, total = carry
        z, nu, ok, n = centre(z, s)
        return z, s * config.mu, nu, ok, total + n

    init = (z0, s0, jnp.zeros((m_eq,), z0.dtype), jnp.asarray(False), 0)
    z, s_next, nu, centred, total = jax.lax.fori_loop(0, config.num_outer, outer, init)
    s = s_next / config.mu
    lin, epi, inside = _slacks(z, data)
    lam = jnp.where(data.g_on, 1.0 / (s * lin), 0.0)
    mu_epi = jnp.where(data.epi_on, 1.0 / (s * epi), 0.0)
    finite = jnp.all(jnp.isfinite(z)) & jnp.all(jnp.isfinite(nu)) & inside
    return BarrierResult(
        z=z, s=s, nu=nu / s, lam=lam, mu_epi=mu_epi, newton_steps=total,
        centred=centred, finite=finite,
    )
