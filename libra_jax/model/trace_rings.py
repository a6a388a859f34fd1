"""The ring stage of a ``pg_name`` group (`CommGroup.ranks`: a flat ring over the listed
NPUs) timed alone, all members starting together: every member's finish under the
congestion-unaware backend (`ring_finish_unaware`) and the congestion-aware one
(`ring_finish_aware`), and the per-message overheads of a ring stage (`step_overheads`).
`trace_setup.Shapes` turns these into each member's stage time; the rules are those of
`step_trace.py`'s module docstring ("pg_name groups").

Split from `step_trace.py` (which re-exports the two ring timings).

Units: ns.
"""

from __future__ import annotations

import heapq
from typing import Sequence

import numpy as np

from libra_jax.types import TraceNode


def step_overheads(steps: int, red_ns: float, n: int, endpoint_ns: float):
    """(pre [steps], post) of a ring stage: the delay before each message (endpoint delay,
    plus a local reduction from the second message on) and after the last arrival (the
    last receipt's endpoint delay and reduction: steps + 1 endpoint delays in all, as
    ASTRA-sim's Ring.cc), as the congestion-aware replay of `step.simulate_step` schedules
    them."""
    reductions = n - 1 if red_ns > 0 else 0
    red_step = red_ns / reductions if reductions else 0.0
    pre = [endpoint_ns + (red_step if 1 <= k <= reductions else 0.0) for k in range(steps)]
    return pre, endpoint_ns + (red_step if reductions >= steps else 0.0)


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


def ring_signature(trace, shapes, is_pg, r: int, tr) -> tuple:
    """Rank r's stage times on the pg_name rings of its collectives (``shapes``: a
    `trace_setup.Shapes`; ``is_pg`` [G + 1] which groups are pg groups), in node order, each
    distinct (collective, size, group) once: part of its class key (`rank_classes`)."""
    out = []
    coll = np.flatnonzero(tr.kind == int(TraceNode.COLLECTIVE))
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
