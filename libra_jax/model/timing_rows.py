"""The builders of timed problems: a workload's collectives as convex pieces, the training
loop as general model rows (`problem.ModelRows`), the problem built with them
(`build_timed_problem`), and the size gradient of the optimum read from the rows' multipliers.

Every piece is a sum or maximum of terms c + a / bw (a >= 0), so the step time stays convex
in the bandwidths (`timing.py`'s module docstring says which models and loops). Split from
`timing.py` (which re-exports every name); the spec is `timing_spec.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.inputs.limits import as_instance
from libra_jax.inputs.topology import Network
from libra_jax.inputs.workload import Workload
from libra_jax.model import pipelined, runtime, step, step_partial
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.problem import (
    ConstraintSpec,
    ModelRows,
    Problem,
    build_problem,
    check_spec,
)
from libra_jax.model.timing_spec import HOPS, TimingModel, check_timing
from libra_jax.types import Collective

#: `_build_rows` origin of a dimension-work row of the contention model (sizes enter it
#: through several collectives; `size_gradient_ns_per_byte` does not split those).
WORK_ROW = "work"


# ------------------------------------------------------------------------ collectives


def _issues(workload) -> np.ndarray:
    """[L, 3] how many times each phase's collective is issued per step (>= 1)."""
    issues = getattr(workload, "issues", None)
    if issues is None:
        return np.ones(np.asarray(workload.collective).shape, np.int64)
    return np.asarray(issues, np.int64)


def unique_collectives(workload, dedupe: bool = True):
    """Distinct communicating (collective, size per issue, communicator) of a workload.

    Returns (keys [(code, size, comm tuple)], index [L, 3] int: key of each layer-phase or
    -1 for none, issues [L, 3]: how many times the layer-phase issues its key per step).
    With ``dedupe=False`` every communicating layer-phase gets its own key (its own pieces
    in the rows, so that its multipliers say what it is worth)."""
    code = np.asarray(workload.collective)
    issues = _issues(workload)
    size = np.asarray(workload.size_bytes, np.float64) / issues
    comm = np.asarray(workload.communicator)
    traffic = np.asarray(traffic_bytes(code, size, comm))
    keys, index = {}, -np.ones(code.shape, int)
    for l, p in zip(*np.nonzero(code != Collective.NONE)):
        if not np.any(traffic[l, p] > 0):
            continue  # no dimension involved: the collective is free
        key = (int(code[l, p]), float(size[l, p]), tuple(int(g) for g in comm[l, p]))
        index[l, p] = keys.setdefault(key if dedupe else (key, int(l), int(p)), len(keys))
    return [k if dedupe else k[0] for k in keys], index, issues


def spans_part(comm, network) -> bool:
    """Whether a communicator (NPUs per dimension) takes part of some dimension: under
    ``model=pipelined`` a ``pg_name`` flat ring (`step_partial`), not a hierarchical one."""
    return any(int(g) > 1 and int(g) != int(n) for g, n in zip(comm, network.npus))


def streams(code, size, network, tm: TimingModel) -> tuple[int, float]:
    """(chunks, size) of a collective as ASTRA-sim runs it (`step.chunk_split`): a size that
    ``tm.chunks`` does not divide is one stream more, all of ``floor(size / chunks)`` bytes,
    and streams below the machine's NPU count in bytes are raised to it. The configured
    (chunks, size) where neither applies (bit for bit what they were)."""
    k, chunk = step.chunk_split(int(code), float(size), int(tm.chunks), network.num_npus)
    raised = code != Collective.ALLGATHER and chunk > int(round(size)) // int(tm.chunks)
    if k == int(tm.chunks) and not raised:
        return int(tm.chunks), size
    return k, float(k * chunk)


def collective_pieces(keys, network, tm: TimingModel):
    """Each distinct collective as pieces (s, GB): lists of (c0_s, w [J], c [J, I], a [J, I, D],
    on [J, I]) per key; time_s(bw) = c0 + sum_j w_j max_{i on} (c_ji + sum_d a_jid / bw_d)."""
    d = network.num_dims
    out = []
    if not keys:
        return out
    code = np.asarray([k[0] for k in keys], np.int32)
    size = np.asarray([k[1] for k in keys])
    comm = np.asarray([k[2] for k in keys], np.int32).reshape(-1, d)
    if tm.model == "libra":
        traffic = np.asarray(traffic_bytes(code, size, comm))  # [U, D] bytes
        for t in traffic:
            on = t > 0
            a = np.where(on[:, None], np.diag(t), 0.0)[None] / 1e9
            out.append((0.0, np.ones(1), np.zeros((1, d)), a, on[None]))
        return out
    blocks = np.asarray(network.block_codes, np.int32)
    lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
    p2p = code == Collective.SENDRECV
    pg = np.asarray([not p2p[u] and spans_part(comm[u], network) for u in range(len(keys))],
                    bool)
    batch = ~p2p & ~pg
    # one batch per stream count (`streams`): pieces[u] of each batched key
    split = [streams(code[u], size[u], network, tm) if batch[u] else None
             for u in range(len(keys))]
    pieces = {}
    for k in sorted({sp[0] for sp in split if sp is not None}):
        us = [u for u, sp in enumerate(split) if sp is not None and sp[0] == k]
        with jax.enable_x64(True):
            got = jax.device_get(pipelined.workload_pieces(
                code[us], np.asarray([split[u][1] for u in us]), comm[us], blocks,
                latency_ns=lat, chunks=k,
                endpoint_delay_ns=tm.endpoint_delay_ns,
                local_mem_bw_gbps=tm.local_mem_bw_gbps, gb_is_gib=tm.gb_is_gib,
                schedule=tm.schedule))
        pieces.update({u: type(got)(*(f[i] for f in got)) for i, u in enumerate(us)})
    gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
    factor = step.link_factor(blocks, tm.network_backend)  # [D] aware: 2 through a Switch
    for u in range(len(keys)):
        if p2p[u]:
            # Point-to-point to the neighbouring stage: one message of m bytes over one
            # involved dimension (stage pairs on different dimensions run at once).
            used = comm[u] > 1
            a = np.where(used, size[u] / gib * factor, 0.0)
            c = np.where(used, HOPS[blocks] * lat + tm.endpoint_delay_ns, 0.0)
            rows_on = used[None]
            out.append((0.0, np.ones(1), c[None] / 1e9,
                        np.where(used[:, None], np.diag(a), 0.0)[None] / 1e9, rows_on))
            continue
        if pg[u]:
            # a group over part of a dimension: a pg_name flat ring on dimension 0's queue
            # (`step_partial.pg_ring_piece`: the same bound for every member)
            c_s, a_gb = step_partial.pg_ring_piece(
                int(code[u]), float(size[u]), step_partial.partial_members(comm[u],
                                                                            network.npus),
                network, tm)
            out.append((0.0, np.ones(1), np.full((1, 1), c_s), a_gb[None, None],
                        np.ones((1, 1), bool)))
            continue
        if not tm.is_default_runtime:
            out.append(_runtime_pieces(keys[u], network, tm))
        elif tm.queues_per_dim > 1:
            out.append(_multi_queue_pieces(keys[u], network, tm))
        else:
            p = pieces[u]
            out.append((float(p.c0) / 1e9, np.asarray(p.w, np.float64),
                        np.asarray(p.c, np.float64) / 1e9,
                        np.asarray(p.a, np.float64) * factor / 1e9,
                        np.asarray(p.on, bool)))
    return out


def concurrency(tm: TimingModel) -> int:
    """Most stages a dimension runs at once: its queues x the streams each runs
    (``ceil(active_chunks_per_dim / queues_per_dim)``, as ASTRA-sim's scheduler unit)."""
    q = int(tm.queues_per_dim)
    return q * -(-int(tm.active_chunks_per_dim) // q)


def _runtime_pieces(key, network, tm: TimingModel):
    """A collective's convex lower bound under a runtime other than ASTRA-sim's default
    (`runtime.bound_work`: each dimension's least work over the orders its chunks may take,
    over the stages it runs at once, and one chunk's least route). (s, GB) like
    `collective_pieces`."""
    code, size, comm = key
    d = network.num_dims
    blocks = np.asarray(network.block_codes, np.int32)
    factor = step.link_factor(blocks, tm.network_backend)
    dim_c, dim_a, route_c, route_a = runtime.bound_work(code, size, comm, blocks, tm)
    share = concurrency(tm)
    c = np.concatenate([dim_c / share, [route_c]])
    a = np.zeros((d + 1, d))
    a[:d] = np.diag(dim_a * factor / share)
    a[d] = route_a * factor
    on = np.concatenate([dim_a + dim_c > 0, [True]])
    return (0.0, np.ones(1), c[None] / 1e9, a[None] / 1e9, on[None])


def _multi_queue_pieces(key, network, tm: TimingModel):
    """A collective's convex lower bound when a dimension has several queues: with q
    queues a dimension runs up to q of its stages at once (an all-reduce's way up beside
    its way down), so the one-queue rows do not bound it. Rows: each dimension's work / q,
    and one chunk's whole route. (s, GB) like `collective_pieces`."""
    code, size, comm = key
    d = network.num_dims
    blocks = np.asarray(network.block_codes, np.int32)
    lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
    factor = step.link_factor(blocks, tm.network_backend)
    chunks, size = streams(code, size, network, tm)
    st = pipelined.chunk_stages(code, size, np.asarray(comm, np.int32), blocks, latency_ns=lat,
                                chunks=chunks, endpoint_delay_ns=tm.endpoint_delay_ns,
                                local_mem_bw_gbps=tm.local_mem_bw_gbps, gb_is_gib=tm.gb_is_gib)
    # rows 0..D-1: the stages up (and an all-reduce's last stage) per dimension, rows
    # D..2D-1 an all-reduce's way down (it has its own half of the queues), row 2D the route
    q = tm.queues_per_dim
    first, last = (q // 2, q - q // 2) if code == Collective.ALLREDUCE else (q, q)
    c, a = np.zeros(2 * d + 1), np.zeros((2 * d + 1, d))
    for s_dim, coef, fixed, en, down in zip(st.dims, st.bytes_coef, st.fixed_ns, st.enabled,
                                            st.down):
        if en:
            row, share = (d + s_dim, last) if down else (s_dim, first)
            c[row] += chunks * fixed / share
            a[row, s_dim] += chunks * coef * factor[s_dim] / share
            c[2 * d] += fixed
            a[2 * d, s_dim] += coef * factor[s_dim]
    on = np.concatenate([a[:2 * d].sum(axis=1) + c[:2 * d] > 0, [True]])
    return (0.0, np.ones(1), c[None] / 1e9, a[None] / 1e9, on[None])


# ------------------------------------------------------------------------ rows


class _RowBuilder:
    """Accumulates pieces and rows; a row is (piece, const s, coef GB [D], nest {piece: m})."""

    def __init__(self, num_dims: int):
        self.d = num_dims
        self.weight: list[float] = []
        self.rows: list[tuple[int, float, np.ndarray, dict]] = []
        self.const0 = 0.0

    def piece(self, weight: float = 0.0) -> int:
        self.weight.append(float(weight))
        return len(self.weight) - 1

    def row(self, piece: int, const: float, coef=None, nest: dict | None = None) -> None:
        coef = np.zeros(self.d) if coef is None else np.asarray(coef, np.float64)
        self.rows.append((piece, float(const), coef, dict(nest or {})))

    def build(self) -> ModelRows:
        j, r = len(self.weight), len(self.rows)
        nest = np.zeros((r, j))
        for i, (_, _, _, m) in enumerate(self.rows):
            for piece, v in m.items():
                nest[i, piece] += v
        return ModelRows(
            weight=np.asarray(self.weight), piece=np.asarray([x[0] for x in self.rows], int),
            const_s=np.asarray([x[1] for x in self.rows]),
            coef_gb=np.asarray([x[2] for x in self.rows]).reshape(r, self.d),
            const0_s=self.const0, nest=nest)


class _Expr:
    """A linear expression const + sum_i m_i time(piece i) (s)."""

    def __init__(self, const: float = 0.0, nest: dict | None = None):
        self.const = const
        self.nest = dict(nest or {})

    def __add__(self, other: "_Expr") -> "_Expr":
        nest = dict(self.nest)
        for k, v in other.nest.items():
            nest[k] = nest.get(k, 0.0) + v
        return _Expr(self.const + other.const, nest)

    def times(self, factor: float) -> "_Expr":
        return _Expr(self.const * factor, {k: v * factor for k, v in self.nest.items()})


def model_rows(workload, network, tm: TimingModel) -> ModelRows | None:
    """The workload's communication time as `problem.ModelRows` (None for LIBRA's reference
    model, which the solver handles as traffic directly).

    The step time is ``compute + rows``; for the overlap loops the rows give the critical
    path minus the total compute, i.e. the communication that is not hidden.
    """
    check_timing(tm, network.num_dims)
    if tm.is_reference:
        return None
    return _build_rows(workload, network, tm)[0]


def _build_rows(workload, network, tm: TimingModel):
    """(ModelRows, origin [R]: (key, piece j, row i) of every collective row, None for the
    loop rows, keys, index [L, 3], issues [L, 3], counts [U])."""
    # Overlap loops: one set of pieces per layer-phase (each has its own place in the
    # critical path, so its multipliers give its size sensitivity).
    keys, index, issues = unique_collectives(workload,
                                              dedupe=tm.training_loop == "no_overlap")
    coll = collective_pieces(keys, network, tm)
    b = _RowBuilder(network.num_dims)
    origin = []
    compute_s = np.asarray(workload.compute_ns, np.float64) / 1e9  # [L, 3]
    no_overlap = tm.training_loop == "no_overlap"
    # The pieces of each distinct collective; under no_overlap weighted by how many times
    # the step issues it.
    counts = np.bincount(index[index >= 0], weights=issues[index >= 0], minlength=len(keys))
    terms = []  # per key: _Expr of its time
    for u, (c0, w, c, a, on) in enumerate(coll):
        expr = _Expr(c0)
        for jj in range(w.shape[0]):
            if not np.any(on[jj]):
                continue
            piece = b.piece(counts[u] * w[jj] if no_overlap else 0.0)
            for ii in np.nonzero(on[jj])[0]:
                b.row(piece, c[jj, ii], a[jj, ii])
                origin.append((u, jj, int(ii)))
            expr = expr + _Expr(0.0, {piece: float(w[jj])})
        terms.append(expr)
        if no_overlap:
            b.const0 += counts[u] * c0
    extra = (origin, keys, index, issues, counts)
    if no_overlap:
        return (b.build(), *extra)

    def comm(l, p) -> _Expr:  # all issues of the phase's collective, one after another
        return terms[index[l, p]].times(issues[l, p]) if index[l, p] >= 0 else _Expr()

    def hidden(l, p) -> _Expr:
        """Phase (l, p) as compute + comm, or max(compute, comm) under full_overlap."""
        if tm.training_loop != "full_overlap" or index[l, p] < 0:
            return _Expr(compute_s[l, p]) + comm(l, p)
        piece = b.piece()
        b.row(piece, compute_s[l, p])
        e = comm(l, p)
        b.row(piece, e.const, nest=e.nest)
        return _Expr(0.0, {piece: 1.0})

    num_layers = compute_s.shape[0]
    ready = _Expr()
    for l in range(num_layers):  # forward pass
        ready = ready + hidden(l, 0)
    if tm.model == "pipelined":
        return _contention_rows(b, origin, extra, ready, hidden, comm, compute_s, index,
                                issues, keys, network, tm)
    queue = None  # piece of E_{q-1}
    for l in range(num_layers - 1, -1, -1):  # backward pass, last layer first
        ready = ready + hidden(l, 1) + _Expr(compute_s[l, 2])
        wg = comm(l, 2)
        if index[l, 2] < 0:
            continue
        e = b.piece()
        start = ready + wg
        b.row(e, start.const, nest=start.nest)
        if queue is not None:
            after = _Expr(0.0, {queue: 1.0}) + wg
            b.row(e, after.const, nest=after.nest)
        queue = e
    step = b.piece(1.0)
    b.row(step, ready.const, nest=ready.nest)
    if queue is not None:
        b.row(step, 0.0, nest={queue: 1.0})
    b.const0 = -float(np.sum(compute_s))  # rows give the critical path; compute is separate
    origin += [None] * (len(b.rows) - len(origin))
    return (b.build(), *extra)


def dimension_work(keys, network, tm: TimingModel):
    """[U] per distinct collective: (const_s [D], coef_gb [D]) the time each dimension is
    busy with it alone, all chunks and stages summed: ``const_d + coef_d / bw_d`` s (the
    congestion-aware link factor folded in). Linear in the size."""
    d = network.num_dims
    blocks = np.asarray(network.block_codes, np.int32)
    lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
    factor = step.link_factor(blocks, tm.network_backend)
    gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
    out = []
    for code, size, comm in keys:
        const, coef = np.zeros(d), np.zeros(d)
        if code != Collective.SENDRECV and spans_part(comm, network):
            # a pg_name ring runs on dimension 0's queues at other dimensions' bandwidths:
            # left out of the per-dimension work (a smaller sum stays a lower bound)
            out.append((const, coef))
            continue
        comm = np.asarray(comm, np.int32)
        if code != Collective.SENDRECV and not tm.is_default_runtime:
            const, coef, _, _ = runtime.bound_work(code, size, comm, blocks, tm)
            out.append((const / 1e9, coef * factor / 1e9))
            continue
        if code == Collective.SENDRECV:
            dim = int(np.argmax(comm > 1))
            coef[dim] = size / gib * factor[dim]
            const[dim] = HOPS[blocks[dim]] * lat[dim] + tm.endpoint_delay_ns
        else:
            chunks, size = streams(code, size, network, tm)
            st = pipelined.chunk_stages(code, size, comm, blocks, latency_ns=lat,
                                        chunks=chunks, endpoint_delay_ns=tm.endpoint_delay_ns,
                                        local_mem_bw_gbps=tm.local_mem_bw_gbps,
                                        gb_is_gib=tm.gb_is_gib)
            for s_dim, a, f, en in zip(st.dims, st.bytes_coef, st.fixed_ns, st.enabled):
                if en:
                    coef[s_dim] += chunks * a * factor[s_dim]
                    const[s_dim] += chunks * f
        out.append((const / 1e9, coef / 1e9))
    return out


def _contention_rows(b, origin, extra, ready, hidden, comm, compute_s, index, issues, keys,
                     network, tm):  # noqa: PLR0913 (the state of `_build_rows`)
    """The overlap loops' rows for ``model=pipelined``: a convex lower bound of the step
    that `timing.step_time_ns` simulates (`step.simulate_step`, or a step with a group over
    part of a dimension as its pg_name trace set), whatever the queue order (README
    "Contention").

    * the main chain (forward, backward compute and the collectives it waits for, each at
      its own convex time, which contention can only delay);
    * every weight-gradient collective after its ready time: ``ready_q + T_q``;
    * every dimension's work: a dimension runs at most ``queues_per_dim`` stages at once, so
      everything issued from ``ready_q`` on that uses dimension d keeps it busy for at least
      ``sum work_d / queues_per_dim`` after ``ready_q``.
    """
    num_layers = compute_s.shape[0]
    work = dimension_work(keys, network, tm)
    q = float(concurrency(tm))
    issued = []  # (ready _Expr, key u, issues) of every collective, in issue order
    for l in range(num_layers - 1, -1, -1):  # backward pass, last layer first
        before = ready
        ready = ready + hidden(l, 1)
        if index[l, 1] >= 0:
            issued.append((before + _Expr(compute_s[l, 1]) if tm.training_loop != "full_overlap"
                           else before, int(index[l, 1]), int(issues[l, 1]), None))
        ready = ready + _Expr(compute_s[l, 2])
        if index[l, 2] >= 0:
            issued.append((ready, int(index[l, 2]), int(issues[l, 2]), comm(l, 2)))
    step_piece = b.piece(1.0)
    b.row(step_piece, ready.const, nest=ready.nest)
    suffix_c = np.zeros(network.num_dims)
    suffix_a = np.zeros(network.num_dims)
    rows = []
    for at, u, n, own in reversed(issued):
        suffix_c = suffix_c + n * work[u][0]
        suffix_a = suffix_a + n * work[u][1]
        if own is None:  # an input-gradient collective: on the chain already
            continue
        done = at + own
        b.row(step_piece, done.const, nest=done.nest)
        # dimensions where collectives issued later add to this one's work
        shared = (suffix_a > n * work[u][1] * (1 + 1e-12)) & (work[u][1] > 0)
        for dim in np.nonzero(shared)[0]:
            coef = np.zeros(network.num_dims)
            coef[dim] = suffix_a[dim] / q
            rows.append((at, suffix_c[dim] / q, coef))
    origin += [None] * (len(b.rows) - len(origin))
    for at, const, coef in rows:
        b.row(step_piece, at.const + const, coef, nest=at.nest)
        origin.append(WORK_ROW)
    b.const0 = -float(np.sum(compute_s))
    return (b.build(), *extra)


def size_gradient_ns_per_byte(problem, workload, network, tm: TimingModel, bandwidth_gbps,
                              mu_rows) -> np.ndarray | None:
    """d(optimal step time)/d(collective size) [L, 3] in ns per byte for the general rows of
    ``model=pipelined`` or an overlap loop (envelope theorem), or None for LIBRA's reference
    model (`sensitivity.py` handles that one on its traffic).

    Each collective's rows carry multipliers ``mu_rows`` (stationary in every piece: their sum
    is what the step, or the critical-path rows that nest the piece, put on it, i.e. the
    issues of the collective); one issue's share is mu / issues. A phase issuing n
    collectives of size / n gains n x (1/n) x d(time of one)/d(size of one), i.e.
    sum_r (mu_r / count) * (dc_r/ds + sum_d (da_rd/ds) / bw_d) with c, a the rows' constants
    and coefficients differentiated (jax.jacfwd) through `pipelined.collective_pieces`.
    The overlap loops give each layer-phase its own pieces, so the sum is its own.
    """
    if tm.is_reference:
        return None
    rows, origin, keys, index, issues, counts = _build_rows(workload, network, tm)
    if np.asarray(problem.row_piece).shape[0] != len(origin):
        return None
    mu = np.asarray(mu_rows, np.float64)
    work = np.asarray([o == WORK_ROW for o in origin])
    if tm.model == "pipelined" and any(code != Collective.SENDRECV and spans_part(comm, network)
                                       for code, _, comm in keys):
        # a pg_name ring's piece (`step_partial.pg_ring_piece`) is not differentiated in
        # the size here either
        return None
    if tm.model == "pipelined" and (tm.queues_per_dim > 1 or not tm.is_default_runtime or (
            np.any(work) and np.sum(np.abs(mu[work])) > 1e-9 * max(np.sum(np.abs(mu)), 1e-300))):
        # the multi-queue and runtime pieces and the binding dimension-work rows are not
        # differentiated in the size here: no size sensitivities rather than wrong ones
        return None
    x = (np.asarray(bandwidth_gbps, np.float64)
         / step.link_factor(network.block_codes, tm.network_backend))
    d = network.num_dims
    blocks = np.asarray(network.block_codes, np.int32)
    lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
    gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
    jac = []  # per key: (dc/ds [J, I] s per byte, da/ds [J, I, D] GB per byte)
    with jax.enable_x64(True):
        for code, size, comm in keys:
            comm = np.asarray(comm, np.int32)
            if tm.model == "libra":  # rows: traffic_d / bw_d, linear in the size
                per_byte = np.asarray(traffic_bytes(code, 1.0, comm), np.float64)
                jac.append((np.zeros((1, d)), np.diag(per_byte)[None] / 1e9))
                continue
            if code == Collective.SENDRECV:
                used = comm > 1
                da = np.where(used[:, None], np.diag(np.where(used, 1.0 / gib, 0.0)), 0.0)
                jac.append((np.zeros((1, d)), da[None] / 1e9))
                continue

            # the pieces of the streams ASTRA-sim runs (`streams`): an uneven split's
            # size grows with the size (d/ds = its size / the size), a raised one does not
            chunks, run = streams(code, size, network, tm)
            ds = 0.0 if chunks == tm.chunks and run != size else run / size

            def pieces_of(s, code=code, comm=comm, chunks=chunks):
                p = pipelined.collective_pieces(
                    code, s, comm, blocks, latency_ns=lat, chunks=chunks,
                    endpoint_delay_ns=tm.endpoint_delay_ns,
                    local_mem_bw_gbps=tm.local_mem_bw_gbps, gb_is_gib=tm.gb_is_gib,
                    schedule=tm.schedule)
                return p.c, p.a

            dc, da = jax.device_get(jax.jacfwd(pieces_of)(jnp.asarray(run, jnp.float64)))
            jac.append((ds * np.asarray(dc) / 1e9, ds * np.asarray(da) / 1e9))
    per_key = np.zeros(len(keys))
    for r, o in enumerate(origin):
        if o is None or o == WORK_ROW:  # a critical-path row: no collective size in it
            continue
        u, jj, ii = o
        dc, da = jac[u]
        used = x > 0
        drow = dc[jj, ii] + np.sum(np.where(used, da[jj, ii] / np.where(used, x, 1.0), 0.0))
        per_key[u] += mu[r] / counts[u] * drow
    grad = np.where(index >= 0, per_key[np.maximum(index, 0)], 0.0)
    return grad * 1e9


def build_timed_problem(network, workload, cost_rates_usd_per_gbps, spec: ConstraintSpec,
                        tm: TimingModel, *, field_prefix: str = "constraints") -> Problem:
    """`problem.build_problem` with the step-time model ``tm`` (checked by `check_timing`)."""
    as_instance(tm, TimingModel, "tm")
    as_instance(network, Network, "network")
    as_instance(workload, Workload, "workload")
    check_spec(spec, field_prefix)
    return build_problem(network, workload, cost_rates_usd_per_gbps, spec,
                         field_prefix=field_prefix, rows=model_rows(workload, network, tm))
