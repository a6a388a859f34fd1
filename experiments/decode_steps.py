"""Validation of serving (issue 34): whole decode steps exported as Chakra ETs and run in
ASTRA-sim.

Draws seeded decode steps of the ``serving`` generator (`libra_jax.inputs.generators.serving`)
and runs each, exported through the user path (a composed ``conf=serving_*`` config and
`studies.job.export.export_astrasim` on the decode workload, as ``export_astrasim=true`` does,
with its ``run.sh``), in ASTRA-sim's congestion-unaware *and* congestion-aware analytical
backends; then compares libra_jax's TPOT (`studies.serving.phase_times_s`, index 1 = decode:
the number a serving run reports) with ASTRA-sim's step time (max over NPUs of ``sys[i]
finished, T cycles``; 1 cycle = 1 ns).

Random space (one ``random.Random`` per draw, seeded by (seed, index); a draw the config
checks refuse (`LibraInputError`: a KV cache that does not fit, degrees that do not divide,
...) is redrawn from the same generator, so draw i does not depend on the number of draws):

* network: 1-3 dimensions of 2-16 NPUs (2, 3, 4, 6, 8, 12 or 16), Ring / FullyConnected /
  Switch, 8-256 NPUs; 25-900 GB/s per dimension (log-uniform, integer); per-hop latency
  100-1,000 ns (one value, or one per dimension); endpoint delay 1-100 ns (integer,
  log-uniform); 1-4 chunks; ``model=pipelined`` with ASTRA-sim's default runtime.
* dense models (half the draws): 4-80 layers, hidden 1,024-8,192 (head dimension 128),
  grouped-query KV heads 1-8, FFN 2.5-4 x hidden (SwiGLU);
* MoE models: DeepSeek-V3-like shapes scaled down: 8-256 experts, top-k 1-8, expert FFN
  256-2,048, 0-2 shared experts, 0-3 first dense layers, GQA or an MLA-like latent KV cache;
  dispatch and combine all-to-alls over the EP group;
* tp / pp / ep / replicas laid innermost-first on the dimensions (whole dimensions, or one
  dimension split between two consecutive degrees: a collective over part of a dimension
  is exported as ``pg_name`` groups, a stage send over part of one as a ring of its block;
  the generator refuses pp over two or more dimensions, such draws are redrawn), at most
  80 stages; MoE draws mostly with ep > 1; batch 1-128, prompt 128-8,192 tokens, output
  16-2,048 tokens; a chip of 300-2,000 TFLOP/s, 1.6-8 TB/s memory, 80-192 GB.

Three libra_jax numbers per run (``model.csv``), all in ns:

* ``tpot_ns``: the TPOT a serving run reports (`phase_times_s(bw, problems)[1]`);
* ``tpot_written_ns``: the same with every compute time rounded to whole us as the Chakra ETs
  write them (half up), i.e. libra_jax's number for the step ASTRA-sim ran;
* ``step_ns``: the whole-step simulation of the exported graph (`timing.step_time_ns`).

Sets: ``tuning`` (seed 441) and ``heldout`` (seed 442, drawn the same way, never tuned on),
100 draws each (dense on even, MoE on odd indices), 200 runs per set.
Per set, ``experiments/results/decode_steps/<set>/`` holds ``cases.json`` (one dict per run:
the draw's Hydra overrides, bandwidths and backend; they rebuild the run), ``results.csv``
(ASTRA-sim), ``run_info.json`` and ``model.csv`` (one row per run: the case's parameters,
ASTRA-sim's time and libra_jax's numbers); ``experiments/results/decode_steps.md`` is the
summary. The ETs stay in ``--runs-dir`` (default ``/work/astra_ws/runs_decode_<set>``).

    python experiments/decode_steps.py simulate --set tuning      # ASTRA-sim, a few minutes
    python experiments/decode_steps.py simulate --set heldout
    python experiments/decode_steps.py predict --set tuning --set heldout
    python experiments/decode_steps.py summary
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import csv
import json
import math
import multiprocessing
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import astrasim_heldout as H  # noqa: E402
from latency_regime import _read_csv  # noqa: E402

SETS = {"tuning": 441, "heldout": 442}
DRAWS = 100
OUT = HERE / "results" / "decode_steps"
SUMMARY = HERE / "results" / "decode_steps.md"
BARS = (0.01, 0.02, 0.05)
DIM_SIZES = (2, 3, 4, 6, 8, 12, 16)
BIN = "/work/astra_ws/astra-sim/build/astra_analytical/build/bin"
PRESET = {"dense": "serving_llama3_70b", "moe": "serving_deepseek_v3"}
CASE_KEYS = ("kind", "network", "npus", "bandwidth_GBps", "latency_ns", "endpoint_delay_ns",
             "chunks", "layers", "hidden", "experts", "top_k", "tp", "pp", "ep", "replicas",
             "batch")
MODELS = ("tpot", "tpot_written", "step")
#: flags of a run (``model.csv``): a collective whose size ``chunks`` does not divide (ASTRA-sim
#: runs it as one stream more, `step.chunk_split`, as the TPOT problem now does: a flag to
#: check that); the dimensions the pp group spans (1 at most: the generator refuses more); a
#: group over part of a dimension (pg_name rings)
CAUSES = ("uneven_chunks", "pp_dims", "partial_groups")
#: the design keys every draw overrides (the presets' H100 network, its power cap and cost
#: model are replaced by the drawn network; the total-bandwidth cap only bounds the problem)
FIXED = ("network.cost_tiers=null", "network.span_m=null", "cost_model.file=null",
         "constraints.max_power_w=null", "constraints.total_bw_gbps=1000000",
         "reference_bw_gbps=null", "model=pipelined", "export_astrasim=true")


def _lu(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _lu_int(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(_lu(rng, lo, hi)))


def _degrees(rng: random.Random, npd: list[int], roles: tuple[str, ...]) -> dict:
    """tp / pp / ep / replicas laid innermost-first: each dimension goes whole to a role (in
    ``roles`` order), or one dimension is split between two consecutive roles."""
    deg = {r: 1 for r in ("tp", "pp", "ep", "replicas")}
    cut = sorted(rng.randint(0, len(npd)) for _ in range(len(roles) - 1))
    bounds = [0] + cut + [len(npd)]
    for r, (a, b) in zip(roles, zip(bounds, bounds[1:])):
        deg[r] = math.prod(npd[a:b])
    split = [d for d, n in enumerate(npd) if n in (4, 6, 8, 12, 16)]
    if split and rng.random() < 0.3:
        d = rng.choice(split)
        inner = rng.choice([f for f in range(2, npd[d]) if npd[d] % f == 0])
        owner = next(i for i, (a, b) in enumerate(zip(bounds, bounds[1:])) if a <= d < b)
        if owner + 1 < len(roles):
            deg[roles[owner]] //= npd[d] // inner
            deg[roles[owner + 1]] *= npd[d] // inner
    return deg


def _draw_once(rng: random.Random, kind: str) -> dict:
    while True:
        D = rng.choices((1, 2, 3), weights=(0.2, 0.4, 0.4))[0]
        npd = [rng.choice(DIM_SIZES) for _ in range(D)]
        if 8 <= math.prod(npd) <= 256:
            break
    topo = [rng.choice(H.TOPOLOGIES) for _ in range(D)]
    bw = [_lu_int(rng, 25, 900) for _ in range(D)]
    lat = ([rng.randint(100, 1000)] * D if rng.random() < 0.5
           else [rng.randint(100, 1000) for _ in range(D)])
    roles = ("tp", "pp", "ep", "replicas") if kind == "moe" else ("tp", "pp", "replicas")
    deg = _degrees(rng, npd, roles)
    # at most 80 stages (4-80 layers); MoE mostly with all-to-alls
    while deg["pp"] > 80 or (kind == "moe" and deg["ep"] == 1 and rng.random() < 0.85):
        deg = _degrees(rng, npd, roles)
    hidden = rng.choice((1024, 2048, 3072, 4096, 5120, 7168, 8192))
    heads = hidden // 128
    m = {"layers": deg["pp"] * rng.randint(-(-4 // deg["pp"]), 80 // deg["pp"]),
         "hidden": hidden, "heads": heads, "head_dim": 128,
         "ffn_hidden": 256 * round(hidden * rng.uniform(2.5, 4.0) / 256),
         "vocab_size": rng.choice((0, 32000, 128256)),
         "bytes_per_weight": rng.choice((1, 2)), "bytes_per_kv": rng.choice((1, 2)),
         "prompt_len": _lu_int(rng, 128, 8192), "output_len": _lu_int(rng, 16, 2048),
         "batch": deg["ep"] * max(1, _lu_int(rng, 1, 128) // deg["ep"]),
         "prefill_batch": deg["ep"]}
    kv = [k for k in (1, 2, 4, 8) if heads % k == 0]
    m["kv_heads"] = rng.choice(kv)
    m["kv_elements_per_token"] = 2 * m["kv_heads"] * 128
    m["attention_params"] = hidden * 128 * (2 * heads + 2 * m["kv_heads"])
    if kind == "moe":
        m["num_experts"] = rng.choice((8, 16, 32, 64, 128, 256))
        m["top_k"] = rng.randint(1, min(8, m["num_experts"]))
        m["expert_ffn_hidden"] = rng.choice((256, 512, 1024, 2048))
        m["shared_experts"] = rng.randint(0, 2)
        m["first_dense_layers"] = rng.randint(0, min(3, m["layers"] - 1))
        if rng.random() < 0.5:  # MLA-like: one latent per token, shared by the heads
            m["kv_heads"] = 1
            m["kv_elements_per_token"] = rng.choice((288, 576))
    npu = {"peak_tflops": _lu_int(rng, 300, 2000), "efficiency": round(rng.uniform(0.3, 0.6), 2),
           "memory_gb": rng.choice((80, 96, 141, 192)),
           "memory_bw_gbps": _lu_int(rng, 1600, 8000)}
    ov = [f"conf={PRESET[kind]}",
          f"network.topology=[{','.join(topo)}]", f"network.npus=[{','.join(map(str, npd))}]",
          f"network.latency_ns=[{','.join(map(str, lat))}]",
          f"system.endpoint_delay_ns={_lu_int(rng, 1, 100)}",
          f"system.chunks={rng.randint(1, 4)}", *FIXED]
    ov += [f"workload.parallel.{k}={v}" for k, v in deg.items()]
    # ++: the dense preset has no attention_params / kv_elements_per_token keys
    ov += [f"++workload.model.{k}={v}" for k, v in m.items()]
    ov += [f"workload.npu.{k}={v}" for k, v in npu.items()]
    return {"kind": kind, "overrides": ov, "bandwidth_gbps": bw,
            "network": "x".join(f"{H.SHORT_TOPO[t]}{k}" for t, k in zip(topo, npd)),
            "npus": math.prod(npd), "latency_ns": lat, **deg,
            **{k: m.get(k, 0) for k in ("layers", "hidden", "batch", "top_k")},
            "experts": m.get("num_experts", 0)}


# ----------------------------------------------------------------------------- libra_jax
def build(overrides: list[str], backend: str | None = None):
    """The composed config of a case -> (config, network, cost rates, spec, timing model,
    serving phases). ``backend``: ``system.network_backend``."""
    from hydra import compose, initialize_config_dir

    from libra_jax.cli import config as cc
    from libra_jax.inputs.generators import serving_phases
    from libra_jax.studies.job.config import CONF_DIR
    from libra_jax.studies.job.inputs import design_inputs, to_timing

    cc.register_configs()
    ov = list(overrides) + ([f"system.network_backend={backend}"] if backend else [])
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=ov)
    c = cc._as_config(cfg)
    network, rates, spec = design_inputs(c)
    tm, _ = to_timing(c, network.num_dims, network)
    w = c.workload
    phases = serving_phases(w.model, w.parallel, w.npu, network.npus)
    return c, network, rates, spec, tm, phases


def written(workload):
    """The workload with every compute time rounded to whole us, half up (as the ETs)."""
    import dataclasses

    import numpy as np

    return dataclasses.replace(
        workload, compute_ns=np.floor(np.asarray(workload.compute_ns) / 1000 + 0.5) * 1000)


def predict(case: dict) -> dict:
    """libra_jax's numbers of a run (ns): module docstring."""
    import numpy as np

    from libra_jax.model import step, step_partial, timing
    from libra_jax.studies.job.serving import _problems
    from libra_jax.types import Collective
    from libra_jax.studies.serving import phase_times_s

    _, network, rates, spec, tm, ph = build(case["overrides"], case["backend"])
    bw = np.asarray(case["bandwidth_gbps"], np.float64)
    tpot = phase_times_s(bw, _problems(network, ph, rates, spec, tm))[1] * 1e9
    dec = written(ph.decode)
    tw = phase_times_s(bw, [timing.build_timed_problem(network, w, rates, spec, tm)
                            for w in (ph.prefill, dec)])[1] * 1e9
    nodes = step.step_graph(ph.decode, tm.training_loop)
    streams = {step.chunk_split(n.collective, n.size_bytes, tm.chunks, case["npus"])[0]
               for n in nodes if n.kind == "comm" and n.collective != Collective.SENDRECV}
    return {"tpot": float(tpot), "tpot_written": float(tw),
            "step": float(timing.step_time_ns(ph.decode, network, tm, bw)),
            # the known causes of a difference (docs/serving.md, the validation section)
            "uneven_chunks": int(any(k != tm.chunks for k in streams)),
            "pp_dims": sum(g > 1 for g in ph.parallel.parallel.placement.pp),
            "partial_groups": int(step_partial.has_partial_groups(nodes, network.npus))}


# ----------------------------------------------------------------------------- drawing
def draw_case(seed: int, index: int) -> dict:
    """One valid decode step: ``draw_id`` ds<seed>_<index>; dense on even, MoE on odd
    indices; redrawn (same generator) while the config checks refuse it."""
    from libra_jax.types import LibraInputError

    rng = random.Random(seed * 1_000_003 + index + 34_000_034)
    kind = "moe" if index % 2 else "dense"
    for attempt in range(1, 1001):
        case = _draw_once(rng, kind)
        try:
            build(case["overrides"])
        except LibraInputError as e:
            last = str(e)
            continue
        case.update(draw_id=f"ds{seed}_{index:04d}", attempts=attempt)
        return case
    raise RuntimeError(f"no valid draw in 1000 attempts ({last})")


def run_one(case: dict, run_dir: pathlib.Path, timeout: float) -> dict:
    """Export the case's decode step (its backend) and run its ``run.sh`` -> results row."""
    import numpy as np

    from libra_jax.studies.job.export import export_astrasim

    shutil.rmtree(run_dir, ignore_errors=True)
    c, network, _, _, tm, ph = build(case["overrides"], case["backend"])
    export_astrasim(c, run_dir, network, np.asarray(case["bandwidth_gbps"], np.float64), tm,
                    ph.decode, folder="decode")
    script = run_dir / "decode" / "run.sh"
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}")
    t0 = time.time()
    try:
        p = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=env,
                           timeout=timeout, cwd=script.parent)
        text, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired:
        text, rc = "", 124
    (script.parent / "sim.log").write_text(text)
    fin = {int(m.group(1)): int(m.group(2)) for m in H.FINISHED.finditer(text)}
    row = {"case_id": case["case_id"], "backend": case["backend"], "astra_max_ns": "",
           "astra_min_ns": "", "wall_s": f"{time.time() - t0:.2f}", "rc": rc, "error": ""}
    if rc:
        row["error"] = f"exit {rc}: " + H._short_error(text)
    elif len(fin) != case["npus"]:
        row["error"] = f"{len(fin)}/{case['npus']} NPUs finished"
    else:
        row["astra_max_ns"], row["astra_min_ns"] = max(fin.values()), min(fin.values())
    return row


def _simulate_draw(seed: int, index: int, runs_dir: str, timeout: float):
    base = draw_case(seed, index)
    out = []
    for backend in H.BACKENDS:
        case = dict(base, backend=backend, case_id=f"{base['draw_id']}_{backend}")
        out.append((case, run_one(case, pathlib.Path(runs_dir) / case["case_id"], timeout)))
    return out


def _pool(workers: int):
    # spawn: JAX must not be forked
    return cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))


def _write_csv(path: pathlib.Path, rows: list[dict]) -> None:
    fields = list(rows[0])
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def simulate_set(name: str, draws: int, runs_dir: str, timeout: float, workers: int,
                 verbose: bool = True) -> dict:
    """ASTRA-sim on every draw of the set (both backends) -> run_info."""
    out = OUT / name
    os.makedirs(out, exist_ok=True)
    os.makedirs(runs_dir, exist_ok=True)
    t0, done = time.time(), {}
    with _pool(workers) as ex:
        futs = {ex.submit(_simulate_draw, SETS[name], i, runs_dir, timeout): i
                for i in range(draws)}
        for f in cf.as_completed(futs):
            done[futs[f]] = f.result()
            if verbose:
                for case, row in done[futs[f]]:
                    print(f"[{len(done):3d}] {case['case_id']:22s} {case['kind']:5s} "
                          f"{case['network']:14s} L{case['layers']:<3d} b{case['batch']:<4d} "
                          f"astra={row['astra_max_ns']!s:>10s} {row['error']}", flush=True)
    pairs = [p for i in sorted(done) for p in done[i]]
    cases, rows = [c for c, _ in pairs], [r for _, r in pairs]
    failed = [r for r in rows if r["error"]]
    info = {"command": " ".join(sys.argv), "set": name, "seed": SETS[name], "draws": draws,
            "runs": len(rows), "failed_runs": len(failed),
            "failed": [(r["case_id"], r["error"]) for r in failed],
            "redraws": sum(c["attempts"] - 1 for c in cases) // 2,
            "total_wall_s": round(time.time() - t0, 1),
            "sim_wall_s_sum": round(sum(float(r["wall_s"]) for r in rows), 1),
            "runs_dir": runs_dir, "workers": workers}
    (out / "cases.json").write_text(json.dumps(cases, indent=1))
    _write_csv(out / "results.csv", rows)
    (out / "run_info.json").write_text(json.dumps(info, indent=1))
    return info


def load(name: str) -> list[tuple[dict, dict]]:
    """The stored runs of a set: [(case, results row)]."""
    folder = OUT / name
    res = {r["case_id"]: r for r in _read_csv(folder / "results.csv")}
    return [(c, res[c["case_id"]]) for c in json.loads((folder / "cases.json").read_text())]


def predict_set(name: str, workers: int) -> list[dict]:
    """Write ``model.csv`` of a set (module docstring)."""
    runs = load(name)
    with _pool(workers) as ex:
        preds = list(ex.map(predict, [c for c, _ in runs]))
    rows = []
    for (case, res), p in zip(runs, preds):
        row = {"case_id": case["case_id"], "backend": case["backend"]}
        row.update({k: (" ".join(map(str, case[k])) if isinstance(case[k], list) else case[k])
                    for k in CASE_KEYS if k in case})
        row["bandwidth_GBps"] = " ".join(map(str, case["bandwidth_gbps"]))
        row["endpoint_delay_ns"] = next(o.split("=")[1] for o in case["overrides"]
                                        if o.startswith("system.endpoint_delay_ns="))
        row["chunks"] = next(o.split("=")[1] for o in case["overrides"]
                             if o.startswith("system.chunks="))
        row["astra_ns"] = res["astra_max_ns"]
        for m in MODELS:
            row[f"{m}_ns"] = f"{p[m]:.3f}"
        row.update({k: p[k] for k in CAUSES})
        rows.append(row)
    _write_csv(OUT / name / "model.csv", rows)
    return rows


# ----------------------------------------------------------------------------- summary
def clean(r: dict) -> bool:
    """A run where every collective size is a multiple of ``chunks`` (the split the TPOT
    problem took as ``chunks`` streams before `timing_rows.streams`)."""
    return not int(r["uneven_chunks"])


def errors(rows, col: str, backend: str, keep=None) -> list[float]:
    """Relative errors (libra_jax - ASTRA-sim) / ASTRA-sim of ``col`` over a backend's runs
    (those ``keep`` accepts)."""
    return [(float(r[col]) - float(r["astra_ns"])) / float(r["astra_ns"]) for r in rows
            if r["backend"] == backend and r["astra_ns"] and (keep is None or keep(r))]


def stats_row(label: str, errs: list[float]) -> str:
    n = len(errs)
    if not n:
        return f"| {label} | 0 | | | | | |"
    within = [sum(abs(e) <= b + 1e-12 for e in errs) for b in BARS]
    worst = max(errs, key=abs)
    return (f"| {label} | {n} | " + " | ".join(f"{w} ({w / n:.0%})" for w in within)
            + f" | {worst:+.2%} | {sum(errs) / n:+.2%} |")


HEADER = ["| set / backend / number | runs | within 1% | within 2% | within 5% | worst | "
          "mean signed |", "|---|---|---|---|---|---|---|"]


def summary_table(sets=tuple(SETS)) -> list[str]:
    lines = list(HEADER)
    for name in sets:
        rows = _read_csv(OUT / name / "model.csv")
        for backend in H.BACKENDS:
            for m in MODELS:
                lines.append(stats_row(f"{name} / {backend} / `{m}`",
                                       errors(rows, f"{m}_ns", backend)))
            for m in ("tpot", "tpot_written"):
                lines.append(stats_row(f"{name} / {backend} / `{m}`, clean runs",
                                       errors(rows, f"{m}_ns", backend, clean)))
    return lines


def cause(r: dict) -> str:
    """The first known cause that applies to a run."""
    if int(r["uneven_chunks"]):
        return "uneven chunks"
    if int(r["partial_groups"]):
        return "partial groups"
    if abs(float(r["tpot_written_ns"]) / float(r["astra_ns"]) - 1) <= 0.05:
        return "us rounding"
    return "other"


def cause_table(sets=tuple(SETS)) -> list[str]:
    """Runs beyond 5 % (``tpot``) per set and backend, by cause."""
    names = ("uneven chunks", "partial groups", "us rounding", "other")
    lines = ["| set / backend | beyond 5% | " + " | ".join(names) + " |",
             "|---|---|" + "---|" * len(names)]
    for name in sets:
        rows = _read_csv(OUT / name / "model.csv")
        for backend in H.BACKENDS:
            bad = [cause(r) for r in rows if r["backend"] == backend and r["astra_ns"]
                   and abs(float(r["tpot_ns"]) / float(r["astra_ns"]) - 1) > 0.05]
            lines.append(f"| {name} / {backend} | {len(bad)} | "
                         + " | ".join(str(bad.count(c)) for c in names) + " |")
    return lines


def worst_table(name: str, col: str = "tpot_ns", count: int = 8) -> list[str]:
    rows = [r for r in _read_csv(OUT / name / "model.csv") if r["astra_ns"]]
    errs = sorted(((float(r[col]) / float(r["astra_ns"]) - 1, r) for r in rows),
                  key=lambda x: -abs(x[0]))[:count]
    lines = ["| run | kind | network | layers | tp/pp/ep/rep | batch | latency ns | endpoint "
             "ns | chunks | ASTRA-sim ns | TPOT ns | written ns | error | written error | "
             "cause |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e, r in errs:
        a, w = float(r["astra_ns"]), float(r["tpot_written_ns"])
        lines.append(f"| {r['case_id']} | {r['kind']} | {r['network']} | {r['layers']} | "
                     f"{r['tp']}/{r['pp']}/{r['ep']}/{r['replicas']} | {r['batch']} | "
                     f"{r['latency_ns']} | {r['endpoint_delay_ns']} | {r['chunks']} | {a:.0f} | "
                     f"{float(r[col]):.0f} | {w:.0f} | {e:+.2%} | {w / a - 1:+.2%} | {cause(r)} |")
    return lines


def write_summary() -> str:
    lines = ["# Decode steps against ASTRA-sim (issue 34, serving)", "",
             "Written by `experiments/decode_steps.py summary` (see its docstring and "
             "`docs/serving.md`, \"Validation: decode steps in ASTRA-sim\"). Relative error "
             "of libra_jax against ASTRA-sim's time of the exported decode step, per set "
             f"(tuning seed {SETS['tuning']}, held-out seed {SETS['heldout']}, never tuned "
             "on) and backend. `tpot`: the TPOT a serving run reports; `tpot_written`: the "
             "same with the compute times rounded to whole us as the ETs write them; `step`: "
             "the whole-step simulation of the exported graph.", ""]
    lines += summary_table() + [""]
    lines += ["*Clean runs*: every collective's size a multiple of `chunks` (`clean` in the "
              "script; ASTRA-sim runs a size that `chunks` does not divide as one stream more, "
              "`step.chunk_split`, and so does the TPOT problem, `timing_rows.streams`). Runs "
              "beyond 5 % of `tpot`, by the first property that applies (`cause`): *uneven "
              "chunks*; *partial groups*: a group over part of a dimension (pg_name rings); "
              "*us rounding*: within 5 % once the compute is rounded to whole us as the ETs "
              "write it (`tpot_written`).", ""]
    lines += cause_table() + [""]
    for name in SETS:
        if _read_csv(OUT / name / "model.csv"):
            lines += [f"## Largest errors of `tpot`, {name}", ""] + worst_table(name) + [""]
    text = "\n".join(lines)
    SUMMARY.write_text(text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("simulate", "predict", "summary"))
    ap.add_argument("--set", action="append", choices=tuple(SETS), default=None)
    ap.add_argument("--draws", type=int, default=DRAWS)
    ap.add_argument("--runs-dir", default=None, help="default: /work/astra_ws/runs_decode_<set>")
    ap.add_argument("--workers", type=int, default=min(6, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    sets = a.set or list(SETS)
    if a.what == "simulate":
        for b in H.BACKENDS:
            if not os.access(f"{BIN}/{H.EXE[b]}", os.X_OK):
                sys.exit(f"no ASTRA-sim binary {BIN}/{H.EXE[b]} (see {H.REF}/README.md)")
        for name in sets:
            runs = a.runs_dir or f"/work/astra_ws/runs_decode_{name}"
            info = simulate_set(name, a.draws, runs, a.timeout, a.workers, not a.quiet)
            print(f"{name}: {info['runs']} runs, {info['failed_runs']} failed, "
                  f"{info['total_wall_s']} s")
    elif a.what == "predict":
        for name in sets:
            t0 = time.time()
            predict_set(name, a.workers)
            print(f"{name}: predicted in {time.time() - t0:.1f} s")
        print("\n".join(summary_table(sets)))
    else:
        print(write_summary())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
