"""Issue 32 point 5: a large trace set timed by ASTRA-sim and by libra_jax, side by side.

The trace: an LLM training step on 64 ranks, tensor x data x pipeline parallel 4 x 4 x 4 on
Ring(4) x FullyConnected(4) x Switch(4) (TP on dim 0 and DP on dim 1 as ``involved_dim``,
the 4 pipeline stages along dim 2 exchanging activations and gradients by sends and
receives), 1F1B, 24 layers per stage (a 96-layer model), each compute split into 12
kernels as a real trace has them, a TP all-reduce after every forward and input-gradient
compute, per-layer DP all-reduces overlapped with the last micro-batch's backward, and as
many micro-batches as give >= 1e5 nodes per rank. Sizes are those of a hidden-8192,
sequence-2048, micro-batch-1 model in 2-byte floats (activation 32 MiB, TP all-reduce
32 MiB, DP all-reduce 384 MiB per layer); a layer's forward takes 2,750 µs (its FLOPs, 24 s
h^2 / TP, at 300 TFLOP/s), each backward half the same. The trace is built by
``experiments/astrasim_traces.trace_set`` (the case dict is :data:`CASE`) and written by
``libra_jax.inputs.chakra_export.write_trace_set``.

    python experiments/bench_trace.py [--work /work/astra_ws/bench_trace] [--aware]

One run does, one after the other on the same machine: write the trace set (skipped when
``--work`` already holds it for the same case), then per backend (unaware; aware with
``--aware``) and repetition (``--repeat``) ASTRA-sim on it and right after it libra_jax
(``read_chakra`` then ``simulate_trace``) in a child process, each timed with
``/usr/bin/time`` (wall, peak RSS); the ratio pairs each libra_jax run with the ASTRA-sim
run just before it. libra_jax's reading rate is its nodes / read seconds (wall; its CPU
seconds are given too), and "the rest" of its wall is what is neither reading nor
simulating (starting Python, importing libra_jax and JAX, building the inputs).
When ``libra_jax.inputs.chakra_import.read_chakra`` or
``libra_jax.model.step_trace.simulate_trace`` is missing, that side is skipped with the
import error in the table. Results go to ``experiments/results/bench_trace.md``; the
"Before" section already in that file (or, if it has none, its former text) is kept at its
end (the numbers of the reader that parsed every rank file).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pathlib
import platform
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from astrasim_traces import (  # noqa: E402
    _libra_inputs,
    network_yaml,
    run_measured,
    sim_argv,
    system_json,
    trace_set,
)

MIB = 1024 * 1024
NODES_PER_RANK = 100_000
LAYERS, KERNELS = 24, 12
#: nodes per micro-batch on a middle stage: L x (F: k + TP, B: k + TP, W: k) + recv/send x 2
PER_MICRO_BATCH = LAYERS * (3 * KERNELS + 2) + 4
CASE = {
    "case_id": "bench_trace", "set": "bench", "kind": "generated",
    "network": "R4xFC4xS4", "topology": ["Ring", "FullyConnected", "Switch"],
    "npus_per_dim": [4, 4, 4], "npus": 64, "bandwidth_GBps": [200, 100, 50],
    "latency_ns": [500, 500, 500], "endpoint_delay_ns": 10, "chunks": 4,
    "impl_per_dim": ["ring"] * 3, "collective_optimization": "localBWAware",
    "scheduling_policy": "LIFO", "active_chunks_per_dim": 1, "queues_per_dim": 1,
    "local_mem_bw_GBps": 1e6, "max_inflight_comm": 4,
    "parallel": {"tp": 4, "dp": 4, "pp": 4}, "schedule": "1f1b",
    "micro_batches": math.ceil(NODES_PER_RANK / PER_MICRO_BATCH),
    "act_bytes": 32 * MIB, "tp_coll": "all_reduce", "dp_kind": "all_reduce",
    "dp_mode": "overlap", "recv_post": "on_demand", "force_pg": {"tp": False, "dp": False},
    "global_ar": None, "kernels": KERNELS,
    "stages": [{"layers": [{"fwd_us": 2750, "bwd_in_us": 2750, "bwd_w_us": 2750,
                            "tp_fwd_bytes": 32 * MIB, "tp_bwd_bytes": 32 * MIB,
                            "dp_bytes": 384 * MIB}] * LAYERS,
                "extra_us": 600 if s in (0, 3) else 0} for s in range(4)],
}


def _digest(case: dict) -> str:
    return hashlib.sha256(json.dumps(case, sort_keys=True).encode()).hexdigest()[:16]


def write(work: pathlib.Path) -> dict:
    """Writes the trace set (unless already there for this case) -> its info."""
    stamp = work / "case.json"
    info_path = work / "trace_info.json"
    if stamp.exists() and info_path.exists() and json.loads(stamp.read_text()) == CASE:
        return json.loads(info_path.read_text())
    from libra_jax.inputs.chakra_export import write_trace_set
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    trace, omit = trace_set(CASE)
    t1 = time.time()
    files = write_trace_set(trace, work / "et", name="wl", omit_involved_dim=omit)
    t2 = time.time()
    nodes = [t.num_nodes for t in trace.ranks]
    info = {"nodes_min": min(nodes), "nodes_max": max(nodes), "nodes_total": sum(nodes),
            "build_s": round(t1 - t0, 1), "write_s": round(t2 - t1, 1),
            "bytes": sum(p.stat().st_size for p in files.et), "digest": _digest(CASE)}
    (work / "network.yml").write_text(network_yaml(CASE))
    (work / "system.json").write_text(json.dumps(system_json(CASE), indent=2))
    (work / "memory.json").write_text(json.dumps({"memory-type": "NO_MEMORY_EXPANSION"}))
    info_path.write_text(json.dumps(info, indent=1))
    stamp.write_text(json.dumps(CASE))
    return info


def astra(work: pathlib.Path, ws: str, backend: str, timeout: float) -> dict:
    from astrasim_heldout import FINISHED
    run = dict(CASE, backend=backend)
    run_dir = work / backend
    run_dir.mkdir(exist_ok=True)
    argv = sim_argv(ws, run, str(work), str(work / "et" / "wl"), None)
    env = dict(os.environ, ASTRASIM_MAX_INFLIGHT_COMM=str(CASE["max_inflight_comm"]))
    rc, wall, rss, text = run_measured(argv, env, run_dir, timeout, run_dir / "sim.log")
    fin = [int(m.group(2)) for m in FINISHED.finditer(text)]
    ok = rc == 0 and len(fin) == CASE["npus"]
    return {"side": f"ASTRA-sim {backend}", "rc": rc, "wall_s": wall, "rss_mb": rss,
            "step_ns": max(fin) if ok else None,
            "note": "" if ok else f"rc {rc}, {len(fin)}/{CASE['npus']} NPUs finished"}


def libra_side(work: pathlib.Path, backend: str) -> None:
    """Child process: read + simulate, print one JSON line."""
    try:
        from libra_jax.inputs.chakra_import import read_chakra
        from libra_jax.model.step_trace import simulate_trace
    except ImportError as e:
        print(json.dumps({"skipped": f"libra_jax side missing: {e}"}))
        return
    t0, c0 = time.perf_counter(), time.process_time()
    trace = read_chakra(work / "et" / "wl", num_dims=len(CASE["npus_per_dim"]))
    t1, c1 = time.perf_counter(), time.process_time()
    blocks, npd, bw, tm = _libra_inputs(CASE, backend)
    timing = simulate_trace(trace, blocks, npd, bw, tm)
    t2 = time.perf_counter()
    nodes = sum(t.num_nodes for t in trace.ranks)
    print(json.dumps({"read_s": t1 - t0, "read_cpu_s": c1 - c0, "simulate_s": t2 - t1,
                      "nodes": nodes, "read_nodes_per_s": nodes / (t1 - t0),
                      "step_ns": float(timing.time_ns)}))


def libra(work: pathlib.Path, backend: str, timeout: float) -> dict:
    argv = [sys.executable, str(pathlib.Path(__file__).resolve()), "--libra-side",
            "--work", str(work), "--backend", backend]
    rc, wall, rss, text = run_measured(argv, dict(os.environ), str(HERE.parent), timeout,
                                       work / f"libra_{backend}.log")
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    out = json.loads(lines[-1]) if rc == 0 and lines else {
        "skipped": f"rc {rc}: {text.strip().splitlines()[-1] if text.strip() else ''}"}
    return {"side": f"libra_jax {backend}", "rc": rc, "wall_s": wall, "rss_mb": rss, **out}


def report(info: dict, rows: list[dict], path: pathlib.Path, command: str) -> str:
    lines = [
        "# Benchmark: a 64-rank Chakra trace set, ASTRA-sim and libra_jax side by side",
        "",
        "Issue 32 point 5, `experiments/bench_trace.py` (its docstring describes the trace).",
        f"Command: `{command}`. Machine: {platform.node()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; one process at a time (the machine is shared: "
        f"other jobs may run beside it, so walls vary between repetitions).",
        "",
        f"Trace: 64 ranks, {info['nodes_min']:,}-{info['nodes_max']:,} nodes per rank, "
        f"{info['nodes_total']:,} in all, {info['bytes'] / 1e6:.0f} MB of ET files "
        f"(built in {info['build_s']} s, written in {info['write_s']} s by "
        f"`write_trace_set`); micro-batches {CASE['micro_batches']}.",
        "",
        "| side | wall s | peak RSS MB | step time ns | note |",
        "|---|---|---|---|---|",
    ]
    astra_wall = {}
    for r in rows:
        step = f"{r['step_ns']:,.0f}" if r.get("step_ns") is not None else "-"
        note = r.get("note") or r.get("skipped", "")
        if "read_s" in r:
            cpu = f", {r['read_cpu_s']:.2f} CPU s" if "read_cpu_s" in r else ""
            note = (f"read {r['read_s']:.2f} s{cpu} ({r['read_nodes_per_s']:,.0f} nodes/s), "
                    f"simulate {r['simulate_s']:.2f} s, the rest (Python, imports, JAX) "
                    f"{r['wall_s'] - r['read_s'] - r['simulate_s']:.1f} s")
            backend = r["side"].split()[-1]
            if backend in astra_wall:
                note += f"; ASTRA-sim / libra_jax wall: {astra_wall[backend] / r['wall_s']:.1f}x"
        elif r["side"].startswith("ASTRA") and r.get("step_ns") is not None:
            astra_wall[r["side"].split()[-1]] = r["wall_s"]
        lines.append(f"| {r['side']} | {r['wall_s']:.1f} | {r['rss_mb']:.0f} | {step} | "
                     f"{note} |")
    lines += ["", "Wall and peak RSS: `/usr/bin/time` of each process (libra_jax: a child "
              "Python that imports, reads and simulates).", ""]
    lines += _summary(rows)
    text = "\n".join(lines) + _before(path)
    path.write_text(text)
    return text


def _before(path: pathlib.Path) -> str:
    """The results file's "Before" section (the numbers of an earlier libra_jax), kept on
    rewriting: its own such section if it has one, else its whole former text."""
    if not path.exists():
        return ""
    old = path.read_text()
    head = "\n## Before"
    if head in old:
        return old[old.index(head):]
    body = old.split("\n", 1)[1] if "\n" in old else old
    return (f"{head}: read_chakra parsing every rank file (commit fdce177)\n" + body)


def _summary(rows: list[dict]) -> list[str]:
    """Ratios over the runs: ASTRA-sim / libra_jax wall (each libra_jax run against the
    ASTRA-sim run before it), reading rates, step-time differences, memory."""
    out, last = [], {}
    ratios, rates, diffs, shares = [], [], [], []
    for r in rows:
        backend = r["side"].split()[-1]
        if r["side"].startswith("ASTRA") and r.get("step_ns") is not None:
            last[backend] = r
        elif "read_s" in r and backend in last:
            ratios.append(last[backend]["wall_s"] / r["wall_s"])
            rates.append(r["read_nodes_per_s"])
            shares.append(r["read_s"] / r["wall_s"])
            diffs.append(abs(r["step_ns"] - last[backend]["step_ns"]) / last[backend]["step_ns"])
    if ratios:
        astra_rss = max(r["rss_mb"] for r in rows if r["side"].startswith("ASTRA"))
        libra_rss = max(r["rss_mb"] for r in rows if "read_s" in r)
        out += [
            "Summary:",
            "",
            f"* ASTRA-sim / libra_jax wall: {min(ratios):.1f}x to {max(ratios):.1f}x over "
            f"{len(ratios)} pairs (issue 32 point 5 asks for >= 10x);",
            f"* libra_jax reads {min(rates):,.0f} to {max(rates):,.0f} nodes/s (the issue asks "
            f">= 1e5); reading takes {min(shares):.0%} to {max(shares):.0%} of its wall "
            f"time;",
            f"* step times differ by at most {max(diffs):.1e} (relative);",
            f"* peak RSS: ASTRA-sim {astra_rss:,.0f} MB, libra_jax {libra_rss:,.0f} MB.",
            ""]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/work/astra_ws/bench_trace")
    ap.add_argument("--astra-ws", default="/work/astra_ws")
    ap.add_argument("--aware", action="store_true", help="also the congestion-aware backend")
    ap.add_argument("--timeout", type=float, default=3600.0, help="per process, s")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each side, interleaved")
    ap.add_argument("--out", default=str(HERE / "results" / "bench_trace.md"))
    ap.add_argument("--libra-side", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backend", default="unaware", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    work = pathlib.Path(a.work)
    if a.libra_side:
        libra_side(work, a.backend)
        return 0
    info = write(work)
    print(f"trace: {info}", flush=True)
    backends = ["unaware"] + (["aware"] if a.aware else [])
    rows = []
    for _ in range(a.repeat):  # each repetition: ASTRA-sim, then libra_jax, per backend
        for b in backends:
            rows.append(astra(work, os.path.abspath(a.astra_ws), b, a.timeout))
            print(rows[-1], flush=True)
            rows.append(libra(work, b, a.timeout))
            print(rows[-1], flush=True)
    print(report(info, rows, pathlib.Path(a.out), "python experiments/bench_trace.py "
                 + " ".join(argv if argv is not None else sys.argv[1:])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
