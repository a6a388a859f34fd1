"""Tests of libra_jax.inputs.chakra: Chakra execution traces (ETs) for ASTRA-sim 2.x.

Chakra is not needed: the schema's field numbers are checked against literal values read
from mlcommons/chakra ``schema/protobuf/et_def.proto`` (commit 21585d8, identical at
214f2c5, the commit ASTRA-sim c459ab6 pins), and the framing against hand-computed bytes.
"""

from __future__ import annotations

import ast
import math
import pathlib

import numpy as np
import pytest

from libra_jax.inputs import chakra
from libra_jax.inputs.chakra import (
    AttributeProto,
    CollectiveCommType,
    GlobalMetadata,
    Node,
    NodeType,
    encode_message,
    node_ids,
    read_trace,
    rounding_report,
    write_traces,
)
from libra_jax.types import Collective, LibraInputError, StepNode

# --------------------------------------------------------------------------- schema
# Field numbers as written in Chakra's et_def.proto.
ATTRIBUTE_FIELDS = {
    "name": 1, "doc_string": 2,
    "double_val": 3, "double_list": 4, "float_val": 5, "float_list": 6,
    "int32_val": 7, "int32_list": 8, "int64_val": 9, "int64_list": 10,
    "uint32_val": 11, "uint32_list": 12, "uint64_val": 13, "uint64_list": 14,
    "sint32_val": 15, "sint32_list": 16, "sint64_val": 17, "sint64_list": 18,
    "fixed32_val": 19, "fixed32_list": 20, "fixed64_val": 21, "fixed64_list": 22,
    "sfixed32_val": 23, "sfixed32_list": 24, "sfixed64_val": 25, "sfixed64_list": 26,
    "bool_val": 27, "bool_list": 28, "string_val": 29, "string_list": 30,
    "bytes_val": 31, "bytes_list": 32,
}
NODE_FIELDS = {
    "id": 1, "name": 2, "type": 3, "ctrl_deps": 4, "data_deps": 5,
    "start_time_micros": 6, "duration_micros": 7, "inputs": 8, "outputs": 9, "attr": 10,
}
OTHER_FIELDS = {
    "GlobalMetadata": {"version": 1, "attr": 2},
    "IOInfo": {"values": 1, "shapes": 2, "types": 3},
    "Tensor": {"tensor_id": 1, "storage_id": 2, "offset": 3, "num_elem": 4,
               "elem_bytes": 5, "device": 6},
    **{name: {"values": 1} for name in (
        "DoubleList", "FloatList", "Int32List", "Int64List", "Uint32List", "Uint64List",
        "Sint32List", "Sint64List", "Fixed32List", "Fixed64List", "Sfixed32List",
        "Sfixed64List", "BoolList", "StringList", "BytesList")},
}
NODE_TYPES = {
    "INVALID_NODE": 0, "METADATA_NODE": 1, "MEM_LOAD_NODE": 2, "MEM_STORE_NODE": 3,
    "COMP_NODE": 4, "COMM_SEND_NODE": 5, "COMM_RECV_NODE": 6, "COMM_COLL_NODE": 7,
}
COMM_TYPES = {
    "ALL_REDUCE": 0, "REDUCE": 1, "ALL_GATHER": 2, "GATHER": 3, "SCATTER": 4,
    "BROADCAST": 5, "ALL_TO_ALL": 6, "REDUCE_SCATTER": 7, "REDUCE_SCATTER_BLOCK": 8,
    "BARRIER": 9,
}


def _numbers(descriptor) -> dict[str, int]:
    return {f.name: f.number for f in descriptor.fields}


def test_schema_field_numbers_match_chakra():
    file = chakra.FILE_DESCRIPTOR
    assert (file.name, file.package) == ("et_def.proto", "ChakraProtoMsg")
    assert _numbers(AttributeProto.DESCRIPTOR) == ATTRIBUTE_FIELDS
    assert _numbers(Node.DESCRIPTOR) == NODE_FIELDS
    for name, fields in OTHER_FIELDS.items():
        assert _numbers(file.message_types_by_name[name]) == fields, name
    assert set(file.message_types_by_name) == {"AttributeProto", "Node", *OTHER_FIELDS}
    enums = file.enum_types_by_name
    assert {v.name: v.number for v in enums["NodeType"].values} == NODE_TYPES
    assert {v.name: v.number for v in enums["CollectiveCommType"].values} == COMM_TYPES
    assert {m.name: int(m) for m in NodeType} == NODE_TYPES
    assert {m.name: int(m) for m in CollectiveCommType} == COMM_TYPES


def test_schema_field_types():
    fd = chakra.descriptor_pb2.FieldDescriptorProto
    node = Node.DESCRIPTOR.fields_by_name
    assert node["type"].enum_type.full_name == "ChakraProtoMsg.NodeType"
    for name in ("id", "ctrl_deps", "data_deps", "start_time_micros", "duration_micros"):
        assert node[name].type == fd.TYPE_UINT64, name
    # Labels from the descriptor's proto form (FieldDescriptor.label is gone in protobuf 7).
    file = chakra.descriptor_pb2.FileDescriptorProto()
    chakra.FILE_DESCRIPTOR.CopyToProto(file)
    assert file.syntax == "proto3"
    (node_proto,) = (m for m in file.message_type if m.name == "Node")
    repeated = {f.name for f in node_proto.field if f.label == fd.LABEL_REPEATED}
    assert repeated == {"ctrl_deps", "data_deps", "attr"}
    assert node["attr"].message_type is AttributeProto.DESCRIPTOR
    assert node["inputs"].message_type.full_name == "ChakraProtoMsg.IOInfo"
    attr = AttributeProto.DESCRIPTOR
    assert [o.name for o in attr.oneofs] == ["value"]
    assert {f.name for f in attr.oneofs[0].fields} == set(ATTRIBUTE_FIELDS) - {
        "name", "doc_string"}
    fields = attr.fields_by_name
    assert fields["bool_list"].message_type.full_name == "ChakraProtoMsg.BoolList"
    assert chakra.BoolList.DESCRIPTOR.fields_by_name["values"].type == fd.TYPE_BOOL
    for name, kind in (("bool_val", fd.TYPE_BOOL), ("int32_val", fd.TYPE_INT32),
                       ("int64_val", fd.TYPE_INT64), ("uint64_val", fd.TYPE_UINT64),
                       ("string_val", fd.TYPE_STRING), ("bytes_val", fd.TYPE_BYTES),
                       ("double_val", fd.TYPE_DOUBLE), ("sint32_val", fd.TYPE_SINT32)):
        assert fields[name].type == kind, name


def test_inputs_module_does_not_import_the_model():
    tree = ast.parse(pathlib.Path(chakra.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    ours = [n for n in names if n.startswith("libra_jax")]
    assert ours and all(n == "libra_jax.types" or n.startswith("libra_jax.inputs")
                        for n in ours), ours


# --------------------------------------------------------------------------- framing
def test_framing_of_small_messages_byte_by_byte():
    # GlobalMetadata{version "0.0.4"}: field 1, wire type 2 -> tag 0x0a, length 5, text;
    # the message is 7 bytes, so the frame starts with the varint 0x07.
    assert encode_message(GlobalMetadata(version="0.0.4")) == bytes(
        [0x07, 0x0A, 0x05]) + b"0.0.4"
    node = Node(id=1, name="F1", type=NodeType.COMP_NODE, data_deps=[0], duration_micros=3)
    node.attr.append(AttributeProto(name="is_cpu_op", bool_val=False))
    attr = (bytes([0x0A, 0x09]) + b"is_cpu_op"  # name: field 1, 9 bytes
            + bytes([0xD8, 0x01, 0x00]))  # bool_val: field 27 -> tag 27 << 3 = 216
    assert len(attr) == 14
    body = (bytes([0x08, 0x01])                 # id = 1: field 1, varint
            + bytes([0x12, 0x02]) + b"F1"       # name: field 2, length-delimited
            + bytes([0x18, 0x04])               # type = COMP_NODE (4): field 3
            + bytes([0x2A, 0x01, 0x00])         # data_deps [0]: field 5, packed (proto3)
            + bytes([0x38, 0x03])               # duration_micros = 3: field 7
            + bytes([0x52, 0x0E]) + attr)       # attr: field 10, 14 bytes
    assert len(body) == 29
    assert encode_message(node) == bytes([0x1D]) + body


def test_framing_multi_byte_length():
    # name of 300 bytes: length varint 300 = 0b10_0101100 -> 0xac 0x02; the message is
    # 1 + 2 + 300 = 303 bytes = 0b10_0101111 -> frame length 0xaf 0x02.
    framed = encode_message(Node(name="x" * 300))
    assert framed[:5] == bytes([0xAF, 0x02, 0x12, 0xAC, 0x02])
    assert len(framed) == 305


def test_file_is_metadata_then_nodes(tmp_path):
    (path,) = write_traces([StepNode("F", "compute", duration_ns=2000.0)], [1], tmp_path)
    assert path == tmp_path / "wl.0.et"
    attrs = (bytes([0x52, 0x0E, 0x0A, 0x09]) + b"is_cpu_op" + bytes([0xD8, 0x01, 0x00])
             + bytes([0x52, 0x0B, 0x0A, 0x07]) + b"num_ops" + bytes([0x48, 0x00]))
    body = bytes([0x12, 0x01]) + b"F" + bytes([0x18, 0x04, 0x38, 0x02]) + attrs
    assert path.read_bytes() == (bytes([0x07, 0x0A, 0x05]) + b"0.0.4"
                                 + bytes([len(body)]) + body)


# --------------------------------------------------------------------------- round trip
NPUS = (2, 3, 2)  # 12 NPUs; rank = c0 + 2 c1 + 6 c2


def _comm(name, deps, code, size, dims):
    involved = tuple(d in dims for d in range(len(NPUS)))
    group = tuple(n if on else 1 for n, on in zip(NPUS, involved))
    return StepNode(name, "comm", deps, collective=code, size_bytes=size,
                    involved=involved, group=group)


GRAPH = [
    StepNode("F1", "compute", (), duration_ns=150_000.0),                      # 0
    _comm("TPf1", (0,), Collective.ALLREDUCE, 4 * 2**20, (0,)),                # 1
    _comm("EPd1", (1,), Collective.ALLTOALL, 2**20, (1, 2)),                   # 2
    StepNode("E1", "compute", (2,), duration_ns=20_400.0),                     # 3
    _comm("PP1", (3,), Collective.SENDRECV, 3 * 2**20, (1, 2)),                # 4: 2 ids
    StepNode("B1", "compute", (4,), duration_ns=300_000.0),                    # 5
    StepNode("W1", "compute", (4,), duration_ns=99_499.0),                     # 6
    _comm("DP1rs", (6,), Collective.REDUCESCATTER, 8 * 2**20, (1, 2)),         # 7
    _comm("DP1ag", (7,), Collective.ALLGATHER, 2**20, (1, 2)),                 # 8
    _comm("PPb1", (5, 8), Collective.SENDRECV, 1000, (2,)),                    # 9: 2 ids
    StepNode("End", "compute", (9, 0), duration_ns=1000.0),                    # 10
]
COMM_TYPE = {Collective.ALLREDUCE: "ALL_REDUCE", Collective.REDUCESCATTER: "REDUCE_SCATTER",
             Collective.ALLGATHER: "ALL_GATHER", Collective.ALLTOALL: "ALL_TO_ALL"}


def _coords(rank):
    return list(np.unravel_index(rank, NPUS, order="F"))  # dimension 0 fastest


def _rank(coords):
    return int(np.ravel_multi_index(coords, NPUS, order="F"))


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    out = tmp_path_factory.mktemp("et")
    paths = write_traces(GRAPH, NPUS, out)
    return paths, [read_trace(p) for p in paths]


def test_node_ids():
    assert node_ids(GRAPH) == [(0,), (1,), (2,), (3,), (4, 5), (6,), (7,), (8,), (9,),
                               (10, 11), (12,)]


def test_one_file_per_npu(traces, tmp_path):
    paths, _ = traces
    assert [p.name for p in paths] == [f"wl.{r}.et" for r in range(12)]
    assert len({p.parent for p in paths}) == 1
    other = write_traces(GRAPH[:1], [2], tmp_path / "new" / "dir", prefix="step")
    assert [p.name for p in other] == ["step.0.et", "step.1.et"]


def test_round_trip(traces):
    _, read = traces
    ids = node_ids(GRAPH)
    for rank, (meta, nodes) in enumerate(read):
        assert meta == {"version": "0.0.4", "attrs": {}}
        assert [n["id"] for n in nodes] == list(range(13))
        for step, own, i in zip(GRAPH, ids, range(len(GRAPH))):
            et_deps = [k for d in step.deps for k in ids[d]]
            for k in own:
                n = nodes[k]
                assert n["data_deps"] == et_deps and n["ctrl_deps"] == []
                assert n["attrs"]["is_cpu_op"] is False
            if step.kind == "compute":
                (n,) = (nodes[k] for k in own)
                assert (n["name"], n["type"]) == (step.name, "COMP_NODE")
                assert n["duration_micros"] == round(step.duration_ns / 1000)
                assert n["attrs"] == {"is_cpu_op": False, "num_ops": 0}
            elif step.collective != Collective.SENDRECV:
                (n,) = (nodes[k] for k in own)
                assert (n["name"], n["type"]) == (step.name, "COMM_COLL_NODE")
                assert n["attrs"] == {
                    "is_cpu_op": False,
                    "comm_type": CollectiveCommType[COMM_TYPE[step.collective]],
                    "comm_size": step.size_bytes,
                    "involved_dim": list(step.involved),
                }
            else:
                send, recv = (nodes[k] for k in own)
                # The shift runs along the first involved dimension only.
                d = step.involved.index(True)
                nxt, prev = _coords(rank), _coords(rank)
                nxt[d] = (nxt[d] + 1) % NPUS[d]
                prev[d] = (prev[d] - 1) % NPUS[d]
                assert (send["name"], send["type"]) == (f"{step.name}.send", "COMM_SEND_NODE")
                assert (recv["name"], recv["type"]) == (f"{step.name}.recv", "COMM_RECV_NODE")
                assert send["attrs"] == {"is_cpu_op": False, "comm_src": rank,
                                         "comm_dst": _rank(nxt), "comm_tag": i,
                                         "comm_size": step.size_bytes}
                assert recv["attrs"] == {"is_cpu_op": False, "comm_src": _rank(prev),
                                         "comm_dst": rank, "comm_tag": i,
                                         "comm_size": step.size_bytes}


def test_send_recv_pairs_match(traces):
    """Every send has the recv with the same tag, source and size on its destination."""
    _, read = traces
    sends = {(n["attrs"]["comm_src"], n["attrs"]["comm_dst"], n["attrs"]["comm_tag"],
              n["attrs"]["comm_size"])
             for _, nodes in read for n in nodes if n["type"] == "COMM_SEND_NODE"}
    recvs = {(n["attrs"]["comm_src"], n["attrs"]["comm_dst"], n["attrs"]["comm_tag"],
              n["attrs"]["comm_size"])
             for _, nodes in read for n in nodes if n["type"] == "COMM_RECV_NODE"}
    assert sends == recvs and len(sends) == 2 * 12


def test_only_send_recv_nodes_differ_between_npus(traces):
    _, read = traces
    first = read[0][1]
    for _, nodes in read[1:]:
        for a, b in zip(first, nodes):
            if a["type"] not in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                assert a == b


# --------------------------------------------------------------------------- rounding
DURATIONS_NS = [0.0, 1.0, 499.9, 500.0, 1499.99, 1500.0, 2500.0, 1_234_567.0]
DURATIONS_US = [0, 0, 0, 1, 1, 2, 3, 1235]  # half up


def test_compute_times_round_half_up_to_whole_us(tmp_path):
    nodes = [StepNode(f"C{i}", "compute", duration_ns=ns) for i, ns in enumerate(DURATIONS_NS)]
    (path,) = write_traces(nodes, [1], tmp_path)
    _, read = read_trace(path)
    assert [n["duration_micros"] for n in read] == DURATIONS_US
    # ASTRA-sim skips 0 µs nodes only if num_ops is 0 too: it always is.
    assert all(n["attrs"]["num_ops"] == 0 for n in read)
    report = rounding_report(nodes)
    expected = [us * 1000.0 - ns for us, ns in zip(DURATIONS_US, DURATIONS_NS)]
    assert math.isclose(report.total_change_ns, sum(expected), rel_tol=1e-12)
    assert report.max_abs_change_ns == 500.0  # 500 ns -> 1 µs
    assert report.zero_us_nodes == (0, 1, 2)


def test_rounding_report_ignores_comm_nodes():
    nodes = [StepNode("A", "compute", duration_ns=1400.0), GRAPH[1]]
    assert rounding_report(nodes) == chakra.RoundingReport(-400.0, 400.0, ())


def test_sizes_round_to_whole_bytes(tmp_path):
    nodes = [_comm("A", (), Collective.ALLREDUCE, 1000.5, (0,)),
             _comm("B", (), Collective.ALLREDUCE, 1000.49, (0,))]
    path = write_traces(nodes, NPUS, tmp_path)[0]
    assert [n["attrs"]["comm_size"] for n in read_trace(path)[1]] == [1001, 1000]


# --------------------------------------------------------------------------- bad input
def _bad(**changes):
    base = dict(name="X", kind="comm", deps=(0,), collective=Collective.ALLREDUCE,
                size_bytes=100.0, involved=(True, False, False), group=(2, 1, 1))
    return StepNode(**{**base, **changes})


START = StepNode("F1", "compute", duration_ns=1000.0)


@pytest.mark.parametrize("node, match", [
    (_bad(involved=(True, False)), r"nodes\[1\] \(X\)\.involved .* has 2 entries but the "
                                   r"network has 3 dimensions"),
    (_bad(group=(2, 1)), r"nodes\[1\] \(X\)\.group .* has 2 entries"),
    (_bad(size_bytes=-1.0), r"nodes\[1\] \(X\)\.size_bytes = -1\.0: expected a finite "
                            r"number >= 0"),
    (_bad(size_bytes=math.nan), r"nodes\[1\] \(X\)\.size_bytes = nan"),
    (_bad(size_bytes=math.inf), r"nodes\[1\] \(X\)\.size_bytes = inf"),
    (_bad(size_bytes="100"), r"nodes\[1\] \(X\)\.size_bytes = '100': expected a number"),
    (_bad(deps=(1,)), r"nodes\[1\] \(X\)\.deps\[0\] = 1: a node can only depend on "
                      r"earlier nodes \(indices 0 to 0\)"),
    (_bad(deps=(0, 5)), r"nodes\[1\] \(X\)\.deps\[1\] = 5"),
    (_bad(deps=(-1,)), r"nodes\[1\] \(X\)\.deps\[0\] = -1"),
    (_bad(deps=(0.5,)), r"nodes\[1\] \(X\)\.deps\[0\] = 0\.5: expected an integer"),
    (_bad(kind="collective"), r"nodes\[1\] \(X\)\.kind = 'collective': expected "
                              r"'compute' or 'comm'"),
    (_bad(collective=Collective.NONE), r"nodes\[1\] \(X\)\.collective = 0: a comm node "
                                       r"needs a collective"),
    (_bad(collective=9), r"nodes\[1\] \(X\)\.collective = 9"),
    (_bad(involved=(1, 0, 0)), r"nodes\[1\] \(X\)\.involved\[0\] = 1: expected True or "
                               r"False"),
    (_bad(involved=(False,) * 3, group=(1, 1, 1)), r"nodes\[1\] \(X\)\.involved = .*: a "
                                                   r"comm node must involve at least one"),
    (_bad(involved=(False, True, False), group=(1, 2, 1)),
     r"nodes\[1\] \(X\)\.group\[1\] = 2: expected 3; ASTRA-sim's involved_dim spans "
     r"whole dimensions"),
    (_bad(group=(2, 3, 1)), r"nodes\[1\] \(X\)\.group\[1\] = 3: expected 1; dimension 1 "
                            r"is not involved"),
    (StepNode("C", "compute", (0,), duration_ns=-5.0), r"nodes\[1\] \(C\)\.duration_ns = "
                                                       r"-5\.0"),
    (StepNode("C", "compute", (0,), duration_ns=math.inf), r"nodes\[1\] \(C\)\.duration_ns"),
    ("not a node", r"nodes\[1\]: expected a StepNode, got str"),
])
def test_bad_nodes(tmp_path, node, match):
    with pytest.raises(LibraInputError, match=match):
        write_traces([START, node], (2, 3, 1), tmp_path)
    assert not list(tmp_path.iterdir())  # nothing is written


def test_first_node_cannot_have_deps(tmp_path):
    with pytest.raises(LibraInputError, match=r"nodes\[0\] \(F\)\.deps\[0\] = 0: .*none: "
                                              r"it is the first node"):
        write_traces([StepNode("F", "compute", (0,))], [2], tmp_path)


def test_send_recv_needs_a_dimension_of_several_npus(tmp_path):
    node = _bad(collective=Collective.SENDRECV, involved=(False, False, True),
                group=(1, 1, 1))
    with pytest.raises(LibraInputError, match=r"nodes\[1\] \(X\): a send-recv needs an "
                                              r"involved dimension of more than one NPU"):
        write_traces([START, node], (2, 3, 1), tmp_path)


@pytest.mark.parametrize("npus, match", [
    ([], r"npus_per_dim = \[\]: expected at least one dimension"),
    ([2, 0], r"npus_per_dim\[1\] = 0: expected an integer >= 1"),
    ("2x2", r"npus_per_dim = '2x2': expected a list"),
])
def test_bad_network(tmp_path, npus, match):
    with pytest.raises(LibraInputError, match=match):
        write_traces([START], npus, tmp_path)


def test_rounding_report_and_node_ids_check_nodes():
    with pytest.raises(LibraInputError, match=r"nodes\[0\] \(C\)\.duration_ns = nan"):
        rounding_report([StepNode("C", "compute", duration_ns=math.nan)])
    with pytest.raises(LibraInputError, match=r"nodes\[0\] \(C\)\.kind = 'gpu'"):
        node_ids([StepNode("C", "gpu")])


def test_unwritable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(LibraInputError, match=r"out_dir: cannot write the Chakra traces"):
        write_traces([START], [1], blocker / "sub")


# --------------------------------------------------------------------------- bad files
@pytest.fixture()
def good_file(tmp_path):
    return write_traces(GRAPH, NPUS, tmp_path / "good")[0].read_bytes()


@pytest.mark.parametrize("cut, match", [
    (lambda b: b[:-1], r"truncated Chakra trace: message 13 \(node 12\) at byte \d+ says it "
                       r"has \d+ bytes but the file ends \d+ bytes later"),
    (lambda b: b[:3], r"truncated Chakra trace: the GlobalMetadata at byte 0 says it has 7 "
                      r"bytes"),
    (lambda b: b + b"\x80", r"the length of message 14 \(node 13\) at byte \d+ is not a "
                            r"complete varint"),
    (lambda b: b"\xff" * 11, r"the length of the GlobalMetadata at byte 0 is not a complete "
                             r"varint"),
    (lambda b: b + b"\x01\x0f", r"corrupt Chakra trace: message 14 \(node 13\) at byte \d+ "
                                r"does not parse"),
    (lambda b: b"", r"the Chakra trace is empty"),
    (lambda b: b + encode_message(Node(type=42)), r"message 14 \(node 13\) has node type 42, "
                                                  r"which is not a Chakra NodeType"),
])
def test_corrupt_files(tmp_path, good_file, cut, match):
    path = tmp_path / "wl.0.et"
    path.write_bytes(cut(good_file))
    with pytest.raises(LibraInputError, match=match) as info:
        read_trace(path)
    assert str(path) in str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(LibraInputError, match=r"wl\.7\.et: cannot read the Chakra trace"):
        read_trace(tmp_path / "wl.7.et")


def test_read_other_attribute_kinds(tmp_path):
    """Metadata attributes and every value kind come back as Python values."""
    meta = GlobalMetadata(version="0.0.4")
    meta.attr.append(AttributeProto(name="schema", string_val="libra"))
    node = Node(id=0, name="M", type=NodeType.METADATA_NODE, ctrl_deps=[3])
    node.attr.append(AttributeProto(name="i", int32_list=chakra.CLASSES["Int32List"](
        values=[1, -2])))
    node.attr.append(AttributeProto(name="x", double_val=0.5))
    node.attr.append(AttributeProto(name="b", bytes_val=b"\x00"))
    node.attr.append(AttributeProto(name="none"))
    path = tmp_path / "t.et"
    path.write_bytes(encode_message(meta) + encode_message(node))
    got_meta, (got,) = read_trace(path)
    assert got_meta == {"version": "0.0.4", "attrs": {"schema": "libra"}}
    assert got["type"] == "METADATA_NODE" and got["ctrl_deps"] == [3]
    assert got["attrs"] == {"i": [1, -2], "x": 0.5, "b": b"\x00", "none": None}


def test_send_recv_over_part_of_a_dimension_rings_each_block(tmp_path):
    """Pipeline stages over 2 of a dimension's 4 NPUs (group 2 of npus 4): each NPU sends to
    the next of its block of 2 (0 <-> 1, 2 <-> 3 on each coordinate of dimension 1), not
    along the whole dimension; a group that does not divide the dimension is refused."""
    node = StepNode("S", "comm", (0,), collective=Collective.SENDRECV, size_bytes=64.0,
                    involved=(True, False), group=(2, 1))
    paths = write_traces([START, node], [4, 2], tmp_path)
    pairs = set()
    for rank, path in enumerate(paths):
        _, nodes = chakra.read_trace(path)
        send = next(n for n in nodes if n["name"] == "S.send")
        recv = next(n for n in nodes if n["name"] == "S.recv")
        assert send["attrs"]["comm_src"] == rank == recv["attrs"]["comm_dst"]
        pairs.add((rank, send["attrs"]["comm_dst"], recv["attrs"]["comm_src"]))
    assert pairs == {(0, 1, 1), (1, 0, 0), (2, 3, 3), (3, 2, 2),
                     (4, 5, 5), (5, 4, 4), (6, 7, 7), (7, 6, 6)}
    uneven = StepNode("S", "comm", (0,), collective=Collective.SENDRECV, size_bytes=64.0,
                      involved=(True, False), group=(4, 1))
    with pytest.raises(LibraInputError, match=r"group\[0\] = 4: expected 6"):
        write_traces([START, uneven], [6, 2], tmp_path)
