"""Solvers: certified `perf` optimum, global `perf_per_cost` optimum, equal-split baseline.

perf (convex). The epigraph problem of `barrier.py` is solved by an interior-point method in
float64. Its multipliers give a Lagrangian lower bound, evaluated in closed form with the box
[lo, upper] kept as the domain (``upper`` is the largest bandwidth the constraints allow):

    LB = compute + sum_d min_{x in [lo_d, upper_d]} (a_d / x + c_d x) - lam @ h - nu @ f,
    a_d = sum_k mu_kd traffic_kd  (mu_k rescaled so that sum_d mu_kd = weight_k),
    c   = G^T lam + E^T nu.

Any multipliers of the right signs give a valid bound (weak duality), so the reported
``optimality_gap = (value - LB) / LB`` bounds (value - optimum) / optimum whatever the iterate.

perf_per_cost (not convex). Let v(c) be the optimal step time with network cost <= c; it is
convex and non-increasing, and min_bw time x cost = min_c c v(c) over [c_min, c_perf] (least
feasible cost, cost of the perf optimum). Each perf solve at a cost level c_j also gives the
affine minorant v(c) >= LB_j - lam_j (c - c_j) (same multipliers, lam_j of the cost row), so
l(c) = max_j of these minorants underestimates v, and c l(c) is concave on each linear piece of
l: its minimum over [c_min, c_perf] is at a breakpoint, which gives a certified global lower
bound. Levels are added where that bound is lowest (a 1-D cutting-plane method), solved as one
vmapped batch per round, until the bound meets the best time x cost found.

Baseline. The equal split of the total bandwidth, or, where the constraints forbid it, its
Euclidean projection onto the feasible set (a QP, solved by the same barrier method and
polished on the active set).
"""

from __future__ import annotations

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax import objective as model
from libra_jax.barrier import BarrierConfig, BarrierData, barrier_minimize, empty_rows
from libra_jax.certificate import tangent_lp_bound
from libra_jax.problem import Problem
from libra_jax.types import STATUS_NAMES, LibraInputError, Status

jax.config.update("jax_enable_x64", True)

GAP_TOL = 1e-6  # relative optimality gap required for status ok
VIOLATION_TOL = 1e-9  # relative constraint violation required for status ok


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
    lower_bound: float | None = None  # certified lower bound of the objective (ns or ns x $)


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


def _rows(p: Problem, cap, cap_on):
    """Inequality and equality rows on bw (before the t columns are appended).

    Inequalities: [a_in (non-tight) | cost cap | -bw <= -lo | bw <= hi];
    equalities:   [a_eq | tight a_in | tight lo | tight hi].
    """
    d = p.num_dims
    eye = jnp.eye(d, dtype=p.lo.dtype)
    rate_norm = jnp.maximum(jnp.linalg.norm(p.cost_rate), 1e-300)
    hi_fin = jnp.isfinite(p.hi)
    hi_val = jnp.where(hi_fin, p.hi, 0.0)
    g = jnp.concatenate([p.a_in, (p.cost_rate / rate_norm)[None, :], -eye, eye])
    h = jnp.concatenate([p.b_in, jnp.reshape(cap / rate_norm, (1,)), -p.lo, hi_val])
    # All-zero rows (batch padding: 0 <= 1) take no part, so that padding changes nothing.
    g_on = jnp.concatenate(
        [~p.in_tight & jnp.any(p.a_in != 0, axis=1), jnp.reshape(cap_on, (1,)), ~p.lo_tight,
         hi_fin & ~p.hi_tight]
    )
    e = jnp.concatenate([p.a_eq, p.a_in, eye, eye])
    f = jnp.concatenate([p.b_eq, p.b_in, p.lo, hi_val])
    e_on = jnp.concatenate(
        [jnp.ones(p.b_eq.shape, bool), p.in_tight, p.lo_tight, p.hi_tight & hi_fin]
    )
    return g, h, g_on, e, f, e_on


def _project_affine(x, e, f, e_on):
    """Least-change correction of x so that the active equality rows hold exactly."""
    e = jnp.where(e_on[:, None], e, 0.0)
    r = jnp.where(e_on, e @ x - f, 0.0)
    return x - jnp.linalg.pinv(e) @ r


def _perf_obj(z, weight):
    return weight @ z[z.shape[0] - weight.shape[0]:]


def _normalised(mu, group, weight):
    """Rescales multipliers mu [R] >= 0 so that each group's sum is its weight (the
    stationarity of the Lagrangian in that group's epigraph variable)."""
    tot = jax.ops.segment_sum(mu, group, num_segments=weight.shape[0])
    scale = jnp.where(tot > 0, weight / jnp.where(tot > 0, tot, 1.0), 0.0)
    return mu * scale[group]


def _row_multipliers(p: Problem, mu_row):
    """General-row multipliers rescaled so that the Lagrangian is stationary in every piece
    variable: sum_{r in j} mu_r = w_j + sum_r mu_r nest_rj. Without nesting that is one
    rescaling per piece; with nesting the pieces are rescaled from the last down (a piece's
    rows nest only earlier pieces, so its requirement is final when its turn comes).
    Returns (mu [R], ok): ok is False when a piece that needs weight has no multiplier."""
    mu = jnp.where(p.row_on, mu_row, 0.0)
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

    nested = jnp.any(p.row_nest != 0)
    mu = jax.lax.cond(nested, lambda: jax.lax.fori_loop(0, num, body, mu),
                      lambda: _normalised(mu, p.row_piece, p.piece_weight))
    need = p.piece_weight + mu @ p.row_nest
    tot = jax.ops.segment_sum(mu, p.row_piece, num_segments=num)
    ok = jnp.all(jnp.abs(tot - need) <= 1e-12 * jnp.maximum(need, 1.0))
    return mu, ok


def _dual_bound(p: Problem, mu_epi, mu_row, lam_gen, g_gen, h_gen, nu, e, f):
    """Closed-form Lagrangian lower bound (s) of the step time; see the module docstring.

    With multipliers mu >= 0 of the epigraph rows (LIBRA pairs and general rows), scaled per
    epigraph variable to sum to its weight, the Lagrangian is
    compute + c0 + mu @ c + sum_d (a_d / bw_d + c_d bw_d) - lam @ h - nu @ f, minimised over
    the box [lo, upper] one dimension at a time.
    """
    tot = jnp.sum(mu_epi, axis=1, keepdims=True)
    mu = jnp.where(tot > 0, mu_epi * (p.weight[:, None] / jnp.where(tot > 0, tot, 1.0)), 0.0)
    mu_r, rows_ok = _row_multipliers(p, mu_row)
    a = jnp.sum(mu * p.traffic_gb, axis=0) + mu_r @ p.row_gb
    const = p.compute_s + p.comm_const_s + mu_r @ p.row_const_s
    c = g_gen.T @ lam_gen + e.T @ nu
    lo, up = p.lo, p.upper
    x_int = jnp.sqrt(jnp.where((a > 0) & (c > 0), a / jnp.where(c > 0, c, 1.0), 1.0))
    x = jnp.where(c > 0, jnp.where(a > 0, jnp.clip(x_int, lo, up), lo), up)
    term = jnp.where(a > 0, a / jnp.where(x > 0, x, 1.0), 0.0) + c * x
    term = jnp.where((a > 0) & (x <= 0), jnp.inf, term)
    return jnp.where(rows_ok, const + jnp.sum(term) - lam_gen @ h_gen - nu @ f, -jnp.inf)


def _inputs_finite(p: Problem) -> jax.Array:
    """True when the problem's numbers are finite (inf is allowed only in ``hi``)."""
    leaves = [p.traffic_gb, p.weight, p.compute_s, p.cost_rate, p.lo, p.upper, p.a_eq, p.b_eq,
              p.a_in, p.b_in, p.interior, p.piece_weight, p.row_const_s, p.row_gb,
              p.row_nest, p.comm_const_s]
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in leaves]))


def _perf_core(p: Problem, cap, cap_on, bw0, config: BarrierConfig):
    """One perf solve (optionally with network cost <= cap). Pure; jit/vmap friendly."""
    d, k = p.traffic_gb.shape[1], p.traffic_gb.shape[0]
    n_t = k + p.piece_weight.shape[0]  # epigraph variables: LIBRA phases, then pieces
    g, h, g_on, e, f, e_on = _rows(p, cap, cap_on)
    # With a cost cap below the interior point's cost, move towards the cheapest point until
    # the cost is halfway between the least cost and the cap (strictly inside both).
    c_int = model.network_cost_usd(bw0, p)
    c_min = model.network_cost_usd(p.min_cost_bw, p)
    target = 0.5 * (cap + c_min)
    theta = jnp.clip((c_int - target) / jnp.where(c_int > c_min, c_int - c_min, 1.0), 0.0, 1.0)
    bw0 = jnp.where(cap_on & (c_int >= cap), bw0 + theta * (p.min_cost_bw - bw0), bw0)
    bw0 = _project_affine(bw0, e, f, e_on)
    zeros = jnp.zeros((g.shape[0], n_t), g.dtype)
    data = BarrierData(
        g=jnp.concatenate([g, zeros], axis=1),
        h=h,
        g_on=g_on,
        e=jnp.concatenate([e, jnp.zeros((e.shape[0], n_t), e.dtype)], axis=1),
        f=f,
        e_on=e_on,
        epi_traffic=p.traffic_gb,
        epi_on=p.traffic_gb > 0,
        row_a=p.row_gb,
        row_c=p.row_const_s,
        row_t=k + p.row_piece,
        row_m=jnp.concatenate([jnp.zeros((p.row_nest.shape[0], k), p.row_nest.dtype),
                               p.row_nest], axis=1),
        row_on=p.row_on,
    )
    t0 = 1.5 * jnp.max(model.dim_times_s(bw0, p), axis=1, initial=0.0) + 1e-12
    # Pieces: above their largest row (rows may have negative constants, hence the abs).
    num = p.piece_weight.shape[0]

    def above(vals, _):  # each piece above its largest row, nested pieces included
        top = jax.ops.segment_max(jnp.where(p.row_on, vals, -jnp.inf), p.row_piece,
                                  num_segments=num)
        top = jnp.where(top == -jnp.inf, 0.0, top)
        return top + 0.5 * jnp.abs(top) + 1e-12

    tj = model.piece_times_s(bw0, p, above)
    weight = jnp.concatenate([p.weight, p.piece_weight])
    res = barrier_minimize(_perf_obj, weight, jnp.concatenate([bw0, t0, tj]), data, config)
    bw = res.z[:d]
    n_gen = p.a_in.shape[0] + 1  # user inequality rows and the cost cap
    lam_gen = res.lam[:n_gen]
    lb = _dual_bound(p, res.mu_epi, res.mu_row, lam_gen, g[:n_gen], h[:n_gen], res.nu, e, f)
    step = model.step_time_s(bw, p)
    rate_norm = jnp.maximum(jnp.linalg.norm(p.cost_rate), 1e-300)
    cap_viol = jnp.where(cap_on, (model.network_cost_usd(bw, p) - cap) / rate_norm, 0.0)
    viol = jnp.maximum(model.max_violation(bw, p), cap_viol)
    return dict(
        bw=bw, step_s=step, lb_s=lb,
        centred=res.centred,
        finite=res.finite & jnp.isfinite(step) & _inputs_finite(p),
        started_inside=res.started_inside | ~_inputs_finite(p),  # bad numbers: non-finite
        violation=viol, newton_steps=res.newton_steps,
    )


@functools.partial(jax.jit, static_argnames="config")
def _perf_jit(p, cap, cap_on, bw0, config=BarrierConfig()):
    return _perf_core(p, cap, cap_on, bw0, config)


@functools.partial(jax.jit, static_argnames="config")
def _perf_levels_jit(p, caps, config=BarrierConfig()):
    # lax.map rather than vmap: see batch.solve_stacked (batched LAPACK kernels deadlocked).
    return jax.lax.map(lambda c: _perf_core(p, c, True, p.interior, config), caps)


def _status(finite, gap, rel_viol, started_inside=True) -> Status:
    """ok means certified: finite, gap <= GAP_TOL and violation <= VIOLATION_TOL."""
    if not started_inside:
        return Status.INFEASIBLE
    if not finite:
        return Status.NONFINITE
    if gap is not None and gap <= GAP_TOL and rel_viol <= VIOLATION_TOL:
        return Status.OK
    return Status.NOT_CONVERGED


def _scale(p: Problem) -> float:
    """Total bandwidth used to make violations relative."""
    return float(max(np.sum(np.asarray(p.upper)), 1e-300))


def _result(p, objective, status, bw, gap, lb, rel_viol, seconds) -> SolveResult:
    bw = np.asarray(bw, np.float64)
    step = float(model.step_time_s(jnp.asarray(bw), p)) * 1e9
    comm = float(model.comm_time_s(jnp.asarray(bw), p)) * 1e9
    cost = float(model.network_cost_usd(jnp.asarray(bw), p)) if p.has_cost else None
    return SolveResult(
        objective=objective,
        status=STATUS_NAMES[status],
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
    status = next(code for code, name in STATUS_NAMES.items() if name == out.status[i])
    return _result(p, "perf", status, out.bandwidth_gbps[i], float(out.optimality_gap[i]),
                   float(out.lower_bound_ns[i]), float(out.max_violation[i]), seconds)


def _perf(p: Problem, config: BarrierConfig):
    out = jax.device_get(_perf_jit(p, 0.0, False, p.interior, config))
    # Both bounds are valid; keep the better finite one (a NaN must not win a comparison).
    bounds = [float(out["lb_s"]), tangent_lp_bound(p, out["bw"])[0]]
    lb = max([b for b in bounds if np.isfinite(b)], default=-np.inf)
    step = float(out["step_s"])
    gap = max(step - lb, 0.0) / lb if lb > 0 else float("inf")
    rel_viol = max(float(out["violation"]), 0.0) / _scale(p)
    status = _status(bool(out["finite"]), gap, rel_viol, bool(out["started_inside"]))
    return out, gap, lb, rel_viol, status


def solve(p: Problem, objective: str = "perf", config: BarrierConfig = BarrierConfig(),
          *, method: str = "barrier", max_rounds: int = 40, batch: int = 16) -> SolveResult:
    """Solves one problem on the host. Never raises for numerical trouble: see ``status``.

    Args:
      p: the problem (`problem.build_problem`).
      objective: "perf" (minimise step time) or "perf_per_cost" (minimise time x cost).
      method: "barrier" (Newton interior point) or "optax" (first-order, `first_order.py`,
        perf only); both report the certified gap of `certificate.tangent_lp_bound`.
      config: barrier loop settings.
      max_rounds: cutting-plane rounds for perf_per_cost.
      batch: cost levels solved per vmapped round for perf_per_cost.

    Raises:
      LibraInputError: unknown objective, or perf_per_cost without a cost model.
    """
    if objective not in ("perf", "perf_per_cost"):
        raise LibraInputError(
            f"objective = {objective!r}: unknown; choose 'perf' or 'perf_per_cost'."
        )
    if method not in ("barrier", "optax"):
        raise LibraInputError(f"solver.method = {method!r}: choose 'barrier' or 'optax'.")
    start = time.perf_counter()
    if method == "optax":
        if objective != "perf":
            raise LibraInputError("solver.method = 'optax' supports objective = perf only.")
        return _perf_optax(p, start)
    out, gap, lb, rel_viol, status = _perf(p, config)
    if objective == "perf":
        return _result(p, "perf", status, out["bw"], gap, lb * 1e9, rel_viol,
                       time.perf_counter() - start)
    if not p.has_cost:
        raise LibraInputError(
            "objective = perf_per_cost needs a cost model: set cost_model.file."
        )
    return _perf_per_cost(p, out, lb, config, start, max_rounds, batch)


def _perf_optax(p: Problem, start: float) -> SolveResult:
    from libra_jax.first_order import default_params, solve_first_order

    out = jax.device_get(solve_first_order(p, default_params()))
    bw = np.asarray(out.bw)
    finite = bool(np.all(np.isfinite(bw))) and int(out.status) != Status.NONFINITE
    lb = tangent_lp_bound(p, bw)[0] if finite else -np.inf
    step = float(model.step_time_s(jnp.asarray(bw), p))
    gap = max(step - lb, 0.0) / lb if lb > 0 else float("inf")
    rel_viol = max(float(model.max_violation(jnp.asarray(bw), p)), 0.0) / _scale(p)
    status = _status(finite, gap, rel_viol)
    return _result(p, "perf", status, bw, gap, lb * 1e9, rel_viol, time.perf_counter() - start)


def _perf_per_cost(p, perf_out, perf_lb, config, start, max_rounds, batch):
    rates = np.asarray(p.cost_rate)
    min_bw = np.asarray(p.min_cost_bw)
    c_min = float(rates @ min_bw)
    bw_perf = np.asarray(perf_out["bw"])
    c_perf = float(rates @ bw_perf)
    # Candidates: (product, bw, step) of every evaluated point; the perf optimum first.
    best = (float(perf_out["step_s"]) * c_perf, bw_perf, float(perf_out["violation"]))
    pieces = [(perf_lb, 0.0, c_perf)]  # affine minorants (lb_j, lam_j, c_j) of v(c)
    finite = bool(perf_out["finite"])
    if c_perf - c_min <= 1e-12 * max(abs(c_perf), 1.0):
        lb_total = c_min * perf_lb
        return _pc_result(p, best, lb_total, finite, start)

    def lower_envelope():
        """Breakpoints c of l(c) = max_j (lb_j - lam_j (c - c_j)) in [c_min, c_perf], and
        c * l(c) there (the minimum of c * l(c) is at one of them)."""
        lbs = np.array([q[0] for q in pieces])
        lams = np.array([q[1] for q in pieces])
        cs = np.array([q[2] for q in pieces])
        slope, icpt = -lams, lbs + lams * cs  # lines icpt + slope * c
        hull = _upper_envelope(slope, icpt)
        cand = [c_min, c_perf]
        for a, b in zip(hull[:-1], hull[1:]):
            c = (icpt[a] - icpt[b]) / (slope[b] - slope[a])
            if c_min < c < c_perf:
                cand.append(float(c))
        cand = np.unique(np.array(cand))
        ell = np.max(icpt[None, :] + slope[None, :] * cand[:, None], axis=1)
        return cand, cand * ell

    spread = np.linspace(0.0, 1.0, batch + 1)[1:] ** 2
    levels = c_min + (c_perf - c_min) * spread
    evaluated = set()
    lb_total = c_min * perf_lb
    for _ in range(max_rounds):
        levels = np.asarray(levels, np.float64)
        levels = np.maximum(levels, c_min + 1e-10 * (c_perf - c_min))
        caps = np.resize(levels, batch)
        out = jax.device_get(_perf_levels_jit(p, jnp.asarray(caps), config))
        for j in range(len(levels)):
            evaluated.add(float(levels[j]))
            if not bool(out["finite"][j]):
                finite = False
                continue
            bw = np.asarray(out["bw"][j])
            prod = float(out["step_s"][j]) * float(rates @ bw)
            if prod < best[0]:
                best = (prod, bw, float(out["violation"][j]))
            lb_j, lam_j = tangent_lp_bound(p, bw, float(levels[j]))
            pieces.append((lb_j, lam_j, float(levels[j])))
        cand, vals = lower_envelope()
        lb_total = float(np.min(vals))
        if best[0] - lb_total <= 1e-9 * lb_total:
            break
        order = np.argsort(vals)
        nxt = [c for c in cand[order] if vals[np.searchsorted(cand, c)] < best[0]
               and all(abs(c - e) > 1e-13 * c_perf for e in evaluated)]
        if not nxt:
            break
        levels = np.array(nxt[:batch])
    return _pc_result(p, best, lb_total, finite, start)


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
    gap = max(prod - lb_total, 0.0) / lb_total if lb_total > 0 else float("inf")
    rel_viol = max(viol, 0.0) / _scale(p)
    status = _status(finite, gap, rel_viol)
    return _result(p, "perf_per_cost", status, bw, gap, lb_total * 1e9, rel_viol,
                   time.perf_counter() - start)


# ----------------------------------------------------------------------------------------
# Baseline


def _dist_obj(z, target):
    return 0.5 * jnp.sum((z - target) ** 2) / jnp.maximum(jnp.sum(target**2), 1e-300)


@functools.partial(jax.jit, static_argnames="config")
def _project_jit(p: Problem, target, config=BarrierConfig()):
    d = p.num_dims
    g, h, g_on, e, f, e_on = _rows(p, 0.0, False)
    data = BarrierData(g=g, h=h, g_on=g_on, e=e, f=f, e_on=e_on,
                       epi_traffic=jnp.zeros((0, d), g.dtype),
                       epi_on=jnp.zeros((0, d), bool), **empty_rows(d, g.dtype))
    z0 = _project_affine(p.interior, e, f, e_on)
    res = barrier_minimize(_dist_obj, target, z0, data, config)
    lin = jnp.where(g_on, h - g @ res.z, jnp.inf)
    return res.z, lin, g, h, e, f, e_on


def _polish_projection(p, target, x, lin, g, h, e, f, e_on):
    """Exact projection onto the affine set of the constraints active at x, if consistent."""
    scale = _scale(p)
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
    viol = float(model.max_violation(jnp.asarray(y), p))
    return y if viol <= 1e-12 * scale else x


def equal_split(p: Problem, config: BarrierConfig = BarrierConfig()) -> Baseline:
    """The equal split of ``p.total_bw_gbps``, or the feasible point nearest to it."""
    d = p.num_dims
    target = np.full(d, float(p.total_bw_gbps) / d)
    viol = float(model.max_violation(jnp.asarray(target), p))
    projected = viol > VIOLATION_TOL * _scale(p)
    if projected:
        x, lin, g, h, e, f, e_on = jax.device_get(_project_jit(p, jnp.asarray(target), config))
        bw = _polish_projection(p, target, np.asarray(x), lin, g, h, e, f, e_on)
    else:
        bw = target
    step = float(model.step_time_s(jnp.asarray(bw), p)) * 1e9
    comm = float(model.comm_time_s(jnp.asarray(bw), p)) * 1e9
    cost = float(model.network_cost_usd(jnp.asarray(bw), p)) if p.has_cost else None
    return Baseline(
        bandwidth_gbps=np.asarray(bw, np.float64), step_time_ns=step, comm_time_ns=comm,
        network_cost_usd=cost, time_x_cost=None if cost is None else step * cost,
        projected=bool(projected),
    )
