"""First-order (Optax) solver for the `perf` problem: an alternative to the barrier method.

The problem (see `problem.py`) is

    minimise   compute + sum_k w_k max_d T_kd / bw_d
    subject to lo <= bw <= upper,  a_eq @ bw == b_eq,  a_in @ bw <= b_in.

Method (all inside one `jax.lax.scan` of fixed length, jit/vmap-able):

* Variables are scaled, x = bw / scale with scale = max(upper), and the objective is the
  communication time divided by its value at the start point, so that the learning rate is a
  relative step and the penalty weight is unit-free.
* The max over dimensions is smoothed by a log-sum-exp whose temperature, relative to each
  phase's current time, is annealed geometrically from ``temperature0`` to ``1e-6``:

      smax_k = m_k + tau_k log sum_{d used} exp((t_kd - m_k) / tau_k),  tau_k = temp * m_k,

  (m_k = max_d t_kd, held constant in the gradient). It overestimates the max by at most
  tau_k log D, so the bias vanishes with the temperature.
* After every Optax step the iterate is projected exactly onto the "simple set": the box
  [lo, upper] intersected with the total-bandwidth row (a row of a_eq or a_in proportional to
  all ones) when there is one. That projection is x = clip(y - tau, lo, upper) with the scalar
  dual tau found by bisection (fixed iteration count) and then made exact on the active set
  it identifies (as jaxopt's ``projection_box_section``).
* Every other row (user linear constraints, cost budget) enters an augmented Lagrangian
  (Rockafellar's form for inequalities); multipliers are updated every ``al_every`` steps,
  inequality multipliers kept >= 0.

* Then (``exact_step``, default on) an exact step on the active set the first-order point
  identifies (`active_set.py`): a few Newton steps on the KKT conditions restricted to the
  tied dims and tight rows, whose multipliers give the Lagrangian lower bound
  (`ipm.lagrangian_bound`) in the kernel.

Nothing raises inside jit: the result carries ``status`` (`types.Status`), from the status
rule (`certificate.status_codes`) with the in-kernel certified gap: OK when the bound certifies
a relative gap <= 1e-6 at a relative violation <= 1e-9, NONFINITE when an input or output is
not finite, else NOT_CONVERGED (`certificate.tangent_lp_bound` at the returned bandwidths may
still certify it on the host, as the batch engine does).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp

if TYPE_CHECKING:
    import optax

from libra_jax.model import objective as model
from libra_jax.model.problem import Problem
from libra_jax.solvers import active_set
from libra_jax.solvers.certificate import VIOLATION_TOL, relative_gap, status_codes
from libra_jax.types import float64, show

FINAL_TEMPERATURE = 1e-6  # relative log-sum-exp temperature reached at the last step
FINAL_LR_FACTOR = 1e-4  # the learning rate decays geometrically to this fraction
_BISECTION_STEPS = 80  # halvings of the dual bracket (float64: 2^-80 of the bracket)
_ONES_TOL = 1e-12  # a row is "the sum row" when all its entries agree to this
_FLOOR = 1e-9  # smallest bandwidth of a used dim, relative to max(upper)
_MAPPING_STEP = 1e-3  # largest coordinate move (scaled units) of the gradient mapping


def _optax():
    """Optax, imported on first use: only ``solver.method=optax`` needs it, and importing it
    (with chex and absl) costs a command that solves by interior point ~0.1 s."""
    import optax

    return optax


# Registry of Optax optimizers: name -> factory(learning_rate schedule).
_OPTIMIZERS = {
    "adam": lambda lr: _optax().adam(lr),
    "adabelief": lambda lr: _optax().adabelief(lr),
    "amsgrad": lambda lr: _optax().amsgrad(lr),
    "nadam": lambda lr: _optax().nadam(lr),
    "yogi": lambda lr: _optax().yogi(lr),
    "sgd": lambda lr: _optax().sgd(lr, momentum=0.9, nesterov=True),
}
METHODS = tuple(sorted(_OPTIMIZERS))


class FirstOrderConfig(NamedTuple):
    """Static settings (hashable; changing them recompiles).

    Attributes:
      num_steps: optimizer steps (length of the scan).
      method: Optax optimizer name, one of `METHODS`.
      al_every: steps between augmented-Lagrangian multiplier updates.
      exact_step: finish with the exact step on the identified active set (`active_set.py`).
    """

    num_steps: int = 4000
    method: str = "adam"
    al_every: int = 10
    exact_step: bool = True


class FirstOrderParams(NamedTuple):
    """Numeric knobs (arrays, so that sweeps over them are vmapped, not recompiled)."""

    learning_rate: jax.Array  # [] initial step in units of bw / max(upper)
    temperature0: jax.Array  # [] initial log-sum-exp temperature, relative to phase times
    penalty: jax.Array  # [] augmented-Lagrangian penalty weight (objective is O(1))


class FirstOrderResult(NamedTuple):
    """Outcome of `solve_first_order` (arrays; batch axes in front under vmap)."""

    bw: jax.Array  # [D] bandwidths (GB/s)
    step_s: jax.Array  # [] exact (unsmoothed) step time at bw (s)
    max_violation: jax.Array  # [] largest constraint violation (GB/s, unit-norm rows)
    lower_bound_s: jax.Array  # [] certified lower bound of the optimum (s; -inf if none);
    #                           with a price, of the minimum of step + price x cost
    objective_s: jax.Array  # [] step time + price x cost at bw (= step_s at price 0)
    status: jax.Array  # [] int, a `types.Status` code
    losses: jax.Array  # [num_steps] augmented-Lagrangian objective per step (relative)


class _State(NamedTuple):
    x: jax.Array  # [D] scaled bandwidths
    opt_state: optax.OptState
    nu: jax.Array  # [E] equality multipliers
    lam: jax.Array  # [I] inequality multipliers, >= 0


def default_params(dtype=jnp.float64) -> FirstOrderParams:
    """Tuned on the 15 shipped perf cases (4000 steps): step time within 1.3e-6 of the
    optimum, certified gap <= 1.1e-4, violation <= 1.1e-5 GB/s."""
    return FirstOrderParams(
        learning_rate=jnp.asarray(1e-2, dtype),
        temperature0=jnp.asarray(1e-2, dtype),
        penalty=jnp.asarray(100.0, dtype),
    )


#: Settings of each warm-started step of a price continuation (perf_per_cost, `solve.py`):
#: the point starts near the solution, so fewer steps at smaller learning rates.
CONTINUATION_CONFIG = FirstOrderConfig(num_steps=2000)
CONTINUATION_LEARNING_RATES = (1e-3, 3e-4)


def continuation_params(dtype=jnp.float64) -> FirstOrderParams:
    """The knobs of a price continuation, stacked over `CONTINUATION_LEARNING_RATES` (vmap
    over them and keep the best point and the best bound). Measured on the 15 shipped
    perf_per_cost cases along 40 prices from 0.01 to 3 times the optimal one: either rate
    alone leaves 1-11 of the 40 prices of 1-2 cases uncertified, at different prices."""
    n = len(CONTINUATION_LEARNING_RATES)
    return FirstOrderParams(
        learning_rate=jnp.asarray(CONTINUATION_LEARNING_RATES, dtype),
        temperature0=jnp.full((n,), 1e-3, dtype),
        penalty=jnp.full((n,), 100.0, dtype),
    )


def make_optimizer(method: str, schedule) -> optax.GradientTransformation:
    """The Optax optimizer called ``method``.

    Raises:
      ValueError: unknown name (the message lists the choices).
    """
    if method not in _OPTIMIZERS:
        raise ValueError(
            f"method = {show(method)}: unknown first-order method; choose one of {list(METHODS)}."
        )
    return _OPTIMIZERS[method](schedule)


# ----------------------------------------------------------------------------------------
# Smoothed objective


def smooth_comm_time_s(bw_gbps: jax.Array, p: Problem, temperature: jax.Array) -> jax.Array:
    """Communication time (s) with each phase's max over dims replaced by a log-sum-exp.

    Args:
      bw_gbps: [D] bandwidths (GB/s).
      p: the problem.
      temperature: [] smoothing relative to each phase's time (0 < temperature).

    Returns:
      [] sum_k w_k smax_k >= comm_time_s, within temperature * log(D) relatively.
    """
    used = p.traffic_gb > 0
    t = model.dim_times_s(bw_gbps, p)  # [K, D], 0 where unused (double where inside)
    m = jax.lax.stop_gradient(jnp.max(t, axis=-1, initial=0.0))  # [K]
    tau = temperature * m
    safe_tau = jnp.where(tau > 0, tau, 1.0)
    z = jnp.where(used, (t - m[:, None]) / safe_tau[:, None], 0.0)
    s = jnp.sum(jnp.where(used, jnp.exp(z), 0.0), axis=-1)  # >= 1 where a dim is used
    lse = jnp.where(tau > 0, m + tau * jnp.log(jnp.where(s > 0, s, 1.0)),
                    jnp.max(t, axis=-1, initial=0.0))
    # General model rows (problem.ModelRows): the same smoothing of each piece's max, with
    # the exact piece times (held fixed) as the shifts.
    num = p.piece_weight.shape[0]
    top = jax.lax.stop_gradient(model.piece_times_s(bw_gbps, p))  # [J]
    tau_j = temperature * jnp.abs(top)
    safe_j = jnp.where(tau_j > 0, tau_j, 1.0)

    def smooth_max(vals, _):
        zr = jnp.where(p.row_on, (vals - top[p.row_piece]) / safe_j[p.row_piece], -jnp.inf)
        sj = jax.ops.segment_sum(jnp.exp(zr), p.row_piece, num_segments=num)
        return top + tau_j * jnp.log(jnp.where(sj > 0, sj, 1.0))

    lse_j = jnp.where(tau_j > 0, model.piece_times_s(bw_gbps, p, smooth_max),
                      model.piece_times_s(bw_gbps, p))
    return jnp.sum(p.weight * lse) + jnp.sum(p.piece_weight * lse_j) + p.comm_const_s


# ----------------------------------------------------------------------------------------
# Projection onto box ∩ {sum row}


def sum_row(p: Problem):
    """Finds the total-bandwidth row among a_eq / a_in (inside jit; no host sync).

    Returns:
      (has, is_eq, total, eq_mask [E], in_mask [I]): whether a row proportional to all ones
      with positive entries exists (equality rows preferred), whether it is an equality,
      the total it imposes on sum(bw) (GB/s), and one-hot masks of the chosen row.
    """

    # Dims fixed by the constraints (batch padding fixes its dims at lo = upper) may have a
    # zero coefficient in the total row: they hold their value and add it to the total.
    fixed = (p.lo_tight | p.hi_tight) & (p.upper - p.lo <= _ONES_TOL * jnp.maximum(p.upper, 1))

    def row_mean(a):
        cnt = jnp.sum(a != 0, axis=1)
        return jnp.sum(a, axis=1) / jnp.where(cnt > 0, cnt, 1)

    def ones_rows(a):
        if not a.shape[1]:
            return jnp.zeros(a.shape[:1], bool)
        mean = row_mean(a)
        same = (jnp.abs(a - mean[:, None]) <= _ONES_TOL) | ((a == 0) & fixed[None, :])
        return (mean > 0) & jnp.all(same, axis=1)

    def first(mask):
        idx = jnp.argmax(mask) if mask.shape[0] else 0
        return mask & (jnp.arange(mask.shape[0]) == idx)

    eq_ones, in_ones = ones_rows(p.a_eq), ones_rows(p.a_in)
    has_eq = jnp.any(eq_ones)
    eq_mask = first(eq_ones)
    in_mask = first(in_ones) & ~has_eq
    has = has_eq | jnp.any(in_ones)

    def total(a, b, mask):
        if not a.shape[0]:
            return 0.0
        coef = jnp.sum(jnp.where(mask, row_mean(a), 0.0))
        rhs = jnp.sum(jnp.where(mask, b, 0.0))
        outside = jnp.sum(jnp.where(mask[:, None], (a == 0), False), axis=0) & fixed
        return rhs / jnp.where(coef > 0, coef, 1.0) + jnp.sum(jnp.where(outside, p.lo, 0.0))

    tot = jnp.where(has_eq, total(p.a_eq, p.b_eq, eq_mask), total(p.a_in, p.b_in, in_mask))
    return has, has_eq, tot, eq_mask, in_mask


def project_box_sum(y, lo, up, has, is_eq, total):
    """Euclidean projection of y onto {lo <= x <= up} ∩ {sum x == total (or <= if not is_eq)}.

    Without a sum row (``has`` False) it is the box projection. Assumes the set is non-empty
    (sum(lo) <= total, and sum(up) >= total for an equality), which `build_problem` ensures.

    Args:
      y: [D] point; lo, up: [D] finite bounds; has, is_eq: [] bool; total: [] scalar.

    Returns:
      [D] the projection.
    """
    box = jnp.clip(y, lo, up)  # the box projection (what optax.projections.projection_box does)

    def sum_at(tau):
        return jnp.sum(jnp.clip(y - tau, lo, up))

    # sum_at is non-increasing in tau; bracket the root of sum_at(tau) == total.
    t_lo = jnp.min(y - up)  # sum_at(t_lo) = sum(up) >= total
    t_hi = jnp.max(y - lo)  # sum_at(t_hi) = sum(lo) <= total

    def bisect(_, bracket):
        a, b = bracket
        mid = 0.5 * (a + b)
        big = sum_at(mid) > total
        return jnp.where(big, mid, a), jnp.where(big, b, mid)

    a, b = jax.lax.fori_loop(0, _BISECTION_STEPS, bisect, (t_lo, t_hi))
    tau = 0.5 * (a + b)
    # Exact tau on the active set identified by the bracket: free coordinates are those
    # strictly inside the box at both ends of it.
    free = (y - a < up) & (y - b > lo)
    fixed = jnp.where(y - b >= up, up, jnp.where(y - a <= lo, lo, 0.0))
    n_free = jnp.sum(free)
    tau_exact = (jnp.sum(jnp.where(free, y, 0.0)) - (total - jnp.sum(jnp.where(free, 0.0, fixed)))
                 ) / jnp.where(n_free > 0, n_free, 1)
    ok = (n_free > 0) & (tau_exact >= a) & (tau_exact <= b)
    tau = jnp.where(ok, tau_exact, tau)
    on_row = jnp.clip(y - tau, lo, up)
    need = has & (is_eq | (jnp.sum(box) > total))
    return jnp.where(need, on_row, box)


# ----------------------------------------------------------------------------------------
# Solver


def _lr_schedule(params: FirstOrderParams, num_steps: int):
    decay = FINAL_LR_FACTOR ** (1.0 / max(num_steps - 1, 1))
    return lambda count: params.learning_rate * decay ** count


@float64
def solve_first_order(
    p: Problem,
    params: FirstOrderParams | None = None,
    config: FirstOrderConfig = FirstOrderConfig(),
    price=0.0,
    start=None,
) -> FirstOrderResult:
    """Minimises the step time (+ ``price`` x network cost) with an Optax method, projection
    and augmented Lagrangian.

    Jitted (``config`` static); vmap it over problems, params and/or prices. Never raises
    for numerical trouble: see ``status``.

    Args:
      p: the problem (`problem.build_problem` / `problem.problem_from_arrays`).
      params: numeric knobs (`default_params()` if None).
      config: static settings.
      price: s per $ of network cost added to the objective (the cost levels of
        perf_per_cost; 0: the step time). ``lower_bound_s`` then bounds the minimum of
        step time + price x cost, and the status certifies that objective.
      start: [D] GB/s the first-order phase starts from (projected onto the box and the
        total row; default ``p.interior``): a warm start, e.g. the solution at a nearby
        price, with a smaller learning rate (see `continuation_params`).

    Returns:
      `FirstOrderResult`.

    Raises:
      ValueError: unknown ``config.method`` (at trace time).
    """
    if params is None:
        params = default_params(p.lo.dtype)
    make_optimizer(config.method, 1.0)  # validate before tracing
    start = p.interior if start is None else jnp.asarray(start, p.lo.dtype)
    return _solve_jit(p, params, config, price, start)


@functools.partial(jax.jit, static_argnames="config")
def _solve_jit(p: Problem, params: FirstOrderParams, config: FirstOrderConfig, price, start):
    return _solve(p, params, config, price, start)


def _solve(p: Problem, params: FirstOrderParams, config: FirstOrderConfig, price=0.0,
           start=None):
    dtype = p.lo.dtype
    price = jnp.asarray(price, dtype)
    start = p.interior if start is None else start
    n = config.num_steps
    scale = jnp.maximum(jnp.max(p.upper), 1e-300)
    # Used dims keep a tiny positive floor: at bw = 0 their time (and gradient) is infinite.
    used_dim = jnp.any(p.traffic_gb > 0, axis=0)
    up = jnp.maximum(p.upper, p.lo) / scale
    lo = jnp.minimum(jnp.maximum(p.lo / scale, jnp.where(used_dim, _FLOOR, 0.0)), up)
    has, is_eq, total, eq_mask, in_mask = sum_row(p)
    total = total / scale

    def project(y):
        return project_box_sum(y, lo, up, has, is_eq, total)

    def gradient_mapping(x, g):
        # (x - P(x - eta g)) / eta: the gradient with its components along the normals of
        # the active simple constraints removed. Adam rescales each coordinate, so it must
        # not see the component along the sum row (every partial derivative is negative: a
        # raw Adam step is ~ -lr * ones, which the projection then cancels entirely).
        eta = _MAPPING_STEP / jnp.maximum(jnp.max(jnp.abs(g)), 1e-300)
        return (x - project(x - eta * g)) / eta

    # Other rows, in scaled units: a @ x - b / scale.
    a_eq, b_eq = p.a_eq, p.b_eq / scale
    a_in, b_in = p.a_in, p.b_in / scale
    on_eq, on_in = ~eq_mask, ~in_mask

    x0 = project(start / scale)
    t_ref = model.comm_time_s(x0 * scale, p) + price * model.network_cost_usd(x0 * scale, p)
    t_ref = jnp.where(t_ref > 0, t_ref, 1.0)
    rho = params.penalty
    temp_decay = (FINAL_TEMPERATURE / params.temperature0) ** (1.0 / max(n - 1, 1))

    def lagrangian(x, temp, nu, lam):
        f = (smooth_comm_time_s(x * scale, p, temp)
             + price * model.network_cost_usd(x * scale, p)) / t_ref
        r_eq = jnp.where(on_eq, a_eq @ x - b_eq, 0.0)
        r_in = jnp.where(on_in, a_in @ x - b_in, 0.0)
        al_eq = nu @ r_eq + 0.5 * rho * jnp.sum(r_eq**2)
        shifted = jnp.maximum(lam / rho + r_in, 0.0)
        al_in = 0.5 * rho * jnp.sum(shifted**2 - (lam / rho) ** 2)
        return f + al_eq + al_in

    opt = make_optimizer(config.method, _lr_schedule(params, n))

    def body(state: _State, i):
        temp = params.temperature0 * temp_decay**i
        loss, g = jax.value_and_grad(lagrangian)(state.x, temp, state.nu, state.lam)
        g = gradient_mapping(state.x, g)
        upd, opt_state = opt.update(g, state.opt_state, state.x)
        x = project(_optax().apply_updates(state.x, upd))
        # Multiplier updates every al_every steps (method of multipliers).
        update = (i + 1) % config.al_every == 0
        r_eq = jnp.where(on_eq, a_eq @ x - b_eq, 0.0)
        r_in = jnp.where(on_in, a_in @ x - b_in, 0.0)
        nu = jnp.where(update, state.nu + rho * r_eq, state.nu)
        lam = jnp.where(update, jnp.maximum(state.lam + rho * r_in, 0.0), state.lam)
        return _State(x, opt_state, nu, lam), loss

    init = _State(x0, opt.init(x0), jnp.zeros_like(b_eq), jnp.zeros_like(b_in))
    final, losses = jax.lax.scan(body, init, jnp.arange(n, dtype=dtype))
    bw = final.x * scale
    viol_scale = jnp.maximum(jnp.sum(p.upper), 1e-300)
    if config.exact_step:
        ex = active_set.exact_step(p, bw, 0.1 * VIOLATION_TOL * viol_scale, price)
        bw, objective, viol, lb = ex.bw, ex.objective_s, ex.violation, ex.lb_s
    else:
        objective = active_set.objective_s(bw, p, price)
        viol, lb = model.max_violation(bw, p), jnp.asarray(-jnp.inf, dtype)
    # (+inf where the objective is: a used dim at bw <= 0, where a / bw has no meaning)
    step = jnp.where(jnp.isfinite(objective), model.step_time_s(bw, p), jnp.inf)
    inputs_finite = (
        jnp.all(jnp.isfinite(p.traffic_gb)) & jnp.all(jnp.isfinite(p.weight))
        & jnp.isfinite(p.compute_s) & jnp.all(jnp.isfinite(p.upper))
        & jnp.all(jnp.isfinite(p.lo))
    )
    finite = (inputs_finite & jnp.all(jnp.isfinite(bw)) & jnp.isfinite(objective)
              & jnp.isfinite(viol) & jnp.all(jnp.isfinite(losses)))
    gap = relative_gap(objective, lb)
    status = status_codes(True, finite, gap, jnp.maximum(viol, 0.0) / viol_scale)
    return FirstOrderResult(bw=bw, step_s=step, max_violation=viol, lower_bound_s=lb,
                            objective_s=objective, status=status.astype(jnp.int32),
                            losses=losses)
