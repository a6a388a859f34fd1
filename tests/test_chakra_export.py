"""Tests of libra_jax.inputs.chakra_export: a multi-rank step written as Chakra ETs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from libra_jax.inputs.chakra import read_trace, write_traces
from libra_jax.inputs.chakra_export import build_rank_trace, write_trace_set
from libra_jax.types import (
    Collective,
    CommGroup,
    LibraInputError,
    StepNode,
    TraceNode,
    TraceSet,
)

K = TraceNode
C = Collective

# A 2 x 2 network (dim 0: TP pairs {0,1} {2,3}; dim 1: pipeline stages): stage 0 = ranks
# 0, 1 and stage 1 = ranks 2, 3. Groups: TP over dim 0 (involved_dim), two pg_name DP-like
# groups over ranks {0, 2} and {1, 3} (across dim 1, listed), and one over every dim.
GROUPS = (
    CommGroup("tp", involved=(True, False)),
    CommGroup("10", ranks=(0, 2)),
    CommGroup("11", ranks=(3, 1)),
    CommGroup("world", involved=(True, True)),
)


def _rank_nodes(r: int) -> list[dict]:
    stage = r // 2
    nodes = [
        dict(id=0, name="fwd", kind=K.COMPUTE, duration_ns=12_000.0 + 1000 * r),
        dict(id=1, name="tp_ar", kind=K.COLLECTIVE, collective=C.ALLREDUCE,
             size_bytes=1 << 20, group=0, deps=[0]),
    ]
    if stage == 0:
        nodes.append(dict(id=2, name="send_act", kind=K.SEND, peer=r + 2, tag=7,
                          size_bytes=65536, deps=[1]))
        nodes.append(dict(id=3, name="recv_grad", kind=K.RECV, peer=r + 2, tag=8,
                          size_bytes=65536, deps=[]))
    else:
        nodes.append(dict(id=2, name="recv_act", kind=K.RECV, peer=r - 2, tag=7,
                          size_bytes=65536, deps=[]))
        nodes.append(dict(id=3, name="send_grad", kind=K.SEND, peer=r - 2, tag=8,
                          size_bytes=65536, deps=[2, 1]))
    nodes += [
        dict(id=4, name="bwd", kind=K.COMPUTE, duration_ns=30_000.0, deps=[3]),
        dict(id=5, name="dp_rs", kind=K.COLLECTIVE, collective=C.REDUCESCATTER,
             size_bytes=4 << 20, group=1 + r % 2, deps=[4]),
        dict(id=9, name="world_a2a", kind=K.COLLECTIVE, collective=C.ALLTOALL,
             size_bytes=8192, group=3, deps=[4]),
    ]
    return nodes


def _trace_set(nodes_of=_rank_nodes, groups=GROUPS, n=4) -> TraceSet:
    ranks = tuple(build_rank_trace(r, nodes_of(r), path=f"r{r}") for r in range(n))
    return TraceSet(prefix="t", ranks=ranks, groups=groups, skipped={})


# --------------------------------------------------------------------------- round trip
def test_files_carry_what_was_given(tmp_path):
    files = write_trace_set(_trace_set(), tmp_path, name="wl")
    assert [p.name for p in files.et] == [f"wl.{r}.et" for r in range(4)]
    comm_type = {C.ALLREDUCE: 0, C.ALLGATHER: 2, C.ALLTOALL: 6, C.REDUCESCATTER: 7}
    for r, path in enumerate(files.et):
        meta, nodes = read_trace(path)
        assert meta == {"version": "0.0.4", "attrs": {}}
        given = _rank_nodes(r)
        assert [n["id"] for n in nodes] == [g["id"] for g in given]
        for node, g in zip(nodes, given):
            assert node["name"] == g["name"]
            assert node["data_deps"] == g.get("deps", [])
            assert node["ctrl_deps"] == []
            attrs = node["attrs"]
            assert attrs["is_cpu_op"] is False
            if g["kind"] == K.COMPUTE:
                assert node["type"] == "COMP_NODE"
                assert node["duration_micros"] * 1000 == g["duration_ns"]
                assert attrs == {"is_cpu_op": False, "num_ops": 0}
            elif g["kind"] == K.COLLECTIVE:
                assert node["type"] == "COMM_COLL_NODE"
                assert attrs["comm_type"] == comm_type[g["collective"]]
                assert attrs["comm_size"] == g["size_bytes"]
                group = GROUPS[g["group"]]
                if group.involved is not None:
                    assert attrs["involved_dim"] == list(group.involved)
                    assert "pg_name" not in attrs
                else:
                    assert attrs["pg_name"] == group.name
                    assert "involved_dim" not in attrs
                    assert r in group.ranks
            else:
                send = g["kind"] == K.SEND
                assert node["type"] == ("COMM_SEND_NODE" if send else "COMM_RECV_NODE")
                src, dst = (r, g["peer"]) if send else (g["peer"], r)
                assert (attrs["comm_src"], attrs["comm_dst"]) == (src, dst)
                assert attrs["comm_tag"] == g["tag"]
                assert attrs["comm_size"] == g["size_bytes"]
    # pg groups in first-seen order, ranks in the listed order (the ring's order)
    assert json.loads(files.comm_groups.read_text()) == {"10": [0, 2], "11": [3, 1]}
    assert files.comm_groups.name == "wl.comm_groups.json"
    assert files.rounding.total_change_ns == 0
    assert files.rounding.zero_us_nodes == () and files.rounding.sizes_rounded == 0


def test_bytes_are_deterministic(tmp_path):
    a = write_trace_set(_trace_set(), tmp_path / "a")
    b = write_trace_set(_trace_set(), tmp_path / "b")
    for pa, pb in zip(a.et, b.et):
        assert pa.read_bytes() == pb.read_bytes()
    assert a.comm_groups.read_bytes() == b.comm_groups.read_bytes()


def test_same_bytes_as_the_single_graph_writer(tmp_path):
    """A set whose ranks all run one graph of computes and whole-dimension collectives is
    written byte for byte as `chakra.write_traces` writes that graph."""
    steps = [
        StepNode("F1", "compute", (), 1500.0),
        StepNode("AR1", "comm", (0,), 0.0, C.ALLREDUCE, 4096.0, (True, False), (2, 1)),
        StepNode("B1", "compute", (1,), 2_000_000.0),
        StepNode("AG1", "comm", (2,), 0.0, C.ALLGATHER, 1000.0, (False, True), (1, 3)),
        StepNode("W1", "compute", (2, 0), 499.0),
    ]
    write_traces(steps, (2, 3), tmp_path / "one", prefix="wl")
    groups = (CommGroup("d0", involved=(True, False)), CommGroup("d1", involved=(False, True)))
    group_of = {1: 0, 3: 1}

    def nodes_of(r):
        return [dict(id=i, name=s.name, kind=K.COMPUTE if s.kind == "compute"
                     else K.COLLECTIVE, duration_ns=s.duration_ns, collective=s.collective,
                     size_bytes=s.size_bytes, group=group_of.get(i, -1), deps=list(s.deps))
                for i, s in enumerate(steps)]

    files = write_trace_set(_trace_set(nodes_of, groups, 6), tmp_path / "set", name="wl")
    for r in range(6):
        assert files.et[r].read_bytes() == (tmp_path / "one" / f"wl.{r}.et").read_bytes()
    assert files.comm_groups is None
    assert not (tmp_path / "set" / "wl.comm_groups.json").exists()
    # the 499 ns node rounds to 0 µs on every rank: reported, as write_traces reports it
    assert files.rounding.zero_us_nodes == tuple((r, 4) for r in range(6))
    assert files.rounding.max_abs_change_ns == 500.0
    assert files.rounding.total_change_ns == pytest.approx(6 * (500.0 - 499.0))


def test_rounding_of_sizes_is_counted(tmp_path):
    def nodes_of(r):
        return [dict(id=0, name="ar", kind=K.COLLECTIVE, collective=C.ALLREDUCE,
                     size_bytes=1000.5, group=0)]
    files = write_trace_set(_trace_set(nodes_of, (GROUPS[3],), 2), tmp_path)
    assert files.rounding.sizes_rounded == 2
    assert read_trace(files.et[0])[1][0]["attrs"]["comm_size"] == 1001


def test_omit_involved_dim(tmp_path):
    files = write_trace_set(_trace_set(), tmp_path, omit_involved_dim=[3])
    nodes = read_trace(files.et[0])[1]
    a2a = next(n for n in nodes if n["name"] == "world_a2a")
    assert a2a["attrs"] == {"is_cpu_op": False, "comm_type": 6, "comm_size": 8192}
    tp = next(n for n in nodes if n["name"] == "tp_ar")
    assert tp["attrs"]["involved_dim"] == [True, False]
    with pytest.raises(LibraInputError, match=r"omit_involved_dim\[0\] = 0: only a group "
                                              r"over every dimension"):
        write_trace_set(_trace_set(), tmp_path, omit_involved_dim=[0])


def test_dependencies_out_of_array_order_are_accepted(tmp_path):
    def nodes_of(r):
        return [dict(id=5, name="b", kind=K.COMPUTE, duration_ns=2000.0, deps=[3]),
                dict(id=3, name="a", kind=K.COMPUTE, duration_ns=1000.0)]
    files = write_trace_set(_trace_set(nodes_of, (), 1), tmp_path)
    nodes = read_trace(files.et[0])[1]
    assert [(n["id"], n["data_deps"]) for n in nodes] == [(5, [3]), (3, [])]


# --------------------------------------------------------------------------- refusals
def _edit(r_edit, i_edit, **change):
    def nodes_of(r):
        nodes = _rank_nodes(r)
        if r == r_edit:
            nodes[i_edit] = {**nodes[i_edit], **change}
        return nodes
    return nodes_of


@pytest.mark.parametrize("nodes_of, match", [
    (_edit(0, 0, duration_ns=-1.0), r"rank 0 node id 0 \(fwd\): duration_ns = -1.0 ns"),
    (_edit(1, 1, size_bytes=float("nan")), r"rank 1 node id 1 \(tp_ar\): size_bytes = nan"),
    (_edit(2, 1, collective=C.SENDRECV), r"rank 2 node id 1 .*collective = 5"),
    (_edit(2, 1, group=9), r"rank 2 node id 1 .*group = 9; expected an index"),
    (_edit(0, 5, group=2), r"rank 0 node id 5 \(dp_rs\): runs a collective over pg_name "
                           r"group '11'"),
    (_edit(0, 2, peer=0), r"rank 0 node id 2 \(send_act\): peer = 0"),
    (_edit(0, 2, peer=4), r"rank 0 node id 2 .*peer = 4"),
    (_edit(0, 2, tag=2**31), r"tag = 2147483648; expected 0 to 2147483647"),
    (_edit(0, 2, tag=9), r"rank 0 node id 2: 1 send\(s\) and 0 receive\(s\) from rank 0 to "
                          r"rank 2 with tag 9 and 65536 bytes; every send needs one"),
    (_edit(2, 2, size_bytes=100), r"rank 0 node id 2: 1 send\(s\) and 0 receive\(s\) "
                                  r"from rank 0 to rank 2 with tag 7 and 65536 bytes"),
    (_edit(0, 1, kind=7), r"rank 0 node id 1 \(tp_ar\): kind = 7"),
    (_edit(3, 6, id=0), r"rank 3: node id 0 is given 2 times"),
    (_edit(1, 0, deps=[1]), r"rank 1 node id 0 \(fwd\): is on a dependency cycle"),
])
def test_bad_nodes_are_refused(tmp_path, nodes_of, match):
    with pytest.raises(LibraInputError, match=match):
        write_trace_set(_trace_set(nodes_of), tmp_path)
    assert not list(tmp_path.iterdir())  # checked before anything is written


@pytest.mark.parametrize("groups, match", [
    ((CommGroup("tp", involved=(True, False)), CommGroup("x", ranks=(0, 2))) + GROUPS[2:],
     r"groups\[1\].name = 'x': a pg_name group's name must be a decimal integer"),
    ((GROUPS[0], GROUPS[1], CommGroup("10", ranks=(1, 3)), GROUPS[3]),
     r"pg_name '10' lists ranks \(1, 3\) but an earlier group"),
    (GROUPS[:3] + (CommGroup("world", involved=(True, True, True)),),
     r"groups\[3\].involved = .* has 3 entries but an earlier group has 2"),
    (GROUPS[:3] + (CommGroup("world", involved=(False, False)),),
     r"groups\[3\].involved .* at least one network dimension"),
    (GROUPS[:3] + (CommGroup("world"),), r"groups\[3\] \(world\): give exactly one"),
    ((GROUPS[0], CommGroup("10", ranks=(0, 9))) + GROUPS[2:],
     r"pg_name group '10' lists rank 9, but the set has 4 ranks"),
    ((GROUPS[0], CommGroup("10", ranks=(0, 0))) + GROUPS[2:], r"two or more distinct"),
])
def test_bad_groups_are_refused(tmp_path, groups, match):
    with pytest.raises(LibraInputError, match=match):
        write_trace_set(_trace_set(groups=groups), tmp_path)


def test_bad_sets_are_refused(tmp_path):
    good = _trace_set()
    swapped = dataclasses.replace(good, ranks=(good.ranks[1], good.ranks[0]) + good.ranks[2:])
    with pytest.raises(LibraInputError, match=r"ranks\[0\].rank = 1: expected 0"):
        write_trace_set(swapped, tmp_path)
    with pytest.raises(LibraInputError, match=r"trace.ranks is empty"):
        write_trace_set(dataclasses.replace(good, ranks=()), tmp_path)
    short = dataclasses.replace(good.ranks[0], duration_ns=np.zeros(2))
    with pytest.raises(LibraInputError, match=r"rank 0: duration_ns has shape \(2,\)"):
        write_trace_set(dataclasses.replace(good, ranks=(short,) + good.ranks[1:]), tmp_path)
    with pytest.raises(LibraInputError, match=r"name = 'a/b': expected a file name stem"):
        write_trace_set(good, tmp_path, name="a/b")
    with pytest.raises(LibraInputError, match=r"rank 0 node id 1: depends on id 42"):
        build_rank_trace(0, [dict(id=1, kind=K.COMPUTE, deps=[42])])
    with pytest.raises(LibraInputError, match=r"rank 0 nodes\[0\]: keys \['durations', "):
        build_rank_trace(0, [dict(id=1, kind=K.COMPUTE, durations=5)])


def test_unwritable_folder(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(LibraInputError, match=r"cannot write the Chakra trace set to "):
        write_trace_set(_trace_set(), tmp_path / "file" / "sub")
