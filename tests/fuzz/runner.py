"""Fuzzer of libra_jax's inputs (issue 17, "Hostile and malformed input").

The runner: :class:`Runner`, a pool of worker processes that import libra_jax once and run
cases with the time and memory bounds enforced (a worker that dies, times out or grows past
the memory bound is killed and replaced); :func:`run_cli_case`, one ``python -m
libra_jax.train conf=turing_nlg ...`` run; and :func:`main`, the held-out run (the package
docstring says how to start it)::

    python -m tests.fuzz --seed 7 --cases 5000 --cli-cases 40 --out /tmp/fuzz
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pathlib
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

from .common import (
    CLI_TIME_LIMIT_S,
    KINDS,
    LINEAR_SEEDS,
    MEM_LIMIT_MB,
    OK_OUTCOMES,
    SOLVE_HARD_S,
    TIME_LIMIT_S,
    WALL_SLACK,
    _cpu_s,
    _rss_kb,
)
from .generators import FAMILIES, make_case, make_cli_case
from .oracle import _Context, context, run_case
from .report import failure_causes, summarize, write_reproducer


def _worker_main(conn, stage_id, stage_t, cache_dir: str | None, warm: bool,
                 as_margin_mb: float, preload: bool = True) -> None:
    """A worker: imports libra_jax once (``preload``: before its first case), warms JAX's
    compiled programs up (``warm``), then runs cases from ``conn`` until it receives
    None."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        if preload or warm:
            import jax  # noqa: PLC0415

            jax.config.update("jax_enable_x64", True)  # as the CLIs and the test suite do
            if cache_dir:
                from libra_jax.cli.runtime import enable_compilation_cache  # noqa: PLC0415

                enable_compilation_cache(cache_dir)
            ctx = context()
            if warm:
                _warm_up(ctx)
        if as_margin_mb > 0:
            vm = _rss_kb(field="VmSize") * 1024
            limit = int(vm + as_margin_mb * 2**20)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except BaseException as e:  # noqa: BLE001
        conn.send(("failed", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    conn.send(("ready", _rss_kb()))

    def stage(n):
        stage_t.value = time.time()
        stage_id.value = n

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        case, solve = msg
        res = run_case(case, solve=solve, stage=stage)
        conn.send(("done", res))


def _warm_up(ctx: _Context) -> None:
    """Compiles (or loads from the persistent cache) the programs most cases use."""
    lj = ctx.lj
    for net, wl, rates, spec in (
        (ctx.net3d, ctx.wl3d, ctx.rates3d, lj.ConstraintSpec(total_bw_gbps=500.0)),
        (ctx.net4d, ctx.wl4d, ctx.rates4d,
         lj.ConstraintSpec(total_bw_gbps=1000.0, linear=list(LINEAR_SEEDS[0]))),
        (ctx.net3d, ctx.wl3d, ctx.rates3d,
         lj.ConstraintSpec(total_bw_gbps=800.0, total_bw_mode="le", max_cost_usd=2e7)),
    ):
        with contextlib.suppress(Exception):
            p = lj.build_problem(net, wl, rates, spec)
            lj.solve(p)
            lj.solve(p, "perf_per_cost")


class _Worker:
    def __init__(self, mp_ctx, cache_dir, warm, as_margin_mb, preload=True):
        self.stage_id = mp_ctx.Value("i", 0, lock=False)
        self.stage_t = mp_ctx.Value("d", 0.0, lock=False)
        self.conn, child = mp_ctx.Pipe()
        self.proc = mp_ctx.Process(
            target=_worker_main, daemon=True,
            args=(child, self.stage_id, self.stage_t, cache_dir, warm, as_margin_mb,
                  preload))
        self.proc.start()
        child.close()
        self.started = time.time()
        self.ready = False
        self.case: int | None = None
        self.t0 = 0.0
        self.rss0 = 0
        self.peak_kb = 0
        self.cpu0 = 0.0

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join(5)
        with contextlib.suppress(Exception):
            self.conn.close()


class Runner:
    """A pool of worker processes (``spawn``: JAX must not be forked) that each import
    libra_jax once and run cases with :func:`run_case`, enforcing the bounds: a case whose
    load / build stage passes ``time_limit_s`` of CPU time (or ``WALL_SLACK`` times that
    of wall time), whose solve stage passes ``solve_hard_s``
    (its time net of compilation is checked against ``time_limit_s`` by the worker), or
    whose worker's RSS grows ``mem_limit_mb`` over its RSS before the case, is killed
    (``timeout`` / ``memory``) and its worker replaced; a worker that dies gives
    ``worker-died``. The RSS is watched every ``poll_s``; the worker's address space is
    also capped at its size after warm-up + ``as_margin_mb`` (a backstop against an
    allocation faster than the watcher)."""

    def __init__(self, workers: int = 2, *, time_limit_s: float = TIME_LIMIT_S,
                 mem_limit_mb: float = MEM_LIMIT_MB, solve_hard_s: float = SOLVE_HARD_S,
                 cache_dir: str | None = "~/.cache/libra_jax/jax", warm: bool = True,
                 as_margin_mb: float = 6144, poll_s: float = 0.02,
                 ready_timeout_s: float = 600.0, preload: bool = True):
        self.n = workers
        self.time_limit_s = time_limit_s
        self.mem_limit_kb = mem_limit_mb * 1024
        self.solve_hard_s = solve_hard_s
        self.cache_dir = cache_dir
        self.warm = warm
        self.as_margin_mb = as_margin_mb
        self.poll_s = poll_s
        self.ready_timeout_s = ready_timeout_s
        self.preload = preload
        self.restarts = 0
        self._ctx = mp.get_context("spawn")
        self._workers = [self._start() for _ in range(workers)]

    def _start(self) -> _Worker:
        # The spawned child imports this module by name: ``fuzz.runner`` under pytest (which
        # puts tests/ on sys.path), ``tests.fuzz.runner`` from the repository root; the
        # folder that name is found from goes on sys.path, which the child inherits.
        top = str(pathlib.Path(__file__).resolve().parents[__name__.count(".")])
        if top not in sys.path:
            sys.path.insert(0, top)
        return _Worker(self._ctx, self.cache_dir, self.warm, self.as_margin_mb,
                       self.preload)

    def close(self) -> None:
        for w in self._workers:
            with contextlib.suppress(Exception):
                w.conn.send(None)
        for w in self._workers:
            w.proc.join(5)
            if w.proc.is_alive():
                w.kill()
            with contextlib.suppress(Exception):
                w.conn.close()
        self._workers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, case: dict, solve: bool = True) -> dict:
        """One case (blocking)."""
        return self.run_many([case], solve=solve)[0]

    def _replace(self, k: int) -> None:
        self._workers[k].kill()
        self.restarts += 1
        self._workers[k] = self._start()

    def run_many(self, cases: list[dict], solve: bool = True, progress=None) -> list[dict]:
        """Runs ``cases`` on the pool; results in input order. ``progress(done, total)``
        is called after each case."""
        results: list[dict | None] = [None] * len(cases)
        todo = collections.deque(range(len(cases)))
        done = 0
        while todo or any(w.case is not None for w in self._workers):
            for w in self._workers:  # dispatch to the idle, started workers
                if w.ready and w.case is None and todo and w.proc.is_alive():
                    i = todo.popleft()
                    w.case, w.t0 = i, time.time()
                    w.stage_id.value, w.stage_t.value = 1, w.t0
                    w.rss0 = w.peak_kb = _rss_kb(w.proc.pid)
                    w.cpu0 = _cpu_s(w.proc.pid)
                    try:
                        w.conn.send((cases[i], solve))
                    except (BrokenPipeError, OSError):
                        pass  # seen below as a dead worker
            watch = [w for w in self._workers if w.case is not None or not w.ready]
            ready = mpc.wait([w.conn for w in watch] + [w.proc.sentinel for w in watch],
                             timeout=self.poll_s)
            now = time.time()
            for k, w in enumerate(list(self._workers)):
                if not w.ready:  # starting: "ready", "failed", or still warming up
                    if w.conn in ready:
                        try:
                            kind, info = w.conn.recv()
                        except (EOFError, OSError):
                            kind, info = "failed", "worker exited while starting"
                        if kind != "ready":
                            self.close()
                            raise RuntimeError(f"fuzz worker failed to start: {info}")
                        w.ready = True
                    elif now - w.started > self.ready_timeout_s or not w.proc.is_alive():
                        self.close()
                        raise RuntimeError("fuzz worker did not start")
                    continue
                if w.case is None:
                    if not w.proc.is_alive():
                        self._replace(k)
                    continue
                i = w.case
                res = None
                if w.conn in ready:
                    try:
                        _, res = w.conn.recv()
                    except (EOFError, OSError):
                        res = None
                if res is None:
                    rss = _rss_kb(w.proc.pid)
                    w.peak_kb = max(w.peak_kb, rss)
                    stage = w.stage_id.value
                    in_stage = now - w.stage_t.value
                    why = None
                    if rss - w.rss0 > self.mem_limit_kb:
                        why = ("memory", f"RSS grew {(rss - w.rss0) / 1024:.0f} MB "
                                         f"(stage {_STAGES.get(stage, stage)})")
                    elif stage in (1, 2) and (
                            in_stage > self.time_limit_s * WALL_SLACK
                            or _cpu_s(w.proc.pid) - w.cpu0 > self.time_limit_s):
                        why = ("timeout", f"killed in stage {_STAGES[stage]} after "
                                          f"{_cpu_s(w.proc.pid) - w.cpu0:.1f} s CPU, "
                                          f"{now - w.t0:.1f} s wall")
                    elif stage == 3 and in_stage > self.solve_hard_s:
                        why = ("timeout", f"solve over {self.solve_hard_s:.0f} s")
                    elif not w.proc.is_alive():
                        code = w.proc.exitcode
                        why = ("worker-died", f"worker exit code {code}"
                               + (f" ({signal.Signals(-code).name})"
                                  if code is not None and code < 0 else ""))
                    if why is None:
                        continue
                    res = _killed_result(cases[i], why, now - w.t0, stage,
                                         (w.peak_kb - w.rss0) / 1024)
                    self._replace(k)
                else:
                    w.case = None
                res["wall_s"] = now - w.t0
                results[i] = res
                done += 1
                if progress:
                    progress(done, len(cases))
        return results  # type: ignore[return-value]


_STAGES = {0: "idle", 1: "load", 2: "build", 3: "solve"}


def _killed_result(case, why, seconds, stage, peak_mb) -> dict:
    outcome, message = why
    return {"id": case.get("id"), "kind": case["kind"], "family": case["family"],
            "loader": case.get("loader") or KINDS[case["kind"]][0],
            "stage": _STAGES.get(stage, str(stage)), "outcome": outcome, "exc_type": None,
            "message": message, "seconds": seconds, "compile_s": None, "peak_mb": peak_mb}


# ----------------------------------------------------------------- command-line cases

def run_cli_case(case: dict, *, python: str = sys.executable,
                 time_limit_s: float = CLI_TIME_LIMIT_S, mem_limit_mb: float | None = None,
                 base_rss_mb: float = 0.0) -> dict:
    """Runs ``python -m libra_jax.train conf=turing_nlg <overrides>`` in a temporary
    directory and classifies it: ``accepted`` (exit 0), ``rejected`` (exit != 0, an
    ``error:`` line, no traceback), ``traceback`` (``Traceback`` or ``internal error`` on
    stderr), ``no-error-line``, ``silent-accept``, ``timeout``, ``memory`` (peak RSS over
    ``base_rss_mb`` + ``mem_limit_mb``)."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="fuzzcli-"))
    try:
        for name, data in case["files"].items():
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogatepass")
            (tmp / name).write_bytes(data.replace(b"@SENTINEL@", str(tmp / "PWNED").encode()))
        ov = [o.replace("@DIR@", str(tmp)) for o in case["overrides"]]
        cmd = [python, "-m", "libra_jax.train", "conf=turing_nlg",
               f"hydra.run.dir={tmp / 'run'}", *ov]
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        env.pop("PYTHONWARNINGS", None)
        env.pop("HYDRA_FULL_ERROR", None)
        t0 = time.time()
        with open(tmp / "stdout", "wb") as so, open(tmp / "stderr", "wb") as se:
            proc = subprocess.Popen(cmd, cwd=tmp, stdout=so, stderr=se, env=env,
                                    start_new_session=True)
            peak = 0
            outcome = None
            while proc.poll() is None:
                peak = max(peak, _rss_kb(proc.pid))
                if time.time() - t0 > time_limit_s:
                    outcome = "timeout"
                elif mem_limit_mb and peak / 1024 > base_rss_mb + mem_limit_mb:
                    outcome = "memory"
                if outcome:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                time.sleep(0.05)
        wall = time.time() - t0
        stderr = (tmp / "stderr").read_text("utf-8", "replace")
        stdout = (tmp / "stdout").read_text("utf-8", "replace")
        code = proc.returncode
        error_lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
        tb = "Traceback" in stderr or "internal error" in stderr
        if outcome is None:
            if tb:
                outcome = "traceback"
            elif code == 0:
                outcome = "silent-accept" if case.get("expect") else "accepted"
            elif error_lines:
                outcome = "rejected"
            else:
                outcome = "no-error-line"
        if (tmp / "PWNED").exists():
            outcome = "code-exec"
        return {"id": case["id"], "kind": case["kind"], "family": case["family"],
                "detail": case.get("detail"), "outcome": outcome, "exit_code": code,
                "error_line": error_lines[0][:300] if error_lines else None,
                "traceback": tb, "stderr_tail": stderr[-1500:], "stdout_tail": stdout[-300:],
                "seconds": wall, "peak_mb": peak / 1024, "loader": "libra-train",
                "exc_type": None,
                "message": (error_lines[0][:300] if error_lines else stderr.strip()[-300:])}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_cli_cases(cases: list[dict], jobs: int = 2, progress=None, **kw) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    results = [None] * len(cases)
    with ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(run_cli_case, c, **kw): i for i, c in enumerate(cases)}
        done = 0
        for f in futs:
            results[futs[f]] = f.result()
            done += 1
            if progress:
                progress(done, len(cases))
    return results  # type: ignore[return-value]


# ------------------------------------------------------------------------------- main

def _progress(label: str, every: int):
    t0 = time.time()

    def report(done, total):
        if done % every == 0 or done == total:
            el = time.time() - t0
            print(f"  {label}: {done}/{total} cases, {el:.0f} s", file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1, help="run seed (cases are deterministic "
                    "in seed and index)")
    ap.add_argument("--cases", type=int, default=5000, help="in-process cases")
    ap.add_argument("--cli-cases", type=int, default=40, help="libra-train cases")
    ap.add_argument("--out", type=pathlib.Path,
                    default=pathlib.Path(tempfile.gettempdir()) / "libra_jax_fuzz",
                    help="report.json, summary.txt and repro/ go here")
    ap.add_argument("--workers", type=int, default=2, help="worker processes")
    ap.add_argument("--cli-jobs", type=int, default=2, help="CLI runs at once")
    ap.add_argument("--no-solve", action="store_true",
                    help="load and build_problem only (no solve of accepted inputs)")
    ap.add_argument("--family", action="append", help="only these families")
    ap.add_argument("--kind", action="append", help="only these kinds")
    ap.add_argument("--cache-dir", default="~/.cache/libra_jax/jax",
                    help="JAX's persistent compilation cache ('' for none)")
    args = ap.parse_args(argv)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    cases = []
    i = 0
    while len(cases) < args.cases:
        fam = None if not args.family else args.family[i % len(args.family)]
        kind = None if not args.kind else args.kind[i % len(args.kind)]
        if fam and kind and kind not in FAMILIES[fam][1]:
            i += 1
            continue
        cases.append(make_case(args.seed, i, family=fam, kind=kind))
        i += 1
    print(f"{len(cases)} in-process cases (seed {args.seed}) on {args.workers} workers",
          file=sys.stderr)
    results: list[dict] = []
    if cases:
        with Runner(args.workers, cache_dir=args.cache_dir or None) as runner:
            t0 = time.time()
            results = runner.run_many(cases, solve=not args.no_solve,
                                      progress=_progress("in-process", 250))
            restarts = runner.restarts
        t_cases = time.time() - t0
    else:
        t_cases, restarts = 0.0, 0
    for c, r in zip(cases, results):
        r["detail"] = c.get("detail", "")
        r["expect"] = c.get("expect")
    cli_cases = [make_cli_case(args.seed, k) for k in range(args.cli_cases)]
    cli_results: list[dict] = []
    base_rss = 0.0
    t_cli = 0.0
    if cli_cases:
        print(f"{len(cli_cases)} CLI cases, {args.cli_jobs} at once", file=sys.stderr)
        t0 = time.time()
        ref = run_cli_case({"id": "cli-reference", "kind": "none", "family": "none",
                            "files": {}, "overrides": []})
        base_rss = ref["peak_mb"]
        if ref["outcome"] != "accepted":
            print(f"warning: the unmutated CLI run gave {ref['outcome']}: "
                  f"{ref['stderr_tail'][-500:]}", file=sys.stderr)
        cli_results = run_cli_cases(cli_cases, jobs=args.cli_jobs,
                                    progress=_progress("CLI", 10), mem_limit_mb=MEM_LIMIT_MB,
                                    base_rss_mb=base_rss)
        t_cli = time.time() - t0

    repro = out / "repro"
    if repro.exists():
        shutil.rmtree(repro)
    n_repro = 0
    for c, r in list(zip(cases, results)) + list(zip(cli_cases, cli_results)):
        if r["outcome"] not in OK_OUTCOMES:
            write_reproducer(c, r, repro)
            n_repro += 1

    table = summarize(results, f"In-process: {len(results)} cases, seed {args.seed}, "
                               f"{t_cases:.0f} s, {restarts} worker restarts")
    cli_table = summarize(cli_results, f"CLI (libra-train conf=turing_nlg): {len(cli_results)} "
                                       f"cases, {t_cli:.0f} s, reference run "
                                       f"{base_rss:.0f} MB peak")
    if results:
        print(table)
        print()
    if cli_results:
        print(cli_table)
    slow = sorted(results, key=lambda r: -(r.get("seconds") or 0))[:5]
    print("\nslowest in-process cases: " + ", ".join(
        f"{r['id']} {r['kind']}/{r['family']} {r.get('seconds') or 0:.2f} s "
        f"({r['outcome']})" for r in slow))
    big = sorted(results, key=lambda r: -(r.get("peak_mb") or 0))[:3]
    print("largest peak RSS growth: " + ", ".join(
        f"{r['id']} {r['kind']}/{r['family']} +{r.get('peak_mb') or 0:.0f} MB" for r in big))
    report = {
        "seed": args.seed, "cases": len(results), "cli_cases": len(cli_results),
        "limits": {"time_s": TIME_LIMIT_S, "mem_mb": MEM_LIMIT_MB,
                   "solve_hard_s": SOLVE_HARD_S, "cli_time_s": CLI_TIME_LIMIT_S},
        "seconds": {"in_process": t_cases, "cli": t_cli, "total": time.time() - t_start},
        "worker_restarts": restarts, "cli_reference_peak_mb": base_rss,
        "table": collections.Counter(f"{r['family']}/{r['outcome']}" for r in results),
        "cli_table": collections.Counter(f"{r['family']}/{r['outcome']}" for r in cli_results),
        "causes": [{"signature": c["signature"], "count": c["count"], "example": c["example"]}
                   for c in failure_causes(results)],
        "cli_causes": [{"signature": c["signature"], "count": c["count"],
                        "example": c["example"]} for c in failure_causes(cli_results)],
        "results": results, "cli_results": cli_results,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1, default=repr) + "\n")
    (out / "summary.txt").write_text(table + "\n\n" + cli_table + "\n")
    print(f"\nwrote {out / 'report.json'}, {n_repro} reproducers in {repro}", file=sys.stderr)
    failures = sum(r["outcome"] not in OK_OUTCOMES for r in results + cli_results)
    return 1 if failures else 0
