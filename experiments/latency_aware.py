"""Experiment 7: LIBRA's optimum under a latency- and chunk-aware model.

    python experiments/latency_aware.py [key=value ...]   # config: experiments/conf/latency_aware.yaml

For each workload x network x link latency L (every dimension; a Switch step is 2 hops):

1. LIBRA's optimum: bandwidths minimising LIBRA's step time (model=libra) at sum == budget;
2. the latency-aware optimum: bandwidths and chunk count minimising the pipelined model's step
   time (model=pipelined, `chunk_counts.solve_chunk_counts` over the configured counts);
3. both designs timed with the pipelined model's simulated chunk schedule (for LIBRA's design
   at its best chunk count), and LIBRA's own prediction for its design.

Writes <output_dir>/<name>.md: per case the two step times, the gain of the latency-aware
design, the chunk count chosen, and how far LIBRA's prediction is below the simulated time.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import time

from libra_jax.model import timing  # noqa: E402
from libra_jax.model.problem import ConstraintSpec  # noqa: E402
from libra_jax.solvers.solve import solve  # noqa: E402
from libra_jax.studies import chunk_counts  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import speedup as common  # noqa: E402  (shared helpers: config loading, cases, output folder)


def load_config(name: str = "latency_aware", overrides=()):
    return common.load_experiment(name, list(overrides))


def simulated_ns(case, tm, bw, chunks) -> tuple[float, int]:
    """The pipelined model's step time of design ``bw`` at its best chunk count."""
    best = None
    for k in chunks:
        t = dataclasses.replace(tm, chunks=int(k))
        times, _ = timing.collective_times_ns(case.workload_obj, case.network, t, bw)
        step = timing.loop_step_time_ns(case.workload_obj.compute_ns, times, t.training_loop)
        if best is None or step < best[0]:
            best = (step, int(k))
    return best


def run(cfg) -> list[dict]:
    spec = ConstraintSpec(total_bw_gbps=float(cfg.budget_gbps))
    rows = []
    for case in common.load_cases(cfg):
        libra = solve(case.problem(spec))
        for lat in cfg.latencies_ns:
            tm = timing.TimingModel(model="pipelined",
                                    latency_ns=[float(lat)] * case.network.num_dims,
                                    endpoint_delay_ns=float(cfg.endpoint_delay_ns))
            choice = chunk_counts.solve_chunk_counts(case.network, case.workload_obj, None, spec, tm,
                                               list(cfg.chunks))
            aware = choice.results[choice.best]
            k_aware = choice.chunks[choice.best]
            aware_ns, _ = simulated_ns(case, tm, aware.bandwidth_gbps, [k_aware])
            libra_ns, k_libra = simulated_ns(case, tm, libra.bandwidth_gbps, cfg.chunks)
            rows.append(dict(
                workload=case.label, network=case.notation, latency_ns=float(lat),
                libra_predicted_ns=libra.step_time_ns, libra_simulated_ns=libra_ns,
                libra_chunks=k_libra, aware_ns=aware_ns, aware_chunks=k_aware,
                aware_status=aware.status, aware_gap=aware.optimality_gap,
                libra_bw=libra.bandwidth_gbps, aware_bw=aware.bandwidth_gbps,
                gain=libra_ns / aware_ns))
    return rows


def write_outputs(cfg, rows, seconds) -> pathlib.Path:
    out = common.output_dir(cfg) / f"{cfg.name}.md"
    header = ["workload", "network", "latency ns/hop", "LIBRA predicted ms",
              "LIBRA design, simulated ms (k)", "latency-aware ms (k)", "gain",
              "LIBRA under-predicts by", "LIBRA bw GB/s", "latency-aware bw GB/s", "gap"]
    table = [[r["workload"], r["network"], f"{r['latency_ns']:g}",
              f"{r['libra_predicted_ns'] / 1e6:,.3f}",
              f"{r['libra_simulated_ns'] / 1e6:,.3f} ({r['libra_chunks']})",
              f"{r['aware_ns'] / 1e6:,.3f} ({r['aware_chunks']})", f"{r['gain']:.4f}x",
              f"{(r['libra_simulated_ns'] / r['libra_predicted_ns'] - 1) * 100:.2f}%",
              common.fmt_bw(r["libra_bw"]), common.fmt_bw(r["aware_bw"]),
              common.fmt_gap(r["aware_gap"])] for r in rows]
    gains = [r["gain"] for r in rows]
    lines = ["# Experiment 7: LIBRA's optimum under the latency- and chunk-aware model", "",
             f"Budget {cfg.budget_gbps} GB/s per NPU (sum over dimensions), endpoint delay "
             f"{cfg.endpoint_delay_ns} ns, chunk counts searched {list(cfg.chunks)}. Both designs "
             "are timed by the pipelined model's simulated chunk schedule (LIBRA's at its best "
             "chunk count). gain = LIBRA design / latency-aware design.", "",
             *common.md_table(header, table), "",
             f"Gain: min {min(gains):.4f}x, max {max(gains):.4f}x over {len(rows)} cases. "
             f"{len(rows)} cases in {seconds:.0f} s.", ""]
    out.write_text("\n".join(lines))
    return out


def main(overrides=None):
    start = time.perf_counter()
    cfg = load_config("latency_aware", overrides or [])
    rows = run(cfg)
    md = write_outputs(cfg, rows, time.perf_counter() - start)
    print(f"wrote {md} ({len(rows)} cases, {time.perf_counter() - start:.1f} s)")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
