"""Chakra execution traces (ETs): the per-NPU workload files ASTRA-sim 2.x replays.

ASTRA-sim's ``--workload-configuration=<dir>/wl`` reads ``<dir>/wl.<rank>.et`` for every
NPU ``rank``. :func:`write_traces` writes a training step's dependency graph (a list of
:class:`~libra_jax.types.StepNode`, the same on every NPU) as those files;
:func:`read_trace` reads one back.

**Schema.** The message classes are built at import time from a
``FileDescriptorProto`` written out below by hand (package ``ChakraProtoMsg``, proto3,
file ``et_def.proto``), so neither Chakra nor ``protoc`` is needed. The names and field
numbers were read from ``schema/protobuf/et_def.proto`` of mlcommons/chakra at commit
21585d8f2d65603d791d2121e3d4632351120262 (2026-05-20); that file is byte-identical at
214f2c559c10f897bcc395f8e1502d80d14f1541, the Chakra that ASTRA-sim c459ab6 pins and that
the reference runs in ``shared/reference/astrasim_workload`` used. The descriptor built
here serialises byte for byte as ``protoc`` 3.21's ``--descriptor_set_out`` of that file.
The classes live in a private descriptor pool, so they coexist with a real ``et_def_pb2``
if one is imported.

**File framing** (Chakra's ``protolib.encodeMessage`` / ``decodeMessage``): every message
is preceded by its length in bytes as a protobuf varint (7 bits a byte, least significant
group first, high bit set on all bytes but the last). A file is one ``GlobalMetadata``
(version ``"0.0.4"``) followed by the ``Node`` messages.

**Nodes**, with the attributes the reference generator
(``shared/reference/astrasim_workload/gen_workload_et.py``) wrote and ASTRA-sim accepted,
and the types Chakra's feeder (``src/feeder/et_feeder_node.cpp``) reads them as. Every
node carries ``is_cpu_op`` (bool_val False); dependencies go in ``data_deps`` (the feeder
ignores ``ctrl_deps``).

* compute -> ``COMP_NODE`` with ``duration_micros`` (uint64, whole µs; ASTRA-sim replays
  ``duration_micros * 1000`` ns) and ``num_ops`` (int64_val 0). ASTRA-sim skips a compute
  node with 0 µs *and* ``num_ops`` 0 as invalid, taking no time; the feeder leaves
  ``num_ops`` uninitialised when the attribute is absent, so it is always written. The
  traces are for replay mode (ASTRA-sim's default, roofline off), where ``num_ops`` serves
  only that test.
* all-reduce / reduce-scatter / all-gather / all-to-all -> ``COMM_COLL_NODE`` with
  ``comm_type`` (int64_val, a :class:`CollectiveCommType`), ``comm_size`` (int64_val,
  bytes: the StepNode's ``size_bytes``, already ASTRA-sim's per-NPU buffer) and
  ``involved_dim`` (bool_list, one entry per network dimension).
* send-recv -> a ``COMM_SEND_NODE`` to the next NPU and a ``COMM_RECV_NODE`` from the
  previous NPU of a ring along one dimension (below), each with ``comm_src`` /
  ``comm_dst`` / ``comm_tag`` (int32_val) and ``comm_size`` (int64_val).

**Decisions.**

* *Rounding.* Compute times are rounded half up to whole microseconds
  (``floor((duration_ns + 500) / 1000)``); a node that rounds to 0 µs (any node under
  500 ns) is written with 0 µs and ``num_ops`` 0, which ASTRA-sim skips. Collective sizes
  are rounded half up to whole bytes. :func:`rounding_report` says what the rounding
  changed, for the caller to log.
* *Groups.* ``involved_dim`` can only say which whole dimensions a collective spans, so an
  involved dimension's ``group`` entry must equal that dimension's NPU count (and 1 on the
  others); a group over part of a dimension (it would need ASTRA-sim's ``pg_name``
  communicator groups) is refused rather than silently simulated over the whole dimension.
* *Send-recv.* A shift by one along the ring of the **first involved dimension whose group
  has more than one NPU**; other involved dimensions are ignored (ASTRA-sim sends one
  message per send node). NPU ``rank`` with coordinate ``c`` on that dimension ``d`` (of
  ``n`` NPUs) sends to the NPU with coordinate ``(c + 1) % n`` and receives from the one
  with ``(c - 1) % n``, all other coordinates equal; with a group of ``g`` < ``n`` NPUs
  there (``g`` divides ``n``: pipeline stages over part of a dimension) the ring is the
  NPU's block of ``g`` consecutive coordinates, ``c0 + (c - c0 + 1) % g`` with
  ``c0 = c - c % g``. The tag is the StepNode's index, the
  same on the sender and the receiver and unique per node (ASTRA-sim keeps workload tags
  in [0, 5e8), apart from its collectives' tags).
* *Ids.* ET node ids are consecutive from 0 in StepNode order; a send-recv StepNode takes
  two ids, its send then its recv, so later ids shift by one per earlier send-recv.
  :func:`node_ids` gives each StepNode's ids. Both halves carry the StepNode's deps, and a
  node that depends on a send-recv depends on both halves.

NPU ranks: ``rank = sum_d coord_d * prod_{e<d} n_e`` (dimension 0 fastest), as in
ASTRA-sim's analytical backends.
"""

from __future__ import annotations

import math
import os
import pathlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from google.protobuf import descriptor_pb2  # noqa: F401  (the schema's descriptor types)
from google.protobuf.message import DecodeError

from libra_jax.inputs.limits import (
    LIMITS,
    as_bool,
    as_instance,
    as_int,
    as_list,
    as_path,
    as_real,
    as_str,
    check_npus,
)
from libra_jax.inputs.chakra_schema import (  # noqa: F401  (this module's names for them)
    CLASSES,
    COMM_TYPE,
    FILE_DESCRIPTOR,
    AttributeProto,
    BoolList,
    CollectiveCommType,
    GlobalMetadata,
    IOInfo,
    Node,
    NodeType,
    Tensor,
    encode_message,
    read_varint,
)
from libra_jax.types import Collective, LibraInputError, StepNode, clip, show, show_path

#: ``GlobalMetadata.version`` of the files written (what the reference generator wrote).
ET_VERSION = "0.0.4"


# --------------------------------------------------------------------------- checking
class _Row(NamedTuple):
    """One StepNode, checked and in the units the ET holds."""

    name: str
    kind: str                     # "compute" or "comm"
    deps: tuple[int, ...]         # StepNode indices
    duration_us: int              # compute: rounded, whole µs
    collective: Collective        # comm
    size_bytes: int               # comm: rounded, whole bytes
    involved: tuple[bool, ...]    # comm: [D]
    shift_dim: int                # send-recv: the dimension of the ring shift
    shift_group: int = 0          # send-recv: NPUs of each ring on that dimension


class RoundingReport(NamedTuple):
    """What rounding compute times to whole microseconds changed.

    Attributes:
      total_change_ns: sum over compute nodes of (written - given) time, ns (signed).
      max_abs_change_ns: largest change of one node, ns (at most 500).
      zero_us_nodes: indices of the compute nodes written with 0 µs (ASTRA-sim skips
        them), among them any given with a time > 0 but under 500 ns.
    """

    total_change_ns: float
    max_abs_change_ns: float
    zero_us_nodes: tuple[int, ...]


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5)


def _micros(duration_ns: float) -> int:
    """ns -> whole µs, half up. ``(ns + 500) / 1000`` rather than ``ns / 1000 + 0.5`` so
    that exact halves (1500 ns) stay exact in floating point."""
    return math.floor((duration_ns + 500.0) / 1000.0)


def _where(i: int, node: Any) -> str:
    name = getattr(node, "name", None)
    return f"nodes[{i}] ({clip(name)})" if isinstance(name, str) else f"nodes[{i}]"


def _check_kind(i: int, node: Any) -> tuple[str, Collective | None]:
    """The node's kind and (comm nodes) collective, checked."""
    where = _where(i, node)
    as_instance(node, StepNode, f"nodes[{i}]")
    as_str(node.name, f"{where}.name", empty=True)
    if node.kind not in ("compute", "comm"):
        raise LibraInputError(
            f"{where}.kind = {show(node.kind)}: expected 'compute' or 'comm'.")
    if node.kind == "compute":
        return "compute", None
    code = as_int(node.collective, f"{where}.collective", 0, max(Collective))
    if code == Collective.NONE:
        raise LibraInputError(
            f"{where}.collective = {code}: a comm node needs a collective "
            f"({', '.join(c.name for c in Collective if c != Collective.NONE)}).")
    return "comm", Collective(code)


def _check_nodes(nodes: Sequence[StepNode], npus: tuple[int, ...] | None) -> list[_Row]:
    """Checks every node (comm fields against ``npus`` unless None) -> rows."""
    rows = []
    for i, node in enumerate(as_list(nodes, "nodes", what="a list of StepNode")):
        kind, code = _check_kind(i, node)
        where = _where(i, node)
        deps = []
        for j, dep in enumerate(as_list(node.deps, f"{where}.deps")):
            dep = as_int(dep, f"{where}.deps[{j}]")
            if not 0 <= dep < i:
                earlier = f"0 to {i - 1}" if i else "none: it is the first node"
                raise LibraInputError(
                    f"{where}.deps[{j}] = {dep}: a node can only depend on earlier nodes "
                    f"(indices {earlier}).")
            if dep not in deps:
                deps.append(dep)
        row = _Row(node.name, kind, tuple(deps), 0, Collective.NONE, 0, (), -1)
        if kind == "compute":
            ns = as_real(node.duration_ns, f"{where}.duration_ns", 0.0, LIMITS.max_ns,
                         unit=" ns")
            rows.append(row._replace(duration_us=_micros(ns)))
            continue
        size = as_real(node.size_bytes, f"{where}.size_bytes", 0.0, LIMITS.max_bytes,
                       unit=" bytes")
        row = row._replace(collective=code, size_bytes=_round_half_up(size))
        if npus is not None:
            row = _check_groups(row, node, where, npus)
        rows.append(row)
    return rows


def _check_groups(row: _Row, node: StepNode, where: str, npus: tuple[int, ...]) -> _Row:
    """A comm node's ``involved`` and ``group`` against the network's ``npus``."""
    num_dims = len(npus)
    fields = {}
    for field in ("involved", "group"):
        values = as_list(getattr(node, field), f"{where}.{field}")
        if len(values) != num_dims:
            raise LibraInputError(
                f"{where}.{field} = {show(values)} has {len(values)} entries but the network "
                f"has {num_dims} dimensions; give one per dimension.")
        fields[field] = values
    involved = tuple(as_bool(x, f"{where}.involved[{d}]")
                     for d, x in enumerate(fields["involved"]))
    group = tuple(as_int(x, f"{where}.group[{d}]", 1) for d, x in enumerate(fields["group"]))
    if not any(involved):
        raise LibraInputError(
            f"{where}.involved = {show(list(involved))}: a comm node must involve at least "
            f"one network dimension.")
    p2p = row.collective == Collective.SENDRECV
    for d, (on, g) in enumerate(zip(involved, group)):
        want = npus[d] if on else 1
        if p2p and on and 1 < g < npus[d] and npus[d] % g == 0:
            continue  # a stage ring over blocks of g NPUs: the send names its NPU
        if g != want:
            why = (f"ASTRA-sim's involved_dim spans whole dimensions, and dimension {d} "
                   f"has {npus[d]} NPUs (a group over part of a dimension needs pg_name "
                   f"communicator groups, which these traces do not write)"
                   if on else f"dimension {d} is not involved")
            raise LibraInputError(f"{where}.group[{d}] = {g}: expected {want}; {why}.")
    shift_dim = -1
    if row.collective == Collective.SENDRECV:
        spanned = [d for d in range(num_dims) if involved[d] and group[d] > 1]
        if not spanned:
            raise LibraInputError(
                f"{where}: a send-recv needs an involved dimension of more than one NPU; "
                f"involved = {show(list(involved))}, group = {show(list(group))}.")
        shift_dim = spanned[0]
        return row._replace(involved=involved, shift_dim=shift_dim,
                            shift_group=group[shift_dim])
    return row._replace(involved=involved, shift_dim=shift_dim)


def _check_npus(npus_per_dim: Sequence[int]) -> tuple[int, ...]:
    npus = tuple(as_int(n, f"npus_per_dim[{d}]", 1)
                 for d, n in enumerate(as_list(npus_per_dim, "npus_per_dim")))
    if not npus:
        raise LibraInputError("npus_per_dim = []: expected at least one dimension.")
    check_npus(npus, "npus_per_dim")
    return npus


def _ids(collectives: Sequence[Collective | None]) -> list[tuple[int, ...]]:
    """Each node's ET ids, from its collective: two for a send-recv, else one."""
    out, next_id = [], 0
    for code in collectives:
        width = 2 if code == Collective.SENDRECV else 1
        out.append(tuple(range(next_id, next_id + width)))
        next_id += width
    return out


# --------------------------------------------------------------------------- public API
def node_ids(nodes: Sequence[StepNode]) -> list[tuple[int, ...]]:
    """The ET node ids of each StepNode, as :func:`write_traces` assigns them.

    Ids are consecutive from 0 in list order; a send-recv node takes two, ``(send, recv)``,
    every other node one. The ids are the same in every NPU's file.

    Raises:
      LibraInputError: a node's kind or collective is not valid.
    """
    nodes = as_list(nodes, "nodes", what="a list of StepNode")
    return _ids([_check_kind(i, node)[1] for i, node in enumerate(nodes)])


def rounding_report(nodes: Sequence[StepNode]) -> RoundingReport:
    """What :func:`write_traces` changes by writing compute times in whole µs (half up).

    Raises:
      LibraInputError: a node is not valid (as :func:`write_traces` checks it, except the
        comm nodes' dimensions, which need the network).
    """
    rows = _check_nodes(nodes, None)
    total = max_abs = 0.0
    zero = []
    for i, (row, node) in enumerate(zip(rows, nodes)):
        if row.kind != "compute":
            continue
        change = row.duration_us * 1000.0 - float(node.duration_ns)
        total += change
        max_abs = max(max_abs, abs(change))
        if row.duration_us == 0:
            zero.append(i)
    return RoundingReport(total, max_abs, tuple(zero))


def write_traces(nodes: Sequence[StepNode], npus_per_dim: Sequence[int],
                 out_dir: str | os.PathLike, *, prefix: str = "wl") -> list[pathlib.Path]:
    """Writes the step's graph as one Chakra ET per NPU: ``out_dir/<prefix>.<rank>.et``.

    Args:
      nodes: the step's graph, the same on every NPU; ``deps`` index earlier nodes.
      npus_per_dim: [D] NPUs of each network dimension (dimension 0 fastest in the rank).
      out_dir: the folder (created if missing); pass ``out_dir/<prefix>`` to ASTRA-sim's
        ``--workload-configuration``.
      prefix: the file name stem.

    Returns:
      The paths written, ``[rank]`` in rank order.

    Raises:
      LibraInputError: a node is not valid (kind, collective, a dep that is not an earlier
        node, a time or size that is negative, not finite or beyond the limits, a comm
        node whose ``involved`` / ``group`` do not match the network), or the files cannot
        be written.
    """
    npus = _check_npus(npus_per_dim)
    prefix = as_str(prefix, "prefix")
    if os.sep in prefix or (os.altsep and os.altsep in prefix):
        raise LibraInputError(f"prefix = {show(prefix)}: expected a file name stem, no folder.")
    rows = _check_nodes(nodes, npus)
    ids = _ids([row.collective for row in rows])
    strides = [math.prod(npus[:d]) for d in range(len(npus))]

    # Every node but a send-recv is the same on every NPU: frame it once.
    fixed: list[bytes | None] = []
    for row, own in zip(rows, ids):
        deps = [k for dep in row.deps for k in ids[dep]]
        fixed.append(None if row.collective == Collective.SENDRECV
                     else encode_message(_node(row, own[0], deps)))
    head = encode_message(GlobalMetadata(version=ET_VERSION))

    out = pathlib.Path(as_path(out_dir, "out_dir"))
    paths = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for rank in range(math.prod(npus)):
            chunks = [head]
            for tag, (row, own, frame) in enumerate(zip(rows, ids, fixed)):
                if frame is None:
                    deps = [k for dep in row.deps for k in ids[dep]]
                    chunks += _send_recv(row, own, deps, tag, rank, npus, strides)
                else:
                    chunks.append(frame)
            path = out / f"{prefix}.{rank}.et"
            path.write_bytes(b"".join(chunks))
            paths.append(path)
    except OSError as e:
        raise LibraInputError(
            f"out_dir: cannot write the Chakra traces to {show_path(out)} "
            f"({e.strerror or e}).") from e
    return paths


def _attr(name: str, **value) -> AttributeProto:
    return AttributeProto(name=name, **value)


def _node(row: _Row, node_id: int, deps: Sequence[int]):
    """The ``Node`` of a compute or collective row."""
    node = Node(id=node_id, name=row.name, data_deps=deps)
    node.attr.append(_attr("is_cpu_op", bool_val=False))
    if row.kind == "compute":
        node.type = NodeType.COMP_NODE
        node.duration_micros = row.duration_us
        node.attr.append(_attr("num_ops", int64_val=0))
    else:
        node.type = NodeType.COMM_COLL_NODE
        node.attr.append(_attr("comm_type", int64_val=COMM_TYPE[row.collective]))
        node.attr.append(_attr("comm_size", int64_val=row.size_bytes))
        node.attr.append(_attr("involved_dim", bool_list=BoolList(values=row.involved)))
    return node


def _send_recv(row: _Row, own: tuple[int, int], deps: Sequence[int], tag: int, rank: int,
               npus: tuple[int, ...], strides: Sequence[int]) -> list[bytes]:
    """The framed send and recv nodes of a send-recv row on NPU ``rank``."""
    d, g = row.shift_dim, row.shift_group
    coord = rank // strides[d] % npus[d]
    start = coord - coord % g  # the first coordinate of this NPU's ring (block of g)
    base = rank - (coord - start) * strides[d]
    nxt = base + (coord - start + 1) % g * strides[d]
    prev = base + (coord - start - 1) % g * strides[d]
    frames = []
    for node_id, kind, src, dst, suffix in ((own[0], NodeType.COMM_SEND_NODE, rank, nxt,
                                             "send"),
                                            (own[1], NodeType.COMM_RECV_NODE, prev, rank,
                                             "recv")):
        node = Node(id=node_id, name=f"{row.name}.{suffix}", type=kind, data_deps=deps)
        node.attr.append(_attr("is_cpu_op", bool_val=False))
        node.attr.append(_attr("comm_src", int32_val=src))
        node.attr.append(_attr("comm_dst", int32_val=dst))
        node.attr.append(_attr("comm_tag", int32_val=tag))
        node.attr.append(_attr("comm_size", int64_val=row.size_bytes))
        frames.append(encode_message(node))
    return frames


def _attr_values(attrs) -> dict[str, Any]:
    """``{name: value}`` of repeated ``AttributeProto``s; lists as Python lists, an
    attribute with no value as None."""
    out = {}
    for a in attrs:
        which = a.WhichOneof("value")
        value = None if which is None else getattr(a, which)
        out[a.name] = list(value.values) if which and which.endswith("_list") else value
    return out


def read_trace(path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Reads one Chakra ET file.

    Returns:
      ``(metadata, nodes)``: metadata ``{"version": str, "attrs": {name: value}}``; per
      node, in file order, ``{"id", "name", "type"`` (a :class:`NodeType` name),
      ``"ctrl_deps", "data_deps", "start_time_micros", "duration_micros", "attrs"}``,
      attrs as ``{name: value}`` (list attributes, e.g. ``bool_list``, as lists).

    Raises:
      LibraInputError: the file cannot be read, is over the file-size limit, is empty, or
        is corrupt or truncated (the message gives the message number and byte offset).
    """
    path = as_path(path, "path")
    limit = LIMITS.file_bytes()
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise LibraInputError(
            f"{clip(path)}: cannot read the Chakra trace ({e.strerror or e}).") from None
    if len(data) > limit:
        raise LibraInputError(
            f"{clip(path)}: the Chakra trace is larger than the {limit / 1e6:g} MB limit "
            f"for input files; set LIBRA_JAX_MAX_FILE_MB to read larger ones.")
    if not data:
        raise LibraInputError(
            f"{clip(path)}: the Chakra trace is empty; expected a GlobalMetadata message.")
    metadata, nodes, pos, k = None, [], 0, 0
    while pos < len(data):
        what = "the GlobalMetadata" if k == 0 else f"message {k} (node {k - 1})"
        varint = read_varint(data, pos)
        if varint is None:
            raise LibraInputError(
                f"{clip(path)}: corrupt or truncated Chakra trace: the length of {what} at "
                f"byte {pos} is not a complete varint.")
        size, start = varint
        if start + size > len(data):
            raise LibraInputError(
                f"{clip(path)}: truncated Chakra trace: {what} at byte {pos} says it has "
                f"{size} bytes but the file ends {len(data) - start} bytes later.")
        message = GlobalMetadata() if k == 0 else Node()
        try:
            message.ParseFromString(data[start:start + size])
        except DecodeError as e:
            raise LibraInputError(
                f"{clip(path)}: corrupt Chakra trace: {what} at byte {pos} does not parse "
                f"({e}).") from None
        if k == 0:
            metadata = {"version": message.version, "attrs": _attr_values(message.attr)}
        else:
            nodes.append(_node_dict(message, path, what))
        pos, k = start + size, k + 1
    return metadata, nodes


def _node_dict(node, path: str, what: str) -> dict[str, Any]:
    try:
        kind = NodeType(node.type).name
    except ValueError:
        raise LibraInputError(
            f"{clip(path)}: corrupt Chakra trace: {what} has node type {node.type}, which "
            f"is not a Chakra NodeType.") from None
    return {
        "id": node.id,
        "name": node.name,
        "type": kind,
        "ctrl_deps": list(node.ctrl_deps),
        "data_deps": list(node.data_deps),
        "start_time_micros": node.start_time_micros,
        "duration_micros": node.duration_micros,
        "attrs": _attr_values(node.attr),
    }


# --------------------------------------------------------------------------- shared rules
# The multi-rank writer (`inputs/chakra_export.py`) writes with the same rules: these are
# their public names (one rounding of compute times and sizes, one attribute builder).
micros = _micros
round_half_up = _round_half_up
et_attr = _attr
