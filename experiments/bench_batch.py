"""Throughput of the batch engine, end to end, side by side with a per-problem cvxpy loop.

    python experiments/bench_batch.py [--sizes 100,1000,10000,100000] [--cvxpy 40]
                                      [--dtypes float64,float32] [--out FILE]

Two families of random problems (fixed seeds), each with per-dimension upper bounds and a
total budget:

  * gpt3_4d: GPT-3-4D-size problems, K = 11 communicating phases on D = 4 dimensions, sum of
    bandwidths == budget, an upper bound on every dimension;
  * mixed: D in 2..5 and K in 1..16 per problem (phases beyond K are zero traffic), lower and
    upper bounds, the total as == or <= (half each), built per (D, mode) group.

For every batch size the timed work is what a user runs: `problem.problems_from_stacked`
(building: validation, the constraint fields in closed form) and `batch.solve_stacked`
(padding, the vmapped interior-point kernel, statuses, the host certificate for what the
kernel's bound left open), warm (after one untimed call of the same size). Reported: problems/s
end to end, the first call's extra time (compilation), the number of programs compiled by a
second call with another batch size (must be 0), the certified gaps and statuses, and the
ratio to a plain cvxpy + Clarabel loop over a sample of the same problems (same machine, same
run). Writes experiments/results/bench_batch.md (or --out).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import sys
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from libra_jax.model.problem import problems_from_stacked  # noqa: E402
from libra_jax.solvers import batch as B  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def gpt3_4d(rng, n):
    """Raw arrays of n GPT-3-4D-size problems (K 11, D 4, sum == total, upper bounds)."""
    k, d = 11, 4
    n_used = rng.integers(1, d + 1, (n, k))
    keys = rng.random((n, k, d))
    ranks = np.argsort(np.argsort(keys, axis=2), axis=2)
    used = ranks < n_used[:, :, None]
    traffic = np.where(used, 10.0 ** rng.uniform(-2, 1, (n, k, d)), 0.0)
    traffic[:, 0, :] = np.maximum(traffic[:, 0, :], 1e-2)  # every dim used
    weight = rng.integers(1, 97, (n, k)).astype(np.float64)
    compute = rng.uniform(0.05, 2.0, n)
    total = rng.uniform(100, 1000, n)
    hi = total[:, None] * rng.uniform(0.3, 1.0, (n, d))
    hi *= np.maximum(1.0, 1.2 * total / hi.sum(axis=1))[:, None]
    return [dict(traffic_gb=traffic, weight=weight, compute_s=compute, total_bw_gbps=total,
                 total_bw_mode="eq", upper_gbps=hi)]


def mixed(rng, n):
    """Raw arrays of n mixed-size problems, as groups of one (D, mode): D 2..5, K 1..16."""
    k_max = 16
    d_of = rng.integers(2, 6, n)
    mode_of = rng.integers(0, 2, n)
    groups = []
    for d in range(2, 6):
        for mode in (0, 1):
            m = int(np.sum((d_of == d) & (mode_of == mode)))
            if m == 0:
                continue
            k = rng.integers(1, k_max + 1, m)
            live = np.arange(k_max)[None, :] < k[:, None]
            used = (rng.random((m, k_max, d)) < 0.6) & live[:, :, None]
            used[:, 0, :] = True
            traffic = np.where(used, 10.0 ** rng.uniform(-3, 1, (m, k_max, d)), 0.0)
            weight = np.where(live, rng.integers(1, 20, (m, k_max)), 0).astype(np.float64)
            total = rng.uniform(50, 2000, m)
            share = rng.dirichlet(np.ones(d), m)
            lo = np.where(rng.random((m, d)) < 0.3, 0.5 * share * total[:, None], 0.0)
            hi = np.where(rng.random((m, d)) < 0.5,
                          np.maximum(1.5 * share * total[:, None], lo + 1.0), np.inf)
            groups.append(dict(traffic_gb=traffic, weight=weight,
                               compute_s=rng.uniform(0.0, 2.0, m), total_bw_gbps=total,
                               total_bw_mode="eq" if mode == 0 else "le", lower_gbps=lo,
                               upper_gbps=hi))
    return groups


FAMILIES = {"gpt3_4d": gpt3_4d, "mixed": mixed}


def build_and_solve(groups, dtype, chunk):
    """(result, build seconds, solve seconds)."""
    t0 = time.perf_counter()
    stacked = [problems_from_stacked(**g) for g in groups]
    t1 = time.perf_counter()
    res = B.solve_stacked(stacked, dtype=dtype, chunk=chunk)
    return res, t1 - t0, time.perf_counter() - t1


def cvxpy_loop(groups, sample):
    """Problems/s of a plain cvxpy + Clarabel epigraph model, one problem at a time."""
    import cvxpy as cp  # noqa: PLC0415  (test-only dependency)

    cases = []
    for g in groups:
        for i in range(g["traffic_gb"].shape[0]):
            cases.append((g, i))
    rng = np.random.default_rng(1)
    pick = [cases[j] for j in rng.choice(len(cases), min(sample, len(cases)), replace=False)]
    values = []
    start = time.perf_counter()
    for g, i in pick:
        t = g["traffic_gb"][i]
        w = g["weight"][i]
        keep = (w > 0) & (t > 0).any(axis=1)
        t, w = t[keep], w[keep]
        k, d = t.shape
        scale = float(g["total_bw_gbps"][i])  # bandwidths in units of the total
        x = cp.Variable(d, pos=True)
        s = cp.Variable(k)
        cons = [s[kk] >= t[kk, dd] / scale * cp.inv_pos(x[dd])
                for kk in range(k) for dd in range(d) if t[kk, dd] > 0]
        cons.append(cp.sum(x) == 1.0 if g["total_bw_mode"] == "eq" else cp.sum(x) <= 1.0)
        if "lower_gbps" in g:
            cons.append(x >= g["lower_gbps"][i] / scale)
        hi = g["upper_gbps"][i]
        fin = np.isfinite(hi)
        if fin.any():
            cons.append(x[np.nonzero(fin)[0]] <= hi[fin] / scale)
        prob = cp.Problem(cp.Minimize(w @ s), cons)
        prob.solve(solver=cp.CLARABEL)
        values.append(prob.value)
    return len(pick) / (time.perf_counter() - start)


def run_family(name, sizes, dtypes, cvxpy_sample, other_size, chunk):
    rows = []
    gen = FAMILIES[name]
    rate_cvx = cvxpy_loop(gen(np.random.default_rng(0), 2000), cvxpy_sample) \
        if cvxpy_sample else float("nan")
    print(f"[{name}] cvxpy (Clarabel) loop over {cvxpy_sample} problems: "
          f"{rate_cvx:.1f} problems/s", flush=True)
    for dt in dtypes:
        dtype = np.dtype(dt)
        for n in sizes:
            groups = gen(np.random.default_rng(n), n)
            before = B.compiled_programs()
            t0 = time.perf_counter()
            build_and_solve(groups, dtype, chunk)
            first = time.perf_counter() - t0
            compiled = B.compiled_programs() - before
            t0 = time.perf_counter()
            res, t_build, t_solve = build_and_solve(groups, dtype, chunk)
            warm = time.perf_counter() - t0
            status = np.asarray(res.status)
            gap = res.optimality_gap
            rows.append(dict(family=name, dtype=dt, n=n, rate=n / warm, seconds=warm,
                             build_rate=n / t_build, solve_rate=n / t_solve,
                             extra_first=first - warm, compiled=compiled,
                             ok=float(np.mean(status == "ok")), gmed=float(np.median(gap)),
                             fallback=res.float64_fallback,
                             gmax=float(np.max(gap)), host=res.host_certified,
                             iters=float(np.mean(res.iterations)),
                             iters_max=int(np.max(res.iterations)),
                             viol=float(np.max(res.max_violation)),
                             ratio=(n / warm) / rate_cvx))
            print(_fmt_row(rows[-1]), flush=True)
        # A second call with another batch size compiles nothing.
        groups = gen(np.random.default_rng(7), other_size)
        before = B.compiled_programs()
        build_and_solve(groups, dtype, chunk)
        again = B.compiled_programs() - before
        print(f"[{name} {dt}] programs compiled by a call with {other_size} problems after "
              f"the sizes above: {again}", flush=True)
        rows[-1]["again"] = (other_size, again)
    return rows, rate_cvx


COLS = ("family | dtype | batch | problems/s (build+solve, warm) | x cvxpy loop | wall s | "
        "building /s | solving /s | "
        "first call extra s (compile) | programs compiled | ok | gap median | gap max | "
        "max rel. violation | host-certified | float64 fallback | IPM iterations mean / max")


def _fmt_row(r):
    return (f"| {r['family']} | {r['dtype']} | {r['n']:,} | {r['rate']:,.0f} | "
            f"{r['ratio']:,.0f} | {r['seconds']:.3f} | {r['build_rate']:,.0f} | "
            f"{r['solve_rate']:,.0f} | {r['extra_first']:.1f} | "
            f"{r['compiled']} | {100 * r['ok']:.1f}% | {r['gmed']:.1e} | {r['gmax']:.1e} | "
            f"{r['viol']:.1e} | {r['host']} | {r['fallback']} | {r['iters']:.1f} / "
            f"{r['iters_max']} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,10000,100000")
    ap.add_argument("--families", default="gpt3_4d,mixed")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--cvxpy", type=int, default=40, help="cvxpy loop sample (0: skip)")
    ap.add_argument("--other-size", type=int, default=777)
    ap.add_argument("--chunk", type=int, default=None,
                    help="most problems per device call (default: batch.default_max_chunk)")
    ap.add_argument("--chunk-threads", type=int, default=None,
                    help="chunks in flight at a time on a CPU (default: batch_run.CHUNK_THREADS)")
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" / "bench_batch.md"))
    args = ap.parse_args()
    if args.chunk_threads is not None:
        from libra_jax.solvers import batch_run  # noqa: PLC0415
        batch_run.CHUNK_THREADS = args.chunk_threads
    sizes = [int(s) for s in args.sizes.split(",")]
    dev = jax.devices()[0]
    chunk = args.chunk or B.default_max_chunk()
    device = (f"{dev.platform} ({getattr(dev, 'device_kind', '')}) x {len(jax.devices())}, "
              f"{os.cpu_count()} host CPUs, jax {jax.__version__}, {platform.machine()}; "
              f"chunk {chunk}"
              + (f", {args.chunk_threads} chunk thread(s)" if args.chunk_threads else ""))
    print("Device:", device, flush=True)
    rows, notes = [], []
    for fam in args.families.split(","):
        r, rate = run_family(fam, sizes, args.dtypes.split(","), args.cvxpy, args.other_size,
                             args.chunk)
        rows += r
        notes.append(f"{fam}: cvxpy + Clarabel loop {rate:.1f} problems/s on a sample of "
                     f"{args.cvxpy}")
        for x in r:
            if "again" in x:
                notes.append(f"{fam} {x['dtype']}: a call with {x['again'][0]} problems after "
                             f"the sizes above compiled {x['again'][1]} programs")
    table = "\n".join(["| " + COLS + " |", "|" + "---|" * len(COLS.split("|"))]
                      + [_fmt_row(r) for r in rows])
    text = (f"# bench_batch\n\n`python experiments/bench_batch.py {' '.join(sys.argv[1:])}`"
            f"\n\nDevice: {device}\n\n{table}\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    print()
    print(text)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    main()
