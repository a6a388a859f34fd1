"""The LIBRA model as pure JAX functions of the bandwidth vector.

    comm_time(bw)  = sum_k weight_k * max_d traffic_kd / bw_d        (no-overlap loop, s)
    step_time(bw)  = compute + comm_time(bw)                          (s)
    cost(bw)       = cost_rate @ bw                                   ($)

A collective takes the time of its slowest dimension (chunks pipeline across dimensions,
Won et al. 2024, Sec. III). Division is NaN-safe: a dimension a phase does not use contributes
exactly 0 and a zero gradient, whatever its bandwidth (double `where`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from libra_jax.problem import Problem


def dim_times_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Time [K, D] (s) each distinct communicating phase spends on each dimension."""
    used = p.traffic_gb != 0  # NaN counts as used, so that it shows in the result
    safe_bw = jnp.where(used, bw_gbps[None, :], 1.0)
    return jnp.where(used, p.traffic_gb / safe_bw, 0.0)


def comm_time_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Communication time of one step (s): sum over phases of the slowest dimension."""
    return jnp.sum(p.weight * jnp.max(dim_times_s(bw_gbps, p), axis=-1, initial=0.0))


def step_time_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """No-overlap step time (s): all compute plus all communication."""
    return p.compute_s + comm_time_s(bw_gbps, p)


def network_cost_usd(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Network cost ($), linear in the bandwidths (0 without a cost model)."""
    return jnp.dot(p.cost_rate, bw_gbps)


def time_x_cost(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Step time (s) x network cost ($): the perf-per-cost objective."""
    return step_time_s(bw_gbps, p) * network_cost_usd(bw_gbps, p)


def max_violation(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Largest constraint violation (GB/s; rows are unit-norm, so it is a distance)."""
    v = [jnp.max(p.lo - bw_gbps), jnp.max(bw_gbps - p.hi), jnp.asarray(0.0, bw_gbps.dtype)]
    if p.a_eq.shape[0]:
        v.append(jnp.max(jnp.abs(p.a_eq @ bw_gbps - p.b_eq)))
    if p.a_in.shape[0]:
        v.append(jnp.max(p.a_in @ bw_gbps - p.b_in))
    return jnp.max(jnp.stack(v))
