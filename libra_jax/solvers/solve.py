"""Solvers: certified `perf` optimum, global `perf_per_cost` optimum, equal-split baseline.

perf (convex). One problem goes through the batch engine (`batch.solve_batch`, the
interior-point kernel of `ipm.py`) as a batch of one: single and batched solves are the same
computation. The kernel's multipliers give a Lagrangian lower bound in closed form
(`ipm.lagrangian_bound`), and where that does not certify the result the tangent-plane LP of
`certificate.py` does; any multipliers of the right signs give a valid bound (weak duality), so
the reported ``optimality_gap = (value - LB) / LB`` bounds (value - optimum) / optimum
whatever the iterate.

perf_per_cost (not convex). Let v(c) be the optimal step time with network cost <= c; it is
convex and non-increasing, and min_bw time x cost = min_c c v(c) over [c_min, c_perf] (least
feasible cost, cost of the perf optimum). Each perf solve at a cost level c_j also gives the
affine minorant v(c) >= LB_j - lam_j (c - c_j) (same multipliers, lam_j of the cost row), so
l(c) = max_j of these minorants underestimates v, and c l(c) is concave on each linear piece of
l: its minimum over [c_min, c_perf] is at a breakpoint, which gives a certified global lower
bound. Levels are added where that bound is lowest (a 1-D cutting-plane method), solved as one
vmapped batch per round, until the bound meets the best time x cost found.

With the Optax method the levels are prices instead of caps: the level lam minimises step time +
lam x cost over the problem's own constraints, whose certified lower bound L_lam gives the
minorant v(c) >= L_lam - lam c (weak duality with the cost row's multiplier fixed at lam; the
first-order phase cannot follow a tight cost cap, see the README). The prices form a
continuation: each first-order run starts from the previous solution (`first_order.
continuation_params`), first upwards from lam_0 = perf step / perf cost (the optimal price
step* / cost* is no smaller), then at the price interpolated for the envelope's lowest
breakpoint, until the same certificate closes.

Baseline. The equal split of the total bandwidth, or, where the constraints forbid it, its
Euclidean projection onto the feasible set (a QP, solved by the barrier method of
`barrier.py` and polished on the active set).
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.inputs.limits import LIMITS, as_int, as_real
from libra_jax.model import objective as model
from libra_jax.model.problem import Problem, with_cost_rates
from libra_jax.solvers import first_order
from libra_jax.solvers.barrier import BarrierConfig, BarrierData, barrier_minimize
from libra_jax.solvers.batch import (
    check_config,
    check_problem,
    pad_one,
    solve_batch,
    solve_stacked,
    stack,
)
from libra_jax.solvers.certificate import (
    GAP_TOL,
    VIOLATION_TOL,
    relative_gap,
    status_codes,
    tangent_lp_bound,
)
from libra_jax.solvers.compilation import stored, timed
from libra_jax.solvers.ipm import IpmConfig, equality_rows, linear_rows
from libra_jax.types import STATUS_NAMES, LibraInputError, Status, float64, show

#: Most cutting-plane rounds (or prices) of a perf_per_cost search, and most cost levels per
#: vmapped round (`solve`'s ``max_rounds`` and ``batch``).
MAX_ROUNDS = 10_000
MAX_LEVELS = 4096


@dataclasses.dataclass
class SolveResult:
    """Host-side result of one solve (numbers in the units of the names)."""

    objective: str
    status: str
    bandwidth_gbps: np.ndarray  # [D]
    step_time_ns: float
    comm_time_ns: float
    network_cost_usd: float | None
    time_x_cost: float | None  # ns x $
    optimality_gap: float | None  # certified bound on (value - optimum) / optimum
    max_violation: float  # largest violation / total bandwidth
    solve_seconds: float
    lower_bound: float | None = None  # certified lower bound of the objective (ns, ns x $, ns x W)
    compile_seconds: float | None = None  # JAX compilation during the call (not in solve_seconds)
    network_power_w: float | None = None  # with power rates (tiers with Energy)
    total_power_w: float | None = None  # NPUs x npu_w + network power
    energy_per_step_j: float | None = None  # step time x total power


@dataclasses.dataclass
class Baseline:
    bandwidth_gbps: np.ndarray
    step_time_ns: float
    comm_time_ns: float
    network_cost_usd: float | None
    time_x_cost: float | None
    projected: bool  # True when the equal split was infeasible and its projection is used


# ----------------------------------------------------------------------------------------
# Assembly of the barrier problem


def constraint_rows(p: Problem, cap, cap_on):
    """Inequality and equality rows on bw for the barrier method, which (unlike the kernel)
    does not eliminate fixed dims: the kernel's rows (`ipm.linear_rows`,
    `ipm.equality_rows`) plus every tight bound as an equality row.

    Inequalities: [a_in (non-tight) | cost cap | -bw <= -lo | bw <= hi];
    equalities:   [a_eq | tight a_in | tight lo | tight hi]. A fixed dim keeps its other
    bound as an inequality (the barrier's term count, hence its path, depends on it).
    """
    d = p.num_dims
    g, h, g_on, _ = linear_rows(p, cap, cap_on)
    e, f, e_on = equality_rows(p)
    hi_fin = jnp.isfinite(p.hi)
    g_on = jnp.concatenate([g_on[:-2 * d], ~p.lo_tight, hi_fin & ~p.hi_tight])
    eye = jnp.eye(d, dtype=p.lo.dtype)
    e = jnp.concatenate([e, eye, eye])
    f = jnp.concatenate([f, p.lo, jnp.where(hi_fin, p.hi, 0.0)])
    e_on = jnp.concatenate([e_on, p.lo_tight, p.hi_tight & hi_fin])
    return g, h, g_on, e, f, e_on


def project_affine(x, e, f, e_on):
    """Least-change correction of x so that the active equality rows hold exactly."""
    e = jnp.where(e_on[:, None], e, 0.0)
    r = jnp.where(e_on, e @ x - f, 0.0)
    return x - jnp.linalg.pinv(e) @ r


def violation_scale(p: Problem) -> float:
    """Total bandwidth used to make violations relative."""
    return float(max(np.sum(np.asarray(p.upper)), 1e-300))


@float64
def design_metrics(p: Problem, bw) -> tuple[float, float, float | None]:
    """(step time ns, communication time ns, network cost $ or None without a cost model)
    of the bandwidths ``bw`` [D] on problem ``p`` (host floats, evaluated in float64 whoever
    calls: `result_from_batch` runs outside the solvers' float64 calls)."""
    step, comm, cost = jax.device_get(_metrics_jit(np.asarray(bw, np.float64), p))
    return float(step) * 1e9, float(comm) * 1e9, float(cost) if p.has_cost else None


@stored
def _metrics_jit(bw, p: Problem):
    """(step s, communication s, cost $) in one program (eager, each of the model's
    operations would compile a program of its own)."""
    return model.step_time_s(bw, p), model.comm_time_s(bw, p), model.network_cost_usd(bw, p)


@stored
def _max_violation_jit(bw, p: Problem):
    return model.max_violation(bw, p)


def _result(p, objective, status, bw, gap, lb, rel_viol, seconds) -> SolveResult:
    bw = np.asarray(bw, np.float64)
    step, comm, cost = design_metrics(p, bw)
    return SolveResult(
        objective=objective,
        status=status,
        bandwidth_gbps=bw,
        step_time_ns=step,
        comm_time_ns=comm,
        network_cost_usd=cost,
        time_x_cost=None if cost is None else step * cost,
        optimality_gap=gap,
        max_violation=rel_viol,
        solve_seconds=seconds,
        lower_bound=lb,
    )


def result_from_batch(p: Problem, out, i: int, seconds: float = float("nan")) -> SolveResult:
    """The `SolveResult` of problem ``p``, entry ``i`` of a `batch.BatchResult` (perf)."""
    return _result(p, "perf", out.status[i], out.bandwidth_gbps[i],
                   float(out.optimality_gap[i]), float(out.lower_bound_ns[i]),
                   float(out.max_violation[i]), seconds)


OBJECTIVES = ("perf", "perf_per_cost", "perf_per_watt")


def with_power(result: SolveResult, power_rates_w_per_gbps, static_power_w: float = 0.0
               ) -> SolveResult:
    """``result`` with its power filled in: ``network_power_w = rates @ bw`` (W),
    ``total_power_w = static_power_w + network_power_w``, ``energy_per_step_j = step time x
    total power`` (J). ``power_rates_w_per_gbps`` None leaves them None."""
    if power_rates_w_per_gbps is None:
        return result
    rates = np.asarray(power_rates_w_per_gbps, np.float64)
    bw = np.asarray(result.bandwidth_gbps, np.float64)
    net = float(rates @ bw)
    total = float(static_power_w) + net
    return dataclasses.replace(result, network_power_w=net, total_power_w=total,
                               energy_per_step_j=result.step_time_ns * 1e-9 * total)


@float64
@timed
def solve(p: Problem, objective: str = "perf", config: IpmConfig = IpmConfig(),
          *, method: str = "ipm", max_rounds: int = 40, batch: int = 16,
          power_rates_w_per_gbps=None, static_power_w: float = 0.0) -> SolveResult:
    """Solves one problem on the host. Never raises for numerical trouble: see ``status``.

    ``solve_seconds`` is the call's wall time without JAX compilation, ``compile_seconds``
    the compilation (tracing, lowering, XLA, or loading from the persistent cache, which the
    first call of a process switches on: `compilation.default_cache`).

    Args:
      p: the problem (`problem.build_problem`).
      objective: "perf" (minimise step time), "perf_per_cost" (minimise time x cost) or
        "perf_per_watt" (minimise time x total power = energy per step: the perf_per_cost
        level search over network power, `problem.with_cost_rates`, with the constant
        ``static_power_w`` added to every level; ``lower_bound`` then in ns x W).
      power_rates_w_per_gbps: [D] W of network power per GB/s of each dimension
        (`cost.power_rates_w_per_gbps`), or None; with it the result reports
        ``network_power_w``, ``total_power_w`` and ``energy_per_step_j`` for every objective.
      static_power_w: power apart from the network (all NPUs), W.
      method: "ipm" (the interior-point kernel of the batch engine, `ipm.py`) or "optax"
        (first-order, `first_order.py`, then an exact step on the active set; perf_per_cost
        by a price continuation); both report a certified gap.
      config: interior-point loop settings.
      max_rounds: cutting-plane rounds for perf_per_cost (optax: prices added after the
        upward walk).
      batch: cost levels solved per vmapped round for perf_per_cost.

    Raises:
      LibraInputError: an argument of the wrong type or out of range (``p`` one `Problem`,
        ``config`` an `ipm.IpmConfig`, ``max_rounds`` in [0, `MAX_ROUNDS`], ``batch`` in
        [1, `MAX_LEVELS`]), unknown objective or method, or perf_per_cost without a cost
        model.
    """
    check_problem(p, "p")
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise LibraInputError(
            f"objective = {show(objective)}: unknown; choose 'perf', 'perf_per_cost' or "
            "'perf_per_watt'."
        )
    if not isinstance(method, str) or method not in ("ipm", "optax"):
        raise LibraInputError(f"solver.method = {show(method)}: choose 'ipm' or 'optax'.")
    config = check_config(config, IpmConfig)
    max_rounds = as_int(max_rounds, "max_rounds", 0, MAX_ROUNDS)
    batch = as_int(batch, "batch", 1, MAX_LEVELS)
    static_power_w = as_real(static_power_w, "static_power_w", 0.0, LIMITS.max_w,
                             unit=" (W)")
    power = None
    if power_rates_w_per_gbps is not None:
        power = np.asarray(with_cost_rates(p, power_rates_w_per_gbps).cost_rate)
    start = time.perf_counter()
    if objective == "perf_per_cost" and not p.has_cost:
        raise LibraInputError(
            "objective = perf_per_cost needs a cost model: set cost_model.file."
        )
    if objective == "perf_per_watt":
        if power is None:
            raise LibraInputError(
                "objective = perf_per_watt needs the network's power: a cost model whose "
                "tiers give Energy (e.g. cost_model.file=technologies.yaml).")
        if not np.any(power > 0) and static_power_w == 0.0:
            raise LibraInputError(
                "objective = perf_per_watt: the network draws no power (every tier's Energy "
                "is 0) and power.npu_w is 0, so energy per step is 0 for every design; give "
                "the tiers Energy or power.npu_w > 0.")
        if method == "optax":
            raise LibraInputError(
                "objective = perf_per_watt with solver.method=optax: not supported (the "
                "price continuation assumes no constant power term); use solver.method=ipm.")
    if objective == "perf" or method == "optax":
        # One problem, alone in its call (ipm: the single-problem program,
        # `batch_run._kernel_one`).
        out = solve_batch([p], method=method, config=config if method == "ipm" else None)
    else:
        # The level search then solves ``batch`` cost levels of p at a time, in the chunk
        # program of p's bucket: the perf solve runs in a chunk of that program too (copies
        # of p; their work is a few ms), so a first call compiles one kernel program, not two.
        out = solve_stacked(stack([p] * batch), config=config)
    perf = result_from_batch(p, out, 0)
    if objective == "perf":
        perf.solve_seconds = time.perf_counter() - start
        return with_power(perf, power, static_power_w)
    if objective == "perf_per_watt":
        pp = with_cost_rates(p, power)
        r = _perf_per_cost(pp, perf, config, start, max_rounds, batch, offset=static_power_w)
        out = _result(p, "perf_per_watt", r.status, r.bandwidth_gbps, r.optimality_gap,
                      r.lower_bound, r.max_violation, r.solve_seconds)
        return with_power(out, power, static_power_w)
    if method == "optax":
        return with_power(_perf_per_cost_priced(p, perf, start, max_rounds), power,
                          static_power_w)
    return with_power(_perf_per_cost(p, perf, config, start, max_rounds, batch), power,
                      static_power_w)


class _Search:
    """The state shared by both perf_per_cost searches: the affine minorants (lb_j, lam_j,
    c_j) of v(c) = min step time at cost <= c (the line lb_j - lam_j (c - c_j)), and the best
    evaluated point (product s x $, bw, violation of the problem's own rows, GB/s)."""

    def __init__(self, p: Problem, perf: SolveResult, offset: float = 0.0):
        self.p = p
        self.offset = float(offset)  # a constant added to the cost (perf_per_watt: NPU power)
        self.rates = np.asarray(p.cost_rate)
        self.c_min = float(self.rates @ np.asarray(p.min_cost_bw))
        self.bw_perf = np.asarray(perf.bandwidth_gbps)
        self.c_perf = float(self.rates @ self.bw_perf)
        self.perf_lb = perf.lower_bound / 1e9
        self.best = (perf.step_time_ns / 1e9 * (self.offset + self.c_perf), self.bw_perf,
                     perf.max_violation * violation_scale(p))
        self.pieces = [(self.perf_lb, 0.0, self.c_perf)]
        self.finite = perf.status != STATUS_NAMES[Status.NONFINITE]

    def degenerate(self) -> bool:
        """The perf optimum already has the least cost: nothing to search."""
        return self.c_perf - self.c_min <= 1e-12 * max(abs(self.c_perf), 1.0)

    def offer(self, bw, step_s) -> float:
        """Records an evaluated point (its violation is of the problem's own rows: the
        search's cap or price is not a constraint of perf_per_cost); returns its product."""
        prod = float(step_s) * (self.offset + float(self.rates @ bw))
        if prod < self.best[0]:
            self.best = (prod, bw, float(_max_violation_jit(np.asarray(bw, np.float64), self.p)))
        return prod

    def lower_envelope(self):
        """Breakpoints c of l(c) = max_j (lb_j - lam_j (c - c_j)) in [c_min, c_perf], and
        (offset + c) * l(c) there (on each linear piece of l, with slope <= 0, that product
        is concave in c, so its minimum is at one of them)."""
        lbs = np.array([q[0] for q in self.pieces])
        lams = np.array([q[1] for q in self.pieces])
        cs = np.array([q[2] for q in self.pieces])
        slope, icpt = -lams, lbs + lams * cs  # lines icpt + slope * c
        hull = _upper_envelope(slope, icpt)
        cand = [self.c_min, self.c_perf]
        for a, b in zip(hull[:-1], hull[1:]):
            c = (icpt[a] - icpt[b]) / (slope[b] - slope[a])
            if self.c_min < c < self.c_perf:
                cand.append(float(c))
        cand = np.unique(np.array(cand))
        ell = np.max(icpt[None, :] + slope[None, :] * cand[:, None], axis=1)
        return cand, (self.offset + cand) * ell

    def closed(self):
        """(breakpoints, c * l(c) there, the certified lower bound of min time x cost they
        give, whether it meets the best to 1e-9)."""
        cand, vals = self.lower_envelope()
        lb_total = float(np.min(vals))
        return cand, vals, lb_total, self.best[0] - lb_total <= 1e-9 * lb_total

    def result(self, lb_total, start):
        return _pc_result(self.p, self.best, lb_total, self.finite, start)


def _perf_per_cost(p, perf: SolveResult, config, start, max_rounds, batch, offset=0.0):
    search = _Search(p, perf, offset)
    c_min, c_perf, pieces = search.c_min, search.c_perf, search.pieces
    if search.degenerate():
        return search.result((offset + c_min) * search.perf_lb, start)

    spread = np.linspace(0.0, 1.0, batch + 1)[1:] ** 2
    levels = c_min + (c_perf - c_min) * spread
    evaluated = set()
    lb_total = (offset + c_min) * search.perf_lb
    for _ in range(max_rounds):
        levels = np.asarray(levels, np.float64)
        levels = np.maximum(levels, c_min + 1e-10 * (c_perf - c_min))
        caps = np.resize(levels, batch)
        out = solve_stacked(stack([p] * batch), caps=caps, config=config,
                            certify_on_host=False)
        for j in range(len(levels)):
            evaluated.add(float(levels[j]))
            if out.status[j] == STATUS_NAMES[Status.NONFINITE]:
                search.finite = False
                continue
            bw = np.asarray(out.bandwidth_gbps[j])
            search.offer(bw, float(out.step_time_ns[j]) / 1e9)
            lb_j, lam_j = tangent_lp_bound(p, bw, float(levels[j]))
            pieces.append((lb_j, lam_j, float(levels[j])))
        cand, vals, lb_total, done = search.closed()
        if done:
            break
        order = np.argsort(vals)
        nxt = [c for c in cand[order] if vals[np.searchsorted(cand, c)] < search.best[0]
               and all(abs(c - e) > 1e-13 * c_perf for e in evaluated)]
        if not nxt:
            break
        levels = np.array(nxt[:batch])
    return search.result(lb_total, start)


#: Price continuation (Optax): the upward walk starts at lam_0 / PRICE_RAMP (a jump from
#: the perf point straight to lam_0 loses the active set), doubles the price up to lam_0 / 2,
#: then multiplies it by PRICE_RATIO per step, for at most PRICE_STEPS steps, and stops once
#: the product has risen PRICE_PAST times in a row (past the optimum) or the cost reaches
#: its least value.
PRICE_RAMP = 64.0
PRICE_RATIO = 1.15
PRICE_STEPS = 80
PRICE_PAST = 3


@stored(static_argnames="config")
def _priced_jit(p: Problem, params, price, start, config):
    return jax.vmap(lambda prm: first_order.solve_first_order(p, prm, config, price, start))(
        params)


def _perf_per_cost_priced(p, perf: SolveResult, start, max_rounds):
    """perf_per_cost with the Optax method: the price continuation (module docstring)."""
    search = _Search(p, perf)
    if search.degenerate():
        return search.result(search.c_min * search.perf_lb, start)
    params = first_order.continuation_params()
    scale = violation_scale(p)
    solved = []  # (price, cost, bw) of every level
    # Padded to the batch engine's bucket (neutral entries; padded dims are fixed at 1 GB/s),
    # so that problems of one bucket share one compiled program.
    q = pad_one(p)
    d = p.lo.shape[-1]

    def level(price, x0):
        x0 = np.concatenate([x0, np.ones(q.lo.shape[-1] - d)])
        out = jax.device_get(_priced_jit(q, params, np.asarray(price, np.float64), x0,
                                         config=first_order.CONTINUATION_CONFIG))
        if not np.all(np.isfinite(out.bw)):
            search.finite = False
        # The best bound of the runs is valid; the point is the best feasible run's.
        bound = float(np.max(out.lower_bound_s))
        feasible = np.isfinite(out.objective_s) & (out.max_violation <= VIOLATION_TOL * scale)
        if not np.any(feasible):
            return None
        i = int(np.argmin(np.where(feasible, out.objective_s, np.inf)))
        bw = np.asarray(out.bw[i][:d], np.float64)
        cost = float(search.rates @ bw)
        if np.isfinite(bound):
            search.pieces.append((bound - price * cost, price, cost))
        solved.append((price, cost, bw))
        return search.offer(bw, float(out.step_s[i]))

    lam_0 = perf.step_time_ns / 1e9 / search.c_perf
    price = lam_0 / PRICE_RAMP
    x0, last, rising = search.bw_perf, np.inf, 0
    for _ in range(PRICE_STEPS):
        prod = level(price, x0)
        if prod is None:
            break
        rising = rising + 1 if prod > last else 0
        last, x0 = prod, solved[-1][2]
        if rising >= PRICE_PAST or solved[-1][1] <= search.c_min * (1 + 1e-9):
            break
        price *= 2.0 if price < 0.5 * lam_0 else PRICE_RATIO
    cand, vals, lb_total, done = search.closed()
    for _ in range(max_rounds):
        if done or not solved:
            break
        target = float(cand[int(np.argmin(vals))])
        price, x0 = _price_for_cost(solved, target)
        if any(abs(price - known) <= 1e-12 * price for known, _, _ in solved):
            break  # (a kink of v: this price's solutions span the gap's costs)
        if level(price, x0) is None:
            break
        cand, vals, lb_total, done = search.closed()
    return search.result(lb_total, start)


def _price_for_cost(solved, target):
    """The price whose solution should cost ``target`` (log-log interpolation between the
    solved levels around it; cost falls as the price rises), and the nearest solved point."""
    prices = np.array([q[0] for q in solved])
    costs = np.array([q[1] for q in solved])
    near = solved[int(np.argmin(np.abs(np.log(costs / target))))][2]
    above, below = costs >= target, costs <= target
    if not np.any(below):  # cheaper than every solution: raise the price
        return float(np.max(prices) * PRICE_RATIO), near
    if not np.any(above):
        return float(np.min(prices) / PRICE_RATIO), near
    ia = np.flatnonzero(above)[np.argmin(costs[above])]
    ib = np.flatnonzero(below)[np.argmax(costs[below])]
    if costs[ia] == costs[ib]:
        return float(prices[ia]), near
    t = np.log(target / costs[ib]) / np.log(costs[ia] / costs[ib])
    return float(np.exp(np.log(prices[ib]) + t * np.log(prices[ia] / prices[ib]))), near


def _upper_envelope(slope: np.ndarray, icpt: np.ndarray) -> list[int]:
    """Indices of the lines (icpt + slope * c) on the upper envelope, by increasing slope."""
    order = np.lexsort((icpt, slope))
    hull: list[int] = []
    for i in order:
        if hull and slope[hull[-1]] == slope[i]:
            hull.pop()  # same slope, lower or equal intercept (lexsort order)
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b is useless if the a-i intersection is left of the a-b intersection
            if (icpt[i] - icpt[a]) * (slope[b] - slope[a]) >= (icpt[b] - icpt[a]) * (
                slope[i] - slope[a]
            ):
                hull.pop()
            else:
                break
        hull.append(i)
    return hull


def _pc_result(p, best, lb_total, finite, start):
    prod, bw, viol = best
    gap = float(relative_gap(prod, lb_total))
    rel_viol = max(viol, 0.0) / violation_scale(p)
    status = STATUS_NAMES[Status(int(status_codes(True, finite, gap, rel_viol, GAP_TOL,
                                                  VIOLATION_TOL)))]
    return _result(p, "perf_per_cost", status, bw, gap, lb_total * 1e9, rel_viol,
                   time.perf_counter() - start)


# ----------------------------------------------------------------------------------------
# Baseline


def _dist_obj(z, target):
    return 0.5 * jnp.sum((z - target) ** 2) / jnp.maximum(jnp.sum(target**2), 1e-300)


@stored(static_argnames="config")
def _project_jit(p: Problem, target, config=BarrierConfig()):
    d = p.num_dims
    g, h, g_on, e, f, e_on = constraint_rows(p, 0.0, False)
    data = BarrierData(g=g, h=h, g_on=g_on, e=e, f=f, e_on=e_on,
                       epi_traffic=jnp.zeros((0, d), g.dtype),
                       epi_on=jnp.zeros((0, d), bool))
    z0 = project_affine(p.interior, e, f, e_on)
    res = barrier_minimize(_dist_obj, target, z0, data, config)
    lin = jnp.where(g_on, h - g @ res.z, jnp.inf)
    return res.z, lin, g, h, e, f, e_on


def _polish_projection(p, target, x, lin, g, h, e, f, e_on):
    """Exact projection onto the affine set of the constraints active at x, if consistent."""
    scale = violation_scale(p)
    act = np.asarray(lin) <= 1e-7 * scale
    rows = [np.asarray(g)[act], np.asarray(e)[np.asarray(e_on)]]
    rhs = [np.asarray(h)[act], np.asarray(f)[np.asarray(e_on)]]
    a = np.concatenate(rows)
    b = np.concatenate(rhs)
    if a.shape[0] == 0:
        y = target
    else:
        # min ||y - target||^2 s.t. a y = b  ->  y = target - a^+ (a target - b)
        y = target - np.linalg.pinv(a) @ (a @ target - b)
    viol = float(_max_violation_jit(np.asarray(y, np.float64), p))
    return y if viol <= 1e-12 * scale else x


@float64
def nearest_feasible(p: Problem, target, config: BarrierConfig = BarrierConfig()):
    """(bw [D], moved): ``target`` [D] GB/s if it meets ``p``'s constraints, else the
    feasible point nearest to it (a barrier projection polished on its active set)."""
    target = np.asarray(target, np.float64)
    if float(_max_violation_jit(target, p)) <= VIOLATION_TOL * violation_scale(p):
        return target, False
    x, lin, g, h, e, f, e_on = jax.device_get(_project_jit(p, target, config=config))
    return _polish_projection(p, target, np.asarray(x), lin, g, h, e, f, e_on), True


@float64
def equal_split(p: Problem, config: BarrierConfig = BarrierConfig()) -> Baseline:
    """The equal split of ``p.total_bw_gbps``, or the feasible point nearest to it.

    Raises:
      LibraInputError: ``p`` is not one `Problem`, or ``config`` not a `BarrierConfig`.
    """
    check_problem(p, "p")
    config = check_config(config, BarrierConfig)
    d = p.num_dims
    bw, projected = nearest_feasible(p, np.full(d, float(p.total_bw_gbps) / d), config)
    step, comm, cost = design_metrics(p, bw)
    return Baseline(
        bandwidth_gbps=np.asarray(bw, np.float64), step_time_ns=step, comm_time_ns=comm,
        network_cost_usd=cost, time_x_cost=None if cost is None else step * cost,
        projected=bool(projected),
    )
