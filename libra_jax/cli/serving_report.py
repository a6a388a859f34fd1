"""What ``libra-train`` prints and writes for a serving run (``workload.generator=serving``,
`studies.job.serving`): the table (bandwidths, TTFT, TPOT, tokens/s, per $ and per J at the
optimum and at the equal split), ``result.json`` and the log line. Units: GB/s per NPU per
dimension, ms, tokens/s, $, W, J.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pathlib

import numpy as np

from libra_jax.cli import report, runtime
from libra_jax.cli.tables import constraints_text, text_table
from libra_jax.studies.job import serving as study
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.export import export_astrasim

log = logging.getLogger(__name__)

#: result.json key of each objective's value (the value minimised, in its unit).
VALUE_KEYS = {"serving_throughput": "seconds_per_token",
              "perf_per_cost": "usd_per_token_per_s",
              "perf_per_watt": "joules_per_token"}
WORDS = {"serving_throughput": "max tokens/s of the fleet",
         "perf_per_cost": "max tokens/s per $ of network",
         "perf_per_watt": "max tokens per joule (all NPUs + network)"}


def _num(x) -> float | None:
    return report.json_num(x)


def metrics_dict(m: study.ServingMetrics) -> dict:
    """A design's figures as JSON (every unit in the key)."""
    out = {}
    for f in dataclasses.fields(m):
        v = getattr(m, f.name)
        out[f.name] = (report.json_nums(v) if isinstance(v, np.ndarray) else _num(v))
    return out


def serving_dict(run: study.ServingRun) -> dict:
    """``result.json`` of a serving run."""
    ph, o = run.phases, run.optimum
    m, par = ph.model, ph.parallel
    return {
        "status": run.status,
        "objective": run.objective,
        VALUE_KEYS[run.objective]: _num(o.value),
        "lower_bound": _num(o.lower_bound),
        "optimality_gap": _num(o.gap),
        "max_violation": _num(o.max_violation),
        "slo_violation": None if not math.isfinite(o.slo_violation) else o.slo_violation,
        "inner_solves": o.inner_solves,
        "solve_seconds": o.seconds,
        "compile_seconds": run.compile_seconds,
        "slos_ms": {n.split(".")[-1]: float(b) * 1e3
                    for n, b in zip(run.form.slo_names, run.form.b)},
        "network": report.network_dict(run.network),
        "serving": {
            "model": m.name, "phases": list(run.phase_names),
            "prompt_len": m.prompt_len, "output_len": m.output_len, "batch": m.batch,
            "prefill_batch": m.prefill_batch,
            "tp": par.tp, "pp": par.pp, "ep": par.ep, "replicas": par.replicas,
            "disaggregated": par.disaggregated, "prefill_replicas": par.prefill_replicas,
            "kv_dim": par.kv_dim,
            "weights_gb_per_npu": ph.weights_bytes / 1e9,
            "kv_cache_gb_per_npu": ph.kv_bytes / 1e9,
            "memory_gb_per_npu": ph.capacity_bytes / 1e9,
        },
        "timing_model": report.timing_dict(run.timing_model),
        "optimum": metrics_dict(run.metrics),
        "equal_split": metrics_dict(run.equal_split),
        "reference_design": None if run.reference is None else metrics_dict(run.reference),
    }


def _f(x, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def format_serving(run: study.ServingRun) -> str:
    """The table a serving run prints."""
    ph, o, net = run.phases, run.optimum, run.network
    m, par = ph.model, ph.parallel
    lines = [f"libra_jax serving: {m.name} on {net.notation} "
             f"({par.replicas} replicas of TP{par.tp} x PP{par.pp} x EP{par.ep}"
             + (f", {par.prefill_replicas} prefill + {par.decode_replicas} decode, KV over "
                f"dim {par.kv_dim}" if par.disaggregated else ", colocated") + ")",
             f"requests:    prompt {m.prompt_len} tokens, output {m.output_len} tokens, "
             f"{m.batch} sequences per decode replica, {m.prefill_batch} per prefill pass",
             f"objective:   {run.objective} ({WORDS[run.objective]})"]
    for i, c in enumerate(constraints_text(run.spec)
                          + [f"{n.split('.')[-1]} <= {b * 1e3:g} ms"
                             for n, b in zip(run.form.slo_names, run.form.b)]):
        lines.append(("constraints: " if i == 0 else "             ") + c)
    lines.append("")
    tiers = net.cost_tiers or ("-",) * net.num_dims
    a, e = run.metrics, run.equal_split
    rows = [("dim", "block", "NPUs", "cost tier", "optimum GB/s", "equal split GB/s")]
    for d in range(net.num_dims):
        rows.append((str(d), net.blocks[d], str(net.npus[d]), tiers[d],
                     f"{a.bandwidth_gbps[d]:.3f}", f"{e.bandwidth_gbps[d]:.3f}"))
    rows.append(("", "total", "", "", f"{a.bandwidth_gbps.sum():.3f}",
                 f"{e.bandwidth_gbps.sum():.3f}"))
    lines += text_table(rows, "rlrlrr")
    lines.append("(bandwidth is per NPU, per dimension)")
    lines.append("")
    rows = [("metric", "optimum", "equal split", "ratio")]

    def row(name, x, y, spec, higher=True):
        r = None if x is None or y is None or not y else (x / y if higher else y / x)
        rows.append((name, _f(x, spec), _f(y, spec), _f(r, ".3f") + ("x" if r else "")))

    row("TTFT ms", a.ttft_ms, e.ttft_ms, ".4f", higher=False)
    row("  prefill ms", a.prefill_ms, e.prefill_ms, ".4f", higher=False)
    if a.kv_transfer_ms is not None:
        row("  KV transfer ms", a.kv_transfer_ms, e.kv_transfer_ms, ".4f", higher=False)
    row("TPOT ms", a.tpot_ms, e.tpot_ms, ".4f", higher=False)
    row("tokens/s (fleet)", a.tokens_per_s, e.tokens_per_s, ",.0f")
    row("tokens/s per NPU", a.tokens_per_s_per_npu, e.tokens_per_s_per_npu, ",.2f")
    row("tokens/s per decode replica", a.tokens_per_s_per_replica,
        e.tokens_per_s_per_replica, ",.1f")
    row("network cost $", a.network_cost_usd, e.network_cost_usd, ",.0f", higher=False)
    row("tokens/s per $ network", a.tokens_per_s_per_usd, e.tokens_per_s_per_usd, ".4g")
    row("total power W", a.total_power_w, e.total_power_w, ",.0f", higher=False)
    row("tokens per J", a.tokens_per_j, e.tokens_per_j, ".4g")
    lines += text_table(rows, "lrrr")
    r = run.reference
    if r is not None:
        lines.append("")
        lines.append(
            "shipped design " + "/".join(f"{x:g}" for x in r.bandwidth_gbps) + " GB/s: "
            f"TTFT {r.ttft_ms:.4f} ms, TPOT {r.tpot_ms:.4f} ms, {r.tokens_per_s:,.0f} tokens/s "
            f"(optimum {a.tokens_per_s / r.tokens_per_s:.3f}x)")
    lines.append("")
    lines.append(f"status {run.status}: certified gap {_f(o.gap, '.3g')} "
                 f"(value {o.value:.6g} >= bound {o.lower_bound:.6g}, "
                 f"{VALUE_KEYS[run.objective]}), constraint violation "
                 f"{o.max_violation:.2g}, {o.inner_solves} solve(s) in {o.seconds:.2f} s "
                 f"(JAX compilation {run.compile_seconds:.2f} s)")
    lines.append(f"memory per NPU: weights {ph.weights_bytes / 1e9:.2f} GB + KV cache "
                 f"{ph.kv_bytes / 1e9:.2f} GB of {ph.capacity_bytes / 1e9:g} GB")
    return "\n".join(lines)


def train(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """The serving job: table, ``result.json``; returns the value minimised."""
    run = study.run_serving(c)
    data = serving_dict(run)
    print(format_serving(run), flush=True)
    report.write_json(output_dir / "result.json", data)
    for name, wl in zip(run.phase_names, run.phases.workloads):
        # each phase at the optimum as ASTRA-sim runs it: astrasim/<phase>/run.sh
        export_astrasim(c, output_dir, run.network, run.optimum.bandwidth_gbps,
                        run.timing_model, wl, folder=f"astrasim/{name}")
    value = runtime.objective_value(data[VALUE_KEYS[run.objective]])
    log.info("status %s, %s %.10g, certified gap %s; solve %.3f s", run.status,
             VALUE_KEYS[run.objective], value, data["optimality_gap"],
             run.optimum.seconds)
    log.info("result: %s", output_dir / "result.json")
    return value
