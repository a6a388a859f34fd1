"""Exact step on an identified active set: turns a first-order point into a certified optimum.

The `perf` problem in epigraph form is

    minimise  w @ t   subject to  t_k >= T_kd / bw_d,  G bw <= h,  E bw = f,  fixed dims.

At a point bw near the optimum (e.g. the Optax method's, `first_order.py`), the active set is
read off with a relative tolerance ``tol``: the pairs (k, d) with T_kd / bw_d within ``tol`` of
phase k's max, and the inequality rows with slack <= ``tol * max(upper)``. On that set the
active pairs tie dims together: if phase k is limited by dims d and d', bw_d / bw_d' =
T_kd / T_kd'. The connected components of that bipartite graph (dims linked through phases)
give bw_d = alpha_d sigma_c for one scale sigma_c per component, and the step time on the
active set is sum_c B_c / sigma_c (B_c = sum of w_k T_kd / alpha_d over the component's
phases), so the problem restricted to the active set is

    minimise  sum_c B_c / sigma_c   subject to  A sigma = b   (the active rows in sigma),

convex and smooth. With a price on the network cost (``price`` s/$; the price levels of
perf_per_cost with the Optax method, `solve.py`) the objective is the step time + price x
cost, which adds the constant gradient price * cost_rate @ cols to the reduced problem and
nothing else. Newton's method on its KKT conditions (diagonal Hessian 2 B_c / sigma_c^3;
the rows through the SPD Schur complement A H^-1 A^T, factored by `ipm.cholesky`, Jacobi
scaled, dependent rows skipped) converges quadratically from the first-order point. Dims in no
active pair limit no phase: they are variables with zero gradient and a re-centred proximal
Hessian, so the steps move them only as far as the active rows need (a dim the constraints
fix is held at its value).

Multipliers. The rows' nu is the least-norm solution of stationarity in the reduced
variables (a_z^T nu = minus the reduced gradient: B_c / sigma_c^2 on the components, 0 on
the free unpaired dims, less the price term). Per dim, bw_d (A^T nu + price cost_rate)_d is
then the load the pair multipliers must carry; lam_kd >= 0 with
sum_d lam_kd = w_k solves those equations by affine-scaling steps (`_pair_multipliers`: the
least-norm solution can be negative when proportional phases tie the same dims). Any
multipliers of the right signs give a valid lower bound (`ipm.lagrangian_bound`, weak
duality; with a price, of the step time + price x cost, as the cap row's multiplier fixed at
the price): it is tight when the active set was right, and merely loose (never wrong) when not.
Several tolerances are tried (vmapped, two passes: see `PASSES`); the best feasible point and
the best bound are kept.

Everything is static-shape masks and jnp arithmetic: no LAPACK, so it vmaps over problems.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from libra_jax.model import objective as model
from libra_jax.model.problem import Problem
from libra_jax.solvers import ipm

#: Relative tolerances tried for the active set (vmapped), in two passes: from the
#: first-order point, then from the first pass's best point (its ties exact to rounding).
#: (A tolerance of 1 ties every used dim of a phase: right for one-phase problems whatever
#: the first-order point.) Rows count as active within min(tol, `ROW_TOL_MAX`) * max(upper).
PASSES = ((1e-5, 1e-3, 1e-1, 1.0), (1e-12, 1e-9, 1e-6, 1e-3))
ROW_TOL_MAX = 1e-2
NEWTON_STEPS = 16
MULTIPLIER_STEPS = 8
_SKIP_TOL = 1e-11  # pivot / original diagonal below which a row counts as dependent


class ExactStep(NamedTuple):
    """The exact step's best point and bound (arrays; batch axes in front under vmap)."""

    bw: jax.Array  # [D] GB/s: the lowest-step-time feasible candidate (or the input point)
    objective_s: jax.Array  # [] step time (+ price x cost) at bw
    lb_s: jax.Array  # [] best Lagrangian lower bound over the candidates (-inf if none)
    violation: jax.Array  # [] largest violation at bw (GB/s, unit-norm rows)


def _components(adj):
    """Connected components of a symmetric boolean [D, D] ``adj`` (reflexive): the label of
    each dim is the smallest index it reaches (closure by repeated squaring)."""
    d = adj.shape[0]
    reach = adj
    for _ in range(max(d - 1, 1).bit_length()):
        reach = reach | (reach.astype(jnp.int32) @ reach.astype(jnp.int32) > 0)
    idx = jnp.arange(d)
    return jnp.min(jnp.where(reach, idx[None, :], d), axis=1)


def _ratios(traffic, act, comp, paired):
    """alpha [D]: bw_d / bw_rep within each component, propagated from its representative
    through the active pairs (alpha_d' = alpha_d T_kd' / T_kd for pairs (k, d), (k, d'))."""
    d = traffic.shape[1]
    idx = jnp.arange(d)
    alpha = jnp.where(comp == idx, 1.0, 0.0).astype(traffic.dtype)
    known = comp == idx
    safe_t = jnp.where(act, traffic, 1.0)
    for _ in range(d - 1):
        # phase k's scale from a known dim: s_k = alpha_d / T_kd (any known active d).
        has = act & known[None, :]
        s_k = jnp.max(jnp.where(has, alpha[None, :] / safe_t, 0.0), axis=1)
        ok_k = jnp.any(has, axis=1)
        cand = act & ok_k[:, None]
        new = jnp.max(jnp.where(cand, s_k[:, None] * traffic, 0.0), axis=0)
        fresh = ~known & jnp.any(cand, axis=0)
        alpha = jnp.where(fresh, new, alpha)
        known = known | fresh
    return jnp.where(paired, alpha, 0.0), known | ~paired


def _rows(p: Problem, x, tol, scale):
    """Active rows on bw as equalities: [equality rows | active inequality rows (box
    included) | pins of fixed dims]. Returns (a [N, D], b [N], on [N], n_eq, n_gen, g_live
    [N]): the inequality rows start at n_eq, their first n_gen are the user rows and the cap
    (`ipm.linear_rows`); g_live marks the inequality rows that take part, active or not."""
    g, h, g_on, n_gen = ipm.linear_rows(p, jnp.asarray(0.0, x.dtype), jnp.asarray(False))
    e, f, e_on = ipm.equality_rows(p)
    fixed, value = ipm.fixed_dims(p)
    g_act = g_on & (h - g @ x <= jnp.minimum(tol, ROW_TOL_MAX) * scale)
    eye = jnp.eye(x.shape[0], dtype=x.dtype)
    a = jnp.concatenate([e, g, eye])
    b = jnp.concatenate([f, h, value])
    on = jnp.concatenate([e_on, g_act, fixed])
    g_live = jnp.concatenate([jnp.zeros_like(e_on), g_on, jnp.zeros_like(fixed)])
    return a, b, on, e.shape[0], n_gen, g_live


def _spd_solve(s, rhs, on):
    """Solves the PSD system s y = rhs on the rows ``on`` (others 0) by a Jacobi-scaled
    `ipm.cholesky`, skipping dependent rows."""
    s = jnp.where(on[:, None] & on[None, :], s, 0.0) + jnp.diag(jnp.where(on, 0.0, 1.0))
    dia = jnp.diagonal(s)
    sc = 1.0 / jnp.sqrt(jnp.where(dia > 0, dia, 1.0))
    s_til = sc[:, None] * s * sc[None, :] + jnp.diag(jnp.where(dia > 0, 0.0, 1.0))
    low, skipped = ipm.cholesky(s_til, _SKIP_TOL)
    r = jnp.where(on, rhs, 0.0) * sc
    y = ipm.solve_upper_t(low, ipm.solve_lower(low, r, skipped), skipped)
    return jnp.where(on, y * sc, 0.0)


def _pair_multipliers(act, coef, weight, load, has_phase, paired):
    """lam [K, D] >= 0 on the active pairs with sum_d lam_kd = w_k (phases) and
    sum_k lam_kd coef_kd = load_d (paired dims), by affine-scaling steps from the even split
    of each phase's weight: lam += L^2 J^T y with (J L^2 J^T) y = residual (L = diag(lam)),
    at most a 0.9 fraction of the way to lam = 0. The equations have many solutions when the
    active pairs form cycles (proportional phases); the least-norm one may be negative, the
    scaled steps stay in the positive orthant."""
    k = weight.shape[0]
    n_k = jnp.sum(act, axis=1)
    lam = jnp.where(act, (weight / jnp.maximum(n_k, 1))[:, None], 0.0)
    eq_on = jnp.concatenate([has_phase, paired])
    rhs = jnp.concatenate([weight, load])

    def step(lam, _):
        resid = rhs - jnp.concatenate([jnp.sum(lam, axis=1), jnp.sum(lam * coef, axis=0)])
        d2 = lam**2
        m = jnp.block([[jnp.diag(jnp.sum(d2, axis=1)), d2 * coef],
                       [(d2 * coef).T, jnp.diag(jnp.sum(d2 * coef**2, axis=0))]])
        y = _spd_solve(m, resid, eq_on)
        dl = jnp.where(act, d2 * (y[:k, None] + coef * y[None, k:]), 0.0)
        neg = act & (dl < 0)
        room = jnp.min(jnp.where(neg, -lam / jnp.where(neg, dl, -1.0), jnp.inf))
        return lam + jnp.minimum(1.0, 0.9 * room) * dl, None

    lam, _ = jax.lax.scan(step, lam, None, length=MULTIPLIER_STEPS)
    return lam


def _used_dims_positive(p: Problem, bw):
    """[] bool: every dim a phase uses has bw > 0 (a / bw has no meaning at bw <= 0, where
    the model's time would come out negative, not infinite)."""
    return jnp.all(jnp.where(jnp.any(p.traffic_gb > 0, axis=0), bw > 0, True))


def _candidate(p: Problem, x, tol, price):
    """The exact step for one tolerance: (bw [D], objective_s, lb_s, violation)."""
    dt = x.dtype
    d = p.traffic_gb.shape[1]
    used = p.traffic_gb > 0
    scale = jnp.maximum(jnp.max(p.upper), 1e-300)
    times = model.dim_times_s(x, p)  # [K, D]
    tmax = jnp.max(times, axis=1, initial=0.0)
    act = used & (times >= (1.0 - tol) * tmax[:, None])
    paired = jnp.any(act, axis=0)
    link = (act.astype(jnp.int32).T @ act.astype(jnp.int32)) > 0
    comp = _components(link | jnp.eye(d, dtype=bool))
    alpha, consistent = _ratios(p.traffic_gb, act, comp, paired)
    rep = paired & (comp == jnp.arange(d))
    onehot = (comp[:, None] == jnp.arange(d)[None, :]) & paired[:, None]  # [D, C=D]
    # Step time on the active set: phase k costs beta_k / sigma_c(k).
    safe_a = jnp.where(paired, alpha, 1.0)
    beta = jnp.max(jnp.where(act, p.traffic_gb / safe_a[None, :], 0.0), axis=1)  # [K]
    phase_dim = jnp.argmax(act, axis=1)
    phase_comp = comp[phase_dim]
    has_phase = jnp.any(act, axis=1)
    big_b = jax.ops.segment_sum(jnp.where(has_phase, p.weight * beta, 0.0), phase_comp,
                                num_segments=d)
    # Variables z [D]: sigma on each component's representative, and the dims in no active
    # pair that the constraints do not fix (they limit no phase: no step-time gradient, and a
    # re-centred proximal term eps |dz|^2 as their Hessian, so that the steps move them
    # only as far as the active rows need); bw = cols @ z + const.
    fixed, value = ipm.fixed_dims(p)
    live = rep & (big_b > 0)
    prox = (rep & ~live) | (~paired & ~fixed)
    var = live | prox
    cols = onehot * alpha[:, None] + jnp.diag(jnp.where(~paired & ~fixed, 1.0, 0.0))
    const = jnp.where(~paired & fixed, value, 0.0)
    a_bw, b, on, n_eq, n_gen, g_live = _rows(p, x, tol, scale)
    a_z = a_bw @ cols
    b_z = b - a_bw @ const
    price_bw = price * p.cost_rate  # [D] s per GB/s: the cost term's gradient in bw
    price_z = jnp.where(var, price_bw @ cols, 0.0)
    z0 = jnp.where(var, x, 0.0)
    h_live = jnp.where(live, 2.0 * big_b / jnp.where(live, z0, 1.0) ** 3, jnp.inf)
    eps = 1e-2 * jnp.where(jnp.any(live), jnp.min(h_live), 1.0)

    def newton(carry, _):
        z, on = carry
        safe = jnp.where(live, z, 1.0)
        grad = jnp.where(live, -big_b / safe**2, 0.0) + price_z
        hinv = jnp.where(live, safe**3 / (2.0 * jnp.where(live, big_b, 1.0)),
                         jnp.where(prox, 1.0 / eps, 0.0))
        resid = jnp.where(on, b_z - a_z @ z, 0.0)
        schur = (a_z * hinv[None, :]) @ a_z.T
        nu = _spd_solve(schur, -(a_z @ (hinv * grad)) - resid, on)
        dz = jnp.where(var, -hinv * (grad + a_z.T @ nu), 0.0)
        shrink = jnp.where(dz < 0, -0.5 * z / jnp.where(dz < 0, dz, -1.0), jnp.inf)
        step = jnp.minimum(1.0, jnp.min(jnp.where(live, shrink, jnp.inf)))
        # Ratio test on the inactive inequality rows: the first one the step would cross
        # blocks it and joins the active set (a primal active-set step).
        slack = b_z - a_z @ z
        rate = a_z @ dz
        cross = g_live & ~on & (rate > 0)
        ratio = jnp.where(cross, jnp.maximum(slack, 0.0) / jnp.where(cross, rate, 1.0),
                          jnp.inf)
        j = jnp.argmin(ratio)
        blocked = ratio[j] < step
        step = jnp.where(blocked, ratio[j], step)
        on = on | (blocked & (jnp.arange(on.shape[0]) == j))
        return (z + step * dz, on), None

    (z, on), _ = jax.lax.scan(newton, (z0, on), None, length=NEWTON_STEPS)
    bw = cols @ z + const
    # Row multipliers: stationarity in z, a_z^T nu = B / sigma^2 on the components and 0 on
    # the free unpaired dims (less the price term), least norm (nu = a_z w, (a_z^T a_z) w = q).
    q = jnp.where(live, big_b / jnp.where(live, z, 1.0) ** 2, 0.0) - price_z
    m = jnp.where(on[:, None], a_z, 0.0)
    w = _spd_solve(m.T @ m, q, var)
    nu = m @ w
    # Pair multipliers: sum_d lam_kd = w_k and
    # sum_k lam_kd T_kd / bw_d = bw_d (A^T nu + price cost_rate)_d.
    safe_bw = jnp.where(paired, bw, 1.0)
    coef = jnp.where(act, p.traffic_gb / safe_bw[None, :], 0.0)  # [K, D] (= t_k if tied)
    lam_pair = _pair_multipliers(act, coef, p.weight, bw * (a_bw.T @ nu + price_bw),
                                 has_phase, paired)
    # The price enters the bound as the cost row's multiplier (rows are unit-norm) at cap 0.
    lam_gen = jnp.maximum(nu[n_eq:n_eq + n_gen], 0.0)
    lam_gen = jnp.concatenate([lam_gen[:-1],
                               jnp.reshape(price * jnp.sqrt(jnp.sum(p.cost_rate**2)), (1,))])
    lb = ipm.lagrangian_bound(p, lam_pair, jnp.zeros(p.row_on.shape, dt), lam_gen,
                              nu[:n_eq], jnp.asarray(0.0, dt))
    step = objective_s(bw, p, price)
    viol = model.max_violation(bw, p)
    ok = jnp.all(consistent) & jnp.all(jnp.isfinite(bw)) & jnp.isfinite(step)
    ok = ok & _used_dims_positive(p, bw)
    lb = jnp.where(ok & jnp.isfinite(lb), lb, -jnp.inf)
    return bw, jnp.where(ok, step, jnp.inf), lb, jnp.where(ok, viol, jnp.inf)


def objective_s(bw, p: Problem, price):
    """[] the step time + ``price`` x network cost (s; price in s/$)."""
    return model.step_time_s(bw, p) + price * model.network_cost_usd(bw, p)


def exact_step(p: Problem, x, viol_tol, price=0.0) -> ExactStep:
    """The exact step from the point ``x`` [D] (see the module docstring) for the objective
    step time + ``price`` x network cost (s; ``price`` in s/$, 0: the step time).

    A first pass tries the tolerances of ``PASSES[0]`` from x; a second pass re-identifies
    the active set with the tighter ``PASSES[1]`` at the best point of the first (its ties
    are then exact to rounding, so the multipliers are too). Returns the feasible
    candidate (violation <= ``viol_tol`` GB/s, or no worse than at x) with the lowest step
    time, x itself when none beats it (or none is feasible where x is not; its step time
    is +inf when a used dim is not positive), and the best
    bound of them all (every candidate's bound is valid). Problems with general model rows
    (`ModelRows`) keep x and get no bound (the reduction covers the phase pairs only).
    """
    dt = x.dtype
    price = jnp.asarray(price, dt)
    step_x = jnp.where(_used_dims_positive(p, x), objective_s(x, p, price), jnp.inf)
    viol_x = model.max_violation(x, p)
    limit = jnp.maximum(viol_tol, viol_x)

    def one_pass(carry, tols):
        point, lb = carry
        bws, steps, lbs, viols = jax.vmap(lambda t: _candidate(p, point, t, price))(tols)
        steps = jnp.where(viols <= limit, steps, jnp.inf)
        i = jnp.argmin(steps)
        found = steps[i] < jnp.inf
        return (jnp.where(found, bws[i], point), jnp.maximum(lb, jnp.max(lbs))), (
            bws[i], steps[i], viols[i])

    (_, lb), (bws, steps, viols) = jax.lax.scan(
        one_pass, (x, jnp.asarray(-jnp.inf, dt)), jnp.asarray(PASSES, dt))
    i = jnp.argmin(steps)  # (ties: the first pass)
    bw_c, step_c, viol_c = bws[i], steps[i], viols[i]
    no_rows = ~jnp.any(p.row_on)
    # A feasible candidate replaces an infeasible x even at a higher step time.
    take = ((step_c <= step_x) | ((viol_c <= viol_tol) & (viol_x > viol_tol))) & no_rows
    return ExactStep(bw=jnp.where(take, bw_c, x),
                     objective_s=jnp.where(take, step_c, step_x),
                     lb_s=jnp.where(no_rows, lb, -jnp.inf),
                     violation=jnp.where(take, viol_c, viol_x))
