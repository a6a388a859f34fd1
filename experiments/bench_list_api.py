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

from bench_coldstart import build_problems, random_problems, stacked_groups

import libra_jax as lj  # noqa: E402


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
