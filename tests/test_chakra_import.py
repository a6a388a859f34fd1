"""Tests of libra_jax.inputs.chakra_import: Chakra trace sets read into a TraceSet.

Trace sets are written here byte by byte with the schema's message classes (`_write`), so
every rule of the reader is checked against a hand-built file: node kinds, skips and their
inherited dependencies, attribute types, groups, and every refusal with its message.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import logging
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

from libra_jax.inputs import LIBRA_INPUTS_DIR, chakra
from libra_jax.inputs import chakra_import
from libra_jax.inputs.chakra_import import read_chakra as _read_chakra
from libra_jax.inputs.chakra_schema import (
    AttributeProto,
    BoolList,
    CollectiveCommType,
    GlobalMetadata,
    Node,
    NodeType,
    encode_message,
)
from libra_jax.inputs.workload import load_workload
from libra_jax.model import step
from libra_jax.types import Collective, CommGroup, LibraInputError, StepNode, TraceNode

COMP, COLL, SEND, RECV = (NodeType.COMP_NODE, NodeType.COMM_COLL_NODE,
                          NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE)
AR = CollectiveCommType.ALL_REDUCE


# --------------------------------------------------------------------------- helpers
def _outcome(prefix, *args, **kw):
    """read_chakra's TraceSet, or its LibraInputError's message."""
    try:
        return _read_chakra(prefix, *args, **kw)
    except LibraInputError as e:
        return f"LibraInputError: {e}"


def _assert_same(fast, full):
    """Two outcomes of read_chakra are equal: the same message, or TraceSets equal to the
    last bit (every array's dtype, shape and values; groups, skips and notes in order)."""
    assert type(fast) is type(full), (fast, full)
    if isinstance(full, str):
        assert fast == full
        return
    assert (fast.prefix, fast.groups, fast.notes) == (full.prefix, full.groups, full.notes)
    assert list(fast.skipped.items()) == list(full.skipped.items())
    assert len(fast.ranks) == len(full.ranks)
    for a, b in zip(fast.ranks, full.ranks):
        for field in dataclasses.fields(a):
            x, y = getattr(a, field.name), getattr(b, field.name)
            if isinstance(y, np.ndarray):
                assert x.dtype == y.dtype and x.shape == y.shape, field.name
                assert np.array_equal(x, y), (a.rank, field.name)
            else:
                assert x == y, (a.rank, field.name)


def read_chakra(prefix, *args, **kw):
    """read_chakra with its replica path (the default), checked against reading every file
    in full (replicas=False): every test of this file also tests that they agree."""
    if "replicas" in kw:
        return _read_chakra(prefix, *args, **kw)
    fast = _outcome(prefix, *args, **kw)
    _assert_same(fast, _outcome(prefix, *args, replicas=False, **kw))
    if isinstance(fast, str):
        raise LibraInputError(fast.removeprefix("LibraInputError: "))
    return fast


def _attr(name, **value):
    return AttributeProto(name=name, **value)


def comp(i, us=5, deps=(), **kw):
    """A compute node of ``us`` µs (num_ops 1, so 0 µs is not invalid unless asked)."""
    node = Node(id=i, name=kw.pop("name", f"c{i}"), type=COMP, duration_micros=us,
                data_deps=deps, ctrl_deps=kw.pop("ctrl", ()))
    node.attr.append(_attr("is_cpu_op", bool_val=kw.pop("cpu", False)))
    ops = kw.pop("num_ops", 1)
    if ops is not None:
        node.attr.append(_attr("num_ops", int64_val=ops))
    assert not kw
    return node


def coll(i, size=1024, deps=(), comm_type=AR, dims=(True,), pg=None, **kw):
    """A collective node; ``size`` / ``comm_type`` None leave the attribute out, a dict
    gives its value field (``{"uint64_val": 5}``)."""
    node = Node(id=i, name=kw.pop("name", f"k{i}"), type=COLL, data_deps=deps)
    node.attr.append(_attr("is_cpu_op", bool_val=kw.pop("cpu", False)))
    if comm_type is not None:
        node.attr.append(_attr("comm_type", int64_val=comm_type))
    if size is not None:
        node.attr.append(_attr("comm_size", **(size if isinstance(size, dict)
                                              else {"int64_val": size})))
    if dims is not None:
        node.attr.append(_attr("involved_dim", bool_list=BoolList(values=dims)))
    if pg is not None:
        node.attr.append(_attr("pg_name", string_val=pg))
    assert not kw
    return node


def p2p(i, kind, peer, rank, tag=7, size=256, deps=()):
    """A send (to ``peer``) or receive (from ``peer``) on ``rank``."""
    node = Node(id=i, name=f"{'s' if kind == SEND else 'r'}{i}", type=kind, data_deps=deps)
    src, dst = (rank, peer) if kind == SEND else (peer, rank)
    for name, value in (("comm_src", src), ("comm_dst", dst), ("comm_tag", tag)):
        if value is not None:
            node.attr.append(_attr(name, int32_val=value))
    if size is not None:
        node.attr.append(_attr("comm_size", int64_val=size))
    return node


def _write(folder, ranks, *, prefix="wl", meta=True, gz=False):
    """Writes ``ranks`` (one list of Nodes, or of raw bytes, per rank); returns the prefix."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for r, nodes in enumerate(ranks):
        if isinstance(nodes, bytes):
            data = nodes
        else:
            head = [encode_message(GlobalMetadata(version="0.0.4"))] if meta else []
            data = b"".join(head + [encode_message(n) for n in nodes])
        path = folder / f"{prefix}.{r}.et"
        if gz:
            path.with_name(path.name + ".gz").write_bytes(gzip.compress(data))
        else:
            path.write_bytes(data)
    return str(folder / prefix)


def _deps(trace, i):
    """Node i's dependencies as ET ids."""
    return sorted(int(trace.node_id[j]) for j in trace.deps[trace.dep_ptr[i]:trace.dep_ptr[i + 1]])


def _graph(trace):
    return {int(trace.node_id[i]): _deps(trace, i) for i in range(trace.num_nodes)}


def _refused(tmp_path, ranks, match, **kw):
    groups = kw.pop("comm_groups", None)
    prefix = _write(tmp_path, ranks, **{k: kw.pop(k) for k in ("meta", "gz") if k in kw})
    with pytest.raises(LibraInputError, match=match):
        read_chakra(prefix, groups, **kw)


# --------------------------------------------------------------------------- round trip
def _expected(nodes):
    """Each StepNode's ET ids kept, with its dependencies after ASTRA-sim's skip of 0 µs
    compute nodes (written with num_ops 0): computed here by recursion, independently of
    the reader's algorithm."""
    ids = chakra.node_ids(nodes)
    zero = {i for i, n in enumerate(nodes)
            if n.kind == "compute" and math.floor((n.duration_ns + 500) / 1000) == 0}

    def through(i):  # the kept StepNodes that a dependency on i stands for
        if i not in zero:
            return {i}
        return set().union(*[through(d) for d in nodes[i].deps]) if nodes[i].deps else set()

    out = {}
    for i, n in enumerate(nodes):
        if i in zero:
            continue
        dep_ids = sorted(k for d in n.deps for j in through(d) for k in ids[j])
        for k in ids[i]:
            out[k] = dep_ids
    return out, ids, zero


def test_round_trip_shipped_workload(tmp_path):
    """ResNet-50 as shipped (its communicator's groups scaled to a 2x2x2 network) written by
    chakra.write_traces and read back: the same nodes, times, sizes, groups and deps."""
    wl = load_workload(os.path.join(LIBRA_INPUTS_DIR, "workload/ResNet_50.txt"),
                       os.path.join(LIBRA_INPUTS_DIR, "communicator/ResNet_50_3d.yml"))
    wl = dataclasses.replace(wl, communicator=np.where(wl.communicator > 0, 2, wl.communicator))
    nodes = step.step_graph(wl, "dp_overlap")
    chakra.write_traces(nodes, (2, 2, 2), tmp_path)
    ts = read_chakra(tmp_path / "wl", num_dims=3)
    assert ts.num_ranks == 8 and [t.rank for t in ts.ranks] == list(range(8))
    want, ids, zero = _expected(nodes)
    assert ts.skipped == ({"invalid_compute": 8 * len(zero)} if zero else {})
    for t in ts.ranks:
        assert t.path == str(tmp_path / f"wl.{t.rank}.et")
        assert _graph(t) == want
        assert list(t.node_id) == sorted(want)
        kept = [n for i, n in enumerate(nodes) if i not in zero]
        assert t.name == tuple(n.name for n in kept)
        for i, n in enumerate(kept):
            if n.kind == "compute":
                assert t.kind[i] == TraceNode.COMPUTE
                assert t.duration_ns[i] == math.floor((n.duration_ns + 500) / 1000) * 1000
                assert t.group[i] == -1 and t.size_bytes[i] == 0
            else:
                assert t.kind[i] == TraceNode.COLLECTIVE
                assert t.collective[i] == n.collective
                assert t.size_bytes[i] == math.floor(n.size_bytes + 0.5)
                assert ts.groups[t.group[i]].involved == n.involved
    assert {g.involved for g in ts.groups} == {n.involved for n in nodes if n.kind == "comm"}
    assert len(set(ts.groups)) == len(ts.groups)


def test_round_trip_send_recv_and_gz(tmp_path):
    """A graph with send-recv (a ring shift on dimension 1 of 2x3) round-trips, the sends
    and receives matched; the same files gzipped read the same."""
    graph = [StepNode("F", "compute", duration_ns=3000.0),
             StepNode("P", "comm", (0,), collective=Collective.SENDRECV, size_bytes=4096.0,
                      involved=(False, True), group=(1, 3)),
             StepNode("A", "comm", (1,), collective=Collective.ALLGATHER, size_bytes=100.0,
                      involved=(True, True), group=(2, 3)),
             StepNode("B", "compute", (2,), duration_ns=1000.0)]
    chakra.write_traces(graph, (2, 3), tmp_path / "plain")
    ts = read_chakra(tmp_path / "plain" / "wl", num_dims=2)
    for t in ts.ranks:
        assert list(t.kind) == [TraceNode.COMPUTE, TraceNode.SEND, TraceNode.RECV,
                                TraceNode.COLLECTIVE, TraceNode.COMPUTE]
        c1 = t.rank // 2
        assert t.peer[1] == t.rank % 2 + 2 * ((c1 + 1) % 3)
        assert t.peer[2] == t.rank % 2 + 2 * ((c1 - 1) % 3)
        assert list(t.tag[1:3]) == [1, 1] and list(t.size_bytes[1:3]) == [4096, 4096]
        assert _graph(t) == {0: [], 1: [0], 2: [0], 3: [1, 2], 4: [3]}
        assert t.collective[3] == Collective.ALLGATHER
    folder = tmp_path / "gz"
    folder.mkdir()
    for p in (tmp_path / "plain").iterdir():
        (folder / (p.name + ".gz")).write_bytes(gzip.compress(p.read_bytes()))
    tz = read_chakra(folder / "wl", num_dims=2)
    for a, b in zip(ts.ranks, tz.ranks):
        for field in ("node_id", "kind", "duration_ns", "collective", "size_bytes", "group",
                      "peer", "tag", "dep_ptr", "deps"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert b.path.endswith(".et.gz")


# --------------------------------------------------------------------------- formats
def test_2023_format_keeps_first_node(tmp_path, caplog):
    """No GlobalMetadata: the first message is a node, kept (ASTRA-sim would lose it) --
    also when its id is 0 (proto3 then writes no field 1: it is seen by its other fields)."""
    nodes = [comp(0, 3), comp(1, 4, deps=[0])]
    prefix = _write(tmp_path, [nodes], meta=False)
    with caplog.at_level(logging.INFO, logger="libra_jax"):
        ts = read_chakra(prefix)
    t = ts.ranks[0]
    assert list(t.node_id) == [0, 1] and list(t.duration_ns) == [3000, 4000]
    assert any("2023 format" in n and n.startswith("1 file") for n in ts.notes)
    assert any("2023 format" in r.getMessage() for r in caplog.records)
    # With the metadata the same nodes read the same.
    t2 = read_chakra(_write(tmp_path / "m", [nodes])).ranks[0]
    assert list(t2.node_id) == [0, 1] and not read_chakra(_write(tmp_path / "m", [nodes])).notes


def test_metadata_with_later_fields(tmp_path):
    """A metadata record with a field this schema lacks (a later Chakra) is still the
    metadata: it has its version string."""
    head = GlobalMetadata(version="0.0.5").SerializeToString() + b"\x1a\x02ab"  # field 3
    data = bytes([len(head)]) + head + encode_message(comp(4, 2))
    ts = read_chakra(_write(tmp_path, [data]))
    assert list(ts.ranks[0].node_id) == [4] and ts.notes == ()


def test_rank_count_and_gap(tmp_path):
    prefix = _write(tmp_path, [[comp(0)]] * 3)
    assert read_chakra(prefix).num_ranks == 3
    os.remove(f"{prefix}.1.et")
    with pytest.raises(LibraInputError, match=r"wl\.1\.et: missing .* 2 rank files up to"):
        read_chakra(prefix)
    with pytest.raises(LibraInputError, match=r"no trace files .*nothing\.<rank>\.et"):
        read_chakra(tmp_path / "nothing")
    os.remove(f"{prefix}.2.et")
    _write(tmp_path, [[comp(0)]], gz=True)  # wl.0.et.gz beside wl.0.et
    with pytest.raises(LibraInputError, match=r"wl\.0\.et: both it and .*wl\.0\.et\.gz"):
        read_chakra(prefix)


@pytest.mark.parametrize("data, match", [
    (b"", "is empty"),
    (encode_message(GlobalMetadata(version="0.0.4")) + b"\x80", "not a complete varint"),
    (encode_message(GlobalMetadata(version="0.0.4")) + encode_message(comp(1))[:-3],
     r"message 1 at byte 8: it says it has \d+ bytes .* \(truncated\)"),
    (b"\x05\xff\xff\xff\xff\xff", r"not protobuf"),
    (b"\x02\x08\x01" + b"\x03\x0a\xff\xff",  # a node, then a node whose field 1 is a bad LEN
     r"message 1 \(node number 1 in file order, byte 3\) does not parse as a Node"),
])
def test_corrupt_files(tmp_path, data, match):
    _refused(tmp_path, [data], r"wl\.0\.et: .*" + match)


def test_corrupt_gzip(tmp_path):
    whole = gzip.compress(bytes(range(256)) * 4)
    (tmp_path / "wl.0.et.gz").write_bytes(whole[:len(whole) - 12])  # the end marker cut
    with pytest.raises(LibraInputError, match=r"wl\.0\.et\.gz: corrupt or truncated gzip"):
        read_chakra(tmp_path / "wl")
    (tmp_path / "wl.0.et.gz").write_bytes(b"not gzip at all")
    with pytest.raises(LibraInputError, match=r"wl\.0\.et\.gz: cannot read the Chakra trace"):
        read_chakra(tmp_path / "wl")


def test_file_size_limit(tmp_path, monkeypatch):
    prefix = _write(tmp_path, [[comp(i) for i in range(100)]], gz=True)
    monkeypatch.setenv("LIBRA_JAX_MAX_FILE_MB", "0.001")
    with pytest.raises(LibraInputError, match=r"larger than the 0\.001 MB .*\(decompressed\)"):
        read_chakra(prefix)


# --------------------------------------------------------------------------- skips
def test_skips_inherit_dependencies(tmp_path, caplog):
    """0 µs / 0-op compute, INVALID, METADATA and CPU-op nodes are removed and their
    dependants wait for what they waited for, transitively (a diamond included)."""
    invalid = Node(id=3, name="inv", type=NodeType.INVALID_NODE, data_deps=[1, 2])
    meta = Node(id=4, name="meta", type=NodeType.METADATA_NODE, data_deps=[3])
    nodes = [comp(1, 2), comp(2, 0, num_ops=0), invalid, meta,
             comp(5, 7, deps=[4], cpu=True), comp(6, 1, deps=[5, 2]),
             coll(8, deps=[6, 5], cpu=True, dims=None),  # a CPU-op collective
             comp(9, 1, deps=[8, 4]), comp(10, 0, deps=[9], num_ops=None)]
    prefix = _write(tmp_path, [nodes])
    with caplog.at_level(logging.INFO, logger="libra_jax"):
        ts = read_chakra(prefix)
    assert _graph(ts.ranks[0]) == {1: [], 6: [1], 9: [1, 6]}
    assert ts.skipped == {"invalid_compute": 2, "invalid_node": 1, "metadata_node": 1,
                          "cpu_op": 2}
    assert "1 compute node(s) with 0 µs and no num_ops: read as num_ops 0 (ASTRA-sim reads " \
           "it uninitialised)." in ts.notes
    assert any(n.startswith("2 CPU ops") for n in ts.notes)
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "2 CPU ops" in logged and "1 METADATA_NODE" in logged
    # cpu_ops="compute": the CPU ops are timed by their duration (the collective has 0 µs
    # and no num_ops: invalid, skipped).
    ts = read_chakra(prefix, cpu_ops="compute")
    t = ts.ranks[0]
    assert _graph(t) == {1: [], 5: [1], 6: [5], 9: [1, 5, 6]}
    assert t.duration_ns[list(t.node_id).index(5)] == 7000
    assert ts.skipped == {"invalid_compute": 3, "invalid_node": 1, "metadata_node": 1}
    assert any("CPU op(s) kept as COMPUTE" in n for n in ts.notes)


def test_cpu_collective_timed_as_compute(tmp_path):
    nodes = [comp(0, 2), coll(1, deps=[0], cpu=True)]
    nodes[1].duration_micros = 9
    ts = read_chakra(_write(tmp_path, [nodes]), cpu_ops="compute")
    t = ts.ranks[0]
    assert list(t.kind) == [TraceNode.COMPUTE] * 2 and list(t.duration_ns) == [2000, 9000]
    assert any("CPU-op node(s) of a type other than COMP_NODE" in n for n in ts.notes)
    with pytest.raises(LibraInputError, match="cpu_ops = 'gpu'"):
        read_chakra(_write(tmp_path, [nodes]), cpu_ops="gpu")


def test_zero_us_with_ops_is_one_ns(tmp_path):
    ts = read_chakra(_write(tmp_path, [[comp(0, 0, num_ops=5)]]))
    assert list(ts.ranks[0].duration_ns) == [1.0]
    assert any("1 ns" in n for n in ts.notes)


def test_ctrl_and_repeated_deps(tmp_path):
    nodes = [comp(0), comp(1, deps=[0, 0], ctrl=[0]), comp(2, deps=[1], ctrl=[0, 1])]
    ts = read_chakra(_write(tmp_path, [nodes]))
    assert _graph(ts.ranks[0]) == {0: [], 1: [0], 2: [1]}
    assert "3 ctrl_deps ignored (ASTRA-sim's feeder follows data_deps only)." in ts.notes
    assert any(n.startswith("1 repeated data_deps") for n in ts.notes)


def test_unordered_ids_and_deps_on_later_ids(tmp_path):
    """Ids need not be in file order, nor deps point to smaller ids (only acyclic)."""
    nodes = [comp(7, 1, deps=[2]), comp(2, 2, deps=[9]), comp(9, 3)]
    t = read_chakra(_write(tmp_path, [nodes])).ranks[0]
    assert list(t.node_id) == [2, 7, 9] and list(t.duration_ns) == [2000, 1000, 3000]
    assert _graph(t) == {2: [9], 7: [2], 9: []}
    assert t.name == ("c2", "c7", "c9")


# --------------------------------------------------------------------------- attributes
@pytest.mark.parametrize("field", ["uint64_val", "uint32_val", "int32_val", "sint64_val",
                                   "sint32_val", "fixed64_val", "fixed32_val",
                                   "sfixed64_val", "sfixed32_val", "double_val",
                                   "float_val"])
def test_sizes_in_other_number_types(tmp_path, field):
    value = 65536.0 if field in ("double_val", "float_val") else 65536
    ts = read_chakra(_write(tmp_path, [[coll(0, size={field: value})]]))
    assert ts.ranks[0].size_bytes[0] == 65536
    assert (f"1 comm_size attribute(s) stored as {field}: read as stored (ASTRA-sim reads "
            f"int64_val and would take them as 0).") in ts.notes


def test_other_attribute_types(tmp_path):
    node = Node(id=0, name="x", type=COLL)
    for attr in (_attr("is_cpu_op", int32_val=0), _attr("comm_type", uint32_val=2),
                 _attr("comm_size", int64_val=8), _attr("pg_name", int64_val=3)):
        node.attr.append(attr)
    ts = read_chakra(_write(tmp_path, [[node], [node], [comp(0)]]), {"3": [1, 0]})
    assert ts.ranks[0].collective[0] == Collective.ALLGATHER
    assert ts.groups == (CommGroup(name="3", ranks=(1, 0)),)
    assert len([n for n in ts.notes if "stored as" in n]) == 2
    assert ("2 pg_name attribute(s) stored as int64_val: read as stored (ASTRA-sim reads "
            "string_val and would take them as an empty name, i.e. no group).") in ts.notes
    assert not any("is_cpu_op" in n for n in ts.notes)  # 0 as int32: what ASTRA-sim reads
    node.attr[0].CopyFrom(_attr("is_cpu_op", uint64_val=1))
    node.duration_micros = 4  # a CPU-op collective: timed as compute
    ts = read_chakra(_write(tmp_path / "b", [[comp(1), node]]), cpu_ops="compute")
    assert ("1 is_cpu_op attribute(s) stored as uint64_val: read as stored (ASTRA-sim reads "
            "bool_val and would take them as False).") in ts.notes
    assert list(ts.ranks[0].kind) == [TraceNode.COMPUTE] * 2
    assert list(ts.ranks[0].duration_ns) == [4000, 5000]


@pytest.mark.parametrize("attr, match", [
    (_attr("comm_size", double_val=1.5), r"comm_size = 1\.5 \(double_val\): expected an "
                                         r"integer of bytes"),
    (_attr("comm_size", int64_val=-4), r"comm_size = -4: expected an integer in \[0, 1e\+18\]"),
    (_attr("comm_size", uint64_val=2**64 - 1), r"comm_size = 18446744073709551615"),
    (_attr("comm_size", double_val=float("inf")), r"comm_size = inf"),
    (_attr("comm_size", string_val="4096"), r"comm_size has string_val: expected an integer"),
    (_attr("comm_size"), r"comm_size has no value"),
])
def test_bad_sizes(tmp_path, attr, match):
    node = coll(0, size=None)
    node.attr.append(attr)
    _refused(tmp_path, [[node]], r"wl\.0\.et: node 0 \(k0\): attribute " + match)


# --------------------------------------------------------------------------- refusals
def test_refusals_name_file_and_node(tmp_path):
    cases = [
        ([[comp(0), comp(1, deps=[5])]], r"wl\.0\.et: node 1 \(c1\): depends on node 5, which "
                                         r"is not in the file"),
        ([[comp(0, deps=[2]), comp(1, deps=[0]), comp(2, deps=[1]), comp(3, deps=[2])]],
         r"wl\.0\.et: node \d \(c\d\): is on a dependency cycle \(node ids [012] <- [012] <- "
         r"[012] <- [012]\)"),
        ([[comp(4, deps=[4])]], r"node 4 \(c4\): is on a dependency cycle"),
        ([[comp(0), comp(0)]], r"wl\.0\.et: node id 0 is used by more than one node"),
        ([[coll(3, size=None)]], r"node 3 \(k3\): COMM_COLL_NODE without comm_size"),
        ([[coll(3, comm_type=None)]], r"node 3 \(k3\): COMM_COLL_NODE without comm_type"),
        ([[coll(3, comm_type=CollectiveCommType.BROADCAST)]],
         r"node 3 \(k3\): comm_type BROADCAST is not supported: ASTRA-sim does not simulate"),
        ([[coll(3, comm_type=CollectiveCommType.REDUCE_SCATTER_BLOCK)]],
         r"comm_type REDUCE_SCATTER_BLOCK is not supported: ASTRA-sim issues nothing"),
        ([[coll(3, comm_type=99)]], r"comm_type 99 is not supported"),
        ([[Node(id=2, name="m", type=NodeType.MEM_LOAD_NODE)]],
         r"node 2 \(m\): MEM_LOAD_NODE is not supported: ASTRA-sim times it with its "
         r"remote-memory backend"),
        ([[Node(id=2, name="m", type=42)]], r"node 2 \(m\): node type 42 is not a Chakra"),
        ([[coll(0, dims=(False, False))]], r"involved_dim = \[False, False\] involves no "
                                           r"dimension"),
        ([[p2p(0, SEND, 1, 0)], [p2p(0, RECV, 0, 1, tag=8)]],
         r"wl\.0\.et: node 0 \(s0\): send of 256 bytes from rank 0 to rank 1 with tag 7 has "
         r"no matching receive: 1 send\(s\) on rank 0 and 0 receive\(s\) on rank 1"),
        ([[p2p(0, SEND, 1, 0), p2p(1, SEND, 1, 0)], [p2p(0, RECV, 0, 1)]],
         r"wl\.0\.et: node 0 \(s0\): send .* 2 send\(s\) on rank 0 and 1 receive"),
        ([[comp(0)], [p2p(0, RECV, 0, 1, size=8)]],
         r"wl\.1\.et: node 0 \(r0\): receive of 8 bytes from rank 0 to rank 1 .* no matching "
         r"send"),
        ([[p2p(0, SEND, 2, 0)], [comp(0)]], r"wl\.0\.et: node 0 \(s0\): comm_dst = 2: "
                                            r"expected another rank in \[0, 2\)"),
        ([[p2p(0, SEND, 0, 0)], [comp(0)]], r"comm_dst = 0: expected another rank .* \(this "
                                            r"file is rank 0\)"),
        ([[p2p(0, SEND, 1, 0, tag=None)], [comp(0)]], r"COMM_SEND_NODE without comm_tag"),
        ([[p2p(0, SEND, 1, 0, size=None)], [comp(0)]], r"COMM_SEND_NODE without comm_size"),
        ([[p2p(0, RECV, None, 0)], [comp(0)]], r"COMM_RECV_NODE without comm_src"),
        ([[p2p(0, SEND, 1, 0, size=0)], [p2p(0, RECV, 0, 1, size=0)]],
         r"wl\.0\.et: node 0 \(s0\): COMM_SEND_NODE of 0 bytes: ASTRA-sim's analytical "
         r"network aborts"),
        ([[Node(id=0, name="d", type=COMP, duration_micros=10**16)]],
         r"node 0 \(d\): duration_micros = 10000000000000000: expected at most 1e\+15"),
    ]
    for k, (ranks, match) in enumerate(cases):
        _refused(tmp_path / str(k), ranks, match)


def test_duplicate_attribute_and_bad_involved_type(tmp_path):
    node = coll(0)
    node.attr.append(_attr("comm_size", int64_val=5))
    _refused(tmp_path / "a", [[node]], r"node 0 \(k0\): attribute comm_size is given twice")
    node = coll(0, dims=None)
    node.attr.append(_attr("involved_dim", int64_list={"values": [1]}))
    _refused(tmp_path / "b", [[node]], r"involved_dim is int64_list: expected a bool_list")
    node = coll(0)
    node.attr[0].CopyFrom(_attr("is_cpu_op", int32_val=2))
    _refused(tmp_path / "c", [[node]], r"attribute is_cpu_op = 2: expected an integer in "
                                       r"\[0, 1\] \(or a bool\)")


def test_tag_range(tmp_path):
    send = p2p(0, SEND, 1, 0, tag=None)
    send.attr.append(_attr("comm_tag", int64_val=2**32))
    _refused(tmp_path, [[send], [comp(0)]], r"comm_tag = 4294967296: expected an integer in "
                                            r"\[-2147483648, 4\.29497e\+09\]")
    # A negative int32 tag is ASTRA-sim's uint32: it matches a receive of tag + 2**32.
    recv = p2p(0, RECV, 0, 1, tag=None)
    recv.attr.append(_attr("comm_tag", uint32_val=2**32 - 1))
    ts = read_chakra(_write(tmp_path / "n", [[p2p(0, SEND, 1, 0, tag=-1)], [recv]]))
    assert ts.ranks[0].tag[0] == ts.ranks[1].tag[0] == 2**32 - 1
    assert ("1 negative comm_tag value(s) read as ASTRA-sim reads them, as unsigned 32-bit "
            "integers (tag + 2**32).") in ts.notes


def test_other_end_field_and_empty_rank(tmp_path):
    """A send's comm_src (a receive's comm_dst) is not used; a file with no nodes is a
    rank with no work."""
    send = p2p(0, SEND, 1, 5)  # comm_src 5: not its rank
    ts = read_chakra(_write(tmp_path, [[send], [p2p(0, RECV, 0, 1)], []]))
    assert ts.ranks[2].num_nodes == 0 and list(ts.ranks[2].dep_ptr) == [0]
    assert ("1 COMM_SEND_NODE(s) whose comm_src is not their own rank: ignored, as "
            "ASTRA-sim ignores it.") in ts.notes


# --------------------------------------------------------------------------- groups
def test_involved_dim_against_num_dims(tmp_path):
    prefix = _write(tmp_path, [[coll(0, dims=(True, False, False, False))]])
    ts = read_chakra(prefix, num_dims=2)
    assert ts.groups == (CommGroup(name="involved_dim=10", involved=(True, False)),)
    assert ("1 involved_dim list(s) of 4 entries for a 2-dimension network: the extra "
            "entries are all False and were dropped.") in ts.notes
    assert read_chakra(prefix).groups[0].involved == (True, False, False, False)
    with pytest.raises(LibraInputError, match=r"node 0 \(k0\): involved_dim = \[True, False, "
                                              r"False, False\] has 4 entries for a "
                                              r"5-dimension network \(ASTRA-sim reads past its "
                                              r"end, hangs"):
        read_chakra(prefix, num_dims=5)
    prefix = _write(tmp_path / "b", [[coll(0, dims=(True, False, True))]])
    with pytest.raises(LibraInputError, match=r"has 3 entries and involves dimension 2, but "
                                              r"the network has 2 dimensions"):
        read_chakra(prefix, num_dims=2)


def test_no_involved_dim_means_every_dimension(tmp_path):
    prefix = _write(tmp_path, [[coll(0, dims=None), coll(1, dims=None, deps=[0])]])
    ts = read_chakra(prefix, num_dims=3)
    assert ts.groups == (CommGroup(name="involved_dim=111", involved=(True,) * 3),)
    assert ("2 collective(s) with neither involved_dim nor pg_name: every dimension "
            "involved (ASTRA-sim's rule; it assumes 4 dimensions, all involved).") in ts.notes
    assert any("for this 5-dimension network it would read past them" in n
               for n in read_chakra(prefix, num_dims=5).notes)
    with pytest.raises(LibraInputError, match=r"node 0 \(k0\): the collective has neither "
                                              r"involved_dim nor pg_name, .* pass num_dims"):
        read_chakra(prefix)


def test_pg_name_groups(tmp_path):
    """Groups from the JSON in listed order, deduplicated; the group of every NPU is the
    ordinary collective over every dimension; involved_dim beside pg_name is ignored."""
    groups = {"1": [2, 0], "2": [1, 3], "5": [3, 2, 1, 0]}
    ranks = [[coll(0, pg=str(1 + r % 2), dims=(True, False)), coll(1, pg="5", deps=[0])]
             for r in (0, 1, 0, 1)]
    ranks[3][0].attr[-1].string_val = "02"  # the id 2 written otherwise: the same group
    (tmp_path / "g.json").write_text(json.dumps(groups))
    prefix = _write(tmp_path, ranks)
    ts = read_chakra(prefix, tmp_path / "g.json", num_dims=2)
    assert ts.groups == (CommGroup(name="1", ranks=(2, 0)),
                         CommGroup(name="5", involved=(True, True)),
                         CommGroup(name="2", ranks=(1, 3)))
    assert [list(t.group) for t in ts.ranks] == [[0, 1], [2, 1], [0, 1], [2, 1]]
    assert any(n.startswith("8 collective(s) with both pg_name and involved_dim") for n in
               ts.notes)
    assert any("pg_name '5' is a group of all 4 NPUs" in n and "(4 node(s))" in n
               for n in ts.notes)
    assert read_chakra(prefix, groups, num_dims=2).groups == ts.groups  # a loaded dict
    with pytest.raises(LibraInputError, match=r"pg_name '5' is a group of all 4 NPUs, .* "
                                              r"pass num_dims"):
        read_chakra(prefix, groups)


@pytest.mark.parametrize("groups, match", [
    (None, r"wl\.0\.et: node 0 \(k0\): pg_name = '1' but no comm_groups JSON was given"),
    ({"2": [0, 1]}, r"wl\.0\.et: node 0 \(k0\): pg_name = '1': no group 1 in the comm_groups "
                    r"mapping \(it has \[2\]\)"),
    ({"1": [0, 3]}, r"node 0 \(k0\): pg_name = '1': group '1' of the comm_groups mapping lists "
                    r"NPU 3, outside the trace set's ranks \[0, 3\)"),
    ({"1": [0, 0]}, r"node 0 \(k0\): pg_name = '1': group '1' .* lists NPU 0 more than once"),
    ({"1": [0]}, r"node 0 \(k0\): pg_name = '1': group '1' of the comm_groups mapping lists "
                 r"one NPU; ASTRA-sim never finishes"),
    ({"1": [1, 2], "2": [0, 1, 2]}, r"node 0 \(k0\): pg_name '1': group \[1, 2\] of the "
                                    r"comm_groups mapping does not list rank 0"),
    ({"0": [0, 1]}, r"group id '0': expected an integer > 0"),
    ({"x": [0, 1]}, r"group id 'x': expected an integer > 0"),
    ({"1": []}, r"group '1' = \[\]: expected a non-empty list"),
    ({"1": [0, "1"]}, r"group '1'\[1\] = '1': expected an integer"),
    ({"1": [0, 1], " 1": [0, 1]}, r"group id 1 is given twice"),
])
def test_pg_name_errors(tmp_path, groups, match):
    _refused(tmp_path, [[coll(0, pg="1")], [coll(0, pg="1")], [comp(0)]], match,
             comm_groups=groups)


def test_pg_json_file_errors(tmp_path):
    prefix = _write(tmp_path, [[coll(0, pg="abc")]])
    for text, match in (('{"1": [0]', r"g\.json, line 1: not valid JSON"),
                        ('[[0]]', r"g\.json: expected a JSON object"),
                        ('{"1": [0], "1": [0]}', r"g\.json: group '1' is given twice"),
                        ('{"1": [0]}', r"node 0 \(k0\): pg_name = 'abc': expected an integer "
                                       r"group id")):
        (tmp_path / "g.json").write_text(text)
        with pytest.raises(LibraInputError, match=match):
            read_chakra(prefix, tmp_path / "g.json")
    with pytest.raises(LibraInputError, match=r"missing\.json: cannot read"):
        read_chakra(prefix, tmp_path / "missing.json")


def test_send_recv_pairs_and_pg_on_p2p(tmp_path):
    """Matched by (src, dst, tag, size), several per key; pg_name on a send is ignored."""
    s = [p2p(0, SEND, 1, 0), p2p(1, SEND, 1, 0, deps=[0]), p2p(2, RECV, 1, 0, tag=3)]
    s[0].attr.append(_attr("pg_name", string_val="9"))
    r = [p2p(0, RECV, 0, 1), p2p(1, RECV, 0, 1), p2p(2, SEND, 0, 1, tag=3)]
    ts = read_chakra(_write(tmp_path, [s, r]))
    assert list(ts.ranks[0].kind) == [TraceNode.SEND, TraceNode.SEND, TraceNode.RECV]
    assert list(ts.ranks[1].peer) == [0, 0, 0] and list(ts.ranks[0].tag) == [7, 7, 3]
    assert ts.groups == () and ts.skipped == {}


# --------------------------------------------------------------------------- reference
_GEN = pathlib.Path("/work/shared/reference/astrasim_workload")
_CHAKRA = pathlib.Path("/work/astra_ws/astra-sim/extern/graph_frontend/chakra")
_PYTHON = pathlib.Path("/work/astra_ws/venv/bin/python")


@pytest.mark.skipif(not (_GEN.exists() and _CHAKRA.exists() and _PYTHON.exists()),
                    reason="the shared reference generator and its Chakra are not here")
def test_reference_pg_cases(tmp_path):
    """The shared reference's pg_name ETs (split_dim_pg: pg_dim0, pg_across), regenerated
    with its generator: every NPU's TP and DP collectives get the groups the case lists."""
    cases = [c for c in json.loads((_GEN / "cases.json").read_text())
             if c["group"] == "split_dim_pg" and c["deps"] == "chain"
             and c["backend"] == "unaware"]
    assert len(cases) == 2
    env = dict(os.environ, PYTHONPATH=f"{_CHAKRA}/schema/protobuf:"
                                      f"{_CHAKRA}/src/third_party/utils")
    for case in cases:
        out = tmp_path / case["case_id"]
        (tmp_path / "case.json").write_text(json.dumps(case))
        subprocess.run([str(_PYTHON), str(_GEN / "gen_workload_et.py"),
                        str(tmp_path / "case.json"), str(out)], check=True, env=env,
                       capture_output=True, timeout=120)
        ts = read_chakra(out / "wl", out / "comm_groups.json", num_dims=2)
        assert ts.num_ranks == 32
        for t in ts.ranks:
            names = t.name
            for i in np.flatnonzero(t.kind == TraceNode.COLLECTIVE):
                which = "dp" if names[i].startswith("DP") else "tp"
                want = next(g for g in case["groups"][which]["pg"] if t.rank in g)
                assert ts.groups[t.group[i]].ranks == tuple(want)
            assert int(t.duration_ns.sum()) == case_compute_ns(case)
        assert len(ts.groups) == sum(len(g["pg"]) for g in case["groups"].values())


def case_compute_ns(case):
    return 1000 * sum(layer["fwd_us"] + layer["bwd_in_us"] + layer["bwd_w_us"]
                      for layer in case["layers"])


# --------------------------------------------------------------------------- replicas
_TYPE_VALUES = {  # values each varint type can hold, for tags and stray peers
    "int32_val": (0, 5, 127, 128, -1, -7, 2**31 - 1, -2**31),
    "int64_val": (0, 5, 128, -1, 2**32 - 1, 2**32, 2**40, -2**40),
    "uint32_val": (0, 5, 128, 2**31, 2**32 - 1),
    "uint64_val": (0, 5, 128, 2**32 - 1, 2**32, 2**63, 2**64 - 1),
    "sint32_val": (0, 5, 127, 128, -1, -64, -65, 2**31 - 1, -2**31),
    "sint64_val": (0, 5, 128, -1, -65, 2**40, -2**40),
}


_RANGE = {"int32_val": (-2**31, 2**31 - 1), "uint32_val": (0, 2**32 - 1),
          "sint32_val": (-2**31, 2**31 - 1), "int64_val": (-2**63, 2**63 - 1),
          "uint64_val": (0, 2**64 - 1), "sint64_val": (-2**63, 2**63 - 1)}


def _fit(kind, value):
    """``{kind: value}``, or the value in int64 / uint64 where ``kind`` cannot hold it."""
    if kind == "double_val":
        return {kind: float(value)}
    for k in (kind, "int64_val", "uint64_val"):
        lo, hi = _RANGE[k]
        if lo <= value <= hi:
            return {k: value}
    return {"uint64_val": 2**64 - 1}


def _replica_set(rng, folder):
    """A random trace set whose even ranks (and odd ranks) are replicas of each other up to
    their peers: rank r (even) sends to r + 1, which receives; the comm attributes in
    random integer types (sometimes a double), tags of every range, a sender / receiver
    field that is or is not the own rank, pg_name groups that may miss a rank, and now and
    then a stray value (a peer equal to the rank or out of range, another tag on one rank:
    an unmatched send) or a flipped byte. Returns (prefix, groups, num_dims)."""
    num = rng.choice((2, 4, 6, 8))
    types = list(_TYPE_VALUES) + ["double_val"] * (rng.random() < 0.1)
    p2p_specs = []
    for k in range(rng.randint(1, 4)):
        kinds = {f: rng.choice(types) for f in ("comm_src", "comm_dst", "comm_tag")}
        tag_type = kinds["comm_tag"]
        tag = (rng.choice(_TYPE_VALUES.get(tag_type, (3.0, 2.0**31))) if rng.random() < 0.4
               else rng.choice((0, 5, 127, 128, 300)))
        own = rng.choice(("rank", "rank", "absent", "other"))
        p2p_specs.append((kinds, tag, own))
    groups = {"1": list(range(0, num, 2)), "2": list(range(1, num, 2)),
              "3": list(range(num)), "4": list(range(num - 1))}
    pair_base = rng.choice((5, 8))  # pair groups 5, 6, ... (from 8: ids of 1 and 2 digits)
    for r in range(0, num, 2):
        groups[str(pair_base + r // 2)] = [r, r + 1] if rng.random() < 0.95 else [r + 1]
        groups[str(20 + r // 2)] = [r + 1, r]
    stray = rng.random() < 0.3
    stray_rank, stray_k = rng.randrange(num), rng.randrange(len(p2p_specs))
    stray_what = rng.choice(("self", "out", "big", "tag"))
    ops, cpu = rng.choice((0, 3)), rng.random() < 0.3
    pgs = (rng.choice(("1", "3", "4", "pair", None)), rng.choice(("2", "3", "4", "pair", None)))
    p2p_pg = rng.random() < 0.3  # a pg_name on the sends and receives (not read)
    ranks = []
    for r in range(num):
        send = r % 2 == 0
        nodes = [comp(0, 5), comp(1, 0, deps=(0,), num_ops=ops), comp(2, 4, deps=(1,), cpu=cpu)]
        last = 2
        for k, (kinds, tag, own) in enumerate(p2p_specs):
            i = 10 + k
            peer = r + 1 if send else r - 1
            if stray and r == stray_rank and k == stray_k and stray_what != "tag":
                peer = {"self": r, "out": num, "big": 2**40 if "64" in kinds["comm_tag"]
                        else 2**31 - 1}[stray_what]
            t = tag + 1 if stray and r == stray_rank and k == stray_k \
                and stray_what == "tag" else tag
            mine = {"rank": r, "absent": None, "other": (r + 3) % num}[own]
            src, dst = (mine, peer) if send else (peer, mine)
            node = Node(id=i, name=f"p{k}", type=SEND if send else RECV, data_deps=(last,))
            for name, value in (("comm_src", src), ("comm_dst", dst), ("comm_tag", t)):
                if value is not None:
                    node.attr.append(_attr(name, **_fit(kinds[name], value)))
            node.attr.append(_attr("comm_size", int64_val=256))
            if p2p_pg:
                node.attr.append(_attr("pg_name", string_val=f"g{r}"))
            nodes.append(node)
            last = i
        pg = str(pair_base + r // 2) if pgs[r % 2] == "pair" else pgs[r % 2]
        if stray and r == stray_rank and stray_what == "tag" and pg is not None:
            pg = rng.choice(("03", "99", "3"))  # another name of the whole group, no group
        nodes.append(coll(20, deps=(last,), dims=None, pg=pg))
        if pgs[r % 2] == "pair":  # two more groups new to the set; the whole set or a pair
            nodes.append(coll(22, deps=(20,), dims=None, pg=str(20 + r // 2)))
            nodes.append(coll(23, deps=(22,), dims=None,
                              pg="3" if rng.random() < 0.5 else str(pair_base + r // 2)))
        nodes.append(coll(21, deps=(20,), dims=(True, False)))
        ranks.append(nodes)
    prefix = _write(folder, ranks, meta=rng.random() < 0.8, gz=rng.random() < 0.2)
    if rng.random() < 0.25:  # a flipped byte somewhere in one file
        path = pathlib.Path(f"{prefix}.{rng.randrange(num)}.et")
        if path.exists():
            data = bytearray(path.read_bytes())
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            path.write_bytes(bytes(data))
    return prefix, groups, 2


def test_replicas_equal_full_reading(tmp_path, monkeypatch):
    """Random replica sets (`_replica_set`): read with the replica path and in full, the
    outcomes are the same (the TraceSet to the last bit, or the same error message); the
    replica path is taken for many ranks and refused for some (a stray value or a byte)."""
    import random

    used = {"copied": 0, "parsed": 0}
    trace = chakra_import.Replicas.trace

    def counted(self, rank, path, data):
        out = trace(self, rank, path, data)
        used["copied" if out is not None else "parsed"] += 1
        return out

    monkeypatch.setattr(chakra_import.Replicas, "trace", counted)
    rng = random.Random(32)
    outcomes = {"ok": 0, "error": 0}
    for k in range(200):
        prefix, groups, dims = _replica_set(rng, tmp_path / str(k))
        fast = _outcome(prefix, groups, num_dims=dims)
        _assert_same(fast, _outcome(prefix, groups, num_dims=dims, replicas=False))
        outcomes["error" if isinstance(fast, str) else "ok"] += 1
    assert outcomes["ok"] >= 40 and outcomes["error"] >= 40, outcomes
    assert used["copied"] >= 120 and used["parsed"] >= 40, used


def test_replica_values_and_notes(tmp_path):
    """A hand-checked replica set: ranks 1..3 are rank 0's file with other peers and tags
    (one negative, one in uint64); their arrays, the own-rank note and the tag note."""
    ranks = []
    for r in range(4):
        peer = r ^ 1
        send = r % 2 == 0
        nodes = [comp(0, 5)]
        node = p2p(1, SEND if send else RECV, peer, 0 if r < 2 else r, tag=None, deps=(0,))
        node.attr.append(_attr("comm_tag", int32_val=-1 if r == 1 or r == 0 else 9))
        nodes.append(node)
        ranks.append(nodes)
    prefix = _write(tmp_path, ranks)
    sizes = {os.path.getsize(f"{prefix}.{r}.et") for r in range(4)}
    assert len(sizes) == 2  # -1 is 10 bytes as an int32 varint, 9 one
    ts = read_chakra(prefix)  # checked against the full reading
    assert [int(t.peer[1]) for t in ts.ranks] == [1, 0, 3, 2]
    assert [int(t.tag[1]) for t in ts.ranks] == [2**32 - 1] * 2 + [9] * 2
    assert any("negative comm_tag" in n and n.startswith("2 ") for n in ts.notes)
    # ranks 1, 2, 3 name rank 0 / r as their own end: 1 of them is wrong (rank 1)
    assert any("whose comm_dst is not their own rank" in n and n.startswith("1 ")
               for n in ts.notes), ts.notes


def test_fuzz_trace_sets_equal_full_reading(tmp_path):
    """The fuzz suite's trace section (its seeds and 8 mutations of each family): the
    replica path and the full reading give the same outcome."""
    import fuzz as fz  # tests/fuzz (tests/ is on the path, as for test_fuzz.py)

    cases = [{"args": fz.traces.base_trace_args(None, name)}
             for name, *_ in fz.traces.seed_sets()]
    cases += [fz.make_case("traces", i, family=family, kind="chakra_et")
              for family in sorted(fz.traces.TRACE_FAMILIES) for i in range(8)]
    for k, case in enumerate(cases):
        args = fz.decode(case["args"])
        folder = tmp_path / str(k)
        folder.mkdir()
        for name, data in args["files"].items():
            (folder / name).write_bytes(data)
        groups = None
        if args.get("groups") is not None:
            groups = folder / "comm_groups.json"
            groups.write_bytes(args["groups"])
        kw = {"num_dims": args.get("num_dims"), "cpu_ops": args.get("cpu_ops", "skip")}
        _assert_same(_outcome(folder / "wl", groups, **kw),
                     _outcome(folder / "wl", groups, replicas=False, **kw))


def test_replicas_argument(tmp_path):
    prefix = _write(tmp_path, [[comp(0)]])
    with pytest.raises(LibraInputError, match="replicas = 'yes': expected True or False"):
        _read_chakra(prefix, replicas="yes")
