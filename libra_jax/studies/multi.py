"""Multi-workload optimisation: one network (one bandwidth vector) shared by several workloads.

Given workloads i = 1..N on the same network and constraints, with weights w_i >= 0, the
objectives are

* ``sum_time``        minimise sum_i w_i step_i(bw)            (LIBRA's multi-workload design,
                      which is the unweighted case w_i = 1);
* ``sum_time_x_cost`` minimise cost(bw) * sum_i w_i step_i(bw);
* ``worst_slowdown``  minimise max_i step_i(bw) / own_i, own_i = workload i's own optimal
                      step time (a robust design; the weights play no part).

The first two are exact reductions to one problem: since
step_i(bw) = compute_i + sum_{k in i} weight_k max_d traffic_kd / bw_d,

    sum_i w_i step_i(bw) = sum_i w_i compute_i + sum_{all phases k} (w_i weight_k) max_d ...

which is the step time of ONE `Problem` with every workload's phases (identical phases merged,
weights summed) and compute sum_i w_i compute_i (`merge_problems`). `solve.solve` on it with
``perf`` / ``perf_per_cost`` gives the certified optimum.

The worst slowdown is solved in epigraph form over z = (bw [D], s, t [K]) (K distinct phases of
all workloads) by `barrier.barrier_minimize`: minimise s subject to
(compute_i + sum_k W_ik t_k) / own_i <= s for every workload, t_k >= traffic_kd / bw_d, and the
problem's own rows. (The s column sits between bw and t as a dimension no phase uses, so the
barrier's bw / t split and its pinning of traffic-free phases leave it alone.) Certificate, by
weak duality: for any theta in the simplex,
min_bw max_i step_i / own_i >= min_bw sum_i theta_i step_i(bw) / own_i, a weighted-sum perf
problem; with theta the barrier multipliers of the workload rows (normalised), its certified
lower bound (`solve.solve`) is a lower bound of the robust optimum, and gap = (value - LB) / LB.
The own optima are those reported (each certified within its own gap of the exact one); the
slowdowns are measured against them.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.inputs.limits import LIMITS, as_list, as_str
from libra_jax.model import objective as model
from libra_jax.model.problem import (
    ConstraintSpec,
    ModelRows,
    Problem,
    check_spec,
    float_vector,
    merge_weighted_phases,
    problem_from_arrays,
)
from libra_jax.solvers import solve as solve_mod
from libra_jax.solvers.barrier import BarrierConfig, BarrierData, barrier_minimize
from libra_jax.solvers.batch import check_config, check_problem, solve_batch
from libra_jax.solvers.certificate import VIOLATION_TOL, relative_gap, status_codes
from libra_jax.solvers.compilation import stored
from libra_jax.types import STATUS_NAMES, LibraInputError, Status, float64, show

MULTI_OBJECTIVES = ("sum_time", "sum_time_x_cost", "worst_slowdown")
#: Largest weight of a workload (``weights``): LIMITS.max_coefficient, the largest number of a
#: linear combination the inputs may hold.
MAX_WEIGHT = LIMITS.max_coefficient
OBJECTIVE_UNITS = {"sum_time": "ns", "sum_time_x_cost": "ns*$", "worst_slowdown": "x"}


@dataclasses.dataclass
class WorkloadOutcome:
    """One workload under the shared design, its own optimum and the equal split (ns)."""

    name: str
    weight: float
    step_time_ns: float  # under the shared design
    own_optimum_step_time_ns: float  # its own perf optimum (solve.solve on its problem)
    equal_split_step_time_ns: float  # under the equal split (solve.equal_split)
    own_status: str = "ok"
    own_optimality_gap: float | None = None
    own_bandwidth_gbps: np.ndarray | None = None

    @property
    def slowdown(self) -> float:
        """Shared-design step time / own optimum (>= 1 up to the own optimum's gap)."""
        return self.step_time_ns / self.own_optimum_step_time_ns

    @property
    def speedup(self) -> float:
        """Equal-split step time / shared-design step time."""
        return self.equal_split_step_time_ns / self.step_time_ns


@dataclasses.dataclass
class MultiResult:
    """Result of `solve_multi` (host side)."""

    objective: str  # one of MULTI_OBJECTIVES
    status: str  # "ok" when certified (`certificate.status_codes`; own optima ok too)
    bandwidth_gbps: np.ndarray  # [D] the shared design
    objective_value: float  # ns (sum_time), ns*$ (sum_time_x_cost), ratio (worst_slowdown)
    lower_bound: float | None  # certified lower bound of objective_value (same unit)
    optimality_gap: float | None  # (value - LB) / LB
    max_violation: float  # largest violation / total bandwidth
    solve_seconds: float
    step_time_ns: float  # weighted sum of step times under the design
    comm_time_ns: float  # weighted sum of communication times under the design
    network_cost_usd: float | None
    time_x_cost: float | None  # network cost x weighted sum of step times (ns*$)
    workloads: list  # [N] WorkloadOutcome
    baseline: solve_mod.Baseline  # equal split, on the merged (weighted-sum) problem
    baseline_objective_value: float  # the objective at the equal split


# ----------------------------------------------------------------------------------------
# Combining problems


def check_weights(weights, n: int, field: str = "weights") -> np.ndarray:
    """[n] float64 weights (None -> ones): a list of numbers in [0, `MAX_WEIGHT`] (bools and
    strings are not numbers), at least one > 0; raises on a wrong length or a bad value."""
    out = float_vector(weights, n, field, 1.0,
                       f"there are {n} workloads (give one weight per workload, or null for "
                       "all 1)", lo=0.0, hi=MAX_WEIGHT, unit=" (LIMITS.max_coefficient)")
    if not np.any(out > 0):
        raise LibraInputError(
            f"{field} = {show(out.tolist())}: at least one weight must be > 0.")
    return out


def check_problems(problems, field: str = "problems") -> list[Problem]:
    """``problems`` as a list of single `Problem`s (a list or tuple; not a mapping, a string
    or one Problem)."""
    if isinstance(problems, Problem):
        raise LibraInputError(f"{field}: a Problem; expected a list of problems, one per "
                              "workload.")
    return [check_problem(p, f"{field}[{i}]") for i, p in enumerate(
        as_list(problems, field, what="a list of problems, one per workload"))]


def check_same_network(problems: Sequence[Problem]) -> None:
    """All problems must share the dimensions, constraints and cost rates."""
    problems = check_problems(problems)
    if not problems:
        raise LibraInputError("workloads: give at least one workload.")
    p0 = problems[0]
    fields = ("cost_rate", "lo", "hi", "a_eq", "b_eq", "a_in", "b_in")
    for i, p in enumerate(problems[1:], start=1):
        if p.num_dims != p0.num_dims:
            raise LibraInputError(
                f"workloads[{i}] has {p.num_dims} network dimensions but workloads[0] has "
                f"{p0.num_dims}: all workloads must run on the same network."
            )
        for name in fields:
            a, b = np.asarray(getattr(p, name)), np.asarray(getattr(p0, name))
            if a.shape != b.shape or not np.array_equal(a, b):
                raise LibraInputError(
                    f"workloads[{i}]: its constraints ({name}) differ from workloads[0]'s; "
                    "all workloads must share the network and its constraints."
                )


def weighted_arrays(problems: Sequence[Problem], weights) -> tuple[np.ndarray, np.ndarray, float]:
    """(traffic [K, D], weight [K], compute_s) of sum_i weights_i step_i (phases merged)."""
    w = np.asarray(weights, np.float64)
    traffic = np.concatenate([np.asarray(p.traffic_gb, np.float64) for p in problems])
    weight = np.concatenate(
        [wi * np.asarray(p.weight, np.float64) for wi, p in zip(w, problems)]
    )
    compute = float(sum(wi * float(p.compute_s) for wi, p in zip(w, problems)))
    t, k, _ = merge_weighted_phases(traffic, weight)
    return t, k, compute


def merge_problems(
    problems: Sequence[Problem],
    weights,
    cost_rates_usd_per_gbps: np.ndarray | None,
    spec: ConstraintSpec,
) -> Problem:
    """The `Problem` whose step time is sum_i weights_i step_i(bw) (same constraints).

    Args:
      problems: one per workload, built with the same network, ``spec`` and cost rates.
      weights: [N] >= 0.
      cost_rates_usd_per_gbps, spec: what the problems were built with.
    """
    problems = check_problems(problems)
    check_same_network(problems)
    w = check_weights(weights, len(problems))
    traffic, weight, compute = weighted_arrays(problems, w)
    return problem_from_arrays(
        traffic.reshape(-1, problems[0].num_dims), weight, compute,
        cost_rates_usd_per_gbps, spec, rows=weighted_rows(problems, w),
    )


def weighted_rows(problems: Sequence[Problem], weights) -> ModelRows | None:
    """The general model rows (`ModelRows`: model=pipelined's pieces) of
    sum_i weights_i step_i: every problem's rows that take part, its pieces' weights times
    weights_i, the pieces renumbered after the earlier problems' (nesting stays inside each
    problem), the constants weighted and summed; None when no problem has rows."""
    parts = []
    offset = 0
    for wi, p in zip(np.asarray(weights, np.float64), problems):
        on = np.asarray(p.row_on, bool)
        const0 = float(p.comm_const_s)
        if wi == 0 or (not on.any() and const0 == 0.0):
            continue
        pw = np.asarray(p.piece_weight, np.float64)
        parts.append((wi, pw, np.asarray(p.row_piece)[on] + offset,
                      np.asarray(p.row_const_s, np.float64)[on],
                      np.asarray(p.row_gb, np.float64)[on],
                      np.asarray(p.row_nest, np.float64)[on], offset, const0))
        offset += pw.shape[0]
    if not parts:
        return None
    nest = np.zeros((sum(x[2].shape[0] for x in parts), offset))
    r = 0
    for _, pw, piece, _, _, sub, off, _ in parts:
        nest[r:r + piece.shape[0], off:off + pw.shape[0]] = sub
        r += piece.shape[0]
    return ModelRows(
        weight=np.concatenate([wi * pw for wi, pw, *_ in parts]),
        piece=np.concatenate([x[2] for x in parts]).astype(np.int32),
        const_s=np.concatenate([x[3] for x in parts]),
        coef_gb=np.concatenate([x[4] for x in parts]),
        const0_s=float(sum(wi * c0 for wi, *_, c0 in parts)),
        nest=nest if nest.any() else None)


# ----------------------------------------------------------------------------------------
# Worst-case slowdown


class _SlowdownKernel(NamedTuple):
    """The barrier solve of the worst slowdown (`_slowdown_jit`)."""

    bw: jax.Array  # [D]
    theta: jax.Array  # [N] multipliers of the workload rows
    finite: jax.Array  # [] bool
    started_inside: jax.Array  # [] bool


class WorstSlowdown(NamedTuple):
    """`worst_slowdown`'s design and certificate (host side)."""

    bw: np.ndarray  # [D] GB/s
    value: float  # max_i step_i / own_i
    lower_bound: float  # certified lower bound of the optimal value (-inf for none)
    gap: float  # (value - lower_bound) / lower_bound (+inf for none)
    finite: bool
    started_inside: bool
    theta: np.ndarray  # [N] normalised workload multipliers


@stored(static_argnames="config")
def _slowdown_jit(p: Problem, traffic, wmat, compute, own, config=BarrierConfig()):
    """Epigraph barrier solve over z = (bw [D], s, t [K]); see the module docstring."""
    d = p.num_dims
    k, n = traffic.shape[0], wmat.shape[0]
    g, h, g_on, e, f, e_on = solve_mod.constraint_rows(p, 0.0, False)
    m = g.shape[0]
    dt = g.dtype
    g_all = jnp.concatenate([
        jnp.concatenate([g, jnp.zeros((m, 1 + k), dt)], axis=1),
        # (compute_i + W_i t) / own_i - s <= 0
        jnp.concatenate([jnp.zeros((n, d), dt), -jnp.ones((n, 1), dt), wmat / own[:, None]],
                        axis=1),
    ])
    h_all = jnp.concatenate([h, -compute / own])
    g_on_all = jnp.concatenate([g_on, jnp.ones((n,), bool)])
    e_all = jnp.concatenate([e, jnp.zeros((e.shape[0], 1 + k), dt)], axis=1)
    epi = jnp.concatenate([traffic, jnp.zeros((k, 1), dt)], axis=1)
    data = BarrierData(g=g_all, h=h_all, g_on=g_on_all, e=e_all, f=f, e_on=e_on,
                       epi_traffic=epi, epi_on=epi > 0)
    bw0 = solve_mod.project_affine(p.interior, e, f, e_on)
    used = traffic > 0
    times = jnp.where(used, traffic / jnp.where(used, bw0[None, :], 1.0), 0.0)
    t0 = 1.5 * jnp.max(times, axis=1, initial=0.0) + 1e-12
    s0 = 1.5 * jnp.max((compute + wmat @ t0) / own)
    z0 = jnp.concatenate([bw0, jnp.reshape(s0, (1,)), t0])

    def obj(z, _):
        return z[d]

    res = barrier_minimize(obj, jnp.zeros((), dt), z0, data, config)
    theta = res.lam[m:]
    return _SlowdownKernel(bw=res.z[:d], theta=theta, finite=res.finite,
                           started_inside=res.started_inside)


def _slowdowns(bw, problems, own_s) -> np.ndarray:
    bw = jnp.asarray(bw)
    return np.array([float(model.step_time_s(bw, p)) / o for p, o in zip(problems, own_s)])


@float64
def worst_slowdown(problems: Sequence[Problem], own_s, cost_rates_usd_per_gbps, spec,
                   config: BarrierConfig = BarrierConfig()):
    """Minimises max_i step_i(bw) / own_s[i] with a certified lower bound.

    Returns:
      `WorstSlowdown`.
    """
    own_s = np.asarray(own_s, np.float64)
    d = problems[0].num_dims
    traffic_all = np.concatenate([np.asarray(p.traffic_gb, np.float64) for p in problems])
    ones = np.concatenate([np.asarray(p.weight, np.float64) for p in problems])
    owner = np.concatenate([np.full(p.traffic_gb.shape[0], i) for i, p in enumerate(problems)])
    traffic, _, index = merge_weighted_phases(traffic_all, ones)
    wmat = np.zeros((len(problems), traffic.shape[0]))
    ok = index >= 0
    np.add.at(wmat, (owner[ok], index[ok]), ones[ok])
    compute = np.array([float(p.compute_s) for p in problems])
    out = jax.device_get(_slowdown_jit(
        problems[0], np.asarray(traffic.reshape(-1, d), np.float64),
        np.asarray(wmat, np.float64), compute, np.asarray(own_s, np.float64), config=config,
    ))
    bw = np.asarray(out.bw, np.float64)
    finite = bool(out.finite) and bool(np.all(np.isfinite(bw)))
    value = float(np.max(_slowdowns(bw, problems, own_s))) if finite else math.inf
    theta = np.maximum(np.asarray(out.theta, np.float64), 0.0)
    lb, gap = -math.inf, math.inf
    if finite and np.all(np.isfinite(theta)) and theta.sum() > 0:
        theta = theta / theta.sum()
        scale = float(np.max(own_s))
        weights = theta * scale / own_s  # sum_i theta_i step_i / own_i, times scale
        lb_problem = merge_problems(problems, weights, cost_rates_usd_per_gbps, spec)
        r = solve_mod.solve(lb_problem, "perf")
        if r.lower_bound is not None and math.isfinite(r.lower_bound):
            lb = r.lower_bound / 1e9 / scale
        # The weighted-sum design is feasible too: keep it if it is better.
        bw_alt = np.asarray(r.bandwidth_gbps, np.float64)
        if np.all(np.isfinite(bw_alt)):
            alt = float(np.max(_slowdowns(bw_alt, problems, own_s)))
            viol = float(model.max_violation(jnp.asarray(bw_alt), problems[0]))
            if alt < value and viol <= VIOLATION_TOL * solve_mod.violation_scale(problems[0]):
                bw, value = bw_alt, alt
        gap = float(relative_gap(value, lb))
    return WorstSlowdown(bw=bw, value=value, lower_bound=lb, gap=gap, finite=finite,
                         started_inside=bool(out.started_inside), theta=theta)


# ----------------------------------------------------------------------------------------
# Driver


@float64
def solve_multi(
    problems: Sequence[Problem],
    names: Sequence[str],
    weights,
    objective: str,
    cost_rates_usd_per_gbps: np.ndarray | None,
    spec: ConstraintSpec,
    config: BarrierConfig = BarrierConfig(),
) -> MultiResult:
    """Solves the multi-workload problem and evaluates every workload.

    Args:
      problems: [N] per-workload problems (`problem.build_problem`, same network, constraints
        and cost rates).
      names: [N] workload names.
      weights: [N] >= 0 or None (all 1); unused by ``worst_slowdown``.
      objective: one of MULTI_OBJECTIVES.
      cost_rates_usd_per_gbps, spec: what the problems were built with.

    Raises:
      LibraInputError: bad objective or weights, problems on different networks, or
        ``sum_time_x_cost`` without a cost model.
    """
    start = time.perf_counter()
    if not isinstance(objective, str) or objective not in MULTI_OBJECTIVES:
        raise LibraInputError(
            f"multi_objective = {show(objective)}: unknown; choose one of "
            f"{', '.join(MULTI_OBJECTIVES)}."
        )
    problems = check_problems(problems)
    names = [as_str(n, f"names[{i}]", empty=True)
             for i, n in enumerate(as_list(names, "names", what="a list of workload names"))]
    if len(names) != len(problems):
        raise LibraInputError(
            f"names: {len(names)} names for {len(problems)} workloads; one name per workload "
            "is needed.")
    check_spec(spec)
    config = check_config(config, BarrierConfig)
    w = check_weights(weights, len(problems))
    check_same_network(problems)
    if objective == "sum_time_x_cost" and cost_rates_usd_per_gbps is None:
        raise LibraInputError(
            "multi_objective = sum_time_x_cost needs a cost model: set cost_model.file."
        )
    merged = merge_problems(problems, w, cost_rates_usd_per_gbps, spec)
    own_batch = solve_batch(problems)  # every workload's own optimum in one engine call
    own = [solve_mod.result_from_batch(p, own_batch, i) for i, p in enumerate(problems)]
    own_s = np.array([r.step_time_ns for r in own]) / 1e9
    scale = solve_mod.violation_scale(merged)

    if objective in ("sum_time", "sum_time_x_cost"):
        r = solve_mod.solve(merged, "perf" if objective == "sum_time" else "perf_per_cost")
        bw = np.asarray(r.bandwidth_gbps, np.float64)
        value = r.step_time_ns if objective == "sum_time" else r.time_x_cost
        lb, gap, viol = r.lower_bound, r.optimality_gap, r.max_violation
        inside = r.status != STATUS_NAMES[Status.INFEASIBLE]
        finite = r.status != STATUS_NAMES[Status.NONFINITE]
    else:
        out = worst_slowdown(problems, own_s, cost_rates_usd_per_gbps, spec, config)
        bw, value, lb, gap = out.bw, out.value, out.lower_bound, out.gap
        viol = max(float(model.max_violation(jnp.asarray(bw), merged)), 0.0) / scale
        inside, finite = out.started_inside, out.finite
    # An own optimum that is not certified leaves the slowdowns (hence the design) uncertified:
    # its gap counts as unknown.
    own_ok = all(r.status == STATUS_NAMES[Status.OK] for r in own)
    status = STATUS_NAMES[Status(int(status_codes(
        inside, finite, gap if own_ok and gap is not None else math.inf, viol)))]

    base = solve_mod.equal_split(merged, config)
    outcomes = []
    for name, wi, p, r in zip(names, w, problems, own):
        eq = solve_mod.equal_split(p, config)
        outcomes.append(WorkloadOutcome(
            name=name, weight=float(wi),
            step_time_ns=float(model.step_time_s(jnp.asarray(bw), p)) * 1e9,
            own_optimum_step_time_ns=r.step_time_ns,
            equal_split_step_time_ns=eq.step_time_ns,
            own_status=r.status, own_optimality_gap=r.optimality_gap,
            own_bandwidth_gbps=np.asarray(r.bandwidth_gbps),
        ))
    step, comm, cost = solve_mod.design_metrics(merged, bw)
    if objective == "sum_time":
        base_value = base.step_time_ns
    elif objective == "sum_time_x_cost":
        base_value = base.time_x_cost
    else:
        base_value = max(o.equal_split_step_time_ns / o.own_optimum_step_time_ns
                         for o in outcomes)
    return MultiResult(
        objective=objective, status=status, bandwidth_gbps=bw, objective_value=float(value),
        lower_bound=lb, optimality_gap=gap, max_violation=float(viol),
        solve_seconds=time.perf_counter() - start,
        step_time_ns=step, comm_time_ns=comm, network_cost_usd=cost,
        time_x_cost=None if cost is None else step * cost,
        workloads=outcomes, baseline=base, baseline_objective_value=float(base_value),
    )
