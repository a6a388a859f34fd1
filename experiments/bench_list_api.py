"""The list API and the stacked path against a cvxpy + Clarabel loop, warm, building included,
side by side in one run (issue 30, point 3).

    python experiments/bench_list_api.py [--n 10000] [--rounds 5] [--loop 200]
        [--calls N] [--store DIR] [--baseline DIR] [--out FILE]

Two mixes of ``--n`` bounded problems:

* "varied": replicas of 200 varied problems (`varied_problems`): D 2-5, K 1-16 phases (some
  of them repeated or idle), lower bounds (0 on some dims), upper bounds (none on some), a
  total bandwidth as == or <=, and on 30% of them cost rates with a cost budget; each replica
  scales the traffic by a random factor (0.8-1.25), in replica order (every base problem once,
  then again);
* "coldstart": `bench_coldstart.random_problems` (D 2-5, K 1-8, bounds, a total as == or <=),
  the mix of the cold-start table.

Each mix, in a fresh process with an empty executable store of its own: a first call of
each path (compiles), with ``--calls N`` then `warm_up` of the list's problems for a study
of N such calls (the planner weighs each program's compilation over them and compiles the
finer buckets a long study pays for; without it the planner gets them by itself once its
calls have paid that much padding, `batch_plan.Paid`; ``--store DIR`` keeps this checkout's
store in DIR, so that a second run finds what the first compiled, as a user's next process
does), then ``--rounds`` rounds
of both paths, alternating, each on other values (another replica draw or seed), timed from
the raw inputs (nested lists, floats) to the results:

* list: a `ConstraintSpec` and `problem_from_arrays` per problem, then one `solve_batch`;
* stacked: the documented stacked path (`bench_coldstart.stacked_groups`: one
  `problems_from_stacked` call per (D, total mode, cost) group, phases padded), then one
  `solve_stacked`.

The loop: cvxpy + Clarabel over the first ``--loop`` problems of the mix (for "varied", the
200 base problems, one of each), timed in this process; its rate (problems per second) is the
reference each path's rate is divided by, as in bench_coldstart.py (a loop over all 10,000
would take ~2 minutes and measure the same per-problem rate). The two paths' optima are
compared with each other and, on the loop's problems, with cvxpy's. ``--baseline DIR`` also
measures an earlier version of the package (a folder holding its ``libra_jax``), the same
way in a fresh process, between the loop's two runs: before and after side by side. This
checkout's package is measured in a fresh process per mix as well (`baseline` with this
checkout's folder): in one process, the programs compiled for the first mix (buckets of up
to 16 phases for "varied") served the second, whose problems then ran padded to them (the
cold-start mix at 0.91 CPU-s a stacked round against 0.60 in a process of its own). Writes
a markdown table to experiments/results/bench_list_api.md (or --out).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench_coldstart import cvxpy_loop, pythonpath, random_problems, stacked_groups

import libra_jax as lj  # noqa: E402
from libra_jax.model.problem import ConstraintSpec, problem_from_arrays  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]


def varied_problems(seed: int, n: int, replica_seed: int | None = None,
                    base: int = 200) -> list[dict]:
    """``n`` problems: replicas of ``base`` varied problems drawn from ``seed`` (D 2-5, K 1-16,
    bounds, a total == or <=, 30% with cost rates and a budget), each replica's traffic
    scaled by a factor in [0.8, 1.25] drawn from ``replica_seed``. Raw inputs (lists and
    floats, as `random_problems`); ``rates`` and ``budget`` are None without a cost model."""
    rng = np.random.default_rng(seed)
    protos = []
    for _ in range(base):
        d = int(rng.integers(2, 6))
        k = int(rng.integers(1, 17))
        scale = 10.0 ** rng.uniform(-1, 1)
        traffic = scale * 10.0 ** rng.uniform(-2, 1, (k, d)) * (rng.random((k, d)) < 0.7)
        traffic[0] = np.maximum(traffic[0], 1e-2 * scale)  # every dimension carries something
        if k > 2 and rng.random() < 0.3:
            traffic[-1] = traffic[0]  # a repeated phase (merged by problem_from_arrays)
        weight = rng.integers(1, 100, k).astype(float)
        if k > 1 and rng.random() < 0.1:
            weight[-1] = 0.0  # an idle phase (dropped)
        total = float(10.0 ** rng.uniform(2, 3))
        lo = total / d * rng.uniform(0.0, 0.3, d) * (rng.random(d) < 0.7)
        hi = np.maximum(total * rng.uniform(0.3, 1.0, d), lo + 1.0)
        hi *= max(1.0, 1.2 * total / hi.sum())
        hi = np.where(rng.random(d) < 0.2, np.inf, hi)
        mode = "eq" if rng.random() < 0.5 else "le"
        rates = budget = None
        if rng.random() < 0.3:
            rates = rng.uniform(0.5, 20.0, d)
            least = float(rates @ lo)  # the cheapest feasible cost
            if mode == "eq":
                left = total - lo.sum()
                for i in np.argsort(rates):
                    put = min(hi[i] - lo[i], left)
                    least += rates[i] * put
                    left -= put
            most = float(rates @ np.minimum(hi, total))
            budget = least + float(rng.uniform(0.05, 1.0)) * (most - least)
            rates = rates.tolist()
        protos.append(dict(traffic_gb=traffic, weight=weight.tolist(),
                           compute_s=float(rng.uniform(0.001, 1.0) * scale), total=total,
                           mode=mode, lo=lo.tolist(), hi=hi.tolist(), rates=rates,
                           budget=budget))
    rng = np.random.default_rng(seed * 1000 + 1 if replica_seed is None else replica_seed)
    out = []
    for i in range(n):
        p = protos[i % base]
        out.append(dict(p, traffic_gb=(p["traffic_gb"] * rng.uniform(0.8, 1.25)).tolist()))
    return out


def coldstart_problems(seed: int, n: int) -> list[dict]:
    """`bench_coldstart.random_problems` (scale 3, as its 10,000 row), without cost."""
    return [dict(r, rates=None, budget=None) for r in random_problems(seed, n, 3.0)]


MIXES = {"varied": lambda n, draw: varied_problems(7, n, replica_seed=draw),
         "coldstart": lambda n, draw: coldstart_problems(draw, n)}


def build_list(raw: list[dict]) -> list:
    """The list API as a user writes it: a `ConstraintSpec` and `problem_from_arrays` per
    problem."""
    return [problem_from_arrays(
        r["traffic_gb"], r["weight"], r["compute_s"], r["rates"],
        ConstraintSpec(total_bw_gbps=r["total"], total_bw_mode=r["mode"], lower_gbps=r["lo"],
                       upper_gbps=r["hi"], max_cost_usd=r["budget"]))
        for r in raw]


def run_path(how: str, raw: list[dict]) -> dict:
    """Builds and solves ``raw`` by the list API or the stacked path; seconds and optima in
    input order."""
    t0, c0 = time.perf_counter(), time.process_time()
    if how == "list":
        problems = build_list(raw)
    else:
        stacks, order = stacked_groups(raw)
    t1 = time.perf_counter()
    res = lj.solve_batch(problems) if how == "list" else lj.solve_stacked(stacks)
    t2, c2 = time.perf_counter(), time.process_time()
    step = np.asarray(res.step_time_ns, np.float64)
    if how != "list":
        step = step[np.argsort(order)]
    return dict(build=t1 - t0, call=t2 - t1, total=t2 - t0, cpu=c2 - c0,
                compile=res.compile_seconds, ok=sum(s == "ok" for s in res.status), step=step)


def spread(values) -> str:
    return f"{np.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def measure(mix: str, n: int, rounds: int, calls: int = 0) -> dict:
    """A first call of each path (it compiles), then with ``calls`` a `warm_up` of the
    list's problems for that many calls (a long study: the planner weighs compilation over
    them, `batch_plan.program_plan`), then ``rounds`` rounds of both, alternating, each on
    other values."""
    make = MIXES[mix]
    first = {how: run_path(how, make(n, 1)) for how in ("list", "stacked")}
    warm = {"seconds": 0.0, "compile": 0.0, "programs": 0}
    if calls:
        t0 = time.perf_counter()
        w = lj.warm_up(build_list(make(n, 1)), calls=calls)
        warm = {"seconds": time.perf_counter() - t0, "compile": w.compile_seconds,
                "programs": len(w.programs)}
    out = {"list": [], "stacked": []}
    for r in range(rounds):
        raw = make(n, 2 + r)
        for how in (("list", "stacked") if r % 2 == 0 else ("stacked", "list")):
            out[how].append(run_path(how, raw))
    return dict(first=first, rounds=out, warm=warm)


BASELINE = r"""
import json, sys
sys.path.insert(1, {exp!r})
import libra_jax, bench_list_api as b
assert libra_jax.__file__.startswith({lib!r}), libra_jax.__file__
m = b.measure({mix!r}, {n}, {rounds}, {calls})
for x in [*m["first"].values(), *m["rounds"]["list"], *m["rounds"]["stacked"]]:
    x["step"] = [float(v) for v in x["step"]]
print("RESULT " + json.dumps(m))
"""


def baseline(lib: pathlib.Path, mix: str, n: int, rounds: int, calls: int = 0,
             cache: str | None = None) -> dict:
    """`measure` in a fresh process that imports ``libra_jax`` from ``lib`` (a folder holding
    another version of the package, e.g. ``git archive <commit> libra_jax | tar -x -C
    lib``, or this checkout), with its executable store in ``cache`` (a folder of its own:
    none of another run's programs; None: the default folder)."""
    code = BASELINE.format(exp=str(ROOT / "experiments"), lib=str(lib), mix=mix, n=n,
                           rounds=rounds, calls=calls)
    env = dict(os.environ, PYTHONPATH=pythonpath(lib))
    if cache is not None:
        env["LIBRA_JAX_CACHE_DIR"] = cache
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=3600, cwd=str(lib))  # (not the checkout: its libra_jax)
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def rows(mix: str, label: str, m: dict, n: int, loop_rate: float) -> list[str]:
    out = []
    for how in ("list", "stacked"):
        runs, first = m["rounds"][how], m["first"][how]
        rates = [n / x["total"] for x in runs]
        out.append(
            f"| {mix} | {how}{label} | {spread([x['build'] for x in runs])} | "
            f"{spread([x['call'] for x in runs])} | {spread([x['total'] for x in runs])} | "
            f"{spread([x['cpu'] for x in runs])} | "
            f"{np.median(rates):,.0f} | {np.median(rates) / loop_rate:.0f}x "
            f"({min(rates) / loop_rate:.0f}-{max(rates) / loop_rate:.0f}x) | "
            f"{min(x['ok'] for x in runs)}/{n} | {first['total']:.2f} "
            f"(compile {first['compile']:.2f}) | "
            + (f"{m['warm']['seconds']:.1f} ({m['warm']['programs']} programs) |"
               if how == "list" and m.get("warm", {}).get("programs") else " |"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=5, help="warm rounds of both paths")
    ap.add_argument("--loop", type=int, default=200, help="problems of the cvxpy loop")
    ap.add_argument("--mix", choices=sorted(MIXES), action="append",
                    help="mixes to run (default: both)")
    ap.add_argument("--baseline", type=pathlib.Path,
                    help="also measure the libra_jax package in this folder (an earlier "
                         "version), in a fresh process, between the loop's two runs")
    ap.add_argument("--calls", type=int, default=0,
                    help="after the first calls, warm_up(calls=N) for a study of N calls "
                         "(0: none: the planner on its own)")
    ap.add_argument("--store", type=pathlib.Path,
                    help="this checkout's executable store (kept: a later run with the same "
                         "--store finds the programs this one compiled); default: an empty "
                         "folder per process")
    ap.add_argument("--out", type=pathlib.Path,
                    default=ROOT / "experiments" / "results" / "bench_list_api.md")
    args = ap.parse_args(argv)
    command = " ".join(["python experiments/bench_list_api.py"] + (argv or sys.argv[1:]))
    lines = [f"# List API and stacked path vs a cvxpy + Clarabel loop ({platform.node()}, "
             f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}, load "
             f"{os.getloadavg()[0]:.1f} at the start)", "",
             f"`{command}`: warm calls of {args.n:,} problems from raw inputs to "
             "results, medians (and range) of the rounds; the loop's rate from its "
             f"{args.loop} problems, the faster of a run before and one after the rounds.",
             "",
             "Each version and mix runs in a fresh process with an executable store of "
             + ("its own (an empty folder: nothing compiled by another run)"
                if args.store is None else f"`{args.store}` (kept from run to run)")
             + (f"; after the first calls, `warm_up(problems, calls={args.calls})`: its "
                "seconds and the programs it made in the last column." if args.calls
                else "."), "",
             "| mix | path | build s | solve s | total s | CPU s | rate /s | vs loop | ok | "
             "first call s | warm-up s |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for mix in args.mix or ["varied", "coldstart"]:
        loop_raw = MIXES[mix](args.n, 2)[:args.loop]
        cvxpy_loop(loop_raw[:20])  # (cvxpy's first solves: imports, caches)
        loops = [cvxpy_loop(loop_raw)]
        with tempfile.TemporaryDirectory() as c1, tempfile.TemporaryDirectory() as c2:
            old = (None if args.baseline is None
                   else baseline(args.baseline.resolve(), mix, args.n, args.rounds, 0, c1))
            # (in a fresh process too, as the baseline: the programs a process compiled
            # for one mix would otherwise serve the next, padded to their buckets)
            m = baseline(ROOT, mix, args.n, args.rounds, args.calls,
                         c2 if args.store is None else str(args.store.resolve()))
        loops.append(cvxpy_loop(loop_raw))
        # The faster of the loop's two runs (before and after the rounds) sets the bar.
        loop_s, ref = min(loops, key=lambda lr: lr[0])
        loop_rate = len(loop_raw) / loop_s
        a, b = (np.asarray(m["rounds"][how][0]["step"]) for how in ("list", "stacked"))
        same = float(np.max(np.abs(a - b) / b))
        vs_cvxpy = float(np.max(np.abs(a[:len(ref)] - ref) / ref))
        lines.append(f"| {mix} | cvxpy + Clarabel loop | | | {loop_s:.2f} (of "
                     f"{', '.join(f'{x:.2f}' for x, _ in loops)}) | | {loop_rate:.0f} | 1.00x "
                     "| | | |")
        if old is not None:
            lines += rows(mix, " (baseline)", old, args.n, loop_rate)
            before = np.asarray(old["rounds"]["list"][0]["step"])
            notes.append(f"{mix}: the baseline's list optima and these equal to "
                         f"{float(np.max(np.abs(a - before) / before)):.1e} (relative).")
        lines += rows(mix, "", m, args.n, loop_rate)
        notes.append(f"{mix}: list and stacked optima equal to {same:.1e} (relative); the "
                     f"list's optima vs cvxpy on the loop's {len(ref)} problems: {vs_cvxpy:.1e}.")
        print("\n".join(lines[-5:]), flush=True)
    notes.append(f"Load average {os.getloadavg()[0]:.1f} at the end. CPU s: the process's "
                 "CPU time of a round (both kernel threads), which other processes on the "
                 "machine do not inflate as they do the wall times.")
    text = "\n".join(lines + [""] + notes) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
