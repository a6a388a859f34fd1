"""Multi-rank Chakra trace sets run through ASTRA-sim's analytical backends (issue 32).

Reference runs for the trace reader and the multi-rank step simulation: every rank its own
graph, pipeline stages that exchange activations and gradients by sends and receives,
groups by ``involved_dim`` or by ``pg_name`` (``--comm-group-configuration``). Two kinds of
case, each run through the congestion-unaware *and* the congestion-aware backend:

* **generated** (:func:`draw_case`, :func:`trace_set`): LLM-like training steps, data x
  tensor x pipeline parallel over 8-64 ranks on 2-4-dim networks (Ring / FullyConnected /
  Switch), GPipe or 1F1B micro-batch orders, TP collectives over each stage's TP group
  (all-reduce pairs or all-gather / reduce-scatter), DP all-reduces or ZeRO (RS + AG)
  overlapped with the backward or at the end, a global all-reduce written without
  ``involved_dim`` in some cases, and the system knobs (chunks 1-8, latency 0-1000 ns,
  endpoint delay, 1-2 queues per dim, local-mem-bw, LIFO / FIFO, in-flight limit). A group
  that is whole network dimensions is written as ``involved_dim`` (or, drawn, as
  ``pg_name``); one over part of a dimension or across dimensions as ``pg_name`` (a flat
  ring in the listed order). The case dict holds every drawn number: :func:`trace_set` is a
  pure function of it, so ``{tuning,heldout}.json`` regenerates each trace exactly;
* **real** (:func:`real_cases`): public traces, each on a network drawn to fit its rank
  count: ASTRA-sim's microbenchmarks (``examples/workload/microbenchmarks``: one 1 MiB
  all-reduce / all-gather / reduce-scatter / all-to-all per rank without ``involved_dim``,
  4, 8, 16 NPUs) and its custom ring all-reduce of sends, receives and 7 µs computes
  (``examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB``), astra-sim
  commit 518bd51; Chakra's feeder test trace (``tests/data/feeder_tests_trace.tar.gz``:
  one PyTorch rank, 3,664 nodes, CPU ops, NCCL broadcasts, ``involved_dim`` of one entry),
  mlcommons/chakra commit 21585d8, copied to every rank of a 1-dim network; and LLM steps
  from the symbolic tensor graph generator (astra-sim/symbolic_tensor_graph commit
  3a7f49c, ``main.py``; dp x tp x pp, pg_name groups, 1F1B-like sends / receives), whose
  compute nodes carry ``num_ops`` and 0 µs: their ``duration_micros`` is filled as
  ``ceil(num_ops / (fill_tflops * 1e6))`` µs (``fill_tflops`` = 300 TFLOP/s per NPU; a
  node with ``num_ops`` 0 keeps 0 µs and ASTRA-sim skips it), every other field kept.
  The first two are stored in ``experiments/results/astrasim_traces/real/`` with their
  licences (astra-sim: MIT; Chakra: Apache-2.0); the STG traces (MIT) are regenerated
  (``--stg-dir``, ``--stg-python``).

The tuning set (``--set tuning``, seed 1) may be looked at case by case; the held-out set
(``--set heldout``, seed 2, other real-trace networks and STG configurations) is generated
and run the same way but kept for the final check: look only at its summary.

    python experiments/astrasim_traces.py --set tuning --cases 60 --stg-dir /tmp/stg \
        --stg-python /tmp/stgvenv/bin/python
    python experiments/astrasim_traces.py --set heldout --cases 60 ...
    python experiments/astrasim_traces.py --compare --set tuning   # libra_jax vs ASTRA-sim

Writes ``experiments/results/astrasim_traces/<set>.json`` (the cases, one per line) and
``<set>.csv`` (one row per case and backend: columns in ``RESULT_COLUMNS``, explained in
that folder's README.md). Run directories (ETs, configs, logs) go to ``--runs-dir``.
ASTRA-sim's peak RSS and wall time come from ``os.wait4`` of the simulator process.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import pathlib
import random
import shlex
import shutil
import subprocess
import sys
import tarfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from astrasim_heldout import (  # noqa: E402  (the shared ASTRA-sim helpers)
    BACKENDS,
    EXE,
    FINISHED,
    KIB,
    MIB,
    SHORT_TOPO,
    TOPOLOGIES,
    _short_error,
    network_yaml,
    sim_command,
    system_json,
)

OUT = HERE / "results" / "astrasim_traces"
REAL = OUT / "real"
SEEDS = {"tuning": 1, "heldout": 2}
RESULT_COLUMNS = ("case_id", "set", "kind", "backend", "npus", "nodes_max", "astra_max_ns",
                  "astra_min_ns", "astra_spread_ns", "wall_s", "max_rss_mb", "rc", "error")
#: Where the stored real traces come from.
SOURCES = {
    "astra_micro": ("astra-sim/astra-sim", "518bd513ae110428cd62eb60efc0f3993fd53c70",
                    "examples/workload/microbenchmarks"),
    "astra_custom": ("astra-sim/astra-sim", "518bd513ae110428cd62eb60efc0f3993fd53c70",
                     "examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB"),
    "chakra_feeder": ("mlcommons/chakra", "21585d8f2d65603d791d2121e3d4632351120262",
                      "tests/data/feeder_tests_trace.tar.gz"),
    "stg": ("astra-sim/symbolic_tensor_graph", "3a7f49c02ac3eb669e4eee597ef1a32f7db44d07",
            "main.py"),
}
FILL_TFLOPS = 300.0


# ----------------------------------------------------------------------------- drawing
def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _bytes(rng: random.Random, lo: float, hi: float, unit: int = 4 * KIB) -> int:
    return max(unit, int(round(_log_uniform(rng, lo, hi) / unit)) * unit)


def _us(rng: random.Random, lo: float, hi: float) -> int:
    return int(round(_log_uniform(rng, lo, hi)))


def _factor(rng: random.Random, n: int, dims: int) -> list[int] | None:
    """``n`` as a product of ``dims`` factors >= 2 (random order), or None."""
    for _ in range(200):
        out, rest = [], n
        for k in range(dims - 1):
            divs = [d for d in range(2, rest + 1)
                    if rest % d == 0 and rest // d >= 2 ** (dims - k - 1)]
            if not divs:
                break
            out.append(rng.choice(divs))
            rest //= out[-1]
        else:
            if rest >= 2:
                return out + [rest]
    return None


def _knobs(rng: random.Random, npd: list[int]) -> dict:
    """Network and system knobs of one case (the schema of experiments/astrasim_heldout)."""
    D = len(npd)
    topo = [rng.choice(TOPOLOGIES) for _ in range(D)]
    if rng.random() < 0.3:
        lat = [0] * D
    elif rng.random() < 0.5:
        lat = [rng.randint(100, 1000)] * D
    else:
        lat = [rng.randint(0, 1000) for _ in range(D)]
    return {
        "network": "x".join(f"{SHORT_TOPO[t]}{n}" for t, n in zip(topo, npd)),
        "topology": topo,
        "npus_per_dim": npd,
        "npus": math.prod(npd),
        "bandwidth_GBps": [int(round(_log_uniform(rng, 25, 400))) for _ in range(D)],
        "latency_ns": lat,
        "endpoint_delay_ns": rng.randint(1, 10),
        "chunks": rng.randint(1, 8),
        "impl_per_dim": ["ring"] * D,
        "collective_optimization": "localBWAware",
        "scheduling_policy": rng.choice(("LIFO", "FIFO")),
        "active_chunks_per_dim": 1,
        "queues_per_dim": rng.choice((1, 2)),
        "local_mem_bw_GBps": 1e6 if rng.random() < 0.7 else 1600.0,
        "max_inflight_comm": 4 if rng.random() < 0.85 else 1,
    }


def draw_case(set_name: str, index: int) -> dict:
    """One generated case of ``set_name`` (its seed) and ``index``: every drawn number."""
    seed = SEEDS[set_name]
    rng = random.Random(seed * 1_000_003 + index + 424_242)
    npus = rng.choice((8, 16, 16, 32, 32, 64, 64))
    D = rng.choice([d for d in (2, 3, 4) if 2 ** d <= npus])
    npd = _factor(rng, npus, D)
    case = {"case_id": f"g{seed}_{index:03d}", "set": set_name, "kind": "generated"}
    case.update(_knobs(rng, npd))
    # parallel layout: rank = t + T * (d + DP * p); pipeline stages outermost
    pp = rng.choice([p for p in (1, 2, 2, 4, 4, 8) if npus % p == 0 and npus // p >= 2])
    rest = npus // pp
    tp = rng.choice([t for t in range(1, rest + 1) if rest % t == 0 and t <= 16])
    dp = rest // tp
    L = rng.randint(1, 4)
    M = rng.randint(1, 8) if pp > 1 else rng.randint(1, 2)
    # A blocking all-reduce over every rank first (written without involved_dim in most
    # draws); at the end of a pipelined step ASTRA-sim deadlocks on it (see README.md).
    global_ar = (None if rng.random() < 0.6 else
                 {"bytes": _bytes(rng, 4 * KIB, 4 * MIB),
                  "omit_involved_dim": rng.random() < 0.7})
    stages = []
    for s in range(pp):
        layers = []
        for _ in range(L):
            fwd = _us(rng, 5, 1500)
            layers.append({
                "fwd_us": fwd, "bwd_in_us": max(1, int(fwd * rng.uniform(0.8, 1.2))),
                "bwd_w_us": max(1, int(fwd * rng.uniform(0.8, 1.2))),
                "tp_fwd_bytes": _bytes(rng, 64 * KIB, 64 * MIB),
                "tp_bwd_bytes": _bytes(rng, 64 * KIB, 64 * MIB),
                "dp_bytes": _bytes(rng, 1 * MIB, 128 * MIB, unit=4 * KIB * max(dp, 1)),
            })
        stages.append({"layers": layers,
                       "extra_us": _us(rng, 5, 500) if s in (0, pp - 1) else 0})
    case.update({
        "parallel": {"tp": tp, "dp": dp, "pp": pp},
        "schedule": rng.choice(("gpipe", "1f1b")),
        "micro_batches": M,
        "act_bytes": _bytes(rng, 64 * KIB, 32 * MIB),
        "tp_coll": rng.choices(("all_reduce", "ag_rs", "all_to_all"), (0.6, 0.3, 0.1))[0],
        "dp_kind": rng.choices(("all_reduce", "zero"), (0.75, 0.25))[0],
        "dp_mode": rng.choices(("overlap", "end"), (0.65, 0.35))[0],
        "recv_post": rng.choice(("early", "on_demand")),
        "force_pg": {"tp": rng.random() < 0.2, "dp": rng.random() < 0.2},
        "global_ar": global_ar,
        "stages": stages,
    })
    return case


# ----------------------------------------------------------------------------- building
COLL = {"all_reduce": 1, "reduce_scatter": 2, "all_gather": 3, "all_to_all": 4}  # Collective


def _whole_dims(npd, lo_size: int, size: int) -> list[bool] | None:
    """``involved`` of the group of ranks ``[base + lo_size * j for j < size]`` when it is
    whole dimensions (a run of dims whose product starts at ``lo_size``), else None."""
    prod, involved = 1, []
    for n in npd:
        involved.append(lo_size <= prod and prod * n <= lo_size * size)
        prod *= n
    spanned = math.prod(n for n, on in zip(npd, involved) if on)
    first = next((d for d, on in enumerate(involved) if on), None)
    if first is None or spanned != size or math.prod(npd[:first]) != lo_size:
        return None
    return involved


def trace_set(case: dict):
    """The case's `TraceSet` and the group indices to write without ``involved_dim``."""
    from libra_jax.inputs.chakra_export import build_rank_trace
    from libra_jax.types import CommGroup, TraceNode, TraceSet

    K = TraceNode
    npd = case["npus_per_dim"]
    n = case["npus"]
    T, DP, P = (case["parallel"][k] for k in ("tp", "dp", "pp"))
    M = case["micro_batches"]
    groups, omit = [], []

    def add_groups(name, stride, size, block_of, force_pg, pg_base):
        """-> rank -> group index (None when size 1)."""
        if size == 1:
            return [None] * n
        involved = None if force_pg else _whole_dims(npd, stride, size)
        if involved is not None:
            groups.append(CommGroup(name, involved=tuple(involved)))
            return [len(groups) - 1] * n
        of_rank, blocks = [None] * n, {}
        for r in range(n):
            key = block_of(r)
            if key not in blocks:
                base = r
                blocks[key] = len(groups)
                groups.append(CommGroup(str(pg_base + len(blocks) - 1),
                                        ranks=tuple(base + stride * j for j in range(size))))
            of_rank[r] = blocks[key]
        return of_rank

    tp_of = add_groups("tp", 1, T, lambda r: r // T, case["force_pg"]["tp"], 100)
    dp_of = add_groups("dp", T, DP, lambda r: (r % T, r // (T * DP)), case["force_pg"]["dp"],
                       1000)
    glob = None
    if case["global_ar"]:
        groups.append(CommGroup("all", involved=(True,) * len(npd)))
        glob = len(groups) - 1
        if case["global_ar"]["omit_involved_dim"]:
            omit.append(glob)

    ranks = []
    for r in range(n):
        s = r // (T * DP)
        layers = case["stages"][s]["layers"]
        nodes = []
        prev = []  # what the next compute waits for

        def node(**kw):
            kw["id"] = len(nodes)
            nodes.append(kw)
            return kw["id"]

        def compute(name, us, deps):
            """A compute of ``us`` µs: one node, or a chain of ``case["kernels"]`` kernels
            (whole µs, the remainder on the first ones) as a real trace has per layer."""
            k = case.get("kernels", 1)
            if k == 1:
                return node(name=name, kind=K.COMPUTE, duration_ns=us * 1000.0, deps=deps)
            for j in range(k):
                part = us // k + (j < us % k)
                deps = [node(name=f"{name}.k{j}", kind=K.COMPUTE, duration_ns=part * 1000.0,
                             deps=deps)]
            return deps[0]

        def tp_coll(m, l, phase, size, dep):
            kind = case["tp_coll"]
            if tp_of[r] is None:
                return dep
            coll = {"all_reduce": "all_reduce", "all_to_all": "all_to_all",
                    "ag_rs": "all_gather" if phase == "fwd" else "reduce_scatter"}[kind]
            return node(name=f"mb{m}.L{l}.TP{phase}", kind=K.COLLECTIVE,
                        collective=COLL[coll], size_bytes=size, group=tp_of[r], deps=[dep])

        def recv(m, peer, tag):
            deps = list(prev) if case["recv_post"] == "on_demand" else []
            return node(name=f"mb{m}.recv{tag % 2}", kind=K.RECV, peer=peer, tag=tag,
                        size_bytes=case["act_bytes"], deps=deps)

        def forward(m):
            nonlocal prev
            wait = list(prev)
            if s > 0:
                wait.append(recv(m, r - T * DP, 2 * m))
            if s == 0 and case["stages"][s]["extra_us"]:
                wait = [compute(f"mb{m}.embed", case["stages"][s]["extra_us"], wait)]
            for l, ly in enumerate(layers):
                f = compute(f"mb{m}.L{l}.F", ly["fwd_us"], wait)
                wait = [tp_coll(m, l, "fwd", ly["tp_fwd_bytes"], f)]
            if s == P - 1 and case["stages"][s]["extra_us"]:
                wait = [compute(f"mb{m}.loss", case["stages"][s]["extra_us"], wait)]
            if s < P - 1:
                node(name=f"mb{m}.send0", kind=K.SEND, peer=r + T * DP, tag=2 * m,
                     size_bytes=case["act_bytes"], deps=wait)
            prev = wait

        def backward(m):
            nonlocal prev
            wait = list(prev)
            if s < P - 1:
                wait.append(recv(m, r + T * DP, 2 * m + 1))
            last = m == M - 1
            for l in reversed(range(len(layers))):
                ly = layers[l]
                b = compute(f"mb{m}.L{l}.B", ly["bwd_in_us"], wait)
                tb = tp_coll(m, l, "bwd", ly["tp_bwd_bytes"], b)
                w = compute(f"mb{m}.L{l}.W", ly["bwd_w_us"], [b])
                wait = sorted({tb, w})
                if last and case["dp_mode"] == "overlap":
                    dp_colls(l, ly, [w])
            if s > 0:
                node(name=f"mb{m}.send1", kind=K.SEND, peer=r - T * DP, tag=2 * m + 1,
                     size_bytes=case["act_bytes"], deps=wait)
            prev = wait

        def dp_colls(l, ly, deps):
            """DP collectives of layer l after ``deps``; returns the last one's id."""
            if dp_of[r] is None:
                return None
            if case["dp_kind"] == "zero":
                rs = node(name=f"L{l}.DPrs", kind=K.COLLECTIVE, collective=COLL["reduce_scatter"],
                          size_bytes=ly["dp_bytes"], group=dp_of[r], deps=deps)
                return node(name=f"L{l}.DPag", kind=K.COLLECTIVE, collective=COLL["all_gather"],
                            size_bytes=ly["dp_bytes"] // DP, group=dp_of[r], deps=[rs])
            return node(name=f"L{l}.DP", kind=K.COLLECTIVE, collective=COLL["all_reduce"],
                        size_bytes=ly["dp_bytes"], group=dp_of[r], deps=deps)

        if glob is not None:
            prev = [node(name="global_ar", kind=K.COLLECTIVE, collective=COLL["all_reduce"],
                         size_bytes=case["global_ar"]["bytes"], group=glob, deps=[])]
        if case["schedule"] == "gpipe":
            order = [("F", m) for m in range(M)] + [("B", m) for m in range(M)]
        else:
            warm = min(P - s - 1, M)
            order = [("F", m) for m in range(warm)]
            for i in range(M - warm):
                order += [("F", warm + i), ("B", i)]
            order += [("B", m) for m in range(M - warm, M)]
        for what, m in order:
            (forward if what == "F" else backward)(m)
        if case["dp_mode"] == "end":
            for l in reversed(range(len(layers))):
                last = dp_colls(l, layers[l], list(prev))
                if last is not None:
                    prev = [last]
        ranks.append(build_rank_trace(r, nodes))
    return TraceSet(prefix="wl", ranks=tuple(ranks), groups=tuple(groups), skipped={}), omit


# ----------------------------------------------------------------------------- real traces
def _network_for(rng: random.Random, npus: int, dims: tuple[int, ...]) -> list[int]:
    for D in rng.sample(dims, len(dims)):
        npd = [npus] if D == 1 else _factor(rng, npus, D)
        if npd:
            return npd
    return [npus]


def real_cases(set_name: str, stg: bool) -> list[dict]:
    """The real-trace cases of a set: each trace on a network drawn from the set's seed."""
    seed = SEEDS[set_name]
    rng = random.Random(seed * 7_777_777 + 5)
    cases = []

    def add(name, source, npus, dims, **extra):
        repo, commit, path = SOURCES[source]
        case = {"case_id": f"r{seed}_{name}", "set": set_name, "kind": "real",
                "source": source, "origin": f"{repo}@{commit}:{path}"}
        case.update(_knobs(rng, _network_for(rng, npus, dims)))
        case.update(extra)
        cases.append(case)

    for coll in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for npus in (4, 8, 16):
            add(f"micro_{coll}_{npus}", "astra_micro", npus, (1, 2, 3),
                trace=f"{coll}/{npus}npus_1MB/{coll}")
    add("custom_ring_ar_8", "astra_custom", 8, (1, 2, 3), trace="custom_allreduce")
    # 1-entry involved_dim: a 1-dim network (ASTRA-sim hangs on more dims)
    add("chakra_feeder_8", "chakra_feeder", 8 if seed == 1 else 16, (1,),
        trace="chakra.0.et", replicate=True)
    if stg:
        configs = {1: [(2, 2, 2, 4, 4), (2, 4, 2, 4, 4), (1, 4, 4, 8, 8), (4, 2, 8, 8, 8),
                       (2, 8, 4, 4, 4)],
                   2: [(4, 2, 1, 2, 2), (2, 2, 4, 8, 4), (2, 4, 4, 4, 8), (4, 4, 4, 8, 8),
                       (1, 8, 8, 8, 8)]}[seed]
        for dp, tp, pp, stacks, mbs in configs:
            sharded = rng.random() < 0.3
            tpsp = rng.random() < 0.6
            args = {"dp": dp, "tp": tp, "pp": pp, "num_stacks": stacks,
                    "dmodel": rng.choice((1024, 2048, 4096)), "head": 16, "kvhead": 16,
                    "dff": 4 * 1024, "seq": rng.choice((512, 1024, 2048)),
                    "batch": mbs * dp * 2, "micro_batch": 2 * dp, "dvocal": 32000,
                    "weight_sharded": int(sharded), "tpsp": int(tpsp)}
            args["dff"] = 4 * args["dmodel"]
            add(f"stg_dp{dp}_tp{tp}_pp{pp}", "stg", dp * tp * pp, (2, 3, 4),
                stg_args=args, fill_tflops=FILL_TFLOPS)
    return cases


def _fill_durations(src: pathlib.Path, dst: pathlib.Path, tflops: float) -> int:
    """Copies a Chakra ET, setting each compute node's 0 ``duration_micros`` from its
    ``num_ops``: ``ceil(num_ops / (tflops * 1e6))`` µs. Returns the nodes filled."""
    from libra_jax.inputs.chakra_schema import (GlobalMetadata, Node, NodeType, encode_message,
                                                read_varint)
    data = src.read_bytes()
    out, pos, k, filled = [], 0, 0, 0
    per_us = tflops * 1e6
    while pos < len(data):
        size, start = read_varint(data, pos)
        msg = GlobalMetadata() if k == 0 else Node()
        msg.ParseFromString(data[start:start + size])
        if k and msg.type == NodeType.COMP_NODE and msg.duration_micros == 0:
            ops = next((a.int64_val or a.uint64_val for a in msg.attr if a.name == "num_ops"), 0)
            if ops > 0:
                msg.duration_micros = math.ceil(ops / per_us)
                filled += 1
        out.append(encode_message(msg))
        pos, k = start + size, k + 1
    dst.write_bytes(b"".join(out))
    return filled


def prepare_real(case: dict, et_dir: pathlib.Path, args) -> tuple[str, str | None]:
    """Puts the case's ETs in ``et_dir`` -> (workload prefix, comm-group JSON or None)."""
    et_dir.mkdir(parents=True, exist_ok=True)
    src = case["source"]
    if src in ("astra_micro", "astra_custom"):
        with tarfile.open(REAL / "astra-sim_examples.tar.gz") as tar:
            tar.extractall(et_dir, filter="data")
        sub = ("microbenchmarks/" if src == "astra_micro" else "custom_ring_allreduce_8npus_1MB/")
        return str(et_dir / sub / case["trace"]), None
    if src == "chakra_feeder":
        with tarfile.open(REAL / "feeder_tests_trace.tar.gz") as tar:
            tar.extractall(et_dir, filter="data")
        one = et_dir / "tests" / "data" / case["trace"]
        for r in range(case["npus"]):
            shutil.copyfile(one, et_dir / f"wl.{r}.et")
        return str(et_dir / "wl"), None
    if src == "stg":
        if not args.stg_dir:
            raise RuntimeError("STG case: give --stg-dir and --stg-python")
        raw = et_dir / "raw"
        raw.mkdir(exist_ok=True)
        cmd = [args.stg_python, "main.py", "--output_dir", str(raw), "--output_name",
               "wl.%d.et"] + [x for k, v in case["stg_args"].items() for x in (f"--{k}", str(v))]
        p = subprocess.run(cmd, cwd=args.stg_dir, capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise RuntimeError("STG failed: " + (p.stderr or p.stdout)[-300:])
        (et_dir / "cmd_stg.sh").write_text(shlex.join(cmd) + "\n")
        for r in range(case["npus"]):
            _fill_durations(raw / f"wl.{r}.et", et_dir / f"wl.{r}.et", case["fill_tflops"])
        shutil.copyfile(raw / "wl.json", et_dir / "comm_groups.json")
        shutil.rmtree(raw)
        return str(et_dir / "wl"), str(et_dir / "comm_groups.json")
    raise ValueError(src)


# ----------------------------------------------------------------------------- running
def sim_argv(ws: str, case: dict, run_dir: str, workload: str, comm_groups: str | None):
    """experiments/astrasim_heldout's simulator command with this case's workload and
    comm-group files."""
    argv = sim_command(ws, case, run_dir)
    out = []
    for a in argv:
        if a.startswith("--workload-configuration="):
            a = f"--workload-configuration={workload}"
        elif a.startswith("--comm-group-configuration="):
            a = f"--comm-group-configuration={comm_groups or 'empty'}"
        out.append(a)
    return out


def run_measured(argv, env, cwd, timeout: float, log_path) -> tuple[int, float, float, str]:
    """Runs a command under ``/usr/bin/time`` -> (rc, wall s, peak RSS MB, output); rc 124
    when killed at ``timeout`` (the whole process group)."""
    stats = pathlib.Path(str(log_path) + ".time")
    t0 = time.time()
    with open(log_path, "w+") as log:
        p = subprocess.Popen(["/usr/bin/time", "-f", "%M %e", "-o", str(stats)] + list(argv),
                             stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            p.wait()
            rc = 124
        wall = time.time() - t0
        log.seek(0)
        text = log.read()
    rss_mb = float("nan")
    try:
        last = stats.read_text().split("\n")[-2].split()  # "Command exited ..." may precede
        rss_mb, wall = int(last[0]) / 1024.0, float(last[1])
    except (OSError, IndexError, ValueError):
        pass
    return rc, wall, rss_mb, text


def simulate(case: dict, backend: str, case_dir: pathlib.Path, workload: str,
             comm_groups: str | None, ws: str, timeout: float) -> dict:
    run = dict(case, backend=backend)
    run_dir = case_dir / backend
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = sim_argv(ws, run, str(case_dir), workload, comm_groups)
    env = dict(os.environ, ASTRASIM_MAX_INFLIGHT_COMM=str(case["max_inflight_comm"]))
    (run_dir / "cmd.sh").write_text(
        f"cd {run_dir} && ASTRASIM_MAX_INFLIGHT_COMM={case['max_inflight_comm']} "
        f"{shlex.join(argv)}\n")
    rc, wall, rss, text = run_measured(argv, env, run_dir, timeout, run_dir / "sim.log")
    fin = {int(m.group(1)): int(m.group(2)) for m in FINISHED.finditer(text)}
    row = {"case_id": case["case_id"], "set": case["set"], "kind": case["kind"],
           "backend": backend, "npus": case["npus"], "nodes_max": case.get("nodes_max", ""),
           "astra_max_ns": "", "astra_min_ns": "", "astra_spread_ns": "",
           "wall_s": f"{wall:.3f}", "max_rss_mb": f"{rss:.1f}", "rc": rc, "error": ""}
    partial = f"{len(fin)}/{case['npus']} NPUs finished"
    if rc == 124:
        row["error"] = f"timeout after {timeout:g} s; {partial}"
    elif rc != 0:
        row["error"] = f"exit {rc}; {partial}; " + _short_error(text)
    elif len(fin) != case["npus"]:
        row["error"] = f"deadlock: event queue drained with {partial}"
    else:
        row["astra_max_ns"] = max(fin.values())
        row["astra_min_ns"] = min(fin.values())
        row["astra_spread_ns"] = row["astra_max_ns"] - row["astra_min_ns"]
    return row


def prepare(case: dict, case_dir: pathlib.Path, args) -> tuple[str, str | None]:
    """Writes the case's configs and ETs -> (workload prefix, comm-group JSON or None)."""
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    (case_dir / "case.json").write_text(json.dumps(case, indent=1))
    (case_dir / "network.yml").write_text(network_yaml(case))
    (case_dir / "system.json").write_text(json.dumps(system_json(case), indent=2))
    (case_dir / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    if case["kind"] == "generated":
        from libra_jax.inputs.chakra_export import write_trace_set
        trace, omit = trace_set(case)
        files = write_trace_set(trace, case_dir / "et", name="wl", omit_involved_dim=omit)
        case["nodes_max"] = max(t.num_nodes for t in trace.ranks)
        return str(case_dir / "et" / "wl"), (str(files.comm_groups) if files.comm_groups
                                               else None)
    workload, groups = prepare_real(case, case_dir / "et", args)
    return workload, groups


def _nodes_max(workload: str, npus: int) -> int:
    from libra_jax.inputs.chakra import read_trace
    return max(len(read_trace(f"{workload}.{r}.et")[1]) for r in range(npus))


def run_set(args) -> None:
    ws = os.path.abspath(args.astra_ws)
    runs = pathlib.Path(args.runs_dir or os.path.join(ws, "runs_traces")) / args.set
    cases = [draw_case(args.set, i) for i in range(args.cases)]
    if not args.no_real:
        cases += real_cases(args.set, stg=bool(args.stg_dir))
    rows, t0 = [], time.time()
    for case in cases:
        case_dir = runs / case["case_id"]
        try:
            workload, groups = prepare(case, case_dir, args)
            if "nodes_max" not in case:
                case["nodes_max"] = _nodes_max(workload, case["npus"])
        except Exception as e:  # noqa: BLE001 -- a failed preparation is a result row
            for b in BACKENDS:
                rows.append({"case_id": case["case_id"], "set": case["set"],
                             "kind": case["kind"], "backend": b, "npus": case["npus"],
                             "nodes_max": "", "astra_max_ns": "", "astra_min_ns": "",
                             "astra_spread_ns": "", "wall_s": "0", "max_rss_mb": "",
                             "rc": -1, "error": f"prepare failed: {str(e)[:300]}"})
            print(f"{case['case_id']}: prepare failed: {e}", flush=True)
            continue
        case["workload"] = os.path.relpath(workload, case_dir)
        case["comm_groups"] = os.path.relpath(groups, case_dir) if groups else None
        for b in BACKENDS:
            row = simulate(case, b, case_dir, workload, groups, ws, args.timeout)
            rows.append(row)
            if not args.quiet:
                print(f"{row['case_id']:28s} {b:7s} {case['network']:14s} n={case['npus']:3d} "
                      f"nodes={row['nodes_max']!s:>6s} max={row['astra_max_ns']!s:>12s} "
                      f"{row['wall_s']:>7s}s {row['max_rss_mb']:>6s}MB {row['error']}",
                      flush=True)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / f"{args.set}.json", "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases)
                + "\n]\n")
    with open(out / f"{args.set}.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=RESULT_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    failed = [r for r in rows if r["error"]]
    print(f"{args.set}: {len(cases)} cases, {len(rows)} runs, {len(failed)} failed, "
          f"{time.time() - t0:.0f} s")


# ----------------------------------------------------------------------------- compare
def _libra_inputs(case: dict, backend: str):
    """(blocks, npus_per_dim, bandwidth_gbps, TimingModel) of a case, as
    experiments/astrasim_workload.py builds them (GB = 2^30 B, the knobs one to one)."""
    from libra_jax.model import timing
    from libra_jax.types import BLOCKS
    blocks = [BLOCKS.index(t) for t in case["topology"]]
    tm = timing.TimingModel(
        model="pipelined", latency_ns=[float(x) for x in case["latency_ns"]],
        chunks=int(case["chunks"]), endpoint_delay_ns=float(case["endpoint_delay_ns"]),
        local_mem_bw_gbps=float(case["local_mem_bw_GBps"]), gb_is_gib=True,
        queue_policy=case["scheduling_policy"].lower(),
        queues_per_dim=int(case["queues_per_dim"]), network_backend=backend,
        max_inflight_collectives=int(case["max_inflight_comm"]))
    return blocks, case["npus_per_dim"], [float(b) for b in case["bandwidth_GBps"]], tm


def compare(args) -> int:
    """libra_jax (read_chakra + simulate_trace) against the stored ASTRA-sim numbers, per
    case and backend, on the set's run directories (the ETs must still be there)."""
    try:
        from libra_jax.inputs.chakra_import import read_chakra
        from libra_jax.model.step_trace import simulate_trace
    except ImportError as e:
        print(f"--compare needs libra_jax.inputs.chakra_import.read_chakra and "
              f"libra_jax.model.step_trace.simulate_trace: {e}")
        return 2
    ws = os.path.abspath(args.astra_ws)
    runs = pathlib.Path(args.runs_dir or os.path.join(ws, "runs_traces")) / args.set
    out = pathlib.Path(args.out)
    cases = {c["case_id"]: c for c in json.loads((out / f"{args.set}.json").read_text())}
    with open(out / f"{args.set}.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if not r["error"]]
    errors = {b: [] for b in BACKENDS}
    refused = {b: 0 for b in BACKENDS}
    traces = {}
    print(f"{'case':28s} {'backend':7s} {'astra_ns':>14s} {'libra_ns':>16s} {'err%':>8s}")
    for r in rows:
        case = cases[r["case_id"]]
        case_dir = runs / case["case_id"]
        groups = case.get("comm_groups")
        try:
            if case["case_id"] not in traces:
                traces = {case["case_id"]: read_chakra(
                    case_dir / case["workload"],
                    comm_groups=str(case_dir / groups) if groups else None,
                    num_dims=len(case["npus_per_dim"]))}
            blocks, npd, bw, tm = _libra_inputs(case, r["backend"])
            got = simulate_trace(traces[case["case_id"]], blocks, npd, bw, tm).time_ns
        except Exception as e:  # noqa: BLE001 -- a refused or failing case is reported
            refused[r["backend"]] += 1
            print(f"{r['case_id']:28s} {r['backend']:7s} {type(e).__name__}: "
                  f"{str(e)[:150]}")
            continue
        ref = float(r["astra_max_ns"])
        err = (got - ref) / ref * 100
        errors[r["backend"]].append(abs(err))
        print(f"{r['case_id']:28s} {r['backend']:7s} {ref:14.0f} {got:16.1f} {err:+8.3f}")
    for b, errs in errors.items():
        if errs:
            within5 = sum(e <= 5 for e in errs) / len(errs) * 100
            print(f"{b}: {len(errs)} runs compared, {within5:.1f} % within 5 %, max |err| "
                  f"{max(errs):.3f} %, beyond 10 %: {sum(e > 10 for e in errs)}; "
                  f"{refused[b]} refused or failed")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=sorted(SEEDS), default="tuning")
    ap.add_argument("--cases", type=int, default=60, help="generated cases (x2 backends)")
    ap.add_argument("--no-real", action="store_true", help="generated cases only")
    ap.add_argument("--stg-dir", default=None, help="a symbolic_tensor_graph checkout")
    ap.add_argument("--stg-python", default=sys.executable,
                    help="a Python with STG's dependencies (sympy, pandas, protobuf, tqdm)")
    ap.add_argument("--out", default=str(OUT), help="where <set>.json / <set>.csv go")
    ap.add_argument("--astra-ws", default="/work/astra_ws")
    ap.add_argument("--runs-dir", default=None, help="default: <astra-ws>/runs_traces")
    ap.add_argument("--timeout", type=float, default=300.0, help="per simulator run, s")
    ap.add_argument("--compare", action="store_true",
                    help="libra_jax against the stored ASTRA-sim numbers")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(args)
    for b in BACKENDS:
        exe = f"{args.astra_ws}/astra-sim/build/astra_analytical/build/bin/{EXE[b]}"
        if not os.access(exe, os.X_OK):
            sys.exit(f"no ASTRA-sim binary {exe}")
    run_set(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
