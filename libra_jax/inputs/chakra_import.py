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
the set reads in 1.9-2.3 s (1.9-2.25 CPU s; 26-42 s when every file was parsed node by
node in Python): the 4 stages' files parsed in full take ~0.9 s of it. A full parse
(`chakra_nodes.read_rank`) checks the file with one protobuf call for all its nodes, reads
every node's id, name, type, duration and counts off the wire with numpy, settles the usual
compute nodes together and runs the rules in Python only over the others (a file written in
an unusual way goes node by node): 2.1-2.2 µs per node on the benchmark's stage files
(3.6-3.7 µs before the numpy pass, ~6 µs for the first, all-Python reader).
"""

from __future__ import annotations

import collections
import gzip
import logging
import os
import re
import zlib

from libra_jax.inputs.chakra_graph import match_sends
from libra_jax.inputs.chakra_groups import Groups, Notes, load_comm_groups
from libra_jax.inputs.chakra_nodes import read_rank
from libra_jax.inputs.chakra_replica import Replicas
from libra_jax.inputs.limits import LIMITS, as_int, as_path
from libra_jax.types import LibraInputError, TraceSet, show

log = logging.getLogger(__name__)

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
_RANK_FILE = re.compile(r"^(0|[1-9][0-9]*)\.et(\.gz)?$")


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
    table, source = load_comm_groups(comm_groups)
    notes = Notes()
    skipped: collections.Counter = collections.Counter()
    groups = Groups(table, source, len(paths), num_dims, notes)
    copies = Replicas(len(paths), groups, notes, skipped) if replicas else None
    traces = []
    for r, p in enumerate(paths):
        data = _read_bytes(p)
        trace = copies.trace(r, p, data) if copies else None
        if trace is None:
            before = copies.snapshot() if copies else None
            frames = {} if copies else None
            trace = read_rank(r, p, data, len(paths), cpu_ops, groups, notes, skipped,
                              frames)
            if copies:
                copies.add(r, data, trace, frames, before)
        traces.append(trace)
    match_sends(traces)
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
