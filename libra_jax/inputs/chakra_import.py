"""Chakra trace sets in: :func:`read_chakra` reads ``<prefix>.<rank>.et`` (or ``.et.gz``) of
every rank, and the communicator groups of ASTRA-sim's ``--comm-group-configuration`` JSON,
into a :class:`~libra_jax.types.TraceSet` (one `RankTrace` of parallel arrays per rank).

The rules follow what ASTRA-sim 2.x (c459ab6, the shared build) does with a trace: its
workload layer (``astra-sim/workload/Workload.cc``, ``HardwareResource.cc``), its Chakra
feeder (``extern/graph_frontend/chakra/src/feeder/et_feeder*.cpp``), its communicator
groups (``system/CommunicatorGroup.cc``, ``Sys::generate_*``) and the analytical network's
send / receive matching (``network_frontend/analytical/common``). Where the simulator
misreads a trace silently (hangs, reads 0, loses a node), the reader either follows a rule
stated in a note (logged, and kept in ``TraceSet.notes``) or refuses the trace with a
:class:`~libra_jax.types.LibraInputError` naming the file, the node id and what is wrong.
Claims marked (run) were checked by running the shared build's congestion-unaware binary
on a 4-NPU trace.

**Files.** The ranks are 0..R-1, R the number of rank files: a gap (ranks 0, 1 and 3) is an
error naming the missing file, as is a rank with both ``.et`` and ``.et.gz``. Each file
(gzip or not, at most ``LIMITS.max_file_mb`` after decompression) is Chakra's framing: every
message preceded by its length as a varint. The first message is a ``GlobalMetadata``; a
file of the 2023 format has none and starts with a node, recognised by its fields on the
wire: a metadata record has a version string (field 1, length-delimited, where a node has
its id as a varint) or only fields 1 and 2, both length-delimited (a metadata record with
fields of a later Chakra still has its version). ASTRA-sim's feeder reads that first node
as the metadata and loses it; here it is kept, with a note.

**Nodes** (attribute names and the types ASTRA-sim reads them as):

* ``COMP_NODE`` -> ``TraceNode.COMPUTE``, ``duration_ns = duration_micros * 1000``. With
  ``duration_micros`` 0 the node is *invalid* if ``num_ops`` (int64) is 0 or absent
  (ASTRA-sim skips it; it reads an absent ``num_ops`` uninitialised: a note counts those)
  and takes 1 ns otherwise (ASTRA-sim's replay of a 0 µs node).
* ``COMM_COLL_NODE`` -> ``TraceNode.COLLECTIVE``: ``comm_type`` (int64) ALL_REDUCE,
  REDUCE_SCATTER, ALL_GATHER and ALL_TO_ALL map to the `Collective` codes, ``comm_size``
  (int64, bytes; required; 0 is kept, ASTRA-sim runs it (run)) to ``size_bytes``.
  BROADCAST is refused (ASTRA-sim does not simulate it: it waits the node's recorded
  ``duration_micros`` on the communication slot, which says nothing about the network);
  REDUCE, GATHER, SCATTER, REDUCE_SCATTER_BLOCK and BARRIER are refused (ASTRA-sim issues
  nothing for them and that rank never finishes); so is a missing ``comm_type`` (ASTRA-sim
  reads it uninitialised).
* ``COMM_SEND_NODE`` / ``COMM_RECV_NODE`` -> ``SEND`` / ``RECV``: ``peer`` = ``comm_dst`` /
  ``comm_src`` (int32), ``tag`` = ``comm_tag`` (int32; -2**31 <= tag < 2**32, a negative
  tag read as ASTRA-sim reads it, as an unsigned 32-bit integer, with a note),
  ``size_bytes`` = ``comm_size``, all required. The other end's field (a send's
  ``comm_src``, a receive's ``comm_dst``) is not used, as ASTRA-sim does not use it (a note
  counts those that do not name the node's own rank). Across the set, the sends from s to
  d with tag t and size b must be as many as the receives on d from s with t and b (the
  analytical network matches them by that key, the n-th send with the n-th receive). A peer
  outside [0, R) or equal to the node's own rank is refused, and so is a message of 0 bytes
  (the analytical network aborts on it (run)).
* ``is_cpu_op`` (bool) nodes: host-side work. ASTRA-sim times a CPU op of any type but
  MEM_LOAD / MEM_STORE (a CPU-op collective included) as compute, by its
  ``duration_micros``, one at a time on a CPU slot beside the GPU's compute.
  ``cpu_ops="skip"`` (default) skips them; ``cpu_ops="compute"`` keeps them as COMPUTE
  nodes by the COMP_NODE rule (a note says how many, and that a COMPUTE node does not
  express the separate CPU slot).
* ``INVALID_NODE`` nodes are skipped (ASTRA-sim does); ``METADATA_NODE`` nodes carry no work
  and are skipped (ASTRA-sim never issues them, so their dependants never run and the rank
  never finishes (run)).
* ``MEM_LOAD_NODE`` / ``MEM_STORE_NODE`` are refused: ASTRA-sim times them with its
  remote-memory backend (``tensor_size`` bytes), which libra_jax does not model, and
  skipping them would drop that time. A node type that is not a Chakra ``NodeType`` is
  refused.

A *skipped* node is removed and its dependants inherit its dependencies (ASTRA-sim frees the
children of a node it skips as soon as the node is issued); skips are counted by reason in
``TraceSet.skipped`` (``cpu_op``, ``invalid_compute``, ``invalid_node``, ``metadata_node``)
and logged.

**Attributes** may be stored in any integer type (int32/64, uint32/64, sint32/64,
fixed32/64, sfixed32/64) or as a float / double with an integral value: the value is read
whatever the type. ASTRA-sim reads one type per attribute and takes any other as 0 (an
``is_cpu_op`` of int32 1 runs as a GPU op (run)); a note counts the values it would misread
(those other than 0; every ``pg_name`` not stored as a string, which ASTRA-sim reads as no
group). ``is_cpu_op`` may be a bool or an integer 0 / 1; ``pg_name`` a string or an
integer. An attribute the reader uses that is given twice on a node is refused (ASTRA-sim
keeps the last of some and the first of others). Sizes must be integers in [0, 1e18] bytes
(``LIMITS.max_bytes``), times at most 1e18 ns (``LIMITS.max_ns``).

**Dependencies** are ``data_deps`` only: the feeder ignores ``ctrl_deps`` (a note counts
them). Every dependency must name a node of the same file, ids must be unique, and a
dependency cycle is refused, naming a node on it. A dependency listed twice on one node is
counted once, with a note (ASTRA-sim drops one copy per finished parent, so it never issues
that node (run)).

**Groups** of collectives (`CommGroup`, deduplicated in ``TraceSet.groups``):

* ``involved_dim`` (bool_list; another type is refused, as ASTRA-sim exits on it) ->
  ``CommGroup(name="involved_dim=101", involved=(True, False, True))``. With ``num_dims``
  (the network's dimension count) a shorter list is refused (ASTRA-sim reads past its end:
  it hangs on some NPUs and still exits 0); a longer one is trimmed if its extra entries
  are all False (a note), refused otherwise; a list with no True entry is refused. Without
  ``num_dims`` the list is kept as given.
* no ``involved_dim`` and no ``pg_name``: every dimension is involved (ASTRA-sim's rule: it
  assumes 4 dimensions, all involved, and reads past them on a network of more; a note
  counts them); needs ``num_dims``.
* ``pg_name`` (a communicator-group id: ASTRA-sim reads it, and the JSON's keys, as integers,
  and requires ids > 0) -> the group of that id in the ``comm_groups`` JSON ``{"<id>":
  [npus...]}``, named by the id as an integer (``"01"`` is ``"1"``). A group of all R NPUs
  is, as in ASTRA-sim (``CommunicatorGroup::get_collective_plan`` compares the count with
  the machine's NPUs, which the network must make equal to R), the ordinary collective over
  every dimension: ``CommGroup(name=pg_name, involved=(True,) * num_dims)`` (needs
  ``num_dims``; a note). Any other group is a flat ring over the listed NPUs in the listed
  order: ``CommGroup(name=pg_name, ranks=...)``. Either way the node's ``involved_dim`` is
  ignored, as ASTRA-sim ignores it (a note counts them). Refused: a ``pg_name`` and no JSON,
  a ``pg_name`` missing from the JSON, a group with a rank outside [0, R) or twice, a group
  of one NPU (ASTRA-sim never finishes its collective and exits 0 (run)), a group that does
  not list the rank whose node uses it. ``pg_name`` on a send or receive is ignored, as
  ASTRA-sim ignores it there.

**Speed.** A rank file that differs from one already parsed (same length) only in the
values of its sends' and receives' ``comm_src`` / ``comm_dst`` / ``comm_tag`` and of its
collectives' ``pg_name`` (the data-parallel replicas of a pipeline stage, the
tensor-parallel ranks) is not parsed:
`libra_jax.inputs.chakra_replica` compares the bytes, decodes the values that differ and
runs every check that depends on them or on the rank, so the result (errors and notes
included) is that of parsing it; ``replicas=False`` parses every file. On the 64-rank
benchmark (``experiments/bench_trace.py``: 6.5e6 nodes, 4 distinct stages of 16 replicas)
the set reads in 2.8-3.0 s of wall, 2.6-2.75 CPU s (2.2-2.35e6 nodes/s; 26-42 s when every
file was parsed): the 4 stages' files parsed in full take ~2.1 s of it. Every other file: all nodes of a file are parsed by one protobuf call (the framed messages become
one ``NodeList`` message); one Python pass over the nodes reads their fields, and the
arrays are built with numpy once per rank. Measured (Python 3.11, protobuf's upb backend)
on 2 ranks of 1.2e5 nodes each (half compute, a quarter all-reduces with ``involved_dim``,
a quarter sends / receives, each node depending on the one before): 1.5-1.65e5 nodes per
CPU-second, i.e. that many nodes/s on an idle core (0.7-1.2e5/s of wall time while other
jobs held both cores of the shared 2-core machine). About 6 µs per node: 0.7 µs reading the
node's fields, 1.4 µs its attributes, the rest the rules and checks.
"""

from __future__ import annotations

import array
import collections
import gzip
import json
import logging
import math
import os
import re
import zlib
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from libra_jax.inputs.chakra_replica import Replicas
from libra_jax.inputs.chakra_schema import (
    METADATA_WIRE_FIELDS,
    CollectiveCommType,
    FramingError,
    GlobalMetadata,
    Node,
    NodeList,
    NodeType,
    frame_body,
    frames_as_node_list,
    split_frames,
    top_level_fields,
)
from libra_jax.inputs.limits import LIMITS, as_int, as_path
from libra_jax.inputs.reading import read_text
from libra_jax.types import (
    Collective,
    CommGroup,
    LibraInputError,
    RankTrace,
    TraceNode,
    TraceSet,
    clip,
    show,
)

log = logging.getLogger(__name__)

#: ``comm_type`` -> `Collective` for the collectives ASTRA-sim simulates.
COLLECTIVE_OF = {
    CollectiveCommType.ALL_REDUCE: Collective.ALLREDUCE,
    CollectiveCommType.REDUCE_SCATTER: Collective.REDUCESCATTER,
    CollectiveCommType.ALL_GATHER: Collective.ALLGATHER,
    CollectiveCommType.ALL_TO_ALL: Collective.ALLTOALL,
}

#: Why the other collectives are refused.
_REFUSED_COLLECTIVE = {
    CollectiveCommType.BROADCAST:
        "ASTRA-sim does not simulate a broadcast (it waits the node's recorded "
        "duration_micros, which says nothing about the network)",
}
_NEVER_ISSUED = ("ASTRA-sim issues nothing for this collective type, so the rank never "
                 "finishes")

#: The attributes read, with the value type ASTRA-sim's feeder reads each as.
ASTRA_TYPE = {
    "is_cpu_op": "bool_val", "num_ops": "int64_val", "comm_type": "int64_val",
    "comm_size": "int64_val", "comm_src": "int32_val", "comm_dst": "int32_val",
    "comm_tag": "int32_val", "pg_name": "string_val", "involved_dim": "bool_list",
}
_INT_FIELDS = frozenset(f"{t}_val" for t in (
    "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
    "sfixed32", "sfixed64"))
_FLOAT_FIELDS = frozenset(("double_val", "float_val"))

#: Skip reasons (keys of ``TraceSet.skipped``).
SKIP_REASONS = {
    "cpu_op": "CPU ops (is_cpu_op, host-side work) skipped (cpu_ops='skip')",
    "invalid_compute": "compute nodes with 0 µs and num_ops 0 (or none) skipped as "
                       "invalid, as ASTRA-sim does",
    "invalid_node": "INVALID_NODE nodes skipped, as ASTRA-sim does",
    "metadata_node": "METADATA_NODE nodes skipped (they carry no work; ASTRA-sim never "
                     "issues them, so their dependants would never run)",
}

CPU_OPS = ("skip", "compute")
_MAX_TAG = 2**32 - 1
#: What ASTRA-sim reads an attribute stored in another type as (the oneof's default).
_ASTRA_DEFAULT = {"is_cpu_op": "False", "pg_name": "an empty name, i.e. no group"}
_MAX_DURATION_US = int(LIMITS.max_ns // 1000)
_MAX_ID = 2**63 - 1
_RANK_FILE = re.compile(r"^(0|[1-9][0-9]*)\.et(\.gz)?$")

# Node kinds while reading (before the TraceNode codes): kept kinds are TraceNode values.
_SKIP = -1
# Node types as plain ints (comparing with an IntEnum member costs an attribute lookup).
_COMP, _COLL, _SEND = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE), \
    int(NodeType.COMM_SEND_NODE)
_INVALID, _METADATA = int(NodeType.INVALID_NODE), int(NodeType.METADATA_NODE)
_MEM_TYPES = frozenset((int(NodeType.MEM_LOAD_NODE), int(NodeType.MEM_STORE_NODE)))
_KNOWN_TYPES = frozenset(int(t) for t in NodeType)


class _Notes:
    """Counts of the rules applied over the whole set, rendered as one sentence each."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()
        self.text: dict = {}

    def add(self, key, text: str, count: int = 1) -> None:
        self.counts[key] += count
        self.text.setdefault(key, text)

    def sentences(self) -> list[str]:
        return [self.text[k].format(n=n) for k, n in self.counts.items() if n]


# --------------------------------------------------------------------------- files
def _rank_files(prefix: str) -> list[str]:
    """The rank files of ``prefix``, rank order; a gap or an ambiguity raises."""
    folder, stem = os.path.split(prefix)
    if not stem:
        raise LibraInputError(
            f"chakra prefix = {show(prefix)}: expected <folder>/<stem> of files "
            f"<stem>.<rank>.et, not a folder.")
    try:
        names = os.listdir(folder or ".")
    except OSError as e:
        raise LibraInputError(
            f"chakra prefix = {show(prefix)}: cannot list the folder "
            f"{folder or '.'!r} ({e.strerror or e}).") from None
    found: dict[int, list[str]] = {}
    head = stem + "."
    for name in names:
        if name.startswith(head):
            m = _RANK_FILE.match(name[len(head):])
            if m:
                found.setdefault(int(m.group(1)), []).append(os.path.join(folder, name))
    if not found:
        raise LibraInputError(
            f"chakra prefix = {show(prefix)}: no trace files {prefix}.<rank>.et or "
            f"{prefix}.<rank>.et.gz (expected {prefix}.0.et for rank 0).")
    num = max(found) + 1
    if num > LIMITS.max_npus:
        raise LibraInputError(
            f"chakra prefix = {show(prefix)}: rank files up to {num - 1}; at most "
            f"{LIMITS.max_npus:g} NPUs are supported.")
    if len(found) != num:
        missing = next(r for r in range(num) if r not in found)
        raise LibraInputError(
            f"{prefix}.{missing}.et: missing (neither it nor {prefix}.{missing}.et.gz "
            f"exists) but {len(found)} rank files up to {prefix}.{num - 1}.et* do; a trace "
            f"set needs one file for every rank 0..R-1.")
    paths = []
    for r in range(num):
        if len(found[r]) > 1:
            raise LibraInputError(
                f"{prefix}.{r}.et: both it and {prefix}.{r}.et.gz exist; keep one.")
        paths.append(found[r][0])
    return paths


def _read_bytes(path: str) -> bytes:
    """A trace file's bytes (gunzipped for ``.gz``), at most the file-size limit."""
    limit = LIMITS.file_bytes()
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(limit + 1)
                if len(data) <= limit:
                    f.read(1)  # at the end: gzip checks the stream's end marker here
        else:
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except OSError as e:  # gzip.BadGzipFile is an OSError
        raise LibraInputError(
            f"{path}: cannot read the Chakra trace ({getattr(e, 'strerror', None) or e})."
        ) from None
    except (EOFError, zlib.error) as e:
        raise LibraInputError(
            f"{path}: corrupt or truncated gzip file ({e}).") from None
    if len(data) > limit:
        raise LibraInputError(
            f"{path}: the Chakra trace is larger than the {limit / 1e6:g} MB limit for "
            f"input files{' (decompressed)' if path.endswith('.gz') else ''}; set "
            f"LIBRA_JAX_MAX_FILE_MB to read larger ones.")
    if not data:
        raise LibraInputError(
            f"{path}: the Chakra trace is empty; expected a GlobalMetadata message and "
            f"nodes.")
    return data


def _parse_nodes(data: bytes, path: str, notes: _Notes):
    """The ``Node`` messages of one file (a repeated field of a parsed `NodeList`) and the
    byte offsets of their frames."""
    try:
        offsets = split_frames(data)
    except FramingError as e:
        raise LibraInputError(
            f"{path}: corrupt or truncated Chakra trace: message {e.index} at byte {e.pos}: "
            f"{e.detail}.") from None
    start, end = frame_body(data, 0)
    fields = top_level_fields(data[start:end])
    if fields is None:
        raise LibraInputError(
            f"{path}: corrupt Chakra trace (not protobuf): the first message ({end - start} "
            f"bytes from byte {start}) is not protobuf wire data.")
    if fields <= METADATA_WIRE_FIELDS or (1, 2) in fields:  # (1, 2): a version string
        try:
            GlobalMetadata.FromString(data[start:end])
        except DecodeError as e:
            raise LibraInputError(
                f"{path}: corrupt Chakra trace: the GlobalMetadata (byte 0) does not parse "
                f"({e}).") from None
        first = 1
    else:
        first = 0
        notes.add("format2023",
                  "{n} file(s) of the 2023 format (no GlobalMetadata record; the first "
                  "message is a node): their first node kept (ASTRA-sim's feeder reads it "
                  "as the metadata and loses it).")
    try:
        return NodeList.FromString(frames_as_node_list(data, offsets[first:])).nodes, \
            offsets[first:]
    except DecodeError:
        pass
    for k in range(first, len(offsets)):
        start, end = frame_body(data, offsets[k])
        try:
            Node.FromString(data[start:end])
        except DecodeError as e:
            raise LibraInputError(
                f"{path}: corrupt Chakra trace: message {k} (node number {k - first} in file "
                f"order, byte {offsets[k]}) does not parse as a Node ({e}).") from None
    raise LibraInputError(f"{path}: corrupt Chakra trace: the nodes do not parse.")


# --------------------------------------------------------------------------- values
class _Where:
    """Names a node in messages: ``<file>: node <id> (<name>)``."""

    __slots__ = ("path", "node")

    def __init__(self, path: str, node):
        self.path, self.node = path, node

    def __str__(self) -> str:
        return f"{self.path}: node {self.node.id} ({clip(self.node.name)})"


def _number(attr, where, notes: _Notes, *, lo: int, hi: int, what: str = "",
            which: str | None = None) -> int:
    """An integer attribute's value whatever its numeric type, in [lo, hi] (``which``: its
    value field, if the caller has it)."""
    name = attr.name
    if which is None:
        which = attr.WhichOneof("value")
    if which == ASTRA_TYPE[name]:  # the usual case first
        value = getattr(attr, which)
        if lo <= value <= hi:
            return value
    if which in _INT_FIELDS:
        value = getattr(attr, which)
    elif which in _FLOAT_FIELDS:
        x = getattr(attr, which)
        if not (math.isfinite(x) and float(x).is_integer()):
            raise LibraInputError(
                f"{where}: attribute {name} = {show(x)} ({which}): expected an "
                f"integer{what}.")
        value = int(x)
    else:
        raise LibraInputError(
            f"{where}: attribute {name} has {'no value' if which is None else which}: "
            f"expected an integer{what}.")
    if which != ASTRA_TYPE[name] and (value != 0 or name == "pg_name"):
        notes.add(("type", name, which),
                  f"{{n}} {name} attribute(s) stored as {which}: read as stored (ASTRA-sim "
                  f"reads {ASTRA_TYPE[name]} and would take them as "
                  f"{_ASTRA_DEFAULT.get(name, '0')}).")
    if not lo <= value <= hi:
        raise LibraInputError(
            f"{where}: attribute {name} = {show(value)}: expected an integer in "
            f"[{lo}, {hi:g}]{what}.")
    return int(value)


def _bool(attr, which, where, notes: _Notes) -> bool:
    if which == "bool_val":
        return attr.bool_val
    value = _number(attr, where, notes, lo=0, hi=1, what=" (or a bool)", which=which)
    return bool(value)


def _pg_name(attr, which, where, notes: _Notes) -> str:
    if which == "string_val":
        return attr.string_val
    value = _number(attr, where, notes, lo=-2**63, hi=2**64, which=which)
    return str(value)


def _check_repeated(attr_list, path: str, node) -> None:
    """Raises if an attribute the reader uses is given twice on the node."""
    seen = set()
    for a in attr_list:
        if a.name in ASTRA_TYPE:
            if a.name in seen:
                raise LibraInputError(
                    f"{_Where(path, node)}: attribute {a.name} is given twice.")
            seen.add(a.name)


# --------------------------------------------------------------------------- groups
class _Groups:
    """The set's groups: dedup and checks (the JSON's groups checked once each)."""

    def __init__(self, comm_groups, source: str, num_ranks: int, num_dims: int | None,
                 notes: _Notes):
        self.json, self.source = comm_groups, source
        self.num_ranks, self.num_dims, self.notes = num_ranks, num_dims, notes
        self.index: dict[CommGroup, int] = {}
        self.pg_cache: dict[str, tuple[CommGroup, frozenset | None]] = {}
        self.involved_cache: dict[tuple, tuple[int, Any]] = {}

    def add(self, group: CommGroup) -> int:
        k = self.index.get(group)
        if k is None:
            k = self.index[group] = len(self.index)
        return k

    def _need_dims(self, where, why: str) -> int:
        if self.num_dims is None:
            raise LibraInputError(
                f"{where}: {why}, which ASTRA-sim runs over every network dimension; pass "
                f"num_dims (the network's dimension count) to read it.")
        return self.num_dims

    def involved(self, values: tuple, where) -> int:
        hit = self.involved_cache.get(values)
        if hit is not None:
            k, note = hit
            if note is not None:
                self.notes.add(note, "")
            return k
        k, note = self._involved(list(values), where)
        self.involved_cache[values] = k, note
        return k

    def _involved(self, values: list, where) -> tuple[int, Any]:
        n = len(values)
        note = None
        if self.num_dims is not None and n != self.num_dims:
            d = self.num_dims
            if n < d:
                raise LibraInputError(
                    f"{where}: involved_dim = {show(values)} has {n} entries for a "
                    f"{d}-dimension network (ASTRA-sim reads past its end, hangs on some "
                    f"NPUs and still exits 0); give one entry per network dimension.")
            if any(values[d:]):
                raise LibraInputError(
                    f"{where}: involved_dim = {show(values)} has {n} entries and involves "
                    f"dimension {values.index(True, d)}, but the network has {d} "
                    f"dimensions.")
            note = ("trim", n, d)
            self.notes.add(note,
                           f"{{n}} involved_dim list(s) of {n} entries for a {d}-dimension "
                           f"network: the extra entries are all False and were dropped.")
            values = values[:d]
        if not any(values):
            raise LibraInputError(
                f"{where}: involved_dim = {show(values)} involves no dimension; a "
                f"collective needs at least one.")
        bits = "".join("1" if v else "0" for v in values)
        return self.add(CommGroup(name=f"involved_dim={bits}", involved=tuple(values))), note

    def all_dims(self, where) -> int:
        d = self._need_dims(where, "the collective has neither involved_dim nor pg_name")
        beyond = (f"; for this {d}-dimension network it would read past them"
                  if d > 4 else "")
        self.notes.add("all_dims",
                       f"{{n}} collective(s) with neither involved_dim nor pg_name: every "
                       f"dimension involved (ASTRA-sim's rule; it assumes 4 dimensions, all "
                       f"involved{beyond}).")
        return self.add(CommGroup(name="involved_dim=" + "1" * d, involved=(True,) * d))

    def pg(self, name: str, rank: int, where) -> int:
        cached = self.pg_cache.get(name)
        if cached is None:
            cached = self.pg_cache[name] = self._pg_group(name, where)
        group, members = cached
        if members is None:
            self.notes.add(("whole", name),
                           f"pg_name {name!r} is a group of all {self.num_ranks} NPUs: run "
                           f"as the ordinary collective over every dimension, as ASTRA-sim "
                           f"does ({{n}} node(s)).")
        elif rank not in members:
            raise LibraInputError(
                f"{where}: pg_name {name!r}: group {list(group.ranks) if group.ranks else ''}"
                f" of {self.source} does not list rank {rank}, which runs this collective.")
        return self.add(group)

    def lookup(self, name: str) -> tuple[CommGroup, frozenset | None] | None:
        """``pg(name, ...)``'s group and its members (None: all NPUs), or None where `pg`
        would refuse the name; adds no group and no note."""
        cached = self.pg_cache.get(name)
        if cached is None:
            try:
                cached = self.pg_cache[name] = self._pg_group(name, "")
            except LibraInputError:
                return None
        return cached

    def _pg_group(self, name: str, where) -> tuple[CommGroup, frozenset | None]:
        if self.json is None:
            raise LibraInputError(
                f"{where}: pg_name = {name!r} but no comm_groups JSON was given (ASTRA-sim's "
                f"--comm-group-configuration); pass it to read this trace.")
        try:
            gid = int(name.strip())
        except ValueError:
            raise LibraInputError(
                f"{where}: pg_name = {show(name)}: expected an integer group id (ASTRA-sim "
                f"reads pg_name as the id of a group of {self.source}).") from None
        if gid not in self.json:
            raise LibraInputError(
                f"{where}: pg_name = {name!r}: no group {gid} in {self.source} (it has "
                f"{show(sorted(self.json))}).")
        ranks, key = self.json[gid]
        for npu in ranks:
            if not 0 <= npu < self.num_ranks:
                raise LibraInputError(
                    f"{where}: pg_name = {name!r}: group {key!r} of {self.source} lists NPU "
                    f"{npu}, outside the trace set's ranks [0, {self.num_ranks}).")
        if len(ranks) == 1 < self.num_ranks:
            raise LibraInputError(
                f"{where}: pg_name = {name!r}: group {key!r} of {self.source} lists one NPU; "
                f"ASTRA-sim never finishes a collective over a group of one NPU (the shared "
                f"build exits 0 with no NPU finished); drop the collective or list its "
                f"group's NPUs.")
        if len(set(ranks)) != len(ranks):
            dup = next(r for r, c in collections.Counter(ranks).items() if c > 1)
            raise LibraInputError(
                f"{where}: pg_name = {name!r}: group {key!r} of {self.source} lists NPU "
                f"{dup} more than once.")
        label = str(gid)  # "01" and "1" name one group, as ASTRA-sim reads them
        if len(ranks) == self.num_ranks:
            d = self._need_dims(where, f"pg_name {name!r} is a group of all "
                                       f"{self.num_ranks} NPUs")
            return CommGroup(name=label, involved=(True,) * d), None
        return CommGroup(name=label, ranks=tuple(ranks)), frozenset(ranks)


def _load_comm_groups(comm_groups) -> tuple[dict | None, str]:
    """``{id: (ranks, key)}`` from the JSON file or dict, its structure checked."""
    if comm_groups is None:
        return None, "the comm_groups JSON"
    if isinstance(comm_groups, dict):
        raw, source = comm_groups, "the comm_groups mapping"
    else:
        path = as_path(comm_groups, "comm_groups")
        source = path
        text = read_text(path, "communicator-group JSON")

        def pairs(items):
            seen = {}
            for k, v in items:
                if k in seen:
                    raise LibraInputError(f"{path}: group {k!r} is given twice.")
                seen[k] = v
            return seen

        try:
            raw = json.loads(text, object_pairs_hook=pairs)
        except json.JSONDecodeError as e:
            raise LibraInputError(
                f"{path}, line {e.lineno}: not valid JSON ({e.msg}).") from None
        except RecursionError:
            raise LibraInputError(f"{path}: the JSON is nested too deeply.") from None
        if not isinstance(raw, dict):
            raise LibraInputError(
                f"{path}: expected a JSON object {{\"<group id>\": [NPU ids...]}}, got "
                f"{type(raw).__name__}.")
    out = {}
    for key, ranks in raw.items():
        try:
            gid = int(str(key).strip())
        except ValueError:
            gid = None
        if gid is None or gid <= 0:
            raise LibraInputError(
                f"{source}: group id {show(key)}: expected an integer > 0 (ASTRA-sim reads "
                f"the ids as integers and requires them > 0).")
        if gid in out:
            raise LibraInputError(f"{source}: group id {gid} is given twice.")
        if not isinstance(ranks, (list, tuple)) or not ranks:
            raise LibraInputError(
                f"{source}: group {key!r} = {show(ranks)}: expected a non-empty list of NPU "
                f"ids.")
        out[gid] = ([as_int(r, f"{source}: group {key!r}[{i}]", 0,
                            LIMITS.max_npus - 1) for i, r in enumerate(ranks)], str(key))
    return out, source


# --------------------------------------------------------------------------- one rank
def _read_rank(rank: int, path: str, data: bytes, num_ranks: int, cpu_ops: str,
               groups: _Groups, notes: _Notes, skipped: collections.Counter,
               frames: dict | None = None) -> RankTrace:
    """One rank's file (its bytes ``data``) as a `RankTrace`: one pass over the nodes applies
    the node rules (module docstring), then `_graph` orders them and resolves the
    dependencies. With ``frames`` (a dict), fills in ``"offsets"``: each node's frame
    offset in ``data``, file order, ``"ids"``: their ids, and ``"kind"``: their kinds
    (`TraceNode`, -1 skipped; what `chakra_replica` needs of a template)."""
    nodes, offsets = _parse_nodes(data, path, notes)
    n = len(nodes)
    ids, ndeps, names, skip_reason = [0] * n, [0] * n, [""] * n, {}
    deps = array.array("Q")  # 8 bytes a dependency, however many there are
    kind, duration_ns, collective = [_SKIP] * n, [0.0] * n, [0] * n
    size_bytes, group, peer, tag = [0] * n, [-1] * n, [-1] * n, [-1] * n
    num_ctrl = 0
    keep_cpu = cpu_ops == "compute"
    comp, coll, send = _COMP, _COLL, _SEND
    known_types, mem_types = _KNOWN_TYPES, _MEM_TYPES
    for i, node in enumerate(nodes):
        ids[i] = node.id
        names[i] = node.name
        dd = node.data_deps
        ndeps[i] = len(dd)
        deps.extend(dd)
        num_ctrl += len(node.ctrl_deps)
        attr_list = node.attr
        attrs = {a.name: a for a in attr_list}
        if len(attrs) != len(attr_list):
            _check_repeated(attr_list, path, node)
        t = node.type
        if t not in known_types:
            raise LibraInputError(
                f"{_Where(path, node)}: node type {t} is not a Chakra NodeType (corrupt "
                f"trace?).")
        if t in mem_types:
            raise LibraInputError(
                f"{_Where(path, node)}: {NodeType(t).name} is not supported: ASTRA-sim times "
                f"it with its remote-memory backend, which libra_jax does not model, and "
                f"skipping it would drop that time.")
        a = attrs.get("is_cpu_op")
        cpu = False
        if a is not None:
            which = a.WhichOneof("value")
            cpu = a.bool_val if which == "bool_val" else _bool(a, which, _Where(path, node), notes)
        if cpu or t == comp:
            if cpu and not keep_cpu:
                skip_reason[i] = "cpu_op"
                continue
            if cpu and t != comp:
                notes.add("cpu_comm", "{n} CPU-op node(s) of a type other than COMP_NODE "
                                      "timed as compute by their duration_micros, as "
                                      "ASTRA-sim does.")
            us = node.duration_micros
            if us > _MAX_DURATION_US:
                raise LibraInputError(
                    f"{_Where(path, node)}: duration_micros = {us}: expected at most "
                    f"{_MAX_DURATION_US:g} µs (LIMITS.max_ns).")
            if us == 0:
                a = attrs.get("num_ops")
                ops = 0 if a is None else _number(a, _Where(path, node),
                                                  notes, lo=-2**63, hi=2**64)
                if a is None:
                    notes.add("no_num_ops", "{n} compute node(s) with 0 µs and no num_ops: "
                                            "read as num_ops 0 (ASTRA-sim reads it "
                                            "uninitialised).")
                if ops == 0:
                    skip_reason[i] = "invalid_compute"
                    continue
                notes.add("one_ns", "{n} compute node(s) with 0 µs and num_ops > 0 timed at "
                                    "1 ns, as ASTRA-sim replays them.")
                duration_ns[i] = 1.0
            else:
                duration_ns[i] = us * 1000.0
            kind[i] = TraceNode.COMPUTE
            if cpu:
                notes.add("cpu_kept", "{n} CPU op(s) kept as COMPUTE nodes (cpu_ops="
                                      "'compute'); ASTRA-sim runs them one at a time on a "
                                      "CPU slot beside the GPU's compute, which a COMPUTE "
                                      "node does not express.")
            continue
        if t == _INVALID:
            skip_reason[i] = "invalid_node"
            continue
        if t == _METADATA:
            skip_reason[i] = "metadata_node"
            continue
        where = _Where(path, node)
        a = attrs.get("comm_size")
        if a is None:
            raise LibraInputError(
                f"{where}: {NodeType(t).name} without comm_size (ASTRA-sim would run it "
                f"with an uninitialised size); give its size in bytes.")
        size_bytes[i] = _number(a, where, notes, lo=0,
                                hi=int(LIMITS.max_bytes), what=" of bytes")
        if t == coll:
            a = attrs.get("comm_type")
            if a is None:
                raise LibraInputError(
                    f"{where}: COMM_COLL_NODE without comm_type (ASTRA-sim would read it "
                    f"uninitialised).")
            code = _number(a, where, notes, lo=-2**63, hi=2**64)
            if code not in COLLECTIVE_OF:
                label = (CollectiveCommType(code).name
                         if code in CollectiveCommType._value2member_map_ else str(code))
                why = _REFUSED_COLLECTIVE.get(code, _NEVER_ISSUED)
                raise LibraInputError(
                    f"{where}: comm_type {label} is not supported: {why}.")
            kind[i] = TraceNode.COLLECTIVE
            collective[i] = COLLECTIVE_OF[code]
            a = attrs.get("pg_name")
            pg = None if a is None else _pg_name(a, a.WhichOneof("value"), where, notes)
            dims = attrs.get("involved_dim")
            if pg:
                if dims is not None:
                    notes.add("pg_dims", "{n} collective(s) with both pg_name and "
                                         "involved_dim: involved_dim ignored, as ASTRA-sim "
                                         "ignores it.")
                group[i] = groups.pg(pg, rank, where)
            elif dims is not None:
                which = dims.WhichOneof("value")
                if which != "bool_list":
                    raise LibraInputError(
                        f"{where}: involved_dim is {which or 'empty'}: expected a bool_list "
                        f"(ASTRA-sim exits on any other type).")
                group[i] = groups.involved(tuple(dims.bool_list.values), where)
            else:
                group[i] = groups.all_dims(where)
            continue
        # send / recv
        if size_bytes[i] == 0:
            raise LibraInputError(
                f"{where}: {NodeType(t).name} of 0 bytes: ASTRA-sim's analytical network "
                f"aborts on a message of 0 bytes (it asserts chunk_size > 0); give its size.")
        mine, theirs = ("comm_src", "comm_dst") if t == send else ("comm_dst", "comm_src")
        a = attrs.get(theirs)
        if a is None:
            raise LibraInputError(
                f"{where}: {NodeType(t).name} without {theirs} (ASTRA-sim would read it "
                f"uninitialised).")
        p = _number(a, where, notes, lo=-2**63, hi=2**64)
        if not 0 <= p < num_ranks or p == rank:
            raise LibraInputError(
                f"{where}: {theirs} = {p}: expected another rank in [0, {num_ranks}) "
                f"(this file is rank {rank}).")
        a = attrs.get(mine)
        if a is not None and _number(a, where, notes,
                                     lo=-2**63, hi=2**64) != rank:
            notes.add(("own", mine), f"{{n}} {NodeType(t).name}(s) whose {mine} is not "
                                     f"their own rank: ignored, as ASTRA-sim ignores it.")
        a = attrs.get("comm_tag")
        if a is None:
            raise LibraInputError(
                f"{where}: {NodeType(t).name} without comm_tag (ASTRA-sim would read it "
                f"uninitialised).")
        value = _number(a, where, notes, lo=-2**31, hi=_MAX_TAG)
        if value < 0:
            notes.add("neg_tag", "{n} negative comm_tag value(s) read as ASTRA-sim reads "
                                 "them, as unsigned 32-bit integers (tag + 2**32).")
            value += 2**32
        tag[i] = value
        peer[i] = p
        kind[i] = TraceNode.SEND if t == send else TraceNode.RECV
    if num_ctrl:
        notes.add("ctrl", "{n} ctrl_deps ignored (ASTRA-sim's feeder follows data_deps "
                          "only).", num_ctrl)
    for reason in skip_reason.values():
        skipped[reason] += 1
    kinds = np.asarray(kind, np.int8)
    if frames is not None:
        frames.update(offsets=offsets, ids=ids, kind=kinds)
    return _graph(rank, path, nodes, np.asarray(ids, np.uint64), names, kinds,
                  np.asarray(duration_ns, np.float64), np.asarray(collective, np.int8),
                  np.asarray(size_bytes, np.float64), np.asarray(group, np.int32),
                  np.asarray(peer, np.int32), np.asarray(tag, np.int64),
                  np.asarray(ndeps, np.int64),
                  np.frombuffer(deps, np.uint64) if deps else np.zeros(0, np.uint64), notes)


def _graph(rank, path, nodes, ids, names, kind, duration_ns, collective, size_bytes, group,
           peer, tag, ndeps, deps, notes: _Notes) -> RankTrace:
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
            f"{_Where(path, nodes[i])}: depends on node {int(deps[j])}, which is not in the "
            f"file.")
    dep_idx = order[pos_c] if deps.size else pos_c.astype(np.int64)  # file index of parent
    # Each (node, parent) once.
    if deps.size:
        pair = np.unique(owner * n + dep_idx)
        if pair.size != deps.size:
            notes.add("dup_dep", "{n} repeated data_deps entries counted once (ASTRA-sim "
                                 "would never issue their nodes).", int(deps.size - pair.size))
        owner, dep_idx = pair // n, pair % n
    # Acyclic: fast when every dep has a smaller id (then id order is a topological order).
    if deps.size and np.any(ids[dep_idx] >= ids[owner]):
        topo = _topological(n, owner, dep_idx, path, nodes)
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
        name=tuple(names[i] for i in kept.tolist()), kind=kind[kept].astype(np.int8),
        duration_ns=duration_ns[kept], collective=collective[kept], size_bytes=size_bytes[kept],
        group=group[kept], peer=peer[kept], tag=tag[kept], dep_ptr=dep_ptr,
        deps=d.astype(np.int32))


def _topological(n, owner, dep_idx, path, nodes) -> np.ndarray:
    """A topological order of the file's nodes (Kahn); a cycle raises, naming a node on it."""
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
    ring = " <- ".join(str(nodes[k].id) for k in cycle[:8])
    raise LibraInputError(
        f"{_Where(path, nodes[i])}: is on a dependency cycle (node ids {ring}"
        f"{' ...' if len(cycle) > 8 else ''} <- {nodes[i].id}); a trace must be acyclic.")


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
def _match_sends(traces: list[RankTrace]) -> None:
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


# --------------------------------------------------------------------------- public API
def read_chakra(prefix: str | os.PathLike, comm_groups=None, *, num_dims: int | None = None,
                cpu_ops: str = "skip", replicas: bool = True) -> TraceSet:
    """Reads a Chakra trace set: ``<prefix>.<rank>.et`` (or ``.et.gz``) for every rank.

    Args:
      prefix: the files' prefix, as given to ASTRA-sim's ``--workload-configuration``.
      comm_groups: ASTRA-sim's ``--comm-group-configuration`` JSON ``{"<id>": [NPU
        ids...]}`` (a path, or the loaded mapping); needed when nodes carry ``pg_name``.
      num_dims: the network's dimension count: checks ``involved_dim`` against it, and is
        needed for collectives that ASTRA-sim runs over every dimension.
      cpu_ops: ``"skip"`` (default) or ``"compute"``: what becomes of ``is_cpu_op`` nodes.
      replicas: True (default): a file that differs from one already parsed only in its
        sends' and receives' peer and tag values and its collectives' pg_name is read
        from that one
        (`libra_jax.inputs.chakra_replica`; the result is the same); False parses every
        file.

    Returns:
      The `TraceSet`; its notes and skip counts are also logged (INFO).

    Raises:
      LibraInputError: a file is missing, unreadable, truncated or not a Chakra trace, or a
        node breaks a rule of this module's docstring (the message names the file, the
        node id and what is wrong).
    """
    prefix = as_path(prefix, "prefix")
    if cpu_ops not in CPU_OPS:
        raise LibraInputError(f"cpu_ops = {show(cpu_ops)}: expected 'skip' or 'compute'.")
    if num_dims is not None:
        num_dims = as_int(num_dims, "num_dims", 1, LIMITS.max_dims)
    if not isinstance(replicas, bool):
        raise LibraInputError(f"replicas = {show(replicas)}: expected True or False.")
    paths = _rank_files(prefix)
    table, source = _load_comm_groups(comm_groups)
    notes = _Notes()
    skipped: collections.Counter = collections.Counter()
    groups = _Groups(table, source, len(paths), num_dims, notes)
    copies = Replicas(len(paths), groups, notes, skipped) if replicas else None
    traces = []
    for r, p in enumerate(paths):
        data = _read_bytes(p)
        trace = copies.trace(r, p, data) if copies else None
        if trace is None:
            before = copies.snapshot() if copies else None
            frames = {} if copies else None
            trace = _read_rank(r, p, data, len(paths), cpu_ops, groups, notes, skipped,
                               frames)
            if copies:
                copies.add(r, data, trace, frames, before)
        traces.append(trace)
    _match_sends(traces)
    lines = notes.sentences()
    for reason, count in skipped.items():
        lines.append(f"{count} {SKIP_REASONS[reason]}.")
    result = TraceSet(prefix=prefix, ranks=tuple(traces), groups=tuple(groups.index),
                      skipped=dict(skipped), notes=tuple(lines))
    log.info("%s: %d ranks, %d nodes kept, %d groups", prefix, len(traces),
             sum(t.num_nodes for t in traces), len(groups.index))
    for line in lines:
        log.info("%s: %s", prefix, line)
    return result
