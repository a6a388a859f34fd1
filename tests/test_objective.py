"""Tests for libra_jax.model.objective: hand-computed values, unused dims, gradients, jit, vmap,
constraint violation."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from libra_jax.model import objective as model
from libra_jax.model.problem import ConstraintSpec, problem_from_arrays


def _problem(traffic, weight, compute_s, rates=None, spec=None):
    """Float64 problem (the model is checked in float64)."""
    t = np.asarray(traffic, np.float64)
    if spec is None:
        spec = ConstraintSpec(total_bw_gbps=100.0)
    with jax.enable_x64(True):
        return problem_from_arrays(t, np.asarray(weight, np.float64), compute_s, rates, spec)


def _all(bw, p):
    with jax.enable_x64(True), jax.numpy_rank_promotion("raise"):
        bw = jnp.asarray(bw, jnp.float64)
        return tuple(float(f(bw, p)) for f in (model.step_time_s, model.comm_time_s,
                                               model.network_cost_usd, model.time_x_cost))


# --------------------------------------------------------------------------- hand examples


def test_one_dim_by_hand():
    # one phase: 2 GB, 3 times per step; compute 0.5 s; bw 4 GB/s; $10 per GB/s
    p = _problem([[2.0]], [3.0], 0.5, rates=[10.0])
    step, comm, cost, txc = _all([4.0], p)
    assert comm == pytest.approx(3 * 2 / 4, rel=1e-15)  # 1.5 s
    assert step == pytest.approx(0.5 + 1.5, rel=1e-15)  # 2.0 s
    assert cost == pytest.approx(10 * 4, rel=1e-15)  # $40
    assert txc == pytest.approx(2.0 * 40, rel=1e-15)  # 80 s $


def test_two_dims_by_hand():
    # phase 0: (1, 4) GB twice; phase 1: (3, 0) GB once; compute 0.25 s; bw (4, 8)
    p = _problem([[1.0, 4.0], [3.0, 0.0]], [2.0, 1.0], 0.25, rates=[1.0, 2.0])
    step, comm, cost, txc = _all([4.0, 8.0], p)
    # phase 0: max(1/4, 4/8) = 0.5; phase 1: max(3/4, -) = 0.75; comm = 2 * 0.5 + 0.75
    assert comm == pytest.approx(1.75, rel=1e-15)
    assert step == pytest.approx(2.0, rel=1e-15)
    assert cost == pytest.approx(1 * 4 + 2 * 8, rel=1e-15)  # $20
    assert txc == pytest.approx(2.0 * 20.0, rel=1e-15)


THREE = dict(traffic=[[1.0, 2.0, 0.0], [0.0, 6.0, 0.0], [5.0, 0.0, 0.0]],
             weight=[1.0, 2.0, 3.0], compute_s=1.0, rates=[1.0, 1.0, 5.0])


@pytest.mark.parametrize("bw2", [0.0, 1e-300, 1.0, 1e6, math.inf])
def test_three_dims_unused_dim_by_hand(bw2):
    # dim 2 carries nothing. bw = (10, 4, bw2):
    # phase 0: max(1/10, 2/4) = 0.5 (x1); phase 1: 6/4 = 1.5 (x2); phase 2: 5/10 = 0.5 (x3)
    # comm = 0.5 + 3.0 + 1.5 = 5.0 s; step = 6.0 s; cost = 10 + 4 + 5 bw2.
    p = _problem(THREE["traffic"], THREE["weight"], THREE["compute_s"], rates=THREE["rates"])
    step, comm, cost, txc = _all([10.0, 4.0, bw2], p)
    assert comm == pytest.approx(5.0, rel=1e-15)
    assert step == pytest.approx(6.0, rel=1e-15)
    if math.isfinite(bw2):
        assert cost == pytest.approx(14.0 + 5 * bw2, rel=1e-15)
        assert txc == pytest.approx(6.0 * (14.0 + 5 * bw2), rel=1e-15)
    # gradient by hand: d/dbw of w T / bw is -w T / bw^2 at the slowest dim of each phase:
    # dim 0: phase 2: -3 * 5 / 100 = -0.15; dim 1: phases 0, 1: -1 * 2/16 - 2 * 6/16 = -0.875
    with jax.enable_x64(True):
        g = np.asarray(jax.grad(model.step_time_s)(jnp.array([10.0, 4.0, bw2]), p))
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g[:2], [-0.15, -0.875], rtol=1e-14)
    assert g[2] == 0.0


@pytest.mark.parametrize("fn", [model.step_time_s, model.comm_time_s])
def test_unused_dim_grad_zero_and_finite_jit(fn):
    p = _problem(THREE["traffic"], THREE["weight"], THREE["compute_s"])
    with jax.enable_x64(True):
        for bw2 in (0.0, 1e-300, 3.0):
            bw = jnp.array([10.0, 4.0, bw2])
            v, g = jax.jit(jax.value_and_grad(fn))(bw, p)
            assert np.isfinite(float(v))
            assert np.all(np.isfinite(np.asarray(g))) and float(g[2]) == 0.0
            # the unused dim's bandwidth does not change anything
            assert float(fn(bw, p)) == float(fn(jnp.array([10.0, 4.0, 77.0]), p))


# --------------------------------------------------------------------------- random points


def _random_problem(rng, k, d):
    t = np.where(rng.random((k, d)) < 0.6, 10.0 ** rng.uniform(-2, 1, (k, d)), 0.0)
    t[np.arange(k), rng.integers(0, d, k)] = 10.0 ** rng.uniform(-2, 1, k)  # no empty phase
    return _problem(t, rng.integers(1, 9, k).astype(float), float(rng.uniform(0, 1)),
                    rates=10.0 ** rng.uniform(-1, 1, d))


def _unique_max(bw, p, margin=1e-3):
    """True when every phase's slowest dim beats the runner-up by a relative margin."""
    times = np.asarray(model.dim_times_s(jnp.asarray(bw), p))
    top2 = -np.sort(-times, axis=1)[:, :2] if times.shape[1] > 1 else None
    return top2 is None or bool(np.all(top2[:, 1] < top2[:, 0] * (1 - margin)))


_FNS = (model.step_time_s, model.comm_time_s, model.network_cost_usd, model.time_x_cost,
        model.max_violation)
_GRAD = {fn: jax.jit(jax.grad(fn)) for fn in _FNS}
_VMAP = {fn: jax.jit(jax.vmap(fn, in_axes=(0, None))) for fn in _FNS}
_JIT = {fn: jax.jit(fn) for fn in _FNS}


@pytest.mark.parametrize("seed", range(6))
def test_grad_matches_central_difference(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 6))
    p = _random_problem(rng, int(rng.integers(1, 8)), d)
    with jax.enable_x64(True):
        checked = 0
        for _ in range(20):
            bw = 10.0 ** rng.uniform(0, 3, d)
            if not _unique_max(bw, p):
                continue
            for fn in (model.step_time_s, model.time_x_cost):
                grad = np.asarray(_GRAD[fn](jnp.asarray(bw), p))
                # central differences, all 2 D points in one vmapped call
                h = 1e-6 * bw
                pts = np.concatenate([bw + np.diag(h), bw - np.diag(h)])
                vals = np.asarray(_VMAP[fn](jnp.asarray(pts), p))
                fd = (vals[:d] - vals[d:]) / (2 * h)
                floor = 1e-9 * float(_VMAP[fn](jnp.asarray(bw)[None], p)[0]) / bw
                np.testing.assert_array_less(np.abs(grad - fd),
                                             1e-6 * np.maximum(np.abs(fd), floor))
            checked += 1
        assert checked >= 5


def test_jit_equals_eager_and_vmap_equals_loop():
    rng = np.random.default_rng(11)
    d = 4
    p = _random_problem(rng, 6, d)
    with jax.enable_x64(True), jax.numpy_rank_promotion("raise"):
        batch = jnp.asarray(10.0 ** rng.uniform(0, 3, (16, d)))
        batch = batch.at[3, 1].set(0.0 if not np.any(np.asarray(p.traffic_gb)[:, 1] > 0)
                                   else 1.0)
        for fn in _FNS:
            eager = np.array([float(fn(bw, p)) for bw in batch[:4]])
            jitted = np.array([float(_JIT[fn](bw, p)) for bw in batch])
            vmapped = np.asarray(_VMAP[fn](batch, p))
            np.testing.assert_allclose(jitted[:4], eager, rtol=1e-14)
            np.testing.assert_allclose(vmapped, jitted, rtol=1e-14)  # vmap == loop
        g_loop = np.stack([np.asarray(_GRAD[model.step_time_s](bw, p)) for bw in batch])
        g_vmap = np.asarray(jax.vmap(jax.grad(model.step_time_s), in_axes=(0, None))(batch, p))
        np.testing.assert_allclose(g_vmap, g_loop, rtol=1e-14)


# --------------------------------------------------------------------------- max_violation


def _viol(bw, p):
    with jax.enable_x64(True):
        return float(model.max_violation(jnp.asarray(bw, jnp.float64), p))


def test_max_violation_by_hand():
    # sum == 10 (row (1, 1)/sqrt 2 == 10/sqrt 2), 1 <= bw0 <= 8, bw1 >= 2.5,
    # bw0 >= bw1 (row (-1, 1)/sqrt 2 <= 0). Rows are unit norm: violations are distances.
    spec = ConstraintSpec(total_bw_gbps=10.0, lower_gbps=[1.0, 2.5], upper_gbps=[8.0, None],
                          linear=["bw[0] >= bw[1]"])
    p = _problem([[1.0, 1.0]], [1.0], 0.0, spec=spec)
    r2 = math.sqrt(2.0)
    # feasible
    assert _viol([6.0, 4.0], p) == pytest.approx(0.0, abs=1e-12)
    # eq: |6 - 10| / sqrt 2; everything else holds (bw0 >= bw1, bounds)
    assert _viol([3.0, 3.0], p) == pytest.approx(4 / r2, rel=1e-14)
    # ineq: bw1 - bw0 = 9 > 0 -> 9 / sqrt 2 (lo: 1 - 0.5 = 0.5 is smaller)
    assert _viol([0.5, 9.5], p) == pytest.approx(9 / r2, rel=1e-14)
    # box: lo of dim 1: 2.5 - 1 = 1.5; hi of dim 0: 9 - 8 = 1; sum and ineq hold
    assert _viol([9.0, 1.0], p) == pytest.approx(1.5, rel=1e-14)
    # box: hi of dim 0 only: 8.6 - 8 = 0.6 (bw1 = 1.4 < 2.5 -> 1.1 is larger: use bw1 2.5)
    assert _viol([8.6, 2.5], p) == pytest.approx(max(0.6, abs(11.1 - 10) / r2), rel=1e-14)


def test_max_violation_without_rows():
    # only the box: 1 <= bw <= 3 in each of two dims; sum <= 100 is an inequality row
    spec = ConstraintSpec(total_bw_gbps=100.0, total_bw_mode="le", lower_gbps=[1.0, 1.0],
                          upper_gbps=[3.0, 3.0])
    p = _problem([[1.0, 1.0]], [1.0], 0.0, spec=spec)
    assert p.a_eq.shape == (0, 2)
    assert _viol([2.0, 2.0], p) == 0.0
    assert _viol([0.25, 2.0], p) == pytest.approx(0.75, rel=1e-15)
    assert _viol([2.0, 3.5], p) == pytest.approx(0.5, rel=1e-15)
