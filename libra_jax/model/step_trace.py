"""A whole step of an imported trace set (`types.TraceSet`: every rank its own graph) as
ASTRA-sim 2.x runs it: the multi-rank form of `step.simulate_step` (``docs/step_simulation.md``
section "Every rank its own graph").

* **Ranks and classes.** Ranks whose graphs are the same (node arrays, the structure of their
  groups, the shape of their send/recv routes and the timing of their ``pg_name`` rings) and
  whose peers and group members fall in the same classes (partition refinement) run the
  same timeline: one representative per class is simulated. Each simulated rank has its own
  compute unit, in-flight limit, priority counter, per-dimension queues (`step._Queues`,
  the same queue machinery as `simulate_step`) and, for the congestion-aware backend, its
  own links (one NPU's links stand for its class, as in the one-NPU replay).
* **Collectives over whole dimensions** (`CommGroup.involved`) run as in `simulate_step`.
  Where the members of a collective's group lie in other classes (asymmetric ranks, e.g. a
  collective across pipeline stages), the k-th issue of that group on a rank is matched with
  the k-th issue on every member class: its streams take their queues at the issue, but
  their first stage runs only from the latest of those issues (an approximation of
  ASTRA-sim's ring exchanges, which start at each NPU's own issue and wait for their first
  message from the neighbour; later stages and chunks are not re-synchronised).
* **pg_name groups** (`CommGroup.ranks`): a flat ring over the listed NPUs in the listed
  order, always the Ring algorithm, on dimension 0's queues, chunked as every collective
  (`Sys::generate_collective` with a `CommunicatorGroup` of part of the machine). A ring
  step of one member waits for its sender's message of the step before: member i's finish
  is the sum of the step overheads plus, for the unaware backend, the times of the ``steps``
  hops that precede it on the ring (each hop timed on the first dimension where the two
  NPUs differ: ``hops * latency + bytes / bw``); the aware backend replays every message of
  the ring link by link (dimension-ordered routes, FIFO links). Both are computed for the
  ring alone (all members starting together) and give each member its own stage time; under
  the aware backend the stage then runs on the rank's own links along its route, scaled to
  take that time alone, so that it contends with the rank's other traffic.
* **Send / recv** (``COMM_SEND_NODE`` / ``COMM_RECV_NODE``) bypass the system layer's
  queues: a message starts when its SEND is issued (a SEND takes an in-flight slot, a RECV
  does not: `HardwareResource`), both nodes end when it arrives, and a RECV posted after the
  arrival ends at once. Messages match by (src, dst, tag, size) in node order. Unaware: the
  first differing dimension's ``hops * latency + bytes / bw`` (no endpoint delay: native
  sends skip the collective memory bus). Aware: the dimension-ordered route through the
  sender's links (a Switch: up and down; a Ring: the shorter way, clockwise on ties, one
  store-and-forward per hop), sharing those FIFOs with the sender's collective traffic.

Units: ns, bytes, GB/s.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from typing import NamedTuple, Sequence

import numpy as np

from libra_jax.model import pipelined
from libra_jax.model.step import _Queues, _stages_of, chunk_split
from libra_jax.types import (Block, Collective, CommGroup, LibraInputError, RankTrace,
                             StepNode, TraceNode, TraceSet, show)

COMPUTE, COLL, SEND, RECV = (int(TraceNode.COMPUTE), int(TraceNode.COLLECTIVE),
                             int(TraceNode.SEND), int(TraceNode.RECV))
#: ASTRA-sim folds workload tags into [0, 5e8) (``Sys::front_end_sim_send``, NATIVE).
NATIVE_TAGS = 500_000_000


class TraceTiming(NamedTuple):
    """`simulate_trace`'s result.

    ``time_ns``: the step as ASTRA-sim reports it, the latest rank's last node end;
    ``rank_end_ns`` [R] every rank's last node end; ``class_of`` [R] the representative
    rank of each rank's class (the rank simulated for it); ``start_ns`` / ``end_ns``:
    representative rank -> [N] its nodes' start / end; ``busy_ns`` [D] the longest time any
    rank had a stage running on each dimension."""

    time_ns: float
    rank_end_ns: np.ndarray
    class_of: np.ndarray
    start_ns: dict
    end_ns: dict
    busy_ns: np.ndarray

    def rank_times(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(start_ns, end_ns) [N] of any rank's nodes (its representative's)."""
        rep = int(self.class_of[rank])
        return self.start_ns[rep], self.end_ns[rep]


# ------------------------------------------------------------------------------ geometry


class _Geometry:
    """NPU coordinates (dimension 0 fastest), hops and routes of the analytical backends."""

    def __init__(self, blocks, npd, bw, lat, gib):
        self.blocks, self.npd, self.bw, self.lat, self.gib = blocks, npd, bw, lat, gib
        self.strides = [math.prod(npd[:d]) for d in range(len(npd))]

    def coord(self, npu: int, d: int) -> int:
        return npu // self.strides[d] % self.npd[d]

    def displacement(self, a: int, b: int) -> tuple:
        return tuple((self.coord(b, d) - self.coord(a, d)) % self.npd[d]
                     for d in range(len(self.npd)))

    def _bw(self, d: int, what: str) -> float:
        if not self.bw[d] > 0:
            raise LibraInputError(
                f"bandwidth_gbps[{d}] = {show(self.bw[d])}: {what} crosses dimension {d}, "
                "which needs a bandwidth > 0.")
        return float(self.bw[d])

    def hop_ns(self, a: int, b: int, gbytes: float, what: str) -> float:
        """The congestion-unaware time of ``gbytes`` (bytes / GiB-per-GB) from NPU a to b:
        timed on the first dimension where they differ (``MultiDimTopology::send``)."""
        for d in range(len(self.npd)):
            ca, cb = self.coord(a, d), self.coord(b, d)
            if ca != cb:
                break
        else:
            raise LibraInputError(f"{what}: NPU {a} sends to itself.")
        if self.blocks[d] == Block.SWITCH:
            hops = 2
        elif self.blocks[d] == Block.FULLYCONNECTED:
            hops = 1
        else:
            cw = (cb - ca) % self.npd[d]
            hops = min(cw, self.npd[d] - cw)
        return hops * self.lat[d] + gbytes / self._bw(d, what)

    def route(self, a: int, b: int, what: str, local: bool):
        """The dimension-ordered route from NPU a to b (``MultiDimTopologyLocal::route``):
        [(link, dim)]. ``local``: links named as one NPU's own (the one-NPU-per-class link
        model: (dim, "up"/"down") of a Switch, (dim, direction) of a Ring, (dim, 0) of a
        FullyConnected dimension); else the physical links."""
        out, cur = [], a
        for d in range(len(self.npd)):
            n, cc, tc = self.npd[d], self.coord(cur, d), self.coord(b, d)
            if cc == tc:
                continue
            self._bw(d, what)
            base = cur - cc * self.strides[d]
            if self.blocks[d] == Block.SWITCH:
                out += [((d, "up") if local else ("up", cur, d), d),
                        ((d, "down") if local else ("down", base + tc * self.strides[d], d),
                         d)]
            elif self.blocks[d] == Block.FULLYCONNECTED:
                out.append(((d, 0) if local else (cur, base + tc * self.strides[d]), d))
            else:
                cw = (tc - cc) % n
                step = -1 if n - cw < cw else 1  # the shorter way, clockwise on ties
                c = cc
                while c != tc:
                    nxt = (c + step) % n
                    out.append(((d, 0 if n <= 2 else (0 if step == 1 else 1)) if local
                                else (base + c * self.strides[d], base + nxt * self.strides[d]),
                                d))
                    c = nxt
            cur = base + tc * self.strides[d]
        return out


def _own_links(route) -> tuple:
    """The links of a route (`_Geometry.route`, local names) that the one-NPU link model
    queues on: every hop but the later hops of a Ring route in one direction, which run on
    other NPUs' links (None: timed, not queued)."""
    return tuple(link if j == 0 or route[j - 1][0] != link else None
                 for j, (link, _) in enumerate(route))


def _step_overheads(steps: int, red_ns: float, n: int, endpoint_ns: float):
    """(pre [steps], post) of a ring stage: the delay before each message (endpoint delay,
    plus a local reduction from the second message on) and after the last arrival, as the
    congestion-aware replay of `step.simulate_step` schedules them."""
    reductions = n - 1 if red_ns > 0 else 0
    red_step = red_ns / reductions if reductions else 0.0
    pre = [endpoint_ns + (red_step if 1 <= k <= reductions else 0.0) for k in range(steps)]
    return pre, (red_step if reductions >= steps else 0.0)


def ring_finish_unaware(hop_ns: Sequence[float], steps: int, pre: Sequence[float],
                        post: float) -> np.ndarray:
    """[n] when each member of a flat ring ends a stage of ``steps`` messages, all starting
    at 0, under the congestion-unaware backend: member i sends to i + 1 (``hop_ns[i]``), its
    message k leaves when its message k - 1 was sent and the sender's message k - 1 has
    arrived (ASTRA-sim's Ring: one packet in flight, the next sent on receipt). Then member
    i's finish is ``sum(pre) + post + the `steps` hops that precede i on the ring``."""
    n = len(hop_ns)
    send = [pre[0]] * n  # S_i(k)
    recv = [0.0] * n
    for k in range(steps):
        recv = [max(send[(i - 1) % n] + hop_ns[(i - 1) % n], send[i]) for i in range(n)]
        if k + 1 < steps:
            send = [recv[i] + pre[k + 1] for i in range(n)]
    return np.asarray([r + post for r in recv])


def ring_finish_aware(routes, ser_ns: Sequence[float], lat_ns: Sequence[float], steps: int,
                      pre: Sequence[float], post: float) -> np.ndarray:
    """[n] as `ring_finish_unaware` under the congestion-aware backend: member i's messages
    to i + 1 follow ``routes[i]`` ([(link, dim)]), each link a FIFO that serialises one
    message at a time (``ser_ns[dim]``) then passes it on after ``lat_ns[dim]``."""
    n = len(routes)
    ev: list = []
    seq = 0
    sent, arrived = [0] * n, [0] * n
    finish = np.full(n, np.nan)
    busy: dict = {}
    wait: dict = {}

    def push(t, kind, data):
        nonlocal seq
        seq += 1
        heapq.heappush(ev, (t, seq, kind, data))

    def put(msg, t):
        j, hop = msg
        link, d = routes[j][hop]
        if busy.get(link):
            wait.setdefault(link, []).append(msg)
            return
        busy[link] = True
        push(t + ser_ns[d], "free", link)
        push(t + ser_ns[d] + lat_ns[d], "arrive", msg)

    def received(i, k, t):  # member i's message k from its sender is in at t
        if k + 1 < steps:
            push(t + pre[k + 1], "send", i)
        else:
            finish[i] = t + post

    for i in range(n):
        push(pre[0], "send", i)
    while ev:
        t, _, kind, data = heapq.heappop(ev)
        if kind == "send":
            k = sent[data]
            sent[data] += 1
            put((data, 0), t)
            if arrived[data] > k:
                received(data, k, t)
        elif kind == "free":
            busy[data] = False
            if wait.get(data):
                put(wait[data].pop(0), t)
        else:
            j, hop = data
            if hop + 1 < len(routes[j]):
                put((j, hop + 1), t)
                continue
            i = (j + 1) % n
            k = arrived[i]
            arrived[i] += 1
            if sent[i] > k:
                received(i, k, t)
    return finish


# ------------------------------------------------------------------------------ the ranks


class _Stream:
    __slots__ = ("node", "priority", "stages", "pos", "left", "seq", "rk", "rate", "held",
                 "step", "steps", "msg_ns", "path", "reductions", "red_step", "hops", "pre",
                 "post")

    def __init__(self, node, priority, stages, seq, rk, held):
        self.node, self.priority, self.stages, self.seq, self.rk = (node, priority, stages,
                                                                    seq, rk)
        self.pos = 0
        self.left = 1.0
        self.held = held  # waiting for the other member classes to issue its collective
        self.hops = self.pre = None  # a pg ring stage's per-hop (ser, lat) and overheads


class _P2P:
    """A send/recv message under the congestion-aware backend: the sender's links."""

    __slots__ = ("rk", "node", "target", "path", "ser", "lat")

    def __init__(self, rk, node, target, path, ser, lat):
        self.rk, self.node, self.target, self.path, self.ser, self.lat = (rk, node, target,
                                                                          path, ser, lat)


class _Rank:
    """One simulated rank (its class's representative)."""

    def __init__(self, idx: int, rank: int, cls: int, tr: RankTrace, num_dims: int, q: int):
        self.idx, self.rank, self.cls, self.tr = idx, rank, cls, tr
        n = tr.num_nodes
        self.kind = tr.kind.tolist()
        self.dur = tr.duration_ns.tolist()
        self.n = n
        self.start = np.full(n, np.nan)
        self.end = np.full(n, np.nan)
        child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(tr.dep_ptr))
        pairs = np.unique(tr.deps.astype(np.int64) * max(n, 1) + child_of)
        parent, child = pairs // max(n, 1), pairs % max(n, 1)
        self.waiting = np.bincount(child, minlength=n).tolist()
        self.child_ptr = np.searchsorted(parent, np.arange(n + 1)).tolist()
        self.children = child.tolist()
        self.ready = [i for i in range(n) if self.waiting[i] == 0]
        heapq.heapify(self.ready)
        self.computing = False
        self.inflight = 0
        self.counter = 0
        self.alloc = _Queues(num_dims, q)
        self.queues = [[[] for _ in range(q)] for _ in range(num_dims)]
        self.running: dict = {}
        self.streams_left: dict = {}
        self.busy = np.zeros(num_dims)
        self.nrun = [0] * num_dims  # running stages per dimension, and since when
        self.since = [0.0] * num_dims
        self.t = 0.0  # when the unaware stages' remaining fractions were last brought up
        self.ver = 0  # version of its entry in the stage-end heap
        self.issues: dict = {}  # group -> collectives issued on it
        self.arrived: dict = {}  # RECV node -> arrival time of its message
        self.posted: set = set()
        self.link_busy: dict = {}
        self.link_wait: dict = {}
        self.done = 0


def _check_trace(trace: TraceSet, npd, what="trace") -> None:
    R = math.prod(npd)
    if not isinstance(trace, TraceSet):
        raise LibraInputError(f"{what}: expected a TraceSet, got {show(type(trace).__name__)}.")
    if trace.num_ranks != R:
        raise LibraInputError(
            f"{what} {show(trace.prefix)}: {trace.num_ranks} ranks, but the network has "
            f"{R} NPUs (npus_per_dim = {show(list(npd))}).")
    D = len(npd)
    for gi, g in enumerate(trace.groups):
        if (g.involved is None) == (g.ranks is None):
            raise LibraInputError(f"{what} group {gi} ({show(g.name)}): give exactly one of "
                                  "involved and ranks.")
        if g.involved is not None and len(g.involved) != D:
            raise LibraInputError(
                f"{what} group {gi} ({show(g.name)}): involved = {show(g.involved)} has "
                f"{len(g.involved)} entries, the network {D} dimensions.")
        if g.ranks is not None and (len(set(g.ranks)) != len(g.ranks)
                                    or any(not 0 <= r < R for r in g.ranks)):
            raise LibraInputError(
                f"{what} group {gi} ({show(g.name)}): ranks = {show(g.ranks)} must be "
                f"distinct NPUs in [0, {R}).")
    is_pg = np.asarray([g.ranks is not None for g in trace.groups] + [False], bool)
    for r, tr in enumerate(trace.ranks):
        if tr.rank != r:
            raise LibraInputError(f"{what}: ranks[{r}] holds rank {tr.rank}.")
        n = tr.num_nodes
        bad = np.flatnonzero((tr.deps < 0) | (tr.deps >= n))
        if bad.size:
            raise LibraInputError(f"{tr.path}: a dependency {int(tr.deps[bad[0]])} is not a "
                                  f"node of rank {r} ({n} nodes).")
        coll = np.flatnonzero(tr.kind == COLL)
        g = tr.group[coll]
        if coll.size and (g.min() < 0 or g.max() >= len(trace.groups)):
            i = coll[np.flatnonzero((g < 0) | (g >= len(trace.groups)))[0]]
            raise LibraInputError(f"{tr.path}: node id {int(tr.node_id[i])}: group "
                                  f"{int(tr.group[i])} is not one of the "
                                  f"{len(trace.groups)} groups.")
        for i in coll[is_pg[tr.group[coll]]].tolist():
            grp = trace.groups[int(tr.group[i])]
            if r not in grp.ranks:
                raise LibraInputError(
                    f"{tr.path}: node id {int(tr.node_id[i])}: rank {r} is not a member of "
                    f"its group {show(grp.name)} (ranks {show(grp.ranks)}).")
        p2p = np.flatnonzero((tr.kind == SEND) | (tr.kind == RECV))
        peer = tr.peer[p2p]
        bad = p2p[(peer < 0) | (peer >= R) | (peer == r)]
        if bad.size:
            raise LibraInputError(f"{tr.path}: node id {int(tr.node_id[bad[0]])}: peer "
                                  f"{int(tr.peer[bad[0]])} is not another NPU of the "
                                  f"{R}.")


def _match_messages(trace: TraceSet):
    """{(rank, SEND node): (dst, RECV node)} and the reverse: the k-th send from a to b
    with (tag, size) meets the k-th recv on b from a with (tag, size), in node order."""
    sends: dict = {}
    recvs: dict = {}
    for r, tr in enumerate(trace.ranks):
        for i in np.flatnonzero(tr.kind == SEND).tolist():
            key = (r, int(tr.peer[i]), int(tr.tag[i]) % NATIVE_TAGS, float(tr.size_bytes[i]))
            sends.setdefault(key, []).append(i)
        for i in np.flatnonzero(tr.kind == RECV).tolist():
            key = (int(tr.peer[i]), r, int(tr.tag[i]) % NATIVE_TAGS, float(tr.size_bytes[i]))
            recvs.setdefault(key, []).append(i)
    to, frm = {}, {}
    for key in set(sends) | set(recvs):
        s, v = sends.get(key, []), recvs.get(key, [])
        if len(s) != len(v):
            src, dst, tag, size = key
            if len(s) > len(v):
                tr, i, what = trace.ranks[src], s[len(v)], f"a send to NPU {dst}"
            else:
                tr, i, what = trace.ranks[dst], v[len(s)], f"a recv from NPU {src}"
            raise LibraInputError(
                f"{tr.path}: node id {int(tr.node_id[i])}: {what} (tag {tag}, "
                f"{show(size)} bytes) has no matching "
                f"{'recv' if len(s) > len(v) else 'send'} ({len(s)} sends, {len(v)} recvs "
                "with that source, destination, tag and size).")
        for a, b in zip(s, v):
            to[(key[0], a)] = (key[1], b)
            frm[(key[1], b)] = (key[0], a)
    return to, frm


def _digest(*arrays) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.digest()


def _classes(trace: TraceSet, geo: _Geometry, match_to, match_from, pg_sig) -> np.ndarray:
    """[R] class id of every rank: ranks with the same graph (up to the renaming of their
    pg groups and peers), the same pg ring stage times, and whose send/recv peers, matched
    nodes and group members fall in the same classes (refined to a fixed point)."""
    keys = []
    groups = trace.groups
    used = []  # per rank: group indices its collectives use
    for r, tr in enumerate(trace.ranks):
        coll = tr.kind == COLL
        g = np.where(coll, tr.group, -1).astype(np.int64)
        is_pg = np.asarray([grp.ranks is not None for grp in groups] + [False], bool)[g]
        label = np.where(is_pg, 0, -2 - g)
        if is_pg.any():  # pg groups renamed by first use
            gp = g[is_pg]
            u, first, inv = np.unique(gp, return_index=True, return_inverse=True)
            order = np.argsort(np.argsort(first))
            label[is_pg] = order[inv]
            sizes = tuple(len(groups[int(x)].ranks) for x in u[np.argsort(first)])
        else:
            sizes = ()
        p2p = np.flatnonzero((tr.kind == SEND) | (tr.kind == RECV))
        disp = tuple(geo.displacement(r, int(tr.peer[i])) for i in p2p.tolist())
        used.append(sorted(set(np.unique(tr.group[coll]).tolist())))
        keys.append((_digest(tr.kind, tr.duration_ns, tr.collective, tr.size_bytes, label,
                             tr.dep_ptr, tr.deps), sizes, disp, pg_sig(r, tr)))
    cls = _relabel(keys)
    npd = geo.npd
    while True:
        grid = cls.reshape(tuple(npd), order="F")
        member_sig: dict = {}
        sig = []
        for r, tr in enumerate(trace.ranks):
            parts = []
            for g in used[r]:
                grp = groups[g]
                if grp.ranks is not None:
                    parts.append(tuple(sorted({int(cls[m]) for m in grp.ranks})))
                    continue
                idx = tuple(slice(None) if grp.involved[d] else geo.coord(r, d)
                            for d in range(len(npd)))
                key = (g, tuple(-1 if isinstance(x, slice) else x for x in idx))
                if key not in member_sig:
                    member_sig[key] = tuple(np.unique(grid[idx]).tolist())
                parts.append(member_sig[key])
            p2p = np.flatnonzero((tr.kind == SEND) | (tr.kind == RECV)).tolist()
            peers = tuple((int(cls[m[0]]), m[1]) for m in
                          ((match_to if tr.kind[i] == SEND else match_from)[(r, i)]
                           for i in p2p))
            sig.append((int(cls[r]), tuple(parts), peers))
        new = _relabel(sig)
        if new.max() == cls.max():
            return new
        cls = new


def _relabel(keys) -> np.ndarray:
    ids: dict = {}
    return np.asarray([ids.setdefault(k, len(ids)) for k in keys], np.int64)


class _Shapes:
    """(streams, stages) of a collective node, cached by (collective, size, group). A stage
    is (dim, bytes_coef, fixed_ns, queue kind, steps, reduction_ns, NPUs on its ring, pg):
    ``pg`` None, or {direction: [members] stage time} of a pg_name ring."""

    def __init__(self, trace, geo, blocks, tm, aware):
        self.trace, self.geo, self.blocks, self.tm, self.aware = trace, geo, blocks, tm, aware
        self.total = math.prod(geo.npd)
        self.cache: dict = {}
        self.step_cache: dict = {}
        self.ring_cache: dict = {}

    def get(self, collective: int, size: float, g: int):
        key = (collective, size, g)
        if key in self.cache:
            return self.cache[key]
        grp = self.trace.groups[g]
        npd = self.geo.npd
        if grp.involved is not None:
            group = tuple(npd[d] if grp.involved[d] and npd[d] > 1 else 1
                          for d in range(len(npd)))
            involved = tuple(x > 1 for x in group)
            if not any(involved):
                out = (0, [])
            else:
                node = StepNode(name="", kind="comm", collective=collective, size_bytes=size,
                                involved=involved, group=group)
                k, stages = _stages_of(node, self.blocks, self.tm, self.step_cache,
                                       self.total)
                out = (k, [st + (group[st[0]], None) for st in stages])
        else:
            n = len(grp.ranks)
            if n < 2:
                out = (0, [])
            else:
                k, chunk = chunk_split(collective, size, int(self.tm.chunks), self.total)
                st = pipelined.chunk_stages(
                    collective, float(k * chunk), np.asarray([n], np.int32),
                    np.asarray([Block.RING], np.int32), latency_ns=np.zeros(1), chunks=k,
                    endpoint_delay_ns=self.tm.endpoint_delay_ns,
                    local_mem_bw_gbps=self.tm.local_mem_bw_gbps, gb_is_gib=self.tm.gb_is_gib)
                s = int(np.flatnonzero(st.enabled)[0])
                kind = "first" if collective == Collective.ALLREDUCE else "any"
                steps = max(int(round(float(st.steps[s]))), 1)
                ring = (g, float(st.bytes_coef[s]) / steps, steps, float(st.reduction_ns[s]), k)
                out = (k, [(0, 0.0, 0.0, kind, float(steps), float(st.reduction_ns[s]), n,
                            ring)])
        self.cache[key] = out
        return out

    def ring_ns(self, ring, dr: int) -> np.ndarray:
        """[n] each listed member's stage time of a pg ring stage run in direction dr (0:
        member i sends to i + 1, ASTRA-sim's clockwise; 1: to i - 1): the ring alone, all
        starting together (`ring_finish_unaware` / `ring_finish_aware`), each member's
        difference from the members' mean divided by the collective's chunk count."""
        key = (ring, dr)
        if key in self.ring_cache:
            return self.ring_cache[key]
        g, msg, steps, red, k = ring
        members = list(self.trace.groups[g].ranks)
        order = members if dr == 0 else members[::-1]
        n = len(order)
        pre, post = _step_overheads(steps, red, n, float(self.tm.endpoint_delay_ns))
        what = f"group {show(self.trace.groups[g].name)}"
        geo = self.geo
        if self.aware:
            routes = [geo.route(order[i], order[(i + 1) % n], what, local=False)
                      for i in range(n)]
            ser = [msg / b if b > 0 else np.inf for b in geo.bw]
            fin = ring_finish_aware(routes, ser, geo.lat, steps, pre, post)
        else:
            hops = [geo.hop_ns(order[i], order[(i + 1) % n], msg, what) for i in range(n)]
            fin = ring_finish_unaware(hops, steps, pre, post)
        fin = fin if dr == 0 else fin[::-1]
        # The collective's k chunks run one after another on each member's queue, and a
        # member's chunk waits for its sender's messages of that chunk: after the first,
        # the members go at one common pace, the ring's mean; only the first chunk keeps
        # each member's own time.
        fin = fin.mean() + (fin - fin.mean()) / k
        self.ring_cache[key] = fin
        return fin

    def local_ring(self, ring, dr: int, rank: int):
        """A pg ring stage on ``rank`` as its own links see it (aware backend): (links of
        its route to its receiver, [(serialisation, latency)] per hop, pre [steps], post),
        all scaled so that alone it takes exactly the ring's stage time of that member
        (`ring_ns`): contention with the rank's other traffic then delays it through
        the links' FIFOs."""
        key = (ring, dr, rank)
        if key in self.ring_cache:
            return self.ring_cache[key]
        g, msg, steps, red, _ = ring
        members = self.trace.groups[g].ranks
        pos = members.index(rank)
        n = len(members)
        dst = members[(pos + 1) % n] if dr == 0 else members[(pos - 1) % n]
        route = self.geo.route(rank, dst, f"group {show(self.trace.groups[g].name)}",
                               local=True)
        pre, post = _step_overheads(steps, red, n, float(self.tm.endpoint_delay_ns))
        hops = [(msg / self.geo.bw[d], self.geo.lat[d]) for _, d in route]
        alone = sum(pre) + post + steps * sum(a + b for a, b in hops)
        want = float(self.ring_ns(ring, dr)[pos])
        if want >= alone:  # waits for slower hops before it: longer gaps, same link use
            pre = [p + (want - alone) / steps for p in pre]
        else:  # its own route is the longer: everything shrinks alike
            ratio = want / alone
            hops = [(a * ratio, b * ratio) for a, b in hops]
            pre, post = [p * ratio for p in pre], post * ratio
        out = (_own_links(route), hops, pre, post)
        self.ring_cache[key] = out
        return out

    def ring_directions(self, collective: int) -> tuple[int, ...]:
        q = int(self.tm.queues_per_dim)
        return (0,) if collective == Collective.ALLREDUCE or q < 2 else (0, 1)


def simulate_trace(trace: TraceSet, blocks, npus_per_dim, bandwidth_gbps, tm, *,
                   classes: bool = True) -> TraceTiming:
    """Times a trace set the way ASTRA-sim runs it (module docstring): every class of ranks
    simulated by one representative, all of them in one event loop.

    Args:
      trace: the step (`types.TraceSet`; ``ranks[r]`` is NPU r, dimension 0 fastest).
      blocks: [D] ``types.Block`` codes. npus_per_dim: [D] NPUs per dimension (their
        product is the number of ranks).
      bandwidth_gbps: [D] per-NPU GB/s (> 0 on every dimension used).
      tm: a `timing.TimingModel` (as for `step.simulate_step`).
      classes: simulate one representative per class of equivalent ranks (exact); False
        simulates every rank (for checks).

    Returns:
      `TraceTiming` (ns).

    Raises:
      LibraInputError: ranks that do not fit the network, a group or peer outside it, a
        send without its recv (or the reverse), or a step that cannot finish (a dependency
        cycle, a recv whose send never runs), naming the file and node id.
    """
    blocks = [int(b) for b in blocks]
    npd = [int(n) for n in npus_per_dim]
    num_dims = len(blocks)
    if len(npd) != num_dims or np.shape(bandwidth_gbps) != (num_dims,):
        raise LibraInputError(f"npus_per_dim = {show(npd)} and bandwidth_gbps = "
                              f"{show(bandwidth_gbps)} need {num_dims} entries (blocks).")
    _check_trace(trace, npd)
    bw = np.asarray(bandwidth_gbps, np.float64)
    aware = tm.network_backend == "aware"
    lifo = tm.queue_policy == "lifo"
    q = int(tm.queues_per_dim)
    limit = tm.max_inflight_collectives
    lat = (np.zeros(num_dims) if tm.latency_ns is None
           else np.broadcast_to(np.asarray(tm.latency_ns, np.float64), (num_dims,)))
    gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
    geo = _Geometry(blocks, npd, bw, [float(x) for x in lat], gib)
    shapes = _Shapes(trace, geo, blocks, tm, aware)
    match_to, match_from = _match_messages(trace)
    is_pg = np.asarray([g.ranks is not None for g in trace.groups] + [False], bool)

    def pg_sig(r: int, tr: RankTrace) -> tuple:
        out = []
        coll = np.flatnonzero(tr.kind == COLL)
        if not coll.size:
            return ()
        pg = is_pg[tr.group[coll]]
        seen = set()
        for i in coll[pg].tolist():
            key = (int(tr.collective[i]), float(tr.size_bytes[i]), int(tr.group[i]))
            if key in seen:
                continue
            seen.add(key)
            k, stages = shapes.get(*key)
            pos = trace.groups[key[2]].ranks.index(r)
            for st in stages:
                out.append(tuple(float(shapes.ring_ns(st[7], dr)[pos])
                                 for dr in shapes.ring_directions(key[0])))
        return tuple(out)

    cls = (_classes(trace, geo, match_to, match_from, pg_sig) if classes
           else np.arange(trace.num_ranks, dtype=np.int64))
    reps = {}
    for r in range(trace.num_ranks):
        reps.setdefault(int(cls[r]), r)
    rank_of_cls = reps
    ranks = [_Rank(j, r, c, trace.ranks[r], num_dims, q)
             for j, (c, r) in enumerate(sorted(reps.items(), key=lambda x: x[1]))]
    by_cls = {rk.cls: rk for rk in ranks}

    # member classes (other than its own) of every group a representative uses
    grid = cls.reshape(tuple(npd), order="F")
    for rk in ranks:
        tr = rk.tr
        rk.members = {}
        for g in np.unique(tr.group[tr.kind == COLL]).tolist():
            grp = trace.groups[g]
            if grp.ranks is not None:
                m = {int(cls[x]) for x in grp.ranks}
            else:
                idx = tuple(slice(None) if grp.involved[d] else geo.coord(rk.rank, d)
                            for d in range(num_dims))
                m = set(np.unique(grid[idx]).tolist())
            m.discard(rk.cls)
            rk.members[g] = m
        # send targets: (receiving representative, its RECV node)
        rk.targets = {}
        for i in np.flatnonzero(tr.kind == SEND).tolist():
            dst, j = match_to[(rk.rank, i)]
            rk.targets[i] = (by_cls[int(cls[dst])], j, dst)
        rk.coll = tr.collective.tolist()
        rk.size = tr.size_bytes.tolist()
        rk.group = tr.group.tolist()

    comp: list = []  # (end, rank idx, node) of running compute
    net: list = []  # (time, seq, kind, payload): link events, message arrivals, pg stages
    pending: dict = {}  # (group, k) -> [classes issued, waiting issues]
    seq = 0
    now = 0.0
    dirty: list = []

    def push(t: float, kind: str, payload) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(net, (t, seq, kind, payload))

    def stage_ns(s: _Stream) -> float:
        dim, coef, fixed = s.stages[s.pos][:3]
        return fixed + (coef / bw[dim] if coef > 0 else 0.0)

    # ---- the congestion-aware link model (as step.simulate_step), per simulated rank
    endpoint = float(tm.endpoint_delay_ns)

    def path(dim: int, dr: int) -> tuple:
        if blocks[dim] == Block.SWITCH:
            return ((dim, "up"), (dim, "down"))
        return ((dim, 0 if npd[dim] <= 2 else dr),)

    def pre_send_ns(s: _Stream) -> float:
        if s.pre is not None:
            return s.pre[s.step]
        return endpoint + (s.red_step if 1 <= s.step <= s.reductions else 0.0)

    def link_put(rk: _Rank, link, msg, t: float) -> None:
        if link is None:  # a later hop of a Ring route: on another NPU's link
            owner, hop = msg
            ser, la = owner.hops[hop] if type(owner) is _Stream else (owner.ser[hop],
                                                                        owner.lat[hop])
            push(t + ser + la, "arrive", msg)
            return
        if rk.link_busy.get(link, False):
            rk.link_wait.setdefault(link, []).append(msg)
            return
        rk.link_busy[link] = True
        owner, hop = msg
        if type(owner) is _Stream:
            if owner.hops is None:
                ser, la = owner.msg_ns, lat[owner.stages[owner.pos][0]]
            else:
                ser, la = owner.hops[hop]
        else:
            ser, la = owner.ser[hop], owner.lat[hop]
        push(t + ser, "free", (rk, link))
        push(t + ser + la, "arrive", msg)

    def start_stage_aware(s: _Stream) -> None:
        dim, coef, fixed, _, dr, _, steps, red, n_d, ring = s.stages[s.pos]
        s.step = 0
        if ring is not None:
            s.path, s.hops, s.pre, s.post = shapes.local_ring(ring, dr, s.rk.rank)
            s.steps = ring[2]
            push(now + s.pre[0], "send", s)
            return
        s.hops = s.pre = None
        s.steps = max(int(round(steps)), 1)
        s.msg_ns = coef / s.steps / bw[dim] if coef > 0 else 0.0
        s.path = path(dim, dr)
        s.reductions = n_d - 1 if red > 0 else 0
        s.red_step = red / s.reductions if s.reductions else 0.0
        push(now + pre_send_ns(s), "send", s)

    def sync(rk: _Rank) -> None:
        """Brings the rank's running unaware stages' remaining fractions up to now."""
        if aware or rk.t == now:
            return
        dt = now - rk.t
        for s in rk.running.values():
            if not s.held:
                s.left = max(0.0, s.left - dt / s.rate) if s.rate > 0 else 0.0
        rk.t = now

    def next_stage(rk: _Rank) -> None:
        """Files the rank's first unaware stage to end (time, then the older stream)."""
        rk.ver += 1
        if not rk.running:
            return
        sync(rk)
        best = None
        for key, s in rk.running.items():
            if s.held:
                continue
            t = rk.t + s.left * s.rate
            if best is None or t < best[0] or (t == best[0] and s.seq < best[1]):
                best = (t, s.seq, key)
        if best is not None:
            heapq.heappush(stq, (best[0], best[1], rk.ver, rk.idx, best[2]))

    def try_start(rk: _Rank, dim: int, qi: int) -> None:
        if (dim, qi) in rk.running or not rk.queues[dim][qi]:
            return
        sync(rk)
        s = rk.queues[dim][qi].pop(0)
        rk.running[(dim, qi)] = s
        if rk.nrun[dim] == 0:
            rk.since[dim] = now
        rk.nrun[dim] += 1
        touched.append(rk)
        if aware:
            if not s.held:
                start_stage_aware(s)
        else:
            s.rate = stage_ns(s)

    def enqueue(rk: _Rank, s: _Stream) -> None:
        dim, qi = s.stages[s.pos][0], s.stages[s.pos][5]
        lst = rk.queues[dim][qi]
        at = len(lst)
        for j, other in enumerate(lst):
            if other.priority < s.priority:
                at = j
                break
        lst.insert(at, s)
        try_start(rk, dim, qi)

    def place(rk: _Rank, i: int, k: int, stages, prio: int, held: bool) -> list:
        nonlocal seq
        out = []
        for _ in range(k):
            placed = []
            for dim, coef, fixed, kind, steps, red, n_d, ring in stages:
                qi, dr = rk.alloc.next(dim, kind)
                if ring is not None:
                    pos = trace.groups[ring[0]].ranks.index(rk.rank)
                    fixed = float(shapes.ring_ns(ring, dr)[pos])
                placed.append((dim, coef, fixed, kind, dr, qi, steps, red, n_d, ring))
            seq += 1
            out.append(_Stream(i, prio, placed, seq, rk, held))
            enqueue(rk, out[-1])
        return out

    def issue_collective(rk: _Rank, i: int) -> None:
        g = rk.group[i]
        k, stages = shapes.get(rk.coll[i], rk.size[i], g)
        prio = rk.counter
        rk.counter += 1 if lifo else -1
        rk.streams_left[i] = k
        if not stages:
            rk.streams_left[i] = 0
            return
        members = rk.members[g]
        if not members:
            place(rk, i, k, stages, prio, False)
            return
        # asymmetric group: the streams take their queues now, as every collective, but
        # their first stage runs only once every member class has issued its k-th on g
        nth = rk.issues.get(g, 0)
        rk.issues[g] = nth + 1
        issued, waiters = pending.setdefault((g, nth), (set(), {}))
        issued.add(rk.cls)
        streams = place(rk, i, k, stages, prio, True)
        entry = [streams, 0]
        for c in members - issued:
            entry[1] += 1
            waiters.setdefault(c, []).append(entry)
        if entry[1] == 0:
            release(streams)
        for other in waiters.pop(rk.cls, ()):
            other[1] -= 1
            if other[1] == 0:
                release(other[0])

    def release(streams) -> None:
        for s in streams:
            sync(s.rk)
            touched.append(s.rk)
            s.held = False
            if aware and s.rk.running.get(s.stages[s.pos][0:6:5]) is s:
                start_stage_aware(s)

    def finish(rk: _Rank, i: int) -> None:
        rk.end[i] = now
        rk.done += 1
        kind = rk.kind[i]
        if kind == COLL or kind == SEND:
            rk.inflight -= 1
        ptr = rk.child_ptr
        for c in rk.children[ptr[i]:ptr[i + 1]]:
            rk.waiting[c] -= 1
            if rk.waiting[c] == 0:
                heapq.heappush(rk.ready, c)
        dirty.append(rk)

    def send(rk: _Rank, i: int) -> None:
        to, j, dst = rk.targets[i]
        size = rk.size[i]
        what = f"{rk.tr.path}: node id {int(rk.tr.node_id[i])}"
        if not aware:
            push(now + geo.hop_ns(rk.rank, dst, size / gib, what), "msg", (rk, i, to, j))
            return
        route = geo.route(rk.rank, dst, what, local=True)
        m = _P2P(rk, i, (to, j), _own_links(route),
                 [size / gib / bw[d] for _, d in route], [lat[d] for _, d in route])
        link_put(rk, m.path[0], (m, 0), now)

    def deliver(rk: _Rank, i: int, to: _Rank, j: int) -> None:
        finish(rk, i)
        if j in to.posted:
            to.posted.discard(j)
            finish(to, j)
        else:
            to.arrived[j] = now

    def issue_ready(rk: _Rank) -> None:
        if not rk.ready:
            return
        blocked = []
        kinds = rk.kind
        while rk.ready:
            i = heapq.heappop(rk.ready)
            kind = kinds[i]
            if kind == COMPUTE:
                if rk.computing:
                    blocked.append(i)
                    continue
                rk.start[i] = now
                rk.computing = True
                heapq.heappush(comp, (now + rk.dur[i], rk.idx, i))
            elif kind == RECV:
                rk.start[i] = now
                if i in rk.arrived:
                    del rk.arrived[i]
                    finish(rk, i)
                else:
                    rk.posted.add(i)
            else:
                if limit is not None and rk.inflight >= limit:
                    blocked.append(i)
                    continue
                rk.start[i] = now
                rk.inflight += 1
                if kind == COLL:
                    issue_collective(rk, i)
                    if rk.streams_left[i] == 0:
                        finish(rk, i)
                else:
                    send(rk, i)
        for i in blocked:
            heapq.heappush(rk.ready, i)

    def stage_end(rk: _Rank, key) -> None:
        s = rk.running[key]
        s.left = 1.0
        s.pos += 1
        if s.pos < len(s.stages):
            enqueue(rk, s)
        else:
            rk.streams_left[s.node] -= 1
            if rk.streams_left[s.node] == 0:
                # the collective's end is reported while its last stream still holds its
                # queue (step.simulate_step): what it frees is issued first
                finish(rk, s.node)
                issue_ready(rk)
        del rk.running[key]
        rk.nrun[key[0]] -= 1
        if rk.nrun[key[0]] == 0:
            rk.busy[key[0]] += now - rk.since[key[0]]
        try_start(rk, *key)

    def net_event(kind: str, payload, t: float):
        """One network event; -> (rank, the finished stage's queue) or None."""
        if kind == "send":
            link_put(payload.rk, payload.path[0], (payload, 0), t)
        elif kind == "free":
            rk, link = payload
            rk.link_busy[link] = False
            waiting = rk.link_wait.get(link)
            if waiting:
                link_put(rk, link, waiting.pop(0), t)
        elif kind == "arrive":
            owner, hop = payload
            if hop + 1 < len(owner.path):
                link_put(owner.rk, owner.path[hop + 1], (owner, hop + 1), t)
            elif type(owner) is _P2P:
                deliver(owner.rk, owner.node, *owner.target)
            else:
                s = owner
                s.step += 1
                if s.step < s.steps:
                    push(t + pre_send_ns(s), "send", s)
                else:
                    if s.pre is not None:
                        post = s.post
                    else:
                        post = s.red_step if s.reductions >= s.steps else 0.0
                    push(t + post, "done", s)
        elif kind == "msg":
            deliver(*payload)
        else:  # "done"
            return payload.rk, (payload.stages[payload.pos][0], payload.stages[payload.pos][5])
        return None

    def refile() -> None:
        if not aware:
            if len(touched) == 1:
                next_stage(touched[0])
            else:
                for other in dict.fromkeys(touched):
                    next_stage(other)
        touched.clear()

    # The loop takes the next event: a compute end (lowest rank first), else a network
    # event, else the unaware stage to end first (then the older stream), as
    # simulate_step; a rank's stages count their remaining fraction down at each of its
    # own events only (`sync`), which for one rank is simulate_step's arithmetic.
    stq: list = []  # (end, stream seq, version, rank idx, queue) of each rank's next stage
    touched: list = []
    for rk in ranks:
        issue_ready(rk)
    dirty.clear()
    refile()
    while True:
        t_next, what = np.inf, None
        if comp:
            t_next, what = comp[0][0], "compute"
        if net and net[0][0] < t_next:
            t_next, what = net[0][0], "net"
        while stq and stq[0][2] != ranks[stq[0][3]].ver:
            heapq.heappop(stq)
        if stq and stq[0][0] < t_next:
            t_next, what = stq[0][0], "stage"
        if what is None:
            break
        now = t_next
        if what == "compute":
            _, j, i = heapq.heappop(comp)
            rk = ranks[j]
            sync(rk)
            touched.append(rk)
            rk.computing = False
            finish(rk, i)
        elif what == "net":
            _, _, kind, payload = heapq.heappop(net)
            out = net_event(kind, payload, now)
            if out is None:
                if dirty:
                    for rk in list(dict.fromkeys(dirty)):
                        issue_ready(rk)
                    dirty.clear()
                refile()
                continue
            rk, key = out
            stage_end(rk, key)
        else:
            _, _, _, j, key = heapq.heappop(stq)
            rk = ranks[j]
            sync(rk)
            touched.append(rk)
            stage_end(rk, key)
        issue_ready(rk)
        for other in list(dict.fromkeys(dirty)):
            if other is not rk:
                issue_ready(other)
        dirty.clear()
        refile()

    for rk in ranks:
        if rk.done < rk.n:
            i = int(np.flatnonzero(np.isnan(rk.end))[0])
            kind = TraceNode(rk.kind[i]).name
            raise LibraInputError(
                f"{rk.tr.path}: node id {int(rk.tr.node_id[i])} ({kind}, "
                f"{show(rk.tr.name[i])}) never ends: a dependency cycle, a recv whose send "
                "never runs, or a collective some member of its group never issues.")
    rank_end = np.zeros(trace.num_ranks)
    ends = {rk.rank: (float(np.max(rk.end)) if rk.n else 0.0) for rk in ranks}
    rep_of = np.asarray([rank_of_cls[int(c)] for c in cls], np.int64)
    for r in range(trace.num_ranks):
        rank_end[r] = ends[int(rep_of[r])]
    busy = np.max(np.stack([rk.busy for rk in ranks]), axis=0)
    return TraceTiming(float(rank_end.max()) if rank_end.size else 0.0, rank_end, rep_of,
                       {rk.rank: rk.start for rk in ranks}, {rk.rank: rk.end for rk in ranks},
                       busy)


# ------------------------------------------------------------------------------ builders


def trace_from_nodes(nodes: Sequence[StepNode], npus_per_dim, *,
                     prefix: str = "step") -> TraceSet:
    """The trace set of a `step.step_graph` node list run by every NPU, as
    `inputs.chakra.write_traces` exports it (times and sizes unrounded): a collective over
    its involved dimensions, a SENDRECV as a send to the next NPU and a recv from the
    previous one of the first involved dimension of more than one NPU (tag: the node's
    index)."""
    npd = [int(n) for n in npus_per_dim]
    R = math.prod(npd)
    strides = [math.prod(npd[:d]) for d in range(len(npd))]
    groups: dict = {}
    ids: list = []  # StepNode index -> its trace node indices
    N = 0
    for nd in nodes:
        ids.append((N, N + 1) if nd.kind == "comm" and nd.collective == Collective.SENDRECV
                   else (N,))
        N += len(ids[-1])
    kind = np.zeros(N, np.int8)
    dur = np.zeros(N)
    coll = np.zeros(N, np.int8)
    size = np.zeros(N)
    group = np.full(N, -1, np.int32)
    tag = np.full(N, -1, np.int64)
    names, deps, ptr = [], [], [0]
    shift = {}
    for x, nd in enumerate(nodes):
        dl = sorted({k for dep in nd.deps for k in ids[dep]})
        for j, i in enumerate(ids[x]):
            deps += dl
            ptr.append(len(deps))
            if nd.kind == "compute":
                kind[i], dur[i] = COMPUTE, float(nd.duration_ns)
                names.append(nd.name)
            elif nd.collective == Collective.SENDRECV:
                kind[i] = SEND if j == 0 else RECV
                size[i], tag[i] = float(nd.size_bytes), x
                shift[i] = next(d for d in range(len(npd)) if nd.involved[d] and npd[d] > 1)
                names.append(f"{nd.name}.{'send' if j == 0 else 'recv'}")
            else:
                kind[i], coll[i], size[i] = COLL, int(nd.collective), float(nd.size_bytes)
                inv = tuple(bool(v) for v in nd.involved)
                if any(int(g) != (npd[d] if inv[d] else 1) for d, g in enumerate(nd.group)):
                    raise LibraInputError(
                        f"node {x} ({show(nd.name)}): group = {show(tuple(nd.group))} spans "
                        f"part of a dimension of npus_per_dim = {show(npd)}; a trace gives a "
                        "collective's group by whole dimensions or as a pg_name ring, which "
                        "ASTRA-sim runs differently from this hierarchical collective.")
                group[i] = groups.setdefault(inv, len(groups))
                names.append(nd.name)
    ranks = []
    for r in range(R):
        peer = np.full(N, -1, np.int32)
        for i, d in shift.items():
            c = r // strides[d] % npd[d]
            step = 1 if kind[i] == SEND else -1
            peer[i] = r + ((c + step) % npd[d] - c) * strides[d]
        ranks.append(RankTrace(rank=r, path=f"{prefix}.{r}", node_id=np.arange(N, dtype=np.int64),
                               name=tuple(names), kind=kind, duration_ns=dur, collective=coll,
                               size_bytes=size, group=group, peer=peer, tag=tag,
                               dep_ptr=np.asarray(ptr, np.int64),
                               deps=np.asarray(deps, np.int32)))
    return TraceSet(prefix=prefix, ranks=tuple(ranks),
                    groups=tuple(CommGroup(name=f"dims{''.join(str(int(v)) for v in inv)}",
                                           involved=inv) for inv in groups),
                    skipped={})
