"""Primal-dual interior-point kernel for one `perf` problem: vmappable, no LAPACK.

The problem (see `problem.Problem`) in epigraph form over z = (bw [D], t [T]), T = K phases
followed by J pieces of a general model (`problem.ModelRows`):

    minimise   w @ t
    subject to s_kd = t_k - T_kd / bw_d >= 0                      pairs with T_kd > 0
               s_r  = t_j(r) - c_r - sum_d a_rd / bw_d - m_r @ t >= 0   general rows
               s_i  = h_i - g_i @ bw >= 0                          linear rows (box, user
                                                                   rows, cost cap)
               E bw = f                                            equality rows
               bw_d = fixed_d                                      dims fixed by the set

Every slack is concave in z, so the problem is convex. The method is Mehrotra's
predictor-corrector on the perturbed KKT conditions (Nocedal & Wright, Numerical
Optimization, Sec. 14.2 and 19.3). The curved rows (pairs, general rows) get slack variables
s with residual r_g = g(z) + s driven to 0 by the Newton steps; the linear slacks are computed
from bw and stay exact, so every iterate satisfies the linear constraints and bw stays above
its lower bounds (hence > 0):

    grad f + sum_i lam_i grad g_i + E^T nu = 0,   lam_i s_i = sigma mu,   g_i(z) + s_i = 0,
    E bw = f.

Eliminating ds_i = -r_g,i - grad g_i . dz and d lam_i leaves

    M dz + E^T nu = -grad f - sum_i grad g_i rho_i,    E dz = f - E bw,
    M = sum_i lam_i hess g_i + sum_i (lam_i / s_i) grad g_i grad g_i^T,
    rho_i = (sigma mu - corr_i + lam_i r_g,i) / s_i,

solved for nu itself (it enters nowhere else). The structure makes this cheap without any
LAPACK call, so the kernel vmaps over problems as pure elementwise work:

  * each phase variable t_k appears only in its own pairs, so its block of M is the scalar
    h_k = sum_d lam_kd / s_kd and it is eliminated exactly (Schur complement), leaving a
    (D + J) x (D + J) symmetric positive definite system S in (bw, pieces);
  * dims and pieces fixed by the constraints (or by batch padding) are eliminated too;
  * S is Jacobi-scaled first (S~ = D S D, unit diagonal); the equality rows, kept as a fixed
    orthonormal basis of their row space (`row_basis`, Gram-Schmidt once per problem;
    dependent rows dropped), get an orthonormal basis q in the scaled coordinates (one more
    Gram-Schmidt over E rows per iteration): y~ = q^T a + z with R a = r_p and z from the
    positive definite (P S~ P + q^T q) z = P (...), P = I - q^T q. Every entry is O(1), so
    nothing mixes S's scales (projecting the unscaled S adds the rounding of its largest
    entries to every entry and lost the curvature of flat directions in float32);
  * that matrix is factored by a Cholesky written in jnp operations (`cholesky`: n rank-one
    updates, unrolled over the static n up to 16), with one step of iterative refinement. A
    step that breaks down numerically (rounding wiped out a pivot near the end of the path)
    is rejected and retried with a small ridge (from 1e-14, or eps in float32).

The step length is the largest alpha <= 1 keeping slacks and multipliers positive with a 0.99
fraction to the boundary, and no used bandwidth below half its value (the linearisation of
a / bw holds in a relative neighbourhood). A linear slack h - g bw is floored at its rounding
(eps (|h| + |g bw|)), and the complementarity target sigma mu at 10 eps of the step time per
row: below that the Newton steps are noise (in float32 they were, at mu ~ eps, before the
primal point had converged). The kernel keeps the iterate of least step time (every iterate
satisfies the linear rows to rounding; the equality residual is checked) and the multipliers
of the best bound, and stops when the Lagrangian lower bound of `lagrangian_bound` certifies
the gap between them (``gap_tol``), when the complementarity reaches the precision's floor or
stays near it for three iterations without progress, or after ``max_iter`` iterations.

The module is split by job (this one re-exports every name): `linalg.py` the dense linear
algebra in jnp operations (Cholesky, triangular solves, row basis), `ipm_rows.py` the
constraints of a problem as the kernel sees them (rows, fixed dims, slacks, start, violation)
and the Lagrangian bound; this one the kernel.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from libra_jax.model import objective as model
from libra_jax.model.problem import Problem
from libra_jax.solvers.ipm_rows import (
    equality_rows,
    fixed_dims,
    inputs_finite,
    lagrangian_bound,
    linear_rows,
    normalised_rows,
    pieces_free,
    slacks,
    start,
    violation,
)
from libra_jax.solvers.linalg import cholesky, row_basis, solve_lower, solve_upper_t


# ------------------------------------------------------------------------------------------
# The kernel


class IpmConfig(NamedTuple):
    """Static loop lengths and tolerances (hashable: a change recompiles)."""

    max_iter: int = 80  # most predictor-corrector iterations
    gap_tol: float = 1e-12  # stop when the in-kernel bound certifies this relative gap
    #   (at least 100 machine epsilons: 1.2e-5 in float32)
    step_fraction: float = 0.99  # fraction to the boundary
    max_shrink: float = 0.5  # most relative decrease of a used bandwidth in one step


class KernelOutput(NamedTuple):
    """One problem's result (arrays; a leading batch axis under vmap)."""

    bw: jax.Array  # [D] GB/s, the iterate of least step time
    step_s: jax.Array  # [] step time at bw (s)
    lb_s: jax.Array  # [] Lagrangian lower bound of the optimum (s), the best of the iterations
    # The multipliers that gave lb_s (float32 results re-evaluate the bound from them in
    # float64):
    lam_pair: jax.Array  # [K, D] multipliers of the pairs
    lam_row: jax.Array  # [R] multipliers of the general rows
    lam_lin: jax.Array  # [M] multipliers of the linear rows (`linear_rows` order)
    nu: jax.Array  # [E] multipliers of the equality rows (`equality_rows` order)
    iterations: jax.Array  # [] int32
    finite: jax.Array  # [] bool: every quantity stayed finite
    started_inside: jax.Array  # [] bool: the start was strictly feasible
    violation: jax.Array  # [] largest constraint violation (GB/s, unit-norm rows)
    # [] bool: the loop stopped on its own (certified, at the precision's floor, no step, or
    # given up), not at the iteration limit
    done: jax.Array


class _State(NamedTuple):
    bw: jax.Array  # [D]
    tk: jax.Array  # [K] phase times
    tj: jax.Array  # [J] piece times
    s_pair: jax.Array  # [K, D] slacks of the pairs (independent variables)
    s_row: jax.Array  # [R] slacks of the general rows
    lam_pair: jax.Array
    lam_row: jax.Array
    lam_lin: jax.Array
    nu: jax.Array
    lb: jax.Array  # best Lagrangian bound so far
    lb_mult: tuple  # the multipliers (lam_pair, lam_row, lam_lin, nu) that gave it
    best_bw: jax.Array  # [D] the iterate of least step time so far (every iterate is feasible)
    best_step: jax.Array  # its step time
    stall: jax.Array  # iterations in a row at the complementarity floor without progress
    it: jax.Array
    ridge: jax.Array  # regularisation of the scaled Newton matrix (0 unless a step broke down)
    done: jax.Array


def solve_perf(p: Problem, cap=None, cap_on=False,
               config: IpmConfig = IpmConfig(), limit=None) -> KernelOutput:
    """Minimum step time of one problem (optionally with network cost <= ``cap``).

    Pure and traceable: jit it, vmap it over problems (and caps). Nothing raises; the output
    says whether the start was inside and whether everything stayed finite. ``limit`` (an
    int32 array, traced) stops the loop after that many iterations if ``config.max_iter``
    has not stopped it first; the iterations run are those of an unlimited run, so a
    problem stopped at the limit (``done`` False) and solved again with a larger one gives
    what one run with the larger limit gives.
    """
    dt = p.lo.dtype
    tiny = jnp.finfo(dt).tiny
    eps = jnp.finfo(dt).eps
    gap_tol = max(config.gap_tol, 100 * float(jnp.finfo(dt).eps))  # float32: 1.2e-5
    # Ridges of a broken-down step: 100x per failure from ridge_min, given up above ridge_max
    # (float64: 1e-14 ... 1e-6; float32: eps ... 1e3 eps).
    ridge_min = max(1e-14, float(jnp.finfo(dt).eps))
    ridge_max = max(1e-6, 1e3 * float(jnp.finfo(dt).eps))
    cap = jnp.asarray(0.0 if cap is None else cap, dt)
    cap_on = jnp.asarray(cap_on)
    k, d = p.traffic_gb.shape
    num_j = p.piece_weight.shape[0]
    n = d + num_j
    g, h, g_on, n_gen = linear_rows(p, cap, cap_on)
    e, f, e_on = equality_rows(p)
    e_full = jnp.concatenate([jnp.where(e_on[:, None], e, 0.0),
                              jnp.zeros((e.shape[0], num_j), dt)], axis=1)  # [E, n]
    fixed, value = fixed_dims(p)
    pair_on = p.traffic_gb > 0
    phase_on = jnp.any(pair_on, axis=1)
    piece_free = pieces_free(p)
    r_used = p.row_on[:, None] & (p.row_gb > 0)
    # Gradient of a row's g = -s in the pieces: nest_r - e_j(r).
    row_dt = jnp.where(p.row_on[:, None],
                       p.row_nest - jax.nn.one_hot(p.row_piece, num_j, dtype=dt), 0.0)
    fix_y = jnp.concatenate([fixed, piece_free])  # [n] coordinates with a known step
    e_y = jnp.where(fix_y[None, :], 0.0, e_full)
    q_eq, r_eq, eq_dep = row_basis(e_y)
    ons = (pair_on, p.row_on, g_on)
    num_ineq = jnp.maximum(sum(jnp.sum(o) for o in ons).astype(dt), 1.0)

    def true_slacks(bw, tk, tj):
        return slacks(bw, tk, tj, p, g, h, g_on)

    def bw_grads(bw):
        """d g / d bw of the pairs [K, D] (g = T / bw - t: -T / bw^2) and of the rows
        [R, D] (-a / bw^2)."""
        pos = jnp.where(pair_on, bw[None, :], 1.0)
        rb = jnp.where(r_used, bw[None, :], 1.0)
        return (jnp.where(pair_on, -p.traffic_gb / pos**2, 0.0),
                jnp.where(r_used, -p.row_gb / rb**2, 0.0))

    def factor(st: _State, s):
        """Factors the reduced system at the iterate (slacks ``s`` = (pair, row, lin));
        returns a function of the centring terms rho giving the step (db, dtk, dtj, nu)."""
        bw = st.bw
        gp, gr = bw_grads(bw)
        wp, wr, wl = (jnp.where(o, lam / sl, 0.0)
                      for lam, sl, o in zip((st.lam_pair, st.lam_row, st.lam_lin), s, ons))
        # lam * hess g is diagonal in bw: 2 T / bw^3 (pairs), 2 a / bw^3 (rows).
        hess_b = (jnp.sum(st.lam_pair * 2.0 * (-gp) / jnp.where(pair_on, bw, 1.0), axis=0)
                  + jnp.sum(st.lam_row[:, None] * 2.0 * (-gr) / jnp.where(r_used, bw, 1.0),
                            axis=0))
        # Each phase variable couples only with bw: block h_k, coupling cpl [K, D].
        h_k = jnp.where(phase_on, jnp.sum(wp, axis=1), 1.0)
        cpl = -wp * gp  # w (d g / d bw) (d g / d t_k) = w T / bw^2
        s_bb = (jnp.diag(hess_b + jnp.sum(wp * gp**2, axis=0)) + (g * wl[:, None]).T @ g
                - (cpl / h_k[:, None]).T @ cpl)
        q = jnp.concatenate([gr, row_dt], axis=1)  # [R, n] row gradients in (bw, pieces)
        s_full = ((q * wr[:, None]).T @ q).at[:d, :d].add(s_bb)
        # Fixed coordinates: identity rows and columns; their known steps move to the
        # right-hand side through the columns of s_full.
        s_mat = jnp.where(fix_y[:, None] | fix_y[None, :], 0.0, s_full)
        s_mat = s_mat + jnp.diag(jnp.where(fix_y, 1.0, 0.0))
        # Jacobi scaling first, y = D y~ with D = diag(S)^-1/2: S~ = D S D has a unit
        # diagonal, and the equalities become q_eq D y~ = a with a fixed by R a = r_p. Their
        # orthonormal row basis in these coordinates, q^ (q_eq D = R^ q^), gives the step
        # y~ = q^T a^ + z (R^ a^ = a), z in the null space from the positive definite
        # (P S~ P + q^T q^) z = P (D r - S~ q^T a^), P = I - q^T q^. Every entry is O(1); the
        # projection of the unscaled S would add the rounding of its largest entries to every
        # entry and lose the curvature of the flat directions (float32 broke down there).
        scale = 1.0 / jnp.sqrt(jnp.maximum(jnp.diagonal(s_mat), tiny))
        s_til = scale[:, None] * s_mat * scale[None, :]
        q_hat, r_hat, hat_dep = row_basis(q_eq * scale[None, :], tol=float(eps), passes=2)
        proj = jnp.eye(n, dtype=dt) - q_hat.T @ q_hat
        a_til = proj @ s_til @ proj + q_hat.T @ q_hat
        # No ridge by default: even 10 eps on the unit diagonal stalls the last digits of
        # ill-conditioned (nested-row) problems at 1e-9; a breakdown gives a non-finite step,
        # which is rejected and retried with a ridge (see `step`).
        low, _ = cholesky(a_til + st.ridge * jnp.eye(n, dtype=dt))
        # The factor's inverse, by one substitution with n right-hand sides: the four
        # triangular solves of each of the two directions are then products (one
        # unrolled substitution instead of eight: a third of the kernel's graph, so of its
        # compile time).
        linv = solve_lower(low, jnp.eye(n, dtype=dt))
        y_fix = jnp.where(fix_y, jnp.concatenate([value - bw, -st.tj]), 0.0)
        r_p = jnp.where(e_on, f - e @ bw, 0.0) - e_full @ y_fix
        a_p = solve_lower(r_hat, solve_lower(r_eq, r_p, eq_dep), hat_dep)
        couple = s_full @ y_fix

        def solve(rho_pair, rho_row, rho_lin):
            # Right-hand side -grad f - sum_i rho_i grad g_i in (bw, t_k, pieces).
            r_b = -jnp.sum(rho_pair * gp, axis=0) - rho_row @ gr - g.T @ rho_lin
            r_k = jnp.where(phase_on, -p.weight + jnp.sum(rho_pair, axis=1), -st.tk)
            r_j = -p.piece_weight - rho_row @ row_dt
            r_y = jnp.concatenate([r_b - cpl.T @ (r_k / h_k), r_j])  # phases eliminated
            r_y = jnp.where(fix_y, 0.0, r_y - couple)
            y_p = q_hat.T @ a_p
            r_til = scale * r_y
            b_til = proj @ (r_til - s_til @ y_p)
            z = linv.T @ (linv @ b_til)
            # One step of iterative refinement: near the end of the path the factor of this
            # nearly singular matrix is only accurate to ~1e-9 (float64).
            z = z + linv.T @ (linv @ (b_til - a_til @ z))
            y_til = y_p + z
            y = scale * y_til
            # nu from D E^T nu = D r - S~ y~, projected on the row basis:
            # R^T nu = R^-T q^ (D r - S~ y~).
            nu = solve_upper_t(r_eq, solve_upper_t(r_hat, q_hat @ (r_til - s_til @ y_til),
                                                   hat_dep), eq_dep)
            y = jnp.where(fix_y, y_fix, y)
            db, dtj = y[:d], y[d:]
            dtk = jnp.where(phase_on, (r_k - cpl @ db) / h_k, -st.tk)
            return (db, dtk, dtj), nu

        def slack_steps(db, dtk, dtj, r_g):
            """ds = -r_g - grad g . dz for (pairs, rows, linear rows)."""
            return (jnp.where(pair_on, dtk[:, None] - gp * db[None, :] - r_g[0], 0.0),
                    jnp.where(p.row_on, -(gr @ db + row_dt @ dtj) - r_g[1], 0.0),
                    jnp.where(g_on, -(g @ db), 0.0))

        return solve, slack_steps, (wp, wr, wl)

    def ratio(x, dx, on):
        """Largest alpha with x + alpha dx >= 0 over the entries ``on`` (inf if none)."""
        neg = on & (dx < 0)
        return jnp.min(jnp.where(neg, -x / jnp.where(neg, dx, -1.0), jnp.inf), initial=jnp.inf)

    def max_step(s, ds, lam, dlam):
        return jnp.min(jnp.stack([ratio(a, b, o) for a, b, o in zip(s, ds, ons)]
                                 + [ratio(a, b, o) for a, b, o in zip(lam, dlam, ons)]))

    def step(st: _State) -> _State:
        true = true_slacks(st.bw, st.tk, st.tj)
        # Linear rows: their slacks are computed from bw, exact up to the rounding of h - g bw,
        # which bounds them below (a slack at the rounding level is as good as zero).
        lin_floor = eps * (jnp.abs(h) + jnp.abs(h - true.lin))
        s = (st.s_pair, st.s_row, jnp.where(g_on, jnp.maximum(true.lin, lin_floor), 1.0))
        # Residuals r_g = g(z) + s of the nonlinear rows (g = -true slack).
        r_g = (jnp.where(pair_on, st.s_pair - true.pair, 0.0),
               jnp.where(p.row_on, st.s_row - true.row, 0.0))
        lam = (st.lam_pair, st.lam_row, st.lam_lin)
        solve, slack_steps, w = factor(st, s)
        comp = sum(jnp.sum(jnp.where(o, a * b, 0.0)) for a, b, o in zip(lam, s, ons))
        mu = comp / num_ineq

        def direction(target, corr):
            """Step for complementarity target (sigma mu) and corrector terms corr."""
            rho = tuple(jnp.where(o, (target - c + a * rg) / sl, 0.0)
                        for c, a, rg, sl, o in zip(corr, lam, r_g + (0.0,), s, ons))
            dz, nu = solve(*rho)
            ds = slack_steps(*dz, r_g)
            dlam = tuple(jnp.where(o, (target - c - a * x) / sl - a, 0.0)
                         for c, a, x, sl, o in zip(corr, lam, ds, s, ons))
            return dz, nu, ds, dlam

        zeros = tuple(jnp.zeros_like(a) for a in lam)
        _, _, ds_aff, dl_aff = direction(0.0, zeros)
        a_aff = jnp.minimum(1.0, max_step(s, ds_aff, lam, dl_aff))
        comp_aff = sum(jnp.sum(jnp.where(o, (a + a_aff * x) * (b + a_aff * y), 0.0))
                       for a, x, b, y, o in zip(lam, dl_aff, s, ds_aff, ons))
        sigma = jnp.clip((comp_aff / jnp.maximum(comp, tiny)) ** 3, 0.0, 1.0)
        corr = tuple(x * y for x, y in zip(ds_aff, dl_aff))
        # The complementarity target never goes below 10 eps of the step time (in float32 a
        # tenth of the 100 eps gap the kernel certifies): less buys the certificate nothing,
        # and the Newton system loses its accuracy in the directions it barely curves
        # (conditioning ~ 1 / mu: float32 steps turn to noise near mu ~ eps).
        mu_floor = 10.0 * eps * jnp.abs(st.best_step) / num_ineq
        (db, dtk, dtj), nu, ds, dlam = direction(jnp.maximum(sigma * mu, mu_floor), corr)
        # The pairs' and rows' linearisation of a / bw holds within a relative neighbourhood
        # of bw: no used dim may shrink below (1 - shrink) of its value in one step.
        free_b = ~fixed & (jnp.any(pair_on, axis=0) | jnp.any(r_used, axis=0))
        a_bw = ratio(config.max_shrink * st.bw, db, free_b)
        alpha = jnp.minimum(1.0, jnp.minimum(config.step_fraction * max_step(s, ds, lam, dlam),
                                             a_bw))
        bw, tk, tj = st.bw + alpha * db, st.tk + alpha * dtk, st.tj + alpha * dtj
        new_lam = [jnp.where(o, jnp.maximum(a + alpha * x, tiny), 0.0)
                   for a, x, o in zip(lam, dlam, ons)]
        s_pair = jnp.where(pair_on, jnp.maximum(st.s_pair + alpha * ds[0], tiny), 1.0)
        s_row = jnp.where(p.row_on, jnp.maximum(st.s_row + alpha * ds[1], tiny), 1.0)
        lb = lagrangian_bound(p, new_lam[0], new_lam[1], new_lam[2][:n_gen], nu, cap)
        step_now = model.step_time_s(bw, p)
        resid = jnp.max(jnp.where(e_on, jnp.abs(e @ bw - f), 0.0), initial=0.0)
        scale_bw = jnp.maximum(jnp.sum(p.upper), tiny)
        finite = (jnp.all(jnp.isfinite(bw)) & jnp.all(jnp.isfinite(tk))
                  & jnp.all(jnp.isfinite(tj)) & jnp.isfinite(step_now)
                  & jnp.all(jnp.isfinite(s_pair)) & jnp.all(jnp.isfinite(s_row)))
        better_lb = finite & (lb > st.lb)
        best_lb = jnp.where(better_lb, lb, st.lb)
        lb_mult = tuple(jnp.where(better_lb, a, b) for a, b in
                        zip((new_lam[0], new_lam[1], new_lam[2], nu), st.lb_mult))
        # The iterate of least step time: near the end of the path a step taken at the
        # precision's limit may lose digits the certificate already had.
        better = finite & (resid <= 1e3 * eps * scale_bw) & (step_now < st.best_step)
        best_bw = jnp.where(better, bw, st.best_bw)
        best_step = jnp.where(better, step_now, st.best_step)
        certified = best_step - best_lb <= gap_tol * jnp.abs(best_lb)
        # Complementarity at the precision's floor, or near it with neither the step time nor
        # the bound moving for three iterations: no further progress is possible.
        still = eps * jnp.abs(best_step)
        stall = jnp.where((mu <= 2.0 * mu_floor) & (best_step > st.best_step - still)
                          & (best_lb < st.lb + still), st.stall + 1, 0)
        floor = (mu * num_ineq <= eps * jnp.abs(step_now)) | (stall >= 3)

        def pick(new, old):
            return jnp.where(finite, new, old)

        return _State(
            bw=pick(bw, st.bw), tk=pick(tk, st.tk), tj=pick(tj, st.tj),
            s_pair=pick(s_pair, st.s_pair), s_row=pick(s_row, st.s_row),
            lam_pair=pick(new_lam[0], st.lam_pair), lam_row=pick(new_lam[1], st.lam_row),
            lam_lin=pick(new_lam[2], st.lam_lin), nu=pick(nu, st.nu), lb=best_lb,
            lb_mult=lb_mult, best_bw=best_bw, best_step=best_step, stall=stall,
            it=st.it + 1,
            # A step that broke down (rounding wiped out a pivot near the end of the path) is
            # retried with a ridge, raised 100x per failure and relaxed 10x per success.
            ridge=jnp.where(finite, 0.1 * st.ridge, jnp.maximum(100.0 * st.ridge, ridge_min)),
            # (a rejected step's numbers certify nothing)
            done=(finite & (certified | floor | (alpha <= 0))) | (st.ridge > ridge_max))

    bw0, tk0, tj0 = start(p, cap, cap_on)
    sl0 = true_slacks(bw0, tk0, tj0)
    obj0 = p.weight @ tk0 + p.piece_weight @ tj0
    mu0 = jnp.maximum(obj0, tiny) / num_ineq
    lam0 = [jnp.where(o, mu0 / sl, 0.0) for sl, o in zip((sl0.pair, sl0.row, sl0.lin), ons)]
    # Every entry of the state is computed from the problem (``zero``), so that under vmap
    # each is batched from the start: JAX's while-loop batching rule otherwise traces the
    # loop body once more for every round of entries it finds batched (a third of the
    # kernel's tracing time).
    zero = jnp.where(p.lo[0] == p.lo[0], 0.0, 0.0).astype(dt)
    izero = zero.astype(jnp.int32)
    init = _State(bw=bw0, tk=tk0, tj=tj0, s_pair=sl0.pair, s_row=sl0.row,
                  lam_pair=lam0[0], lam_row=lam0[1], lam_lin=lam0[2],
                  nu=jnp.zeros(e.shape[0], dt) + zero, lb=zero - jnp.inf,
                  lb_mult=(lam0[0], lam0[1], lam0[2], jnp.zeros(e.shape[0], dt) + zero),
                  best_bw=bw0, best_step=jnp.where(sl0.inside, model.step_time_s(bw0, p),
                                                   jnp.inf),
                  stall=izero, it=izero, ridge=zero, done=~sl0.inside)
    def going(st: _State):
        on = (st.it < config.max_iter) & ~st.done
        return on if limit is None else on & (st.it < limit)

    final = jax.lax.while_loop(going, step, init)
    step_s = model.step_time_s(final.best_bw, p)
    viol = violation(final.best_bw, p, cap, cap_on)
    lam_pair, lam_row, lam_lin, nu = final.lb_mult
    return KernelOutput(
        bw=final.best_bw, step_s=step_s, lb_s=final.lb, lam_pair=lam_pair,
        lam_row=lam_row, lam_lin=lam_lin, nu=nu, iterations=final.it,
        # (the inputs too: a NaN in the traffic must not hide in a max; XLA's vectorised
        # CPU reductions do not always propagate it)
        finite=(jnp.isfinite(step_s) & jnp.all(jnp.isfinite(final.best_bw))
                & inputs_finite(p)),
        started_inside=sl0.inside, violation=viol, done=final.done)


__all__ = [
    "IpmConfig",
    "KernelOutput",
    "cholesky",
    "equality_rows",
    "fixed_dims",
    "lagrangian_bound",
    "linear_rows",
    "normalised_rows",
    "row_basis",
    "solve_lower",
    "solve_perf",
    "solve_upper_t",
    "violation",
]
