"""A multi-rank step (`types.TraceSet`) written as Chakra execution traces for ASTRA-sim.

:func:`write_trace_set` writes ``<dir>/<name>.<rank>.et`` for every rank (ASTRA-sim's
``--workload-configuration=<dir>/<name>``) and, when a collective runs over a ``pg_name``
group, ``<dir>/<name>.comm_groups.json`` (``{"<pg_name>": [ranks]}``, ASTRA-sim's
``--comm-group-configuration``). Where `inputs/chakra.py`'s ``write_traces`` writes one
graph that every NPU runs, here every rank has its own graph: pipeline stages differ and
exchange data by sends and receives, and groups may be listed NPUs.

**Framing and conventions** are `inputs/chakra.py`'s (its module docstring says where they
come from): one ``GlobalMetadata`` (version ``"0.0.4"``) then the nodes, each preceded by
its length as a varint; every node carries ``is_cpu_op`` (bool_val False); dependencies go
in ``data_deps``. Per `types.TraceNode` kind:

* ``COMPUTE`` -> ``COMP_NODE`` with ``duration_micros`` (whole µs, rounded half up as
  ``write_traces`` rounds: ``floor((ns + 500) / 1000)``) and ``num_ops`` (int64_val 0); a
  node that rounds to 0 µs is written with 0 µs, which ASTRA-sim skips as invalid (no
  time). What the rounding changed is returned (:class:`SetRounding`) for the caller to log.
* ``COLLECTIVE`` -> ``COMM_COLL_NODE`` with ``comm_type`` (int64_val), ``comm_size``
  (int64_val, bytes, rounded half up; the count of sizes that were not whole bytes is
  returned) and, by its `types.CommGroup`: ``involved_dim`` (bool_list, one entry per
  network dimension) for a group of whole dimensions, or ``pg_name`` (string_val, the
  group's name) for a group of listed ranks. A group named in ``omit_involved_dim`` is
  written with neither: ASTRA-sim then takes every dimension as involved (it must involve
  every dimension).
* ``SEND`` / ``RECV`` -> ``COMM_SEND_NODE`` / ``COMM_RECV_NODE`` with ``comm_src``,
  ``comm_dst``, ``comm_tag`` (int32_val) and ``comm_size`` (int64_val): a send's source is
  its rank and its destination the node's ``peer``; a receive's source is ``peer``.

Node ids are the trace's ``node_id`` (kept, so logs of both tools name the same nodes);
nodes are written in array order.

**Checks** (a `LibraInputError` naming the rank, the ET node id, the field and the value):
kinds, finite non-negative times and sizes within the limits, collective codes, group
indices, a ``pg_name`` group that does not list the rank running it (ASTRA-sim runs a
group's ring over the listed NPUs), ``pg_name`` values that are not decimal integers
(ASTRA-sim parses them with ``std::stoi``), one name for two different rank lists, ranks
outside the set, ``involved_dim`` lists of different lengths, peers, tags outside int32,
dependencies that are not nodes of the rank or form a cycle, and every send matched by one
receive of the same source, destination, tag and size (ASTRA-sim would wait forever).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from libra_jax.inputs.chakra import (
    COMM_TYPE,
    ET_VERSION,
    BoolList,
    GlobalMetadata,
    Node,
    NodeType,
    encode_message,
    et_attr,
    micros,
    round_half_up,
)
from libra_jax.inputs.limits import LIMITS, as_instance, as_int, as_path, as_str
from libra_jax.types import (
    Collective,
    CommGroup,
    LibraInputError,
    RankTrace,
    TraceNode,
    TraceSet,
    clip,
    show,
    show_path,
)

#: Largest ``comm_tag`` / NPU id: the attributes are int32.
INT32_MAX = 2**31 - 1
_PG_NAME = re.compile(r"[0-9]{1,9}")


class SetRounding(NamedTuple):
    """What writing whole µs and whole bytes changed.

    Attributes:
      total_change_ns: sum over compute nodes of (written - given) time, ns (signed).
      max_abs_change_ns: largest change of one compute node, ns (at most 500).
      zero_us_nodes: ``(rank, node id)`` of the compute nodes written with 0 µs (ASTRA-sim
        skips them), among them any given with a time > 0 but under 500 ns.
      sizes_rounded: communication nodes whose size was not a whole number of bytes.
    """

    total_change_ns: float
    max_abs_change_ns: float
    zero_us_nodes: tuple
    sizes_rounded: int


class TraceSetFiles(NamedTuple):
    """What :func:`write_trace_set` wrote.

    Attributes:
      et: the ``<name>.<rank>.et`` paths, rank order.
      comm_groups: the ``<name>.comm_groups.json`` path, or None when no group is a
        ``pg_name`` group (pass ``empty`` to ASTRA-sim then).
      rounding: what rounding to whole µs and bytes changed.
    """

    et: tuple
    comm_groups: pathlib.Path | None
    rounding: SetRounding


# --------------------------------------------------------------------------- building
_NODE_KEYS = {"id", "name", "kind", "duration_ns", "collective", "size_bytes", "group",
              "peer", "tag", "deps"}


def build_rank_trace(rank: int, nodes: Sequence[Mapping], *, path: str = "") -> RankTrace:
    """One rank's `RankTrace` from node dicts, in the order given (a generator's way in).

    Each dict: ``id`` (ET node id), ``name``, ``kind`` (`TraceNode`), ``deps`` (ids of other
    nodes of this rank, default none) and by kind ``duration_ns``
    (COMPUTE); ``collective``, ``size_bytes``, ``group`` (COLLECTIVE: an index into the
    set's groups); ``peer``, ``tag``, ``size_bytes`` (SEND / RECV). Fields that a kind
    does not use take the `RankTrace` fill values (0, -1). The values are checked when the
    set is written (:func:`write_trace_set`).

    Raises:
      LibraInputError: an unknown key, a missing ``id`` / ``kind``, or a dependency on an
        id that is not a node of the list.
    """
    index = {}
    for i, nd in enumerate(nodes):
        unknown = set(nd) - _NODE_KEYS
        if unknown or "id" not in nd or "kind" not in nd:
            raise LibraInputError(
                f"rank {rank} nodes[{i}]: keys {show(sorted(nd))}; expected id, kind and "
                f"some of {', '.join(sorted(_NODE_KEYS - {'id', 'kind'}))}.")
        index.setdefault(nd["id"], i)
    ptr, deps = [0], []
    for i, nd in enumerate(nodes):
        for d in nd.get("deps", ()):
            if d not in index:
                raise LibraInputError(
                    f"rank {rank} node id {nd['id']}: depends on id {show(d)}, which is not "
                    f"a node of rank {rank}.")
            deps.append(index[d])
        ptr.append(len(deps))

    def col(key, fill, dtype):
        return np.array([nd.get(key, fill) for nd in nodes], dtype=dtype)

    return RankTrace(
        rank=rank, path=path, node_id=col("id", 0, np.int64),
        name=tuple(str(nd.get("name", "")) for nd in nodes),
        kind=col("kind", 0, np.int8), duration_ns=col("duration_ns", 0.0, np.float64),
        collective=col("collective", 0, np.int8), size_bytes=col("size_bytes", 0.0, np.float64),
        group=col("group", -1, np.int32), peer=col("peer", -1, np.int32),
        tag=col("tag", -1, np.int64), dep_ptr=np.array(ptr, dtype=np.int64),
        deps=np.array(deps, dtype=np.int32))


# --------------------------------------------------------------------------- checks
def _where(rank: int, trace: RankTrace, i: int) -> str:
    name = trace.name[i] if i < len(trace.name) else None
    label = f" ({clip(name)})" if isinstance(name, str) and name else ""
    return f"rank {rank} node id {int(trace.node_id[i])}{label}"


def _check_groups(groups, omit: Collection[int]) -> tuple[int | None, list, set]:
    """-> (number of dims of the involved_dim groups or None, the pg groups' (name, ranks)
    in first-seen order, the omitted group indices)."""
    num_dims = None
    pg: dict[str, tuple[int, ...]] = {}
    for g, group in enumerate(groups):
        where = f"groups[{g}]"
        as_instance(group, CommGroup, where)
        as_str(group.name, f"{where}.name", empty=True)
        if (group.involved is None) == (group.ranks is None):
            raise LibraInputError(
                f"{where} ({clip(group.name)}): give exactly one of involved (whole "
                f"dimensions) and ranks (a pg_name group); got involved = "
                f"{show(group.involved)}, ranks = {show(group.ranks)}.")
        if group.involved is not None:
            involved = tuple(group.involved)
            if not involved or not any(bool(x) for x in involved):
                raise LibraInputError(
                    f"{where}.involved = {show(involved)}: a collective must involve at "
                    f"least one network dimension.")
            if num_dims is None:
                num_dims = len(involved)
            elif len(involved) != num_dims:
                raise LibraInputError(
                    f"{where}.involved = {show(involved)} has {len(involved)} entries but "
                    f"an earlier group has {num_dims}; give one per network dimension.")
            continue
        if not isinstance(group.name, str) or not _PG_NAME.fullmatch(group.name):
            raise LibraInputError(
                f"{where}.name = {show(group.name)}: a pg_name group's name must be a "
                f"decimal integer of at most 9 digits (ASTRA-sim reads pg_name and the "
                f"comm-group JSON keys with std::stoi).")
        ranks = tuple(as_int(r, f"{where}.ranks[{k}]", 0) for k, r in enumerate(group.ranks))
        if len(ranks) < 2 or len(set(ranks)) != len(ranks):
            raise LibraInputError(
                f"{where}.ranks = {show(ranks)}: a pg_name group lists two or more "
                f"distinct NPUs.")
        if pg.setdefault(group.name, ranks) != ranks:
            raise LibraInputError(
                f"{where}: pg_name {group.name!r} lists ranks {show(ranks)} but an earlier "
                f"group of that name lists {show(pg[group.name])}.")
    omitted = set()
    for k, g in enumerate(omit):
        g = as_int(g, f"omit_involved_dim[{k}]", 0, len(groups) - 1)
        involved = groups[g].involved
        if involved is None or not all(bool(x) for x in involved):
            raise LibraInputError(
                f"omit_involved_dim[{k}] = {g}: only a group over every dimension can be "
                f"written without involved_dim (ASTRA-sim then takes every dimension as "
                f"involved); groups[{g}] has involved = {show(involved)}, ranks = "
                f"{show(groups[g].ranks)}.")
        omitted.add(g)
    return num_dims, list(pg.items()), omitted


def _array(trace: RankTrace, rank: int, field: str, n: int) -> np.ndarray:
    value = np.asarray(getattr(trace, field))
    if value.shape != (n,):
        raise LibraInputError(
            f"rank {rank}: {field} has shape {value.shape}; expected ({n},), one entry per "
            f"node.")
    return value


def _check_real(value: np.ndarray, rank: int, trace: RankTrace, field: str, hi: float,
                where: np.ndarray, unit: str) -> None:
    bad = np.flatnonzero(where & ~(np.isfinite(value) & (value >= 0) & (value <= hi)))
    if bad.size:
        i = int(bad[0])
        raise LibraInputError(
            f"{_where(rank, trace, i)}: {field} = {show(float(value[i]))}{unit}; expected a "
            f"finite value in [0, {hi:g}]{unit}.")


def _check_rank(rank: int, trace: RankTrace, num_ranks: int, groups, pg_members) -> dict:
    """Checks one rank's arrays -> the arrays as numpy, for writing."""
    as_instance(trace, RankTrace, f"ranks[{rank}]")
    if trace.rank != rank:
        raise LibraInputError(
            f"ranks[{rank}].rank = {show(trace.rank)}: expected {rank} (ranks in rank "
            f"order).")
    node_id = np.asarray(trace.node_id)
    if node_id.ndim != 1:
        raise LibraInputError(f"rank {rank}: node_id has shape {node_id.shape}; expected [N].")
    n = node_id.shape[0]
    if len(trace.name) != n:
        raise LibraInputError(
            f"rank {rank}: {len(trace.name)} names for {n} nodes; expected one per node.")
    a = {f: _array(trace, rank, f, n) for f in (
        "kind", "duration_ns", "collective", "size_bytes", "group", "peer", "tag")}
    a["node_id"] = node_id
    for f in ("node_id", "kind", "collective", "group", "peer", "tag"):
        if n and not np.issubdtype(a[f].dtype, np.integer):
            raise LibraInputError(
                f"rank {rank}: {f} has dtype {a[f].dtype}; expected integers.")
    for f in ("duration_ns", "size_bytes"):
        if n and not (np.issubdtype(a[f].dtype, np.floating)
                      or np.issubdtype(a[f].dtype, np.integer)):
            raise LibraInputError(
                f"rank {rank}: {f} has dtype {a[f].dtype}; expected numbers.")
    a["duration_ns"] = a["duration_ns"].astype(np.float64)
    a["size_bytes"] = a["size_bytes"].astype(np.float64)
    if n:
        bad = np.flatnonzero((node_id < 0) | (node_id > np.iinfo(np.int64).max))
        if bad.size:
            i = int(bad[0])
            raise LibraInputError(
                f"rank {rank} node index {i}: node_id = {int(node_id[i])}; expected >= 0.")
        uniq, counts = np.unique(node_id, return_counts=True)
        if (counts > 1).any():
            raise LibraInputError(
                f"rank {rank}: node id {int(uniq[counts > 1][0])} is given "
                f"{int(counts[counts > 1][0])} times; node ids are unique per rank.")
    kind = a["kind"]
    bad = np.flatnonzero((kind < 0) | (kind > max(TraceNode)))
    if bad.size:
        i = int(bad[0])
        raise LibraInputError(
            f"{_where(rank, trace, i)}: kind = {int(kind[i])}; expected a TraceNode code "
            f"({', '.join(f'{k.value} {k.name}' for k in TraceNode)}).")
    comp = kind == TraceNode.COMPUTE
    coll = kind == TraceNode.COLLECTIVE
    p2p = (kind == TraceNode.SEND) | (kind == TraceNode.RECV)
    _check_real(a["duration_ns"], rank, trace, "duration_ns", LIMITS.max_ns, comp, " ns")
    _check_real(a["size_bytes"], rank, trace, "size_bytes", LIMITS.max_bytes, coll | p2p,
                " bytes")
    codes = np.array(sorted(int(c) for c in COMM_TYPE))
    bad = np.flatnonzero(coll & ~np.isin(a["collective"], codes))
    if bad.size:
        i = int(bad[0])
        raise LibraInputError(
            f"{_where(rank, trace, i)}: collective = {int(a['collective'][i])}; a COLLECTIVE "
            f"node needs one of {', '.join(f'{c} {Collective(c).name}' for c in codes)} "
            f"(send-recv is a SEND and a RECV node).")
    bad = np.flatnonzero(coll & ((a["group"] < 0) | (a["group"] >= len(groups))))
    if bad.size:
        i = int(bad[0])
        raise LibraInputError(
            f"{_where(rank, trace, i)}: group = {int(a['group'][i])}; expected an index "
            f"into the set's {len(groups)} groups.")
    for g in np.unique(a["group"][coll]):
        members = pg_members[int(g)]
        if members is not None and rank not in members:
            i = int(np.flatnonzero(coll & (a["group"] == g))[0])
            raise LibraInputError(
                f"{_where(rank, trace, i)}: runs a collective over pg_name group "
                f"{groups[int(g)].name!r} (groups[{int(g)}]), which does not list rank "
                f"{rank}: {show(sorted(members))}.")
    peer, tag = a["peer"], a["tag"]
    bad = np.flatnonzero(p2p & ((peer < 0) | (peer >= num_ranks) | (peer == rank)))
    if bad.size:
        i = int(bad[0])
        raise LibraInputError(
            f"{_where(rank, trace, i)}: peer = {int(peer[i])}; a send or receive needs "
            f"another rank of the set (0 to {num_ranks - 1}, not {rank}).")
    bad = np.flatnonzero(p2p & ((tag < 0) | (tag > INT32_MAX)))
    if bad.size:
        i = int(bad[0])
        raise LibraInputError(
            f"{_where(rank, trace, i)}: tag = {int(tag[i])}; expected 0 to {INT32_MAX} "
            f"(comm_tag is an int32).")
    a["dep_ptr"], a["deps"] = _check_deps(rank, trace, n)
    return a


def _check_deps(rank: int, trace: RankTrace, n: int) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.asarray(trace.dep_ptr)
    deps = np.asarray(trace.deps)
    if ptr.shape != (n + 1,) or deps.ndim != 1:
        raise LibraInputError(
            f"rank {rank}: dep_ptr has shape {ptr.shape} and deps {deps.shape}; expected "
            f"({n + 1},) and [E].")
    if (deps.size and not np.issubdtype(deps.dtype, np.integer)) or (
            not np.issubdtype(ptr.dtype, np.integer)):
        raise LibraInputError(f"rank {rank}: dep_ptr and deps must hold integers.")
    if ptr[0] != 0 or ptr[-1] != deps.size or (np.diff(ptr) < 0).any():
        raise LibraInputError(
            f"rank {rank}: dep_ptr must start at 0, not decrease and end at len(deps) = "
            f"{deps.size}; it starts at {int(ptr[0])} and ends at {int(ptr[-1])}.")
    owner = np.repeat(np.arange(n), np.diff(ptr))
    bad = np.flatnonzero((deps < 0) | (deps >= n) | (deps == owner))
    if bad.size:
        k = int(bad[0])
        raise LibraInputError(
            f"{_where(rank, trace, int(owner[k]))}: depends on node index {int(deps[k])}; "
            f"expected another node of rank {rank} (0 to {n - 1}).")
    if (deps > owner).any():  # not in array order: look for a cycle (Kahn)
        indegree = np.bincount(owner, minlength=n)
        children = [[] for _ in range(n)]
        for i, d in zip(owner.tolist(), deps.tolist()):
            children[d].append(i)
        ready = [i for i in range(n) if indegree[i] == 0]
        done = 0
        while ready:
            i = ready.pop()
            done += 1
            for c in children[i]:
                indegree[c] -= 1
                if indegree[c] == 0:
                    ready.append(c)
        if done < n:
            i = int(np.flatnonzero(indegree > 0)[0])
            raise LibraInputError(
                f"{_where(rank, trace, i)}: is on a dependency cycle of rank {rank} (or "
                f"waits for one); ASTRA-sim would never issue it.")
    return ptr, deps


def _check_matching(arrays: list[dict]) -> None:
    """Every send has one receive with the same (source, destination, tag, size)."""
    sends: Counter = Counter()
    recvs: Counter = Counter()
    first = {}
    for rank, a in enumerate(arrays):
        for kind, counter, src_dst in ((TraceNode.SEND, sends, lambda p: (rank, p)),
                                       (TraceNode.RECV, recvs, lambda p: (p, rank))):
            idx = np.flatnonzero(a["kind"] == kind)
            for i, p, t, s in zip(idx.tolist(), a["peer"][idx].tolist(),
                                  a["tag"][idx].tolist(),
                                  (round_half_up(x) for x in a["size_bytes"][idx].tolist())):
                key = (*src_dst(p), t, s)
                counter[key] += 1
                first.setdefault((kind, key), (rank, int(a["node_id"][i])))
    for kind, key in first:  # in rank order: the first unmatched node is named
        if sends[key] != recvs[key]:
            src, dst, tag, size = key
            rank, node = first[(kind, key)]
            raise LibraInputError(
                f"rank {rank} node id {node}: {sends[key]} send(s) and {recvs[key]} "
                f"receive(s) from rank {src} to rank {dst} with tag {tag} and {size} bytes; "
                f"every send needs one receive of the same source, destination, tag and "
                f"size (ASTRA-sim would wait forever for the unmatched one).")


# --------------------------------------------------------------------------- writing
def _rank_frames(rank: int, trace: RankTrace, a: dict, groups, omitted: set,
                 rounding: list) -> bytes:
    node_id = a["node_id"].tolist()
    kind = a["kind"].tolist()
    dur = a["duration_ns"].tolist()
    coll = a["collective"].tolist()
    size = a["size_bytes"].tolist()
    group = a["group"].tolist()
    peer = a["peer"].tolist()
    tag = a["tag"].tolist()
    ptr = a["dep_ptr"].tolist()
    deps = a["deps"].tolist()
    # Each group's attribute, built once.
    group_attr = []
    for g, grp in enumerate(groups):
        if g in omitted:
            group_attr.append(None)
        elif grp.involved is not None:
            group_attr.append(et_attr("involved_dim", bool_list=BoolList(
                values=[bool(x) for x in grp.involved])))
        else:
            group_attr.append(et_attr("pg_name", string_val=grp.name))
    cpu = et_attr("is_cpu_op", bool_val=False)
    no_ops = et_attr("num_ops", int64_val=0)
    comm_type = {c: et_attr("comm_type", int64_val=int(t)) for c, t in COMM_TYPE.items()}
    total, max_abs, sizes_rounded = 0.0, 0.0, 0
    zero = []
    chunks = [encode_message(GlobalMetadata(version=ET_VERSION))]
    for i in range(len(node_id)):
        node = Node(id=node_id[i], name=trace.name[i],
                    data_deps=[node_id[d] for d in deps[ptr[i]:ptr[i + 1]]])
        node.attr.append(cpu)
        k = kind[i]
        if k == TraceNode.COMPUTE:
            us = micros(dur[i])
            change = us * 1000.0 - dur[i]
            total += change
            max_abs = max(max_abs, abs(change))
            if us == 0:
                zero.append((rank, node_id[i]))
            node.type = NodeType.COMP_NODE
            node.duration_micros = us
            node.attr.append(no_ops)
        else:
            nbytes = round_half_up(size[i])
            sizes_rounded += nbytes != size[i]
            if k == TraceNode.COLLECTIVE:
                node.type = NodeType.COMM_COLL_NODE
                node.attr.append(comm_type[coll[i]])
                node.attr.append(et_attr("comm_size", int64_val=nbytes))
                extra = group_attr[group[i]]
                if extra is not None:
                    node.attr.append(extra)
            else:
                send = k == TraceNode.SEND
                node.type = NodeType.COMM_SEND_NODE if send else NodeType.COMM_RECV_NODE
                node.attr.append(et_attr("comm_src", int32_val=rank if send else peer[i]))
                node.attr.append(et_attr("comm_dst", int32_val=peer[i] if send else rank))
                node.attr.append(et_attr("comm_tag", int32_val=tag[i]))
                node.attr.append(et_attr("comm_size", int64_val=nbytes))
        chunks.append(encode_message(node))
    rounding.append((total, max_abs, zero, sizes_rounded))
    return b"".join(chunks)


def write_trace_set(trace: TraceSet, directory: str | os.PathLike, *, name: str = "wl",
                    omit_involved_dim: Collection[int] = ()) -> TraceSetFiles:
    """Writes a multi-rank step as Chakra ETs (and its pg_name groups) for ASTRA-sim.

    Args:
      trace: the step: one `RankTrace` per rank (``ranks[r].rank == r``), the groups its
        collectives run over.
      directory: the folder (created if missing); pass ``<directory>/<name>`` to
        ASTRA-sim's ``--workload-configuration``.
      name: the file name stem.
      omit_involved_dim: indices of groups over every dimension whose collectives are
        written without ``involved_dim`` (as some real traces are).

    Returns:
      The paths written and what rounding changed (:class:`TraceSetFiles`).

    Raises:
      LibraInputError: the set is not valid (see the module docstring's checks), or the
        files cannot be written.
    """
    as_instance(trace, TraceSet, "trace")
    name = as_str(name, "name")
    if os.sep in name or (os.altsep and os.altsep in name):
        raise LibraInputError(f"name = {show(name)}: expected a file name stem, no folder.")
    ranks = tuple(trace.ranks)
    if not ranks:
        raise LibraInputError("trace.ranks is empty: expected one RankTrace per NPU.")
    groups = tuple(trace.groups)
    _, pg, omitted = _check_groups(groups, omit_involved_dim)
    for pg_name, members in pg:
        outside = [r for r in members if r >= len(ranks)]
        if outside:
            raise LibraInputError(
                f"pg_name group {pg_name!r} lists rank {outside[0]}, but the set has "
                f"{len(ranks)} ranks (0 to {len(ranks) - 1}).")
    pg_members = [None if g.ranks is None else set(g.ranks) for g in groups]
    arrays = [_check_rank(r, t, len(ranks), groups, pg_members) for r, t in enumerate(ranks)]
    _check_matching(arrays)

    out = pathlib.Path(as_path(directory, "directory"))
    rounding: list = []
    paths = []
    comm_groups = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        for r, (t, a) in enumerate(zip(ranks, arrays)):
            path = out / f"{name}.{r}.et"
            path.write_bytes(_rank_frames(r, t, a, groups, omitted, rounding))
            paths.append(path)
        if pg:
            comm_groups = out / f"{name}.comm_groups.json"
            comm_groups.write_text(  # one group a line
                "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(list(v))}" for k, v in pg)
                + "\n}\n")
    except OSError as e:
        raise LibraInputError(
            f"directory: cannot write the Chakra trace set to {show_path(out)} "
            f"({e.strerror or e}).") from e
    report = SetRounding(
        total_change_ns=sum(x[0] for x in rounding),
        max_abs_change_ns=max((x[1] for x in rounding), default=0.0),
        zero_us_nodes=tuple(z for x in rounding for z in x[2]),
        sizes_rounded=sum(x[3] for x in rounding))
    return TraceSetFiles(tuple(paths), comm_groups, report)
