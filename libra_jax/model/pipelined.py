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
"""

from __future__ import annotations

import functools
import itertools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.types import Block, Collective, LibraInputError, show

SCHEDULES = ("pipelined", "sequential", "balanced")
GIB_PER_GB = 2.0**30 / 1e9
_BIG = 1e30  # "no candidate" sentinel for min / argmin; never enters a gradient
_MAX_BALANCED_DIMS = 4
#: Most chunks per collective where the ``pipelined`` schedule is simulated
#: (`collective_time_ns`, `collective_breakdown_ns`): chunks x stages events over arrays of
#: ``chunks`` entries (ASTRA-sim runs use tens to hundreds). The pieces are closed form in the
#: count (`collective_pieces`), which takes up to `MAX_CHUNKS_CLOSED_FORM` (2**53: exact in
#: float64; e.g. 1e9 as the limit of many chunks).
MAX_CHUNKS = 4096
MAX_CHUNKS_CLOSED_FORM = 2**53


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


# ----------------------------------------------------------------------------- checks
def _check_static(chunks, schedule, num_dims=None, simulated=False):
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
    up_lat_ns: jax.Array  # steps x (hops latency + endpoint delay)
    up_red_ns: jax.Array  # local reduction
    down_bytes: jax.Array
    down_lat_ns: jax.Array
    up_steps: jax.Array  # int-valued float: 0 = stage disabled
    down_steps: jax.Array


def _as_float(x):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _chunk_work(collective, chunk_bytes, e, prefix, is_last, blocks, latency_ns,
                endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib):
    """Per-chunk ring work on every dimension (shapes [D]).

    Args:
      collective: [] int code. chunk_bytes: [] bytes per NPU per chunk (LIBRA input).
      e: [D] group sizes (1 = not involved). prefix: [D] product of the group sizes the
        chunk went through before this dimension (in its processing order).
      is_last: [D] bool, the all-reduce's AR dimension (last involved in the order).
      blocks: [D] Block codes. latency_ns: [D] per hop. endpoint_delay_ns: [].
      local_mem_bw_gbps: None or [] (1 GB = 1e9 bytes). gb_is_gib: static bool.
    """
    ar = collective == Collective.ALLREDUCE
    rs = collective == Collective.REDUCESCATTER
    ag = collective == Collective.ALLGATHER
    a2a = collective == Collective.ALLTOALL
    nm1 = e - 1.0
    # a2a messages never shrink: every NPU's c / n_d is passed on along the ring
    prefix = jnp.where(a2a, 1.0, prefix)
    msg = jnp.where(ag, chunk_bytes * prefix, chunk_bytes / (prefix * e))
    steps = jnp.where(ar, 2.0 * nm1, jnp.where(rs | ag, nm1, jnp.where(a2a, e * nm1 / 2, 0.0)))
    split = ar & ~is_last  # RS on the way up, AG on the way down
    up_steps = jnp.where(split, nm1, steps)
    down_steps = jnp.where(split, nm1, 0.0)
    reduced = jnp.where(ar | rs, nm1 * msg, 0.0)  # bytes reduced (first n-1 steps)
    unit = GIB_PER_GB ** -1 if gb_is_gib else 1.0  # bytes/(GiB/s) = bytes/(GB/s) * 1e9/2^30
    hops = jnp.where(jnp.asarray(blocks) == Block.SWITCH, 2.0, 1.0)
    per_step_ns = hops * latency_ns + endpoint_delay_ns
    if local_mem_bw_gbps is None:
        red_ns = jnp.zeros_like(reduced)
    else:
        red_ns = 3.0 * reduced / local_mem_bw_gbps
    return _Work(
        up_bytes=up_steps * msg * unit,
        up_lat_ns=up_steps * per_step_ns,
        up_red_ns=red_ns,
        down_bytes=down_steps * msg * unit,
        down_lat_ns=down_steps * per_step_ns,
        up_steps=up_steps,
        down_steps=down_steps,
    )


def _prepare(collective, size_bytes, communicator, blocks, latency_ns, chunks,
             endpoint_delay_ns, local_mem_bw_gbps):
    collective = jnp.asarray(collective)
    m = _as_float(size_bytes)
    g = jnp.asarray(communicator)
    e = jnp.where(g > 1, g, 1).astype(m.dtype)
    lat = jnp.broadcast_to(_as_float(latency_ns).astype(m.dtype), e.shape)
    ep = _as_float(endpoint_delay_ns).astype(m.dtype)
    lmb = None if local_mem_bw_gbps is None else _as_float(local_mem_bw_gbps).astype(m.dtype)
    return collective, m / chunks, e, jnp.asarray(blocks), lat, ep, lmb


def _default_order_work(collective, chunk_bytes, e, blocks, lat, ep, lmb, gb_is_gib):
    """Work in the simulator's fixed order (up 0..D-1, all-gather down D-1..0)."""
    num_dims = e.shape[-1]
    idx = jnp.arange(num_dims)
    involved = e > 1
    last = jnp.max(jnp.where(involved, idx, -1))
    is_last = idx == last
    up_prefix = jnp.cumprod(jnp.concatenate([jnp.ones_like(e[:1]), e[:-1]]))
    down_prefix = jnp.flip(jnp.cumprod(jnp.concatenate([jnp.ones_like(e[:1]), jnp.flip(e)[:-1]])))
    ag = collective == Collective.ALLGATHER
    prefix = jnp.where(ag, down_prefix, up_prefix)
    w = _chunk_work(collective, chunk_bytes, e, prefix, is_last, blocks, lat, ep, lmb, gb_is_gib)
    # All-gather travels D-1 -> 0: its dimension D-1 sits in the route's up slot D-1 and
    # its dimensions d < D-1 in the down slots.
    top = idx == num_dims - 1
    zero = jnp.zeros_like(w.up_bytes)

    def pick(for_ag_up, for_ag_down, up, down):
        return (jnp.where(ag, for_ag_up, up), jnp.where(ag, for_ag_down, down))

    up_b, down_b = pick(jnp.where(top, w.up_bytes, 0.0), jnp.where(top, 0.0, w.up_bytes),
                        w.up_bytes, w.down_bytes)
    up_l, down_l = pick(jnp.where(top, w.up_lat_ns, 0.0), jnp.where(top, 0.0, w.up_lat_ns),
                        w.up_lat_ns, w.down_lat_ns)
    up_s, down_s = pick(jnp.where(top, w.up_steps, 0.0), jnp.where(top, 0.0, w.up_steps),
                        w.up_steps, w.down_steps)
    return _Work(up_b, up_l, jnp.where(ag, zero, w.up_red_ns), down_b, down_l, up_s, down_s)


def _route(work):
    """Stages of one chunk: up 0..D-1 then down D-2..0 (S = 2D-1).

    Returns (dims [S] int, a [S] bytes, l [S] ns, enabled [S] bool).
    """
    num_dims = work.up_bytes.shape[-1]
    dims = np.concatenate([np.arange(num_dims), np.arange(num_dims - 2, -1, -1)])
    down = slice(num_dims - 2, None, -1) if num_dims > 1 else slice(0, 0)
    a = jnp.concatenate([work.up_bytes, work.down_bytes[down]])
    l = jnp.concatenate([work.up_lat_ns + work.up_red_ns, work.down_lat_ns[down]])
    en = jnp.concatenate([work.up_steps > 0, work.down_steps[down] > 0])
    return dims, a, l, en


# --------------------------------------------------------------------- the list schedule
def _list_schedule_ns(dims, tau, enabled, chunks):
    """Makespan of ``chunks`` identical chunks over the route, ASTRA-sim's policy.

    Each dimension runs one stage at a time, non-preemptively, in order of arrival at its
    queue (ASTRA-sim ``insert_stream``: all chunks of a collective share one priority, so
    a stream goes behind every waiting stream of its collective); simultaneous arrivals
    by chunk index. Disabled stages are skipped. ``chunks (S)`` events, a
    ``lax.fori_loop``.

    Args:
      dims: [S] static int dimension of each stage. tau: [S] stage time ns.
      enabled: [S] bool. chunks: static int.
    Returns:
      [] ns.
    """
    num_stages = dims.shape[0]
    num_dims = int(dims.max()) + 1
    dims = jnp.asarray(dims)
    s_idx = jnp.arange(num_stages + 1)
    en_ext = jnp.concatenate([enabled, jnp.array([True])])
    # next_en[i] = first enabled stage >= i (num_stages = done)
    cand = jnp.where(en_ext, s_idx, num_stages)
    next_en = jax.lax.cummin(cand, reverse=True)
    dims_ext = jnp.concatenate([dims, jnp.array([0])])
    tau_ext = jnp.concatenate([tau, jnp.zeros_like(tau[:1])])
    chunk_idx = jnp.arange(chunks)

    ptr0 = jnp.full((chunks,), next_en[0])
    ready0 = jnp.zeros((chunks,), tau.dtype)
    free0 = jnp.zeros((num_dims,), tau.dtype)

    def body(_, state):
        ptr, ready, free = state
        active = ptr < num_stages
        d_c = dims_ext[ptr]
        waiting = active[:, None] & (d_c[:, None] == jnp.arange(num_dims)[None, :])  # [k, D]
        min_ready = jnp.where(waiting, ready[:, None], _BIG).min(axis=0)  # [D]
        has = waiting.any(axis=0)
        start = jnp.where(has, jnp.maximum(free, min_ready), _BIG)
        d_star = jnp.argmin(start)
        t0 = start[d_star]
        # FIFO by arrival at the dimension's queue; simultaneous arrivals by chunk index
        eligible = waiting[:, d_star] & (ready == min_ready[d_star])
        c_star = jnp.argmin(jnp.where(eligible, chunk_idx, chunks))
        any_work = has.any()
        finish = t0 + tau_ext[ptr[c_star]]
        hit = (chunk_idx == c_star) & any_work
        ready = jnp.where(hit, finish, ready)
        ptr = jnp.where(hit, next_en[jnp.minimum(ptr + 1, num_stages)], ptr)
        free = jnp.where((jnp.arange(num_dims) == d_star) & any_work, finish, free)
        return ptr, ready, free

    _, ready, _ = jax.lax.fori_loop(0, chunks * num_stages, body, (ptr0, ready0, free0))
    return ready.max()


# ------------------------------------------------------------------------ balanced LP
@functools.lru_cache(maxsize=None)
def _orders(num_dims):
    return np.array(list(itertools.permutations(range(num_dims))), dtype=np.int32)


@functools.lru_cache(maxsize=None)
def _lp_vertices(num_dims, num_orders):
    """Candidate bases of min t s.t. L^T x <= t, x in simplex: equal-size subsets of
    dimensions (tight rows) and orders (support). Padded with -1; [N, D] each + sizes."""
    rows_d, rows_p, sizes = [], [], []
    for s in range(1, num_dims + 1):
        for ds in itertools.combinations(range(num_dims), s):
            for ps in itertools.combinations(range(num_orders), s):
                rows_d.append(list(ds) + [-1] * (num_dims - s))
                rows_p.append(list(ps) + [-1] * (num_dims - s))
                sizes.append(s)
    return np.array(rows_d, np.int32), np.array(rows_p, np.int32), np.array(sizes, np.int32)


def _mix_lp_value(load):
    """``min_{x in simplex} max_d sum_p x_p load[p, d]`` exactly, by vertex enumeration.

    Args:
      load: [P, D] per-chunk time of dimension d under order p, ns.
    Returns:
      [] ns.
    """
    num_orders, num_dims = load.shape
    vd, vp, vs = _lp_vertices(num_dims, num_orders)
    scale = jax.lax.stop_gradient(jnp.maximum(load.max(), 1e-30))
    ln = load / scale
    n = num_dims + 1
    j = np.arange(num_dims)
    in_s = j[None, :] < vs[:, None]  # [N, D] which padded slots are real
    # M[r, j] = ln[p_j, d_r] for r, j < s; M[r, D] = -1 for r < s; M[D, j] = 1 for j < s.
    sub = ln[np.maximum(vp, 0)[:, None, :], np.maximum(vd, 0)[:, :, None]]  # [N, r, j]
    real = in_s[:, :, None] & in_s[:, None, :]
    eye = np.eye(num_dims)[None]
    top = jnp.where(real, sub, jnp.where(~in_s[:, :, None] & (eye > 0), 1.0, 0.0))
    tcol = jnp.where(in_s, -1.0, 0.0)[:, :, None]
    bottom = jnp.concatenate([jnp.where(in_s, 1.0, 0.0), jnp.zeros((vs.shape[0], 1))], axis=1)
    mat = jnp.concatenate([jnp.concatenate([top, tcol], axis=2), bottom[:, None, :]], axis=1)
    rhs = jnp.zeros((vs.shape[0], n)).at[:, -1].set(1.0)
    det = jnp.linalg.det(jax.lax.stop_gradient(mat))
    ok = jnp.abs(det) > 1e-9
    mat = jnp.where(ok[:, None, None], mat, jnp.eye(n)[None])
    z = jnp.linalg.solve(mat, rhs[..., None])[..., 0]
    x, t = z[:, :num_dims], z[:, -1]
    x = jnp.where(in_s, x, 0.0)
    loads = jnp.einsum("nj,njd->nd", x, ln[np.maximum(vp, 0)])  # [N, D]
    feasible = ok & jnp.all(x >= -1e-9, axis=1) & jnp.all(loads <= t[:, None] + 1e-9, axis=1)
    v = jnp.where(feasible, t, _BIG).min()
    v = jnp.minimum(v, ln.max(axis=1).min())  # a single order is always feasible
    return v * scale


def _order_loads(collective, chunk_bytes, e, blocks, lat, ep, lmb, gb_is_gib, bw):
    """[P, D] per-chunk time of each dimension under every processing order."""
    orders = _orders(e.shape[-1])  # [P, D]: orders[p, pos] = dim
    pos = np.argsort(orders, axis=1)  # pos[p, d] = position of d in order p
    before = pos[:, None, :] < pos[:, :, None]  # [P, d, t]: t processed before d
    prefix = jnp.prod(jnp.where(before, e[None, None, :], 1.0), axis=-1)  # [P, D]
    last_pos = jnp.max(jnp.where(e[None, :] > 1, pos, -1), axis=1)
    is_last = pos == last_pos[:, None]

    def one(pre, il):
        w = _chunk_work(collective, chunk_bytes, e, pre, il, blocks, lat, ep, lmb, gb_is_gib)
        a = w.up_bytes + w.down_bytes
        return a, w.up_lat_ns + w.up_red_ns + w.down_lat_ns

    a, l = jax.vmap(one)(prefix, is_last)
    if bw is None:
        return a, l
    safe = jnp.where(bw > 0, bw, 1.0)
    return jnp.where(a > 0, a / safe, 0.0) + l


# ------------------------------------------------------------------------- public API
def _stage_times(collective, size_bytes, communicator, blocks, bw_gbps, latency_ns, chunks,
                 endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib):
    col, cb, e, blk, lat, ep, lmb = _prepare(collective, size_bytes, communicator, blocks,
                                             latency_ns, chunks, endpoint_delay_ns,
                                             local_mem_bw_gbps)
    work = _default_order_work(col, cb, e, blk, lat, ep, lmb, gb_is_gib)
    dims, a, l, en = _route(work)
    bw = jnp.asarray(bw_gbps)
    safe = jnp.where(bw > 0, bw, 1.0)[dims]
    tau = jnp.where(en, jnp.where(a > 0, a / safe, 0.0) + l, 0.0)
    return (col, cb, e, blk, lat, ep, lmb), work, dims, a, l, en, tau


_STATIC = ("chunks", "gb_is_gib", "schedule", "free_reduction")


def _static_kwargs(communicator, chunks, local_mem_bw_gbps, gb_is_gib, schedule,
                   simulated=True):
    """Validate the static options; ``local_mem_bw_gbps=None`` becomes a static flag."""
    _check_static(chunks, schedule, np.shape(communicator)[-1], simulated)
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
    prep, work, dims, a, l, en, tau = _stage_times(
        collective, size_bytes, communicator, blocks, bw_gbps, latency_ns, chunks,
        endpoint_delay_ns, lmb, gb_is_gib)
    if schedule == "sequential":
        return chunks * tau.sum()
    if schedule == "pipelined":
        return _list_schedule_ns(dims, tau, en, chunks)
    load = _order_loads(*prep, gb_is_gib, jnp.asarray(bw_gbps))  # [P, D]
    fluid = chunks * _mix_lp_value(load)
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
    prep, work, *_ = _stage_times(collective, size_bytes, communicator, blocks, bw_gbps,
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
    prep, work, dims, a_s, l_s, en, _ = _stage_times(
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
        w = _chunk_work(col, cb, e, prefix, is_last, blk, lat, ep, lmb, gb_is_gib)
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
    _check_static(chunks, "pipelined", np.shape(communicator)[-1])
    num_dims = np.shape(communicator)[-1]
    with jax.enable_x64(True):
        _, work, dims, a, l, en, _ = _stage_times(
            collective, jnp.asarray(size_bytes, jnp.float64), communicator, blocks,
            jnp.ones((num_dims,)), latency_ns, chunks, endpoint_delay_ns,
            None if local_mem_bw_gbps is None else local_mem_bw_gbps, bool(gb_is_gib))
        a, l, en = (np.asarray(jax.device_get(x)) for x in (a, l, en))
        w = jax.device_get(work)
    down = np.zeros(dims.shape, bool)
    if int(collective) == Collective.ALLREDUCE:
        down[num_dims:] = True
    back = slice(num_dims - 2, None, -1) if num_dims > 1 else slice(0, 0)
    steps = np.concatenate([np.asarray(w.up_steps), np.asarray(w.down_steps)[back]])
    red = np.concatenate([np.asarray(w.up_red_ns), np.zeros(len(dims) - num_dims)])
    return ChunkStages(np.asarray(dims), a.astype(np.float64), l.astype(np.float64),
                       en.astype(bool), down, steps.astype(np.float64),
                       red.astype(np.float64))
