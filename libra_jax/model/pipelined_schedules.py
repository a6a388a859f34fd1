"""The schedules of a collective's chunk-stages: the list schedule ASTRA-sim runs (simulated
exactly, ``pipelined``) and the ``balanced`` bound's best mix of dimension orders (an LP solved
by vertex enumeration). See `pipelined.py`'s module docstring; split from it.
"""

from __future__ import annotations

import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.model.pipelined_work import chunk_work

_BIG = 1e30  # "no candidate" sentinel for min / argmin; never enters a gradient


# --------------------------------------------------------------------- the list schedule
def list_schedule_ns(dims, tau, enabled, chunks):
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


def mix_lp_value(load):
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


def order_loads(collective, chunk_bytes, e, blocks, lat, ep, lmb, gb_is_gib, bw):
    """[P, D] per-chunk time of each dimension under every processing order."""
    orders = _orders(e.shape[-1])  # [P, D]: orders[p, pos] = dim
    pos = np.argsort(orders, axis=1)  # pos[p, d] = position of d in order p
    before = pos[:, None, :] < pos[:, :, None]  # [P, d, t]: t processed before d
    prefix = jnp.prod(jnp.where(before, e[None, None, :], 1.0), axis=-1)  # [P, D]
    last_pos = jnp.max(jnp.where(e[None, :] > 1, pos, -1), axis=1)
    is_last = pos == last_pos[:, None]

    def one(pre, il):
        w = chunk_work(collective, chunk_bytes, e, pre, il, blocks, lat, ep, lmb, gb_is_gib)
        a = w.up_bytes + w.down_bytes
        return a, w.up_lat_ns + w.up_red_ns + w.down_lat_ns

    a, l = jax.vmap(one)(prefix, is_last)
    if bw is None:
        return a, l
    safe = jnp.where(bw > 0, bw, 1.0)
    return jnp.where(a > 0, a / safe, 0.0) + l
