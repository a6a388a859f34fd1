"""Which ranks of a trace set run alike and which messages meet (`step_trace.simulate_trace`'s
set-up): send / recv matching (`match_messages`), the classes of equivalent ranks
(`rank_classes`, partition refinement), each simulated rank's group members and send
targets (`wire_ranks`) and whether aware sends cross other NPUs' links (`relayed_sends`).

Split from `trace_setup.py`; the semantics are those of `step_trace.py`'s module docstring.
"""

from __future__ import annotations

import numpy as np

from libra_jax.types import LibraInputError, TraceNode, TraceSet, show

COMPUTE, COLL, SEND, RECV = (int(TraceNode.COMPUTE), int(TraceNode.COLLECTIVE),
                             int(TraceNode.SEND), int(TraceNode.RECV))
#: ASTRA-sim folds workload tags into [0, 5e8) (``Sys::front_end_sim_send``, NATIVE).
NATIVE_TAGS = 500_000_000


def match_messages(trace: TraceSet):
    """{(rank, SEND node): (dst, RECV node)} and the reverse: the k-th send from a to b
    with (tag, size) meets the k-th recv on b from a with (tag, size), in node order."""
    sends: dict = {}
    recvs: dict = {}
    for r, tr in enumerate(trace.ranks):
        idx = np.flatnonzero(tr.kind == SEND)
        for i, peer, tag, size in zip(idx.tolist(), tr.peer[idx].tolist(),
                                      tr.tag[idx].tolist(), tr.size_bytes[idx].tolist()):
            sends.setdefault((r, peer, tag % NATIVE_TAGS, float(size)), []).append(i)
        idx = np.flatnonzero(tr.kind == RECV)
        for i, peer, tag, size in zip(idx.tolist(), tr.peer[idx].tolist(),
                                      tr.tag[idx].tolist(), tr.size_bytes[idx].tolist()):
            recvs.setdefault((peer, r, tag % NATIVE_TAGS, float(size)), []).append(i)
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


def unique_ints(x) -> np.ndarray:
    """``np.unique`` of an integer array (flattened, sorted, distinct) by one sort: numpy's
    hash-based ``np.unique`` is some 20x slower on 1e5 entries."""
    p = np.sort(np.asarray(x).reshape(-1))
    if p.size < 2:
        return p
    return p[np.concatenate(([True], p[1:] != p[:-1]))]


class _Arrays:
    """Node arrays as a dict key: equal when every array has the same dtype, shape and
    bytes (compared in full); hashed on a sample of each (cheap; a collision only costs a
    full comparison)."""

    __slots__ = ("arrays", "_hash")

    def __init__(self, *arrays):
        self.arrays = [np.ascontiguousarray(a) for a in arrays]
        fp = []
        for a in self.arrays:
            flat = a.reshape(-1)
            step = max(1, flat.size // 64)
            fp.append((str(a.dtype), a.shape, flat[:16].tobytes(), flat[-16:].tobytes(),
                       flat[::step].tobytes()))
        self._hash = hash(tuple(fp))

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return (type(other) is _Arrays and self._hash == other._hash
                and len(self.arrays) == len(other.arrays)
                and all(a.dtype == b.dtype and a.shape == b.shape
                        and np.array_equal(_bits(a), _bits(b))
                        for a, b in zip(self.arrays, other.arrays)))


def _bits(a: np.ndarray) -> np.ndarray:
    """The array's bytes as unsigned integers of its item size (bitwise equality, NaN
    included; wider words compare faster than single bytes)."""
    flat = a.reshape(-1)
    if a.itemsize in (2, 4, 8) and a.dtype.kind != "O":
        return flat.view(f"u{a.itemsize}")
    return flat.view(np.uint8)


def rank_classes(trace: TraceSet, geo, match_to, match_from, pg_sig) -> np.ndarray:
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
        disp_of: dict = {}  # peer -> displacement
        for p in set(tr.peer[p2p].tolist()):
            disp_of[p] = geo.displacement(r, p)
        disp = tuple(disp_of[p] for p in tr.peer[p2p].tolist())
        used.append(unique_ints(tr.group[coll]).tolist())
        keys.append((_Arrays(tr.kind, tr.duration_ns, tr.collective, tr.size_bytes, label,
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
                    member_sig[key] = tuple(unique_ints(grid[idx]).tolist())
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


def relayed_sends(geo, match_to) -> bool:
    """Whether a matched send's aware route (``geo``: a `trace_setup.Geometry`) has a hop
    on another NPU's link."""
    pairs = {(a, b) for (a, _), (b, _) in match_to.items()}
    for a, b in pairs:
        try:
            if any(x != a for x in geo.hop_sources(a, b, "")):
                return True
        except LibraInputError:  # a dimension without bandwidth: the send names it later
            continue
    return False


def wire_ranks(trace: TraceSet, geo, cls: np.ndarray, ranks, match_to) -> None:
    """Sets on each simulated rank (`trace_setup.Rank`) the member classes other than its
    own of every group it uses (``members``), its sends' targets (``targets``: receiving
    representative, its RECV node, the receiving NPU) and its nodes' collective, size and
    group as lists."""
    num_dims = len(geo.npd)
    by_cls = {rk.cls: rk for rk in ranks}
    grid = cls.reshape(tuple(geo.npd), order="F")
    for rk in ranks:
        tr = rk.tr
        rk.members = {}
        for g in unique_ints(tr.group[tr.kind == COLL]).tolist():
            grp = trace.groups[g]
            if grp.ranks is not None:
                m = {int(cls[x]) for x in grp.ranks}
            else:
                idx = tuple(slice(None) if grp.involved[d] else geo.coord(rk.rank, d)
                            for d in range(num_dims))
                m = set(unique_ints(grid[idx]).tolist())
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
