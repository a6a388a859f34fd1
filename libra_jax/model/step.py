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

Everything here is host numpy (an exact evaluation at given bandwidths, as `evaluate` and
the certified gap of `train` need); the convex model the solver optimises is in
`timing.py`. Units: ns, bytes, GB/s (bytes / GB/s = ns).
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import NamedTuple, Sequence

import numpy as np

from libra_jax.model import algorithms, pipelined, runtime
from libra_jax.types import Block, Collective, StepNode

TRAINING_LOOPS = ("no_overlap", "dp_overlap", "full_overlap")
QUEUE_POLICIES = ("lifo", "fifo")
NETWORK_BACKENDS = ("unaware", "aware")
PHASE_TAGS = ("fwd", "ig", "wg")
#: Most queues per dimension (and collectives in flight) accepted (ASTRA-sim runs use 1-4).
MAX_QUEUES_PER_DIM = 1024


# ------------------------------------------------------------------------------ the graph


def _comm_nodes(workload, l: int, p: int, deps: tuple[int, ...], start: int) -> list[StepNode]:
    """The collective(s) of layer-phase (l, p): ``issues`` collectives of size / issues,
    each waiting for the previous one (the first for ``deps``)."""
    code = int(workload.collective[l, p])
    issues = 1 if workload.issues is None else int(workload.issues[l, p])
    group = tuple(int(g) if g > 1 else 1 for g in workload.communicator[l, p])
    involved = tuple(g > 1 for g in group)
    if code == Collective.NONE or not any(involved):
        return []
    size = float(workload.size_bytes[l, p]) / issues
    name = f"{PHASE_TAGS[p]}{l}:{workload.layer_names[l]}"
    out = []
    for i in range(issues):
        out.append(StepNode(name=name if issues == 1 else f"{name}#{i}", kind="comm",
                            deps=deps if i == 0 else (start + i - 1,), collective=code,
                            size_bytes=size, involved=involved, group=group))
    return out


def step_graph(workload, training_loop: str) -> list[StepNode]:
    """The node list of one training step (every NPU runs the same list).

    Order (node ids): forward ``F{l}`` then its collective, l = 0..L-1; backward, l =
    L-1..0: ``B{l}`` (input-gradient compute) and its collective, ``W{l}`` (weight-gradient
    compute) and its collective. Dependencies by ``training_loop``:

    * ``no_overlap``: one chain, every node waits for the one before it;
    * ``dp_overlap``: as the chain, but a weight-gradient collective waits only for its
      ``W{l}`` and nothing waits for it (the step ends when every node has finished);
    * ``full_overlap``: as ``dp_overlap``, and a forward / input-gradient collective runs
      beside its own layer's compute: both wait for what the compute would wait for, and the
      next node waits for both.

    Under the overlap loops a weight-gradient all-gather also waits for the last
    weight-gradient reduce-scatter issued before it on the same group (ZeRO: a layer's
    reduce-scatter, then the all-gather of its updated shard on the next line of the
    workload). A phase issued n times (`Workload.issues`) is n collectives of size / n in
    sequence.
    Zero-time compute nodes are kept (they cost nothing).
    """
    nodes: list[StepNode] = []
    frontier: tuple[int, ...] = ()  # what the next main-chain node waits for
    last_rs: dict[tuple[int, ...], int] = {}  # group -> its last weight-gradient RS node
    L = workload.num_layers

    def add(node: StepNode) -> int:
        nodes.append(node)
        return len(nodes) - 1

    def phase(l: int, p: int, tag: str) -> None:
        nonlocal frontier
        comp = add(StepNode(name=f"{tag}{l}", kind="compute", deps=frontier,
                            duration_ns=float(workload.compute_ns[l, p])))
        if p == 2 and training_loop != "no_overlap":
            comms = _comm_nodes(workload, l, p, (comp,), len(nodes))
            if comms and comms[0].collective == Collective.ALLGATHER \
                    and comms[0].group in last_rs:
                # ZeRO: the updated shards are gathered after they were reduced
                comms[0] = dataclasses.replace(
                    comms[0], deps=comms[0].deps + (last_rs[comms[0].group],))
            for c in comms:
                add(c)
            if comms and comms[-1].collective == Collective.REDUCESCATTER:
                last_rs[comms[-1].group] = len(nodes) - 1
            frontier = (comp,)
            return
        if p < 2 and training_loop == "full_overlap":
            comms = _comm_nodes(workload, l, p, frontier, len(nodes))
            for c in comms:
                add(c)
            frontier = (comp,) + ((len(nodes) - 1,) if comms else ())
            return
        comms = _comm_nodes(workload, l, p, (comp,), len(nodes))
        for c in comms:
            add(c)
        frontier = (len(nodes) - 1,)

    for l in range(L):
        phase(l, 0, "F")
    for l in range(L - 1, -1, -1):
        phase(l, 1, "B")
        phase(l, 2, "W")
    return nodes


# ------------------------------------------------------------------------------ the replay


class StepTiming(NamedTuple):
    """`simulate_step`'s result. ``time_ns`` the step (last node's end); ``start_ns`` /
    ``end_ns`` [N] per node; ``busy_ns`` [D] time each dimension had a stage running."""

    time_ns: float
    start_ns: np.ndarray
    end_ns: np.ndarray
    busy_ns: np.ndarray


class _Stream:
    __slots__ = ("node", "priority", "stages", "pos", "left", "seq",
                 # the congestion-aware link model's state of the running stage
                 "step", "steps", "msg_ns", "path", "reductions", "red_step",
                 # an algorithm other than ring: its representative NPU's state machine
                 "driver", "ns_per_byte", "queued")

    def __init__(self, node, priority, stages, seq):
        self.node, self.priority, self.stages, self.seq = node, priority, stages, seq
        self.pos = 0
        self.left = 1.0  # fraction of the current stage still to run


class Queues:
    """Per-dimension queue allocation, as ``QueueLevelHandler``: round robin over all queues
    (the second half anticlockwise), the first half (all-reduce up) or the second (down)."""

    def __init__(self, num_dims: int, q: int):
        self.q = q
        self.any = [0] * num_dims
        self.first = [0] * num_dims
        self.last = [q // 2] * num_dims

    def next(self, dim: int, kind: str) -> tuple[int, int]:
        """(queue index within the dimension, direction: 0 clockwise / 1 anticlockwise)."""
        q, half = self.q, self.q // 2
        if kind == "any":
            i = self.any[dim]
            direction = 1 if (q > 1 and i >= half) else 0
            self.any[dim] = 0 if i + 1 >= q else i + 1
            return i, direction
        if kind == "first":
            i = self.first[dim]
            self.first[dim] = 0 if i + 1 >= half else i + 1
            return i, 0
        i = self.last[dim]
        self.last[dim] = half if i + 1 >= q else i + 1
        return i, 1


def chunk_split(collective: int, size_bytes: float, chunks: int, total_npus: int):
    """(streams, bytes per stream) of a collective, as ``Sys::generate_collective`` splits
    it: streams of ``floor(size / chunks)`` bytes until the size is used up, so a size that
    ``chunks`` does not divide gets one stream more (all of full size); a stream is at least
    ``total_npus`` bytes (all-gather excepted), else the collective becomes ``chunks``
    streams of that."""
    size = int(round(size_bytes))
    chunk = size // chunks
    if collective != Collective.ALLGATHER and total_npus > chunk:
        chunk, size = total_npus, chunks * total_npus
    chunk = max(chunk, 1)
    return -(-size // chunk), chunk


def stages_of(node: StepNode, blocks, tm, cache: dict, total_npus: int):
    """(streams, [(dim, bytes_coef, fixed_ns, kind, steps, reduction_ns)]) of a comm node:
    its stream count and one stream's stages (cached per shape)."""
    key = (node.collective, node.size_bytes, node.group)
    if key not in cache:
        d = len(blocks)
        lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
        if node.collective == Collective.SENDRECV:
            # one message of the whole buffer to the next NPU of the first involved dim
            dim = node.involved.index(True)
            gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
            hops = 2.0 if blocks[dim] == Block.SWITCH else 1.0
            cache[key] = (1, [(dim, node.size_bytes / gib,
                               hops * lat[dim] + tm.endpoint_delay_ns, "any", 1.0, 0.0)])
        else:
            k, chunk = chunk_split(node.collective, node.size_bytes, int(tm.chunks),
                                   total_npus)
            st = pipelined.chunk_stages(
                node.collective, float(k * chunk), np.asarray(node.group, np.int32),
                np.asarray(blocks, np.int32), latency_ns=lat, chunks=k,
                endpoint_delay_ns=tm.endpoint_delay_ns,
                local_mem_bw_gbps=tm.local_mem_bw_gbps, gb_is_gib=tm.gb_is_gib)
            ar = node.collective == Collective.ALLREDUCE
            stages = [(int(st.dims[s]), float(st.bytes_coef[s]), float(st.fixed_ns[s]),
                       ("last" if st.down[s] else "first") if ar else "any",
                       float(st.steps[s]), float(st.reduction_ns[s]))
                      for s in range(len(st.dims)) if st.enabled[s]]
            cache[key] = (k, stages)
    return cache[key]


def link_factor(blocks, network_backend: str) -> np.ndarray:
    """[D] how many times a stage's bytes cross a link of its own: 2 through a Switch under
    the congestion-aware backend (NPU -> switch -> NPU, store and forward), else 1."""
    blocks = np.asarray(blocks)
    return np.where((blocks == Block.SWITCH) & (network_backend == "aware"), 2.0, 1.0)


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
    start = np.full(n, np.nan)
    end = np.full(n, np.nan)
    waiting_deps = np.array([len(set(nd.deps)) for nd in nodes])
    children: list[list[int]] = [[] for _ in range(n)]
    for i, nd in enumerate(nodes):
        for dep in set(nd.deps):
            children[dep].append(i)
    ready: list[int] = [i for i in range(n) if waiting_deps[i] == 0]
    heapq.heapify(ready)
    cache: dict = {}
    alloc = Queues(num_dims, q)
    queues = [[[] for _ in range(q)] for _ in range(num_dims)]  # waiting lists, running first
    running: dict[tuple[int, int, int], _Stream] = {}  # (dim, queue, stream seq)
    per_queue = -(-int(tm.active_chunks_per_dim) // q)  # streams a queue runs at once (Sys)
    active = {(d, qi): 0 for d in range(num_dims) for qi in range(q)}
    default_runtime = tm.is_default_runtime
    smallest_first = tm.intra_dim_scheduling == "smallest_first"
    state = runtime.RuntimeState()
    exact_cache: dict = {}
    streams_left = np.zeros(n, int)
    busy = np.zeros(num_dims)
    compute_until = None  # (end time, node)
    inflight = 0
    counter = 0  # priority counter (Sys::get_priority)
    trees = [0] * num_dims  # each tree dimension's next tree (its topology's counter)
    seq = 0
    now = 0.0

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
    algos = tm.algorithm or ("ring",) * num_dims
    unit = 1.0 / pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0

    def push(t: float, kind: str, payload) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(net, (t, seq, kind, payload))

    def path(dim: int, dr: int) -> tuple:
        if blocks[dim] == Block.SWITCH:  # NPU -> switch -> NPU, both ways share them
            return ((dim, "up"), (dim, "down"))
        return ((dim, 0 if npd[dim] <= 2 else dr),)  # a ring / direct link per direction

    def pre_send_ns(s: _Stream) -> float:
        return endpoint + (s.red_step if 1 <= s.step <= s.reductions else 0.0)

    def link_put(link, msg, t: float) -> None:
        if link_busy.get(link, False):
            link_wait.setdefault(link, []).append(msg)
            return
        link_busy[link] = True
        s = msg[0]
        ns = s.msg_ns if len(msg) == 2 else msg[3]  # a ring message / an algorithm's
        push(t + ns, "free", link)
        push(t + ns + lat[s.stages[s.pos][0]], "arrive", msg)

    def start_stage_aware(s: _Stream) -> None:
        stage = s.stages[s.pos]
        if len(stage) > 10 and stage[10] is not None:
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
        at, q_key, hold = now, (dim, s.stages[s.pos][5]), alone
        args = (int(nodes[s.node].group[dim]), blocks[dim])
        rest = (bw[dim] / runtime.link_share(algos[dim], npd[dim]), lat[dim], endpoint,
                tm.local_mem_bw_gbps, tm.gb_is_gib, tm.network_backend)
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
            g = tree_groups.setdefault((dim, args[0]), algorithms.TreeGroup(*args, rest[:5],
                                                                            per_queue))
            for o in g.add(s, now, tree, size, q_key[1], s.queued):  # ("general": done)
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
            for dst, p, size in s.driver.general(t, i):
                link_put(p[0], (s, 0, p, size * s.ns_per_byte, dst), t)
            if s.driver.done == t:  # every bundle back: nothing can follow
                push(t, "done", s)
        elif kind == "free":
            link_busy[payload] = False
            if link_wait.get(payload):
                link_put(payload, link_wait[payload].pop(0), t)
        elif kind == "arrive" and len(payload) > 2:  # an algorithm's message
            s, hop, p, ns, dst = payload
            if hop + 1 < len(p):
                link_put(p[hop + 1], (s, hop + 1, p, ns, dst), t)
            else:
                for tt, i in s.driver.received(t, dst):
                    push(tt, "general", (s, i))
        elif kind == "arrive":  # a ring message
            s, hop = payload
            if hop + 1 < len(s.path):
                link_put(s.path[hop + 1], (s, hop + 1), t)
            else:
                s.step += 1
                if s.step < s.steps:
                    push(t + pre_send_ns(s), "send", s)
                else:
                    post = s.red_step if s.reductions >= s.steps else 0.0
                    push(t + post, "done", s)
        elif kind == "release":  # a tree chunk hands its queue on (if it still holds it)
            key = s_key(payload)
            if running.pop(key, None) is not None:
                active[key[:2]] -= 1
                try_start(*key[:2])
        else:  # "done"
            return s_key(payload), payload
        return None

    def s_key(s: _Stream) -> tuple[int, int, int]:
        return s.stages[s.pos][0], s.stages[s.pos][5], s.seq

    def try_start(dim: int, qi: int) -> None:
        while active[(dim, qi)] < per_queue and queues[dim][qi]:
            s = queues[dim][qi].pop(0)
            running[(dim, qi, s.seq)] = s
            active[(dim, qi)] += 1
            if len(s.stages[s.pos]) > 11 and s.stages[s.pos][11] is not None:
                start_tree(s)
            elif aware:
                start_stage_aware(s)

    def enqueue(s: _Stream, start: bool = True) -> None:
        s.queued = now
        stage = s.stages[s.pos]
        dim, qi = stage[0], stage[5]
        lst = queues[dim][qi]
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
            try_start(dim, qi)

    def issue_collective(i: int) -> None:
        nonlocal counter, seq
        prio = counter
        counter += 1 if lifo else -1
        if not default_runtime and nodes[i].collective != Collective.SENDRECV:
            streams = runtime.collective_streams(nodes[i].collective, nodes[i].size_bytes,
                                                 nodes[i].group, blocks, tm, bw, state, now,
                                                 exact_cache, npd)
            streams_left[i] = len(streams)
            for stages in streams:
                placed = []
                for st in stages:
                    qi, dr = alloc.next(st.dim, st.kind)
                    tree = None  # DoubleBinaryTreeTopology: RootMax / RootMin in turn
                    if algos[st.dim] == "double_binary_tree" and st.exact is not None:
                        tree, trees[st.dim] = trees[st.dim], 1 - trees[st.dim]
                    placed.append((st.dim, st.coef, st.fixed, st.kind, dr, qi, st.steps,
                                   st.red, st.com, st.size, st.exact, tree))
                seq += 1
                enqueue(_Stream(i, prio, placed, seq))
            return
        k, stages = stages_of(nodes[i], blocks, tm, cache, int(np.prod(npd)))
        streams_left[i] = k
        if not stages:
            streams_left[i] = 0
            return
        for _ in range(k):
            placed = []
            for dim, coef, fixed, kind, steps, red in stages:
                qi, dr = alloc.next(dim, kind)
                placed.append((dim, coef, fixed, kind, dr, qi, steps, red))
            seq += 1
            enqueue(_Stream(i, prio, placed, seq))

    def finish(i: int) -> None:
        nonlocal inflight
        end[i] = now
        if nodes[i].kind == "comm":
            inflight -= 1
        for c in children[i]:
            waiting_deps[c] -= 1
            if waiting_deps[c] == 0:
                heapq.heappush(ready, c)

    def issue_ready() -> None:
        nonlocal compute_until, inflight
        blocked = []
        while ready:
            i = heapq.heappop(ready)
            nd = nodes[i]
            if nd.kind == "compute":
                if compute_until is not None:
                    blocked.append(i)
                    continue
                start[i] = now
                compute_until = (now + float(nd.duration_ns), i)
            else:
                if limit is not None and inflight >= limit:
                    blocked.append(i)
                    continue
                start[i] = now
                inflight += 1
                issue_collective(i)
                if streams_left[i] == 0:
                    finish(i)
        for i in blocked:
            heapq.heappush(ready, i)

    issue_ready()
    while True:
        # the next event: compute done, a link event, or the first running stage to finish
        rates = {}
        t_next, what = np.inf, None
        if compute_until is not None:
            t_next, what = compute_until[0], ("compute", None)
        if net and net[0][0] < t_next:  # links (aware) and tree chunks (both)
            t_next, what = net[0][0], ("net", None)
        if not aware:
            for key, s in running.items():
                if len(s.stages[s.pos]) > 11 and s.stages[s.pos][11] is not None:
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
        for dim in {key[0] for key in running}:
            busy[dim] += dt
        for key, s in running.items():
            if key in rates:
                s.left = max(0.0, s.left - dt / rates[key]) if rates[key] > 0 else 0.0
        now = t_next
        if what[0] == "compute":
            i = compute_until[1]
            compute_until = None
            finish(i)
        else:
            if what[0] == "net":
                _, _, kind, payload = heapq.heappop(net)
                got = net_event(kind, payload, now)
                if got is None:
                    continue
                key, s = got
            else:
                key, s = what[1], running[what[1]]
            held = key in running  # the stage ends, but the stream holds its queue until ...
            s.left = 1.0
            s.pos += 1
            if s.pos < len(s.stages):
                # it leaves its queue first (which may start it again under the same key)
                if held:
                    del running[key]
                    active[key[:2]] -= 1
                # Sys::proceed_to_next_vnet_baseline: it joins its next queue, the queue it
                # left starts its next stream, then the new queue (aware: send order)
                enqueue(s, start=False)
                try_start(*key[:2])
                try_start(s.stages[s.pos][0], s.stages[s.pos][5])
            else:
                streams_left[s.node] -= 1
                if streams_left[s.node] == 0:
                    # ... its end is reported (DataSet, while the last stream still sits
                    # first in its queue): what it frees is issued at once, under LIFO ahead
                    # of every stream waiting there (docs/step_simulation.md section 6)
                    finish(s.node)
                    issue_ready()
                if held:
                    del running[key]
                    active[key[:2]] -= 1
            try_start(*key[:2])
        issue_ready()
    return StepTiming(float(np.nanmax(end)) if n else 0.0, start, end, busy)
