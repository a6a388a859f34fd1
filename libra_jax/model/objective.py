"""The LIBRA model as pure JAX functions of the bandwidth vector.

    comm_time(bw)  = sum_k weight_k * max_d traffic_kd / bw_d        (no-overlap loop, s)
                     [+ general rows: sum_j w_j max_r (c_r + sum_d a_rd / bw_d
                                                       + sum_i m_ri time_i) + c0]
    step_time(bw)  = compute + comm_time(bw)                          (s)
    cost(bw)       = cost_rate @ bw                                   ($)

A collective takes the time of its slowest dimension (chunks pipeline across dimensions,
Won et al. 2024, Sec. III). Division is NaN-safe: a dimension a phase does not use contributes
exactly 0 and a zero gradient, whatever its bandwidth (double `where`).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp

from libra_jax.inputs.limits import as_instance
from libra_jax.model.problem import Problem
from libra_jax.types import LibraInputError, show


def _check_args(bw_gbps, p) -> None:
    """The public functions' argument types, checked where they are called or traced (plain
    Python: under jit the leaves are tracers but ``p`` is still a `Problem`, so nothing here
    depends on values and a traced call never raises): ``p`` a `Problem`, ``bw_gbps`` an
    array or a list of numbers, not a string, a mapping or None."""
    as_instance(p, Problem, "p")
    if bw_gbps is None or isinstance(bw_gbps, (str, bytes, Mapping)):
        raise LibraInputError(
            f"bw_gbps = {show(bw_gbps)}: expected an array of bandwidths (GB/s), one per "
            "dimension.")


def dim_times_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Time [K, D] (s) each distinct communicating phase spends on each dimension."""
    used = p.traffic_gb != 0  # NaN counts as used, so that it shows in the result
    safe_bw = jnp.where(used, bw_gbps[None, :], 1.0)
    return jnp.where(used, p.traffic_gb / safe_bw, 0.0)


def row_values_s(bw_gbps: jax.Array, p: Problem, piece_s: jax.Array | None = None):
    """Value [R] (s) of each general model row: const + sum_d coef_d / bw_d (+ the nested
    pieces' times ``piece_s`` [J], when given)."""
    used = p.row_gb != 0
    safe_bw = jnp.where(used, bw_gbps[None, :], 1.0)
    val = p.row_const_s + jnp.sum(jnp.where(used, p.row_gb / safe_bw, 0.0), axis=-1)
    if piece_s is not None:
        val = val + p.row_nest @ piece_s
    return val


def piece_max(vals: jax.Array, p: Problem) -> jax.Array:
    """[J] the largest of ``vals`` [R] over each piece's rows that take part (0 for none)."""
    top = jax.ops.segment_max(jnp.where(p.row_on, vals, -jnp.inf), p.row_piece,
                              num_segments=p.piece_weight.shape[0])
    return jnp.where(top == -jnp.inf, 0.0, top)


def piece_times_s(bw_gbps: jax.Array, p: Problem, reduce=None) -> jax.Array:
    """Time [J] (s) of each general model piece: the max over its rows (0 for padding).

    Nested rows need the times of earlier pieces, so the pieces are evaluated in order (one
    pass per piece; J passes when any row nests). ``reduce(values [R], piece_s [J]) -> [J]``
    replaces the max (e.g. by a smooth max); default the exact max.
    """
    num = p.piece_weight.shape[0]
    reduce = (lambda vals, _: piece_max(vals, p)) if reduce is None else reduce
    base = row_values_s(bw_gbps, p)
    first = reduce(base, jnp.zeros((num,), base.dtype))
    if num == 0:
        return first

    def body(j, piece_s):
        new = reduce(base + p.row_nest @ piece_s, piece_s)
        return piece_s.at[j].set(new[j])

    # Piece j only nests pieces < j, so after pass j its time is final.
    return jax.lax.cond(
        jnp.any(p.row_nest != 0),
        lambda: jax.lax.fori_loop(0, num, body, jnp.zeros((num,), base.dtype)),
        lambda: first,
    )


def comm_time_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Communication time of one step (s): sum over phases of the slowest dimension (LIBRA),
    plus the general model rows (`problem.ModelRows`) where there are any."""
    _check_args(bw_gbps, p)
    libra = jnp.sum(p.weight * jnp.max(dim_times_s(bw_gbps, p), axis=-1, initial=0.0))
    return libra + jnp.sum(p.piece_weight * piece_times_s(bw_gbps, p)) + p.comm_const_s


def step_time_s(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """No-overlap step time (s): all compute plus all communication."""
    _check_args(bw_gbps, p)
    return p.compute_s + comm_time_s(bw_gbps, p)


def network_cost_usd(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Network cost ($), linear in the bandwidths (0 without a cost model)."""
    _check_args(bw_gbps, p)
    return jnp.dot(p.cost_rate, bw_gbps)


def time_x_cost(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Step time (s) x network cost ($): the perf-per-cost objective."""
    _check_args(bw_gbps, p)
    return step_time_s(bw_gbps, p) * network_cost_usd(bw_gbps, p)


def max_violation(bw_gbps: jax.Array, p: Problem) -> jax.Array:
    """Largest constraint violation (GB/s; rows are unit-norm, so it is a distance)."""
    _check_args(bw_gbps, p)
    v = [jnp.max(p.lo - bw_gbps), jnp.max(bw_gbps - p.hi), jnp.asarray(0.0, bw_gbps.dtype)]
    if p.a_eq.shape[0]:
        v.append(jnp.max(jnp.abs(p.a_eq @ bw_gbps - p.b_eq)))
    if p.a_in.shape[0]:
        v.append(jnp.max(p.a_in @ bw_gbps - p.b_in))
    return jnp.max(jnp.stack(v))
