"""The fuzz suite's trace section (issue 32): seeded mutations of small valid Chakra trace
sets (`read_chakra`, kind ``chakra_et``).

A case's arguments (:func:`base_trace_args`, tagged JSON as every argument kind's) are the
set's files, ``{"files": {"wl.<rank>.et": {"$bytes": ...}}, "groups": {"$bytes": ...} or
None, "num_dims": D}``; :func:`load_trace_case` writes them into the case's folder and
reads them with ``read_chakra``. The seeds (:func:`seed_sets`) are valid sets: a step graph
with send-recv written by ``chakra.write_traces`` (4 ranks on 2 x 2), a two-stage pipeline
with sends, receives and ``pg_name`` groups, and the pipeline in the 2023 format (no
metadata record) and gzipped. The families (:data:`TRACE_FAMILIES`) cut, flip bytes, drop a
rank file, dangle a dependency, add a cycle or an unmatched send, break the group JSON or
change an attribute's number type; each says when the result must be refused (``expect``):
a cut inside a message, a gap in the ranks, a dependency on a missing node, a cycle, a send
without its receive, a group the trace uses broken.
"""

from __future__ import annotations

import base64
import copy
import functools
import gzip
import json
import pathlib
import random
import tempfile

from .mutations import Mutation

KIND = "chakra_et"
PREFIX = "wl"


def _b64(data: bytes) -> dict:
    return {"$bytes": base64.b64encode(data).decode("ascii")}


def _raw(tagged: dict) -> bytes:
    return base64.b64decode(tagged["$bytes"])


# --------------------------------------------------------------------------- seeds
def _step_set() -> tuple[dict, None, int]:
    """A step graph with compute, collectives and a send-recv, as write_traces writes it."""
    from libra_jax.inputs import chakra  # noqa: PLC0415
    from libra_jax.types import Collective, StepNode  # noqa: PLC0415

    graph = [StepNode("F", "compute", duration_ns=3000.0),
             StepNode("AR", "comm", (0,), collective=Collective.ALLREDUCE, size_bytes=4096.0,
                      involved=(True, False), group=(2, 1)),
             StepNode("P", "comm", (1,), collective=Collective.SENDRECV, size_bytes=512.0,
                      involved=(False, True), group=(1, 2)),
             StepNode("B", "compute", (2,), duration_ns=200.0),  # 0 µs: skipped
             StepNode("AG", "comm", (3,), collective=Collective.ALLGATHER, size_bytes=64.0,
                      involved=(True, True), group=(2, 2)),
             StepNode("W", "compute", (4,), duration_ns=5000.0)]
    with tempfile.TemporaryDirectory() as d:
        paths = chakra.write_traces(graph, (2, 2), d, prefix=PREFIX)
        return {p.name: p.read_bytes() for p in paths}, None, 2


def _pipeline_nodes(rank: int) -> list:
    """Rank 0 or 1 of a two-stage pipeline, two micro-batches, each stage also a member of
    a pg_name group with rank 2 or 3 (data parallel)."""
    from libra_jax.inputs.chakra_schema import (  # noqa: PLC0415
        AttributeProto as A,
        Node,
        NodeType,
    )

    def node(i, name, kind, deps, **attrs):
        n = Node(id=i, name=name, type=kind, data_deps=deps)
        n.attr.append(A(name="is_cpu_op", bool_val=False))
        for key, value in attrs.items():
            field = {"comm_size": "int64_val", "comm_type": "int64_val",
                     "pg_name": "string_val", "num_ops": "int64_val"}.get(key, "int32_val")
            n.attr.append(A(name=key, **{field: value}))
        return n

    stage = rank % 2
    out, last, i = [], [], 0
    for mb in range(2):
        comp = node(i, f"F{mb}", NodeType.COMP_NODE, last, num_ops=10)
        comp.duration_micros = 3 + mb
        out.append(comp)
        i += 1
        if stage == 0:
            out.append(node(i, f"send{mb}", NodeType.COMM_SEND_NODE, [i - 1], comm_src=rank,
                            comm_dst=rank + 1, comm_tag=mb, comm_size=1024))
        else:
            out.append(node(i, f"recv{mb}", NodeType.COMM_RECV_NODE, [i - 1],
                            comm_src=rank - 1, comm_dst=rank, comm_tag=mb, comm_size=1024))
        last = [i]
        i += 1
    out.append(node(i, "dp", NodeType.COMM_COLL_NODE, last, comm_type=0, comm_size=2048,
                    pg_name=str(10 + stage)))
    out.append(node(i + 1, "tp", NodeType.COMM_COLL_NODE, [i], comm_type=2, comm_size=64,
                    pg_name=str(20 + rank // 2)))
    return out


def _pipeline_set(meta: bool = True) -> tuple[dict, bytes, int]:
    from libra_jax.inputs.chakra_schema import GlobalMetadata, encode_message  # noqa: PLC0415

    files = {}
    for r in range(4):
        head = [encode_message(GlobalMetadata(version="0.0.4"))] if meta else []
        files[f"{PREFIX}.{r}.et"] = b"".join(head + [encode_message(n)
                                                     for n in _pipeline_nodes(r)])
    groups = json.dumps({"10": [0, 2], "11": [3, 1], "20": [0, 1], "21": [2, 3]}).encode()
    return files, groups, 2


@functools.lru_cache(maxsize=None)
def seed_sets() -> tuple:
    """The valid trace sets mutated: ``(name, files, groups JSON bytes or None, num_dims)``."""
    step_files, _, step_dims = _step_set()
    pipe_files, groups, dims = _pipeline_set()
    old_files, _, _ = _pipeline_set(meta=False)
    gz = {k + ".gz": gzip.compress(v, mtime=0) for k, v in pipe_files.items()}
    return (("step_2x2", step_files, None, step_dims),
            ("pipeline_pg", pipe_files, groups, dims),
            ("pipeline_2023", old_files, groups, dims),
            ("pipeline_gz", gz, groups, dims))


def base_trace_args(rng: random.Random, name: str | None = None) -> dict:
    """A valid trace set as case arguments (one of :func:`seed_sets`, by ``rng``)."""
    sets = seed_sets()
    chosen = rng.choice(sets) if name is None else next(s for s in sets if s[0] == name)
    _, files, groups, dims = chosen
    return {"seed_set": chosen[0], "files": {k: _b64(v) for k, v in files.items()},
            "groups": None if groups is None else _b64(groups), "num_dims": dims}


def load_trace_case(args: dict, tmp: pathlib.Path):
    """Writes the case's files (decoded arguments: bytes) into ``tmp`` and reads them."""
    from libra_jax.inputs.chakra_import import read_chakra  # noqa: PLC0415

    folder = tmp / "et"
    folder.mkdir()
    for name, data in args["files"].items():
        (folder / name).write_bytes(data)
    groups = None
    if args.get("groups") is not None:
        groups = tmp / "comm_groups.json"
        groups.write_bytes(args["groups"])
    return read_chakra(folder / PREFIX, groups, num_dims=args.get("num_dims"),
                       cpu_ops=args.get("cpu_ops", "skip"))


# --------------------------------------------------------------------------- helpers
def _plain(name: str, data: bytes) -> bytes:
    return gzip.decompress(data) if name.endswith(".gz") else data


def _store(name: str, data: bytes) -> bytes:
    return gzip.compress(data, mtime=0) if name.endswith(".gz") else data


def _nodes(data: bytes) -> tuple[bytes, list]:
    """A valid file's head (its metadata record, or b"") and its nodes."""
    from libra_jax.inputs.chakra_schema import (  # noqa: PLC0415
        METADATA_WIRE_FIELDS,
        Node,
        frame_body,
        split_frames,
        top_level_fields,
    )

    offsets = split_frames(data)
    start, end = frame_body(data, 0)
    first = 1 if top_level_fields(data[start:end]) <= METADATA_WIRE_FIELDS else 0
    head = data[:offsets[1]] if first and len(offsets) > 1 else (data if first else b"")
    nodes = []
    for pos in offsets[first:]:
        start, end = frame_body(data, pos)
        nodes.append(Node.FromString(data[start:end]))
    return head, nodes


def _encode(head: bytes, nodes: list) -> bytes:
    from libra_jax.inputs.chakra_schema import encode_message  # noqa: PLC0415

    return head + b"".join(encode_message(n) for n in nodes)


def _edit_nodes(args: dict, rng: random.Random, fn) -> tuple[dict, str]:
    """``fn(nodes, rng, rank, num_ranks) -> detail`` applied to one file's nodes."""
    args = copy.deepcopy(args)
    names = sorted(args["files"])
    name = rng.choice(names)
    raw = _plain(name, _raw(args["files"][name]))
    head, nodes = _nodes(raw)
    rank = int(name.split(".")[1])
    detail = fn(nodes, rng, rank, len(names))
    args["files"][name] = _b64(_store(name, _encode(head, nodes)))
    return args, f"{name}: {detail}"


# --------------------------------------------------------------------------- families
def mutate_trace_truncate(args, rng, kind=""):
    """One file cut at a random byte (of its plain or gzipped bytes)."""
    from libra_jax.inputs.chakra_schema import split_frames  # noqa: PLC0415

    args = copy.deepcopy(args)
    name = rng.choice(sorted(args["files"]))
    data = _raw(args["files"][name])
    cut = rng.randrange(len(data))
    args["files"][name] = _b64(data[:cut])
    if name.endswith(".gz"):
        return Mutation(args, f"{name} cut to {cut} of {len(data)} bytes (gzip)",
                        "a truncated gzip file")
    inside = cut == 0 or cut not in split_frames(data)
    return Mutation(args, f"{name} cut to {cut} of {len(data)} bytes",
                    "a cut inside a message (or an empty file)" if inside else None)


def mutate_trace_byte_flip(args, rng, kind=""):
    """1-8 random bytes of one file's plain bytes replaced (recompressed if gzipped)."""
    args = copy.deepcopy(args)
    name = rng.choice(sorted(args["files"]))
    data = bytearray(_plain(name, _raw(args["files"][name])))
    where = []
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] = rng.randrange(256)
        where.append(i)
    args["files"][name] = _b64(_store(name, bytes(data)))
    return Mutation(args, f"{name}: bytes {where} replaced")


def mutate_trace_drop_rank(args, rng, kind=""):
    """One rank file removed: a gap unless it was the last rank."""
    args = copy.deepcopy(args)
    names = sorted(args["files"], key=lambda n: int(n.split(".")[1]))
    name = rng.choice(names)
    del args["files"][name]
    last = name == names[-1]
    return Mutation(args, f"{name} removed", None if last else "a missing rank file")


def mutate_trace_dangle_dep(args, rng, kind=""):
    """A node made to depend on a node id that is not in its file."""
    def edit(nodes, rng, rank, num_ranks):
        node = rng.choice(nodes)
        missing = max(n.id for n in nodes) + rng.randint(1, 10**6)
        node.data_deps.append(missing)
        return f"node {node.id} depends on missing node {missing}"

    args, detail = _edit_nodes(args, rng, edit)
    return Mutation(args, detail, "a dependency on a missing node")


def mutate_trace_cycle(args, rng, kind=""):
    """A dependency cycle: a node's parent made to depend on it (or a node on itself)."""
    def edit(nodes, rng, rank, num_ranks):
        with_deps = [n for n in nodes if n.data_deps]
        if not with_deps or rng.random() < 0.2:
            node = rng.choice(nodes)
            node.data_deps.append(node.id)
            return f"node {node.id} depends on itself"
        node = rng.choice(with_deps)
        parent = next(n for n in nodes if n.id == rng.choice(list(node.data_deps)))
        parent.data_deps.append(node.id)
        return f"nodes {node.id} and {parent.id} depend on each other"

    args, detail = _edit_nodes(args, rng, edit)
    return Mutation(args, detail, "a dependency cycle")


def mutate_trace_unmatched_send(args, rng, kind=""):
    """A send (or receive) added with no partner on its peer."""
    from libra_jax.inputs.chakra_schema import AttributeProto as A  # noqa: PLC0415
    from libra_jax.inputs.chakra_schema import Node, NodeType  # noqa: PLC0415

    def edit(nodes, rng, rank, num_ranks):
        peer = (rank + rng.randint(1, num_ranks - 1)) % num_ranks
        send = rng.random() < 0.5
        n = Node(id=max(n.id for n in nodes) + 1, name="extra",
                 type=NodeType.COMM_SEND_NODE if send else NodeType.COMM_RECV_NODE,
                 data_deps=[nodes[-1].id])
        src, dst = (rank, peer) if send else (peer, rank)
        n.attr.extend([A(name="comm_src", int32_val=src), A(name="comm_dst", int32_val=dst),
                       A(name="comm_tag", int32_val=rng.randint(1000, 2000)),
                       A(name="comm_size", int64_val=rng.choice([1, 1024, 10**9]))])
        nodes.append(n)
        return f"{'send to' if send else 'receive from'} rank {peer} with no partner"

    args, detail = _edit_nodes(args, rng, edit)
    return Mutation(args, detail, "a send or receive without its partner")


def mutate_trace_bad_groups(args, rng, kind=""):
    """The group JSON broken: a used group removed, a rank outside the set or twice, a key
    that is not an id, not an object, not JSON."""
    if args.get("groups") is None:
        args = base_trace_args(rng, "pipeline_pg")
    args = copy.deepcopy(args)
    table = json.loads(_raw(args["groups"]))
    key = rng.choice(sorted(table))
    how = rng.choice(["remove", "outside", "twice", "key", "list", "text", "negative"])
    if how == "remove":
        del table[key]
    elif how == "outside":
        table[key].append(rng.choice([4, 99, 2**40]))
    elif how == "twice":
        table[key].append(table[key][0])
    elif how == "key":
        table[rng.choice(["abc", "0", "-3", "1.5"])] = table.pop(key)
    elif how == "list":
        table = list(table.values())
    elif how == "negative":
        table[key][0] = -1
    text = json.dumps(table).encode()
    if how == "text":
        text = text[:rng.randrange(1, len(text))]
    args["groups"] = _b64(text)
    return Mutation(args, f"groups: {how} ({key})", f"a broken group JSON ({how})")


def mutate_trace_attr_type(args, rng, kind=""):
    """An integer attribute stored in another number type (or as a string, or a double
    with a fraction)."""
    from libra_jax.inputs.chakra_schema import AttributeProto  # noqa: PLC0415

    fields = ["uint64_val", "sint64_val", "fixed64_val", "double_val", "int32_val",
              "string_val", "float_val"]

    def edit(nodes, rng, rank, num_ranks):
        cands = [(n, k) for n in nodes for k, a in enumerate(n.attr)
                 if a.WhichOneof("value") in ("int64_val", "int32_val")]
        if not cands:
            return "no integer attribute"
        node, k = rng.choice(cands)
        a = node.attr[k]
        value = getattr(a, a.WhichOneof("value"))
        field = rng.choice(fields)
        if field == "string_val":
            new = AttributeProto(name=a.name, string_val=str(value))
        elif field in ("double_val", "float_val"):
            new = AttributeProto(name=a.name, **{field: value + rng.choice([0.0, 0.5])})
        elif field in ("uint64_val", "fixed64_val") and value < 0:
            new = AttributeProto(name=a.name, sint64_val=value)
        else:
            new = AttributeProto(name=a.name, **{field: value})
        node.attr[k].CopyFrom(new)
        return f"node {node.id}: {a.name} as {field}"

    args, detail = _edit_nodes(args, rng, edit)
    return Mutation(args, detail)


def mutate_trace_drop_metadata(args, rng, kind=""):
    """A file turned into the 2023 format (its metadata record dropped): still valid."""
    args = copy.deepcopy(args)
    name = rng.choice(sorted(args["files"]))
    data = _plain(name, _raw(args["files"][name]))
    head, nodes = _nodes(data)
    args["files"][name] = _b64(_store(name, _encode(b"", nodes)))
    return Mutation(args, f"{name}: metadata record dropped ({'had one' if head else 'none'})")


#: family -> (mutation function, weight) of the trace section (kind ``chakra_et``).
TRACE_FAMILIES = {
    "trace_truncate": (mutate_trace_truncate, 0.4),
    "trace_byte_flip": (mutate_trace_byte_flip, 0.5),
    "trace_drop_rank": (mutate_trace_drop_rank, 0.25),
    "trace_dangle_dep": (mutate_trace_dangle_dep, 0.25),
    "trace_cycle": (mutate_trace_cycle, 0.25),
    "trace_unmatched_send": (mutate_trace_unmatched_send, 0.25),
    "trace_bad_groups": (mutate_trace_bad_groups, 0.3),
    "trace_attr_type": (mutate_trace_attr_type, 0.3),
    "trace_drop_metadata": (mutate_trace_drop_metadata, 0.25),
}
