"""Latency- and chunk-aware time of one collective on a multi-dimensional network.

The model replays how ASTRA-sim 2.x (analytical, congestion-unaware backend; ring
algorithm on every dimension, one chunk in flight per dimension) times a collective,
see ``docs/pipelined_model.md`` for the derivation and worked examples.

Per chunk (``c = size_bytes / chunks``, LIBRA's convention: size = per-NPU input) and
dimension ``d`` with ``n_d`` NPUs in the group and ``P_d`` = product of the group sizes the
chunk went through before reaching ``d``:

* message per ring step ``msg_d = c / (P_d n_d)`` (all-reduce, reduce-scatter,
  all-to-all) or ``c P_d`` (all-gather, whose message grows);
* steps ``2(n_d-1)`` (all-reduce), ``n_d-1`` (reduce-scatter, all-gather),
  ``n_d(n_d-1)/2`` (all-to-all);
* each step costs ``msg_d / bw_d + hops_d latency_d + endpoint_delay`` (hops 2 on a
  Switch, 1 on Ring / FullyConnected) plus, for the first ``n_d-1`` steps of a
  reduce-scatter / all-reduce, ``3 msg_d / local_mem_bw`` (read 2, write 1).

Summed over the chunks, the bandwidth part on ``d`` is LIBRA's ``traffic_bytes`` (a2a:
``size (n_d-1)/2``, the ring passes every message on).

Stages of a chunk, in order (the *route*): reduce-scatter and all-to-all go up the
dimensions 0..D-1; all-gather goes down D-1..0; all-reduce reduce-scatters up to the last
involved dimension L, all-reduces on L, then all-gathers back down, so every dimension
below L is used twice. A dimension serves one chunk-stage at a time, non-preemptively,
first come first served (ASTRA-sim ``generate_collective`` gives all chunks of a
collective one priority and ``insert_stream`` queues a stream behind its equals).
Schedules:

* ``pipelined``: that list schedule, simulated exactly (``k (2D-1)`` events). For
  reduce-scatter / all-gather / all-to-all it equals the flow-shop makespan
  ``sum_s tau_s + (k-1) max_s tau_s``. For all-reduce it is at least
  ``max_d [sum_{t<d} w_t + k w_d]`` (w_d: a chunk's work on d, both passes), with
  equality unless the priority rule leaves the busiest dimension idle.
* ``sequential``: ``k sum_s tau_s``; also a proven upper bound of ``pipelined``.
* ``balanced``: a lower bound for any scheduler that picks a dimension order per chunk
  (Themis-style): ``max(k v, min_pi sum_d tau_d(pi))`` with
  ``v = min_{x in simplex} max_d sum_pi x_pi tau_d(pi)`` (best mix of orders; an LP
  solved exactly by vertex enumeration, D <= 4).

The module is split by job: `pipelined_work.py` a chunk's work per dimension and its route,
`pipelined_schedules.py` the list schedule and the balanced LP; here the public functions.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.model.pipelined_schedules import list_schedule_ns, mix_lp_value, order_loads
from libra_jax.model.pipelined_work import (
    GIB_PER_GB,
    MAX_CHUNKS,
    MAX_CHUNKS_CLOSED_FORM,
    SCHEDULES,
    check_static,
    chunk_work,
    stage_times,
)
from libra_jax.types import Collective

__all__ = [
    "GIB_PER_GB",
    "MAX_CHUNKS",
    "MAX_CHUNKS_CLOSED_FORM",
    "SCHEDULES",
    "ChunkStages",
    "Pieces",
    "chunk_stages",
    "collective_breakdown_ns",
    "collective_pieces",
    "collective_time_ns",
    "pieces_time_ns",
    "workload_pieces",
]


class Pieces(NamedTuple):
    """A collective's time as a convex function of bandwidth:

    ``time_ns(bw) = c0 + sum_j w[j] max_{i: on[j,i]} (c[j,i] + sum_d a[j,i,d] / bw[d])``.

    Shapes depend only on D and the schedule (``pipelined``: J=1, I=3D-1; ``sequential``:
    J=1, I=1; ``balanced``: J=1, I=D+1); a leading batch axis [K] when stacked.
    """

    c0: jax.Array  # []        ns
    w: jax.Array  # [J]        >= 0, dimensionless
    c: jax.Array  # [J, I]     ns
    a: jax.Array  # [J, I, D]  bytes (GiB factor folded in), so a / (GB/s) = ns; >= 0
    on: jax.Array  # [J, I]    bool; False rows take no part


def pieces_time_ns(pieces, bw_gbps):
    """Evaluate a ``Pieces`` at a bandwidth.

    Args:
      pieces: ``Pieces`` (unbatched).
      bw_gbps: [D] bandwidth per dimension, GB/s (> 0 where some ``a`` is > 0).

    Returns:
      [] time in ns.
    """
    bw = jnp.asarray(bw_gbps)
    safe_bw = jnp.where(bw > 0, bw, 1.0)
    terms = jnp.where(pieces.a > 0, pieces.a / safe_bw[None, None, :], 0.0)
    rows = pieces.c + terms.sum(axis=-1)  # [J, I]
    rows = jnp.where(pieces.on, rows, 0.0)  # times >= 0, so 0 is neutral for max
    return pieces.c0 + jnp.sum(pieces.w * rows.max(axis=-1))


# ------------------------------------------------------------------------- public API
_STATIC = ("chunks", "gb_is_gib", "schedule", "free_reduction")


def _static_kwargs(communicator, chunks, local_mem_bw_gbps, gb_is_gib, schedule,
                   simulated=True):
    """Validate the static options; ``local_mem_bw_gbps=None`` becomes a static flag."""
    check_static(chunks, schedule, np.shape(communicator)[-1], simulated)
    free = local_mem_bw_gbps is None
    return dict(chunks=int(chunks), local_mem_bw_gbps=1.0 if free else local_mem_bw_gbps,
                gb_is_gib=bool(gb_is_gib), schedule=schedule, free_reduction=free)


def _time_impl(collective, size_bytes, communicator, blocks, bw_gbps, *, latency_ns,
               chunks, endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, schedule,
               free_reduction):
    """Time of one collective, ns (ring algorithm on every dimension).

    Args:
      collective: [] int ``types.Collective`` code.
      size_bytes: [] per-NPU size (LIBRA's convention: all-gather's input shard).
      communicator: [D] NPUs of each dimension in the group; <= 1: not involved.
      blocks: [D] ``types.Block`` codes (a Switch step takes 2 hops, others 1).
      bw_gbps: [D] per-NPU bandwidth per dimension, GB/s (GiB/s if ``gb_is_gib``).
      latency_ns: [D] (or []) link latency per hop, ns.
      chunks: static int >= 1, chunks the collective is split into.
      endpoint_delay_ns: [] fixed cost per message, ns.
      local_mem_bw_gbps: None (free reduction) or [] GB/s, 1 GB = 1e9 bytes.
      gb_is_gib: static; link bandwidth counts 1 GB = 2^30 bytes (ASTRA-sim).
      schedule: static, one of ``SCHEDULES``.

    Returns:
      [] ns. Differentiable in ``bw_gbps`` and ``size_bytes``.

    Raises:
      LibraInputError: unknown ``schedule``, ``chunks`` < 1, balanced with D > 4.
    """
    lmb = None if free_reduction else local_mem_bw_gbps
    prep, work, dims, a, l, en, tau = stage_times(
        collective, size_bytes, communicator, blocks, bw_gbps, latency_ns, chunks,
        endpoint_delay_ns, lmb, gb_is_gib)
    if schedule == "sequential":
        return chunks * tau.sum()
    if schedule == "pipelined":
        return list_schedule_ns(dims, tau, en, chunks)
    load = order_loads(*prep, gb_is_gib, jnp.asarray(bw_gbps))  # [P, D]
    fluid = chunks * mix_lp_value(load)
    one_chunk = load.sum(axis=1).min()
    return jnp.maximum(fluid, one_chunk)


def _breakdown_impl(collective, size_bytes, communicator, blocks, bw_gbps, *, latency_ns,
                    chunks, endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, schedule,
                    free_reduction):
    """Where the time goes, for an "evaluate" report (default dimension order).

    Returns a dict:
      ``bandwidth_ns`` [D]: all chunks' bytes on d / bw_d (LIBRA's traffic/bw);
      ``latency_ns`` [D]: all steps' hop latency and endpoint delay on d;
      ``reduction_ns`` [D]: local reductions done while d is busy;
      ``busy_ns`` [D]: their sum, the time dimension d is occupied;
      ``total_ns`` []: ``collective_time_ns`` with the same arguments;
      ``fill_drain_ns`` []: ``total_ns - max(busy_ns)``, time not covered by the
      busiest dimension (pipeline fill/drain and idling; negative for ``balanced``,
      which may move work between dimensions).
    """
    lmb = None if free_reduction else local_mem_bw_gbps
    prep, work, *_ = stage_times(collective, size_bytes, communicator, blocks, bw_gbps,
                                  latency_ns, chunks, endpoint_delay_ns, lmb, gb_is_gib)
    bw = jnp.asarray(bw_gbps)
    safe = jnp.where(bw > 0, bw, 1.0)
    by = work.up_bytes + work.down_bytes
    band = chunks * jnp.where(by > 0, by / safe, 0.0)
    latency = chunks * (work.up_lat_ns + work.down_lat_ns)
    red = chunks * work.up_red_ns
    busy = band + latency + red
    total = _time_impl(collective, size_bytes, communicator, blocks, bw_gbps,
                       latency_ns=latency_ns, chunks=chunks,
                       endpoint_delay_ns=endpoint_delay_ns,
                       local_mem_bw_gbps=local_mem_bw_gbps, gb_is_gib=gb_is_gib,
                       schedule=schedule, free_reduction=free_reduction)
    return dict(bandwidth_ns=band, latency_ns=latency, reduction_ns=red, busy_ns=busy,
                total_ns=total, fill_drain_ns=total - busy.max())


def _pieces_impl(collective, size_bytes, communicator, blocks, *, latency_ns, chunks,
                 endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, schedule, free_reduction):
    """The model as ``Pieces`` (convex in bandwidth), c0 = 0 and J = 1 throughout.

    * ``sequential`` (I=1): exact, one row ``k sum_s tau_s``.
    * ``pipelined`` (I=D+S=3D-1): rows d < D: ``head_d + k work_d + tail_d`` (stage
      times before the chunk's first and after its last use of d); rows D+s:
      ``sum_t tau_t + (k-1) tau_s`` (flow shop through stage s). Exact for
      reduce-scatter, all-gather, all-to-all; for all-reduce a lower bound of the FIFO
      list schedule, exact unless FIFO idles the busiest dimension (the list schedule
      is not convex in bandwidth; ``sequential`` is a convex upper bound).
    * ``balanced`` (I=D+1): rows ``k tau_d^min`` and ``sum_d tau_d^min`` with
      ``tau_d^min`` d's per-chunk time in its cheapest position; a convex lower bound
      of the balanced bound (the best mix of orders is an LP value, not convex).

    Returns:
      ``Pieces`` with c0 [], w [1], c [1, I], a [1, I, D], on [1, I].
    """
    num_dims = np.shape(communicator)[-1]
    ones_bw = jnp.ones((num_dims,))
    lmb = None if free_reduction else local_mem_bw_gbps
    prep, work, dims, a_s, l_s, en, _ = stage_times(
        collective, size_bytes, communicator, blocks, ones_bw, latency_ns, chunks,
        endpoint_delay_ns, lmb, gb_is_gib)
    dtype = a_s.dtype
    onehot = jnp.asarray(dims[:, None] == np.arange(num_dims)[None, :], dtype)  # [S, D]
    a_sd = a_s[:, None] * onehot  # [S, D] a of each stage on its dimension
    if schedule == "sequential":
        a = (chunks * a_sd.sum(axis=0))[None, None, :]
        c = (chunks * jnp.where(en, l_s, 0.0).sum())[None, None]
        on = jnp.ones((1, 1), bool)
    elif schedule == "pipelined":
        s = jnp.arange(dims.shape[0])
        on_d = en[:, None] & (onehot > 0)  # [S, D] stage s uses d
        first = jnp.where(on_d, s[:, None], dims.shape[0]).min(axis=0)  # [D]
        last = jnp.where(on_d, s[:, None], -1).max(axis=0)
        coef = jnp.where(on_d.T, float(chunks),
                         ((s[None, :] < first[:, None]) | (s[None, :] > last[:, None]))
                         .astype(dtype))  # [D(row), S]
        flow = 1.0 + (chunks - 1.0) * jnp.eye(dims.shape[0], dtype=dtype)  # [S(row), S]
        coef = jnp.concatenate([coef, flow]) * en[None, :].astype(dtype)  # [D+S, S]
        a = (coef @ a_sd)[None]  # [1, D+S, D]
        c = (coef @ l_s)[None]
        on = jnp.concatenate([on_d.any(axis=0), en])[None]
    else:
        col, cb, e, blk, lat, ep, lmb = prep
        involved = e > 1
        others = jnp.prod(e) / e
        ag = col == Collective.ALLGATHER
        prefix = jnp.where(ag, 1.0, others)
        is_last = jnp.ones_like(involved)  # cheapest: last (AG: first, same totals)
        w = chunk_work(col, cb, e, prefix, is_last, blk, lat, ep, lmb, gb_is_gib)
        a_min = w.up_bytes + w.down_bytes
        l_min = w.up_lat_ns + w.up_red_ns + w.down_lat_ns
        a = jnp.concatenate([chunks * jnp.diag(a_min), a_min[None, :]])[None]
        c = jnp.concatenate([chunks * l_min, l_min.sum()[None]])[None]
        on = jnp.concatenate([involved, involved.any()[None]])[None]
    return Pieces(c0=jnp.zeros((), dtype), w=jnp.ones((1,), dtype), c=c, a=a, on=on)


# The public functions validate the static options, then call a compiled body (eager
# calls hit jit's cache; inside an outer jit / vmap the body is inlined).
_time_jit = jax.jit(_time_impl, static_argnames=_STATIC)
_breakdown_jit = jax.jit(_breakdown_impl, static_argnames=_STATIC)
_pieces_jit = jax.jit(_pieces_impl, static_argnames=_STATIC)


def collective_time_ns(collective, size_bytes, communicator, blocks, bw_gbps, *, latency_ns,
                       chunks, endpoint_delay_ns=0.0, local_mem_bw_gbps=None,
                       gb_is_gib=False, schedule="pipelined"):
    return _time_jit(collective, size_bytes, communicator, blocks, bw_gbps,
                     latency_ns=latency_ns, endpoint_delay_ns=endpoint_delay_ns,
                     **_static_kwargs(communicator, chunks, local_mem_bw_gbps, gb_is_gib,
                                      schedule))


def collective_breakdown_ns(collective, size_bytes, communicator, blocks, bw_gbps, *,
                            latency_ns, chunks, endpoint_delay_ns=0.0,
                            local_mem_bw_gbps=None, gb_is_gib=False, schedule="pipelined"):
    return _breakdown_jit(collective, size_bytes, communicator, blocks, bw_gbps,
                          latency_ns=latency_ns, endpoint_delay_ns=endpoint_delay_ns,
                          **_static_kwargs(communicator, chunks, local_mem_bw_gbps,
                                           gb_is_gib, schedule))


def collective_pieces(collective, size_bytes, communicator, blocks, *, latency_ns, chunks,
                      endpoint_delay_ns=0.0, local_mem_bw_gbps=None, gb_is_gib=False,
                      schedule="pipelined"):
    return _pieces_jit(collective, size_bytes, communicator, blocks, latency_ns=latency_ns,
                       endpoint_delay_ns=endpoint_delay_ns,
                       **_static_kwargs(communicator, chunks, local_mem_bw_gbps, gb_is_gib,
                                        schedule, simulated=False))


collective_time_ns.__doc__ = _time_impl.__doc__
collective_breakdown_ns.__doc__ = _breakdown_impl.__doc__
collective_pieces.__doc__ = _pieces_impl.__doc__


def workload_pieces(collective, size_bytes, communicator, blocks, *, latency_ns, chunks,
                    endpoint_delay_ns=0.0, local_mem_bw_gbps=None, gb_is_gib=False,
                    schedule="pipelined"):
    """``collective_pieces`` over a workload: collective [K], size_bytes [K],
    communicator [K, D] (blocks [D] and latency_ns [D] shared) -> Pieces with a leading
    [K] axis. Sum ``jax.vmap(pieces_time_ns, (0, None))(p, bw)`` for the total."""
    fn = functools.partial(collective_pieces, blocks=blocks, latency_ns=latency_ns,
                           chunks=chunks, endpoint_delay_ns=endpoint_delay_ns,
                           local_mem_bw_gbps=local_mem_bw_gbps, gb_is_gib=gb_is_gib,
                           schedule=schedule)
    return jax.vmap(lambda c, s, g: fn(c, s, g))(jnp.asarray(collective),
                                                 jnp.asarray(size_bytes),
                                                 jnp.asarray(communicator))


class ChunkStages(NamedTuple):
    """One chunk's stages in the simulator's fixed order (the route, S = 2D-1 slots).

    ``dims`` [S] dimension of each slot; ``bytes_coef`` [S] bytes sent per NPU (already
    x 1e9/2^30 under ``gb_is_gib``, so the stage's bandwidth time is ``bytes_coef / bw``
    ns with bw in GB/s); ``fixed_ns`` [S] hop latency, endpoint delays and local
    reductions; ``enabled`` [S]; ``down`` [S] True for an all-reduce's all-gather slots
    (its second pass down the dimensions, which ASTRA-sim puts on the second half of a
    dimension's queues); ``steps`` [S] ring messages each NPU sends one after another
    in the slot (every one carries ``bytes_coef / steps``); ``reduction_ns`` [S] the
    local-reduction part of ``fixed_ns``.
    """

    dims: np.ndarray
    bytes_coef: np.ndarray
    fixed_ns: np.ndarray
    enabled: np.ndarray
    down: np.ndarray
    steps: np.ndarray
    reduction_ns: np.ndarray


def chunk_stages(collective, size_bytes, communicator, blocks, *, latency_ns, chunks,
                 endpoint_delay_ns=0.0, local_mem_bw_gbps=None, gb_is_gib=False) -> ChunkStages:
    """Every chunk's stages of one collective (all chunks are alike), for the step
    simulator (`step.py`); the same numbers `collective_time_ns` schedules. Host numpy.

    Args: as `collective_time_ns` (one collective), without the bandwidth.
    """
    check_static(chunks, "pipelined", np.shape(communicator)[-1])
    num_dims = np.shape(communicator)[-1]
    # numpy, float64: the operations `collective_time_ns` runs, to the same bits, without
    # JAX's op-by-op dispatch (a fresh process would spend a second compiling them)
    with jax.enable_x64(True):
        _, work, dims, a, l, en, _ = stage_times(
            np.asarray(collective), np.asarray(size_bytes, np.float64),
            np.asarray(communicator), np.asarray(blocks), np.ones((num_dims,)),
            np.asarray(latency_ns, np.float64), chunks, np.asarray(endpoint_delay_ns, np.float64),
            None if local_mem_bw_gbps is None else np.asarray(local_mem_bw_gbps, np.float64),
            bool(gb_is_gib), xp=np)
    a, l, en = (np.asarray(x) for x in (a, l, en))
    w = work
    down = np.zeros(dims.shape, bool)
    if int(collective) == Collective.ALLREDUCE:
        down[num_dims:] = True
    back = slice(num_dims - 2, None, -1) if num_dims > 1 else slice(0, 0)
    steps = np.concatenate([np.asarray(w.up_steps), np.asarray(w.down_steps)[back]])
    red = np.concatenate([np.asarray(w.up_red_ns), np.zeros(len(dims) - num_dims)])
    return ChunkStages(np.asarray(dims), a.astype(np.float64), l.astype(np.float64),
                       en.astype(bool), down, steps.astype(np.float64),
                       red.astype(np.float64))
