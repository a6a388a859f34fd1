"""The work of one chunk of a collective on each dimension, and its route through them: the
per-step messages, ring steps, latencies and local reductions of `pipelined.py`'s module
docstring, and the checks of the static options.

Split from `pipelined.py` (which re-exports the constants); the schedules over these stages are
in `pipelined_schedules.py`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.types import Block, Collective, LibraInputError, show

SCHEDULES = ("pipelined", "sequential", "balanced")
GIB_PER_GB = 2.0**30 / 1e9
_MAX_BALANCED_DIMS = 4
#: Most chunks per collective where the ``pipelined`` schedule is simulated
#: (`collective_time_ns`, `collective_breakdown_ns`): chunks x stages events over arrays of
#: ``chunks`` entries (ASTRA-sim runs use tens to hundreds). The pieces are closed form in the
#: count (`collective_pieces`), which takes up to `MAX_CHUNKS_CLOSED_FORM` (2**53: exact in
#: float64; e.g. 1e9 as the limit of many chunks).
MAX_CHUNKS = 4096
MAX_CHUNKS_CLOSED_FORM = 2**53


# ----------------------------------------------------------------------------- checks
def check_static(chunks, schedule, num_dims=None, simulated=False):
    """``simulated``: the list schedule is simulated (``pipelined``; at most `MAX_CHUNKS`)."""
    if not isinstance(schedule, str) or schedule not in SCHEDULES:
        raise LibraInputError(
            f"schedule: unknown value {show(schedule)}; expected one of "
            f"{', '.join(SCHEDULES)}."
        )
    most, name = ((MAX_CHUNKS, "MAX_CHUNKS") if simulated and schedule == "pipelined"
                  else (MAX_CHUNKS_CLOSED_FORM, "MAX_CHUNKS_CLOSED_FORM"))
    if (isinstance(chunks, (bool, np.bool_)) or not isinstance(chunks, (int, np.integer))
            or not 1 <= chunks <= most):
        raise LibraInputError(
            f"chunks: must be an integer in [1, {most}] (pipelined.{name}), got "
            f"{show(chunks)}.")
    if schedule == "balanced" and num_dims is not None and num_dims > _MAX_BALANCED_DIMS:
        raise LibraInputError(
            f"schedule: 'balanced' enumerates dimension orders and supports at most "
            f"{_MAX_BALANCED_DIMS} dimensions, got D={num_dims}."
        )


# ----------------------------------------------------------------------- per-dim work
class _Work(NamedTuple):
    """Per chunk, per dimension work split into the up and down pass ([..., D] each)."""

    up_bytes: jax.Array  # bytes sent per NPU on the up stage (x GiB factor: a coefficient)
    up_lat_ns: jax.Array  # steps x (hops latency + endpoint delay) + one endpoint delay
    up_red_ns: jax.Array  # local reduction
    down_bytes: jax.Array
    down_lat_ns: jax.Array
    up_steps: jax.Array  # int-valued float: 0 = stage disabled
    down_steps: jax.Array


def _as_float(x, xp=jnp):
    x = xp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(xp.result_type(float))
    return x


def chunk_work(collective, chunk_bytes, e, prefix, is_last, blocks, latency_ns,
                endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, xp=jnp):
    """Per-chunk ring work on every dimension (shapes [D]).

    Args:
      collective: [] int code. chunk_bytes: [] bytes per NPU per chunk (LIBRA input).
      e: [D] group sizes (1 = not involved). prefix: [D] product of the group sizes the
        chunk went through before this dimension (in its processing order).
      is_last: [D] bool, the all-reduce's AR dimension (last involved in the order).
      blocks: [D] Block codes. latency_ns: [D] per hop. endpoint_delay_ns: [].
      local_mem_bw_gbps: None or [] (1 GB = 1e9 bytes). gb_is_gib: static bool.
      xp: the array module (jax.numpy; numpy for host-only callers: the same operations,
        without JAX's op-by-op dispatch).
    """
    ar = collective == Collective.ALLREDUCE
    rs = collective == Collective.REDUCESCATTER
    ag = collective == Collective.ALLGATHER
    a2a = collective == Collective.ALLTOALL
    nm1 = e - 1.0
    # a2a messages never shrink: every NPU's c / n_d is passed on along the ring
    prefix = xp.where(a2a, 1.0, prefix)
    msg = xp.where(ag, chunk_bytes * prefix, chunk_bytes / (prefix * e))
    steps = xp.where(ar, 2.0 * nm1, xp.where(rs | ag, nm1, xp.where(a2a, e * nm1 / 2, 0.0)))
    split = ar & ~is_last  # RS on the way up, AG on the way down
    up_steps = xp.where(split, nm1, steps)
    down_steps = xp.where(split, nm1, 0.0)
    reduced = xp.where(ar | rs, nm1 * msg, 0.0)  # bytes reduced (first n-1 steps)
    unit = GIB_PER_GB ** -1 if gb_is_gib else 1.0  # bytes/(GiB/s) = bytes/(GB/s) * 1e9/2^30
    hops = xp.where(xp.asarray(blocks) == Block.SWITCH, 2.0, 1.0)
    per_step_ns = hops * latency_ns + endpoint_delay_ns
    if local_mem_bw_gbps is None:
        red_ns = xp.zeros_like(reduced)
    else:
        # in JAX on both paths: XLA may divide an array by a scalar as a product with its
        # reciprocal, which numpy does not, and the two must give the same bits
        red_ns = 3.0 * jnp.asarray(reduced) / local_mem_bw_gbps
        if xp is np:
            red_ns = np.asarray(red_ns)
    # A ring phase pays steps + 1 endpoint delays (Ring.cc): the packet inserted at
    # StreamInit and every receipt each go through a memory-bus bundle (PacketBundle ->
    # MemBus, `endpoint-delay` ns) before the next send or, after the last receipt, the
    # phase's exit (docs/pipelined_model.md, "Latency regime"). The one more is spread over
    # the steps, steps x (hops latency + endpoint delay + endpoint delay / steps), so that
    # with no endpoint delay every operation is the one it was (XLA may fuse a product and
    # a sum into one rounding: a separate "+ endpoint delay" would move the last bit).
    def lat_ns(steps):
        once = endpoint_delay_ns / xp.where(steps > 0, steps, 1.0)
        return steps * (per_step_ns + xp.where(steps > 0, once, 0.0))

    return _Work(
        up_bytes=up_steps * msg * unit,
        up_lat_ns=lat_ns(up_steps),
        up_red_ns=red_ns,
        down_bytes=down_steps * msg * unit,
        down_lat_ns=lat_ns(down_steps),
        up_steps=up_steps,
        down_steps=down_steps,
    )


def _prepare(collective, size_bytes, communicator, blocks, latency_ns, chunks,
             endpoint_delay_ns, local_mem_bw_gbps, xp=jnp):
    collective = xp.asarray(collective)
    m = _as_float(size_bytes, xp)
    g = xp.asarray(communicator)
    e = xp.where(g > 1, g, 1).astype(m.dtype)
    lat = xp.broadcast_to(_as_float(latency_ns, xp).astype(m.dtype), e.shape)
    ep = _as_float(endpoint_delay_ns, xp).astype(m.dtype)
    lmb = (None if local_mem_bw_gbps is None
           else _as_float(local_mem_bw_gbps, xp).astype(m.dtype))
    return collective, m / chunks, e, xp.asarray(blocks), lat, ep, lmb


def _default_order_work(collective, chunk_bytes, e, blocks, lat, ep, lmb, gb_is_gib, xp=jnp):
    """Work in the simulator's fixed order (up 0..D-1, all-gather down D-1..0)."""
    num_dims = e.shape[-1]
    idx = xp.arange(num_dims)
    involved = e > 1
    last = xp.max(xp.where(involved, idx, -1))
    is_last = idx == last
    up_prefix = xp.cumprod(xp.concatenate([xp.ones_like(e[:1]), e[:-1]]))
    down_prefix = xp.flip(xp.cumprod(xp.concatenate([xp.ones_like(e[:1]), xp.flip(e)[:-1]])))
    ag = collective == Collective.ALLGATHER
    prefix = xp.where(ag, down_prefix, up_prefix)
    w = chunk_work(collective, chunk_bytes, e, prefix, is_last, blocks, lat, ep, lmb, gb_is_gib,
                   xp)
    # All-gather travels D-1 -> 0: its dimension D-1 sits in the route's up slot D-1 and
    # its dimensions d < D-1 in the down slots.
    top = idx == num_dims - 1
    zero = xp.zeros_like(w.up_bytes)

    def pick(for_ag_up, for_ag_down, up, down):
        return (xp.where(ag, for_ag_up, up), xp.where(ag, for_ag_down, down))

    up_b, down_b = pick(xp.where(top, w.up_bytes, 0.0), xp.where(top, 0.0, w.up_bytes),
                        w.up_bytes, w.down_bytes)
    up_l, down_l = pick(xp.where(top, w.up_lat_ns, 0.0), xp.where(top, 0.0, w.up_lat_ns),
                        w.up_lat_ns, w.down_lat_ns)
    up_s, down_s = pick(xp.where(top, w.up_steps, 0.0), xp.where(top, 0.0, w.up_steps),
                        w.up_steps, w.down_steps)
    return _Work(up_b, up_l, xp.where(ag, zero, w.up_red_ns), down_b, down_l, up_s, down_s)


def _route(work, xp=jnp):
    """Stages of one chunk: up 0..D-1 then down D-2..0 (S = 2D-1).

    Returns (dims [S] int, a [S] bytes, l [S] ns, enabled [S] bool).
    """
    num_dims = work.up_bytes.shape[-1]
    dims = np.concatenate([np.arange(num_dims), np.arange(num_dims - 2, -1, -1)])
    down = slice(num_dims - 2, None, -1) if num_dims > 1 else slice(0, 0)
    a = xp.concatenate([work.up_bytes, work.down_bytes[down]])
    l = xp.concatenate([work.up_lat_ns + work.up_red_ns, work.down_lat_ns[down]])
    en = xp.concatenate([work.up_steps > 0, work.down_steps[down] > 0])
    return dims, a, l, en


# ------------------------------------------------------------- stage times at a bandwidth
def stage_times(collective, size_bytes, communicator, blocks, bw_gbps, latency_ns, chunks,
                 endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, xp=jnp):
    col, cb, e, blk, lat, ep, lmb = _prepare(collective, size_bytes, communicator, blocks,
                                             latency_ns, chunks, endpoint_delay_ns,
                                             local_mem_bw_gbps, xp)
    work = _default_order_work(col, cb, e, blk, lat, ep, lmb, gb_is_gib, xp)
    dims, a, l, en = _route(work, xp)
    bw = xp.asarray(bw_gbps)
    safe = xp.where(bw > 0, bw, 1.0)[dims]
    tau = xp.where(en, xp.where(a > 0, a / safe, 0.0) + l, 0.0)
    return (col, cb, e, blk, lat, ep, lmb), work, dims, a, l, en, tau
