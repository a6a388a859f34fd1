"""Serving: the bandwidths of a network that serves an LLM (prefill, decode, disaggregated KV
transfer; `libra_jax.inputs.generators.serving`), for tokens/s, per $ of network or per
joule, under latency SLOs, with a certified gap.

Every phase's time T_i(bw) (s; i = prefill, decode, KV transfer) is one `Problem`'s step time,
a convex function of the bandwidths in every timing model. The fleet's throughput is

* colocated (every replica prefills and decodes): a replica serves ``batch`` sequences; per
  ``batch`` requests it runs ``batch / prefill_batch`` prefills and ``output_len`` decode
  steps, so tokens/s = replicas * batch * O / ((batch / prefill_batch) T_p + O T_d);
* disaggregated: the prefill pool (R_p replicas, ``prefill_batch`` prompts a pass, the KV
  transfer of a pass overlapped with the next pass) admits R_p * pb / max(T_p, T_kv)
  requests/s, the decode pool R_d * batch / (O T_d); tokens/s = O * the smaller.

So seconds per token F(bw) = 1 / tokens/s = max_j A_j . T(bw), a maximum of non-negative
combinations of convex functions (one combination when colocated): convex. TTFT = T_p (+ T_kv
disaggregated) and TPOT = T_d are convex too, so the SLOs ``C . T(bw) <= b`` keep the
problem convex. Queueing is not modelled: TTFT is one prefill pass's time (and its transfer).

**Solving** (`min_seconds_per_token`). Without SLOs and with one combination, min F is one
`Problem` (the phases merged with the weights A, `multi.merge_problems`), solved and certified
by `solve.solve` like any training step. Otherwise by Lagrangian duality: for theta in the
simplex (one weight per combination) and mu >= 0 (one per SLO),

    g(theta, mu) = min_bw  theta . A T(bw) + mu . (C T(bw) - b)  <=  OPT,

and the inner minimum is again one merged `Problem` (weights theta A + mu C), whose certified
lower bound bounds g from below. Kelley's cutting plane maximises g: every design bw_i found
gives the cut g(lambda) <= L(bw_i, lambda), linear in lambda; the next lambda maximises the
cuts (an LP). The primal side is the master LP's dual: the best convex combination of the
designs found, sum_i pi_i bw_i, whose F and C T are at most the LP's value and b (T is convex)
and which satisfies every linear constraint (a convex set): a feasible design, evaluated
exactly. Gap = (F(design) - best dual bound) / best dual bound.

``perf_per_cost`` / ``perf_per_watt`` minimise F(bw) x network cost ($) or F x total power
(W), i.e. $ per token/s and J per token. Without SLOs and colocated, `solve.solve`'s own
certified level search runs on the merged problem. Otherwise a level search over the cost (or
power) cap c: h(c) = min F s.t. the SLOs and cost <= c (the solve above); a design of cost in
[c_k, c_k+1] has F >= h(c_k+1) >= LB(c_k+1), hence the product >= c_k LB(c_k+1), and the
minimum of those over the levels is a certified bound; the intervals holding it are refined.
h is convex (the value of a convex problem in the right-hand side c) and decreasing, so
beyond c_k it also lies above the secant of c_k-1 and c_k, taken conservatively through
(c_k-1, UB) and (c_k, LB): h(c) >= max(LB(c_k+1), LB(c_k) + s (c - c_k)) on the interval,
whose product with (offset + c) is smallest at c_k or where the two meet (`_bracket_bound`):
the bound's gap falls with the square of the interval, not linearly.

SLOs that no design within the constraints meets are errors before the optimisation
(`check_slos`): first an SLO below the physics of one pass (the phase's time at unlimited
bandwidth: compute plus the latency terms), then each SLO and both together against the
certified best reachable value.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Sequence

import jax.numpy as jnp
import numpy as np

from libra_jax.inputs.generators.serving import ServingPhases
from libra_jax.inputs.limits import LIMITS
from libra_jax.model import objective as model
from libra_jax.model.lp import linprog
from libra_jax.model.problem import ConstraintSpec, Problem
from libra_jax.solvers import solve as solve_mod
from libra_jax.solvers.certificate import VIOLATION_TOL, relative_gap
from libra_jax.studies.multi import merge_problems
from libra_jax.types import LibraInputError

SERVING_OBJECTIVES = ("serving_throughput", "perf_per_cost", "perf_per_watt")
#: Relative gap (best design vs best dual bound) at which the cutting plane stops.
KELLEY_TOL = 1e-5
MAX_KELLEY = 60
#: Rounds and levels per round of the cost / power level search.
LEVEL_ROUNDS, LEVELS = 12, 8
#: Relative gap at which the level search stops.
LEVEL_TOL = 1e-4
#: Bisection steps for the least cost (or power) at which the SLOs can be met.
BISECTIONS = 16


@dataclasses.dataclass(frozen=True)
class ServingForm:
    """F(bw) = max_j A[j] . T(bw) (s per token of the fleet) subject to C . T(bw) <= b, over
    the phase times T [P] (s) in the order of ``ServingPhases.workloads``."""

    a: np.ndarray  # [J, P]
    c: np.ndarray  # [K, P]
    b: np.ndarray  # [K] s
    slo_names: tuple[str, ...]  # [K] config keys, e.g. constraints.max_ttft_ms


def serving_form(phases: ServingPhases, max_ttft_ms: float | None = None,
                 max_tpot_ms: float | None = None) -> ServingForm:
    """The fleet's seconds per token and its SLO rows (module docstring)."""
    m, par = phases.model, phases.parallel
    o, bsz, pb = float(m.output_len), float(m.batch), float(m.prefill_batch)
    dis = par.disaggregated
    if not dis:
        tokens = par.replicas * bsz * o
        a = np.array([[bsz / pb / tokens, o / tokens]])
    else:
        rp, rd = float(par.prefill_replicas), float(par.decode_replicas)
        a = np.array([[1 / (o * rp * pb), 0.0, 0.0], [0.0, 1 / (rd * bsz), 0.0],
                      [0.0, 0.0, 1 / (o * rp * pb)]])
    rows, b, names = [], [], []
    if max_ttft_ms is not None:
        rows.append([1.0, 0.0, 1.0] if dis else [1.0, 0.0])
        b.append(max_ttft_ms * 1e-3)
        names.append("constraints.max_ttft_ms")
    if max_tpot_ms is not None:
        rows.append([0.0, 1.0, 0.0] if dis else [0.0, 1.0])
        b.append(max_tpot_ms * 1e-3)
        names.append("constraints.max_tpot_ms")
    p = a.shape[1]
    return ServingForm(a, np.array(rows, np.float64).reshape(-1, p), np.array(b, np.float64),
                       tuple(names))


def phase_times_s(bw, problems: Sequence[Problem]) -> np.ndarray:
    """[P] each phase's time (s) at ``bw`` (`solve.design_metrics`: one compiled program per
    problem shape; eager, the model's `lax.cond` traced and compiled again on every call)."""
    x = np.asarray(bw, np.float64)
    return np.array([solve_mod.design_metrics(p, x)[0] / 1e9 for p in problems])


@dataclasses.dataclass
class ServingSolve:
    """A serving optimum: the design, F(bw) (s per token) or its product with cost / power,
    the certified lower bound of that value, gap, constraint violations, solver work."""

    bandwidth_gbps: np.ndarray
    value: float
    lower_bound: float
    gap: float
    max_violation: float  # linear constraints, relative to the total bandwidth
    slo_violation: float  # max_k (C T - b)_k / b_k, <= 0 when met
    inner_solves: int
    seconds: float
    certified: bool  # every inner solve certified (its own status ok)


def _merged(problems, weights, rates, spec):
    scale = 1.0 / float(np.max(weights))
    return merge_problems(problems, np.asarray(weights) * scale, rates, spec), scale


def _viol(bw, problems) -> float:
    p = problems[0]
    return max(float(model.max_violation(jnp.asarray(bw), p)), 0.0) / \
        solve_mod.violation_scale(p)


def min_seconds_per_token(problems: Sequence[Problem], form: ServingForm, rates,
                          spec: ConstraintSpec) -> ServingSolve:
    """min F(bw) s.t. the SLOs and the problems' constraints (module docstring)."""
    start = time.perf_counter()
    a, c, b = form.a, form.c, form.b
    j, k = a.shape[0], c.shape[0]
    if j == 1 and k == 0:
        merged, scale = _merged(problems, a[0], rates, spec)
        r = solve_mod.solve(merged, "perf")
        bw = np.asarray(r.bandwidth_gbps, np.float64)
        value = float(np.max(a @ phase_times_s(bw, problems)))
        lb = (r.lower_bound / 1e9 / scale if r.lower_bound is not None else -math.inf)
        return ServingSolve(bw, value, lb, float(relative_gap(value, lb)), _viol(bw, problems),
                            -math.inf, 1, time.perf_counter() - start, r.status == "ok")
    mu_max = _mu_bound(problems, form, rates, spec) if k else np.zeros(0)
    lam = np.concatenate([np.full(j, 1.0 / j), np.zeros(k)])
    cuts, designs, times = [], [], []
    best_lb, certified = -math.inf, True
    best = None
    # A box trust region around the best dual point stabilises the cutting plane (plain
    # Kelley zig-zags and its primal combination stalls at ~0.5 % on disaggregated SLO cases).
    scale_l = np.concatenate([np.ones(j), mu_max])
    center, radius = lam, 0.5
    for it in range(MAX_KELLEY):
        theta, mu = lam[:j], lam[j:]
        weights = theta @ a + mu @ c
        merged, scale = _merged(problems, weights, rates, spec)
        r = solve_mod.solve(merged, "perf")
        certified &= r.status == "ok"
        bw = np.asarray(r.bandwidth_gbps, np.float64)
        t = phase_times_s(bw, problems)
        if r.lower_bound is not None and math.isfinite(r.lower_bound):
            lb_here = r.lower_bound / 1e9 / scale - float(mu @ b)
            if lb_here > best_lb:
                best_lb, center = lb_here, lam
                radius = min(1.0, 2.0 * radius)
            else:
                radius = max(radius * 0.5, 1e-6)
        designs.append(bw)
        times.append(t)
        cuts.append(np.concatenate([a @ t, c @ t - b]))
        # Primal master: the best combination of the designs found.
        combo = _primal_master(np.array(times), a, c, b)
        if combo is not None:
            x = np.asarray(combo @ np.array(designs), np.float64)
            tx = phase_times_s(x, problems)
            cand = (x, float(np.max(a @ tx)), _slo_violation(tx, form))
            if cand[2] <= 1e-9 and (best is None or cand[1] < best[1]):
                best = cand
        if k == 0 or np.all(c @ t <= b):
            fv = float(np.max(a @ t))
            if best is None or fv < best[1]:
                best = (bw, fv, _slo_violation(t, form))
        lam = _dual_master(np.array(cuts), j, k, mu_max, center, radius * scale_l)
        if best is not None and best_lb > 0 and best[1] - best_lb <= KELLEY_TOL * best_lb:
            break
    if best is None:
        bw, t = designs[-1], times[-1]
        best = (bw, float(np.max(a @ t)), _slo_violation(t, form))
    bw, value, slo = best
    return ServingSolve(bw, value, best_lb, float(relative_gap(value, best_lb)),
                        _viol(bw, problems), slo, it + 1, time.perf_counter() - start,
                        certified)


def _slo_violation(t, form: ServingForm) -> float:
    if not form.b.size:
        return -math.inf
    return float(np.max((form.c @ t - form.b) / form.b))


def _primal_master(times: np.ndarray, a, c, b):
    """pi [n] in the simplex minimising max_j sum_i pi_i A_j T_i s.t. sum_i pi_i C T_i <= b
    (None when infeasible)."""
    n = times.shape[0]
    j = a.shape[0]
    ta, tc = times @ a.T, times @ c.T  # [n, J], [n, K]
    cost = np.concatenate([np.zeros(n), [1.0]])
    a_ub = np.concatenate([np.concatenate([ta.T, -np.ones((j, 1))], axis=1),
                           np.concatenate([tc.T, np.zeros((tc.shape[1], 1))], axis=1)])
    # The SLO rows a hair inside (the LP's own tolerance would otherwise leave the combination
    # ~1e-9 over an SLO).
    b_ub = np.concatenate([np.zeros(j), b * (1.0 - 1e-8)])
    a_eq = np.concatenate([np.ones((1, n)), np.zeros((1, 1))], axis=1)
    res = linprog(cost, a_ub=a_ub, b_ub=b_ub, a_eq=a_eq, b_eq=np.ones(1),
                  bounds=[(0.0, None)] * n + [(None, None)], tolerance=1e-10)
    if res.status != 0:
        return None
    pi = np.maximum(res.x[:n], 0.0)
    return pi / pi.sum()


def _dual_master(cuts: np.ndarray, j: int, k: int, mu_max: np.ndarray,
                 center: np.ndarray, radius: np.ndarray):
    """lambda = (theta [J] in the simplex, mu [K] in [0, mu_max]), within ``radius`` [J + K] of
    ``center``, maximising min_i cuts_i . lambda (the center when the LP fails)."""
    n = cuts.shape[0]
    cost = np.concatenate([np.zeros(j + k), [-1.0]])
    a_ub = np.concatenate([-cuts, np.ones((n, 1))], axis=1)
    a_eq = np.concatenate([np.ones((1, j)), np.zeros((1, k + 1))], axis=1)
    hi = np.concatenate([np.full(j, np.inf), mu_max])
    bounds = [(max(0.0, float(c - r)), float(min(h, c + r)))
              for c, r, h in zip(center, radius, hi)] + [(None, None)]
    res = linprog(cost, a_ub=a_ub, b_ub=np.zeros(n), a_eq=a_eq, b_eq=np.ones(1),
                  bounds=bounds)
    if res.status != 0:
        return center
    return np.maximum(res.x[:j + k], 0.0)


def _mu_bound(problems, form: ServingForm, rates, spec) -> np.ndarray:
    """An upper bound of the optimal SLO multipliers (Slater): at the design x that meets the
    SLOs with the most slack, mu*_k <= (F(x) - F_min) / slack_k, with F_min a lower bound of
    the unconstrained minimum; x from the minimax of C T / b (`check_slos` found it < 1)."""
    slack_form = ServingForm(form.c / form.b[:, None], np.zeros((0, form.c.shape[1])),
                             np.zeros(0), ())
    s = min_seconds_per_token(problems, slack_form, rates, spec)
    t = phase_times_s(s.bandwidth_gbps, problems)
    slack = form.b - form.c @ t
    free = min_seconds_per_token(
        problems, ServingForm(form.a, np.zeros((0, form.a.shape[1])), np.zeros(0), ()),
        rates, spec)
    fx = float(np.max(form.a @ t))
    lb = max(free.lower_bound, 0.0)
    return 2.0 * (fx - lb) / np.maximum(slack, 1e-300) + 1e-300


def check_slos(problems: Sequence[Problem], form: ServingForm, rates,
               spec: ConstraintSpec) -> None:
    """Raises when no design within the constraints meets the SLOs (module docstring)."""
    if not form.b.size:
        return
    fast = np.full(problems[0].num_dims, LIMITS.max_gbps)
    floor = phase_times_s(fast, problems)
    for row, limit, name in zip(form.c, form.b, form.slo_names):
        phys = float(row @ floor)
        if phys > limit:
            raise LibraInputError(
                f"{name} = {limit * 1e3:g}: below the physics of one pass: even with "
                f"unlimited bandwidth it takes {phys * 1e3:.6g} ms (compute, memory reads and "
                "link latencies); no network meets it.")
    for row, limit, name in zip(form.c, form.b, form.slo_names):
        one = ServingForm(row[None, :], np.zeros((0, row.size)), np.zeros(0), ())
        s = min_seconds_per_token(problems, one, rates, spec)
        if s.lower_bound > limit:
            raise LibraInputError(
                f"{name} = {limit * 1e3:g}: no design within the constraints meets it; the "
                f"best reachable is {s.value * 1e3:.6g} ms (certified >= "
                f"{s.lower_bound * 1e3:.6g} ms). Relax it or raise the budget.")
    if form.b.size > 1:
        both = ServingForm(form.c / form.b[:, None], np.zeros((0, form.c.shape[1])),
                           np.zeros(0), ())
        s = min_seconds_per_token(problems, both, rates, spec)
        if s.lower_bound > 1.0:
            t = phase_times_s(s.bandwidth_gbps, problems)
            got = ", ".join(f"{n} {v * 1e3:.6g} ms" for n, v in zip(form.slo_names, form.c @ t))
            raise LibraInputError(
                f"{', '.join(form.slo_names)}: each can be met, but no design within the "
                f"constraints meets them together; the closest is {got} "
                f"({(s.value - 1) * 100:.3g}% over the tighter one at best, certified >= "
                f"{(s.lower_bound - 1) * 100:.3g}%).")


def merged_problem(problems, form: ServingForm, rates, spec):
    """The phases merged with the weights of F's combinations summed (F itself when there is
    one combination), scaled to a largest weight of 1: (problem, scale)."""
    return _merged(problems, form.a.sum(axis=0), rates, spec)


def merged_product(problems, form: ServingForm, rates, spec, objective: str,
                   power=None) -> ServingSolve:
    """min F x cost (or F x total power) of a colocated fleet without SLOs: `solve.solve`'s
    certified level search on the merged problem."""
    start = time.perf_counter()
    merged, scale = merged_problem(problems, form, rates, spec)
    kw = {} if power is None else dict(power_rates_w_per_gbps=power[0],
                                       static_power_w=power[1])
    r = solve_mod.solve(merged, objective, **kw)
    bw = np.asarray(r.bandwidth_gbps, np.float64)
    f = float(np.max(form.a @ phase_times_s(bw, problems)))
    if objective == "perf_per_cost":
        value = f * float(np.asarray(rates) @ bw)
    else:
        value = f * (float(power[0] @ bw) + power[1])
    lb = r.lower_bound / 1e9 / scale if r.lower_bound is not None else -math.inf
    return ServingSolve(bw, value, lb, float(relative_gap(value, lb)), _viol(bw, problems),
                        -math.inf, 1, time.perf_counter() - start, r.status == "ok")


def _feasible_at(problems, form: ServingForm, rates, spec):
    """Whether the SLOs can be met within ``spec``: True, False (certified) or None."""
    if not form.b.size:
        return True
    both = ServingForm(form.c / form.b[:, None], np.zeros((0, form.c.shape[1])),
                       np.zeros(0), ())
    s = min_seconds_per_token(problems, both, rates, spec)
    if s.lower_bound > 1.0:
        return False
    return True if s.value <= 1.0 else None


def product_floor(problems, form: ServingForm, rates, spec, objective: str,
                  power=None) -> float:
    """A certified lower bound of min F x cost (or F x total power) over every design:
    F >= A_j . T for each combination j, so the product is at least each
    min_bw (A_j . T)(bw) x cost(bw), a single-problem `solve.solve` level search."""
    best = 0.0
    for row in form.a:
        one = ServingForm(row[None, :], np.zeros((0, row.size)), np.zeros(0), ())
        s = merged_product(problems, one, rates, spec, objective, power)
        best = max(best, s.lower_bound)
    return best


def _bracket_bound(offset: float, cm: float | None, c0: float, c1: float, sm, s0,
                   lb1: float) -> float:
    """A lower bound of (offset + c) h(c) over c in [c0, c1] (module docstring): h >= lb1
    there, and h >= LB(c0) + s (c - c0) with s the conservative secant slope from (cm, UB(cm))
    when both cm and c0 were solved."""
    base = (offset + c0) * lb1
    if (sm is None or s0 is None or not math.isfinite(lb1) or c1 <= c0
            or not sm.slo_violation <= 1e-9):  # sm.value an upper bound of h(cm)
        return base
    lb0 = max(s0.lower_bound, 0.0)
    slope = (lb0 - sm.value) / (c0 - cm)
    if not slope < 0:
        return base
    cross = c0 + (lb1 - lb0) / slope  # where the secant falls to lb1
    if cross >= c1:  # the secant stays above lb1: a concave product, least at an end
        return max(base, min((offset + c0) * lb0,
                             (offset + c1) * (lb0 + slope * (c1 - c0))))
    return max(base, min((offset + c0) * lb0, (offset + max(cross, c0)) * lb1))


def level_search(build, form: ServingForm, rates, rates_fn, offset: float,
                 lo: float, hi: float, floor: float) -> ServingSolve:
    """min F(bw) x (offset + rates_fn(bw)) by a level search over caps c on rates_fn(bw)
    in [lo, hi] (module docstring; hi: rates_fn at the uncapped optimum of F, so F cannot
    fall beyond it). ``build(cap)`` returns (problems, spec) with the cap added; ``rates``
    are the cost rates the problems are built with. Caps below max(lo, hi / 1e3) are not
    solved: ``floor`` (`product_floor`) bounds the designs there."""
    start = time.perf_counter()
    solved: dict[float, ServingSolve | None] = {}
    inner, certified = 0, True
    lo = max(lo, hi * 1e-3)
    if form.b.size:
        # The SLOs bound the cost from below: bisect (in log scale) for the largest cap at
        # which they certainly cannot be met; no design is cheaper.
        a, b = hi * 1e-9, hi
        for _ in range(BISECTIONS):
            mid = math.sqrt(a * b)
            problems, spec = build(mid)
            if _feasible_at(problems, form, rates, spec) is False:
                a = mid
            else:
                b = mid
        solved[a] = None
        lo, floor = b, math.inf
    levels = sorted({float(x) for x in np.geomspace(lo, hi, LEVELS)} | {lo, hi})

    def bounds():
        caps = sorted(solved)
        out = []
        for i, c0 in enumerate(caps):
            c1 = caps[i + 1] if i + 1 < len(caps) else c0
            s1 = solved[c1]
            lb1 = math.inf if s1 is None else max(s1.lower_bound, 0.0)
            left = (None if i == 0 else solved[caps[i - 1]]), solved[c0]
            out.append(_bracket_bound(offset, caps[i - 1] if i else None, c0, c1, *left, lb1))
        return caps, out

    for _ in range(LEVEL_ROUNDS):
        for cap in levels:
            if cap in solved:
                continue
            problems, spec = build(cap)
            ok = _feasible_at(problems, form, rates, spec)
            if ok is False:
                solved[cap] = None
                continue
            s = min_seconds_per_token(problems, form, rates, spec)
            solved[cap] = s
            inner += s.inner_solves
            certified &= s.certified and ok is True
        caps, prods = bounds()
        worst = int(np.argmin(prods))
        ub = min((x.value * (offset + rates_fn(x.bandwidth_gbps)) for x in solved.values()
                  if x is not None and x.slo_violation <= 1e-9), default=math.inf)
        lb = min(min(prods), floor)
        if worst >= len(caps) - 1 or (lb > 0 and ub - lb <= LEVEL_TOL * lb):
            break
        levels = [float(x) for x in np.linspace(caps[worst], caps[worst + 1], 4)[1:-1]]
    caps, prods = bounds()
    found = [(s.value * (offset + rates_fn(s.bandwidth_gbps)), s) for s in solved.values()
             if s is not None and s.slo_violation <= 1e-9]
    if not found:
        raise LibraInputError("no design within the constraints meets the SLOs at any "
                              "cost level searched.")
    value, s = min(found, key=lambda x: x[0])
    lb = float(min(min(prods), floor))
    return ServingSolve(s.bandwidth_gbps, value, lb, float(relative_gap(value, lb)),
                        s.max_violation, s.slo_violation, inner,
                        time.perf_counter() - start, certified)
