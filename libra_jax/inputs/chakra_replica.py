"""Replica ranks of a Chakra trace set, read without parsing them (used by
`libra_jax.inputs.chakra_import.read_chakra`).

Most ranks of a training step's trace set are copies of each other up to the peers of their
sends and receives and the communicator groups of their collectives (the data-parallel
replicas of a pipeline stage, the tensor-parallel ranks): their files have the same length
and differ only in the bytes of the values of ``comm_src`` / ``comm_dst`` / ``comm_tag``
(varint integers) and of ``pg_name`` (strings). A file parsed in full (a *template*) is
kept with its `RankTrace` and what its reading added to the set's notes and skip counts. A
later file of the same length is compared with it byte for byte (numpy); if every byte
that differs lies inside such a value of a kept send, receive or collective of the
template (a varint of the same length, a string of the same length), the file's nodes are
the template's with only those values changed: they are decoded (the varints vectorised),
every check of ``chakra_import`` that depends on them or on the rank runs on them (a peer
in [0, R) and not the rank itself, the tag's range, the ``pg_name`` group known and listing
the rank), the groups new to the set are added in file order, and the notes they make are
counted as the full reading counts them. Whenever anything is not plainly the same (a
difference elsewhere, a value that fails a check, a note not yet in the set's notes, an
attribute stored in another type, a non-canonical varint, a string that is not UTF-8),
`Replicas.trace` answers None and the file is parsed in full, so the result, errors and
messages included, is always that of parsing every file.

On the 64-rank benchmark (``experiments/bench_trace.py``: 4 pipeline stages, 16 replicas
each, 6.2 MB per file) a replica takes about 10 ms (reading the file, the comparison, the
checks), against 0.5-0.7 s to parse it. Over the 480 trace sets that
``experiments/astrasim_traces.py`` ran (generated and real ones), 56% of the rank files
read were replicas, with results equal to the full reading's.
"""

from __future__ import annotations

import collections

import numpy as np

from libra_jax.inputs.chakra_schema import frame_body, read_varint
from libra_jax.types import RankTrace, TraceNode

#: ``AttributeProto`` value fields read here: the varint integers (number -> oneof name).
_VARINT_TYPES = {7: "int32_val", 9: "int64_val", 11: "uint32_val", 13: "uint64_val",
                 15: "sint32_val", 17: "sint64_val"}
_VALUE_FIELDS = range(3, 33)  # every field of AttributeProto's oneof value
_NAMES = ("comm_src", "comm_dst", "comm_tag", "pg_name")
#: Record roles; pg_name: a string_val (field 29), a collective's group, or on a send /
#: receive, where it is not read (_FREE: its bytes need only stay UTF-8).
_MINE, _THEIRS, _TAG, _PG, _FREE = 0, 1, 2, 3, 4
#: Templates kept per file length (a file is compared with each, newest first).
MAX_TEMPLATES_PER_LENGTH = 4
_U = np.uint64


def _fields(data: bytes, pos: int, end: int):
    """``(number, wire type, value start, value end)`` of each field of the message at
    ``data[pos:end]``; None if it is not plain wire data (groups, a field running past)."""
    out = []
    while pos < end:
        key = read_varint(data, pos)
        if key is None:
            return None
        tag, pos = key
        wire = tag & 7
        if wire == 0:
            v = read_varint(data, pos)
            if v is None:
                return None
            start, pos = pos, v[1]
        elif wire == 1 or wire == 5:
            start, pos = pos, pos + (8 if wire == 1 else 4)
        elif wire == 2:
            v = read_varint(data, pos)
            if v is None:
                return None
            start = v[1]
            pos = start + v[0]
        else:
            return None
        if pos > end:
            return None
        out.append((tag >> 3, wire, start, pos))
    return out


def _decode(buf: np.ndarray, starts: np.ndarray, lens: np.ndarray, vtype: np.ndarray):
    """The varints at ``buf[starts]`` read as their value fields ``vtype`` (numbers of
    `_VARINT_TYPES`) -> (value as int64, big: a uint64 >= 2**63 (value meaningless),
    canonical: the varint is the one protobuf writes for the field's type)."""
    k = np.arange(10)
    idx = np.minimum(starts[:, None] + k, buf.size - 1)
    b = np.where(k < lens[:, None], buf[idx], 0).astype(_U) & _U(0x7F)
    v = np.bitwise_or.reduce(b << (7 * k).astype(_U), axis=1)  # bits past 64 dropped
    low = v & _U(0xFFFFFFFF)
    val = v.view(np.int64).copy()
    big = np.zeros(v.size, bool)
    canon = np.ones(v.size, bool)
    t = vtype == 7  # int32: sign-extended to 64 bits
    canon[t] = (v[t] < _U(2**31)) | (v[t] >= _U(2**64 - 2**31))
    val[t] = low[t].astype(np.uint32).view(np.int32)
    t = (vtype == 11) | (vtype == 15)
    canon[t] = v[t] < _U(2**32)
    val[vtype == 11] = low[vtype == 11].astype(np.int64)
    t = vtype == 15
    val[t] = (low[t] >> _U(1)).astype(np.int64) ^ -(low[t] & _U(1)).astype(np.int64)
    t = vtype == 17
    val[t] = (v[t] >> _U(1)).astype(np.int64) ^ -(v[t] & _U(1)).astype(np.int64)
    big[vtype == 13] = v[vtype == 13] >= _U(2**63)
    return val, big, canon


class _Template:
    """A fully parsed file: its bytes, `RankTrace`, notes and skips, and (made on first
    use, `records`) the byte spans of its sends' and receives' peer and tag values and of
    its collectives' ``pg_name`` strings."""

    def __init__(self, rank, data, trace, frames, notes, skipped, groups):
        self.rank, self.data, self.trace = rank, data, trace
        self.buf = np.frombuffer(data, np.uint8)
        self.frames, self.notes, self.skipped, self.groups = frames, notes, skipped, groups
        self._records = None

    def records(self):
        """The value spans as arrays (start, len, name, role, vtype, index into the trace,
        value, big; for pg_name records: the names, their groups and members), or False if
        the template cannot serve as one."""
        if self._records is None:
            self._records = self._make_records() or False
            if self._records:  # what its own reading counted, less the rank-dependent notes
                rec = self._records
                self.notes = (self.notes - self.var_notes(self.rank, rec["val"], rec["big"])
                              - _whole_notes(rec["pg_names"], rec["pg_members"]))
            self.frames = None
        return self._records

    def _make_records(self):
        data, trace, frames = self.data, self.trace, self.frames
        kinds = frames["kind"]
        wanted = np.flatnonzero((kinds == TraceNode.SEND) | (kinds == TraceNode.RECV)
                                | (kinds == TraceNode.COLLECTIVE))
        rows, pg_ok = [], True
        for i in wanted.tolist():
            start, end = frame_body(data, frames["offsets"][i])
            fields = _fields(data, start, end)
            if fields is None:
                return None
            j = int(np.searchsorted(trace.node_id, frames["ids"][i]))
            kind = int(kinds[i])
            for number, wire, s, e in fields:
                if number != 10:
                    continue
                if wire != 2:
                    return None
                sub = _fields(data, s, e)
                if sub is None:
                    return None
                names = [data[a:b] for n, w, a, b in sub if n == 1]
                if len(names) > 1:
                    return None  # protobuf keeps the last name: parse such files
                if not names or names[0].decode("utf-8", "replace") not in _NAMES:
                    continue
                name = _NAMES.index(names[0].decode())
                values = [(n, w, a, b) for n, w, a, b in sub if n in _VALUE_FIELDS]
                if kind == TraceNode.COLLECTIVE:
                    if name != 3:
                        continue
                    if len(values) != 1 or values[0][:2] != (29, 2):
                        pg_ok = False  # not one string: such pg_names must not differ
                    else:  # "" is no group (and is not recorded)
                        rows.append((values[0][2], values[0][3] - values[0][2], 3, _PG, 29, j))
                    continue
                if name == 3:
                    if len(values) == 1 and values[0][:2] == (29, 2):
                        rows.append((values[0][2], values[0][3] - values[0][2], 3, _FREE, 29, j))
                    continue
                if len(values) != 1 or values[0][0] not in _VARINT_TYPES or values[0][1] != 0:
                    return None  # another type, or a oneof given twice: parse such files
                n, _, a, b = values[0]
                send = kind == TraceNode.SEND
                role = _TAG if name == 2 else _MINE if (name == 0) == send else _THEIRS
                rows.append((a, b - a, name, role, n, j))
        if not pg_ok:
            rows = [row for row in rows if row[3] != _PG]
        rows = sorted(row for row in rows if row[1] > 0)
        cols = np.asarray(rows, np.int64).reshape(-1, 6)
        rec = dict(zip(("start", "len", "name", "role", "vtype", "index"), cols.T))
        num_p2p = np.count_nonzero((kinds == TraceNode.SEND) | (kinds == TraceNode.RECV))
        role = rec["role"]
        rec["val"], rec["big"], canon = _decode(self.buf, rec["start"], rec["len"],
                                                rec["vtype"])
        varint = role < _PG
        if (not canon[varint].all() or not (np.diff(rec["start"]) > 0).all()
                or np.count_nonzero(role == _THEIRS) != num_p2p
                or np.count_nonzero(role == _TAG) != num_p2p):
            return None
        rec["pg"] = np.flatnonzero(role == _PG)
        rec["pg_names"], rec["pg_members"] = [], []
        for r in rec["pg"].tolist():
            name = self.data[rec["start"][r]:rec["start"][r] + rec["len"][r]].decode()
            hit = self.groups.lookup(name)
            if hit is None or self.groups.index.get(hit[0]) != trace.group[rec["index"][r]]:
                return None  # a self-check: the group the full reading gave it
            rec["pg_names"].append(name)
            rec["pg_members"].append(hit[1])
        # The groups of the other collectives (involved_dim, or a pg_name not recorded).
        coll = trace.kind == TraceNode.COLLECTIVE
        coll[rec["index"][rec["pg"]]] = False
        index = list(self.groups.index)
        rec["members"] = [frozenset(index[g].ranks) for g in np.unique(trace.group[coll]).tolist()
                          if index[g].ranks]
        if not self._same(rec["val"], rec["big"], rec):
            return None
        rec["combos"] = sorted(set(zip(rec["name"][varint].tolist(),
                                       rec["vtype"][varint].tolist())))
        return rec

    def _same(self, val, big, rec) -> bool:
        """Whether the decoded values are the trace's peers and tags (a self-check)."""
        peer, tag = self.values(val, rec)
        t = (rec["role"] == _THEIRS) | (rec["role"] == _TAG)
        return (not big[t].any() and np.array_equal(peer, self.trace.peer)
                and np.array_equal(tag, self.trace.tag))

    def values(self, val, rec):
        """The peer and tag arrays with the records' values in place."""
        peer, tag = self.trace.peer.copy(), self.trace.tag.copy()
        t = rec["role"] == _THEIRS
        peer[rec["index"][t]] = val[t]
        t = rec["role"] == _TAG
        tag[rec["index"][t]] = val[t] + np.where(val[t] < 0, 2**32, 0)
        return peer, tag

    def var_notes(self, rank, val, big) -> collections.Counter:
        """The notes the records' values make on ``rank`` (`chakra_nodes.read_rank`'s
        keys): a sender / receiver field other than the rank, negative tags, values stored
        in a type other than ASTRA-sim's (int32) and not 0."""
        rec, out = self._records, collections.Counter()
        name, role = rec["name"], rec["role"]
        own = (role == _MINE) & (big | (val != rank))
        for k in (0, 1):
            out[("own", _NAMES[k])] = int(np.count_nonzero(own & (name == k)))
        out["neg_tag"] = int(np.count_nonzero((role == _TAG) & ~big & (val < 0)))
        nonzero = big | (val != 0)
        for k, vt in rec["combos"]:
            if vt != 7:
                out[("type", _NAMES[k], _VARINT_TYPES[vt])] += int(np.count_nonzero(
                    nonzero & (name == k) & (rec["vtype"] == vt)))
        return +out


def _whole_notes(names, members) -> collections.Counter:
    """The notes of collectives whose pg_name is a group of every NPU (`Groups.pg`)."""
    return collections.Counter(("whole", n) for n, m in zip(names, members) if m is None)


class Replicas:
    """The templates of one `read_chakra` call, and the notes and skip counters it adds to
    (``notes``: its ``chakra_groups.Notes``; ``skipped``: reason -> count)."""

    def __init__(self, num_ranks: int, groups, notes, skipped: collections.Counter):
        self.num_ranks, self.groups, self.notes, self.skipped = \
            num_ranks, groups, notes, skipped
        self.by_length: dict[int, list[_Template]] = {}

    def snapshot(self):
        """The notes and skip counts before a full reading (for `add`)."""
        return collections.Counter(self.notes.counts), collections.Counter(self.skipped)

    def add(self, rank: int, data: bytes, trace: RankTrace, frames: dict, before) -> None:
        """Keeps a fully read file as a template (``before``: `snapshot` before reading)."""
        same = self.by_length.setdefault(len(data), [])
        if len(same) < MAX_TEMPLATES_PER_LENGTH:
            same.insert(0, _Template(rank, data, trace, frames, self.notes.counts - before[0],
                                     self.skipped - before[1], self.groups))

    def trace(self, rank: int, path: str, data: bytes) -> RankTrace | None:
        """Rank ``rank``'s `RankTrace` from a template (its notes and skips counted), or
        None: parse the file."""
        for template in self.by_length.get(len(data), ()):
            out = self._from(template, rank, path, data)
            if out is not None:
                return out
        return None

    def _from(self, template: _Template, rank: int, path: str, data: bytes):
        rec = template.records()
        if not rec:
            return None
        a, b = template.buf, np.frombuffer(data, np.uint8)
        ne = a != b
        if np.count_nonzero(ne) > rec["len"].sum():
            return None
        diff = np.flatnonzero(ne)
        val, big = rec["val"], rec["big"]
        role = rec["role"]
        names, members = rec["pg_names"], rec["pg_members"]
        new_groups = {}
        if diff.size:
            starts = rec["start"]
            k = np.maximum(np.searchsorted(starts, diff, side="right") - 1, 0)
            text = role[k] >= _PG  # a string: any byte; a varint: not its 10th, same length
            span = np.where(text, rec["len"][k], np.minimum(rec["len"][k], 9))
            inside = (diff >= starts[k]) & (diff - starts[k] < span)
            if not inside.all() or ((a[diff] ^ b[diff]) & 0x80)[~text].any():
                return None
            changed = np.unique(k)
            for r in changed[role[changed] == _FREE].tolist():
                try:  # protobuf refuses a string that is not UTF-8
                    data[starts[r]:starts[r] + rec["len"][r]].decode("utf-8")
                except UnicodeDecodeError:
                    return None
            v = changed[role[changed] < _PG]
            v2, big2, canon = _decode(b, starts[v], rec["len"][v], rec["vtype"][v])
            if not canon.all():
                return None
            val, big = val.copy(), big.copy()
            val[v], big[v] = v2, big2
            p = changed[role[changed] == _PG]
            if p.size:
                names, members = list(names), list(members)
                where = {r: n for n, r in enumerate(rec["pg"].tolist())}
                for r in p.tolist():
                    try:
                        name = data[starts[r]:starts[r] + rec["len"][r]].decode("utf-8")
                    except UnicodeDecodeError:
                        return None
                    hit = self.groups.lookup(name)
                    if hit is None:
                        return None
                    names[where[r]], members[where[r]] = name, hit[1]
                    new_groups[r] = hit[0]
        t = role == _THEIRS
        if (big[t].any() or (val[t] < 0).any() or (val[t] >= self.num_ranks).any()
                or (val[t] == rank).any()):
            return None  # a bad peer: the full reading names it
        t = role == _TAG
        if big[t].any() or (val[t] < -2**31).any() or (val[t] > 2**32 - 1).any():
            return None
        if not all(rank in m for m in rec["members"]):
            return None
        if not all(m is None or rank in m for m in set(members)):
            return None
        notes = template.notes + template.var_notes(rank, val, big) + _whole_notes(
            names, members)
        counts = self.notes.counts
        if any(key not in counts for key in notes):
            return None  # a note new to the set: the full reading orders it
        counts.update(notes)
        self.skipped.update(template.skipped)
        peer, tag = template.values(val, rec)
        t = template.trace
        group = t.group
        if new_groups:
            group = group.copy()
            for r, g in sorted(new_groups.items()):  # file order, as the full reading adds
                group[rec["index"][r]] = self.groups.add(g)
        return RankTrace(
            rank=rank, path=path, node_id=t.node_id.copy(), name=t.name, kind=t.kind.copy(),
            duration_ns=t.duration_ns.copy(), collective=t.collective.copy(),
            size_bytes=t.size_bytes.copy(), group=group.copy(), peer=peer, tag=tag,
            dep_ptr=t.dep_ptr.copy(), deps=t.deps.copy())
