"""Held-out whole-step cases simulated with ASTRA-sim (analytical backends).

Draws seeded, randomised training-step workloads (multi-dim networks, TP / DP / EP groups given
by ``involved_dim``, mixed collectives, chain or DP-overlap dependencies), runs each one through
ASTRA-sim's congestion-unaware *and* congestion-aware analytical backends, and records ASTRA-sim's
step time (max over NPUs of ``sys[i] finished, T cycles``; 1 tick = 1 ns). A later step compares
libra_jax's prediction with these numbers; nothing here imports libra_jax.

    python experiments/astrasim_heldout.py --cases 200 --seed 1 \
        --out experiments/results/astrasim_heldout --astra-ws /work/astra_ws

Needs an ASTRA-sim build in ``--astra-ws`` as in ``/work/shared/reference/astrasim_workload/README.md``
section 1 (``astra-sim/build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_{Unaware,Aware}``
with the two local patches, and ``venv/`` with protobuf 3.20.3). The per-NPU Chakra ETs are written
by the reference generator ``gen_workload_et.py`` (``--gen``), run with the workspace's venv and
chakra on ``PYTHONPATH``, exactly like the reference ``gen_cmd``.

Writes into ``--out`` (kept small, no ETs):

* ``cases.json``: one dict per simulator run (two per drawn case, ``backend`` unaware / aware), in
  the schema of the reference ``cases.json`` (``npus_per_dim``, ``topology``, ``bandwidth_GBps``,
  ``latency_ns``, ``endpoint_delay_ns``, ``chunks``, ``backend``, ``scheduling_policy``,
  ``queues_per_dim``, ``active_chunks_per_dim``, ``local_mem_bw_GBps``, ``max_inflight_comm``,
  ``deps``, ``groups``, ``layers``, ...) plus ``draw_id`` (shared by the two rows of one draw);
* ``results.csv``: ``case_id, backend, astra_max_ns, astra_min_ns, wall_s, rc, error``;
* ``run_info.json``: command line, seed, counts, total wall time, failures.

Each run's directory ``<astra-ws>/runs_heldout/<case_id>/`` holds ``case.json``, ``network.yml``,
``system.json``, ``memory.json``, ``et/wl.<rank>.et``, ``cmd.sh`` (the exact generator and
simulator commands), ``sim.log`` and ASTRA-sim's own ``log/`` (the simulator runs there).
``network.yml`` / ``system.json`` are pure functions of the case dict (:func:`network_yaml`,
:func:`system_json`), so ``cases.json`` alone reproduces a run.

Result rows: ``rc`` is the simulator's exit status (124 = killed at ``--timeout``, default 60 s).
A run where fewer NPUs than the machine has print ``finished`` (ASTRA-sim's event queue drained
with work left, i.e. a deadlock) keeps its rc, gets an ``error`` and empty ``astra_*_ns``. A
failed ET generation is ``rc`` = -1 with the generator's error. Every drawn case stays in the
output.

Random space (one ``random.Random`` per case, seeded by ``(seed, index)``, so case i does not
depend on ``--cases``): 2-4 dims, each Ring / FullyConnected / Switch with 2-8 NPUs (<= 128 NPUs
in all); 25-400 GB/s per dim (log-uniform, integer; 1 GB = 2^30 B in the YAML); latency 0 on
every dim, or 100-1000 ns (one value, or one per dim); endpoint delay 1-10 ns; 1-8 chunks;
``chain`` or ``dp_overlap``; TP and DP groups are non-empty sets of dims, disjoint, overlapping
(sharing some dims) or equal; TP collective pairs (fwd/bwd) AR/AR, AG/RS, RS/AG, A2A/A2A or a
random pair; DP all_reduce, reduce_scatter, all_gather, all_to_all or ZeRO
``[reduce_scatter, all_gather]`` (AG shard = RS size / DP group size); sometimes an EP
all_to_all pair around an expert compute (EP group: its own set of dims); 1-6 layers; computes
1-500 us (integer, log-uniform); ET comm sizes 64 KiB - 64 MiB (log-uniform, multiples of
4 KiB); LIFO or FIFO; 1 or 2 queues per dim; ``max_inflight_comm`` 4 (85 %) or 1;
``local-mem-bw`` 1e6 (85 %) or 1600 GB/s. Always ``ring`` on every dim, ``localBWAware``,
ascending dimension order, 1 active chunk per dim. That is ``--kind random`` (the default);
``--kind overlap_comm`` draws the communication-bound ``dp_overlap`` steps of issue 30 point 4
instead (:func:`draw_case_overlap_comm`; ``draw_id`` c<seed>_<index>):

    python experiments/astrasim_heldout.py --kind overlap_comm --cases 150 --seed 3 \
        --out experiments/results/astrasim_heldout3 --runs-dir /work/astra_ws/runs_heldout3

``--kind disjoint_comm`` takes that issue's disjoint-dims words more literally
(:func:`draw_case_disjoint_comm`; ``draw_id`` d<seed>_<index>): Switch dims of 4-8 NPUs, TP
all-reduces 16-64 MiB on dims {0, 1}, computes 1-50 us, 3-8 layers, both queue policies,
1 or 2 queues, in-flight limit 4 or 1, local memory 1600 GB/s:

    python experiments/astrasim_heldout.py --kind disjoint_comm --cases 150 --seed 4 \
        --out experiments/results/astrasim_heldout4 --runs-dir /work/astra_ws/runs_heldout4

``--kind disjoint_wide`` goes beyond it (:func:`draw_case_disjoint_wide`; ``draw_id``
w<seed>_<index>): TP all-reduces 32 MiB - 1 GiB, 2-16 layers, DP all-reduce / ZeRO /
reduce-scatter / all-gather 8-512 MiB, other disjoint TP / DP splits, 1-16 chunks, 1, 2 or 4
queues, in-flight limit 1-16, local-mem-bw 1600, 1e6 or 100-1600 GB/s, Switch 2-8 / Ring 2-4:

    python experiments/astrasim_heldout.py --kind disjoint_wide --cases 150 --seed 5 \
        --out experiments/results/astrasim_heldout5 --runs-dir /work/astra_ws/runs_heldout5
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time

REF = "/work/shared/reference/astrasim_workload"
TOPOLOGIES = ("Ring", "FullyConnected", "Switch")
SHORT_TOPO = {"Ring": "R", "FullyConnected": "FC", "Switch": "S"}
BACKENDS = ("unaware", "aware")
EXE = {"unaware": "AstraSim_Analytical_Congestion_Unaware",
       "aware": "AstraSim_Analytical_Congestion_Aware"}
FINISHED = re.compile(r"sys\[(\d+)\] finished, (\d+) cycles")
KIB = 1024
MIB = 1024 * 1024
MAX_NPUS = 128
COLUMNS = ("case_id", "backend", "astra_max_ns", "astra_min_ns", "wall_s", "rc", "error")


# ----------------------------------------------------------------------------- drawing cases
def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _size(rng: random.Random, unit: int = 4 * KIB) -> int:
    """ET comm_size in [64 KiB, 64 MiB], log-uniform, a multiple of ``unit``."""
    s = _log_uniform(rng, 64 * KIB, 64 * MIB)
    return max(unit, int(round(s / unit)) * unit)


def _us(rng: random.Random) -> int:
    return int(round(_log_uniform(rng, 1, 500)))


def _big(rng: random.Random, lo_mib: float, hi_mib: float, unit: int = 4 * KIB) -> int:
    """A size in [lo_mib, hi_mib] MiB, log-uniform, a multiple of ``unit`` bytes."""
    s = _log_uniform(rng, lo_mib * MIB, hi_mib * MIB)
    return max(unit, int(round(s / unit)) * unit)


def _us_in(rng: random.Random, lo: float, hi: float) -> int:
    """Whole microseconds in [lo, hi], log-uniform."""
    return int(round(_log_uniform(rng, lo, hi)))


def _group_size(npus_per_dim, dims) -> int:
    g = 1
    for d in dims:
        g *= npus_per_dim[d]
    return g


def _draw_groups(rng: random.Random, D: int):
    """TP / DP dim sets and how they relate: disjoint, overlap (share some dims) or equal."""
    mode = rng.choices(("disjoint", "overlap", "equal"), weights=(0.45, 0.35, 0.20))[0]
    while True:
        if mode == "disjoint":
            role = [rng.choices(("tp", "dp", "-"), weights=(0.45, 0.45, 0.10))[0] for _ in range(D)]
            tp = [d for d in range(D) if role[d] == "tp"]
            dp = [d for d in range(D) if role[d] == "dp"]
        elif mode == "overlap":
            role = [rng.choices(("tp", "dp", "both", "-"), weights=(0.3, 0.3, 0.3, 0.1))[0]
                    for _ in range(D)]
            tp = [d for d in range(D) if role[d] in ("tp", "both")]
            dp = [d for d in range(D) if role[d] in ("dp", "both")]
            if not set(tp) & set(dp) or tp == dp:
                continue
        else:
            s = [d for d in range(D) if rng.random() < 0.75]
            tp = dp = s
        if tp and dp:
            return mode, tp, list(dp)


def _coll(kind: str, nbytes: int, group: str) -> dict:
    return {"coll": kind, "bytes": int(nbytes), "group": group}


def draw_case(seed: int, index: int) -> dict:
    """One drawn case (backend-independent); ``draw_id`` = h<seed>_<index>."""
    rng = random.Random(seed * 1_000_003 + index)
    D = rng.randint(2, 4)
    while True:
        npd = [rng.randint(2, 8) for _ in range(D)]
        if math.prod(npd) <= MAX_NPUS:
            break
    topo = [rng.choice(TOPOLOGIES) for _ in range(D)]
    bw = [int(round(_log_uniform(rng, 25, 400))) for _ in range(D)]
    if rng.random() < 0.35:
        lat = [0] * D
    elif rng.random() < 0.5:
        lat = [rng.randint(100, 1000)] * D
    else:
        lat = [rng.randint(100, 1000) for _ in range(D)]
    mode, tp_dims, dp_dims = _draw_groups(rng, D)
    groups = {"tp": {"dims": tp_dims}, "dp": {"dims": dp_dims}}
    g_dp = _group_size(npd, dp_dims)

    tp_pair = rng.choices(
        (("all_reduce", "all_reduce"), ("all_gather", "reduce_scatter"),
         ("reduce_scatter", "all_gather"), ("all_to_all", "all_to_all"), None),
        weights=(0.45, 0.2, 0.1, 0.15, 0.1))[0]
    if tp_pair is None:
        kinds = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
        tp_pair = (rng.choice(kinds), rng.choice(kinds))
    dp_kind = rng.choices(("all_reduce", "zero", "reduce_scatter", "all_gather", "all_to_all"),
                          weights=(0.45, 0.2, 0.1, 0.1, 0.15))[0]
    ep = rng.random() < 0.25
    if ep:
        while True:
            ep_dims = [d for d in range(D) if rng.random() < 0.5]
            if ep_dims:
                break
        groups["ep"] = {"dims": ep_dims}

    n_layers = rng.randint(1, 6)
    ep_layers = set()
    if ep:
        ep_layers = {i for i in range(n_layers) if rng.random() < 0.7} or {rng.randrange(n_layers)}
    layers = []
    for i in range(n_layers):
        ly = {"fwd_us": _us(rng), "bwd_in_us": _us(rng), "bwd_w_us": _us(rng),
              "tp_fwd": _coll(tp_pair[0], _size(rng), "tp"),
              "tp_bwd": _coll(tp_pair[1], _size(rng), "tp")}
        if dp_kind == "zero":  # RS of the gradient, then AG of the updated shard (S / g_dp)
            s = _size(rng, unit=4 * KIB * g_dp)
            ly["dp"] = [_coll("reduce_scatter", s, "dp"), _coll("all_gather", s // g_dp, "dp")]
        else:
            ly["dp"] = _coll(dp_kind, _size(rng), "dp")
        if i in ep_layers:
            ly["ep_a2a"] = _coll("all_to_all", _size(rng), "ep")
            ly["ep_us"] = _us(rng)
            if rng.random() < 0.5:
                ly["ep_a2a_back"] = _coll("all_to_all", _size(rng), "ep")
        layers.append(ly)

    case = {
        "draw_id": f"h{seed}_{index:04d}",
        "group": "heldout",
        "network": "x".join(f"{SHORT_TOPO[t]}{n}" for t, n in zip(topo, npd)),
        "topology": topo,
        "npus_per_dim": npd,
        "npus": math.prod(npd),
        "bandwidth_GBps": bw,
        "latency_ns": lat,
        "endpoint_delay_ns": rng.randint(1, 10),
        "chunks": rng.randint(1, 8),
        "impl_per_dim": ["ring"] * D,
        "collective_optimization": "localBWAware",
        "scheduling_policy": rng.choices(("LIFO", "FIFO"), weights=(0.6, 0.4))[0],
        "active_chunks_per_dim": 1,
        "queues_per_dim": rng.choices((1, 2), weights=(0.6, 0.4))[0],
        "local_mem_bw_GBps": 1e6 if rng.random() < 0.85 else 1600.0,
        "max_inflight_comm": 4 if rng.random() < 0.85 else 1,
        "deps": rng.choices(("chain", "dp_overlap"), weights=(0.4, 0.6))[0],
        "groups": groups,
        "layers": layers,
        "note": f"groups={mode}; tp={tp_pair[0]}/{tp_pair[1]}; dp={dp_kind}; ep={'yes' if ep else 'no'}",
    }
    return case


# The kinds of issue 30 point 4: dp_overlap steps bound by their collectives (large TP
# all-reduces, short backward computes) where TP and DP run at the same time on DISJOINT
# dimensions (TP 0-1, DP 2-3 of a 4-D Switch / Ring mix), or TP all-reduces over all four
# dimensions beside ZeRO (reduce-scatter, then all-gather) on dims 1-3 of a FullyConnected /
# Ring mix; finite local-memory bandwidth, 200-1000 ns per hop, 1 or 8 chunks.
KINDS = ("random", "overlap_comm", "disjoint_comm", "disjoint_wide")


def _comm_bound_layers(rng: random.Random, count: tuple[int, int], fwd_us: tuple[int, int],
                       bwd_us: tuple[int, int], tp_mib: tuple[int, int], dp_kind: str,
                       g_dp: int) -> list[dict]:
    """The layers of a communication-bound ``dp_overlap`` draw (`draw_case_overlap_comm`,
    `draw_case_disjoint_comm`): ``count`` layers (inclusive range), each with forward and
    two backward computes (log-uniform us), TP all-reduces fwd / bwd of ``tp_mib`` MiB and a
    DP all-reduce of 8-128 MiB or ZeRO (reduce-scatter of 8-128 MiB, all-gather of its
    shard over the DP group of ``g_dp`` NPUs)."""

    def big(lo_mib, hi_mib, unit=4 * KIB):
        return _big(rng, lo_mib, hi_mib, unit)

    def us(lo, hi):
        return _us_in(rng, lo, hi)

    layers = []
    for _ in range(rng.randint(*count)):
        ly = {"fwd_us": us(*fwd_us), "bwd_in_us": us(*bwd_us), "bwd_w_us": us(*bwd_us),
              "tp_fwd": _coll("all_reduce", big(*tp_mib), "tp"),
              "tp_bwd": _coll("all_reduce", big(*tp_mib), "tp")}
        if dp_kind == "zero":
            s = big(8, 128, unit=4 * KIB * g_dp)
            ly["dp"] = [_coll("reduce_scatter", s, "dp"), _coll("all_gather", s // g_dp, "dp")]
        else:
            ly["dp"] = _coll("all_reduce", big(8, 128), "dp")
        layers.append(ly)
    return layers


def draw_case_overlap_comm(seed: int, index: int) -> dict:
    """One drawn case of kind ``overlap_comm``; ``draw_id`` = c<seed>_<index>.

    4 dims of 2-4 NPUs (<= 128); ``disjoint`` (70 %): each dim Switch or Ring, TP = dims
    {0, 1}, DP = dims {2, 3}, DP all_reduce (80 %) or ZeRO; ``zero_all`` (30 %): each dim
    FullyConnected or Ring, TP = all four dims, DP = ZeRO on dims {1, 2, 3}. TP all_reduce
    fwd / bwd 8-64 MiB; DP 8-128 MiB; 50-400 GB/s per dim; latency 200-1000 ns (one value or
    one per dim); endpoint 1-10 ns; 1 or 8 chunks; local-mem-bw 1600 GB/s (75 %) or 1e6;
    LIFO (75 %) / FIFO; 1 queue (75 %) or 2; max_inflight_comm 4; always dp_overlap;
    2-5 layers; forward compute 20-400 us, backward computes 5-150 us (comm-bound)."""
    rng = random.Random(seed * 1_000_003 + index + 7_777_777)
    D = 4
    variant = "disjoint" if rng.random() < 0.7 else "zero_all"
    while True:
        npd = [rng.randint(2, 4) for _ in range(D)]
        if math.prod(npd) <= MAX_NPUS:
            break
    pool = ("Switch", "Ring") if variant == "disjoint" else ("FullyConnected", "Ring")
    topo = [rng.choice(pool) for _ in range(D)]
    bw = [int(round(_log_uniform(rng, 50, 400))) for _ in range(D)]
    lat = ([rng.randint(200, 1000)] * D if rng.random() < 0.5
           else [rng.randint(200, 1000) for _ in range(D)])
    if variant == "disjoint":
        tp_dims, dp_dims = [0, 1], [2, 3]
        dp_kind = "all_reduce" if rng.random() < 0.8 else "zero"
    else:
        tp_dims, dp_dims = [0, 1, 2, 3], [1, 2, 3]
        dp_kind = "zero"
    g_dp = _group_size(npd, dp_dims)

    layers = _comm_bound_layers(rng, (2, 5), (20, 400), (5, 150), (8, 64), dp_kind, g_dp)
    return {
        "draw_id": f"c{seed}_{index:04d}",
        "group": "overlap_comm",
        "network": "x".join(f"{SHORT_TOPO[t]}{n}" for t, n in zip(topo, npd)),
        "topology": topo,
        "npus_per_dim": npd,
        "npus": math.prod(npd),
        "bandwidth_GBps": bw,
        "latency_ns": lat,
        "endpoint_delay_ns": rng.randint(1, 10),
        "chunks": rng.choice((1, 8)),
        "impl_per_dim": ["ring"] * D,
        "collective_optimization": "localBWAware",
        "scheduling_policy": "LIFO" if rng.random() < 0.75 else "FIFO",
        "active_chunks_per_dim": 1,
        "queues_per_dim": 1 if rng.random() < 0.75 else 2,
        "local_mem_bw_GBps": 1600.0 if rng.random() < 0.75 else 1e6,
        "max_inflight_comm": 4,
        "deps": "dp_overlap",
        "groups": {"tp": {"dims": tp_dims}, "dp": {"dims": dp_dims}},
        "layers": layers,
        "note": f"kind=overlap_comm; variant={variant}; tp=all_reduce/all_reduce; dp={dp_kind}",
    }


def _switch_ring_4d(rng: random.Random, switch_min: int, bw_min: float):
    """(topology, NPUs per dim, GB/s per dim, ns per hop) of a 4-dim Switch (``switch_min``-8
    NPUs) / Ring (2-4) network of <= `MAX_NPUS` NPUs, ``bw_min``-400 GB/s per dim and
    200-1000 ns per hop (one for all dims or one each), drawn in this order from ``rng``
    (the draws of kinds ``disjoint_comm`` and ``disjoint_wide``)."""
    while True:
        topo = [rng.choice(("Switch", "Ring")) for _ in range(4)]
        npd = [rng.randint(switch_min, 8) if t == "Switch" else rng.randint(2, 4)
               for t in topo]
        if math.prod(npd) <= MAX_NPUS:
            break
    bw = [int(round(_log_uniform(rng, bw_min, 400))) for _ in range(4)]
    lat = ([rng.randint(200, 1000)] * 4 if rng.random() < 0.5
           else [rng.randint(200, 1000) for _ in range(4)])
    return topo, npd, bw, lat


def draw_case_disjoint_comm(seed: int, index: int) -> dict:
    """One drawn case of kind ``disjoint_comm``; ``draw_id`` d<seed>_<index>.

    Issue 30 point 4's disjoint-dims words taken closer than ``overlap_comm`` does: 4 dims,
    each Switch (4-8 NPUs) or Ring (2-4 NPUs), <= 128 NPUs; TP = dims {0, 1}, DP = dims {2, 3};
    TP all_reduce fwd / bwd 16-64 MiB, DP all_reduce (80 %) or ZeRO 8-128 MiB; forward and
    backward computes 1-50 us (communication-bound); 3-8 layers; 1 or 8 chunks; latency
    200-1000 ns; local-mem-bw 1600 GB/s; LIFO / FIFO; 1 or 2 queues per dim;
    max_inflight_comm 4 or 1; 50-400 GB/s per dim; always dp_overlap."""
    rng = random.Random(seed * 1_000_003 + index + 9_999_991)
    D = 4
    topo, npd, bw, lat = _switch_ring_4d(rng, 4, 50)
    tp_dims, dp_dims = [0, 1], [2, 3]
    dp_kind = "all_reduce" if rng.random() < 0.8 else "zero"
    g_dp = _group_size(npd, dp_dims)

    layers = _comm_bound_layers(rng, (3, 8), (1, 50), (1, 50), (16, 64), dp_kind, g_dp)
    return {
        "draw_id": f"d{seed}_{index:04d}",
        "group": "disjoint_comm",
        "network": "x".join(f"{SHORT_TOPO[t]}{n}" for t, n in zip(topo, npd)),
        "topology": topo,
        "npus_per_dim": npd,
        "npus": math.prod(npd),
        "bandwidth_GBps": bw,
        "latency_ns": lat,
        "endpoint_delay_ns": rng.randint(1, 10),
        "chunks": rng.choice((1, 8)),
        "impl_per_dim": ["ring"] * D,
        "collective_optimization": "localBWAware",
        "scheduling_policy": rng.choice(("LIFO", "FIFO")),
        "active_chunks_per_dim": 1,
        "queues_per_dim": rng.choice((1, 2)),
        "local_mem_bw_GBps": 1600.0,
        "max_inflight_comm": rng.choice((4, 1)),
        "deps": "dp_overlap",
        "groups": {"tp": {"dims": tp_dims}, "dp": {"dims": dp_dims}},
        "layers": layers,
        "note": f"kind=disjoint_comm; tp=all_reduce/all_reduce; dp={dp_kind}",
    }


def draw_case_disjoint_wide(seed: int, index: int) -> dict:
    """One drawn case of kind ``disjoint_wide``; ``draw_id`` w<seed>_<index>.

    Issue 30 point 4 beyond ``disjoint_comm``: 4 dims, each Switch (2-8 NPUs) or Ring (2-4),
    <= 128 NPUs; TP and DP on disjoint dims (TP {0, 1} / DP {2, 3} in 70 %, else TP {0} /
    DP {1, 2, 3}, TP {0, 1, 2} / DP {3} or TP {2, 3} / DP {0, 1}); TP all_reduce fwd / bwd
    32 MiB - 1 GiB; DP all_reduce (55 %), ZeRO (25 %), reduce_scatter or all_gather,
    8 MiB - 512 MiB; forward computes 1-400 us, backward 1-50 us; 2-16 layers; 1, 2, 4, 8
    or 16 chunks; latency 200-1000 ns; local-mem-bw 1600 (60 %), 1e6 or 100-1600 GB/s;
    LIFO / FIFO; 1, 2 or 4 queues per dim; in-flight limit 1, 2, 4, 8 or 16; 25-400 GB/s
    per dim; always dp_overlap, ring, localBWAware, 1 active chunk."""
    rng = random.Random(seed * 1_000_003 + index + 13_131_313)
    D = 4
    topo, npd, bw, lat = _switch_ring_4d(rng, 2, 25)
    tp_dims, dp_dims = rng.choices((([0, 1], [2, 3]), ([0], [1, 2, 3]), ([0, 1, 2], [3]),
                                    ([2, 3], [0, 1])), weights=(0.7, 0.1, 0.1, 0.1))[0]
    dp_kind = rng.choices(("all_reduce", "zero", "reduce_scatter", "all_gather"),
                          weights=(0.55, 0.25, 0.1, 0.1))[0]
    g_dp = _group_size(npd, dp_dims)

    def big(lo_mib, hi_mib, unit=4 * KIB):
        return _big(rng, lo_mib, hi_mib, unit)

    def us(lo, hi):
        return _us_in(rng, lo, hi)

    layers = []
    for _ in range(int(round(_log_uniform(rng, 2, 16)))):
        ly = {"fwd_us": us(1, 400), "bwd_in_us": us(1, 50), "bwd_w_us": us(1, 50),
              "tp_fwd": _coll("all_reduce", big(32, 1024), "tp"),
              "tp_bwd": _coll("all_reduce", big(32, 1024), "tp")}
        if dp_kind == "zero":
            s = big(8, 512, unit=4 * KIB * g_dp)
            ly["dp"] = [_coll("reduce_scatter", s, "dp"), _coll("all_gather", s // g_dp, "dp")]
        else:
            ly["dp"] = _coll(dp_kind, big(8, 512), "dp")
        layers.append(ly)
    u = rng.random()
    lmb = 1600.0 if u < 0.6 else (1e6 if u < 0.8 else float(rng.randint(100, 1600)))
    return {
        "draw_id": f"w{seed}_{index:04d}",
        "group": "disjoint_wide",
        "network": "x".join(f"{SHORT_TOPO[t]}{n}" for t, n in zip(topo, npd)),
        "topology": topo,
        "npus_per_dim": npd,
        "npus": math.prod(npd),
        "bandwidth_GBps": bw,
        "latency_ns": lat,
        "endpoint_delay_ns": rng.randint(1, 10),
        "chunks": rng.choice((1, 2, 4, 8, 16)),
        "impl_per_dim": ["ring"] * D,
        "collective_optimization": "localBWAware",
        "scheduling_policy": rng.choice(("LIFO", "FIFO")),
        "active_chunks_per_dim": 1,
        "queues_per_dim": rng.choices((1, 2, 4), weights=(0.45, 0.4, 0.15))[0],
        "local_mem_bw_GBps": lmb,
        "max_inflight_comm": rng.choice((1, 2, 4, 8, 16)),
        "deps": "dp_overlap",
        "groups": {"tp": {"dims": tp_dims}, "dp": {"dims": dp_dims}},
        "layers": layers,
        "note": f"kind=disjoint_wide; tp=all_reduce/all_reduce; dp={dp_kind}",
    }


DRAWERS = {"random": draw_case, "overlap_comm": draw_case_overlap_comm,
           "disjoint_comm": draw_case_disjoint_comm, "disjoint_wide": draw_case_disjoint_wide}


def case_for_backend(case: dict, backend: str) -> dict:
    """The reference-schema dict of one run: case_id and backend first, as in cases.json."""
    out = {"case_id": f"{case['draw_id']}_{backend}"}
    for k, v in case.items():
        out[k] = v
        if k == "chunks":
            out["backend"] = backend
    return out


# ----------------------------------------------------------------------------- configs
def network_yaml(case: dict) -> str:
    """The analytical backends' network YAML (same layout as the reference configs)."""
    def lst(xs):
        return "[ " + ", ".join(str(x) for x in xs) + " ]"
    return (f"topology: {lst(case['topology'])}\n"
            f"npus_count: {lst(case['npus_per_dim'])}\n"
            f"bandwidth: {lst(case['bandwidth_GBps'])}  # GB/s (1 GB = 2^30 B)\n"
            f"latency: {lst(case['latency_ns'])}  # ns\n")


def system_json(case: dict) -> dict:
    """ASTRA-sim system config (keys and order as in the reference configs)."""
    impl = list(case["impl_per_dim"])
    return {
        "scheduling-policy": case["scheduling_policy"],
        "endpoint-delay": case["endpoint_delay_ns"],
        "active-chunks-per-dimension": case["active_chunks_per_dim"],
        "preferred-dataset-splits": case["chunks"],
        "all-reduce-implementation": impl,
        "all-gather-implementation": impl,
        "reduce-scatter-implementation": impl,
        "all-to-all-implementation": impl,
        "collective-optimization": case["collective_optimization"],
        "local-mem-bw": case["local_mem_bw_GBps"],
        "boost-mode": 0,
    }


# ----------------------------------------------------------------------------- running
def gen_command(ws: str, gen: str, run_dir: str) -> str:
    chakra = f"{ws}/astra-sim/extern/graph_frontend/chakra"
    return (f"PYTHONPATH={chakra}/schema/protobuf:{chakra}/src/third_party/utils "
            f"{ws}/venv/bin/python {gen} {run_dir}/case.json {run_dir}/et")


def sim_command(ws: str, case: dict, run_dir: str) -> list[str]:
    exe = f"{ws}/astra-sim/build/astra_analytical/build/bin/{EXE[case['backend']]}"
    return [exe,
            f"--workload-configuration={run_dir}/et/wl",
            "--comm-group-configuration=empty",
            f"--system-configuration={run_dir}/system.json",
            f"--remote-memory-configuration={run_dir}/memory.json",
            f"--network-configuration={run_dir}/network.yml",
            f"--num-queues-per-dim={case['queues_per_dim']}"]


def _short_error(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keys = ("assert", "error", "abort", "terminate", "exception", "segmentation", "what()")
    hits = [ln for ln in lines if any(k in ln.lower() for k in keys)]
    msg = " | ".join((hits or lines)[-2:])
    return msg[:limit]


def prepare(case: dict, run_dir: str, ws: str, gen: str, et_from: str | None = None):
    """Write the run directory; ETs are generated, or copied from ``et_from``. -> error or None."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    with open(os.path.join(run_dir, "case.json"), "w") as f:
        json.dump(case, f, indent=1)
    with open(os.path.join(run_dir, "network.yml"), "w") as f:
        f.write(network_yaml(case))
    with open(os.path.join(run_dir, "system.json"), "w") as f:
        json.dump(system_json(case), f, indent=2)
    with open(os.path.join(run_dir, "memory.json"), "w") as f:
        json.dump({"memory-type": "NO_MEMORY_EXPANSION"}, f)
    gcmd = gen_command(ws, gen, run_dir)
    env_cmd = f"ASTRASIM_MAX_INFLIGHT_COMM={case['max_inflight_comm']} "
    with open(os.path.join(run_dir, "cmd.sh"), "w") as f:
        f.write(f"{gcmd}\n{env_cmd}{shlex.join(sim_command(ws, case, run_dir))}\n")
    if et_from is not None:
        shutil.copytree(et_from, os.path.join(run_dir, "et"))
        return None
    p = subprocess.run(gcmd, shell=True, capture_output=True, text=True)
    if p.returncode != 0:
        return "gen_workload_et failed: " + _short_error(p.stderr + p.stdout)
    return None


def simulate(case: dict, run_dir: str, ws: str, timeout: float) -> dict:
    """Run ASTRA-sim on a prepared run directory -> one results.csv row."""
    env = dict(os.environ, ASTRASIM_MAX_INFLIGHT_COMM=str(case["max_inflight_comm"]))
    t0 = time.time()
    try:
        # cwd: ASTRA-sim writes its spdlog files to ./log/ (kept in the run directory)
        p = subprocess.run(sim_command(ws, case, run_dir), capture_output=True, text=True,
                           env=env, timeout=timeout, cwd=run_dir)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        def _s(x):
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
        out, err, rc = _s(e.stdout), _s(e.stderr), 124
    wall = time.time() - t0
    with open(os.path.join(run_dir, "sim.log"), "w") as f:
        f.write(out + ("\n--- stderr ---\n" + err if err else ""))
    fin = {int(m.group(1)): int(m.group(2)) for m in FINISHED.finditer(out + err)}
    n = case["npus"]
    row = {"case_id": case["case_id"], "backend": case["backend"], "astra_max_ns": "",
           "astra_min_ns": "", "wall_s": f"{wall:.2f}", "rc": rc, "error": ""}
    partial = (f"{len(fin)}/{n} NPUs finished"
               + (f" (max {max(fin.values())} ns)" if fin else ""))
    if rc == 124:
        row["error"] = f"timeout after {timeout:g} s; {partial}"
    elif rc != 0:
        row["error"] = f"exit {rc}; {partial}; " + _short_error(err + "\n" + out)
    elif len(fin) != n:
        row["error"] = f"deadlock: event queue drained with {partial}"
    else:
        row["astra_max_ns"] = max(fin.values())
        row["astra_min_ns"] = min(fin.values())
    return row


def run_draw(base: dict, runs_dir: str, ws: str, gen: str, timeout: float,
             backends=BACKENDS, prepare_fn=None) -> list[tuple[dict, dict]]:
    """One drawn case on every backend: [(case, result row)]. The ETs are written once (the
    first backend's) and reused; a failed ET generation is a row with rc -1 and its error.
    ``prepare_fn``: how a run directory is written (default `prepare`)."""
    prepare_fn = prepare_fn or prepare
    out, et_dir = [], None
    for backend in backends:
        case = case_for_backend(base, backend)
        run_dir = os.path.join(runs_dir, case["case_id"])
        err = prepare_fn(case, run_dir, ws, gen, et_from=et_dir)
        if err:
            row = {"case_id": case["case_id"], "backend": backend, "astra_max_ns": "",
                   "astra_min_ns": "", "wall_s": "0.00", "rc": -1, "error": err}
        else:
            et_dir = os.path.join(run_dir, "et")
            row = simulate(case, run_dir, ws, timeout)
        out.append((case, row))
    return out


def run_all(seed: int, n_cases: int, out: str, ws: str, gen: str, timeout: float,
            backends=BACKENDS, runs_dir: str | None = None, verbose: bool = True,
            kind: str = "random"):
    runs_dir = runs_dir or os.path.join(ws, "runs_heldout")
    os.makedirs(out, exist_ok=True)
    os.makedirs(runs_dir, exist_ok=True)
    cases, rows = [], []
    t_start = time.time()
    for i in range(n_cases):
        for case, row in run_draw(DRAWERS[kind](seed, i), runs_dir, ws, gen, timeout,
                                  backends):
            cases.append(case)
            rows.append(row)
            if verbose:
                print(f"[{len(rows):4d}] {case['case_id']:18s} {case['network']:16s} "
                      f"L={len(case['layers'])} {case['deps']:10s} max={row['astra_max_ns']!s:>12s} "
                      f"{row['wall_s']:>6s}s rc={row['rc']} {row['error']}", flush=True)
    total = time.time() - t_start
    with open(os.path.join(out, "cases.json"), "w") as f:  # one compact case per line
        f.write("[\n" + ",\n".join(json.dumps(c, separators=(",", ":")) for c in cases) + "\n]\n")
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    failed = [r for r in rows if r["error"]]
    info = {"command": " ".join(shlex.quote(a) for a in sys.argv), "seed": seed, "kind": kind,
            "cases_drawn": n_cases, "runs": len(rows), "failed_runs": len(failed),
            "failed_case_ids": [r["case_id"] for r in failed], "total_wall_s": round(total, 1),
            "sim_wall_s_sum": round(sum(float(r["wall_s"]) for r in rows), 1),
            "timeout_s": timeout, "astra_ws": ws, "generator": gen, "runs_dir": runs_dir}
    with open(os.path.join(out, "run_info.json"), "w") as f:
        json.dump(info, f, indent=1)
    return cases, rows, info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=200, help="drawn cases (x2 backends = runs)")
    ap.add_argument("--kind", choices=KINDS, default="random",
                    help="random: the general space (draw_case); overlap_comm: the "
                         "communication-bound dp_overlap kinds of issue 30 point 4 "
                         "(draw_case_overlap_comm); disjoint_comm: its disjoint-dims "
                         "words taken literally (draw_case_disjoint_comm); disjoint_wide: "
                         "beyond them (draw_case_disjoint_wide)")
    ap.add_argument("--out", default="experiments/results/astrasim_heldout")
    ap.add_argument("--astra-ws", default="/work/astra_ws")
    ap.add_argument("--gen", default=os.path.join(REF, "gen_workload_et.py"),
                    help="ET generator (case.json OUT_DIR)")
    ap.add_argument("--runs-dir", default=None, help="default: <astra-ws>/runs_heldout")
    ap.add_argument("--timeout", type=float, default=60.0, help="per simulator run, seconds")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    ws = os.path.abspath(a.astra_ws)
    for b in BACKENDS:
        exe = f"{ws}/astra-sim/build/astra_analytical/build/bin/{EXE[b]}"
        if not os.access(exe, os.X_OK):
            sys.exit(f"no ASTRA-sim binary {exe} (build it as in {REF}/README.md section 1)")
    _, rows, info = run_all(a.seed, a.cases, os.path.abspath(a.out), ws, os.path.abspath(a.gen),
                            a.timeout, runs_dir=a.runs_dir, verbose=not a.quiet, kind=a.kind)
    print(f"{info['runs']} runs ({info['cases_drawn']} cases x {len(BACKENDS)} backends), "
          f"{info['failed_runs']} failed, {info['total_wall_s']} s wall "
          f"(simulator {info['sim_wall_s_sum']} s)")


if __name__ == "__main__":
    main()
