"""The LIBRA model as pure JAX functions of the bandwidth vector.

    comm_time(bw)  = sum_k weight_k * max_d traffic_kd / bw_d        (no-overlap loop, s)
                     [+ general rows: sum_j w_j max_r (c_r + sum_d a_rd / bw_d) + c0]
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


def row_values_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Value [R] (s) of each general model row: const + sum_d coef_d / bw_d."""
    used = p.row_gb != 0
    safe_bw = jnp.where(used, bw_gbps[None, :], 1.0)
    return p.row_const_s + jnp.sum(jnp.where(used, p.row_gb / safe_bw, 0.0), axis=-1)


def piece_times_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Time [J] (s) of each general model piece: the max over its rows (0 for padding)."""
    vals = jnp.where(p.row_on, row_values_s(bw_gbps, p), -jnp.inf)
    top = jax.ops.segment_max(vals, p.row_piece, num_segments=p.piece_weight.shape[0])
    return jnp.where(top == -jnp.inf, 0.0, top)


def comm_time_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Communication time of one step (s): sum over phases of the slowest dimension (LIBRA),
    plus the general model rows (`problem.ModelRows`) where there are any."""
    libra = jnp.sum(p.weight * jnp.max(dim_times_s(bw_gbps, p), axis=-1, initial=0.0))
    return libra + jnp.sum(p.piece_weight * piece_times_s(bw_gbps, p)) + p.comm_const_s


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
