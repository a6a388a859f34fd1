"""General model rows (`problem.ModelRows`): the solver, certificates and batching on
step(bw) = compute + c0 + sum_j w_j max_{r in j} (c_r + sum_d a_rd / bw_d).

Checked three ways: LIBRA's model written as rows gives LIBRA's pinned optima; random
problems with multi-dimension rows and constants against cvxpy (Clarabel), re-evaluated with
our model; batched == single.
"""

from __future__ import annotations

import cvxpy as cp
import jax.numpy as jnp
import numpy as np
import pytest
from test_optima import DATA, SPECS

from libra_jax.inputs.cost import cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_workload
from libra_jax.model import objective as model
from libra_jax.model.problem import (
    ConstraintSpec,
    ModelRows,
    build_problem,
    problem_from_arrays,
)
from libra_jax.solvers import batch as B
from libra_jax.solvers.certificate import tangent_lp_bound
from libra_jax.solvers.solve import solve
from libra_jax.types import LibraInputError


def shipped(workload, dims, constraints):
    """(network, workload, cost rates, spec) of a shipped LIBRA case."""
    net = load_network_file(str(DATA / "network" / f"{dims}_network.yml"))
    rates = cost_rates_usd_per_gbps(
        net, load_cost_model(str(DATA / "cost_model" / f"{dims}_cost_model.yml")))
    wl = load_workload(str(DATA / "workload" / f"{workload}.txt"),
                       str(DATA / "communicator" / f"{workload}_{dims}.yml"), net.num_dims)
    return net, wl, rates, SPECS[constraints]


def libra_as_rows(traffic_gb, weight) -> ModelRows:
    """LIBRA's model as rows: one piece per phase, one row per used (phase, dim)."""
    kk, dd = np.nonzero(traffic_gb > 0)
    coef = np.zeros((kk.size, traffic_gb.shape[1]))
    coef[np.arange(kk.size), dd] = traffic_gb[kk, dd]
    return ModelRows(weight=weight, piece=kk, const_s=np.zeros(kk.size), coef_gb=coef)


def test_libra_model_as_rows_matches_the_pinned_optimum():
    """GPT-3 on the 4D network with LIBRA's multiple constraints, through the rows path."""
    network, workload, rates, spec = shipped("GPT_3", "4d", "multiple_constraints")
    p = build_problem(network, workload, rates, spec)
    rows = libra_as_rows(np.asarray(p.traffic_gb), np.asarray(p.weight))
    q = build_problem(network, workload, rates, spec, rows=rows)
    assert q.traffic_gb.shape[0] == 0 and q.row_piece.shape[0] == rows.piece.shape[0]
    bw = jnp.asarray([500.0, 300.0, 150.0, 50.0])
    np.testing.assert_allclose(model.step_time_s(bw, q), model.step_time_s(bw, p), rtol=1e-14)
    ref, got = solve(p), solve(q)
    assert got.status == "ok" and got.optimality_gap <= 1e-6
    np.testing.assert_allclose(got.step_time_ns, 7.08438743e8, rtol=1e-8)
    np.testing.assert_allclose(got.bandwidth_gbps, ref.bandwidth_gbps, rtol=1e-6, atol=1e-6)


def _random_rows(rng, d, j, rows_per_piece):
    piece, const, coef = [], [], []
    for i in range(j):
        for _ in range(rows_per_piece):
            piece.append(i)
            const.append(rng.uniform(-1e-3, 2e-3) if rng.random() < 0.5 else 0.0)
            a = 10.0 ** rng.uniform(-2, 0.5, d) * (rng.random(d) < 0.6)
            coef.append(a)
    return ModelRows(weight=rng.integers(1, 5, j).astype(float), piece=np.asarray(piece),
                     const_s=np.asarray(const), coef_gb=np.asarray(coef),
                     const0_s=float(rng.uniform(0, 1e-3)))


def _cvxpy_value(rows: ModelRows, compute_s, total, lo, hi):
    d = rows.coef_gb.shape[1]
    b = cp.Variable(d)
    inv = cp.hstack([cp.inv_pos(b[i]) for i in range(d)])
    pieces = []
    for j, w in enumerate(rows.weight):
        idx = np.nonzero(rows.piece == j)[0]
        terms = [rows.const_s[r] + rows.coef_gb[r] @ inv for r in idx]
        pieces.append(w * cp.max(cp.hstack(terms)))
    obj = compute_s + rows.const0_s + cp.sum(cp.hstack(pieces))
    cons = [cp.sum(b) == total, b >= lo, b <= hi]
    cp.Problem(cp.Minimize(obj), cons).solve(solver=cp.CLARABEL)
    return np.maximum(np.asarray(b.value), 1e-9)


@pytest.mark.parametrize("seed", range(24))
def test_random_rows_against_cvxpy(seed):
    rng = np.random.default_rng(seed)
    d, j = 3, 3  # one shape: one compilation; sparsity and constants vary
    rows = _random_rows(rng, d, j, 2)
    rows.coef_gb[0, 0] = max(rows.coef_gb[0, 0], 0.1)  # at least one used dimension
    total = 100.0
    lo = np.zeros(d)
    hi = np.full(d, np.inf)
    if rng.random() < 0.5:
        hi[int(rng.integers(d))] = rng.uniform(10, 40)
    spec = ConstraintSpec(total_bw_gbps=total, upper_gbps=[None if np.isinf(h) else h
                                                           for h in hi])
    p = problem_from_arrays(np.zeros((0, d)), np.zeros(0), 0.01, None, spec, rows=rows)
    res = solve(p)
    assert res.status == "ok", res
    assert res.optimality_gap <= 1e-6 and res.max_violation <= 1e-9
    ref_bw = _cvxpy_value(rows, 0.01, total, lo, hi)
    ref_bw = ref_bw * total / ref_bw.sum()
    ref = float(model.step_time_s(jnp.asarray(ref_bw), p)) * 1e9
    # Never worse than the reference, and the certificate is below it.
    assert res.step_time_ns <= ref * (1 + 1e-6)
    assert res.lower_bound <= ref * (1 + 1e-9)
    lb = tangent_lp_bound(p, res.bandwidth_gbps)[0] * 1e9
    assert lb <= res.step_time_ns * (1 + 1e-12)


def test_batched_rows_equal_single_solves():
    rng = np.random.default_rng(7)
    probs = []
    for i in range(6):
        d = 3
        rows = _random_rows(rng, d, 3, 2)  # one shape: one compilation each way
        rows.coef_gb[0, 0] = max(rows.coef_gb[0, 0], 0.1)
        spec = ConstraintSpec(total_bw_gbps=50.0 + i)
        probs.append(problem_from_arrays(np.zeros((0, d)), np.zeros(0), 0.0, None, spec,
                                         rows=rows))
    out = B.solve_batch(probs)
    for i, p in enumerate(probs):
        single = solve(p)
        assert out.status[i] == "ok"
        np.testing.assert_allclose(out.step_time_ns[i], single.step_time_ns, rtol=1e-8)


def test_perf_per_cost_with_rows_is_certified():
    network, workload, rates, spec = shipped("GPT_3", "4d", "total_bw_500gbps")
    p = build_problem(network, workload, rates, spec)
    rows = libra_as_rows(np.asarray(p.traffic_gb), np.asarray(p.weight))
    q = build_problem(network, workload, rates, spec, rows=rows)
    a, b = solve(p, "perf_per_cost"), solve(q, "perf_per_cost")
    assert b.status == "ok"
    np.testing.assert_allclose(b.time_x_cost, a.time_x_cost, rtol=1e-6)


def test_bad_rows_are_refused():
    spec = ConstraintSpec(total_bw_gbps=10.0)
    bad = ModelRows(weight=np.ones(1), piece=np.zeros(1, int), const_s=np.zeros(1),
                    coef_gb=-np.ones((1, 2)))
    with pytest.raises(LibraInputError, match="coef_gb"):
        problem_from_arrays(np.zeros((0, 2)), np.zeros(0), 0.0, None, spec, rows=bad)
    orphan = ModelRows(weight=np.ones(2), piece=np.zeros(1, int), const_s=np.zeros(1),
                       coef_gb=np.ones((1, 2)))
    with pytest.raises(LibraInputError, match="no row"):
        problem_from_arrays(np.zeros((0, 2)), np.zeros(0), 0.0, None, spec, rows=orphan)


def _nested_rows(rng, d):
    """A small critical-path model: pieces 0..2 are collective times (rows per dim), piece 3
    = max(compute + p0 + p1, 0.3 compute + p2) and piece 4 = max(piece 3, p0 + p2) + 0.1 ms."""
    piece, const, coef = [], [], []
    nest_rows = []
    for j in range(3):
        for dd in range(d):
            if rng.random() < 0.8 or dd == 0:
                a = np.zeros(d)
                a[dd] = 10.0 ** rng.uniform(-2, 0.5)
                piece.append(j), const.append(0.0), coef.append(a), nest_rows.append({})
    comp = float(rng.uniform(1e-3, 5e-2))
    for c0, nest in [(comp, {0: 1.0, 1: 1.0}), (0.3 * comp, {2: 1.0})]:
        piece.append(3), const.append(c0), coef.append(np.zeros(d)), nest_rows.append(nest)
    for c0, nest in [(1e-4, {3: 1.0}), (1e-4, {0: 1.0, 2: 1.0})]:
        piece.append(4), const.append(c0), coef.append(np.zeros(d)), nest_rows.append(nest)
    m = np.zeros((len(piece), 5))
    for r, nest in enumerate(nest_rows):
        for i, v in nest.items():
            m[r, i] = v
    w = np.asarray([0.0, 0.0, 1.0, 0.0, 2.0])  # pieces 0, 1, 3 count only through nesting
    return ModelRows(weight=w, piece=np.asarray(piece), const_s=np.asarray(const),
                     coef_gb=np.asarray(coef), nest=m)


def _cvxpy_nested(rows: ModelRows, total):
    d = rows.coef_gb.shape[1]
    j = rows.weight.shape[0]
    b, t = cp.Variable(d), cp.Variable(j)
    inv = cp.hstack([cp.inv_pos(b[i]) for i in range(d)])
    cons = [cp.sum(b) == total, b >= 0]
    for r in range(rows.piece.shape[0]):
        cons.append(t[rows.piece[r]] >= rows.const_s[r] + rows.coef_gb[r] @ inv
                    + rows.nest[r] @ t)
    cp.Problem(cp.Minimize(rows.weight @ t), cons).solve(solver=cp.CLARABEL)
    return np.maximum(np.asarray(b.value), 1e-9)


@pytest.mark.parametrize("seed", range(12))
def test_nested_rows_against_cvxpy(seed):
    rng = np.random.default_rng(100 + seed)
    d = 3
    rows = _nested_rows(rng, d)
    p = problem_from_arrays(np.zeros((0, d)), np.zeros(0), 0.0, None,
                            ConstraintSpec(total_bw_gbps=100.0), rows=rows)
    # The model by hand at one point.
    bw = np.asarray([20.0, 30.0, 50.0])
    coll = [max(rows.coef_gb[r] @ (1 / bw) for r in np.nonzero(rows.piece == j)[0])
            for j in range(3)]
    comp = rows.const_s[rows.piece == 3][0]
    p3 = max(comp + coll[0] + coll[1], 0.3 * comp + coll[2])
    p4 = max(p3, coll[0] + coll[2]) + 1e-4
    np.testing.assert_allclose(model.comm_time_s(jnp.asarray(bw), p), coll[2] + 2 * p4,
                               rtol=1e-12)
    res = solve(p)
    assert res.status == "ok" and res.optimality_gap <= 1e-6, res
    ref_bw = _cvxpy_nested(rows, 100.0)
    ref_bw = ref_bw * 100.0 / ref_bw.sum()
    ref = float(model.step_time_s(jnp.asarray(ref_bw), p)) * 1e9
    assert res.step_time_ns <= ref * (1 + 1e-6)
    assert res.lower_bound <= ref * (1 + 1e-9)
