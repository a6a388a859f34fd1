"""Command line: ``python -m libra_jax.train conf=turing_nlg [key=value ...]``.

Composes the Hydra config (``conf/config.yaml``; schema in :mod:`libra_jax.config`), solves the
bandwidth-allocation problem, compares it with the equal split of the budget, prints a table and
writes ``result.json`` to the Hydra run directory.

Bad input (:class:`~libra_jax.types.LibraInputError`) prints one ``error: ...`` paragraph to
stderr without a traceback, writes ``result.json`` with status "error" and exits non-zero. In a
multirun (``-m``) a failing job is reported and the sweep goes on; the process exits non-zero at
the end if any job failed. Multirun uses Hydra's basic launcher (jobs run in this process, one
after another): JAX must not be forked.
"""

from __future__ import annotations

import pathlib
import sys
import traceback

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from libra_jax import config, multi, report
from libra_jax.problem import build_problem
from libra_jax.solve import equal_split, solve
from libra_jax.types import LibraInputError

#: One entry per failed job of this process ("<run dir>: <message>"); exit status 1 if non-empty.
FAILURES: list[str] = []
_JOBS: list[bool] = []  # one entry per job run; True in a multirun


def _fail(output_dir: pathlib.Path, message: str, cfg: DictConfig) -> None:
    FAILURES.append(f"{output_dir}: {message}")
    multi_run = cfg.get("workloads") is not None
    data = report.error_dict(
        message,
        objective=cfg.get("multi_objective") if multi_run else cfg.get("objective"),
        workload_file=cfg.get("workload", {}).get("file"),
    )
    if multi_run:
        data.update({k: None for k in report.MULTI_EXTRA_KEYS})
    report.write_json(output_dir / "result.json", data)


def run(cfg: DictConfig, output_dir: pathlib.Path) -> dict:
    """Solve one configured problem, print the table, write ``result.json``; return its dict."""
    if cfg.get("workloads") is not None:
        return run_multi(cfg, output_dir)
    network, workload, cost_rates, spec = config.to_inputs(cfg)
    problem = build_problem(network, workload, cost_rates, spec)
    result = solve(problem, objective=cfg.objective, method=cfg.solver.method)
    baseline = equal_split(problem)
    workload_file = config.resolve_path(cfg.workload.file, "workload.file")
    print(report.format_table(result, baseline, network, workload, spec), flush=True)
    data = report.result_dict(result, baseline, network, workload, workload_file)
    report.write_json(output_dir / "result.json", data)
    print(f"result: {output_dir / 'result.json'}", flush=True)
    return data


def run_multi(cfg: DictConfig, output_dir: pathlib.Path) -> dict:
    """A multi-workload run (``workloads=[...]``): solve, print, write ``result.json``."""
    network, entries, weights, cost_rates, spec, objective = config.to_multi_inputs(cfg)
    problems = [build_problem(network, wl, cost_rates, spec) for _, wl, _ in entries]
    result = multi.solve_multi(
        problems, [name for name, _, _ in entries], weights, objective, cost_rates, spec
    )
    print(report.format_multi_table(result, network, spec), flush=True)
    data = report.multi_result_dict(result, network)
    report.write_json(output_dir / "result.json", data)
    print(f"result: {output_dir / 'result.json'}", flush=True)
    return data


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
def main(cfg: DictConfig) -> dict | None:
    """Hydra entry point (one job); returns the result dict, or None if the job failed."""
    hydra_cfg = HydraConfig.get()
    _JOBS.append(hydra_cfg.mode == RunMode.MULTIRUN)
    output_dir = pathlib.Path(hydra_cfg.runtime.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        return run(cfg, output_dir)
    except LibraInputError as e:
        message = " ".join(str(e).split())  # one paragraph
        print(f"error: {message}", file=sys.stderr, flush=True)
        _fail(output_dir, message, cfg)
    except Exception as e:  # noqa: BLE001 -- a bug must not stop the other jobs of a sweep
        traceback.print_exc()
        message = f"internal error ({type(e).__name__}: {e}); please report it with the traceback"
        print(f"error: {message}", file=sys.stderr, flush=True)
        _fail(output_dir, message, cfg)
    return None


def cli() -> None:
    """Run :func:`main`, then exit with status 1 if any job failed (after the whole sweep)."""
    main()
    if FAILURES:
        if any(_JOBS):
            print(f"error: {len(FAILURES)} of {len(_JOBS)} jobs failed:", file=sys.stderr)
            for failure in FAILURES:
                print(f"  {failure}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    cli()
