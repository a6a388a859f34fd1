"""Bytes each collective puts on each network dimension (LIBRA, Won et al. ISPASS 2024,
Sec. IV-B), the reference's multi-rail hierarchical model.

For a collective of m bytes per NPU and a communicator g = [g_1..g_D] (g_d <= 0:
dimension not involved), with effective group sizes e_d = g_d if g_d > 0 else 1:

* All-Reduce, d = 1..D:   traffic_d = 2 m_d (e_d - 1) / e_d,  m_d = m / prod_{k<d} e_k
* Reduce-Scatter, same:   traffic_d =   m_d (e_d - 1) / e_d
* All-Gather, d = D..1:   traffic_d =   m'_d (e_d - 1),     m'_d = m * prod_{k>d} e_k
* All-to-All:             traffic_d =   m (e_d - 1) / e_d   (m is not changed)
* Send/Recv (point-to-point between neighbouring pipeline stages):
                          traffic_d = m on every involved dimension (e_d > 1); the
                          communicator names the dimensions the neighbours may differ in
* NONE:                   traffic_d = 0

A dimension with e_d = 1 carries nothing, so uninvolved dimensions get 0 by
construction. The time of dimension d is traffic_d / bw_d (bytes / GB/s = ns); that
belongs to the objective, not here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.types import Collective


def _exclusive_cumprod(x, xp=jnp):
    """[..., D] -> [..., D] with out[..., d] = prod(x[..., :d]) (1 for d = 0)."""
    ones = xp.ones_like(x[..., :1])
    return xp.cumprod(xp.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)


def traffic_bytes(collective, size_bytes, communicator):
    """Per-dimension traffic of collectives, in bytes per NPU.

    Pure jnp, no Python loops over dimensions; works under ``jit`` / ``vmap`` and is
    differentiable (linear) in ``size_bytes``. No implicit rank promotion. Called with
    numpy inputs only (building a problem on the host), it computes in numpy: the same
    operations, without compiling a program per operation.

    Args:
      collective: [...] int ``types.Collective`` codes.
      size_bytes: [...] collective size per NPU, bytes (float; ints are cast to the
        default float dtype).
      communicator: [..., D] NPUs of each dimension taking part; entries <= 0 (e.g. -1)
        mean the dimension is not involved.

    Returns:
      [..., D] float bytes each NPU sends on each dimension; 0 for NONE phases and for
      uninvolved dimensions.
    """
    xp = (jnp if any(isinstance(a, jax.Array) for a in (collective, size_bytes, communicator))
          else np)
    collective = xp.asarray(collective)
    m = xp.asarray(size_bytes)
    if not jnp.issubdtype(m.dtype, jnp.floating):
        m = m.astype(jnp.result_type(float))
    g = xp.asarray(communicator)
    e = xp.where(g > 0, g, 1).astype(m.dtype)  # effective group size, 1 = not involved
    m = m[..., None]
    kind = collective[..., None]

    frac = (e - 1.0) / e  # e >= 1, never divides by 0
    # Reduce-scatter style: the message shrinks by e_k on each earlier dimension.
    shrink = m / _exclusive_cumprod(e, xp)
    # All-gather walks from the last dimension down, growing by e_k on each later one.
    grow = m * xp.flip(_exclusive_cumprod(xp.flip(e, axis=-1), xp), axis=-1)

    zero = xp.zeros_like(shrink)
    out = xp.where(kind == Collective.ALLREDUCE, 2.0 * shrink * frac, zero)
    out = xp.where(kind == Collective.REDUCESCATTER, shrink * frac, out)
    out = xp.where(kind == Collective.ALLGATHER, grow * (e - 1.0), out)
    out = xp.where(kind == Collective.ALLTOALL, m * frac, out)
    out = xp.where((kind == Collective.SENDRECV) & (e > 1.0), m, out)
    return out
