"""`libra-train` with whole-step contention on the shipped presets: the convex model's
certified optimum, the simulated step at that optimum and the certified gap.

For every single-workload preset (``conf/conf/*.yaml`` without ``workloads`` or co-search)
and every system setting below, the run is what ``python -m libra_jax.train conf=<preset>
model=pipelined training_loop=dp_overlap system.network_backend=<b>
system.queues_per_dim=<q>`` solves: the convex lower bound of the simulated step
(`timing.build_timed_problem`), then the simulated step at its optimum
(`timing.step_time_ns`: the event replay of `model/step.py`, or for a step with a group
over part of a dimension its pg_name trace set, `model/step_partial.py`). A gap is honest when the
solver's certified lower bound is <= the simulated step (the bound bounds every design's
simulated step, so ``exact_optimality_gap = (simulated - bound) / bound`` bounds the
distance from the best simulated step).

    python experiments/step_presets.py [--csv experiments/results/step_presets.csv]
"""
from __future__ import annotations

import argparse
import csv
import pathlib
import sys
import time

from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.model import timing
from libra_jax.solvers.solve import solve

SETTINGS = (("unaware", 1, "lifo"), ("aware", 1, "lifo"), ("aware", 2, "lifo"),
            ("unaware", 2, "fifo"))
COLUMNS = ("preset", "backend", "queues_per_dim", "queue_policy", "status", "model_ns",
           "lower_bound_ns", "simulated_ns", "exact_optimality_gap", "honest", "seconds")


def single_presets() -> list[str]:
    out = []
    for name in config.presets():
        cfg = _compose(name)
        if cfg.workloads is None and not cfg.cosearch.enabled:
            out.append(name)
    return out


def _compose(name: str, *overrides: str):
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=[f"conf={name}", *overrides])


def run(name: str, backend: str, queues: int, policy: str) -> dict:
    cfg = _compose(name, "model=pipelined", "training_loop=dp_overlap",
                   f"system.network_backend={backend}", f"system.queues_per_dim={queues}",
                   f"system.queue_policy={policy}")
    network, workload, cost_rates, spec = config.to_inputs(cfg)
    tm, _ = config.to_timing(cfg, network.num_dims, network)
    t0 = time.perf_counter()
    problem = timing.build_timed_problem(network, workload, cost_rates, spec, tm)
    res = solve(problem)
    exact = timing.step_time_ns(workload, network, tm, res.bandwidth_gbps)
    secs = time.perf_counter() - t0
    gap = (exact - res.lower_bound) / res.lower_bound
    return dict(preset=name, backend=backend, queues_per_dim=queues, queue_policy=policy,
                status=res.status, model_ns=res.step_time_ns, lower_bound_ns=res.lower_bound,
                simulated_ns=exact, exact_optimality_gap=gap,
                honest=bool(res.lower_bound <= exact * (1 + 1e-9)), seconds=round(secs, 2))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=pathlib.Path, default=None)
    ap.add_argument("--presets", nargs="*", default=None)
    args = ap.parse_args(argv)
    rows = []
    print(f"{'preset':14s} {'backend':8s} q policy {'model ms':>10s} {'bound ms':>10s} "
          f"{'simulated ms':>12s} {'gap':>9s} honest")
    for name in args.presets or single_presets():
        for backend, q, policy in SETTINGS:
            r = run(name, backend, q, policy)
            rows.append(r)
            print(f"{name:14s} {backend:8s} {q} {policy:6s} {r['model_ns'] / 1e6:10.3f} "
                  f"{r['lower_bound_ns'] / 1e6:10.3f} {r['simulated_ns'] / 1e6:12.3f} "
                  f"{r['exact_optimality_gap']:9.2e} {r['honest']}", flush=True)
    print(f"{sum(r['honest'] for r in rows)}/{len(rows)} honest; gap max "
          f"{max(r['exact_optimality_gap'] for r in rows):.3g}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
    return 0 if all(r["honest"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
