"""ASTRA-sim's double binary tree (``DoubleBinaryTreeAllReduce.cc``,
``DoubleBinaryTreeTopology`` / ``BinaryTree``) on one dimension, and the links and hops of a
message on a dimension's block, which every algorithm's replay uses
(``docs/algorithms.md``). Split from `algorithms.py`, which calls these and re-exports the
public tree functions.

Host numpy / plain floats. Units: bytes, ns, GB/s (1 GB = 2^30 B when ``gb_is_gib``).
"""

from __future__ import annotations

import heapq
import math

from libra_jax.model.pipelined_work import GIB_PER_GB
from libra_jax.types import Block


# ------------------------------------------------------------------ links and hops
def hops(block, n, off):
    """Hops of a message to the peer ``off`` places on: 2 through a Switch, 1 on a
    FullyConnected dimension, the shorter way round a Ring."""
    if int(block) == Block.SWITCH:
        return 2
    if int(block) == Block.FULLYCONNECTED:
        return 1
    d = off % n
    return min(d, n - d)


def route(blk, n, src, dst):
    """The aware backend's links from ``src`` to ``dst``: a Switch's up and down, a
    FullyConnected pair's, a Ring's hops the shorter way (ties clockwise, ``Ring::route``)."""
    if blk == Block.SWITCH:
        return [("up", src), ("down", dst)]
    if blk == Block.FULLYCONNECTED:
        return [(src, dst)]
    step = -1 if n - (dst - src) % n < (dst - src) % n else 1
    return [((src + j * step) % n, (src + (j + 1) * step) % n)
            for j in range(min((dst - src) % n, (src - dst) % n))]



def peer_links(block: int, n: int, dim: int, off: int) -> tuple:
    """The representative NPU's own links to the NPU ``off`` places on (signed) in its
    dimension ``dim`` of ``n`` NPUs, in the whole-step replays' link keys (`step.py`,
    `trace_runtime.py`): a FullyConnected pair's own link (offsets 1 and n-1 are the ring's
    two, ``(dim, 0)`` and ``(dim, 1)``), a Ring's shorter way round hop by hop (ties
    clockwise), a Switch's up and down link; a dimension of 2 has one link."""
    k = off % n
    if block == Block.SWITCH:
        return ((dim, "up"), (dim, "down"))
    if n <= 2:
        return ((dim, 0),)
    if block == Block.FULLYCONNECTED:
        return ((dim, 0 if k == 1 else (1 if k == n - 1 else ("peer", k))),)
    return ((dim, 1),) * (n - k) if n - k < k else ((dim, 0),) * k


def copy_links(blk, n, dim, copy_of, a, b):
    """The step replay's link keys (``("abs", copy, link)``) of NPU ``a``'s message to NPU
    ``b`` on dimension ``dim`` of ``n`` NPUs when every NPU of it is its own copy
    (``copy_of(npu)``; `TreeLinks`, `algorithms.RingCopies`): through a Switch the sender's
    ``(dim, "up")`` and the receiver's ``(dim, "down")``; on a FullyConnected dimension the
    sender's own link to that peer (`peer_links`' keys); on a Ring each hop's NPU's
    clockwise ``(dim, 0)`` or anticlockwise ``(dim, 1)`` link (`route`); a dimension of 2
    has one link each way."""
    if int(blk) == Block.SWITCH:
        return (("abs", copy_of(a), (dim, "up")), ("abs", copy_of(b), (dim, "down")))
    if int(blk) == Block.FULLYCONNECTED:
        return tuple(("abs", copy_of(a), link) for link in peer_links(blk, n, dim, b - a))
    return tuple(("abs", copy_of(x), (dim, 0 if n <= 2 or y == (x + 1) % n else 1))
                 for x, y in route(blk, n, a, b))


# ------------------------------------------------------------------ double binary tree
def tree_links(n):
    """(parent [n], children [n] lists) of ASTRA-sim's first tree (``RootMax``;
    ``BinaryTree.cc``): a root whose only child is a complete binary tree of n - 1 nodes,
    ids given in order (left subtree, node, right subtree) from 0, so the root is n - 1."""
    parent, children = [-1] * n, [[] for _ in range(n)]
    depth = 1 + int(math.floor(math.log2(n)))  # BinaryTree's depth loop

    def build(d, lo):  # a complete subtree of depth d with in-order ids from lo -> root id
        if d == 1:
            return lo, lo + 1
        left, nxt = build(d - 1, lo)
        me = nxt
        right, nxt = build(d - 1, me + 1)
        parent[left] = parent[right] = me
        children[me] = [left, right]
        return me, nxt

    sub, root = build(depth - 1, 0)
    parent[sub] = root
    children[root] = [sub]
    return parent, children


def tree_shapes(n):
    """Both trees of ``DoubleBinaryTreeTopology`` on ``n`` NPUs, (parent, children) each:
    ``RootMax`` (`tree_links`) and ``RootMin``, the same tree with every id one on."""
    par0, ch0 = tree_links(n)
    rot = ([-1 if p < 0 else (p + 1) % n for p in par0[-1:] + par0[:-1]],
           [[(c + 1) % n for c in cs] for cs in ch0[-1:] + ch0[:-1]])
    return (par0, ch0), rot


def _tree_red(size, lmb, fl):
    return 0.0 if lmb is None else 3.0 * fl(size / lmb)


def _tree_next(par, ch, i, got, started, ep, red, from_parent=False):
    """``DoubleBinaryTreeAllReduce``'s next action of NPU ``i`` of a tree (``par`` /
    ``ch``) once it took the chunk (``started``) or a message came (``from_parent``, else
    from a child, ``got`` children's data in): (delay ns, action) or None (it waits). A leaf
    sends "up" after its endpoint delay; a node reduces and sends "up" (the root "down")
    once every child's data is in; the parent's data goes "down" after the endpoint delay and
    a reduction ("end" at a leaf, after the endpoint delay alone)."""
    if from_parent:
        return ep + (red if ch[i] else 0.0), ("down" if ch[i] else "end")
    if not started:
        return None
    if not ch[i]:
        return ep, "up"
    if got == len(ch[i]):
        return ep + red, ("down" if par[i] < 0 else "up")
    return None


def tree_stage(n, block, size, lat, ep, lmb, unit, backend):
    """The unaware stage of a tree all-reduce (every message the whole buffer): 2 s sends
    (s = log2 n levels below the root), 2 s + 1 endpoint delays, 2 s - 1 reductions, each
    send's hops the longest parent-child distance on its level (a Ring; FC 1, Switch 2).
    Returns (bytes_coef, fixed_ns, steps, reduction_ns, out_bytes, affine on the unaware
    backend); `algorithms.phase_stage` makes it a `PhaseStage`."""
    s = int(round(math.log2(n)))
    parent, _ = tree_links(n)
    depth = [0] * n
    for i in range(n):
        j = i
        while parent[j] != -1:
            j = parent[j]
            depth[i] += 1
    hop_lat = 0.0
    for lev in range(1, s + 1):  # the edge into a node of depth lev (each used twice)
        hop_lat += 2 * lat * max(hops(block, n, i - parent[i]) for i in range(n)
                                 if depth[i] == lev)
    red = (2 * s - 1) * _tree_red(size, lmb, float)
    coef = 2 * s * size * unit * (2.0 if backend == "aware" and int(block) == Block.SWITCH
                                  else 1.0)
    return (coef, hop_lat + (2 * s + 1) * ep + red, float(2 * s), red, size,
            int(block) != Block.RING)


def tree_time_ns(n, blk, size, bw, lat, ep, lmb, gb_is_gib, aware, fl):
    """One chunk's tree all-reduce: the last NPU's exit (`tree_replay`)."""
    return max(tree_replay(n, blk, [size], [0], bw, lat, ep, lmb, gb_is_gib, aware, fl)[0])


def tree_replay(n, blk, sizes, trees, bw, lat, ep, lmb, gb_is_gib, aware, fl, queues=1,
                starts=None, queue_of=None, slots=1):
    """Event replay of ``DoubleBinaryTreeAllReduce::run`` on every NPU for chunks of
    ``sizes`` bytes on trees ``trees`` (0 ``RootMax``, 1 ``RootMin`` = ``RootMax`` rotated
    by one, `DoubleBinaryTreeTopology::get_topology` alternates), every NPU running chunk
    ``j`` in queue ``j % queues`` one at a time (from 0 ns) -> [chunks][n] exit times (ns).
    A leaf exits when its parent's data is through its memory bus, an intermediate / root
    when it sends down: NPUs leave a chunk at different times, and a child's message that
    arrives before its parent runs that chunk waits for it (``sim_recv``: the callback runs
    at once when the recv is posted). ``starts`` / ``queue_of`` / ``slots`` (the step
    replay, `tree_group_ends`): chunk ``j`` is queued at ``starts[j]`` on queue
    ``queue_of[j]``, whose NPUs each run up to ``slots`` of its chunks at once, in order;
    ``starts[j]`` may be one time per NPU (`TreeCopies`; ``inf`` for an NPU that never
    comes to it, which then never leaves it, nor do the NPUs that wait for it: None)."""
    shape = tree_shapes(n)
    bpns = bw * (GIB_PER_GB if gb_is_gib else 1.0)
    k = len(sizes)
    ev, seq, busy, wait = [], [0], {}, {}
    got = [[0] * n for _ in range(k)]
    started = [[False] * n for _ in range(k)]
    out = [[None] * n for _ in range(k)]

    def push(t, kind, data):
        seq[0] += 1
        heapq.heappush(ev, (t, seq[0], kind, data))

    def send(a, b, j, t):
        if not aware:
            push(t + fl(sizes[j] / bpns + hops(blk, n, b - a) * lat), "recv", (a, b, j))
        else:
            put(route(blk, n, a, b)[0], (a, b, j, 0), t)

    def put(link, msg, t):
        if busy.get(link):
            wait.setdefault(link, []).append(msg)
            return
        busy[link] = True
        push(t + fl(sizes[msg[2]] / bpns), "free", link)
        push(t + fl(sizes[msg[2]] / bpns + lat), "hop", msg)

    def start(i, j, t):
        started[j][i] = True
        nxt_ = _tree_next(*shape[trees[j]], i, got[j][i], True, ep,
                          _tree_red(sizes[j], lmb, fl))
        if nxt_ is not None:  # a leaf, or a node whose children's data came first
            push(t + nxt_[0], nxt_[1], (i, j))

    starts = [0.0] * k if starts is None else starts
    queue_of = [j % queues for j in range(k)] if queue_of is None else queue_of
    nxt, run = {}, {}  # (NPU, queue) -> its next chunk not started / chunks running

    def at(j, i):  # chunk j's start on NPU i (one for all, or one per NPU: inf = never)
        return starts[j][i] if isinstance(starts[j], (list, tuple)) else starts[j]

    def admit(i, qq, t):  # the NPU starts its queue's next chunks while a slot is free
        j = nxt.get((i, qq), 0)
        while j < k and (queue_of[j] != qq or (run.get((i, qq), 0) < slots
                                               and at(j, i) <= t)):
            if queue_of[j] == qq:
                run[(i, qq)] = run.get((i, qq), 0) + 1
                start(i, j, t)
            j += 1
        nxt[(i, qq)] = j

    def leave(i, j, t):
        out[j][i] = t
        run[(i, queue_of[j])] -= 1
        admit(i, queue_of[j], t)

    for i in range(n):
        for qq in sorted(set(queue_of)):
            admit(i, qq, 0.0)
    for j in range(k):
        for t0 in sorted({at(j, i) for i in range(n)}):
            if 0 < t0 < math.inf:
                push(t0, "avail", (queue_of[j], j))
    while ev:
        t, _, kind, data = heapq.heappop(ev)
        if kind == "avail":
            for i in range(n):
                admit(i, data[0], t)
            continue
        if kind == "free":
            busy[data] = False
            if wait.get(data):
                put(data, wait[data].pop(0), t)
            continue
        if kind == "hop":
            a, b, j, h = data
            p = route(blk, n, a, b)
            if h + 1 < len(p):
                put(p[h + 1], (a, b, j, h + 1), t)
                continue
            kind, data = "recv", (a, b, j)
        i, j = data[-2:]
        par, ch = shape[trees[j]]
        red = _tree_red(sizes[j], lmb, fl)
        if kind == "up":
            send(i, par[i], j, t)
        elif kind == "down":
            for c in ch[i]:
                send(i, c, j, t)
            leave(i, j, t)
        elif kind == "end":
            leave(i, j, t)
        else:  # from the parent: down the tree (a leaf: done); from a child: reduce, send
            # up (the root: down) once all are in
            if par[i] != data[0]:
                got[j][i] += 1
            nxt_ = _tree_next(par, ch, i, got[j][i], started[j][i], ep, red, par[i] == data[0])
            if nxt_ is not None:
                push(t + nxt_[0], nxt_[1], (i, j))
    return out


class TreeDriver:
    """A tree chunk's stand-in for the step replays' aware drivers: it sends nothing on the
    step's links, and its stage is done at ``done`` (a "general" event at another time is
    stale: `TreeGroup` moved the end)."""

    done = None
    over = False  # its end was taken (`step.simulate_step`): it cannot move any more

    def __init__(self, prev):
        self.prev = prev  # the stream's previous driver: its messages still in flight

    def general(self, t, i):
        return [] if i < 0 else self.prev.general(t, i)

    def received(self, t, dst):
        return self.prev.received(t, dst)


class TreeGroup:
    """The aware backend's tree chunks of one dimension (every queue), replayed together by
    `tree_replay` on every NPU: chunks queued at their start, ``slots`` at once per NPU and
    queue, all sharing the dimension's links (`step.simulate_step`, `trace_runtime`).
    ``rest``: (bw GB/s per link, latency ns, endpoint delay ns, local-mem GB/s, gb_is_gib)."""

    def __init__(self, n, blk, rest, slots):
        self.n, self.blk, self.rest, self.slots = n, int(blk), rest, slots
        self.ch = []  # [stream, start, tree, bytes, queue]

    def add(self, s, t, tree, size, queue, queued=None):
        """Chunk of stream ``s`` taken from its queue at ``t`` -> the streams whose end moved
        (the new one first), each with its ``driver.done`` set to it (push a "general"
        ``(s, -1)`` then). While the queue's previous chunk still runs, the chunk is queued
        on the NPUs from when it was queued (``queued``; not before that chunk's start):
        an NPU that left the previous chunk takes it then, not when the queue hands it on.
        Chunks that all ended before the next one started are dropped (they meet no later
        chunk)."""
        prev = next((c for c in reversed(self.ch) if c[4] == queue), None)
        if queued is not None and prev is not None and (prev[5].done is None
                                                        or prev[5].done > t):
            t = min(t, max(prev[1], queued))
        s.driver = TreeDriver(getattr(s, "driver", None))
        self.ch.append([s, float(t), tree, float(size), queue, s.driver])
        cut, last = 0, -math.inf
        for j, c in enumerate(self.ch):
            if j and last <= c[1]:
                cut = j
            last = max(last, math.inf if c[5].done is None else c[5].done)
        self.ch = self.ch[cut:]
        out = tree_replay(self.n, self.blk, [c[3] for c in self.ch], [c[2] for c in self.ch],
                          *self.rest, True, float, starts=[c[1] for c in self.ch],
                          queue_of=[c[4] for c in self.ch], slots=self.slots)
        moved = []
        for c, ends in zip(self.ch, out):  # (an end only moves later: a stale event at the
            if c[5].done is None or max(ends) > c[5].done:  # old one is then ignored)
                c[5].done = max(ends)
                if c[5] is c[0].driver:  # (a stream gone on has ended: it cannot move)
                    moved.append(c[0])
        return moved


class TreeCopies:
    """The unaware backend's tree chunks of one tree of NPUs when every NPU of it is its own
    copy (`step.simulate_step`'s copies, one per position in the tree dimensions): each NPU
    takes a chunk when its own queue hands it the chunk, and leaves it at its own time
    (`tree_replay` of the chunk alone, one start per NPU, once every NPU has come to it: no
    NPU leaves a tree before); chunks are matched by their logical id (node, stream,
    stage), whatever order the NPUs reach them in. ``rest``: (bw GB/s per link, latency ns,
    endpoint delay ns, local-mem GB/s, gb_is_gib). The aware backend's copies share the
    dimension's links with its other messages: `TreeLinks`."""

    def __init__(self, n, blk, rest):
        self.n, self.blk, self.rest = n, int(blk), rest
        self.ch = {}  # logical id -> [starts [n], streams [n]]

    def add(self, lid, i, s, t, tree, size):
        """NPU ``i``'s stream ``s`` reaches chunk ``lid`` at ``t`` -> the streams whose end
        is now known, every NPU's once the last has come (each with ``driver.done`` set:
        push a "general" ``(s, -1)`` then)."""
        c = self.ch.setdefault(lid, [[math.inf] * self.n, [None] * self.n])
        s.driver = TreeDriver(getattr(s, "driver", None))
        c[0][i], c[1][i] = float(t), s
        if math.inf in c[0]:
            return []
        del self.ch[lid]
        ends = tree_replay(self.n, self.blk, [float(size)], [tree], *self.rest, False, float,
                           starts=[c[0]], queue_of=[0], slots=1)[0]
        for st, e in zip(c[1], ends):
            st.driver.done = e
        return list(c[1])


class TreeLinks:
    """The aware backend's tree chunks of one tree of NPUs when every NPU of it is its own
    copy (`step.simulate_step`), on the step's own links: each NPU runs
    ``DoubleBinaryTreeAllReduce`` as `tree_replay` does (a leaf sends up after its endpoint
    delay; a node sends up, the root down, once every child's data is in and it runs the
    chunk; a node leaves the chunk when it sends down, a leaf when its parent's data is
    through its memory bus), but its messages queue on the links the step's other messages
    use (``copy_of(a)``'s ``(dim, "up")`` / ``(dim, "down")`` through a Switch, its ring
    links ``(dim, 0)`` / ``(dim, 1)`` hop by hop on a Ring, its own pair's link on a
    FullyConnected dimension): a ring's message on the dimension waits behind a tree's on a
    shared link, and the reverse, as on ASTRA-sim's links. Chunks are matched by their
    logical id (node, stream, stage), whatever order the NPUs reach them in. ``ticks``:
    each reduction in whole ns (``system.whole_ns``, as `PacketBundle`)."""

    def __init__(self, dim, n, blk, copy_of, ep, lmb, ticks=False):
        self.dim, self.n, self.blk, self.copy_of = dim, n, int(blk), copy_of
        self.ep, self.lmb, self.ticks = ep, lmb, ticks
        self.shape = tree_shapes(n)
        self.ch = {}  # logical id -> [tree, bytes, children's data in [n], streams [n], left]

    def _red(self, size):
        return _tree_red(size, self.lmb, math.floor if self.ticks else float)

    def start(self, lid, i, s, t, tree, size):
        """NPU ``i``'s stream ``s`` takes chunk ``lid`` at ``t`` -> [(time, stream, action)]
        of its "general" events; ``s.driver`` is its `_TreeNpu`."""
        c = self.ch.setdefault(lid, [tree, float(size), [0] * self.n, [None] * self.n, 0])
        c[3][i] = s
        s.driver = _TreeNpu(self, lid, i, getattr(s, "driver", None))
        return self._next(c, i, t, True)

    def _next(self, c, i, t, started, from_parent=False):
        nxt = _tree_next(*self.shape[c[0]], i, c[2][i], started, self.ep, self._red(c[1]),
                         from_parent)
        return [] if nxt is None else [(t + nxt[0], c[3][i], nxt[1])]

    def deliver(self, lid, src, dst, t):
        """``src``'s message reached NPU ``dst`` at ``t`` -> [(time, stream, action)]."""
        c = self.ch[lid]
        parent = self.shape[c[0]][0][dst] == src
        if not parent:  # a child's data
            c[2][dst] += 1
        return self._next(c, dst, t, c[3][dst] is not None, parent)

    def message(self, a, b):
        """(receiver, link keys, signed offset) of NPU ``a``'s message to NPU ``b``."""
        return b, copy_links(self.blk, self.n, self.dim, self.copy_of, a, b), b - a

    def left(self, lid):
        """An NPU left chunk ``lid``: the chunk is forgotten once all have."""
        c = self.ch[lid]
        c[4] += 1
        if c[4] == self.n:
            del self.ch[lid]


class _TreeNpu:
    """One NPU's driver in `TreeLinks` (the interface of `algorithms.StageDriver`): its
    "general" events are the actions ``"up"`` (send to the parent), ``"down"`` (send to the
    children, then leave) and ``"end"`` (a leaf leaves); ``done`` once it left."""

    done = None
    over = False  # its end was taken (`step.simulate_step`)

    def __init__(self, group, lid, i, prev):
        self.group, self.lid, self.i, self.prev = group, lid, i, prev
        self.size = group.ch[lid][1]

    def general(self, t, i):
        if not isinstance(i, str):  # the stream's previous driver's bundle
            return self.prev.general(t, i)
        g = self.group
        par, ch = g.shape[g.ch[self.lid][0]]
        to = [par[self.i]] if i == "up" else (ch[self.i] if i == "down" else [])
        out = []
        for b in to:
            dst, links, off = g.message(self.i, b)
            out.append((dst, links, self.size, off))
        if i != "up":
            self.done = t
            g.left(self.lid)
        return out

    def received(self, t, dst):
        """This NPU's message reached NPU ``dst`` -> [(time, stream, action)]."""
        return self.group.deliver(self.lid, self.i, dst, t)
