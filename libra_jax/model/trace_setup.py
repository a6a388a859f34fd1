"""What `step_trace.simulate_trace` sets up before its event loop, and the trace set of a
step graph: the network geometry (NPU coordinates, hops and routes: `Geometry`,
`own_links`), the simulated ranks' state (`Rank`, `Stream`, `P2P`), the checks of a trace
set against the network (`check_trace`), the stages of each collective (`Shapes`, with the
pg_name rings' stage times), the result (`TraceTiming`, `timing_of`) and
`trace_from_nodes`. Send / recv matching and the classes of equivalent ranks are in
`trace_classes.py`.

Split from `step_trace.py` (which re-exports `trace_from_nodes`); the semantics are those
of its module docstring.

Units: ns, bytes, GB/s.
"""

from __future__ import annotations

import heapq
import math
from typing import NamedTuple, Sequence

import numpy as np

from libra_jax.model import pipelined
from libra_jax.model.step import Queues, chunk_split, stages_of
from libra_jax.model.trace_rings import ring_finish_aware, ring_finish_unaware, step_overheads
from libra_jax.model.trace_classes import COLL, COMPUTE, RECV, SEND, unique_ints
from libra_jax.types import (Block, Collective, CommGroup, LibraInputError, RankTrace,
                             StepNode, TraceNode, TraceSet, show)



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


class Geometry:
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

    def hop_sources(self, a: int, b: int, what: str) -> tuple[int, ...]:
        """The NPU whose link carries each hop of `route` (a, b): the NPU the hop leaves
        (a Switch's down hop: the NPU of its up hop)."""
        out = []
        for link, _ in self.route(a, b, what, local=False):
            out.append(out[-1] if link[0] == "down" else
                       link[1] if link[0] == "up" else link[0])
        return tuple(out)


def own_links(route) -> tuple:
    """The links of a route (`Geometry.route`, local names) that the one-NPU link model
    queues on: every hop but the later hops of a Ring route in one direction, which run on
    other NPUs' links (None: timed, not queued)."""
    return tuple(link if j == 0 or route[j - 1][0] != link else None
                 for j, (link, _) in enumerate(route))


# ------------------------------------------------------------------------------ the ranks


class Stream:
    __slots__ = ("node", "priority", "stages", "pos", "left", "seq", "rk", "rate", "held",
                 "step", "steps", "msg_ns", "msg_lat", "path", "reductions", "red_step", "hops",
                 "pre", "post", "driver", "ns_per_byte", "queued")

    def __init__(self, node, priority, stages, seq, rk, held):
        self.node, self.priority, self.stages, self.seq, self.rk = (node, priority, stages,
                                                                    seq, rk)
        self.pos = 0
        self.left = 1.0
        self.held = held  # waiting for the other member classes to issue its collective
        self.hops = self.pre = None  # a pg ring stage's per-hop (ser, lat) and overheads


class P2P:
    """A send/recv message under the congestion-aware backend: the sender's links."""

    __slots__ = ("rk", "node", "target", "path", "ser", "lat", "on")

    def __init__(self, rk, node, target, path, ser, lat, on=None):
        self.rk, self.node, self.target, self.path, self.ser, self.lat = (rk, node, target,
                                                                          path, ser, lat)
        self.on = on  # per hop, the simulated rank whose link it queues on (None: rk's)


class Rank:
    """One simulated rank (its class's representative)."""

    def __init__(self, idx: int, rank: int, cls: int, tr: RankTrace, num_dims: int, q: int):
        self.idx, self.rank, self.cls, self.tr = idx, rank, cls, tr
        n = tr.num_nodes
        self.kind = tr.kind.tolist()
        self.dur = tr.duration_ns.tolist()
        self.n = n
        self.start = [math.nan] * n  # lists while the event loop runs, then arrays
        self.end = [math.nan] * n
        child_of = np.repeat(np.arange(n, dtype=np.int64), np.diff(tr.dep_ptr))
        pairs = unique_ints(tr.deps.astype(np.int64) * max(n, 1) + child_of)
        parent, child = pairs // max(n, 1), pairs % max(n, 1)
        parents = np.bincount(child, minlength=n)
        self.waiting = parents.tolist()
        ptr = np.searchsorted(parent, np.arange(n + 1))
        self.child_ptr = ptr.tolist()
        self.children = child.tolist()
        # the next kernel of a chain: a compute's only child, a compute with no other parent
        one = np.flatnonzero((np.diff(ptr) == 1) & (tr.kind == COMPUTE))
        nxt = np.full(n, -1, np.int64)
        c = child[ptr[one]]
        ok = (tr.kind[c] == COMPUTE) & (parents[c] == 1)
        nxt[one[ok]] = c[ok]
        self.nxt = nxt.tolist()
        self.chain = None  # (nodes, ends) of the chain of kernels running as one event
        self.ready = np.flatnonzero(parents == 0).tolist()  # ascending: a heap
        heapq.heapify(self.ready)
        self.computing = False
        self.inflight = 0
        self.counter = 0
        self.alloc = Queues(num_dims, q)
        self.trees = [0] * num_dims  # each tree dimension's next tree (RootMax / RootMin)
        self.tree_last: dict = {}  # (dim, queue) -> its last tree chunk: (start, tree, bytes)
        self.queues = [[[] for _ in range(q)] for _ in range(num_dims)]
        self.active = [[0] * q for _ in range(num_dims)]  # running streams per queue
        self.running: dict = {}  # (dim, queue, stream seq) -> Stream
        self.streams_left: dict = {}
        self.busy = [0.0] * num_dims  # a list while the event loop runs
        self.nrun = [0] * num_dims  # running stages per dimension, and since when
        self.since = [0.0] * num_dims
        self.t = 0.0  # when the unaware stages' remaining fractions were last brought up
        self.ver = 0  # version of its entry in the stage-end heap
        self.cur = None  # (end, stream seq, queue) of that entry while it is filed
        self.issues: dict = {}  # group -> collectives issued on it
        self.arrived: dict = {}  # RECV node -> arrival time of its message
        self.posted: set = set()
        self.link_busy: dict = {}  # link -> (end, seq) of its last send's "free" event
        self.link_wait: dict = {}
        self.done = 0

    def chain_from(self, i: int, t: float) -> tuple[float, int]:
        """Starts the chain of kernels from compute i (ending at t): each the only child of
        the one before, which is its only parent, so while nothing else wants the compute
        unit each end only starts the next one and one compute event stands for them all,
        at the last one's end (the same sums) -> (that end, the last kernel)."""
        nodes, ends = [i], [t]
        dur, nxt = self.dur, self.nxt
        c = nxt[i]
        while c >= 0:
            t = t + dur[c]
            nodes.append(c)
            ends.append(t)
            c = nxt[c]
        self.chain = (nodes, ends)
        return t, nodes[-1]

    def chain_done(self, m: int) -> None:
        """Records the ends of the chain's first m kernels (each starting the next) and
        drops the chain."""
        nodes, ends = self.chain
        end, start, waiting = self.end, self.start, self.waiting
        for j in range(m):
            end[nodes[j]] = ends[j]
            start[nodes[j + 1]] = ends[j]
            waiting[nodes[j + 1]] = 0
        self.done += m
        self.chain = None


def check_trace(trace: TraceSet, npd, what="trace") -> None:
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


class Shapes:
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
                k, stages = stages_of(node, self.blocks, self.tm, self.step_cache,
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
        pre, post = step_overheads(steps, red, n, float(self.tm.endpoint_delay_ns))
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
        pre, post = step_overheads(steps, red, n, float(self.tm.endpoint_delay_ns))
        hops = [(msg / self.geo.bw[d], self.geo.lat[d]) for _, d in route]
        alone = sum(pre) + post + steps * sum(a + b for a, b in hops)
        want = float(self.ring_ns(ring, dr)[pos])
        if want >= alone:  # waits for slower hops before it: longer gaps, same link use
            pre = [p + (want - alone) / steps for p in pre]
        else:  # its own route is the longer: everything shrinks alike
            ratio = want / alone
            hops = [(a * ratio, b * ratio) for a, b in hops]
            pre, post = [p * ratio for p in pre], post * ratio
        out = (own_links(route), hops, pre, post)
        self.ring_cache[key] = out
        return out

    def ring_directions(self, collective: int) -> tuple[int, ...]:
        """The directions a pg ring of ``collective`` may run in (its class key holds each
        one's stage times): an all-reduce's first half of the queues is clockwise, other
        collectives take every queue; a runtime other than the default may put any of
        them on the second half (a Themis all-reduce's all-gather)."""
        if not self.tm.is_default_runtime:
            return (0, 1)
        q = int(self.tm.queues_per_dim)
        return (0,) if collective == Collective.ALLREDUCE or q < 2 else (0, 1)

    def placed(self, rk, stages) -> list:
        """One stream's stages as ``rk`` queues them: each takes its queue and direction
        (`step.Queues`); a pg ring stage its member's stage time as its fixed part. A
        placed stage is (dim, coef, fixed, kind, direction, queue, steps, reduction_ns,
        NPUs, pg ring) and, under a runtime other than the default, (com, size, exact, tree):
        a double-binary-tree stage takes its dimension's next tree (`step.simulate_step`)."""
        out = []
        algos = self.tm.algorithm
        for st in stages:
            dim, coef, fixed, kind, steps, red, n_d, ring = st[:8]
            qi, dr = rk.alloc.next(dim, kind)
            if ring is not None:
                pos = self.trace.groups[ring[0]].ranks.index(rk.rank)
                fixed = float(self.ring_ns(ring, dr)[pos])
            extra = st[8:]
            if extra:
                tree = None
                if algos and algos[dim] == "double_binary_tree" and st[10] is not None:
                    tree, rk.trees[dim] = rk.trees[dim], 1 - rk.trees[dim]
                extra += (tree,)
            out.append((dim, coef, fixed, kind, dr, qi, steps, red, n_d, ring) + extra)
        return out


def timing_of(trace: TraceSet, ranks, cls: np.ndarray, rank_of_cls: dict) -> TraceTiming:
    """The `TraceTiming` of the simulated ranks once the event loop has drained (their node
    times turned from lists into arrays); a node that never ran is an error."""
    for rk in ranks:  # node times as arrays (the loop kept them in lists)
        rk.start = np.asarray(rk.start, np.float64)
        rk.end = np.asarray(rk.end, np.float64)
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
    busy = np.max(np.asarray([rk.busy for rk in ranks], np.float64), axis=0)
    return TraceTiming(float(rank_end.max()) if rank_end.size else 0.0, rank_end, rep_of,
                       {rk.rank: rk.start for rk in ranks}, {rk.rank: rk.end for rk in ranks},
                       busy)


# ------------------------------------------------------------------------------ builders


def block_members(r: int, group, npd, strides) -> tuple[int, ...]:
    """The NPUs of rank ``r``'s group when dimension d takes ``group[d]`` NPUs: those that
    share ``r``'s block of ``group[d]`` consecutive coordinates on every dimension (the
    whole dimension when it is all of it, ``r``'s own coordinate when 1), ascending."""
    members = [0]
    for d, (n, g) in enumerate(zip(npd, group)):
        g = max(int(g), 1)
        start = (r // strides[d] % n) // g * g
        members = [m + c * strides[d] for c in range(start, start + g) for m in members]
    return tuple(sorted(members))


def spans_part_of_a_dimension(node: StepNode, npus_per_dim) -> bool:
    """Whether a comm node of `step.step_graph` (not a SENDRECV) is a collective over part
    of a dimension: its group takes neither 1 nor all of some dimension's NPUs (or does
    not match its involved dimensions). Chakra can say such a group only as a ``pg_name``
    ring (`trace_from_nodes` with ``partial_as_pg``)."""
    if node.kind != "comm" or node.collective == Collective.SENDRECV:
        return False
    return any(int(g) != (int(n) if v else 1)
               for g, n, v in zip(node.group, npus_per_dim, node.involved))


def trace_from_nodes(nodes: Sequence[StepNode], npus_per_dim, *, prefix: str = "step",
                     partial_as_pg: bool = False) -> TraceSet:
    """The trace set of a `step.step_graph` node list run by every NPU, as
    `inputs.chakra.write_traces` exports it (times and sizes unrounded): a collective over
    its involved dimensions, a SENDRECV as a send to the next NPU and a recv from the
    previous one of the first involved dimension of more than one NPU (tag: the node's
    index). A collective over part of a dimension is refused, or with ``partial_as_pg``
    given as a ``pg_name`` group per block of NPUs (`block_members`; names "1", "2", ...
    in order of first use), which ASTRA-sim runs as a flat ring on dimension 0's queue: not
    the hierarchical collective `step.simulate_step` replays, so ``model=pipelined`` times
    such a step as this trace set (`step_partial.simulate_graph_ns`)."""
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
    partial: dict = {}  # node -> its group's NPUs per dimension (over part of one)
    rings: dict = {}  # NPUs of a pg_name group -> its index among the rings
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
                if spans_part_of_a_dimension(nd, npd):
                    if partial_as_pg:
                        partial[i] = tuple(int(g) for g in nd.group)
                        names.append(nd.name)
                        continue
                    raise LibraInputError(
                        f"node {x} ({show(nd.name)}): group = {show(tuple(nd.group))} spans "
                        f"part of a dimension of npus_per_dim = {show(npd)}; a trace gives a "
                        "collective's group by whole dimensions or as a pg_name ring, which "
                        "ASTRA-sim runs differently from this hierarchical collective.")
                group[i] = groups.setdefault(inv, len(groups))
                names.append(nd.name)
    ranks = []
    for r in range(R):
        own = group
        if partial:
            own = group.copy()
            for i, g in partial.items():
                members = block_members(r, g, npd, strides)
                own[i] = len(groups) + rings.setdefault(members, len(rings))
        peer = np.full(N, -1, np.int32)
        for i, d in shift.items():
            c = r // strides[d] % npd[d]
            step = 1 if kind[i] == SEND else -1
            peer[i] = r + ((c + step) % npd[d] - c) * strides[d]
        ranks.append(RankTrace(rank=r, path=f"{prefix}.{r}", node_id=np.arange(N, dtype=np.int64),
                               name=tuple(names), kind=kind, duration_ns=dur, collective=coll,
                               size_bytes=size, group=own, peer=peer, tag=tag,
                               dep_ptr=np.asarray(ptr, np.int64),
                               deps=np.asarray(deps, np.int32)))
    return TraceSet(prefix=prefix, ranks=tuple(ranks),
                    groups=tuple(CommGroup(name=f"dims{''.join(str(int(v)) for v in inv)}",
                                           involved=inv) for inv in groups)
                    + tuple(CommGroup(name=str(k + 1), ranks=m) for m, k in rings.items()),
                    skipped={})
