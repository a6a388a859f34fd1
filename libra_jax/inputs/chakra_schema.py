"""The Chakra execution-trace schema and file framing, without Chakra or ``protoc``: the
message classes built at import time from a ``FileDescriptorProto`` written out here by hand
(package ``ChakraProtoMsg``, proto3, file ``et_def.proto``; see `libra_jax.inputs.chakra` for
where its names and numbers come from), and the length-prefixed framing of Chakra's
``protolib`` (every message preceded by its length as a protobuf varint)."""

from __future__ import annotations

import enum

import numpy as np

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from libra_jax.types import Collective


# --------------------------------------------------------------------------- schema
class NodeType(enum.IntEnum):
    """``ChakraProtoMsg.NodeType``."""

    INVALID_NODE = 0
    METADATA_NODE = 1
    MEM_LOAD_NODE = 2
    MEM_STORE_NODE = 3
    COMP_NODE = 4
    COMM_SEND_NODE = 5
    COMM_RECV_NODE = 6
    COMM_COLL_NODE = 7


class CollectiveCommType(enum.IntEnum):
    """``ChakraProtoMsg.CollectiveCommType``."""

    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9


#: The ``comm_type`` written for each collective (send-recv has its own node types).
COMM_TYPE = {
    Collective.ALLREDUCE: CollectiveCommType.ALL_REDUCE,
    Collective.REDUCESCATTER: CollectiveCommType.REDUCE_SCATTER,
    Collective.ALLGATHER: CollectiveCommType.ALL_GATHER,
    Collective.ALLTOALL: CollectiveCommType.ALL_TO_ALL,
}

#: ``AttributeProto``'s ``oneof value``: each scalar type with its ``<type>_val`` field
#: number; its ``<type>_list`` field (message ``<Type>List {repeated <type> values = 1;}``)
#: has the next number.
_VALUE_FIELDS = (
    ("double", 3), ("float", 5), ("int32", 7), ("int64", 9), ("uint32", 11),
    ("uint64", 13), ("sint32", 15), ("sint64", 17), ("fixed32", 19), ("fixed64", 21),
    ("sfixed32", 23), ("sfixed64", 25), ("bool", 27), ("string", 29), ("bytes", 31),
)

#: The other messages: (name, fields), each field (name, number, type, label), where type
#: is a scalar type or a message / enum of this file; label "repeated" or "" (singular).
_MESSAGES = (
    ("GlobalMetadata", (
        ("version", 1, "string", ""),
        ("attr", 2, "AttributeProto", "repeated"),
    )),
    ("Node", (
        ("id", 1, "uint64", ""),
        ("name", 2, "string", ""),
        ("type", 3, "NodeType", ""),
        ("ctrl_deps", 4, "uint64", "repeated"),
        ("data_deps", 5, "uint64", "repeated"),
        ("start_time_micros", 6, "uint64", ""),
        ("duration_micros", 7, "uint64", ""),
        ("inputs", 8, "IOInfo", ""),
        ("outputs", 9, "IOInfo", ""),
        ("attr", 10, "AttributeProto", "repeated"),
    )),
    ("IOInfo", (
        ("values", 1, "string", ""),
        ("shapes", 2, "string", ""),
        ("types", 3, "string", ""),
    )),
    ("Tensor", (
        ("tensor_id", 1, "uint64", ""),
        ("storage_id", 2, "uint64", ""),
        ("offset", 3, "uint64", ""),
        ("num_elem", 4, "uint64", ""),
        ("elem_bytes", 5, "uint64", ""),
        ("device", 6, "string", ""),
    )),
)

_ENUMS = (NodeType, CollectiveCommType)
_PACKAGE = "ChakraProtoMsg"
_FDP = descriptor_pb2.FieldDescriptorProto


def _list_message(scalar: str) -> str:
    """``double`` -> ``DoubleList``, ``uint32`` -> ``Uint32List`` (et_def.proto's names)."""
    return scalar.capitalize() + "List"


def _add_field(msg, name: str, number: int, type_name: str, label: str,
               oneof_index: int | None = None) -> None:
    field = msg.field.add(name=name, number=number, json_name=_json_name(name))
    field.label = _FDP.LABEL_REPEATED if label == "repeated" else _FDP.LABEL_OPTIONAL
    if type_name in {e.__name__ for e in _ENUMS}:
        field.type, field.type_name = _FDP.TYPE_ENUM, f".{_PACKAGE}.{type_name}"
    elif hasattr(_FDP, "TYPE_" + type_name.upper()):
        field.type = getattr(_FDP, "TYPE_" + type_name.upper())
    else:
        field.type, field.type_name = _FDP.TYPE_MESSAGE, f".{_PACKAGE}.{type_name}"
    if oneof_index is not None:
        field.oneof_index = oneof_index


def _json_name(name: str) -> str:
    """``protoc``'s JSON name of a field: ``data_deps`` -> ``dataDeps``."""
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


def _file_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    """et_def.proto as a ``FileDescriptorProto`` (what ``protoc`` would produce)."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="et_def.proto", package=_PACKAGE, syntax="proto3")
    attr = fdp.message_type.add(name="AttributeProto")
    _add_field(attr, "name", 1, "string", "")
    _add_field(attr, "doc_string", 2, "string", "")
    attr.oneof_decl.add(name="value")
    for scalar, number in _VALUE_FIELDS:
        _add_field(attr, f"{scalar}_val", number, scalar, "", oneof_index=0)
        _add_field(attr, f"{scalar}_list", number + 1, _list_message(scalar), "",
                   oneof_index=0)
    for scalar, _ in _VALUE_FIELDS:
        values = fdp.message_type.add(name=_list_message(scalar))
        _add_field(values, "values", 1, scalar, "repeated")
    for name, fields in _MESSAGES:
        msg = fdp.message_type.add(name=name)
        for field in fields:
            _add_field(msg, *field)
    for enum_cls in _ENUMS:
        e = fdp.enum_type.add(name=enum_cls.__name__)
        for member in enum_cls:
            e.value.add(name=member.name, number=int(member))
    return fdp


#: The reader's own file (not part of Chakra's schema): ``NodeList {repeated Node nodes =
#: 1;}``. A framed node (its length as a varint, then its bytes) preceded by the tag byte
#: ``0x0A`` (field 1, length-delimited) is exactly one entry of ``nodes`` on the wire, so a
#: whole file's nodes parse in one call (`frames_as_node_list`).
_READING_FILE = "libra_jax_chakra_reading.proto"


def _reading_descriptor_proto() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(
        name=_READING_FILE, package="LibraJaxChakraReading", syntax="proto3",
        dependency=["et_def.proto"])
    _add_field(fdp.message_type.add(name="NodeList"), "nodes", 1, "Node", "repeated")
    return fdp


def _build_classes() -> tuple[dict[str, type], type]:
    pool = descriptor_pool.DescriptorPool()  # private: no clash with a real et_def_pb2
    pool.Add(_file_descriptor_proto())
    pool.Add(_reading_descriptor_proto())
    file = pool.FindFileByName("et_def.proto")
    get_class = getattr(message_factory, "GetMessageClass", None)  # newer protobuf
    if get_class is None:  # pragma: no cover -- older protobuf (3.20 has no GetMessageClass)
        get_class = message_factory.MessageFactory(pool).GetPrototype
    classes = {name: get_class(desc) for name, desc in file.message_types_by_name.items()}
    node_list = get_class(pool.FindMessageTypeByName("LibraJaxChakraReading.NodeList"))
    return classes, node_list


CLASSES, NodeList = _build_classes()
AttributeProto = CLASSES["AttributeProto"]
BoolList = CLASSES["BoolList"]
GlobalMetadata = CLASSES["GlobalMetadata"]
Node = CLASSES["Node"]
IOInfo = CLASSES["IOInfo"]
Tensor = CLASSES["Tensor"]
#: The ``FileDescriptor`` of the schema (``Node.DESCRIPTOR.file``).
FILE_DESCRIPTOR = Node.DESCRIPTOR.file


# --------------------------------------------------------------------------- framing
def varint(value: int) -> bytes:
    """``value`` (>= 0) as a protobuf base-128 varint."""
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(data: bytes, pos: int) -> tuple[int, int] | None:
    """The varint at ``data[pos:]`` and the position after it; None if the data end
    inside it or it is longer than 10 bytes (64 bits)."""
    value = shift = 0
    for i in range(pos, min(pos + 10, len(data))):
        value |= (data[i] & 0x7F) << shift
        if not data[i] & 0x80:
            return value, i + 1
        shift += 7
    return None


def encode_message(message) -> bytes:
    """One message as Chakra's ``protolib.encodeMessage`` writes it: its length in bytes
    as a varint, then its serialised bytes."""
    body = message.SerializeToString()
    return varint(len(body)) + body


# --------------------------------------------------------------------------- reading
class FramingError(Exception):
    """The framing of a trace is broken (`split_frames`): ``index`` is the message's
    position in the file (0 = the first), ``pos`` its byte offset, ``detail`` what is
    wrong; the caller names the file."""

    def __init__(self, index: int, pos: int, detail: str):
        super().__init__(f"message {index} at byte {pos}: {detail}")
        self.index, self.pos, self.detail = index, pos, detail


def split_frames(data: bytes) -> list[int]:
    """The byte offsets of the length-prefixed messages of a trace file, in file order:
    message k is ``data[offsets[k]:offsets[k + 1]]`` (the last one ends with the data), its
    length as a varint, then its bytes (`frame_body`).

    Raises:
      FramingError: a length that is not a complete varint, or a message that runs past
        the end of the data (a truncated file).
    """
    out, pos, n = [], 0, len(data)
    while pos < n:
        first = data[pos]
        if first < 0x80:  # lengths under 128 bytes: one varint byte
            end = pos + 1 + first
        else:
            varint_ = read_varint(data, pos)
            if varint_ is None:
                raise FramingError(len(out), pos, "its length is not a complete varint")
            size, start = varint_
            end = start + size
        if end > n:
            size, start = read_varint(data, pos)
            raise FramingError(
                len(out), pos, f"it says it has {size} bytes but the data end "
                f"{n - start} bytes later (truncated)")
        out.append(pos)
        pos = end
    return out


def frame_body(data: bytes, pos: int) -> tuple[int, int]:
    """``(start, end)`` of the bytes of the message framed at ``data[pos:]`` (already
    checked by `split_frames`)."""
    size, start = read_varint(data, pos)
    return start, start + size


def frames_as_node_list(data: bytes, offsets: list[int]) -> bytes:
    """The serialised `NodeList` of the framed messages at ``offsets`` (from
    `split_frames`, consecutive, the last one ending with the data): each frame with the
    tag byte of ``NodeList.nodes`` (0x0A) before it."""
    if not offsets:
        return b""
    head = offsets[0]
    body = np.frombuffer(data, np.uint8)[head:]
    return np.insert(body, np.asarray(offsets, np.int64) - head, 0x0A).tobytes()


def top_level_fields(body: bytes) -> set[tuple[int, int]] | None:
    """The ``(field number, wire type)`` pairs at the top level of a serialised message,
    or None if its bytes are not well-formed protobuf wire data. Bounded: one pass."""
    seen, pos, n = set(), 0, len(body)
    while pos < n:
        key = read_varint(body, pos)
        if key is None:
            return None
        tag, pos = key
        number, wire = tag >> 3, tag & 7
        if number == 0:
            return None
        seen.add((number, wire))
        if wire == 0:
            value = read_varint(body, pos)
            if value is None:
                return None
            pos = value[1]
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            length = read_varint(body, pos)
            if length is None:
                return None
            pos = length[1] + length[0]
        else:  # groups (3, 4) are not used by proto3; 6, 7 do not exist
            return None
        if pos > n:
            return None
    return seen


#: The fields of a ``GlobalMetadata`` on the wire: version (1) and attr (2), both
#: length-delimited. A first message with any other field is a ``Node`` (a file of the
#: 2023 format, which has no metadata record: a node's id is field 1 as a varint, its type
#: field 3, ...).
METADATA_WIRE_FIELDS = frozenset({(1, 2), (2, 2)})
