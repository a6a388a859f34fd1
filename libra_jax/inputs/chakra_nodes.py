"""One rank's Chakra file read into a `RankTrace` (`read_rank`, used by
`chakra_import.read_chakra`): the file's framed messages parsed (the 2023 format without a
``GlobalMetadata`` recognised), the nodes' attributes read whatever their stored type, and
ASTRA-sim's node rules applied (kinds, skips, sizes, peers, tags, groups); the dependency
graph is `chakra_graph.rank_graph`'s. The rules are in `chakra_import`'s docstring
(**Nodes**, **Attributes**).

Speed: protobuf parses the file as a whole (`NodeList`: its check) and all node bodies
merged (every ``data_deps``, ``ctrl_deps`` and ``attr`` entry in file order); numpy reads
every node's other fields off the wire at once (`_scan`) and settles the usual compute
nodes (`_usual_compute`); the Python pass reads the others, each distinct list of
attribute entries decoded once. A file `_scan` does not take is read node by node through
views of its nodes (`_reading_classes`). On the benchmark's stage files (1e5 nodes, 95%
compute): 2.1-2.3 CPU µs a node for all of `read_rank` (3.5-3.7 µs before).
"""

from __future__ import annotations

import array
import collections
import math

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from libra_jax.inputs.chakra_graph import Where, rank_graph
from libra_jax.inputs.chakra_groups import Groups, Notes
from libra_jax.inputs.chakra_schema import (
    FILE_DESCRIPTOR,
    METADATA_WIRE_FIELDS,
    AttributeProto,
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
from libra_jax.inputs.limits import LIMITS
from libra_jax.types import Collective, LibraInputError, RankTrace, TraceNode, show


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

_MAX_TAG = 2**32 - 1
#: What ASTRA-sim reads an attribute stored in another type as (the oneof's default).
_ASTRA_DEFAULT = {"is_cpu_op": "False", "pg_name": "an empty name, i.e. no group"}
_MAX_DURATION_US = int(LIMITS.max_ns // 1000)
_ASTRA_INDEX = {name: k for k, name in enumerate(ASTRA_TYPE)}

# Node kinds while reading (before the TraceNode codes): kept kinds are TraceNode values.
_SKIP = -1
# Node types as plain ints (comparing with an IntEnum member costs an attribute lookup).
_COMP, _COLL, _SEND = int(NodeType.COMP_NODE), int(NodeType.COMM_COLL_NODE), \
    int(NodeType.COMM_SEND_NODE)
_INVALID, _METADATA = int(NodeType.INVALID_NODE), int(NodeType.METADATA_NODE)
_MEM_TYPES = frozenset((int(NodeType.MEM_LOAD_NODE), int(NodeType.MEM_STORE_NODE)))
_KNOWN_TYPES = frozenset(int(t) for t in NodeType)


def _reading_classes() -> tuple[type, type]:
    """Views of a file's nodes (a private pool, with et_def.proto's ``NodeType``):
    ``NodeView`` has the ``Node`` fields the reader uses, declared as in ``Node`` (same
    values), but ``attr`` as each entry's serialised bytes; ``NodeViewList`` is `NodeList`
    of them; ``AllNodes``: all node bodies back to back parse as one message merging them:
    its repeated fields hold every node's entries in file order. Fields they lack are
    skipped (the full `NodeList` parse checks them)."""
    pool = descriptor_pool.DescriptorPool()
    et_def = descriptor_pb2.FileDescriptorProto()
    FILE_DESCRIPTOR.CopyToProto(et_def)
    pool.Add(et_def)
    fdp = descriptor_pb2.FileDescriptorProto(
        name="libra_jax_chakra_node_view.proto", package="LibraJaxChakraNodeView",
        syntax="proto3", dependency=["et_def.proto"])
    fdp_field = descriptor_pb2.FieldDescriptorProto
    view = fdp.message_type.add(name="NodeView")
    for name, number, kind, label, type_name in (
            ("id", 1, "UINT64", "OPTIONAL", ""),
            ("name", 2, "STRING", "OPTIONAL", ""),
            ("type", 3, "ENUM", "OPTIONAL", ".ChakraProtoMsg.NodeType"),
            ("data_deps", 5, "UINT64", "REPEATED", ""),
            ("duration_micros", 7, "UINT64", "OPTIONAL", ""),
            ("attr", 10, "BYTES", "REPEATED", "")):
        view.field.add(name=name, number=number, type=getattr(fdp_field, "TYPE_" + kind),
                       label=getattr(fdp_field, "LABEL_" + label),
                       **({"type_name": type_name} if type_name else {}))
    fdp.message_type.add(name="NodeViewList").field.add(
        name="nodes", number=1, type=fdp_field.TYPE_MESSAGE, label=fdp_field.LABEL_REPEATED,
        type_name=".LibraJaxChakraNodeView.NodeView")
    merged = fdp.message_type.add(name="AllNodes")
    for name, number, kind in (("ctrl_deps", 4, "UINT64"), ("data_deps", 5, "UINT64"),
                               ("attr", 10, "BYTES")):
        merged.field.add(name=name, number=number, type=getattr(fdp_field, "TYPE_" + kind),
                         label=fdp_field.LABEL_REPEATED)
    pool.Add(fdp)
    get = getattr(message_factory, "GetMessageClass", None)
    if get is None:  # pragma: no cover -- older protobuf (3.20 has no GetMessageClass)
        get = message_factory.MessageFactory(pool).GetPrototype
    return (get(pool.FindMessageTypeByName("LibraJaxChakraNodeView.NodeViewList")),
            get(pool.FindMessageTypeByName("LibraJaxChakraNodeView.AllNodes")))


_NodeViewList, _AllNodes = _reading_classes()


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints at ``buf[pos]`` (complete: the data parsed) as uint64 (bits beyond 64
    dropped, as protobuf does) and the positions after them."""
    b = buf[pos]
    more = b >= 0x80
    if not more.any():  # one byte each: the usual case
        return b.astype(np.uint64), pos + 1
    value = np.zeros(pos.size, np.uint64)
    pos = pos.copy()
    idx = np.arange(pos.size)
    shift = 0
    while idx.size:
        b = buf[pos[idx]]
        value[idx] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        pos[idx] += 1
        idx = idx[b >= 0x80]
        shift += 7
    return value, pos


def _span_bytes(buf: np.ndarray, start: np.ndarray, end: np.ndarray):
    """The bytes of the spans ``[start, end)`` back to back, and each span's end in them."""
    lens = end - start
    ends = np.cumsum(lens)
    pos = np.repeat(start - (ends - lens), lens) + np.arange(int(ends[-1]) if ends.size else 0)
    return buf[pos], ends


def _scan(data: bytes, offsets: list[int]) -> dict | None:
    """Every node's fields read off the wire at once (numpy, a step a field; the data
    parsed by `NodeList`, so well formed): per node ``id``, ``type``, ``duration``,
    ``name``, ``ndeps`` and ``nattr`` (its data_deps and attr entries). None for a node
    with a field of another wire type, a group, id / name / type / duration_micros given
    twice or a type outside [0, 2**31): then the nodes are read one by one."""
    buf = np.frombuffer(data, np.uint8)
    n = len(offsets)
    frame = np.asarray(offsets, np.int64)
    end = np.append(frame[1:], buf.size)
    _, start = _varints(buf, frame)  # after each frame's length
    cols = []
    cur, idx = start, np.flatnonzero(start < end)
    while idx.size:
        key, p = _varints(buf, cur[idx])
        field = (key >> np.uint64(3)).astype(np.int64)
        wire = (key & np.uint64(7)).astype(np.int64)
        value, s, e = np.zeros(idx.size, np.uint64), p.copy(), p.copy()
        e += np.where(wire == 1, 8, np.where(wire == 5, 4, 0))
        m = wire == 0
        value[m], e[m] = _varints(buf, p[m])
        m = wire == 2
        value[m], s[m] = _varints(buf, p[m])
        e[m] = s[m] + value[m].astype(np.int64)
        if np.any((wire == 3) | (wire == 4) | (wire > 5)):
            return None
        cols.append((idx, field, wire, value, s, e))
        cur = cur.copy()
        cur[idx] = e
        idx = idx[e < end[idx]]
    node, field, wire, value, s, e = (np.concatenate(c) for c in zip(*cols)) if cols else \
        (np.zeros(0, np.int64),) * 6
    # Wire types allowed for fields 1..10 (bit w: wire type w); unknown fields any.
    allowed = np.array([0, 1, 4, 1, 5, 5, 1, 1, 4, 4, 4], np.int64)
    if np.any(((allowed[np.where(field <= 10, field, 0)] >> wire) & 1 == 0) & (field <= 10)
              & (field >= 1)):
        return None
    out = {}
    for f, name, dtype in ((1, "id", np.uint64), (3, "type", np.uint64), (7, "duration",
                                                                         np.uint64)):
        m = field == f
        if np.bincount(node[m], minlength=n).max(initial=0) > 1:
            return None
        out[name] = np.zeros(n, dtype)
        out[name][node[m]] = value[m]
    if np.any(out["type"] >= 2**31):
        return None
    out["type"] = out["type"].astype(np.int64)
    m = field == 2
    if np.bincount(node[m], minlength=n).max(initial=0) > 1:
        return None
    name_s, name_e = np.zeros(n, np.int64), np.zeros(n, np.int64)
    name_s[node[m]], name_e[node[m]] = s[m], e[m]
    text, _ = _span_bytes(buf, s[m], e[m])
    if text.size and text.max() >= 0x80:
        out["name"] = [data[a:b].decode() for a, b in zip(name_s.tolist(), name_e.tolist())]
    else:
        whole = data.decode("latin-1")  # ASCII names: the same characters
        out["name"] = [whole[a:b] for a, b in zip(name_s.tolist(), name_e.tolist())]
    m = (field == 5) & (wire == 0)
    ndeps = np.bincount(node[m], minlength=n)
    m = (field == 5) & (wire == 2)
    packed, ends = _span_bytes(buf, s[m], e[m])
    done = np.concatenate(([0], np.cumsum(packed < 0x80)))
    count = done[ends] - done[ends - (e[m] - s[m])]  # the varints of each packed list
    out["ndeps"] = ndeps + np.bincount(node[m], count, n).astype(np.int64)
    out["nattr"] = np.bincount(node[field == 10], minlength=n)
    return out


def _bodies(data: bytes, offsets: list[int]) -> bytes:
    """The framed messages at ``offsets`` (from `split_frames`, consecutive, the last one
    ending with the data) without their length varints: their bodies back to back."""
    buf = np.frombuffer(data, np.uint8)
    keep = np.ones(buf.size, bool)
    keep[:offsets[0]] = False
    pos = np.asarray(offsets, np.int64)
    while pos.size:  # each length varint's bytes (split_frames checked them complete)
        keep[pos] = False
        pos = pos[buf[pos] >= 0x80] + 1
    return buf[keep].tobytes()


def _parse_nodes(data: bytes, path: str, notes: Notes):
    """The ``Node`` messages of one file (a repeated field of a parsed `NodeList`), that
    `NodeList`'s bytes and the byte offsets of the nodes' frames."""
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
    body = frames_as_node_list(data, offsets[first:])
    try:
        return NodeList.FromString(body).nodes, body, offsets[first:]
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
def _number(attr, where, notes: Notes, *, lo: int, hi: int, what: str = "",
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


def _bool(attr, which, where, notes: Notes) -> bool:
    if which == "bool_val":
        return attr.bool_val
    value = _number(attr, where, notes, lo=0, hi=1, what=" (or a bool)", which=which)
    return bool(value)


def _pg_name(attr, which, where, notes: Notes) -> str:
    if which == "string_val":
        return attr.string_val
    value = _number(attr, where, notes, lo=-2**63, hi=2**64, which=which)
    return str(value)


def _attr_plan(entries: tuple) -> tuple:
    """A node's attributes from their serialised entries (``NodeView.attr``): ``(attrs,
    cpu, repeated)``: ``{name: AttributeProto}`` (the last entry of a name), ``is_cpu_op``
    (False when absent; None when not a bool_val: `_bool` reads it), and the entries
    (None when no name is given twice; else `_check_repeated` checks them)."""
    msgs = [AttributeProto.FromString(b) for b in entries]
    attrs = {a.name: a for a in msgs}
    a = attrs.get("is_cpu_op")
    cpu = False if a is None else a.bool_val if a.WhichOneof("value") == "bool_val" else None
    return attrs, cpu, msgs if len(attrs) != len(msgs) else None


def _usual_compute(scan: dict, entries: tuple) -> np.ndarray:
    """Which nodes are the usual compute node (COMP_NODE, 0 < duration_micros <= the limit,
    no attribute the reader uses given twice, ``is_cpu_op`` absent or bool_val False): the
    pass would apply no other rule to them (no note, group, skip or error)."""
    n = scan["type"].size
    code = {}
    for b in set(entries):  # (index in ASTRA_TYPE + 1) * 2 + (is_cpu_op other than False)
        a = AttributeProto.FromString(b)
        cpu = a.name == "is_cpu_op" and not (
            a.WhichOneof("value") == "bool_val" and not a.bool_val)
        code[b] = (_ASTRA_INDEX.get(a.name, -1) + 1) * 2 + cpu
    codes = np.fromiter(map(code.__getitem__, entries), np.int64, len(entries))
    owner = np.repeat(np.arange(n), scan["nattr"])
    other = np.zeros(n, bool)
    other[owner[codes % 2 == 1]] = True
    used = codes >= 2
    key = np.sort(owner[used] * 16 + codes[used] // 2)
    other[key[1:][key[1:] == key[:-1]] // 16] = True  # an attribute given twice
    us = scan["duration"]
    return (scan["type"] == _COMP) & (us > 0) & (us <= _MAX_DURATION_US) & ~other


def _check_repeated(attr_list, path: str, node) -> None:
    """Raises if an attribute the reader uses is given twice on the node."""
    seen = set()
    for a in attr_list:
        if a.name in ASTRA_TYPE:
            if a.name in seen:
                raise LibraInputError(
                    f"{Where(path, node)}: attribute {a.name} is given twice.")
            seen.add(a.name)


# --------------------------------------------------------------------------- one rank
def read_rank(rank: int, path: str, data: bytes, num_ranks: int, cpu_ops: str,
              groups: Groups, notes: Notes, skipped: collections.Counter,
              frames: dict | None = None) -> RankTrace:
    """One rank's file (its bytes ``data``) as a `RankTrace`: one pass over the nodes applies
    the node rules (`chakra_import`'s docstring), then `rank_graph` orders them and resolves
    the dependencies. With ``frames`` (a dict), fills in ``"offsets"``: each node's frame
    offset in ``data``, file order, ``"ids"``: their ids, and ``"kind"``: their kinds
    (`TraceNode`, -1 skipped; what `chakra_replica` needs of a template)."""
    nodes, body, offsets = _parse_nodes(data, path, notes)
    n = len(nodes)
    skip_reason = {}
    # Every node's data_deps and attr entries in file order, and the ctrl_deps: one parse.
    every = _AllNodes.FromString(_bodies(data, offsets)) if n else _AllNodes()
    deps = array.array("Q", every.data_deps)  # 8 bytes a dependency
    num_ctrl = len(every.ctrl_deps)
    all_entries, at = tuple(every.attr), 0
    scan = _scan(data, offsets) if n else None
    if scan is not None and (int(scan["ndeps"].sum()) != len(deps)
                             or int(scan["nattr"].sum()) != len(all_entries)):
        scan = None  # (cannot happen: both read the same bytes)
    if scan is not None:  # the usual compute nodes done; the pass reads the others
        # The columns as numpy arrays of their final types (the pass sets the others').
        usual = _usual_compute(scan, all_entries)
        ids, names, ndeps = scan["id"], scan["name"], scan["ndeps"]
        kind = np.where(usual, TraceNode.COMPUTE, _SKIP).astype(np.int8)
        duration_ns = np.where(usual, scan["duration"].astype(np.float64) * 1000.0, 0.0)
        collective, size_bytes = np.zeros(n, np.int8), np.zeros(n, np.float64)
        group, peer, tag = np.full(n, -1, np.int32), np.full(n, -1, np.int32), \
            np.full(n, -1, np.int64)
        starts = (np.cumsum(scan["nattr"]) - scan["nattr"]).tolist()
        todo = ((i, nodes[i]) for i in np.flatnonzero(~usual).tolist())
    else:  # every node read one by one, through its view
        nodes = _NodeViewList.FromString(body).nodes
        ids, ndeps, names = [0] * n, [0] * n, [""] * n
        kind, duration_ns, collective = [_SKIP] * n, [0.0] * n, [0] * n
        size_bytes, group, peer, tag = [0] * n, [-1] * n, [-1] * n, [-1] * n
        starts, todo = None, enumerate(nodes)
    keep_cpu = cpu_ops == "compute"
    comp, coll, send = _COMP, _COLL, _SEND
    known_types, mem_types = _KNOWN_TYPES, _MEM_TYPES
    compute, max_us = TraceNode.COMPUTE, _MAX_DURATION_US
    plans: dict[tuple, tuple] = {}  # a node's attribute entries -> `_attr_plan`
    for i, node in todo:
        ids[i] = node.id
        names[i] = node.name
        ndeps[i] = len(node.data_deps)
        k = len(node.attr)
        if starts is not None:
            at = starts[i]
        entries = all_entries[at:at + k]
        at += k
        plan = plans.get(entries)
        if plan is None:
            plan = plans[entries] = _attr_plan(entries)
        attrs, cpu, repeated = plan
        if repeated is not None:
            _check_repeated(repeated, path, node)
        t = node.type
        if t == comp and cpu is False:  # the usual node: a GPU op's compute time
            us = node.duration_micros
            if 0 < us <= max_us:
                duration_ns[i] = us * 1000.0
                kind[i] = compute
                continue
        if t not in known_types:
            raise LibraInputError(
                f"{Where(path, node)}: node type {t} is not a Chakra NodeType (corrupt "
                f"trace?).")
        if t in mem_types:
            raise LibraInputError(
                f"{Where(path, node)}: {NodeType(t).name} is not supported: ASTRA-sim times "
                f"it with its remote-memory backend, which libra_jax does not model, and "
                f"skipping it would drop that time.")
        if cpu is None:
            a = attrs["is_cpu_op"]
            cpu = _bool(a, a.WhichOneof("value"), Where(path, node), notes)
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
                    f"{Where(path, node)}: duration_micros = {us}: expected at most "
                    f"{_MAX_DURATION_US:g} µs (LIMITS.max_ns).")
            if us == 0:
                a = attrs.get("num_ops")
                ops = 0 if a is None else _number(a, Where(path, node),
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
        where = Where(path, node)
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
        frames.update(offsets=offsets, ids=ids if starts is None else ids.tolist(),
                      kind=kinds)
    return rank_graph(rank, path, nodes, np.asarray(ids, np.uint64), names, kinds,
                      np.asarray(duration_ns, np.float64), np.asarray(collective, np.int8),
                      np.asarray(size_bytes, np.float64), np.asarray(group, np.int32),
                      np.asarray(peer, np.int32), np.asarray(tag, np.int64),
                      np.asarray(ndeps, np.int64),
                      np.frombuffer(deps, np.uint64) if deps else np.zeros(0, np.uint64), notes)
