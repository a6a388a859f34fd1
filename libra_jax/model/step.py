"""A whole training step as ASTRA-sim 2.x runs it: the step's dependency graph and an exact
discrete-event replay of the simulator's system layer (``docs/step_simulation.md``).

* `step_graph` turns a workload and a training loop into the node list every NPU runs
  (`types.StepNode`): compute nodes and collectives with their dependencies. The same graph
  is exported as Chakra execution traces (`inputs/chakra.py`).
* `simulate_step` times it: compute one node at a time; a collective's ``chunks`` streams
  visit the involved dimensions in ASTRA-sim's order, each dimension's ``queues_per_dim``
  priority queues running one stream at a time (``Sys::insert_stream``,
  ``QueueLevelHandler``); at most ``max_inflight_collectives`` in flight; a collective's end
  is reported while its last stream still holds its queue (``docs/step_simulation.md``).
* The link model (``network_backend``, ``docs/step_simulation.md``, ``docs/algorithms.md``):
  ``unaware`` times a stage as ``bytes / bw + fixed`` whatever else runs; ``aware`` replays
  every message link by link through FIFO store-and-forward links, one NPU's links standing
  for all (direct / halving-doubling driven by `algorithms.PhaseDriver`). A tree chunk (both
  backends) hands its queue on before its end (`algorithms.tree_follow_ns`).
* Copies (`step_stages.copy_dims`): one per position in the dimensions with trees (and aware
  halving-doubling Rings), each NPU of those leaving a stage at its own time; aware, a tree's
  NPUs (`algorithms.TreeLinks`) and the rings on its dimension (`algorithms.RingCopies`) each
  send on their own links, so they share them as on ASTRA-sim's.

Everything here is host numpy (an exact evaluation at given bandwidths, as `evaluate` and
the certified gap of `train` need); the convex model the solver optimises is in
`timing.py`. Units: ns, bytes, GB/s (bytes / GB/s = ns).
"""

from __future__ import annotations

import heapq
import math
from typing import NamedTuple, Sequence

import numpy as np

from libra_jax.model import algorithms, pipelined, runtime
from libra_jax.model.step_graph import PHASE_TAGS, TRAINING_LOOPS, step_graph  # noqa: F401
from libra_jax.model.step_stages import (MAX_COPIES, Queues, chunk_split,  # noqa: F401
                                         copy_dims, link_factor, stages_of)
from libra_jax.types import Block, Collective, StepNode

QUEUE_POLICIES = ("lifo", "fifo")
NETWORK_BACKENDS = ("unaware", "aware")
#: Most queues per dimension (and collectives in flight) accepted (ASTRA-sim runs use 1-4).
MAX_QUEUES_PER_DIM = 1024


class StepTiming(NamedTuple):
    """`simulate_step`'s result. ``time_ns`` the step (last node's end); ``start_ns`` /
    ``end_ns`` [N] per node (first start, last end over the copies); ``busy_ns`` [D] time
    each dimension had a stage running; ``copy_dims`` the copied dimensions
    (`copy_dims`), ``copies`` each copy's position on them, ``copy_start_ns`` /
    ``copy_end_ns`` [C, N] every copy's nodes; ``issuers`` under Themis, per collective it
    schedules: (ns, node, NPU) of its first issuer (the NPU whose loads decide its order;
    -1 where the event order is not followed, after a tree on a dimension without copies)."""

    time_ns: float
    start_ns: np.ndarray
    end_ns: np.ndarray
    busy_ns: np.ndarray
    copy_dims: tuple = ()
    copies: tuple = ((),)
    copy_start_ns: np.ndarray | None = None
    copy_end_ns: np.ndarray | None = None
    issuers: tuple = ()


class _Stream:
    __slots__ = ("node", "priority", "stages", "pos", "left", "seq",
                 # the congestion-aware link model's state of the running stage
                 "step", "steps", "msg_ns", "path", "reductions", "red_step",
                 # an algorithm other than ring: its representative NPU's state machine
                 "driver", "ns_per_byte", "queued",
                 # its copy (`simulate_step`: a position in the tree dimensions), its index
                 # among its collective's streams, whether it waits for the other copies
                 "c", "ord", "hold", "lab")

    def __init__(self, node, priority, stages, seq, c=0, ord_=0):
        self.node, self.priority, self.stages, self.seq = node, priority, stages, seq
        self.c, self.ord, self.hold = c, ord_, False
        self.pos = 0
        self.left = 1.0  # fraction of the current stage still to run


def simulate_step(nodes: Sequence[StepNode], blocks, npus_per_dim, bandwidth_gbps,
                  tm) -> StepTiming:
    """Times one step's graph the way ASTRA-sim's system layer runs it (module docstring).

    Args:
      nodes: `step_graph`'s list (deps point to earlier nodes).
      blocks: [D] ``types.Block`` codes. npus_per_dim: [D] NPUs per dimension (a Ring or
        FullyConnected dimension of 2 has one link each way, shared by both directions).
      bandwidth_gbps: [D] per-NPU GB/s (> 0 on every dimension a collective uses).
      tm: a `timing.TimingModel`: the collective model (latency_ns, chunks,
        endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib), the system layer (queue_policy,
        queues_per_dim, max_inflight_collectives) and the link model (network_backend).

    Returns:
      `StepTiming` (ns).
    """
    blocks = [int(b) for b in blocks]
    npd = [int(n) for n in npus_per_dim]
    num_dims = len(blocks)
    bw = np.asarray(bandwidth_gbps, np.float64)
    aware = tm.network_backend == "aware"
    lifo = tm.queue_policy == "lifo"
    q = int(tm.queues_per_dim)
    limit = tm.max_inflight_collectives
    n = len(nodes)
    algos = tm.algorithm or ("ring",) * num_dims
    default_runtime = tm.is_default_runtime
    cdims = [] if default_runtime else copy_dims(nodes, npd, algos, blocks, aware)
    copies = [()]  # each copy's position on the tree dimensions (one copy: no tree there)
    for d in cdims:
        copies = [pos + (k,) for pos in copies for k in range(npd[d])]
    C = len(copies)
    copy_at = {pos: c for c, pos in enumerate(copies)}
    rings: dict = {}  # (dim, other positions) -> its `algorithms.RingCopies`
    start = np.full((C, n), np.nan)
    end = np.full((C, n), np.nan)
    waiting_deps = np.tile([len(set(nd.deps)) for nd in nodes], (C, 1))
    children: list[list[int]] = [[] for _ in range(n)]
    for i, nd in enumerate(nodes):
        for dep in set(nd.deps):
            children[dep].append(i)
    ready = [[i for i in range(n) if waiting_deps[0, i] == 0] for _ in range(C)]
    cache: dict = {}
    alloc = [Queues(num_dims, q) for _ in range(C)]
    # per copy, dimension and queue: waiting lists, running first
    queues = [[[[] for _ in range(q)] for _ in range(num_dims)] for _ in range(C)]
    running: dict[tuple, _Stream] = {}  # (copy, dim, queue, stream seq)
    per_queue = -(-int(tm.active_chunks_per_dim) // q)  # streams a queue runs at once (Sys)
    active = {(c, d, qi): 0 for c in range(C) for d in range(num_dims) for qi in range(q)}
    smallest_first = tm.intra_dim_scheduling == "smallest_first"
    state = runtime.RuntimeState()
    themis = tm.themis_scheduling
    origin = (0,) * num_dims
    cur = [origin]  # the event being processed: the first NPU ASTRA-sim runs it on in its tick
    issuers: list = []
    issued: dict = {}  # node -> its streams (scheduled once, by the first copy to issue it)
    exact_cache: dict = {}
    streams_left = np.zeros((C, n), int)
    busy = np.zeros(num_dims)
    compute_until = [None] * C  # per copy: (end time, node)
    inflight = [0] * C
    counter = [0] * C  # priority counter (Sys::get_priority)
    trees = [[0] * num_dims for _ in range(C)]  # each tree dimension's next tree
    waits: dict = {}  # (dim, other positions, stage id) -> the copies come to that stage
    tree_copies: dict = {}  # (dim, other positions) -> its `algorithms.TreeCopies`
    tree_links: dict = {}  # (dim, other positions) -> its `algorithms.TreeLinks` (aware)
    seq = 0
    now = 0.0

    def place(c: int, dim: int) -> tuple[int, tuple]:
        """Copy ``c``'s position on the copied dimension ``dim``, and on the others."""
        j, pos = cdims.index(dim), copies[c]
        return pos[j], pos[:j] + pos[j + 1:]

    def group_copies(c: int, dim: int):
        """Copy ``c``'s position on the copied dimension ``dim``, its other positions, and
        the copy of each NPU of its group there (position -> copy)."""
        at, other = place(c, dim)
        j = cdims.index(dim)
        return at, other, lambda a: copy_at[other[:j] + (a,) + other[j:]]

    def stage_ns(stream) -> float:
        stage = stream.stages[stream.pos]
        if len(stage) > 10 and stage[10] is not None:  # an algorithm's phase, timed alone
            return stage[10]
        dim, coef, fixed = stage[:3]
        return fixed + (coef / bw[dim] if coef > 0 else 0.0)

    # ---- the congestion-aware link model: every ring message, link by link
    net: list = []  # (time, seq, kind, payload) events of the links
    link_busy: dict = {}
    link_wait: dict = {}
    lat = (np.zeros(num_dims) if tm.latency_ns is None
           else np.broadcast_to(np.asarray(tm.latency_ns, np.float64), (num_dims,)))
    endpoint = float(tm.endpoint_delay_ns)
    unit = 1.0 / pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
    whole = bool(tm.whole_ns)

    labs: dict = {}  # event seq -> its label (Themis: the first NPU within its tick)
    batch: dict = {}  # (copy, tick) -> the label of its first bundle there

    def push(t: float, kind: str, payload) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(net, (t, seq, kind, payload))
        if themis:  # a bundle: the NPU runs every event of its tick where the first one
            # put it in the tick (Sys::register_event keeps one list per NPU and tick)
            labs[seq] = (batch.setdefault((payload[0].c, t), cur[0]) if kind == "general"
                         else cur[0])

    def path(dim: int, dr: int) -> tuple:
        if blocks[dim] == Block.SWITCH:  # NPU -> switch -> NPU, both ways share them
            return ((dim, "up"), (dim, "down"))
        return ((dim, 0 if npd[dim] <= 2 else dr),)  # a ring / direct link per direction

    def pre_send_ns(s: _Stream) -> float:
        return endpoint + (s.red_step if 1 <= s.step <= s.reductions else 0.0)

    def link_put(link, msg, t: float) -> None:  # every copy its own links
        put(link[1:] if link[0] == "abs" else (msg[0].c, link), msg, t)

    def put(link, msg, t: float) -> None:
        if link_busy.get(link, False):
            link_wait.setdefault(link, []).append(msg)
            return
        link_busy[link] = True
        s = msg[0]
        ns = s.msg_ns if len(msg) == 2 else msg[3]  # a ring message / an algorithm's
        la = lat[msg[5] if len(msg) > 5 else s.stages[s.pos][0]]
        if whole:  # as ASTRA-sim's Link: each time cast to whole ns (system.whole_ns)
            push(t + math.floor(ns), "free", link)
            push(t + math.floor(ns + la), "arrive", msg)
            return
        push(t + ns, "free", link)
        push(t + ns + la, "arrive", msg)

    def start_stage_aware(s: _Stream) -> None:
        stage = s.stages[s.pos]
        exact = len(stage) > 10 and stage[10] is not None
        if stage[0] in cdims and (not exact or algos[stage[0]] == "halving_doubling"):
            # halving-doubling on a Ring, or a ring on a tree's dimension: every NPU of the
            # group its own copy running its own PhaseDriver on its own links
            dim, com, size = stage[0], stage[8], stage[9]
            alg, n_d = algos[dim] if exact else "ring", int(nodes[s.node].group[dim])
            at, other, copy_of = group_copies(s.c, dim)
            ring = rings.setdefault((dim, other, alg), algorithms.RingCopies(
                dim, n_d, copy_of, blocks[dim], ring=alg == "ring"))
            s.ns_per_byte = unit * runtime.link_share(algos[dim], npd[dim]) / bw[dim]
            for tt, o, i in ring.start((s.node, s.ord, s.pos), at, s, now, lambda: (
                    algorithms.PhaseDriver.group(
                        alg, com, n_d, (size // n_d if whole else size / n_d)
                        if com == runtime.AG else size, endpoint, tm.local_mem_bw_gbps,
                        ticks=whole)), sign=-1 if alg == "ring" and stage[4] == 1 else 1):
                push(tt, "general", (o, i))
            return
        if exact:
            # direct / halving-doubling: the representative NPU's PhaseDriver over the
            # shared links (it receives its k-th message when its own k-th one arrives)
            dim, com, size = stage[0], stage[8], stage[9]
            alg, n_d = algos[dim], int(nodes[s.node].group[dim])
            s.driver = algorithms.StageDriver(
                alg, com, n_d, blocks[dim], size / n_d if com == runtime.AG else size,
                endpoint, tm.local_mem_bw_gbps, dim=dim, links_n=npd[dim])
            s.ns_per_byte = unit * runtime.link_share(alg, n_d) / bw[dim]
            for tt, i in s.driver.start(now):
                push(tt, "general", (s, i))
            return
        dim, coef, _, _, dr, _, steps, red = s.stages[s.pos][:8]
        s.step = 0
        s.steps = max(int(round(steps)), 1)
        s.msg_ns = coef / s.steps / bw[dim] if coef > 0 else 0.0
        s.path = path(dim, dr)
        n_d = int(nodes[s.node].group[dim])
        s.reductions = n_d - 1 if red > 0 else 0
        s.red_step = red / s.reductions if s.reductions else 0.0
        push(now + pre_send_ns(s), "send", s)

    tree_last: dict = {}  # (dim, queue) -> its last tree chunk started: (start, tree, bytes)
    tree_groups: dict = {}  # (dim, NPUs) -> its `algorithms.TreeGroup` (aware)

    def start_tree(s: _Stream) -> None:
        """A tree chunk: its NPUs run it once they left the queue's previous chunk, so it
        ends at max(now, previous start + `algorithms.tree_follow_ns`) + its time alone;
        the queue takes its next chunk after the shorter follow time (same tree or not)."""
        dim, size, tree, alone = (s.stages[s.pos][k] for k in (0, 9, 11, 10))
        at, q_key, hold = now, (s.c, dim, s.stages[s.pos][5]), alone
        args = (int(nodes[s.node].group[dim]), blocks[dim])
        rest = (bw[dim] / runtime.link_share(algos[dim], npd[dim]), lat[dim], endpoint,
                tm.local_mem_bw_gbps, tm.gb_is_gib, tm.network_backend)
        if dim in cdims and aware:  # every NPU of the tree its own copy, on the step's links
            at, other, copy_of = group_copies(s.c, dim)
            g = tree_links.setdefault((dim, other), algorithms.TreeLinks(
                dim, args[0], blocks[dim], copy_of, endpoint, tm.local_mem_bw_gbps, whole))
            s.ns_per_byte = unit * runtime.link_share(algos[dim], npd[dim]) / bw[dim]
            for tt, o, act in g.start((s.node, s.ord, s.pos), at, s, now, tree, size):
                push(tt, "general", (o, act))
            return
        if dim in cdims:  # unaware, every NPU of the tree its own copy, leaving at its own time
            at, other = place(s.c, dim)
            g = tree_copies.setdefault((dim, other), algorithms.TreeCopies(*args, rest[:5]))
            for o in g.add((s.node, s.ord, s.pos), at, s, now, tree, size):
                push(o.driver.done, "general", (o, -1))
            return
        def follow(prev, same):
            key = ("tree", dim, *args, prev, size, same)
            if key not in exact_cache:
                exact_cache[key] = algorithms.tree_follow_ns(*args, prev, size, same, *rest)
            return exact_cache[key]

        if per_queue == 1:  # (a queue running several at once: each its time alone)
            if q_key in tree_last:
                t0, tree0, size0 = tree_last[q_key]
                at = max(at, t0 + follow(size0, tree0 == tree))
            tree_last[q_key] = (at, tree, size)
            hold = min(follow(size, True), follow(size, False), hold)
        if aware:  # the dimension's tree chunks share its links: replayed together
            g = tree_groups.setdefault((s.c, dim, args[0]), algorithms.TreeGroup(*args, rest[:5],
                                                                            per_queue))
            for o in g.add(s, now, tree, size, q_key[2], s.queued):  # ("general": done)
                push(o.driver.done, "general", (o, -1))
            push(min(at + hold, s.driver.done), "release", s)
            return
        push(at + hold, "release", s)
        push(at + alone, "done", s)

    def net_event(kind: str, payload, t: float):
        """One link event; -> the finished stream's running key, or None."""
        if kind == "send":
            link_put(payload.path[0], (payload, 0), t)
        elif kind == "general":  # an algorithm's bundle is back: its sends, its end
            s, i = payload
            for dst, p, size, off in s.driver.general(t, i):
                link_put(p[0], (s, 0, p, size * s.ns_per_byte, dst, s.stages[s.pos][0],
                                s.driver, off), t)
            for taken in getattr(s.driver, "taken", ()):  # (sim_recv: 0 ns later)
                push(t, "take", taken)
            if s.driver.done == t:  # every bundle back: nothing can follow
                s.driver.over = True
                push(t, "done", s)
        elif kind == "take":  # a halving-doubling copy takes a message that waited
            ring, lid, i = payload
            for ev in ring.receive(lid, i, t):
                push(ev[0], "general", ev[1:])
        elif kind == "free":
            link_busy[payload] = False
            if link_wait.get(payload):
                put(payload, link_wait[payload].pop(0), t)
        elif kind == "arrive" and len(payload) > 2:  # an algorithm's message
            s, hop, p, ns, dst, dim, drv, off = payload
            if hop + 1 < len(p):
                link_put(p[hop + 1], (s, hop + 1, p, ns, dst, dim, drv, off), t)
            else:  # (a copy's message: to the receiving copy's stream)
                if themis:
                    cur[0] = hop_label(cur[0], dim, off, int(nodes[s.node].group[dim]))
                for ev in drv.received(t, dst):
                    push(ev[0], "general", (s, ev[1]) if len(ev) == 2 else ev[1:])
        elif kind == "arrive":  # a ring message
            s, hop = payload
            if hop + 1 < len(s.path):
                link_put(s.path[hop + 1], (s, hop + 1), t)
            else:
                if themis:
                    dim = s.stages[s.pos][0]
                    cur[0] = hop_label(cur[0], dim, 1 if s.stages[s.pos][4] == 0 else -1,
                                       int(nodes[s.node].group[dim]))
                s.step += 1
                if s.step < s.steps:
                    push(t + pre_send_ns(s), "send", s)
                else:
                    # the last receipt's bundle (endpoint delay + its reduction) before
                    # the phase exits: steps + 1 endpoint delays in all (Ring.cc)
                    post = endpoint + (s.red_step if s.reductions >= s.steps else 0.0)
                    push(t + post, "done", s)
        elif kind == "release":  # a tree chunk hands its queue on (if it still holds it)
            key = s_key(payload)
            if running.pop(key, None) is not None:
                active[key[:3]] -= 1
                try_start(*key[:3])
        elif kind == "go":  # every copy has come to this stage: it runs from now (unaware)
            payload.hold = False
        else:  # "done"
            return s_key(payload), payload
        return None

    def hop_label(lab, dim: int, off: int, n_d: int):
        """The first NPU to receive a message within its tick, from the sender's ``lab``."""
        if lab is None:
            return None
        lab = list(lab)
        if algos[dim] == "halving_doubling":
            lab[dim] ^= abs(off)
        else:
            lab[dim] = (lab[dim] + off) % n_d
        return tuple(lab)

    def relabel(s: _Stream):
        """The first NPU to end stream ``s``'s stage within its tick (unaware), from the
        first to start it: a ring stage moves it ``steps`` NPUs on, a halving-doubling
        reduce-scatter / all-gather to its partner of every round; None (unknown) after a
        direct stage (where the NPUs' arrivals interleave) or a tree."""
        stage = s.stages[s.pos]
        if s.lab is None or (len(stage) > 10 and stage[10] is not None
                             and algos[stage[0]] not in ("halving_doubling", "direct")):
            return None
        dim, dr, steps = stage[0], stage[4], stage[6]
        n_d, lab = int(nodes[s.node].group[dim]), list(s.lab)
        way = 1 if dr == 0 else -1
        if len(stage) <= 10 or stage[10] is None:  # a ring (or a send to the next NPU)
            lab[dim] = int(lab[dim] + round(steps) * way) % n_d
        elif algos[dim] == "direct":  # the first NPU's first message: to the next one
            lab[dim] = (lab[dim] + way) % n_d
        elif stage[8] in (runtime.RS, runtime.AG):  # halving-doubling: partner by partner
            lab[dim] ^= n_d - 1
        return tuple(lab)

    def s_key(s: _Stream) -> tuple[int, int, int, int]:
        return s.c, s.stages[s.pos][0], s.stages[s.pos][5], s.seq

    def try_start(c: int, dim: int, qi: int) -> None:
        while active[(c, dim, qi)] < per_queue and queues[c][dim][qi]:
            s = queues[c][dim][qi].pop(0)
            s.lab = cur[0]
            running[(c, dim, qi, s.seq)] = s
            active[(c, dim, qi)] += 1
            if len(s.stages[s.pos]) > 11 and s.stages[s.pos][11] is not None:
                keep = cur[0]  # (a tree: each copy's NPU leaves it at its own time)
                if keep is not None:
                    lab = list(keep)
                    for d, k in zip(cdims, copies[c]):
                        lab[d] = k
                    cur[0] = tuple(lab) if s.stages[s.pos][0] in cdims else None
                start_tree(s)
                cur[0] = keep
            elif dim in cdims and not aware:
                # unaware, a ring stage on a copied dimension: its NPUs run it together,
                # once the last of them has come to it (aware: each its own, as
                # halving-doubling, `start_stage_aware`)
                key = (dim, place(c, dim)[1], (s.node, s.ord, s.pos))
                s.hold = True
                waits.setdefault(key, []).append(s)
                if len(waits[key]) == npd[dim]:
                    for o in waits.pop(key):
                        push(now, "go", o)
            elif aware:
                start_stage_aware(s)

    def enqueue(s: _Stream, start: bool = True) -> None:
        s.queued = now
        stage = s.stages[s.pos]
        dim, qi = stage[0], stage[5]
        lst = queues[s.c][dim][qi]
        at = len(lst)
        if smallest_first and len(stage) > 8 and stage[8] in (runtime.RS, runtime.AG):
            # Sys::insert_stream, SmallestFirst: a stream with one phase left after this
            # one goes last; else ahead of the first waiting stream at least as large
            if len(s.stages) - s.pos - 1 != 1:
                at = next((j for j, o in enumerate(lst) if o.stages[o.pos][9] >= stage[9]),
                          len(lst))
        else:
            for j, other in enumerate(lst):
                if other.priority < s.priority:
                    at = j
                    break
        lst.insert(at, s)
        if start:
            try_start(s.c, dim, qi)

    def issue_collective(c: int, i: int) -> None:
        nonlocal seq
        prio = counter[c]
        counter[c] += 1 if lifo else -1
        if not default_runtime and nodes[i].collective != Collective.SENDRECV:
            if i not in issued:  # (Themis: the first NPU to issue it schedules its chunks)
                issued[i] = runtime.collective_streams(
                    nodes[i].collective, nodes[i].size_bytes, nodes[i].group, blocks, tm, bw,
                    state, now, exact_cache, npd,
                    npu0_first=(c == 0 and cur[0] is not None and all(
                        cur[0][d] == 0 for d in range(num_dims) if d not in cdims))
                    if themis else None)
                if themis and nodes[i].collective != Collective.ALLTOALL:
                    npu = -1  # (unknown: taken not to be NPU 0, as npu0_first above)
                    if cur[0] is not None:
                        lab = list(cur[0])
                        for d, k in zip(cdims, copies[c]):
                            lab[d] = k
                        npu = int(np.ravel_multi_index(lab, npd, order="F"))
                    issuers.append((now, i, npu))
            if themis and c == 0:  # NPU 0's call: its restart of the loads at a new tick
                runtime.npu0_issues(state, now)
            streams = issued[i]
            streams_left[c, i] = len(streams)
            for o, stages in enumerate(streams):
                placed = []
                for st in stages:
                    qi, dr = alloc[c].next(st.dim, st.kind)
                    tree = None  # DoubleBinaryTreeTopology: RootMax / RootMin in turn
                    if algos[st.dim] == "double_binary_tree" and st.exact is not None:
                        tree, trees[c][st.dim] = trees[c][st.dim], 1 - trees[c][st.dim]
                    placed.append((st.dim, st.coef, st.fixed, st.kind, dr, qi, st.steps,
                                   st.red, st.com, st.size, st.exact, tree))
                seq += 1
                enqueue(_Stream(i, prio, placed, seq, c, o))
            return
        k, stages = stages_of(nodes[i], blocks, tm, cache, int(np.prod(npd)))
        streams_left[c, i] = k if stages else 0
        for o in range(k if stages else 0):
            placed = []
            for dim, coef, fixed, kind, steps, red in stages:
                qi, dr = alloc[c].next(dim, kind)
                placed.append((dim, coef, fixed, kind, dr, qi, steps, red))
            seq += 1
            enqueue(_Stream(i, prio, placed, seq, c, o))

    def finish(c: int, i: int) -> None:
        end[c, i] = now
        if nodes[i].kind == "comm":
            inflight[c] -= 1
            state.ended = True
        for ch in children[i]:
            waiting_deps[c, ch] -= 1
            if waiting_deps[c, ch] == 0:
                heapq.heappush(ready[c], ch)
        woke.add(c)

    def issue_ready(c: int) -> None:
        blocked = []
        while ready[c]:
            i = heapq.heappop(ready[c])
            nd = nodes[i]
            if nd.kind == "compute":
                if compute_until[c] is not None:
                    blocked.append(i)
                    continue
                start[c, i] = now
                compute_until[c] = (now + float(nd.duration_ns), i, cur[0])
                heapq.heappush(computes, (compute_until[c][0], c))
            else:
                if limit is not None and inflight[c] >= limit:
                    blocked.append(i)
                    continue
                start[c, i] = now
                inflight[c] += 1
                issue_collective(c, i)
                if streams_left[c, i] == 0:
                    finish(c, i)
        for i in blocked:
            heapq.heappush(ready[c], i)

    computes: list = []  # (end, copy) of the computes running
    woke = set(range(C))  # the copies whose ready nodes may issue
    while True:
        for c in sorted(woke):
            issue_ready(c)
        woke.clear()
        # the next event: compute done, a link event, or the first running stage to finish
        rates = {}
        t_next, what = np.inf, None
        if computes:
            t_next, what = computes[0][0], ("compute", computes[0][1])
        if net and net[0][0] < t_next:  # links (aware) and tree chunks (both)
            t_next, what = net[0][0], ("net", None)
        if not aware:
            for key, s in running.items():
                if s.hold or (len(s.stages[s.pos]) > 11 and s.stages[s.pos][11] is not None):
                    continue
                total = stage_ns(s)
                rates[key] = total
                t = now + s.left * total
                if t < t_next or (t == t_next and what is not None and what[0] == "stage"
                                  and s.seq < running[what[1]].seq):
                    t_next, what = t, ("stage", key)
        if what is None:  # nothing runs, so nothing is blocked: the step is over
            break
        dt = t_next - now
        for dim in {key[1] for key in running if key[0] == 0}:  # (the first copy's)
            busy[dim] += dt
        for key, s in running.items():
            if key in rates:
                s.left = max(0.0, s.left - dt / rates[key]) if rates[key] > 0 else 0.0
        now = t_next
        if what[0] == "compute":
            c = heapq.heappop(computes)[1]
            i, cur[0] = compute_until[c][1:]
            compute_until[c] = None
            finish(c, i)
        else:
            if what[0] == "net":
                _, sq, kind, payload = heapq.heappop(net)
                if themis:
                    cur[0] = labs.pop(sq)
                got = net_event(kind, payload, now)
                if got is None:
                    continue
                key, s = got
            else:
                key, s = what[1], running[what[1]]
                if themis:
                    cur[0] = relabel(s)
            held = key in running  # the stage ends, but the stream holds its queue until ...
            s.left = 1.0
            s.pos += 1
            if s.pos < len(s.stages):
                # it leaves its queue first (which may start it again under the same key)
                if held:
                    del running[key]
                    active[key[:3]] -= 1
                # Sys::proceed_to_next_vnet_baseline: it joins its next queue, the queue it
                # left starts its next stream, then the new queue (aware: send order)
                enqueue(s, start=False)
                try_start(*key[:3])
                try_start(s.c, s.stages[s.pos][0], s.stages[s.pos][5])
            else:
                streams_left[s.c, s.node] -= 1
                if streams_left[s.c, s.node] == 0:
                    # ... its end is reported (DataSet, while the last stream still sits
                    # first in its queue): what it frees is issued at once, under LIFO ahead
                    # of every stream waiting there (docs/step_simulation.md section 6)
                    finish(s.c, s.node)
                    issue_ready(s.c)
                    woke.discard(s.c)
                if held:
                    del running[key]
                    active[key[:3]] -= 1
            try_start(*key[:3])
    end_ns = np.fmax.reduce(end, axis=0)  # every node: its last copy's end, first start
    return StepTiming(float(np.nanmax(end_ns)) if n else 0.0, np.fmin.reduce(start, axis=0),
                      end_ns, busy, tuple(cdims), tuple(copies), start, end, tuple(issuers))
