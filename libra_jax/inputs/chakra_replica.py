"""Replica ranks of a Chakra trace set, read without parsing them (used by
`libra_jax.inputs.chakra_import.read_chakra`).

Most ranks of a training step's trace set are copies of each other up to the peers of their
sends and receives (the data-parallel replicas of a pipeline stage, the tensor-parallel
ranks): their files have the same length and differ only in the bytes of the values of
``comm_src`` / ``comm_dst`` / ``comm_tag``. A file parsed in full (a *template*) is kept
with its `RankTrace` and what its reading added to the set's notes and skip counts. A
later file of the same length is compared with it byte for byte (numpy); if every byte
that differs lies inside the value (a varint) of one of those attributes of a kept send or
receive of the template, with the same varint length, the file's nodes are the template's
with only those values changed: they are decoded (vectorised), every check of
``chakra_import`` that depends on them or on the rank runs on them (a peer in [0, R) and
not the rank itself, the tag's range, the ``pg_name`` groups listing the rank), and the
notes they make are counted as the full reading counts them. Whenever anything is not
plainly the same (a difference elsewhere, a value that fails a check, a note not yet in
the set's notes, an attribute stored in a type other than a varint integer, a value in a
non-canonical varint), `Replicas.trace` answers None and the file is parsed in full, so
the result, errors and messages included, is always that of parsing every file.

On the 64-rank benchmark (``experiments/bench_trace.py``: 4 pipeline stages, 16 replicas
each, 6.2 MB per file) a replica takes about 15 ms (reading the file, the comparison, the
checks), against 0.5-0.7 s to parse it.
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
_NAMES = ("comm_src", "comm_dst", "comm_tag")
_MINE, _THEIRS, _TAG = 0, 1, 2
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
    use, `records`) the byte spans of its sends' and receives' peer and tag values."""

    def __init__(self, rank, data, trace, frames, notes, skipped, members):
        self.rank, self.data, self.trace = rank, data, trace
        self.buf = np.frombuffer(data, np.uint8)
        self.frames, self.notes, self.skipped, self.members = frames, notes, skipped, members
        self._records = None

    def records(self):
        """The value spans as arrays (start, len, name, role, vtype, index into the trace,
        value, big), or False if the template cannot serve as one."""
        if self._records is None:
            self._records = self._make_records() or False
            if self._records:  # what its own reading counted, less the rank-dependent notes
                val, big = self._records["val"], self._records["big"]
                self.notes = self.notes - self.var_notes(self.rank, val, big)
            self.frames = None
        return self._records

    def _make_records(self):
        data, trace, frames = self.data, self.trace, self.frames
        rows = []
        for i in frames["sendrecv"]:
            start, end = frame_body(data, frames["offsets"][i])
            fields = _fields(data, start, end)
            if fields is None:
                return None
            j = int(np.searchsorted(trace.node_id, frames["ids"][i]))
            send = trace.kind[j] == TraceNode.SEND
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
                if len(values) != 1 or values[0][0] not in _VARINT_TYPES or values[0][1] != 0:
                    return None  # another type, or a oneof given twice: parse such files
                n, _, a, b = values[0]
                role = _TAG if name == 2 else _MINE if (name == 0) == send else _THEIRS
                rows.append((a, b - a, name, role, n, j))
        cols = np.asarray(rows, np.int64).reshape(-1, 6)
        rec = dict(zip(("start", "len", "name", "role", "vtype", "index"), cols.T))
        rec["val"], rec["big"], canon = _decode(self.buf, rec["start"], rec["len"],
                                                rec["vtype"])
        kept = len(frames["sendrecv"])
        if (not canon.all() or not (np.diff(rec["start"]) > 0).all()
                or np.count_nonzero(rec["role"] == _THEIRS) != kept
                or np.count_nonzero(rec["role"] == _TAG) != kept):
            return None
        if not self._same(rec["val"], rec["big"], rec):
            return None
        rec["combos"] = sorted(set(zip(rec["name"].tolist(), rec["vtype"].tolist())))
        return rec

    def _same(self, val, big, rec) -> bool:
        """Whether the decoded values are the trace's peers and tags (a self-check)."""
        peer, tag = self.values(val, rec)
        return (not big[rec["role"] != _MINE].any() and np.array_equal(peer, self.trace.peer)
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
        """The notes the records' values make on ``rank`` (`chakra_import._read_rank`'s
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


class Replicas:
    """The templates of one `read_chakra` call, and the notes and skip counters it adds to
    (``notes``: its ``_Notes``; ``skipped``: reason -> count)."""

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
        if len(same) >= MAX_TEMPLATES_PER_LENGTH:
            return
        index = list(self.groups.index)
        members = [frozenset(index[g].ranks) for g in
                   np.unique(trace.group[trace.kind == TraceNode.COLLECTIVE]).tolist()
                   if index[g].ranks]
        same.insert(0, _Template(rank, data, trace, frames, self.notes.counts - before[0],
                                 self.skipped - before[1], members))

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
        if diff.size:
            starts = rec["start"]
            k = np.searchsorted(starts, diff, side="right") - 1
            inside = (k >= 0) & (diff - starts[np.maximum(k, 0)]
                                 < np.minimum(rec["len"][np.maximum(k, 0)], 9))
            if not inside.all() or ((a[diff] ^ b[diff]) & 0x80).any():
                return None  # elsewhere, or a varint of another length / its 10th byte
            changed = np.unique(k)
            v2, big2, canon = _decode(b, starts[changed], rec["len"][changed],
                                      rec["vtype"][changed])
            if not canon.all():
                return None
            val, big = val.copy(), big.copy()
            val[changed], big[changed] = v2, big2
        role = rec["role"]
        t = role == _THEIRS
        if (big[t].any() or (val[t] < 0).any() or (val[t] >= self.num_ranks).any()
                or (val[t] == rank).any()):
            return None  # a bad peer: the full reading names it
        t = role == _TAG
        if big[t].any() or (val[t] < -2**31).any() or (val[t] > 2**32 - 1).any():
            return None
        if not all(rank in m for m in template.members):
            return None
        notes = template.notes + template.var_notes(rank, val, big)
        counts = self.notes.counts
        if any(key not in counts for key in notes):
            return None  # a note new to the set: the full reading orders it
        counts.update(notes)
        self.skipped.update(template.skipped)
        peer, tag = template.values(val, rec)
        t = template.trace
        return RankTrace(
            rank=rank, path=path, node_id=t.node_id.copy(), name=t.name, kind=t.kind.copy(),
            duration_ns=t.duration_ns.copy(), collective=t.collective.copy(),
            size_bytes=t.size_bytes.copy(), group=t.group.copy(), peer=peer, tag=tag,
            dep_ptr=t.dep_ptr.copy(), deps=t.deps.copy())
