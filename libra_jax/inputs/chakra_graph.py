"""The dependency graphs of a Chakra trace set (`chakra_import.read_chakra`): one rank's
nodes in id order with their ``data_deps`` resolved (unique ids, parents in the file,
repeats counted once, skipped nodes' dependencies inherited; `rank_graph`), the Kahn
topological order with its cycle error (`topological_order`), and the set's sends matched
with its receives (`match_sends`). The rules are in `chakra_import`'s docstring
(**Dependencies**, **Nodes**: sends and receives).
"""

from __future__ import annotations

import collections

import numpy as np

from libra_jax.inputs.chakra_groups import Notes
from libra_jax.types import LibraInputError, RankTrace, TraceNode, clip

_MAX_ID = 2**63 - 1


class Where:
    """Names a node in messages: ``<file>: node <id> (<name>)``."""

    __slots__ = ("path", "node")

    def __init__(self, path: str, node):
        self.path, self.node = path, node

    def __str__(self) -> str:
        return f"{self.path}: node {self.node.id} ({clip(self.node.name)})"


# --------------------------------------------------------------------------- one rank's graph
def rank_graph(rank, path, nodes, ids, names, kind, duration_ns, collective, size_bytes, group,
               peer, tag, ndeps, deps, notes: Notes) -> RankTrace:
    """The kept nodes in id order with their dependencies (skipped nodes' inherited)."""
    n = ids.shape[0]
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    if n and sorted_ids[-1] > _MAX_ID:
        i = int(order[-1])
        raise LibraInputError(
            f"{path}: node {int(ids[i])} ({clip(names[i])}): node id beyond 2**63 - 1.")
    dup = np.flatnonzero(sorted_ids[1:] == sorted_ids[:-1])
    if dup.size:
        raise LibraInputError(
            f"{path}: node id {int(sorted_ids[dup[0]])} is used by more than one node.")
    owner = np.repeat(np.arange(n), ndeps)  # file index of each dep entry
    pos = np.searchsorted(sorted_ids, deps)
    pos_c = np.minimum(pos, max(n - 1, 0))
    bad = np.flatnonzero((pos >= n) | (sorted_ids[pos_c] != deps)) if deps.size else pos
    if bad.size:
        j = int(bad[0])
        i = int(owner[j])
        raise LibraInputError(
            f"{Where(path, nodes[i])}: depends on node {int(deps[j])}, which is not in the "
            f"file.")
    dep_idx = order[pos_c] if deps.size else pos_c.astype(np.int64)  # file index of parent
    # Each (node, parent) once.
    if deps.size:
        pair = np.sort(owner * n + dep_idx)  # np.unique's result, without its hashing
        pair = pair[np.concatenate(([True], pair[1:] != pair[:-1]))]
        if pair.size != deps.size:
            notes.add("dup_dep", "{n} repeated data_deps entries counted once (ASTRA-sim "
                                 "would never issue their nodes).", int(deps.size - pair.size))
        owner, dep_idx = pair // n, pair % n
    # Acyclic: fast when every dep has a smaller id (then id order is a topological order).
    if deps.size and np.any(ids[dep_idx] >= ids[owner]):
        topo = topological_order(n, owner, dep_idx, path, ids, names)
    else:
        topo = order
    skip = kind < 0
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=ptr[1:])
    if skip.any() and deps.size and skip[dep_idx].any():
        owner, dep_idx = _inherit(n, ptr, dep_idx, skip, topo)
    keep = ~skip
    # Kept nodes, id order; dependencies as kept indices.
    kept = order[keep[order]]
    new_index = np.full(n, -1, np.int64)
    new_index[kept] = np.arange(kept.size)
    m = keep[owner] if owner.size else owner.astype(bool)
    o, d = new_index[owner[m]], new_index[dep_idx[m]]
    key = np.lexsort((d, o))
    o, d = o[key], d[key]
    dep_ptr = np.zeros(kept.size + 1, np.int64)
    np.cumsum(np.bincount(o, minlength=kept.size), out=dep_ptr[1:])
    return RankTrace(
        rank=rank, path=path, node_id=ids[kept].astype(np.int64),
        name=tuple(map(names.__getitem__, kept.tolist())), kind=kind[kept].astype(np.int8),
        duration_ns=duration_ns[kept], collective=collective[kept], size_bytes=size_bytes[kept],
        group=group[kept], peer=peer[kept], tag=tag[kept], dep_ptr=dep_ptr,
        deps=d.astype(np.int32))


def topological_order(n, owner, dep_idx, path, node_id, name) -> np.ndarray:
    """A topological order (Kahn's) of a graph of ``n`` nodes, as an int64 array of node
    indices, every node after its parents; a cycle raises, naming a node on it.

    Args:
      n: the number of nodes (indices 0..n-1).
      owner, dep_idx: integer arrays of the edges, node ``owner[j]`` depending on node
        ``dep_idx[j]``.
      path, node_id, name: the file and each node's id and name, for the cycle's message
        (``<path>: node <id> (<name>): is on a dependency cycle ...``).
    """
    children = [[] for _ in range(n)]
    indeg = np.bincount(owner, minlength=n).tolist()
    for o, d in zip(owner.tolist(), dep_idx.tolist()):
        children[d].append(o)
    ready = [i for i in range(n) if indeg[i] == 0]
    out = []
    while ready:
        i = ready.pop()
        out.append(i)
        for c in children[i]:
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    if len(out) == n:
        return np.asarray(out, np.int64)
    # Walk unfinished parents from an unfinished node until one repeats: it is on a cycle.
    done = np.zeros(n, bool)
    done[out] = True
    parents = collections.defaultdict(list)
    for o, d in zip(owner.tolist(), dep_idx.tolist()):
        if not done[o] and not done[d]:
            parents[o].append(d)
    i = next(k for k in range(n) if not done[k])
    seen = {}
    while i not in seen:
        seen[i] = len(seen)
        i = parents[i][0]
    cycle = [k for k, _ in sorted(seen.items(), key=lambda kv: kv[1]) if seen[k] >= seen[i]]
    ring = " <- ".join(str(int(node_id[k])) for k in cycle[:8])
    raise LibraInputError(
        f"{path}: node {int(node_id[i])} ({clip(name[i])}): is on a dependency cycle (node "
        f"ids {ring}{' ...' if len(cycle) > 8 else ''} <- {int(node_id[i])}); a trace must "
        f"be acyclic.")


def _inherit(n, ptr, dep_idx, skip, topo):
    """Dependencies with every skipped parent replaced by its own (transitively)."""
    eff: dict[int, tuple] = {}
    new_owner, new_dep = [], []
    dep_list = dep_idx.tolist()
    ptr_l = ptr.tolist()
    skip_l = skip.tolist()
    for i in topo.tolist():
        parents = dep_list[ptr_l[i]:ptr_l[i + 1]]
        if any(skip_l[p] for p in parents):
            acc = set()
            for p in parents:
                if skip_l[p]:
                    acc.update(eff[p])
                else:
                    acc.add(p)
            parents = sorted(acc)
        if skip_l[i]:
            eff[i] = parents
        else:
            new_owner += [i] * len(parents)
            new_dep += parents
    return np.asarray(new_owner, np.int64), np.asarray(new_dep, np.int64)


# --------------------------------------------------------------------------- matching
def match_sends(traces: list[RankTrace]) -> None:
    """Every send has its receive: counts per (src, dst, tag, size) equal."""
    cols = {TraceNode.SEND: [], TraceNode.RECV: []}
    for t in traces:
        for k in (TraceNode.SEND, TraceNode.RECV):
            idx = np.flatnonzero(t.kind == k)
            if not idx.size:
                continue
            me = np.full(idx.size, t.rank, np.int64)
            other = t.peer[idx].astype(np.int64)
            src, dst = (me, other) if k == TraceNode.SEND else (other, me)
            cols[k].append(np.stack([src, dst, t.tag[idx], t.size_bytes[idx].astype(np.int64),
                                     me, idx.astype(np.int64)], axis=1))
    sends, recvs = (np.concatenate(cols[k]) if cols[k] else np.zeros((0, 6), np.int64)
                    for k in (TraceNode.SEND, TraceNode.RECV))
    if not sends.size and not recvs.size:
        return
    keys_s, count_s = np.unique(sends[:, :4], axis=0, return_counts=True)
    keys_r, count_r = np.unique(recvs[:, :4], axis=0, return_counts=True)
    cs = {tuple(k): c for k, c in zip(keys_s.tolist(), count_s.tolist())}
    cr = {tuple(k): c for k, c in zip(keys_r.tolist(), count_r.tolist())}
    for key in sorted(set(cs) | set(cr)):
        a, b = cs.get(key, 0), cr.get(key, 0)
        if a == b:
            continue
        src, dst, tag, size = key
        rows, side = (sends, "send") if a > b else (recvs, "receive")
        row = rows[np.flatnonzero((rows[:, :4] == key).all(axis=1))[0]]
        t = traces[int(row[4])]
        i = int(row[5])
        raise LibraInputError(
            f"{t.path}: node {int(t.node_id[i])} ({clip(t.name[i])}): {side} of {size} "
            f"bytes from rank {src} to rank {dst} with tag {tag} has no matching "
            f"{'receive' if a > b else 'send'}: {a} send(s) on rank {src} and {b} "
            f"receive(s) on rank {dst} with that source, destination, tag and size (ASTRA-sim "
            f"matches them one to one and would wait forever).")
