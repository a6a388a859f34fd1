"""Command line: ``libra-train conf=turing_nlg [key=value ...]`` (or ``python -m libra_jax.train``).

Composes the Hydra config (``conf/config.yaml``; schema in :mod:`libra_jax.cli.config`), solves the
bandwidth-allocation problem (one workload, several sharing a network, or the mapping co-search:
:mod:`libra_jax.cli.jobs`), compares it with the equal split of the budget, prints a table and
writes ``result.json`` to the Hydra run directory; status and result summary go to the log
(``<run dir>/train.log``). :func:`main` returns the objective value, so a sweeper plugin (e.g.
``hydra/sweeper=optuna``) can minimise it.

Bad input (:class:`~libra_jax.types.LibraInputError`) logs one ``error: ...`` paragraph to
stderr without a traceback, writes ``result.json`` with status "error" and exits non-zero. In a
multirun (``-m``) a failing job is reported and the sweep goes on; the process exits non-zero at
the end if any job failed. Multirun uses Hydra's basic launcher (jobs run in this process, one
after another): JAX must not be forked.
"""

from __future__ import annotations

import logging
import pathlib

import hydra
from omegaconf import DictConfig

from libra_jax.cli import config, jobs, report, runtime, tables
from libra_jax.studies.job import train as study
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.export import export_astrasim
from libra_jax.studies.job.inputs import serving_requested
from libra_jax.types import float64

log = logging.getLogger(__name__)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
@float64
def main(cfg: DictConfig) -> float:
    """Hydra entry point (one job): the objective value (step time in ns for ``perf``, step
    time x network cost in ns*$ for ``perf_per_cost``, the multi objective's value for
    ``workloads=...``); +inf if the job failed."""
    return runtime.run_job(cfg, train)


def train(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """One job: a runtime run (a runtime other than ASTRA-sim's default, or
    ``runtime=search``, on one workload: `train_runtime`), else `jobs.train`."""
    if (c.workload.chakra_et is None and c.workloads is None and not c.cosearch.enabled
            and not serving_requested(c) and study.runtime_requested(c)):
        return train_runtime(c, output_dir)
    return jobs.train(c, output_dir)


def train_runtime(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """A runtime run (`study.run_runtime`): its table, ``result.json`` (the chosen runtime,
    the table of ``runtime=search``, the certified gap), the ASTRA-sim files of the chosen
    runtime with ``export_astrasim=true``; returns the simulated objective's value."""
    run = study.train(c)
    data = report.runtime_result_dict(run)
    print(tables.format_runtime(data), flush=True)
    if run.memory is not None:
        print(tables.memory_line(run.memory), flush=True)
    export_astrasim(c, output_dir, run.inputs.network, run.optimum.bandwidth_gbps,
                    run.optimum.timing_model, run.inputs.workload)
    report.write_json(output_dir / "result.json", data)
    key = report.objective_key(c.objective)
    value = runtime.objective_value(data[key])
    log.info("status %s, %s %.10g (simulated), certified gap %s; compile %.3f s",
             data["status"], key, value, data["exact_optimality_gap"], run.compile_seconds)
    log.info("result: %s", output_dir / "result.json")
    return value


def cli() -> None:
    """Run :func:`main`, then exit with status 1 if any job failed (after the whole sweep)."""
    config.check_command_line("libra_jax.train", "conf=turing_nlg")
    runtime.compose_once()
    main()
    runtime.exit_on_failures()
    runtime.end_process()
