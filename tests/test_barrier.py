"""The barrier's closed-form derivatives and its behaviour on a known optimum."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from libra_jax.solvers.barrier import (
    BarrierData,
    barrier_derivatives,
    barrier_minimize,
    barrier_value,
)


def _data(seed):
    rng = np.random.default_rng(seed)
    d, k, m = 3, 4, 5
    traffic = rng.uniform(0, 2, (k, d)) * (rng.uniform(size=(k, d)) > 0.3)
    traffic[-1] = 0.0  # a padded phase: its t is pinned
    bw = rng.uniform(1, 3, d)
    t = np.max(traffic / bw, axis=1) * 1.5 + 0.1
    z = np.concatenate([bw, t])
    g = rng.normal(size=(m, d + k))
    h = g @ z + rng.uniform(0.5, 1.0, m)
    data = BarrierData(
        g=jnp.asarray(g), h=jnp.asarray(h), g_on=jnp.asarray([True, True, False, True, True]),
        e=jnp.zeros((1, d + k)), f=jnp.zeros(1), e_on=jnp.asarray([False]),
        epi_traffic=jnp.asarray(traffic), epi_on=jnp.asarray(traffic > 0),
    )
    return jnp.asarray(z), data


@pytest.mark.parametrize("seed", range(5))
def test_closed_form_derivatives_match_autodiff(seed):
    with jax.enable_x64(True):
        z, data = _data(seed)
        grad, hess = jax.jit(barrier_derivatives)(z, data)
        np.testing.assert_allclose(grad, jax.jit(jax.grad(barrier_value))(z, data), rtol=1e-10,
                                   atol=1e-12)
        np.testing.assert_allclose(hess, jax.jit(jax.hessian(barrier_value))(z, data),
                                   rtol=1e-10, atol=1e-12)


def test_barrier_value_is_infinite_outside_the_domain():
    with jax.enable_x64(True):
        z, data = _data(0)
        assert np.isinf(barrier_value(z.at[0].set(-1.0), data))


def test_minimises_a_known_problem():
    """min t s.t. t >= 1 / b0, t >= 4 / b1, b0 + b1 == 3, b >= 0: the times tie,
    1 / b0 = 4 / b1 -> b1 = 4 b0 -> b = (0.6, 2.4), t = 5 / 3."""
    with jax.enable_x64(True):
        data = BarrierData(
            g=-jnp.eye(2, 3), h=jnp.zeros(2), g_on=jnp.ones(2, bool),
            e=jnp.asarray([[1.0, 1.0, 0.0]]), f=jnp.asarray([3.0]), e_on=jnp.ones(1, bool),
            epi_traffic=jnp.asarray([[1.0, 4.0]]), epi_on=jnp.ones((1, 2), bool),
        )
        res = barrier_minimize(lambda z, _: z[2], None, jnp.asarray([1.5, 1.5, 4.0]), data)
        np.testing.assert_allclose(res.z, [0.6, 2.4, 5.0 / 3.0], rtol=1e-8)
        assert bool(res.started_inside) and bool(res.finite)
        # Multipliers: mu sums to the weight 1; with tied times t*(B) = (1 + 4) / B, so
        # nu = -dt*/dB = 5 / 3^2.
        np.testing.assert_allclose(res.mu_epi.sum(), 1.0, rtol=1e-5)
        np.testing.assert_allclose(res.nu, [5.0 / 9.0], rtol=1e-6)
