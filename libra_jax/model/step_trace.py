"""A whole step of an imported trace set (`types.TraceSet`: every rank its own graph) as
ASTRA-sim 2.x runs it: the multi-rank form of `step.simulate_step` (``docs/step_simulation.md``
section "Every rank its own graph").

* **Ranks and classes.** Ranks whose graphs are the same (node arrays, the structure of their
  groups, the shape of their send/recv routes and the timing of their ``pg_name`` rings) and
  whose peers and group members fall in the same classes (partition refinement) run the
  same timeline: one representative per class is simulated. Each simulated rank has its own
  compute unit, in-flight limit, priority counter, per-dimension queues (`step.Queues`,
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
  NPUs differ: ``hops * latency + bytes / bw``); aware: every message of the ring link by
  link (dimension-ordered routes, FIFO links), for the ring alone (all members starting
  together), each member its own stage time, run on the rank's own links along its route
  scaled to take that time alone (so it contends with the rank's other traffic).
* **Send / recv** (``COMM_SEND_NODE`` / ``COMM_RECV_NODE``) bypass the system layer's
  queues: a message starts when its SEND is issued (a SEND takes an in-flight slot, a RECV
  does not: `HardwareResource`), both nodes end when it arrives, and a RECV posted after the
  arrival ends at once. Messages match by (src, dst, tag, size) in node order. Unaware: the
  first differing dimension's ``hops * latency + bytes / bw`` (no endpoint delay: native
  sends skip the collective memory bus). Aware: the dimension-ordered route through the
  sender's links (a Switch: up and down; a Ring: the shorter way, clockwise on ties, one
  store-and-forward per hop), sharing those FIFOs with the sender's collective traffic;
  a route through other NPUs' links (several Ring hops or dimensions): every rank is
  simulated, each hop queues on the link of the NPU it leaves (``Link::send``).
* **Kernels.** A chain of computes (each the only child of the one before, its only parent)
  is one compute event (same sums) while nothing else wants the compute unit, else split.
* **Runtime keys** and algorithms other than ring: as in `simulate_step`, per simulated
  rank (`trace_runtime.py`: streams, queue rules, drivers on the rank's links, tree chunks);
  one graph on every rank with NPUs that differ (trees, aware halving-doubling Rings):
  `simulate_step`'s copies (`trace_copies.py`).

Split by job: `trace_setup.py` (geometry, ranks, checks, stages, result, `trace_from_nodes`),
`trace_classes.py` (messages, classes), `trace_rings.py` (pg rings), `trace_runtime.py`.
Units: ns, bytes, GB/s."""

from __future__ import annotations

import functools
import heapq
import itertools
from math import floor

import numpy as np

from libra_jax.model import pipelined, trace_copies
from libra_jax.model.trace_rings import ring_finish_aware, ring_finish_unaware, ring_signature
from libra_jax.model.trace_classes import (match_messages, rank_classes, relayed_sends,
                                           wire_ranks)
from libra_jax.model.trace_runtime import AlgoMsg, TraceRuntime, exact_ns, insert_at
from libra_jax.model.trace_setup import (COLL, COMPUTE, P2P, RECV, SEND, Geometry, Rank,
                                         Shapes, Stream, TraceTiming, check_trace, own_links,
                                         timing_of, trace_from_nodes)
from libra_jax.types import Block, LibraInputError, TraceSet, show

__all__ = ["TraceTiming", "ring_finish_aware", "ring_finish_unaware", "simulate_trace",
           "trace_from_nodes"]


def simulate_trace(trace: TraceSet, blocks, npus_per_dim, bandwidth_gbps, tm, *,
                   classes: bool = True) -> TraceTiming:
    """Times a trace set the way ASTRA-sim runs it (module docstring): every class of ranks
    simulated by one representative, all of them in one event loop.

    Args:
      trace: the step (`types.TraceSet`; ``ranks[r]`` is NPU r, dimension 0 fastest).
      blocks: [D] ``types.Block`` codes. npus_per_dim: [D] NPUs per dimension (their
        product is the number of ranks).
      bandwidth_gbps: [D] per-NPU GB/s (> 0 on every dimension used).
      tm: a `timing.TimingModel` (as for `step.simulate_step`; any runtime).
      classes: simulate one representative per class of equivalent ranks (exact); False
        simulates every rank (for checks, and never `trace_copies`).

    Returns: `TraceTiming` (ns).
    Raises:
      LibraInputError: ranks that do not fit the network, a group or peer outside it, a
        send without its recv (or the reverse), a step that cannot finish (naming the node).
    """
    blocks = [int(b) for b in blocks]
    npd = [int(n) for n in npus_per_dim]
    num_dims = len(blocks)
    if len(npd) != num_dims or np.shape(bandwidth_gbps) != (num_dims,):
        raise LibraInputError(f"npus_per_dim = {show(npd)} and bandwidth_gbps = "
                              f"{show(bandwidth_gbps)} need {num_dims} entries (blocks).")
    check_trace(trace, npd)
    if classes and (got := trace_copies.as_copies(trace, blocks, npd, bandwidth_gbps, tm)):
        return got  # one graph on every rank, NPUs that differ: `simulate_step`'s copies
    bw = np.asarray(bandwidth_gbps, np.float64)
    aware = tm.network_backend == "aware"
    whole = bool(tm.whole_ns)
    lifo = tm.queue_policy == "lifo"
    q = int(tm.queues_per_dim)
    limit = tm.max_inflight_collectives
    gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
    lat_ns = ([0.0] * num_dims if tm.latency_ns is None  # Python floats: faster sums
              else [float(x) for x in np.broadcast_to(np.asarray(tm.latency_ns, np.float64),
                                                       (num_dims,))])
    geo = Geometry(blocks, npd, bw, lat_ns, gib)
    shapes = Shapes(trace, geo, blocks, tm, aware)
    rt = TraceRuntime(trace, shapes, geo, blocks, tm, bw)  # the runtime keys
    per_queue, smallest_first = rt.per_queue, rt.smallest_first
    match_to, match_from = match_messages(trace)
    is_pg = np.asarray([g.ranks is not None for g in trace.groups] + [False], bool)
    pg_sig = functools.partial(ring_signature, trace, shapes, is_pg)
    # Aware sends that leave through other NPUs' links (a Ring route of several hops, a
    # route over several dimensions): ranks of one class then load different NPUs' links
    # (a pipeline's forward and backward messages meet on the links between the stages), so
    # every rank is simulated and each hop queues on the link of the NPU it leaves.
    relay = aware and relayed_sends(geo, match_to)
    cls = (rank_classes(trace, geo, match_to, match_from, pg_sig) if classes and not relay
           else np.arange(trace.num_ranks, dtype=np.int64))
    reps = {}
    for r in range(trace.num_ranks):
        reps.setdefault(int(cls[r]), r)
    ranks = [Rank(j, r, c, trace.ranks[r], num_dims, q)
             for j, (c, r) in enumerate(sorted(reps.items(), key=lambda x: x[1]))]
    by_cls = {rk.cls: rk for rk in ranks}

    wire_ranks(trace, geo, cls, ranks, match_to)

    comp: list = []  # (end, rank idx, node) of running compute
    net: list = []  # (time, seq, kind, payload): link events, message arrivals, pg stages
    pending: dict = {}  # (group, k) -> [classes issued, waiting issues]
    seq = itertools.count(1)  # the net events' and streams' sequence numbers
    now = 0.0
    inf = float("inf")
    comp_key = (0.0, -1, -1)  # the compute end being run (before the loop: none ran yet)
    cur_seq = 0  # the net event being run (0: a compute or stage end, run before the tick's)
    dirty: list = []
    heappush, heappop = heapq.heappush, heapq.heappop

    def push(t: float, kind: str, payload) -> None:
        heappush(net, (t, next(seq), kind, payload))

    def stage_ns(s: Stream) -> float:
        st = s.stages[s.pos]
        if len(st) > 12 and st[12] is not None:  # (a tree chunk runs by its events)
            return exact_ns(st) if st[13] is None else inf
        dim, coef, fixed = st[:3]
        return float(fixed + (coef / bw[dim] if coef > 0 else 0.0))  # value as is

    # ---- the congestion-aware link model (as step.simulate_step), per simulated rank
    endpoint = float(tm.endpoint_delay_ns)

    def path(dim: int, dr: int) -> tuple:
        if blocks[dim] == Block.SWITCH:
            return ((dim, "up"), (dim, "down"))
        return ((dim, 0 if npd[dim] <= 2 else dr),)

    def pre_send_ns(s: Stream) -> float:
        if s.pre is not None:
            return s.pre[s.step]
        return endpoint + (s.red_step if 1 <= s.step <= s.reductions else 0.0)

    def link_put(rk: Rank, link, msg, t: float) -> None:
        if link is None:  # a later hop of a Ring route: on another NPU's link
            owner, hop = msg
            ser, la = owner.hops[hop] if type(owner) is Stream else (owner.ser[hop],
                                                                        owner.lat[hop])
            heappush(net, (t + (floor(ser + la) if whole else ser + la), next(seq), "arrive",
                           msg))
            return
        # A link is busy until its "free" event (t_free, seq) has run: that event is put
        # on the heap, with the key it got at the send, only once a message waits for it
        # (a free link with nobody waiting needs no event; the heap's order is unchanged).
        end = rk.link_busy.get(link)
        if end is not None and (end[0] > t or (end[0] == t and end[1] > cur_seq)):
            waiting = rk.link_wait.get(link)
            if waiting:
                waiting.append(msg)
            else:
                rk.link_wait[link] = [msg]
                heappush(net, (end[0], end[1], "free", (rk, link)))
            return
        owner, hop = msg
        if type(owner) is Stream:
            if owner.hops is None:
                ser, la = owner.msg_ns, owner.msg_lat
            else:
                ser, la = owner.hops[hop]
        else:
            ser, la = owner.ser[hop], owner.lat[hop]
        if whole:  # (system.whole_ns: each time cast to whole ns, as ASTRA-sim's Link)
            t_free = t + floor(ser)
            rk.link_busy[link] = (t_free, next(seq))
            heappush(net, (t + floor(ser + la), next(seq), "arrive", msg))
            return
        t_free = t + ser
        rk.link_busy[link] = (t_free, next(seq))
        heappush(net, (t_free + la, next(seq), "arrive", msg))

    def start_stage_aware(s: Stream) -> None:  # (and a tree chunk's, unaware)
        dim, coef, fixed, _, dr, _, steps, red, n_d, ring = s.stages[s.pos][:10]
        if ring is None and exact_ns(s.stages[s.pos]) is not None:  # not a ring
            rt.start_stage(s, now, push)
            return
        s.step = 0
        if ring is not None:
            s.path, s.hops, s.pre, s.post = shapes.local_ring(ring, dr, s.rk.rank)
            s.steps = ring[2]
            push(now + s.pre[0], "send", s)
            return
        s.hops = s.pre = None
        s.steps = max(int(round(steps)), 1)
        s.msg_ns = float(coef / s.steps / bw[dim]) if coef > 0 else 0.0
        s.msg_lat = lat_ns[dim]
        s.path = path(dim, dr)
        s.reductions = n_d - 1 if red > 0 else 0
        s.red_step = red / s.reductions if s.reductions else 0.0
        push(now + pre_send_ns(s), "send", s)

    def sync(rk: Rank) -> None:
        """Brings the rank's running unaware stages' remaining fractions up to now."""
        if aware or rk.t == now:
            return
        dt = now - rk.t
        for s in rk.running.values():
            if not s.held:
                s.left = max(0.0, s.left - dt / s.rate) if s.rate > 0 else 0.0
        rk.t = now

    def next_stage(rk: Rank) -> None:
        """Files the rank's first unaware stage to end (time, then the older stream) unless
        the entry filed is the same (valid entries: one per rank, ordered by (end, seq))."""
        best = None
        if rk.running:
            if rk.t != now:
                sync(rk)
            t0 = rk.t
            for key, s in rk.running.items():
                if s.held or s.rate == inf:  # (a tree chunk: its events)
                    continue
                t = t0 + s.left * s.rate
                if best is None or t < best[0] or (t == best[0] and s.seq < best[1]):
                    best = (t, s.seq, key)
        if best is None or best != rk.cur:
            rk.ver += 1
            rk.cur = best
            if best is not None:
                heappush(stq, (best[0], best[1], rk.ver, rk.idx, best[2]))

    def try_start(rk: Rank, dim: int, qi: int) -> None:
        lst = rk.queues[dim][qi]
        if not lst or rk.active[dim][qi] >= per_queue:
            return
        if rk.chain is not None and not aware:  # its kernel ends would sync this stage
            split_chain(rk)
        sync(rk)
        while lst and rk.active[dim][qi] < per_queue:
            s = lst.pop(0)
            rk.running[(dim, qi, s.seq)] = s
            rk.active[dim][qi] += 1
            if rk.nrun[dim] == 0:
                rk.since[dim] = now
            rk.nrun[dim] += 1
            touched.append(rk)
            if not aware:
                s.rate = stage_ns(s)
            if not s.held and (aware or s.rate == inf):
                start_stage_aware(s)

    def enqueue(rk: Rank, s: Stream, start: bool = True) -> None:
        dim, qi = s.stages[s.pos][0], s.stages[s.pos][5]
        lst = rk.queues[dim][qi]
        lst.insert(insert_at(lst, s, smallest_first, now), s)  # Sys::insert_stream
        if start:
            try_start(rk, dim, qi)

    def place(rk: Rank, i: int, streams, prio: int, held: bool) -> list:
        out = []
        for stages in streams:
            out.append(Stream(i, prio, shapes.placed(rk, stages), next(seq), rk, held))
            enqueue(rk, out[-1])
        return out

    def issue_collective(rk: Rank, i: int) -> None:
        g = rk.group[i]
        streams = rt.streams(rk.rank, rk.coll[i], rk.size[i], g, now)  # [stream][stage]
        prio = rk.counter
        rk.counter += 1 if lifo else -1
        rk.streams_left[i] = k = len(streams)
        if not k:
            return
        members = rk.members[g]
        if not members:
            place(rk, i, streams, prio, False)
            return
        # asymmetric group: the streams take their queues now, as every collective, but
        # their first stage runs only once every member class has issued its k-th on g
        nth = rk.issues.get(g, 0)
        rk.issues[g] = nth + 1
        issued, waiters = pending.setdefault((g, nth), (set(), {}))
        issued.add(rk.cls)
        streams = place(rk, i, streams, prio, True)
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
            if s.rk.running.get(s.stages[s.pos][0:6:5] + (s.seq,)) is s and (
                    aware or s.rate == inf):
                start_stage_aware(s)

    def finish(rk: Rank, i: int) -> None:
        rk.end[i] = now
        rk.done += 1
        kind = rk.kind[i]
        if kind == COLL or kind == SEND:
            rk.inflight -= 1
            rt.collective_ended(rk.rank, kind == COLL)
        ptr = rk.child_ptr
        a, b = ptr[i], ptr[i + 1]
        if a != b:
            waiting = rk.waiting
            ready = rk.ready
            for c in rk.children[a:b]:
                w = waiting[c] - 1
                waiting[c] = w
                if w == 0:
                    heappush(ready, c)
        dirty.append(rk)

    def send(rk: Rank, i: int) -> None:
        to, j, dst = rk.targets[i]
        size = rk.size[i]
        what = f"{rk.tr.path}: node id {int(rk.tr.node_id[i])}"
        if not aware:
            push(now + geo.hop_ns(rk.rank, dst, size / gib, what), "msg", (rk, i, to, j))
            return
        route = geo.route(rk.rank, dst, what, local=True)
        ser = [float(size / gib / bw[d]) for _, d in route]
        if relay:
            m = P2P(rk, i, (to, j), tuple(link for link, _ in route), ser,
                    [lat_ns[d] for _, d in route],
                    [by_cls[x] for x in geo.hop_sources(rk.rank, dst, what)])
        else:
            m = P2P(rk, i, (to, j), own_links(route), ser, [lat_ns[d] for _, d in route])
        link_put(rk, m.path[0], (m, 0), now)

    def deliver(rk: Rank, i: int, to: Rank, j: int) -> None:
        finish(rk, i)
        if j in to.posted:
            to.posted.discard(j)
            finish(to, j)
        else:
            to.arrived[j] = now

    def issue_ready(rk: Rank) -> None:
        ready = rk.ready
        if not ready:
            return
        blocked = []
        kinds = rk.kind
        started = -1
        while ready:
            i = heappop(ready)
            kind = kinds[i]
            if kind == COMPUTE:
                if rk.computing:
                    if rk.chain is not None:  # it waits for the kernel that runs now
                        split_chain(rk)
                    blocked.append(i)
                    continue
                rk.start[i] = now
                rk.computing = True
                started = i
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
            heappush(ready, i)
        if started < 0:
            return
        i = started
        t = now + rk.dur[i]
        if rk.nxt[i] >= 0 and not ready and (aware or not rk.running):
            # nothing else wants the compute unit: a chain of kernels as one compute event
            # (`Rank.chain_from`); split_chain undoes it if something comes to want it
            t, i = rk.chain_from(i, t)
        heappush(comp, (t, rk.idx, i))

    def split_chain(rk: Rank) -> None:
        """Back to one compute event per kernel: the kernels that ended before the event
        being run are recorded, the running one's end is filed."""
        nodes, ends = rk.chain
        ri = rk.idx
        key = comp_key if comp_key is not None else (now, inf, 0)
        m = 0
        while (ends[m], ri, nodes[m]) < key:
            m += 1
        rk.chain_done(m)
        comp.remove((ends[-1], ri, nodes[-1]))
        heapq.heapify(comp)
        heappush(comp, (ends[m], ri, nodes[m]))

    def stage_end(rk: Rank, key, s: Stream) -> None:
        held = key in rk.running  # (not a tree chunk that handed its queue on)
        s.left = 1.0
        s.pos += 1
        more = s.pos < len(s.stages)
        if more:  # it leaves its queue and joins the next one, which starts after the
            if held:  # queue it left has started its next stream (step.simulate_step)
                leave(rk, key)
            enqueue(rk, s, False)
        else:
            rk.streams_left[s.node] -= 1
            if rk.streams_left[s.node] == 0:
                # the collective's end is reported while its last stream still holds its
                # queue (step.simulate_step): what it frees is issued first
                finish(rk, s.node)
                issue_ready(rk)
            if held:
                leave(rk, key)
        try_start(rk, key[0], key[1])
        if more:
            try_start(rk, s.stages[s.pos][0], s.stages[s.pos][5])

    def leave(rk: Rank, key) -> None:
        del rk.running[key]
        rk.active[key[0]][key[1]] -= 1
        rk.nrun[key[0]] -= 1
        if rk.nrun[key[0]] == 0:
            rk.busy[key[0]] += now - rk.since[key[0]]

    def net_events():
        """Runs the network event at the heap's head, then the next ones while the loop
        below would take them; -> (rank, the finished stage's queue) of a "done", or None."""
        nonlocal now, cur_seq
        _, cur_seq, kind, payload = heappop(net)
        while True:
            if kind == "send":
                link_put(payload.rk, payload.path[0], (payload, 0), now)
            elif kind == "free":
                owner, link = payload
                waiting = owner.link_wait[link]  # put on the heap for a waiting message
                del owner.link_busy[link]
                link_put(owner, link, waiting.pop(0), now)
                if waiting:
                    end = owner.link_busy[link]
                    heappush(net, (end[0], end[1], "free", payload))
            elif kind == "arrive":
                owner, hop = payload
                if hop + 1 < len(owner.path):
                    link_put(owner.rk if type(owner) is Stream or owner.on is None
                             else owner.on[hop + 1], owner.path[hop + 1], (owner, hop + 1), now)
                elif type(owner) is P2P:
                    deliver(owner.rk, owner.node, *owner.target)
                elif type(owner) is AlgoMsg:  # a driver's message is in
                    rt.received(owner, now, push)
                else:
                    s = owner
                    s.step += 1
                    if s.step < s.steps:
                        heappush(net, (now + pre_send_ns(s), next(seq), "send", s))
                    else:
                        if s.pre is not None:
                            post = s.post
                        else:
                            post = endpoint + (s.red_step if s.reductions >= s.steps
                                               else 0.0)
                        push(now + post, "done", s)
            elif kind == "msg":
                deliver(*payload)
            elif kind == "general":  # an aware driver's bundle is back: its sends, its end
                rt.general(payload, now, link_put, push)
            elif kind == "release":  # a tree chunk hands its queue on (if it still holds it)
                key = payload.stages[payload.pos][0:6:5] + (payload.seq,)
                if key in payload.rk.running:
                    leave(payload.rk, key)
                    try_start(payload.rk, key[0], key[1])
            else:  # "done"
                st = payload.stages[payload.pos]
                return payload.rk, (st[0], st[5], payload.seq), payload
            if dirty:
                issue_dirty(None)
            if touched:
                refile()
            if not net or stq or net[0][2] == "done" or (comp and comp[0][0] <= net[0][0]):
                return None
            now, cur_seq, kind, payload = heappop(net)

    def refile() -> None:
        if not aware:
            if len(touched) == 1:
                next_stage(touched[0])
            else:
                for other in dict.fromkeys(touched):
                    next_stage(other)
        touched.clear()

    def issue_dirty(skip) -> None:
        """Issues the ready nodes of the ranks in dirty (first touched first) but skip."""
        if len(dirty) == 1:
            if dirty[0] is not skip:
                issue_ready(dirty[0])
        else:
            for other in list(dict.fromkeys(dirty)):
                if other is not skip:
                    issue_ready(other)
        dirty.clear()

    # The next event: a compute end (lowest rank first), a network event, the unaware stage
    # to end first (then the older stream); a rank's stages count down at its own events.
    stq: list = []  # (end, stream seq, version, rank idx, queue) of each rank's next stage
    touched: list = []
    for rk in ranks:
        issue_ready(rk)
    dirty.clear()
    refile()
    comp_key = None
    while True:
        t_next, what = inf, 0
        if comp:
            t_next, what = comp[0][0], 1
        if net and net[0][0] < t_next:
            t_next, what = net[0][0], 2
        while stq and stq[0][2] != ranks[stq[0][3]].ver:
            heappop(stq)
        if stq and stq[0][0] < t_next:
            t_next, what = stq[0][0], 3
        if not what:
            break
        now = t_next
        cur_seq = 0
        if what == 1:  # a compute end: sync, then finish (inlined; rk is not put in dirty,
            _, j, i = heappop(comp)  # which below skips it)
            rk = ranks[j]
            comp_key = (now, j, i)
            if rk.chain is not None:
                rk.chain_done(len(rk.chain[0]) - 1)
            if rk.running:  # else nothing to bring up or refile (no stage entry is filed)
                if not aware and rk.t != now:
                    dt = now - rk.t
                    for s in rk.running.values():
                        if not s.held:
                            s.left = max(0.0, s.left - dt / s.rate) if s.rate > 0 else 0.0
                    rk.t = now
                touched.append(rk)
            rk.computing = False
            rk.end[i] = now
            rk.done += 1
            ptr, waiting = rk.child_ptr, rk.waiting
            for c in rk.children[ptr[i]:ptr[i + 1]]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    heappush(rk.ready, c)
        elif what == 2:
            out = net_events()
            if out is None:
                continue
            rk, key, s = out
            stage_end(rk, key, s)
        else:
            comp_key = None
            _, _, _, j, key = heappop(stq)
            rk = ranks[j]
            rk.cur = None
            sync(rk)
            touched.append(rk)
            stage_end(rk, key, rk.running[key])
        if rk.ready:
            issue_ready(rk)
        if dirty:
            issue_dirty(rk)
        if touched:
            refile()
        comp_key = None

    return timing_of(trace, ranks, cls, reps)
