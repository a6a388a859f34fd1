"""ASTRA-sim's runtime keys (``inter_dim_scheduling``, ``intra_dim_scheduling``,
``collective_optimization``, ``algorithm``, ``active_chunks_per_dim``; ``docs/runtime.md``) in
the trace replay (`step_trace.simulate_trace`; ``docs/step_simulation.md`` section "Runtime
keys in the trace replay").

`TraceRuntime.streams` builds a collective's streams when the runtime is not the default:

* **A group given by dimensions** (``CommGroup.involved``): `runtime.collective_streams`
  (``Sys::generate_collective``), each stream its own stages, with one `RuntimeState` per
  simulated rank (every rank of a class runs alike), as `step.simulate_step` does.
* **A pg_name group** (``CommGroup.ranks``, part of the machine): ASTRA-sim's
  ``CommunicatorGroup::get_collective_plan`` gives it a one-dimension ``RingTopology`` over
  the listed NPUs and the Ring implementation, so the ``algorithm`` key never applies. The
  chunk loop of ``generate_collective`` still runs on it, with that topology:

  - ``collective_optimization``: a localBWAware all-reduce is one all-reduce phase on the
    first half of the queues, a baseline one the same phase on any queue; other collectives
    one phase on any queue.
  - ``inter_dim_scheduling`` ascending / round robin: the one dimension is visited, its
    phase on dimension 0's queues. Round robin advances the network's counter per chunk and
    resets it when it reaches the ring's one dimension: a counter at 0 stays 0, any other
    one grows by one (``std::rotate`` past the end is then undefined in ASTRA-sim; here every
    rotation is by the counter mod the dimension count, the next full-dimension collective
    included).
  - Themis (offlineGreedy, -flex), not all-to-all: ``OfflineGreedy::get_chunk_scheduling``
    is called with the group's one-entry ``dimensions_involved``, read past its end as true
    (libstdc++ fills the whole word), so each chunk is scheduled and loaded as a chunk over
    every dimension of the machine: the chunk sizes (the last chunk carries what is left;
    Themis-flex sizes its own) and the loads are those, the phase runs on the queues of the
    dimension Themis puts first, and an all-reduce is a reduce-scatter (first half of the
    queues) then an all-gather (second half) on the ring.
  - ``intra_dim_scheduling`` and ``active_chunks_per_dim`` are queue rules: they apply.

A stage here is `trace_setup.Shapes`'s tuple with (collective code, size, exact ns) after
it, placed with the tree it runs on (`tree_of`): ``exact`` not None for an algorithm other
than ring, which runs as in `step.simulate_step` (`TraceRuntime.start_stage`):

* unaware: a direct / halving-doubling stage takes its exact time alone (`exact_ns`);
* aware: the rank's `algorithms.StageDriver` sends its messages (`AlgoMsg`) through the
  rank's own FIFO links, sharing them with its other traffic (halving-doubling on a Ring of
  more than 2: every NPU of the group's, as `step.simulate_step`);
* a double-binary-tree chunk hands its queue on once ``algorithms.tree_follow_ns`` after
  the previous tree chunk of its queue started; unaware it ends its time alone after then,
  aware the rank's `algorithms.TreeGroup` of the dimension replays it with the other tree
  chunks running there (shared links; an added chunk can move their ends later).

Units: ns, bytes, GB/s.
"""

from __future__ import annotations

import numpy as np

from libra_jax.model import algorithms, pipelined, runtime
from libra_jax.model.step import chunk_split
from libra_jax.types import Block

RS, AG, AR, A2A = runtime.RS, runtime.AG, runtime.AR, runtime.A2A


def exact_ns(stage) -> float | None:
    """The exact time of a placed stage run by an algorithm other than ring (its phase
    alone, `algorithms.phase_time_ns` on the run's backend), or None (a ring stage): an
    unaware direct / halving-doubling stage's time, a tree chunk's time alone."""
    return stage[12] if len(stage) > 12 else None


def tree_of(stage) -> int | None:
    """The tree (0 RootMax, 1 RootMin) a placed double-binary-tree stage runs on, else None."""
    return stage[13] if len(stage) > 13 else None


class AlgoMsg:
    """One message of a direct / halving-doubling stage on the aware backend (a send of its
    stream's `algorithms.PhaseDriver`): on its rank's own links ``path``, each hop ``ns``
    of serialisation then the dimension's latency (as `P2P`: ``ser`` / ``lat`` per hop)."""

    __slots__ = ("rk", "s", "path", "ser", "lat", "on", "dst")

    def __init__(self, s, path: tuple, ns: float, lat: float, dst: int = 0):
        self.rk, self.s, self.path, self.on, self.dst = s.rk, s, path, None, dst
        self.ser, self.lat = (ns,) * len(path), (lat,) * len(path)


def insert_at(lst, s, smallest_first: bool, now: float) -> int:
    """Where stream ``s`` (its placed stage ``s.stages[s.pos]``) goes in a queue's waiting
    list (``Sys::insert_stream``): under SmallestFirst a reduce-scatter or all-gather phase
    goes ahead of the first waiting stream at least as large (the last place when one phase
    is left after it); else behind every waiting stream of equal or higher priority. Notes
    when ``s`` was queued (``s.queued = now``, as `step.simulate_step`'s ``enqueue``)."""
    s.queued = now
    stage = s.stages[s.pos]
    if smallest_first and len(stage) > 10 and stage[10] in (RS, AG):
        if len(s.stages) - s.pos - 1 == 1:
            return len(lst)
        size = stage[11]
        return next((j for j, o in enumerate(lst) if o.stages[o.pos][11] >= size), len(lst))
    return next((j for j, o in enumerate(lst) if o.priority < s.priority), len(lst))


class TraceRuntime:
    """The runtime of one `simulate_trace` run: per simulated rank its `RuntimeState` and
    round-robin counter, the exact phase times' cache, the queue rules."""

    def __init__(self, trace, shapes, geo, blocks, tm, bw):
        self.trace, self.shapes, self.tm = trace, shapes, tm
        self.npd, self.blocks, self.bw = list(geo.npd), list(blocks), np.asarray(bw)
        self.default = tm.is_default_runtime
        self.smallest_first = tm.intra_dim_scheduling == "smallest_first"
        self.per_queue = -(-int(tm.active_chunks_per_dim) // int(tm.queues_per_dim))
        self.themis = tm.themis_scheduling
        self.rr = tm.inter_dim_scheduling == "round_robin"
        self.exact_cache: dict = {}
        self.tree_groups: dict = {}  # (rank idx, dim, NPUs) -> its aware `TreeGroup`
        self.states: dict = {}  # rank -> [RuntimeState, ASTRA-sim's round-robin counter]
        self.algos = tm.algorithm or ("ring",) * len(self.npd)
        self.lat, self.backend = list(geo.lat), tm.network_backend
        self.unit = 1.0 / pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0

    def start_stage(self, s, now: float, push) -> None:
        """Starts stream ``s``'s stage of an algorithm other than ring at ``now``: pushes
        (``push(t, kind, s)``) a tree chunk's "release" and "done" (both backends), or the
        "general" events of the aware driver's first bundles (`step.simulate_step`'s
        ``start_stage_aware`` and ``start_tree``)."""
        st = s.stages[s.pos]
        dim, n_d, com, size = st[0], st[8], st[10], st[11]
        if tree_of(st) is not None:
            self._tree(s, now, push)
            return
        alg = self.algos[dim]
        s.driver = algorithms.StageDriver(alg, com, n_d, self.blocks[dim],
                                          size / n_d if com == AG else size,
                                          float(self.tm.endpoint_delay_ns),
                                          self.tm.local_mem_bw_gbps, dim, self.npd[dim])
        s.ns_per_byte = self.unit * runtime.link_share(alg, n_d) / self.bw[dim]
        for t, i in s.driver.start(now):
            push(t, "general", (s, i))

    def general(self, si, t: float, link_put, push) -> None:
        """A bundle of NPU ``i`` of stream ``s``'s driver came back at ``t`` (``si = (s,
        i)``): puts the `AlgoMsg` it sends then on the rank's first link of each
        (``link_put(rank, link, (msg, hop), t)``); once the stage is done
        (`algorithms.StageDriver`), pushes its "done" at ``t``."""
        s, i = si
        for dst, links, size, _ in s.driver.general(t, i):
            m = AlgoMsg(s, links, size * s.ns_per_byte, self.lat[s.stages[s.pos][0]], dst)
            link_put(s.rk, m.path[0], (m, 0), t)
        if s.driver.done == t:
            push(t, "done", s)

    @staticmethod
    def received(m, t: float, push) -> None:
        """`AlgoMsg` ``m`` arrived at ``t``: pushes its receiver's bundles."""
        for tb, i in m.s.driver.received(t, m.dst):
            push(tb, "general", (m.s, i))

    def _tree(self, s, now: float, push) -> None:
        """Pushes the queue release and the end of stream ``s``'s tree chunk started at
        ``now`` on its rank (twin of ``start_tree`` in `step.simulate_step`): its NPUs run
        it once they left the queue's previous chunk, so it ends at max(now, previous start
        + `algorithms.tree_follow_ns`) + its time alone; the queue takes its next chunk
        after the shorter follow time. Aware: the rank's `algorithms.TreeGroup` of the
        dimension replays it with the dimension's other tree chunks (shared links): its end
        and every end that moved are "general" ``(s, -1)`` events (stale ones ignored)."""
        rk, st = s.rk, s.stages[s.pos]
        dim, qi, n_d, size, alone, tree = st[0], st[5], st[8], st[11], st[12], st[13]
        at, hold = now, alone
        args = (n_d, self.blocks[dim])
        rest = (self.bw[dim] / runtime.link_share(self.algos[dim], self.npd[dim]),
                self.lat[dim], float(self.tm.endpoint_delay_ns), self.tm.local_mem_bw_gbps,
                self.tm.gb_is_gib, self.backend)

        def follow(prev, same):
            key = ("tree", dim, *args, prev, size, same)
            if key not in self.exact_cache:
                self.exact_cache[key] = algorithms.tree_follow_ns(*args, prev, size, same,
                                                                  *rest)
            return self.exact_cache[key]

        if self.per_queue == 1:  # (a queue running several at once: each its time alone)
            q_key = (dim, qi)
            if q_key in rk.tree_last:
                t0, tree0, size0 = rk.tree_last[q_key]
                at = max(at, t0 + follow(size0, tree0 == tree))
            rk.tree_last[q_key] = (at, tree, size)
            hold = min(follow(size, True), follow(size, False), hold)
        if self.backend == "aware":  # the dimension's tree chunks share its links
            key = (rk.idx, dim, n_d)
            if key not in self.tree_groups:
                self.tree_groups[key] = algorithms.TreeGroup(*args, rest[:5], self.per_queue)
            for o in self.tree_groups[key].add(s, now, tree, size, qi, s.queued):
                push(o.driver.done, "general", (o, -1))
            push(min(at + hold, s.driver.done), "release", s)
            return
        push(at + hold, "release", s)
        push(at + alone, "done", s)

    def collective_ended(self, rank: int, collective: bool = True) -> None:
        """A collective (else a send) of ``rank`` ended: Themis's first issuer within a tick
        is then no longer NPU 0 (`runtime.RuntimeState.ended`)."""
        if collective:
            self._state(rank)[0].ended = True

    def _state(self, rank: int):
        if rank not in self.states:
            self.states[rank] = [runtime.RuntimeState(), 0]
        return self.states[rank]

    def _advance(self, entry, chunks: int, dims: int) -> None:
        """ASTRA-sim's round-robin counter after ``chunks`` chunks on a topology of ``dims``
        dimensions (++, back to 0 when it equals ``dims``); the state's rotation is it mod
        the network's dimension count."""
        c = entry[1]
        for _ in range(chunks):
            c += 1
            if c == dims:
                c = 0
        entry[1] = c
        entry[0].rr = c % len(self.npd)

    def streams(self, rank: int, collective: int, size: float, g: int, now: float) -> list:
        """[stream][stage] of collective node (collective, size, group g) issued by ``rank``
        at ``now`` (ns), stages as `trace_setup.Shapes` gives them plus (com, size, exact);
        under the default runtime `Shapes.get`'s stages, the same for every stream."""
        if self.default:
            k, stages = self.shapes.get(collective, size, g)
            return [stages] * k if stages else []
        grp = self.trace.groups[g]
        entry = self._state(rank)
        st = entry[0]
        if self.rr:
            st.rr = entry[1] % len(self.npd)
        if grp.involved is not None:
            group = tuple(n if v and n > 1 else 1 for n, v in zip(self.npd, grp.involved))
            if not any(x > 1 for x in group):
                if self.rr:  # the chunk loop runs once, finds no phase and stops
                    self._advance(entry, 1, len(self.npd))
                return []
            out = runtime.collective_streams(collective, size, group, self.blocks, self.tm,
                                             self.bw, st, now, self.exact_cache, self.npd)
            if self.rr:
                self._advance(entry, len(out), len(self.npd))
            return [[(s.dim, s.coef, s.fixed, s.kind, s.steps, s.red, group[s.dim], None,
                      s.com, s.size, s.exact) for s in stream] for stream in out]
        return self._pg_streams(entry, collective, size, g, now)

    def _pg_streams(self, entry, collective: int, size: float, g: int, now: float) -> list:
        """A pg_name group's streams (module docstring): flat Ring stages over its NPUs."""
        tm = self.tm
        n = len(self.trace.groups[g].ranks)
        if self.themis and collective != A2A:
            # Themis schedules (and loads) each chunk as one over the whole machine: its
            # size, and the dimension it puts first (whose queues the ring's phases take)
            if n < 2:  # (ASTRA-sim would load one chunk on Themis before it finds no phase)
                return []
            full = runtime.collective_streams(collective, size, self.npd, self.blocks, tm,
                                              self.bw, entry[0], now, self.exact_cache)
            chunks = [(s[0].dim, s[0].size / self.npd[s[0].dim] if s[0].com == AG
                       else s[0].size) for s in full]
            return [self._themis_ring(g, collective, n, d, c, len(chunks)) for d, c in chunks]
        k, stages = self.shapes.get(collective, size, g)
        if self.rr and entry[1] != 0:
            # ASTRA-sim's counter goes back to 0 when it reaches the ring's one dimension:
            # at 0 it stays there, else it grows by one per chunk (one when none is made)
            self._advance(entry, max(k, 1), 0)
        if not stages:
            return []
        _, chunk = chunk_split(collective, size, int(tm.chunks), self.shapes.total)
        stage = stages[0]
        kind = stage[3]
        if collective == AR and tm.collective_optimization == "baseline":
            kind = "any"
        out_size = chunk * n if collective == AG else chunk
        return [[stage[:3] + (kind,) + stage[4:] + (collective, float(out_size), None)]
                for _ in range(k)]

    def _themis_ring(self, g: int, collective: int, n: int, dim: int, chunk: float,
                     k: int) -> list:
        """One Themis chunk of ``chunk`` bytes on a pg ring, its phases on ``dim``'s
        queues: an all-reduce (localBWAware) a reduce-scatter then an all-gather."""
        tm = self.tm
        if collective == AR and tm.collective_optimization != "baseline":
            phases = [(RS, "first"), (AG, "last")]
        else:
            phases = [(collective, "any")]
        unit = 1.0 / pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
        out, remain = [], float(chunk)
        for com, kind in phases:
            coef, _, steps, red, final = runtime.ring_phase(
                com, n, remain, int(Block.RING), 0.0, float(tm.endpoint_delay_ns),
                tm.local_mem_bw_gbps, unit)
            steps = max(int(round(steps)), 1)
            ring = (g, float(coef) / steps, steps, float(red), k)
            out.append((dim, 0.0, 0.0, kind, float(steps), float(red), n, ring, com,
                        float(max(remain, final)), None))
            remain = final
        return out

