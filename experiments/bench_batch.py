"""Throughput of batched `perf` solves (batch.solve_stacked) on GPT-3-4D-size problems.

    python experiments/bench_batch.py [--sizes 1,100,10000,100000] [--cvxpy 50] [--distinct 200]

(batch 10^5 runs for the configs in --big-configs only, default: fast, to stay < 10 min.)

Problems: 11 communicating phases, 4 dimensions, sum of bandwidths == budget and a random
per-dimension upper bound on every dimension (kept feasible: sum of bounds >= 1.2 budget).
`--distinct` distinct problems are built with problem_from_arrays (host LPs; timed separately)
and tiled to the larger batch sizes. Solve times are after compilation (compile time reported
separately), one timed call per row (batch 1 and 100: best of 5). Batches above --chunk are
solved in chunks of --chunk (one compilation). float32 rows cast the stacked arrays to float32
(the solver runs in float32; gaps are computed by the solver in float32 too). Gap = the solver's
certified relative optimality gap (closed-form dual bound). cvxpy: the scaled Clarabel epigraph
model of tests/reference_cvxpy.py, one problem at a time, on a sample. Writes
experiments/results/bench_batch.md.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

from libra_jax import batch as B  # noqa: E402
from libra_jax.barrier import BarrierConfig  # noqa: E402
from libra_jax.problem import ConstraintSpec, problem_from_arrays  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
K, D = 11, 4
CONFIGS = {
    "default": BarrierConfig(),
    "fast": BarrierConfig(gap_tol=1e-6, mu=50.0, newton_tol=1e-8, max_backtrack=20),
}


def make_arrays(rng):
    """Raw arrays of one random GPT-3-4D-size problem."""
    traffic = np.zeros((K, D))
    for k in range(K):  # each phase uses 1..4 dims; every dim used by some phase
        n = rng.integers(1, D + 1)
        traffic[k, rng.choice(D, n, replace=False)] = 10.0 ** rng.uniform(-2, 1, n)
    traffic[rng.integers(K), :] = np.maximum(traffic[rng.integers(K), :], 1e-2)
    weight = rng.integers(1, 97, K).astype(np.float64)
    compute = float(rng.uniform(0.05, 2.0))
    total = float(rng.uniform(100, 1000))
    hi = total * rng.uniform(0.3, 1.0, D)
    if hi.sum() < 1.2 * total:
        hi *= 1.2 * total / hi.sum()
    return traffic, weight, compute, total, hi


def build(rng, n):
    raw, probs = [], []
    for _ in range(n):
        t, w, c, total, hi = make_arrays(rng)
        spec = ConstraintSpec(total_bw_gbps=total, upper_gbps=list(hi))
        p = problem_from_arrays(t, w, c, None, spec)
        probs.append(p)
        raw.append((t, w, c, total, hi))
    return raw, probs


def stacked_batch(probs, n, dtype):
    shape = B.bucket_shape(probs[0])
    base = B.stack([B.pad_problem(p, shape) for p in probs])
    valid = np.zeros((len(probs), shape[0]), bool)
    valid[:, :D] = True
    idx = np.arange(n) % len(probs)

    def take(x):
        x = np.asarray(x)[idx]
        return x.astype(dtype) if x.dtype == np.float64 else x

    return jax.tree.map(take, base), valid[idx]


def run(p, valid, config, chunk):
    outs = []
    n = valid.shape[0]
    for s in range(0, n, chunk):
        sl = jax.tree.map(lambda x: x[s:s + chunk], (p, valid))
        outs.append(jax.device_get(B.solve_stacked(sl[0], sl[1], config)))
    return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}


def cvxpy_rate(raw, sample):
    sys.path.insert(0, str(ROOT / "tests"))
    from reference_cvxpy import PerfReference, RefConstraints

    t0 = time.perf_counter()
    for t, w, c, total, hi in raw[:sample]:
        cons = RefConstraints(np.zeros(D), hi, np.ones((1, D)), np.array([total]),
                              np.zeros((0, D)), np.zeros(0))
        PerfReference(t, w, c, cons).solve()
    return sample / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1,100,10000,100000")
    ap.add_argument("--distinct", type=int, default=200)
    ap.add_argument("--chunk", type=int, default=10000)
    ap.add_argument("--cvxpy", type=int, default=50)
    ap.add_argument("--configs", default="default,fast")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--big-configs", default="fast",
                    help="configs that also run the batch sizes above 10^4 (time limit)")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "bench_batch.md"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    raw, probs = build(rng, args.distinct)
    t_build = time.perf_counter() - t0
    print(f"built {len(probs)} distinct problems in {t_build:.1f} s "
          f"({len(probs) / t_build:.0f}/s), bucket {B.bucket_shape(probs[0])}", flush=True)
    rate_cvx = cvxpy_rate(raw, args.cvxpy)
    print(f"cvxpy (Clarabel) per-problem loop: {rate_cvx:.1f} problems/s", flush=True)

    rows = []
    for cname in args.configs.split(","):
        config = CONFIGS[cname]
        for dt in args.dtypes.split(","):
            dtype = np.dtype(dt)
            for n in sizes:
                if n > 10000 and cname not in args.big_configs.split(","):
                    continue
                p, valid = stacked_batch(probs, n, dtype)
                chunk = min(n, args.chunk)
                tc = time.perf_counter()
                first = jax.tree.map(lambda x: x[:chunk], (p, valid))
                jax.block_until_ready(B.solve_stacked(first[0], first[1], config))
                t_first = time.perf_counter() - tc
                reps = 5 if n <= 100 else 1
                best = np.inf
                for _ in range(reps):
                    ts = time.perf_counter()
                    out = run(p, valid, config, chunk)
                    best = min(best, time.perf_counter() - ts)
                gap = out["gap"].astype(np.float64)
                st = out["status"]
                row = dict(config=cname, dtype=dt, n=n, first_s=t_first, solve_s=best,
                           rate=n / best, gmin=np.min(gap), gmed=np.median(gap),
                           g99=np.quantile(gap, 0.99), gmax=np.max(gap),
                           ok=float(np.mean(st == 0)), le4=float(np.mean(gap <= 1e-4)),
                           ratio=(n / best) / rate_cvx)
                rows.append(row)
                print(_fmt_row(row), flush=True)
    table = _table(rows)
    head = (f"Device: {jax.devices()[0].platform} x {len(jax.devices())}, "
            f"{os.cpu_count()} CPUs; {args.distinct} distinct problems "
            f"(K={K}, D={D}, bucket {B.bucket_shape(probs[0])}) built in {t_build:.1f} s "
            f"({len(probs) / t_build:.0f} problems/s, host LPs); cvxpy/Clarabel loop on "
            f"{args.cvxpy}: {rate_cvx:.1f} problems/s.\n\n")
    text = head + table
    print()
    print(text)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("# bench_batch\n\n`python experiments/bench_batch.py "
                   + " ".join(sys.argv[1:]) + "`\n\n" + text)


COLS = ("config | dtype | batch | compile+first call s | solve s | problems/s | x cvxpy | "
        "gap min | gap median | gap p99 | gap max | ok | gap<=1e-4")


def _fmt_row(r):
    return (f"| {r['config']} | {r['dtype']} | {r['n']} | {r['first_s']:.2f} | "
            f"{r['solve_s']:.3f} | {r['rate']:.0f} | {r['ratio']:.1f} | {r['gmin']:.1e} | "
            f"{r['gmed']:.1e} | {r['g99']:.1e} | {r['gmax']:.1e} | {100 * r['ok']:.0f}% | "
            f"{100 * r['le4']:.0f}% |")


def _table(rows):
    lines = ["| " + COLS + " |", "|" + "---|" * len(COLS.split("|"))]
    return "\n".join(lines + [_fmt_row(r) for r in rows]) + "\n"


if __name__ == "__main__":
    main()
