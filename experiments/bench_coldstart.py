"""Cold start: what a new user of the Python API and of the commands waits for, side by side
with a cvxpy + Clarabel loop over the same problems (issue 20).

    python experiments/bench_coldstart.py [--n 200] [--big 10000] [--study 100] [--out FILE]

Every measurement runs in a fresh Python process (`subprocess`), so nothing is compiled or
imported before it starts, with ``LIBRA_JAX_CACHE_DIR`` pointing at a new, empty folder
("cold") or at the folder a previous process filled ("cached"):

* api_first: build ``--n`` random bounded problems (D 2-5, K 1-8 phases, per-dimension lower
  and upper bounds, a total budget, sum == or <=) one by one with `problem_from_arrays`, then
  one `solve_batch` call; timed from after ``import libra_jax`` (build, call) and as a whole
  process;
* api_big: the same in a fresh process for ``--big`` problems, then a second call with other
  values and another count (``--big`` + 1,234), "warm", then `warm_up(calls=--study)` (a long
  study: the planner weighs compilation over that many calls) and a third call, "study";
  once built one by one (the list
  API: `problem_from_arrays` checks each problem and `solve_batch` builds them together),
  once by the documented stacked path (`stacked_groups`, `solve_stacked`);
* cli: ``python -m libra_jax.train conf=turing_nlg`` as a whole process, with an empty
  cache folder and again with the folder it filled, against ``python -c "import jax,
  hydra"``, alternating, ``--cli-repeats`` times each; the medians are compared;
* loop: cvxpy + Clarabel over the same ``--n`` problems, one after another (the reference
  solver a user would otherwise write), in this process (phase times bounded below by 0:
  without it a phase that moves nothing left the problem unbounded, -inf).

Each solve_batch result is checked: every status ``ok`` and, on the first ``--check``
problems, within 1e-6 of the loop's optimum. Writes a markdown table to
experiments/results/bench_coldstart.md (or --out).
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

ROOT = pathlib.Path(__file__).resolve().parents[1]


def random_problems(seed: int, n: int, scale: float = 1.0) -> list[dict]:
    """Raw inputs of n random bounded problems (plain Python / numpy, no libra_jax)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        d = int(rng.integers(2, 6))
        k = int(rng.integers(1, 9))
        traffic = 10.0 ** rng.uniform(-2, 1, (k, d)) * (rng.random((k, d)) < 0.7)
        traffic[0] = np.maximum(traffic[0], 1e-2)  # every dimension carries something
        weight = rng.integers(1, 50, k).astype(float)
        total = float(rng.uniform(100, 1000))
        lo = total / d * rng.uniform(0.0, 0.3, d)
        hi = total * rng.uniform(0.4, 1.0, d)
        hi = np.maximum(hi, lo + 1.0)
        hi *= max(1.0, 1.2 * total / hi.sum())
        mode = "eq" if rng.random() < 0.5 else "le"
        out.append(dict(traffic_gb=(traffic * scale).tolist(), weight=weight.tolist(),
                        compute_s=float(rng.uniform(0.01, 1.0)) * scale, total=total,
                        mode=mode, lo=lo.tolist(), hi=hi.tolist()))
    return out


def build_problems(raw: list[dict]) -> list:
    """The problems of `random_problems`, built one by one as a user of the list API would
    (`problem_from_arrays` per problem)."""
    import numpy as np  # noqa: PLC0415  (the worker imports libra_jax itself, timed)

    from libra_jax.model.problem import ConstraintSpec, problem_from_arrays  # noqa: PLC0415

    return [problem_from_arrays(np.asarray(r["traffic_gb"]), np.asarray(r["weight"]),
                                r["compute_s"], None,
                                ConstraintSpec(total_bw_gbps=r["total"], total_bw_mode=r["mode"],
                                               lower_gbps=r["lo"], upper_gbps=r["hi"]))
            for r in raw]


def stacked_groups(raw: list[dict]):
    """The documented stacked path for a list of mixed sizes (README "Python API"): one
    stacked problem per (D, total mode, cost model) group, phases padded with zero traffic
    and weight, built by `problems_from_stacked`; returns (stacks, the input index of each
    stacked row). A raw problem may carry ``rates`` (cost rates per dim) and ``budget`` (a
    cost budget, or None)."""
    from libra_jax.model.problem import problems_from_stacked  # noqa: PLC0415

    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(raw):
        key = (len(r["lo"]), r["mode"], r.get("rates") is not None,
               r.get("budget") is not None)
        groups.setdefault(key, []).append(i)
    stacks, order = [], []
    for (d, mode, priced, budgeted), idx in groups.items():
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
            upper_gbps=np.array([raw[i]["hi"] for i in idx]),
            cost_rates_usd_per_gbps=(np.array([raw[i]["rates"] for i in idx]) if priced
                                     else None),
            max_cost_usd=np.array([raw[i]["budget"] for i in idx]) if budgeted else None))
        order += idx
    return stacks, np.asarray(order)


WORKER = r"""
import json, sys, time
t_start = time.perf_counter()
import numpy as np
import libra_jax as lj
sys.path.insert(0, {root!r} + "/experiments")
from bench_coldstart import build_problems, random_problems, stacked_groups
t_import = time.perf_counter()
out = {{"import_s": t_import - t_start}}
for tag, seed, n, scale, how in {calls!r}:
    raw = random_problems(seed, n, scale)
    if how.startswith("warm_up"):  # "warm_up:<calls>": a study of that many calls ahead
        t0 = time.perf_counter()
        w = lj.warm_up(build_problems(raw), calls=int(how.split(":")[1]))
        out[tag] = dict(n=n, seconds=time.perf_counter() - t0, compile_s=w.compile_seconds,
                        programs=len(w.programs))
        continue
    t0 = time.perf_counter()
    if how == "stacked":
        stacks, order = stacked_groups(raw)
    else:
        ps = build_problems(raw)
    t1 = time.perf_counter()
    res = lj.solve_stacked(stacks) if how == "stacked" else lj.solve_batch(ps)
    t2 = time.perf_counter()
    step = np.asarray(res.step_time_ns)
    if how == "stacked":
        step = step[np.argsort(order)]
    out[tag] = dict(n=n, build_s=t1 - t0, call_s=t2 - t1, compile_s=res.compile_seconds,
                    solve_s=res.solve_seconds, ok=sum(s == "ok" for s in res.status),
                    max_gap=float(np.max(res.optimality_gap)),
                    step_ns=[float(x) for x in step[:{check}]])
out["process_s"] = time.perf_counter() - t_start
print("RESULT " + json.dumps(out))
"""


def pythonpath(first=ROOT) -> str:
    """A child process's PYTHONPATH: ``first`` (the repository, or a folder holding another
    version of the package), then the caller's (packages carried beside an install, as on
    the device machines)."""
    return os.pathsep.join(x for x in (str(first), os.environ.get("PYTHONPATH", "")) if x)


def run_worker(calls, cache: str, check: int) -> tuple[dict, float]:
    code = WORKER.format(root=str(ROOT), calls=calls, check=check)
    env = dict(os.environ, LIBRA_JAX_CACHE_DIR=cache, PYTHONPATH=pythonpath())
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=3600)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):]), wall


def timed_process(args, cache: str | None = None) -> float:
    env = dict(os.environ, PYTHONPATH=pythonpath())
    if cache is not None:
        env["LIBRA_JAX_CACHE_DIR"] = cache
    t0 = time.perf_counter()
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=3600,
                       cwd=tempfile.gettempdir())
    if p.returncode != 0:
        raise RuntimeError(p.stderr[-3000:])
    return time.perf_counter() - t0


def cvxpy_loop(raw: list[dict]) -> tuple[float, np.ndarray]:
    """Seconds for a plain cvxpy + Clarabel loop over the problems, and their optima (ns).
    A problem is a dict of ``traffic_gb`` [K, D], ``weight`` [K], ``compute_s``, ``lo`` /
    ``hi`` [D] (``hi`` may be inf), ``total`` and ``mode`` (eq / le), and optionally
    ``rates`` [D] with a ``budget`` ($; None: no budget). Also `bench_list_api`'s loop."""
    import cvxpy as cp

    t0 = time.perf_counter()
    values = []
    for r in raw:
        t = np.asarray(r["traffic_gb"])
        w = np.asarray(r["weight"])
        k, d = t.shape
        x = cp.Variable(d)
        tau = cp.Variable(k)
        hi = np.asarray(r["hi"])
        cons = [x >= np.asarray(r["lo"])]
        if np.isfinite(hi).any():
            fin = np.flatnonzero(np.isfinite(hi))
            cons.append(x[fin] <= hi[fin])
        cons.append(cp.sum(x) == r["total"] if r["mode"] == "eq" else cp.sum(x) <= r["total"])
        if r.get("budget") is not None:
            cons.append(np.asarray(r["rates"]) @ x <= r["budget"])
        rows, cols = np.nonzero((t > 0) & (w[:, None] > 0))
        cons.append(tau[rows] >= cp.multiply(t[rows, cols], cp.inv_pos(x[cols])))
        cons.append(tau >= 0)  # (a phase without traffic takes no time)
        prob = cp.Problem(cp.Minimize(w @ tau), cons)
        prob.solve(solver=cp.CLARABEL)
        values.append((r["compute_s"] + prob.value) * 1e9)
    return time.perf_counter() - t0, np.asarray(values)


def calibrate(n: int = 2048) -> str:
    """The measurements behind `batch.TIERS`' cost model, in this process: ``n`` random
    problems padded to bucket (8, 8, 1, 1, 0, 0), each tier at each chunk size: the first
    call (tracing, lowering, compiling, one chunk) and the seconds per problem after."""
    import jax  # noqa: PLC0415

    from libra_jax.solvers import batch, compilation, ipm  # noqa: PLC0415
    from libra_jax.types import float64  # noqa: PLC0415

    compilation.enable_compilation_cache(None)  # compile every program here
    shape = (8, 8, 1, 1, 0, 0)
    groups: dict = {}
    for q in build_problems(random_problems(0, n)):
        groups.setdefault(batch.problem_sizes(q), []).append(q)
    bucket = batch.pad_concat([batch.stack(g) for g in groups.values()], shape)
    cap, on = np.zeros(n), np.zeros(n, bool)
    lines = ["| tier | chunk | first call (trace, lower, compile, 1 chunk) | us per problem |",
             "|---|---|---|---|"]

    @float64
    def run(part, c, o, plan, tier):
        return batch.run_bucket(part, c, o, dtype=np.float64, plan=plan,
                                devices=jax.local_devices()[:1], config=ipm.IpmConfig(),
                                tier=tier)

    for tier in batch.TIERS:
        for size in (16, 256, 1024):
            t0 = time.perf_counter()
            run(batch.take(bucket, np.arange(size)), cap[:size], on[:size], [size], tier)
            first = time.perf_counter() - t0
            t0 = time.perf_counter()
            run(bucket, cap, on, [size] * (n // size), tier)
            per = (time.perf_counter() - t0) / n
            lines.append(f"| {tier} | {size} | {first:.2f} s | {per * 1e6:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calibrate", action="store_true",
                    help="only measure the cost model of batch.TIERS and print it")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--big", type=int, default=10000)
    ap.add_argument("--check", type=int, default=200, help="problems checked against cvxpy")
    ap.add_argument("--study", type=int, default=100,
                    help="the calls a long study's warm_up plans for (the last list and "
                         "stacked rows)")
    ap.add_argument("--cli-repeats", type=int, default=9,
                    help="command runs each way (cold, cached), with the import between")
    ap.add_argument("--out", type=pathlib.Path,
                    default=ROOT / "experiments" / "results" / "bench_coldstart.md")
    args = ap.parse_args(argv)
    if args.calibrate:
        print(calibrate())
        return 0
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="libra_coldstart_"))
    cold = str(tmp / "cache")
    rows = []

    raw = random_problems(1, args.n)
    loop_s, ref = cvxpy_loop(raw)
    loop_rate = args.n / loop_s
    rows.append(("cvxpy + Clarabel loop", f"{args.n}", f"{loop_s:.2f} s", "", "", "1.00x",
                 f"{loop_rate:,.0f}/s"))

    check = min(args.check, args.n)
    for tag, cache in (("api first call, empty cache", cold),
                       ("api first call, cache warm (2nd process)", cold),
                       ("api first call, cache off", "")):
        out, wall = run_worker([("first", 1, args.n, 1.0, "list")], cache, check)
        f = out["first"]
        err = max(abs(a - b) / b for a, b in zip(f["step_ns"], ref[:check]))
        call = f["build_s"] + f["call_s"]
        rows.append((tag, f"{args.n}", f"{call:.2f} s (build {f['build_s']:.2f}, compile "
                     f"{f['compile_s']:.2f}, solve {f['solve_s']:.2f})",
                     f"{wall:.1f} s", f"ok {f['ok']}/{args.n}, gap <= {f['max_gap']:.1e}, "
                     f"vs cvxpy <= {err:.1e}", f"{call / loop_s:.2f}x",
                     f"{args.n / call:,.1f}/s"))

    for how in ("list", "stacked"):
        out, wall = run_worker([("big", 2, args.big, 3.0, how),
                                ("again", 3, args.big + 1234, 0.5, how),
                                ("warm", 2, args.big, 3.0, f"warm_up:{args.study}"),
                                ("study", 4, args.big + 1234, 0.5, how)],
                               str(tmp / f"cache_big_{how}"), 0)
        w = out["warm"]
        for tag, key in ((f"api {how}, fresh process, 1st call (empty cache)", "big"),
                         (f"api {how}, same process, 2nd call (other values and count)",
                          "again"),
                         (f"api {how}, same process, after warm_up(calls={args.study}) "
                          f"({w['seconds']:.1f} s, {w['programs']} programs)", "study")):
            f = out[key]
            call = f["build_s"] + f["call_s"]
            rate = f["n"] / call
            rows.append((tag, f"{f['n']:,}", f"{call:.2f} s (build {f['build_s']:.2f}, "
                         f"compile {f['compile_s']:.2f}, solve {f['solve_s']:.2f})",
                         f"{wall:.1f} s" if key == "big" else "",
                         f"ok {f['ok']}/{f['n']}, gap <= {f['max_gap']:.1e}", "",
                         f"{rate:,.1f}/s = {rate / loop_rate:.2f}x the loop"))

    # The command, --cli-repeats times each way, alternating with the import it is compared with
    # (medians: one process takes 2-4 s and the machine's noise is of the same order).
    imports, colds, cacheds = [], [], []
    for i in range(args.cli_repeats):
        cli_cache = str(tmp / f"cache_cli_{i}")
        train = [sys.executable, "-m", "libra_jax.train", "conf=turing_nlg",
                 f"hydra.run.dir={tmp / 'run'}", f"compilation_cache_dir={cli_cache}"]
        imports.append(timed_process([sys.executable, "-c", "import jax, hydra"]))
        colds.append(timed_process(train))
        cacheds.append(timed_process(train))
    base, cli_cold, cli_warm = (float(np.median(x)) for x in (imports, colds, cacheds))

    def spread(values):
        return f"{float(np.median(values)):.2f} s (of {', '.join(f'{v:.2f}' for v in values)})"

    rows.append(('python -c "import jax, hydra"', "", "", spread(imports), "", "", ""))
    rows.append(("libra-train conf=turing_nlg, empty cache", "", "", spread(colds), "",
                 f"{cli_cold / base:.2f}x import", ""))
    rows.append(("libra-train conf=turing_nlg, cached", "", "", spread(cacheds), "",
                 f"{cli_warm / base:.2f}x import", ""))

    head = ("what", "problems", "build + call (after import)", "whole process", "results",
            "vs loop / import", "rate")
    import jax
    dev = jax.local_devices()[0]
    lines = [f"# Cold start ({platform.node()}, {os.cpu_count()} cores, "
             f"{time.strftime('%Y-%m-%d %H:%M')})", "",
             f"Device: {dev.platform} ({dev.device_kind}), jax {jax.__version__}.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
