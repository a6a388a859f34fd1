"""Building many problems of mixed sizes: one by one (`problem_from_arrays` in a loop) against
the stacked path (one `problems_from_stacked` call per (D, total mode) group, phases padded
with zero-traffic rows), side by side in one run, with both solved warm and compared.

    python experiments/bench_list_api.py [--n 10000]

Uses the random bounded problems of `bench_coldstart.py` (D 2-5, K 1-8, lower and upper
bounds, a total as == or <=).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from bench_coldstart import build_problems, random_problems

import libra_jax as lj  # noqa: E402
from libra_jax.model.problem import problems_from_stacked


def stacked_groups(raw: list[dict]):
    """(stacked problems, one per (D, mode) group; the input index of each stacked row)."""
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(raw):
        groups.setdefault((len(r["lo"]), r["mode"]), []).append(i)
    stacks, order = [], []
    for (d, mode), idx in groups.items():
        k = max(len(raw[i]["weight"]) for i in idx)
        traffic = np.zeros((len(idx), k, d))
        weight = np.zeros((len(idx), k))  # padding phases: no traffic, weight 0
        for j, i in enumerate(idx):
            t = np.asarray(raw[i]["traffic_gb"])
            traffic[j, :t.shape[0]] = t
            weight[j, :t.shape[0]] = raw[i]["weight"]
        stacks.append(problems_from_stacked(
            traffic, weight, np.array([raw[i]["compute_s"] for i in idx]),
            total_bw_gbps=np.array([raw[i]["total"] for i in idx]), total_bw_mode=mode,
            lower_gbps=np.array([raw[i]["lo"] for i in idx]),
            upper_gbps=np.array([raw[i]["hi"] for i in idx])))
        order += idx
    return stacks, np.asarray(order)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    args = ap.parse_args(argv)
    raw = random_problems(2, args.n, 3.0)
    t0 = time.perf_counter()
    one = build_problems(raw)
    t1 = time.perf_counter()
    stacks, order = stacked_groups(raw)
    t2 = time.perf_counter()
    lj.solve_batch(one), lj.solve_stacked(stacks)  # compile both
    a = lj.solve_batch(one)
    b = lj.solve_stacked(stacks)
    sa = np.asarray(a.step_time_ns)
    sb = np.empty(args.n)
    sb[order] = np.asarray(b.step_time_ns)
    print(f"{args.n} problems: build one by one {t1 - t0:.2f} s "
          f"({(t1 - t0) / args.n * 1e6:.0f} us each); stacked per (D, mode) {t2 - t1:.2f} s "
          f"({(t2 - t1) / args.n * 1e6:.0f} us each): {(t1 - t0) / (t2 - t1):.1f}x")
    print(f"warm solve: list {a.solve_seconds:.2f} s, stacked groups {b.solve_seconds:.2f} s; "
          f"same optima to {np.max(np.abs(sa - sb) / sa):.1e}; "
          f"ok {sum(s == 'ok' for s in b.status)}/{args.n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
