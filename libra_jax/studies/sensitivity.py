"""Sensitivities of an optimum: what one more unit of each input is worth in step time.

At an optimal bandwidth vector x* of

    minimise   T(x) = compute + sum_j w_j max_{r in j} (c_r + sum_d a_rd / x_d)
    subject to lo <= x <= hi,  A_eq x == b_eq,  A_in x <= b_in   (total bandwidth, linear
               rows, cost budget rates @ x <= B)

the optimal value V depends on every input theta (a right-hand side, a price, a collective
size). By the envelope theorem, dV/dtheta is the derivative of the Lagrangian

    L = T(x; mu) + lam @ (A_in x - b_in) + nu @ (A_eq x - b_eq) + alpha @ (lo - x)
        + beta @ (x - hi),      T(x; mu) = compute + sum_r mu_r (c_r + sum_d a_rd / x_d)

in theta with x = x* and the optimal multipliers held fixed (mu_r >= 0, summing to w_j over
the rows of epigraph variable j; lam, alpha, beta >= 0). So no re-solve and no derivative of
x* is needed: dV/db = -lam (or -nu), dV/dlo = alpha, dV/dhi = -beta, a gift g of free
bandwidth to dimension d alone (T evaluated at x + g e_d) is worth
dT/dx_d = -sum_r mu_r a_rd / x_d^2, a price p moves the budget row by lam_B x* @ drates/dp,
and a collective size s moves the traffic: dV/ds = sum_r mu_r d(a_rd)/ds / x_d (``jax.grad``
of that Lagrangian term through `collectives.traffic_bytes`).

For ``perf_per_cost`` (minimise T(x) C(x), C = rates @ x) the same holds with the objective's
gradient C dT/dx + T rates in the stationarity, so derivatives of T C are C times those of T,
plus T x* @ drates/dp for a price.

The multipliers come from a linear program at x*: stationarity of L in x, each group's mu in
its simplex, and the complementary-slackness residual (sum of multiplier x slack; for rows,
mu_r (max_j - r)) minimised; at an optimal x that residual is 0 (for ``perf`` it is exactly
T(x*) minus the tangent-plane bound of `certificate.py`, whose LP this is, but with only the
problem's own constraints: the certificate's box [lo, upper] would let a redundant ``upper``
bound take a multiplier that belongs to the constraints implying it).

Kinks. Where the multipliers are not unique, V has one-sided derivatives
max / min over the optimal multipliers of dL/dtheta (right / left), and they can differ:
a tie that a perturbation breaks. For every multiplier-based number we solve the two LPs over
the optimal face; where right - left is not negligible the value is reported as null and both
sides under ``one_sided``. Not detected: a non-unique x* (the formulas assume x* unique; the
shipped Turing-NLG / ResNet-50 / DLRM 4D multiple_constraints optima are not unique, see
docs/sensitivities.md). Size derivatives need no such check in LIBRA's model: a phase's
traffic scales with its size on every dimension alike, so a tie between its dimensions stays
a tie and every split of mu gives the same number.

Units: the value is the step time in ns (``perf``) or step time x network cost in ns x $
(``perf_per_cost``, the ``time_x_cost`` of result.json); parameters are in GB/s, $,
$ per GB/s (prices) and bytes; each key says both, e.g. ``d_step_ns_d_total_bw_gbps`` is ns
of step time per GB/s of total bandwidth (negative: more bandwidth, faster step).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np

from libra_jax.inputs.cost import CostModel
from libra_jax.inputs.limits import as_instance
from libra_jax.inputs.topology import Network
from libra_jax.inputs.workload import Workload
from libra_jax.model import objective as model
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model import lp
from libra_jax.model.linear import parse_linear_constraints
from libra_jax.model.problem import check_spec, power_row
from libra_jax.model.timing import TimingModel
from libra_jax.solvers.batch import check_problem
from libra_jax.solvers.certificate import epigraph_rows
from libra_jax.solvers.compilation import stored
from libra_jax.solvers.solve import SolveResult, design_metrics
from libra_jax.types import LibraInputError, float64

_NS = 1e9  # s -> ns
_FACE_TOL = 1e-9  # optimal face: residual <= optimum + this x value
_KINK_TOL = 1e-6  # right - left above this (relative) is reported as a kink


# ----------------------------------------------------------------------------------------
# Rows of the problem, with their names


@dataclasses.dataclass
class _Named:
    """The linear rows of the problem in `problem.build_problem`'s order, un-normalised."""

    kind: list  # "total" | "linear" | "cost", per row
    index: list  # index of the linear string (linear rows), else 0
    eq: list  # bool per row
    norm: list  # norm of the un-normalised row (the Problem stores a / norm, b / norm)


def _named_rows(p, spec, d: int) -> tuple[_Named, list, list]:
    """Rebuilds the row order of `build_problem` from ``spec`` and checks it against ``p``.

    Returns:
      (rows, eq_pos, in_pos): eq_pos[j] / in_pos[j] is the named row of a_eq[j] / a_in[j].

    Raises:
      ValueError: when ``spec`` does not describe the rows of ``p``.
    """
    rows = _Named([], [], [], [])
    a_all = []

    def add(a, kind, index, eq):
        a = np.asarray(a, np.float64)
        rows.kind.append(kind)
        rows.index.append(index)
        rows.eq.append(bool(eq))
        rows.norm.append(float(np.linalg.norm(a)))
        a_all.append(a / np.linalg.norm(a))

    if spec.total_bw_gbps is not None:
        add(np.ones(d), "total", 0, spec.total_bw_mode == "eq")
    for i, text in enumerate(spec.linear or ()):
        ae, _, ai, _ = parse_linear_constraints([text], d)
        for a in ae:
            add(a, "linear", i, True)
        for a in ai:
            add(a, "linear", i, False)
    if spec.max_cost_usd is not None:
        add(np.asarray(p.cost_rate, np.float64), "cost", 0, False)
    power = power_row(spec, d)
    if power is not None:
        add(power, "power", 0, False)
    eq_pos = [i for i, e in enumerate(rows.eq) if e]
    in_pos = [i for i, e in enumerate(rows.eq) if not e]
    a_eq = np.asarray(p.a_eq, np.float64).reshape(-1, d)
    a_in = np.asarray(p.a_in, np.float64).reshape(-1, d)
    ok = len(eq_pos) == a_eq.shape[0] and len(in_pos) == a_in.shape[0]
    ok = ok and all(np.allclose(a_all[i], a_eq[j], atol=1e-12) for j, i in enumerate(eq_pos))
    ok = ok and all(np.allclose(a_all[i], a_in[j], atol=1e-12) for j, i in enumerate(in_pos))
    if not ok:
        raise LibraInputError(
            "sensitivities: spec does not match the problem's constraint rows (pass the "
            "ConstraintSpec the problem was built from).")
    return rows, eq_pos, in_pos


# ----------------------------------------------------------------------------------------
# The multiplier LP


@dataclasses.dataclass
class _LP:
    """The KKT multiplier LP at x (scaled variables z; see `_multiplier_lp`)."""

    c: np.ndarray
    a_eq: np.ndarray
    b_eq: np.ndarray
    bounds: list
    z: np.ndarray  # optimal z
    opt: float  # optimal residual (relative to the value)
    sl: dict  # name -> slice of z: pi, lam, nu, alpha, beta
    scale: float  # value units per GB/s of one unit of lam, nu, alpha, beta in z


def _linprog(c, a_ub, b_ub, a_eq, b_eq, bounds):
    return lp.linprog(c, a_ub, b_ub, a_eq, b_eq, bounds, method="highs-ds", tolerance=1e-10)


@stored
def _epigraph_times(bw, p):
    """(phase x dim times [K, D], piece times [J]) in s, as one compiled program."""
    return model.dim_times_s(bw, p), model.piece_times_s(bw, p)


def _multiplier_lp(p, x, rows, s_t, g0, value):
    """Optimal multipliers at x: minimise the complementary-slackness residual subject to
    stationarity in bw (s_t dT/dx + g0 + A_in^T lam + A_eq^T nu - alpha + beta = 0, dT/dx from
    mu) and in every epigraph variable (sum_{r in g} mu_r - sum_r mu_r nest_rg = w_g; without
    nesting, mu = w pi with pi in each group's simplex). The LP's "pi" block holds mu.

    Variables are scaled: lam, nu, alpha, beta in units of ``scale`` = value / sum(x), the
    residual in units of ``value``, stationarity rows to unit max entry.
    """
    group, weight, const, coef, nest = rows
    d = x.shape[0]
    used = coef > 0
    safe_x = np.where(used, x[None, :], 1.0)
    # Every epigraph variable's value at x (LIBRA phases, then pieces), for nested rows.
    dim_s, piece_s = jax.device_get(_epigraph_times(np.asarray(x, np.float64), p))
    t_all = np.concatenate([np.max(np.asarray(dim_s), axis=1, initial=0.0),
                            np.asarray(piece_s)])
    r_val = const + np.sum(np.where(used, coef / safe_x, 0.0), axis=1) + nest @ t_all  # [R] s
    top = np.full(weight.shape[0], -np.inf)
    np.maximum.at(top, group, r_val)
    a_in = np.asarray(p.a_in, np.float64).reshape(-1, d)
    b_in = np.asarray(p.b_in, np.float64)
    a_eq = np.asarray(p.a_eq, np.float64).reshape(-1, d)
    b_eq = np.asarray(p.b_eq, np.float64)
    lo = np.asarray(p.lo, np.float64)
    hi = np.asarray(p.hi, np.float64)
    fin = np.flatnonzero(np.isfinite(hi))
    n_pi, n_in, n_eq, n_hi = group.size, b_in.size, b_eq.size, fin.size
    sizes = dict(pi=n_pi, lam=n_in, nu=n_eq, alpha=d, beta=n_hi)
    sl, at = {}, 0
    for name, n in sizes.items():
        sl[name] = slice(at, at + n)
        at += n
    scale = value / max(float(np.sum(x)), 1e-300)
    c = np.zeros(at)
    c[sl["pi"]] = s_t * np.maximum(top[group] - r_val, 0.0) / value
    c[sl["lam"]] = scale * np.maximum(b_in - a_in @ x, 0.0) / value
    c[sl["alpha"]] = scale * np.maximum(x - lo, 0.0) / value
    c[sl["beta"]] = scale * np.maximum(hi[fin] - x[fin], 0.0) / value
    stat = np.zeros((d, at))
    stat[:, sl["pi"]] = -(s_t * np.where(used, coef / safe_x**2, 0.0)).T / scale
    stat[:, sl["lam"]] = a_in.T
    stat[:, sl["nu"]] = a_eq.T
    stat[:, sl["alpha"]] = -np.eye(d)
    stat[:, sl["beta"]] = np.eye(d)[:, fin]
    rhs = -np.asarray(g0, np.float64) / scale
    row_scale = np.maximum(np.max(np.abs(stat), axis=1), 1e-300)
    has_rows = np.bincount(group, minlength=weight.shape[0]) > 0
    simp = np.zeros((weight.shape[0], at))
    simp[group, np.arange(n_pi)] = 1.0
    simp[:, sl["pi"]] -= nest.T
    # Per-group scaling to unit right-hand side (mu of a group is about its weight).
    w_scale = np.where(weight > 0, weight, 1.0)
    simp = (simp / w_scale[:, None])[has_rows]
    a_lp = np.vstack([stat / row_scale[:, None], simp])
    b_lp = np.concatenate([rhs / row_scale, (weight / w_scale)[has_rows]])
    bounds = [(0, None)] * (n_pi + n_in) + [(None, None)] * n_eq + [(0, None)] * (d + n_hi)
    res = _linprog(c, None, None, a_lp, b_lp, bounds)
    if res.status != 0:
        return None
    return _LP(c=c, a_eq=a_lp, b_eq=b_lp, bounds=bounds, z=res.x, opt=float(res.fun), sl=sl,
               scale=scale)


def _one_sided(lp: _LP, g: np.ndarray, q0: float) -> tuple[float, float]:
    """(min, max) of q0 + g @ z over the optimal face of the LP (left, right derivative)."""
    a_ub = lp.c[None, :]
    b_ub = np.array([lp.opt + _FACE_TOL])
    out = []
    for sign in (1.0, -1.0):
        res = _linprog(sign * g, a_ub, b_ub, lp.a_eq, lp.b_eq, lp.bounds)
        out.append(q0 + float(g @ res.x) if res.status == 0 else math.nan)
    return out[0], out[1]


# ----------------------------------------------------------------------------------------
# The public function


def _price_jacobian(network, cost_model):
    """{tier: {component: d rates / d price [D]}} for the tiers the network uses (rates are
    linear in the prices, so each is the rates with that price 1 and every other price 0)."""
    from libra_jax.inputs.cost import CostModel, cost_rates_usd_per_gbps

    out = {}
    for tier in dict.fromkeys(network.cost_tiers):
        for comp in cost_model.tiers.get(tier, {}):
            unit = {t: {k: 0.0 for k in v} for t, v in cost_model.tiers.items()}
            unit[tier][comp] = 1.0
            jac = cost_rates_usd_per_gbps(network, CostModel(tiers=unit, source="unit"))
            out.setdefault(tier, {})[comp] = jac
    return out


def _size_gradient(p, workload, x, pi_kd):
    """d(sum_k sum_d pi_kd traffic_kd / x_d)/d size [L, 3] in ns per byte, with the traffic
    of every (layer, phase) from `collectives.traffic_bytes` and pi_kd [K, D] the row
    weights (per unit of phase weight) of the merged phase it belongs to."""
    coll = np.asarray(workload.collective)
    comm = np.asarray(workload.communicator)
    size = np.asarray(workload.size_bytes, np.float64)
    traffic = np.asarray(traffic_bytes(coll, size, comm), np.float64)  # [L, 3, D] bytes
    lookup = {tuple(row): k for k, row in enumerate(np.asarray(p.traffic_gb, np.float64))}
    weight_ld = np.zeros(traffic.shape)  # [L, 3, D] pi of each (layer, phase), per dim
    for idx in np.ndindex(*traffic.shape[:2]):
        row = traffic[idx] / 1e9
        if not np.any(row > 0):
            continue
        k = lookup.get(tuple(row))
        if k is None:
            raise ValueError("sensitivities: workload does not match the problem's traffic "
                             f"(layer {idx[0]}, phase {idx[1]}).")
        weight_ld[idx] = pi_kd[k]

    # The traffic is linear in the size (`traffic_bytes`), so its derivative is the traffic
    # of one byte: host numpy, no compiled program.
    per_byte = np.asarray(traffic_bytes(coll, np.ones_like(size), comm), np.float64)
    return np.sum(weight_ld * per_byte / np.asarray(x, np.float64).reshape(1, 1, -1), axis=-1)


@float64
def sensitivities(problem, result, *, spec, network=None, workload=None,
                  cost_model=None, timing_model=None) -> dict:
    """Derivatives of the optimal value in every input, from the optimal dual multipliers.

    Args:
      problem: the `Problem` that was solved (`problem.build_problem`, LIBRA's model or
        general rows, nested or not).
      result: its `solve.SolveResult` (``perf`` or ``perf_per_cost``).
      spec: the `ConstraintSpec` the problem was built from (names the rows).
      network: `topology.Network`, for the price derivatives (with ``cost_model``).
      workload: `workload.Workload` the problem was built from, for the size derivatives.
      cost_model: `cost.CostModel`, for the price derivatives.
      timing_model: the `timing.TimingModel` the rows were built with, for the size
        derivatives of ``model=pipelined`` (no-overlap loop).

    Returns:
      A JSON-ready dict. With V the step time in ns (``perf``; prefix ``d_step_ns_d_``) or
      step time x network cost in ns x $ (``perf_per_cost``; prefix ``d_time_x_cost_d_``):
        ``<prefix>total_bw_gbps``: dV / d total bandwidth (per GB/s; null without one).
        ``<prefix>gift_gbps`` [D]: dV / d (free GB/s given to dimension d alone).
        ``<prefix>lower_gbps`` [D], ``<prefix>upper_gbps`` [D]: dV / d bound (null where
          there is no finite upper bound).
        ``<prefix>linear_rhs_gbps`` [len(spec.linear)]: dV / db of each linear constraint
          read as ``a @ bw == b`` or ``a @ bw <= b`` (``>=`` rows negated, so b grows when
          the constraint is relaxed), a in its written scale.
        ``<prefix>max_cost_usd``: dV / d cost budget (per $; null without a budget).
        ``<prefix>max_power_w``: dV / d network power cap (per W; null without a cap).
        ``<prefix>price_usd_per_gbps``: {tier: {component: dV / d price}} for the
          cost-model prices (per $ per GB/s; null without network and cost_model).
        ``<prefix>size_bytes`` [L][3]: dV / d collective size of each layer and phase (per
          byte; null without workload or with general model rows).
        ``one_sided``: {key: [{index, left, right}]} where the left and right derivatives
          differ (those values are null above); index is a list index, or [tier, component].
        ``status``: "ok", "kink" (see one_sided) or "unavailable" (with ``message``);
        ``objective``, ``value`` (name of V), ``residual`` (complementary-slackness
          residual of the multipliers / V; about the optimality gap).
      Every number is null where it does not exist.

    Raises:
      LibraInputError: an argument of the wrong type (``problem`` one `Problem`, ``result`` a
        `SolveResult`, ``spec`` a `ConstraintSpec`, the optional ones a `Network`,
        `Workload`, `CostModel`, `TimingModel` or None), or a spec that does not match the
        problem.
    """
    check_problem(problem, "problem")
    as_instance(result, SolveResult, "result")
    check_spec(spec)
    for name, value, kind in (("network", network, Network), ("workload", workload, Workload),
                              ("cost_model", cost_model, CostModel),
                              ("timing_model", timing_model, TimingModel)):
        if value is not None:
            as_instance(value, kind, name)
    objective = result.objective
    prefix = "d_step_ns_d_" if objective == "perf" else "d_time_x_cost_d_"
    out = dict(objective=objective, value="step_time_ns" if objective == "perf"
               else "time_x_cost", status="ok", message=None, residual=None)
    keys = ["total_bw_gbps", "gift_gbps", "lower_gbps", "upper_gbps", "linear_rhs_gbps",
            "max_cost_usd", "max_power_w", "price_usd_per_gbps", "size_bytes"]
    for k in keys:
        out[prefix + k] = None
    out["one_sided"] = {}

    def unavailable(msg):
        out["status"] = "unavailable"
        out["message"] = msg
        return out

    x = np.asarray(result.bandwidth_gbps, np.float64)
    if result.status != "ok" or not np.all(np.isfinite(x)):
        return unavailable(f"the solve ended with status {result.status!r}.")
    d = x.shape[0]
    rows = epigraph_rows(problem)
    named, eq_pos, in_pos = _named_rows(problem, spec, d)
    t_s = design_metrics(problem, x)[0] / 1e9  # (one compiled program)
    rates = np.asarray(problem.cost_rate, np.float64)
    if objective == "perf":
        s_t, g0, value = 1.0, np.zeros(d), t_s
    else:
        cost = float(rates @ x)
        s_t, g0, value = cost, t_s * rates, t_s * cost
    lp = _multiplier_lp(problem, x, rows, s_t, g0, value)
    if lp is None:
        return unavailable("the multiplier LP failed.")
    out["residual"] = lp.opt
    n = lp.z.size
    group, weight, const, coef, _ = rows
    sl = lp.sl

    def unit(name, j, factor):
        g = np.zeros(n)
        g[np.arange(n)[sl[name]][j]] = factor
        return g

    # Each entry: (key, index, g, q0) with the derivative q0 + g @ z in value units (s or
    # s x $) per parameter unit; converted to ns at the end.
    items = []
    for i, kind in enumerate(named.kind):
        where = ("nu", eq_pos.index(i)) if named.eq[i] else ("lam", in_pos.index(i))
        g = unit(*where, -lp.scale / named.norm[i])
        if kind == "total":
            items.append(("total_bw_gbps", None, g, 0.0))
        elif kind == "linear":
            items.append(("linear_rhs_gbps", named.index[i], g, 0.0))
        elif kind == "power":
            items.append(("max_power_w", None, g, 0.0))
        else:
            items.append(("max_cost_usd", None, g, 0.0))
    used = coef > 0
    safe_x = np.where(used, x[None, :], 1.0)
    for j in range(d):
        g = np.zeros(n)
        g[sl["pi"]] = -s_t * np.where(used[:, j], coef[:, j] / safe_x[:, j] ** 2, 0.0)
        items.append(("gift_gbps", j, g, 0.0))
        items.append(("lower_gbps", j, unit("alpha", j, lp.scale), 0.0))
    fin = list(np.flatnonzero(np.isfinite(np.asarray(problem.hi))))
    for j in fin:
        items.append(("upper_gbps", int(j), unit("beta", fin.index(j), -lp.scale), 0.0))
    if network is not None and cost_model is not None and network.cost_tiers is not None:
        budget = [i for i, k in enumerate(named.kind) if k == "cost"]
        for tier, comps in _price_jacobian(network, cost_model).items():
            for comp, jac in comps.items():
                g = np.zeros(n)
                if budget:
                    g = unit("lam", in_pos.index(budget[0]),
                             lp.scale * float(jac @ x) / named.norm[budget[0]])
                q0 = t_s * float(jac @ x) if objective != "perf" else 0.0
                items.append(("price_usd_per_gbps", [tier, comp], g, q0))

    # Values, and the one-sided derivatives where the multipliers are not unique.
    power = power_row(spec, d)
    scale_of = {"max_cost_usd": value / max(float(rates @ x), 1e-300),
                "max_power_w": value / max(float(power @ x) if power is not None else 0.0,
                                           1e-300),
                "price_usd_per_gbps": value / max(float(np.max(rates)), 1e-300)}
    results = []
    for key, index, g, q0 in items:
        q = q0 + float(g @ lp.z)
        left, right = _one_sided(lp, g, q0)
        floor = scale_of.get(key, lp.scale)
        if not (abs(right - left) <= _KINK_TOL * max(abs(left), abs(right), floor)):
            out["one_sided"].setdefault(prefix + key, []).append(
                dict(index=index, left=left * _NS, right=right * _NS))
            q = math.nan
        results.append((key, index, q))

    out[prefix + "total_bw_gbps"] = None
    out[prefix + "gift_gbps"] = [None] * d
    out[prefix + "lower_gbps"] = [None] * d
    out[prefix + "upper_gbps"] = [None] * d
    out[prefix + "linear_rhs_gbps"] = [None] * len(spec.linear or ())
    out[prefix + "max_cost_usd"] = None
    out[prefix + "max_power_w"] = None
    prices = {} if network is not None and cost_model is not None else None
    for key, index, q in results:
        v = None if math.isnan(q) else q * _NS
        if key in ("total_bw_gbps", "max_cost_usd", "max_power_w"):
            out[prefix + key] = v
        elif key == "price_usd_per_gbps":
            prices.setdefault(index[0], {})[index[1]] = v
        else:
            out[prefix + key][index] = v
    out[prefix + "price_usd_per_gbps"] = prices
    if out["one_sided"]:
        out["status"] = "kink"

    if workload is not None and not np.any(np.asarray(problem.row_on)):
        k = np.asarray(problem.traffic_gb).shape[0]
        lib = group < k
        pi = lp.z[sl["pi"]] / np.where(weight[group] > 0, weight[group], 1.0)  # per occurrence
        pi_kd = np.zeros((k, d))
        pi_kd[group[lib], np.argmax(coef[lib] > 0, axis=1)] = pi[lib]
        grad = _size_gradient(problem, workload, x, pi_kd) * s_t  # ns (x $) per byte
        out[prefix + "size_bytes"] = grad.tolist()
    elif workload is not None and timing_model is not None and network is not None:
        from libra_jax.model.timing import size_gradient_ns_per_byte

        n_pairs = int(np.sum(np.asarray(problem.traffic_gb) > 0))
        mu_rows = lp.z[sl["pi"]][n_pairs:]
        grad = size_gradient_ns_per_byte(problem, workload, network, timing_model, x, mu_rows)
        if grad is not None:
            out[prefix + "size_bytes"] = (grad * s_t).tolist()
    return out
