"""Design time and run time together (issue 33, point 3): on the shipped workloads and the
real-system presets, for perf and perf_per_cost at several budgets, the speed-up of the
design alone, the runtime alone and both, and whether the optimal bandwidth split changes
with the scheduler.

Each case is `libra_jax.studies.runtime.search_runtime` (what ``libra-train ...
runtime=search`` runs) with the candidates of `CANDIDATES` and a short pattern search
(`REFINE_EVALS` simulations per dimension), so the whole study stays within minutes on two
cores. Against the undesigned baseline (the equal split of the budget, ASTRA-sim's default
runtime), each row is simulated with its runtime at its design:

* design only: LIBRA's optimum (the default runtime's model optimum), default runtime;
* runtime only: the equal split, the best candidate runtime there;
* LIBRA then runtime: LIBRA's optimum, the best candidate runtime there;
* both: the joint optimum (every candidate's bandwidths optimised, the best pair).

``split_change`` is the largest change of a dimension's share of the bandwidth between the
best design under the ascending order and the best design under Themis (0: the scheduler
leaves the split as it is).

Run: ``python experiments/codesign_study.py [--cases turing_nlg,gpt3] [--budgets 0.5,1,2]
[--objectives perf,perf_per_cost]``; writes ``experiments/results/codesign_study.md`` and
``.csv``. The numbers follow the runtime model of ``libra_jax/model`` (docs/runtime.md).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import pathlib
import sys
import time

import numpy as np
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.studies import runtime
from libra_jax.studies.job.train import power_of_run
from libra_jax.types import float64

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
#: Shipped workloads (LIBRA's 3-dim network) and the real-system presets.
CASES = ("turing_nlg", "gpt3", "msft_1t", "dlrm", "resnet50", "gb200_nvl72", "h100_dgx",
         "tpu_v4")
BUDGETS = (0.5, 1.0, 2.0)
OBJECTIVES = ("perf", "perf_per_cost")
#: Chunks per collective (Themis and round robin reorder chunks: one chunk leaves nothing to
#: schedule); the candidates: the three orders x ring or the block's alternative algorithm
#: per dimension (`runtime.default_algorithms`).
CHUNKS = 8
#: Per-hop latency (ns) where a preset has none (LIBRA's networks; the real-system presets
#: take their tiers' latencies from the technology catalogue) and the endpoint delay (ns).
LATENCY_NS = 500
ENDPOINT_NS = 10
CANDIDATES = dict(inter_dim_scheduling=["ascending", "themis", "round_robin"])
REFINE_EVALS = 3
FIELDS = ("case", "network", "objective", "budget", "budget_key", "candidates",
          "baseline_step_ns", "design_only", "runtime_only", "libra_then_runtime", "both",
          "both_gain", "joint_runtime", "runtime_alone_runtime", "joint_bw_gbps", "libra_bw_gbps", "split_change",
          "gap", "seconds")


def _config(case: str, objective: str):
    overrides = [f"conf={case}", "model=pipelined", f"objective={objective}",
                 f"system.chunks={CHUNKS}", f"system.endpoint_delay_ns={ENDPOINT_NS}",
                 "compilation_cache_dir=null"]
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
        if cfg.network.latency_ns is None and cfg.cost_model.file is None:
            dims = config.to_inputs(cfg)[0].num_dims
            cfg = compose(config_name="config", overrides=overrides + [
                f"network.latency_ns=[{','.join([str(LATENCY_NS)] * dims)}]"])
    return config._as_config(cfg)


def _scaled(spec, factor: float, reference=None):
    """The run's budget times ``factor``: the total bandwidth, else the power or cost cap.
    A preset capped by power alone gets, for ``perf_per_cost``, the shipped system's total
    bandwidth (``reference``) as the total: with no fixed network cost, step x cost falls as
    the bandwidth falls, so a cap alone has its optimum at almost no bandwidth (LIBRA
    compares designs at one total bandwidth)."""
    if reference is not None and spec.total_bw_gbps is None:
        spec = dataclasses.replace(spec, total_bw_gbps=float(sum(reference)))
    for key in ("total_bw_gbps", "max_power_w", "max_cost_usd"):
        if getattr(spec, key) is not None:
            return dataclasses.replace(spec, **{key: getattr(spec, key) * factor}), key
    raise SystemExit(f"no budget to scale in {spec}")


def _share(bw) -> np.ndarray:
    bw = np.asarray(bw, np.float64)
    return bw / bw.sum()


def run_case(case: str, objective: str, factor: float, ring_only: bool = False,
             refine_evals: int = REFINE_EVALS) -> dict:
    t0 = time.perf_counter()
    c = _config(case, objective)
    network, workload, rates, spec = config.to_inputs(c)
    tm, _ = config.to_timing(c, network.num_dims, network)
    spec, key = _scaled(spec, factor, c.reference_bw_gbps if objective == "perf_per_cost"
                        else None)
    inputs = runtime.RuntimeInputs(network, workload, rates, spec, objective, "ipm",
                                   power_of_run(c, network, spec))
    extra = dict(algorithm=[["ring"]] * network.num_dims) if ring_only else {}
    cands = runtime.candidate_runtimes(tm, network, **CANDIDATES, **extra)
    s = runtime.search_runtime(inputs, tm, cands, refine_evals=refine_evals)
    rows = {r.name: r for r in s.rows}
    eq = rows["runtime alone"].bandwidth_gbps
    base_value, base_step = runtime.simulated_value(inputs, runtime.default_runtime(tm), eq)

    def best_for(inter):
        opts = [o for o in s.candidates if o.timing_model.inter_dim_scheduling == inter]
        return min(opts, key=lambda o: o.objective_value).bandwidth_gbps

    change = float(np.max(np.abs(_share(best_for("ascending")) - _share(best_for("themis")))))
    return dict(case=case, network=network.notation, objective=objective, budget=factor,
                budget_key=key, candidates=len(cands), baseline_step_ns=base_step,
                design_only=base_step / rows["default"].step_time_ns,
                runtime_only=base_step / rows["runtime alone"].step_time_ns,
                libra_then_runtime=base_step / rows["LIBRA alone"].step_time_ns,
                both=base_step / rows["joint optimum"].step_time_ns,
                both_gain=base_value / rows["joint optimum"].objective_value,
                joint_runtime=runtime.runtime_label(rows["joint optimum"].timing_model),
                runtime_alone_runtime=runtime.runtime_label(
                    rows["runtime alone"].timing_model),
                joint_bw_gbps=" ".join(f"{x:.1f}" for x in rows["joint optimum"].bandwidth_gbps),
                libra_bw_gbps=" ".join(f"{x:.1f}" for x in rows["default"].bandwidth_gbps),
                split_change=change, gap=s.gap, seconds=time.perf_counter() - t0)


def _typed(v: str):
    """A value read back from the .csv (numbers as floats, the rest as text)."""
    if v in ("", "None"):
        return None
    try:
        return float(v)
    except ValueError:
        return v


def write(results: list, stem: pathlib.Path) -> None:
    with open(stem.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(results)
    lines = ["# Design time and run time together (issue 33)", "",
             "Speed-up of the step against the equal split of the budget with ASTRA-sim's "
             "default runtime (simulated; `experiments/codesign_study.py`, docs/runtime.md). "
             "design only: LIBRA's optimum, default runtime; runtime only: equal split, best "
             "runtime; LIBRA then runtime: LIBRA's optimum, best runtime there; both: the "
             "joint optimum. split change: largest change of a dimension's share of the "
             "bandwidth between the best ascending and the best Themis design. gap: the joint "
             "optimum's certified gap to the least candidate bound.", "",
             "| case | objective | budget | design only | runtime only | LIBRA then runtime "
             "| both | joint runtime | runtime alone's runtime | joint GB/s | LIBRA GB/s "
             "| split change | gap | s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(
            f"| {r['case']} | {r['objective']} | {r['budget']:g} x {r['budget_key']} | "
            f"{r['design_only']:.3f}x | {r['runtime_only']:.3f}x | "
            f"{r['libra_then_runtime']:.3f}x | {r['both']:.3f}x | {r['joint_runtime']} | "
            f"{r['runtime_alone_runtime']} | "
            f"{r['joint_bw_gbps']} | {r['libra_bw_gbps']} | {r['split_change']:.3f} | "
            + ("-" if r["gap"] is None else f"{100 * r['gap']:.2f}%")
            + f" | {r['seconds']:.1f} |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")


@float64
def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    ap.add_argument("--objectives", default=",".join(OBJECTIVES))
    ap.add_argument("--out", default=str(RESULTS / "codesign_study"))
    ap.add_argument("--ring-only", action="store_true",
                    help="ring on every dimension (the schedulers only): for the slow presets")
    ap.add_argument("--refine-evals", type=int, default=REFINE_EVALS)
    ap.add_argument("--append", action="store_true",
                    help="add the rows to the existing .csv instead of replacing it")
    a = ap.parse_args(argv)
    results = []
    for case in a.cases.split(","):
        for objective in a.objectives.split(","):
            for factor in (float(b) for b in a.budgets.split(",")):
                r = run_case(case, objective, factor, a.ring_only, a.refine_evals)
                print(f"{case} {objective} x{factor:g}: design {r['design_only']:.3f}x, "
                      f"runtime {r['runtime_only']:.3f}x, both {r['both']:.3f}x "
                      f"({r['seconds']:.1f} s)", flush=True)
                results.append(r)
    out = pathlib.Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if a.append and out.with_suffix(".csv").exists():
        with open(out.with_suffix(".csv"), newline="") as f:
            old = [{k: _typed(v) for k, v in r.items()} for r in csv.DictReader(f)]
        results = old + results
    write(results, out)
    print(f"wrote {out.with_suffix('.md')} and .csv", file=sys.stderr)


if __name__ == "__main__":
    main()
