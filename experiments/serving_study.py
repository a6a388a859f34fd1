"""Serving on the real-system networks (issue 34): for Llama-3-70B (dense) and DeepSeek-V3
(MoE) served on the networks and power budgets of the H100 DGX, GB200 NVL72 and TPU v4
presets (model=pipelined, latencies from the tiers, 10 ns endpoint delay):

(a) the serving-optimal split (max tokens/s, colocated) against the training-optimal split
    (the preset's GPT-3 175B training step) and how each design does on the other workload;
(b) one network for both (`libra_jax.studies.serving_shared`, weights 1:1): what it loses
    against each own optimum, with its certified gap;
(c) disaggregation (a prefill pool of 1/4 of the replicas, the KV cache over the outermost
    dimension the replicas span): TTFT, TPOT, tokens/s and the split against colocated;
(d) TPOT (ms) at the tokens/s optimum against the network cost ($), under a sweep of
    ``constraints.max_cost_usd`` (the power cap dropped; the tiers' bandwidth limits kept):
    ``results/serving_study_tpot_vs_cost.png``.

Serving parallelism per preset (`SERVING`): it must fit the memory and divide the model
(`libra_jax.inputs.generators.serving` raises otherwise); replicas are laid innermost-first
(TP, then EP, then the replicas) on the dims. The served models' blocks come from
``libra_jax/conf/dnn/{llama3_70b,deepseek_v3}_serving.yaml`` (requests: 4,096-token prompts,
512 output tokens; batch 64 / 512 per decode replica); the NPU blocks from the presets plus
the HBM bandwidth (`NPU`).

Run: ``python experiments/serving_study.py [--presets h100_dgx,...] [--models llama,deepseek]
[--levels 6] [--out DIR]``; writes ``serving_study.md``, ``.csv`` and the plot.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import pathlib
import sys
import time

import numpy as np
import yaml
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.inputs.generators import serving_phases
from libra_jax.model import timing
from libra_jax.studies import serving, serving_shared
from libra_jax.studies.job.inputs import design_inputs, to_inputs, to_timing
from libra_jax.studies.job.serving import serving_metrics
from libra_jax.studies.job.train import power_of_run

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
DNN = pathlib.Path(config.CONF_DIR) / "dnn"
PRESETS = ("h100_dgx", "gb200_nvl72", "tpu_v4")
MODELS = {"llama": "llama3_70b_serving", "deepseek": "deepseek_v3_serving"}
ENDPOINT_NS = 10.0
#: The NPU of each preset for serving: the training preset's peak, efficiency and memory,
#: plus the HBM bandwidth (GB/s) that bounds decode.
NPU = {
    # H100 SXM HBM3 3.35 TB/s (nvidia.com/en-us/data-center/h100) [H]
    "h100_dgx": dict(peak_tflops=990.0, efficiency=0.52, memory_gb=80, memory_bw_gbps=3350),
    # B200 in GB200 HBM3e 8 TB/s (nvidia.com GB200 NVL72 datasheet: 576 TB/s per 72 GPUs) [M]
    "gb200_nvl72": dict(peak_tflops=2500.0, efficiency=0.52, memory_gb=186,
                        memory_bw_gbps=8000),
    # TPU v4 HBM2 1,200 GB/s per chip (cloud.google.com/tpu/docs/v4) [H]
    "tpu_v4": dict(peak_tflops=275.0, efficiency=0.52, memory_gb=34.359738368,
                   memory_bw_gbps=1200),
}
#: Serving parallelism per (preset, model): fits the memory, divides the model, and lays a
#: replica innermost-first on the dims (see the module docstring; the .md lists the choices).
SERVING = {
    # 8 GPUs per node: TP 8 = one node per replica (128 replicas on the IB dim).
    ("h100_dgx", "llama"): dict(tp=8, pp=1, ep=1, replicas=128),
    # 671 GB of FP8 weights: TP 8 x EP 16 = 128 GPUs (16 nodes, EP over IB), 8 replicas.
    ("h100_dgx", "deepseek"): dict(tp=8, pp=1, ep=16, replicas=8),
    # 72 GPUs per rack: TP 8, 9 replicas per rack x 8 racks.
    ("gb200_nvl72", "llama"): dict(tp=8, pp=1, ep=1, replicas=72),
    # EP must divide 256 experts and a replica lie inside the 72-GPU rack's factors (8 x 9):
    # DP attention (TP 1) x EP 8 = 8 GPUs (95 GB weights + 21 GB KV of 186 GB), 72 replicas.
    ("gb200_nvl72", "deepseek"): dict(tp=1, pp=1, ep=8, replicas=72),
    # 32 GiB chips: TP 16 = one ring of the torus (8.8 GB weights + 12 GB KV per chip).
    ("tpu_v4", "llama"): dict(tp=16, pp=1, ep=1, replicas=256),
    # TP 16 (dim 0) x EP 16 (dim 1) = 256 chips per replica, 16 replicas on dim 2.
    ("tpu_v4", "deepseek"): dict(tp=16, pp=1, ep=16, replicas=16),
}
#: Cost caps of the TPOT-vs-cost sweep, as multiples of the shipped design's network cost.
SWEEP = (0.05, 2.0)
FIELDS = ("preset", "model", "parallel", "dims", "serve_bw_gbps", "train_bw_gbps",
          "shared_bw_gbps", "serve_tokens_s", "serve_tpot_ms", "serve_ttft_ms",
          "train_step_ms", "train_design_tokens_s", "serve_design_train_step_ms",
          "train_design_serve_slowdown", "serve_design_train_slowdown",
          "shared_serve_loss", "shared_train_loss", "shared_gap", "serve_gap", "train_gap",
          "dis_bw_gbps", "dis_ttft_ms", "dis_tpot_ms", "dis_tokens_s", "dis_gap",
          "prefill_replicas", "kv_dim", "dis_kv_ms", "prefill_share",
          "bal_prefill_replicas", "bal_bw_gbps", "bal_ttft_ms", "bal_tpot_ms", "bal_kv_ms",
          "bal_tokens_s", "bal_gap", "serve_cost_usd", "serve_power_w", "seconds")


def preset_config(preset: str):
    """The preset's typed config at model=pipelined (training workload: its GPT-3 run)."""
    overrides = [f"conf={preset}", "model=pipelined",
                 f"system.endpoint_delay_ns={ENDPOINT_NS}", "compilation_cache_dir=null"]
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return config._as_config(cfg)


def served(preset: str, model: str, network, prefill_replicas: int | None = None):
    """The serving phases of ``model`` on the preset's network (`SERVING`); disaggregated
    with ``prefill_replicas`` in the prefill pool when given."""
    dnn = yaml.safe_load((DNN / f"{MODELS[model]}.yaml").read_text())
    par = dict(SERVING[(preset, model)])
    if prefill_replicas is not None:
        par.update(disaggregated=True, prefill_replicas=int(prefill_replicas))
    return serving_phases(dnn["model"], par, NPU[preset], network.npus)


def _problems(network, phases, rates, spec, tm):
    return [timing.build_timed_problem(network, wl, rates, spec, tm) for wl in phases.workloads]


def _fmt(bw) -> str:
    return "/".join(f"{x:.0f}" for x in np.asarray(bw))


def run_case(preset: str, c, model: str, train_own, train_problem, inputs):
    """One (preset, model): (a)-(c) as one row, and the (d) sweep's points."""
    network, rates, spec, tm, power = inputs
    start = time.perf_counter()
    ph = served(preset, model, network)
    probs = _problems(network, ph, rates, spec, tm)
    form = serving.serving_form(ph)
    s_own = serving_shared.own_serving(probs, form, rates, spec)
    sm = serving_metrics(s_own.bandwidth_gbps, ph, probs, form, rates, power)
    shared = serving_shared.solve_shared(train_problem, probs, form, rates, spec, 1.0, 1.0,
                                         own=(train_own, s_own))
    tm_train = serving_metrics(train_own.bandwidth_gbps, ph, probs, form, rates, power)
    t_of_serve = float(serving.phase_times_s(s_own.bandwidth_gbps, [train_problem])[0])
    par = ph.parallel
    # (c) disaggregated: a quarter of the replicas prefill, then the pool that balances the
    # two pools at the colocated optimum's phase times (the prefill share of a colocated
    # replica's time: (batch / prefill_batch) T_p over that plus output_len T_d).
    share = float(form.a[0, 0] * sm.prefill_ms / (form.a[0] @ [sm.prefill_ms, sm.decode_ms]))
    dis_rows = []
    for rp in (max(1, par.replicas // 4),
               int(min(max(round(share * par.replicas), 1), par.replicas - 1))):
        phd = served(preset, model, network, rp)
        probd = _problems(network, phd, rates, spec, tm)
        formd = serving.serving_form(phd)
        dis = serving.min_seconds_per_token(probd, formd, rates, spec)
        dm = serving_metrics(dis.bandwidth_gbps, phd, probd, formd, rates, power)
        dis_rows.append((rp, phd, dis, dm))
    (rp, phd, dis, dm), (rpb, _, disb, dmb) = dis_rows
    row = dict(
        preset=preset, model=ph.model.name,
        parallel=f"TP{par.tp} PP{par.pp} EP{par.ep} x {par.replicas}",
        dims=network.notation, serve_bw_gbps=_fmt(s_own.bandwidth_gbps),
        train_bw_gbps=_fmt(train_own.bandwidth_gbps),
        shared_bw_gbps=_fmt(shared.bandwidth_gbps),
        serve_tokens_s=sm.tokens_per_s, serve_tpot_ms=sm.tpot_ms, serve_ttft_ms=sm.ttft_ms,
        train_step_ms=train_own.value_s * 1e3, train_design_tokens_s=tm_train.tokens_per_s,
        serve_design_train_step_ms=t_of_serve * 1e3,
        train_design_serve_slowdown=shared.train_design_serve_slowdown,
        serve_design_train_slowdown=shared.serve_design_train_slowdown,
        shared_serve_loss=shared.serve_loss, shared_train_loss=shared.train_loss,
        shared_gap=shared.gap, serve_gap=s_own.gap, train_gap=train_own.gap,
        dis_bw_gbps=_fmt(dis.bandwidth_gbps), dis_ttft_ms=dm.ttft_ms, dis_tpot_ms=dm.tpot_ms,
        dis_tokens_s=dm.tokens_per_s, dis_gap=dis.gap,
        prefill_replicas=rp, kv_dim=phd.parallel.kv_dim, prefill_share=share,
        bal_prefill_replicas=rpb, bal_bw_gbps=_fmt(disb.bandwidth_gbps),
        bal_ttft_ms=dmb.ttft_ms, bal_tpot_ms=dmb.tpot_ms, bal_tokens_s=dmb.tokens_per_s,
        bal_kv_ms=dmb.kv_transfer_ms, dis_kv_ms=dm.kv_transfer_ms, bal_gap=disb.gap,
        serve_cost_usd=sm.network_cost_usd, serve_power_w=sm.network_power_w)
    return row, start


def sweep(preset: str, c, model: str, inputs, levels: int):
    """(d): the tokens/s optimum under max_cost_usd caps (the power cap dropped)."""
    network, rates, spec, tm, power = inputs
    ph = served(preset, model, network)
    form = serving.serving_form(ph)
    ref_cost = float(np.asarray(rates) @ np.asarray(c.reference_bw_gbps, np.float64))
    points = []
    for f in np.geomspace(*SWEEP, levels):
        capped = dataclasses.replace(spec, max_power_w=None, max_cost_usd=float(f * ref_cost))
        probs = _problems(network, ph, rates, capped, tm)
        s = serving.min_seconds_per_token(probs, form, rates, capped)
        m = serving_metrics(s.bandwidth_gbps, ph, probs, form, rates, power)
        points.append(dict(cap_usd=f * ref_cost, cost_usd=m.network_cost_usd,
                           tpot_ms=m.tpot_ms, tokens_s=m.tokens_per_s, gap=s.gap,
                           bw=_fmt(s.bandwidth_gbps)))
    ref = serving_metrics(np.asarray(c.reference_bw_gbps, np.float64), ph,
                          _problems(network, ph, rates, spec, tm), form, rates, power)
    return points, dict(cost_usd=ref.network_cost_usd, tpot_ms=ref.tpot_ms,
                        tokens_s=ref.tokens_per_s)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--levels", type=int, default=6)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, curves = [], {}
    t0 = time.perf_counter()
    for preset in args.presets.split(","):
        c = preset_config(preset)
        network, rates, spec = design_inputs(c)
        tm, _ = to_timing(c, network.num_dims, network)
        power = power_of_run(c, network, spec)
        _, train_wl, _, _ = to_inputs(c)
        train_problem = serving_shared.training_problem(network, train_wl, rates, spec, tm)
        train_own = serving_shared.own_training(train_problem)
        inputs = (network, rates, spec, tm, power)
        for model in args.models.split(","):
            row, start = run_case(preset, c, model, train_own, train_problem, inputs)
            pts, ref = sweep(preset, c, model, inputs, args.levels)
            curves[(preset, row["model"])] = (pts, ref)
            row["seconds"] = time.perf_counter() - start
            rows.append(row)
            print(f"{preset} {model}: serve {row['serve_bw_gbps']} train "
                  f"{row['train_bw_gbps']} shared {row['shared_bw_gbps']} "
                  f"({row['seconds']:.0f} s)", flush=True)
    write(out, rows, curves, time.perf_counter() - t0)
    return 0


def _g(x, nd=3):
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{nd}g}"


def _slow(x) -> str:
    return f"{x:.3f}x" if x < 1e3 else "unusable: a dim it needs at ~0 GB/s"


def write(out: pathlib.Path, rows, curves, seconds: float) -> None:
    with open(out / "serving_study.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow({k: r.get(k) for k in FIELDS})
    lines = [
        "# Serving study: serving vs training bandwidths, one network for both, "
        "disaggregation, TPOT vs cost",
        "",
        "`python experiments/serving_study.py` (issue 34; model=pipelined, tiers' latencies, "
        f"10 ns endpoint delay; {seconds:.0f} s on 2 cores). Bandwidths: GB/s per NPU per "
        "dimension (dim 0 / dim 1 [/ dim 2]), within each preset's network power "
        "(`constraints.max_power_w`, the shipped design's) and the tiers' bandwidth limits. "
        "Serving: colocated, max tokens/s, no SLOs. Training: the preset's GPT-3 175B step.",
        "",
        "## Serving parallelism",
        "",
        "| preset | network | model | parallel (TP PP EP x replicas) |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['preset']} | {r['dims']} | {r['model']} | {r['parallel']} |")
    lines += [
        "",
        "## (a) Serving-optimal vs training-optimal split",
        "",
        "| preset | model | serving opt GB/s | training opt GB/s | tokens/s at serving opt "
        "| TPOT ms | TTFT ms | tokens/s at training opt (slowdown) | train step ms at "
        "training opt | at serving opt (slowdown) |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['preset']} | {r['model']} | {r['serve_bw_gbps']} | {r['train_bw_gbps']} | "
            f"{_g(r['serve_tokens_s'])} | {_g(r['serve_tpot_ms'])} | "
            f"{_g(r['serve_ttft_ms'])} | {_g(r['train_design_tokens_s'])} "
            f"({_slow(r['train_design_serve_slowdown'])}) | {_g(r['train_step_ms'], 5)} | "
            + ("-" if r["serve_design_train_slowdown"] >= 1e3
               else _g(r["serve_design_train_step_ms"], 5))
            + f" ({_slow(r['serve_design_train_slowdown'])}) |")
    lines += [
        "",
        "## (b) One network for both (weights 1:1, each normalised by its own optimum)",
        "",
        "| preset | model | shared GB/s | serving loss | training loss | certified gap "
        "| gaps of the own optima (serve / train) |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['preset']} | {r['model']} | {r['shared_bw_gbps']} | "
            f"{r['shared_serve_loss'] * 100:.2f}% | {r['shared_train_loss'] * 100:.2f}% | "
            f"{r['shared_gap']:.1e} | {r['serve_gap']:.1e} / {r['train_gap']:.1e} |")
    lines += [
        "",
        "## (c) Disaggregated (prefill pool 1/4 of the replicas, KV over the outermost dim) "
        "vs colocated",
        "",
        "Each model twice: a prefill pool of 1/4 of the replicas, and the balanced pool "
        "(the prefill share of a colocated replica's time at the colocated optimum, "
        "rounded). Colocated: the (a) optimum.",
        "",
        "| preset | model | prefill replicas (of) | KV dim | split GB/s (dis / colo) "
        "| TTFT ms (dis / colo) | KV ms | TPOT ms (dis / colo) | tokens/s (dis / colo) "
        "| gap |",
        "|---|---|---:|---:|---|---|---:|---|---|---:|",
    ]
    for r in rows:
        n = r["parallel"].split(" x ")[-1]
        for k, pre in (("prefill_replicas", "dis"), ("bal_prefill_replicas", "bal")):
            lines.append(
                f"| {r['preset']} | {r['model']} | {r[k]} ({n}) | {r['kv_dim']} | "
                f"{r[pre + '_bw_gbps']} / {r['serve_bw_gbps']} | {_g(r[pre + '_ttft_ms'])} / "
                f"{_g(r['serve_ttft_ms'])} | {_g(r[pre + '_kv_ms'])} | "
                f"{_g(r[pre + '_tpot_ms'])} / {_g(r['serve_tpot_ms'])} | "
                f"{_g(r[pre + '_tokens_s'])} / {_g(r['serve_tokens_s'])} | "
                f"{r[pre + '_gap']:.1e} |")
    lines += [
        "",
        "## (d) TPOT vs network cost",
        "",
        "The tokens/s optimum under `constraints.max_cost_usd` caps from "
        f"{SWEEP[0]}x to {SWEEP[1]}x the shipped design's network cost (power cap dropped); "
        "the shipped design as a marker.",
        "",
        "Plot: `serving_study_tpot_vs_cost.png` (TPOT vs network cost per model, one line "
        "per preset).",
        "",
        "| preset | model | cap $ | cost $ | split GB/s | TPOT ms | tokens/s | gap |",
        "|---|---|---:|---:|---|---:|---:|---:|",
    ]
    for (preset, model), (pts, ref) in curves.items():
        for p in pts:
            lines.append(f"| {preset} | {model} | {_g(p['cap_usd'])} | {_g(p['cost_usd'])} | "
                         f"{p['bw']} | {_g(p['tpot_ms'])} | {_g(p['tokens_s'])} | "
                         f"{p['gap']:.1e} |")
        lines.append(f"| {preset} | {model} | shipped | {_g(ref['cost_usd'])} | - | "
                     f"{_g(ref['tpot_ms'])} | {_g(ref['tokens_s'])} | - |")
    (out / "serving_study.md").write_text("\n".join(lines) + "\n")
    _plot(out, curves)


def _plot(out, curves) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    names = sorted({m for _, m in curves})
    for ax, model in zip(axes, names):
        for (preset, m), (pts, ref) in curves.items():
            if m != model:
                continue
            line, = ax.plot([p["cost_usd"] for p in pts], [p["tpot_ms"] for p in pts],
                            "o-", label=preset)
            ax.plot([ref["cost_usd"]], [ref["tpot_ms"]], "*", ms=12, color=line.get_color())
        ax.set_xscale("log")
        ax.set_xlabel("network cost ($)")
        ax.set_ylabel("TPOT (ms) at the tokens/s optimum")
        ax.set_title(model + " (star: shipped design)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "serving_study_tpot_vs_cost.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
