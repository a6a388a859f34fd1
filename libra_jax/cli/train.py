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

import hydra
from omegaconf import DictConfig

from libra_jax.cli import config, jobs, runtime
from libra_jax.types import float64


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
@float64
def main(cfg: DictConfig) -> float:
    """Hydra entry point (one job): the objective value (step time in ns for ``perf``, step
    time x network cost in ns*$ for ``perf_per_cost``, the multi objective's value for
    ``workloads=...``); +inf if the job failed."""
    return runtime.run_job(cfg, jobs.train)


def cli() -> None:
    """Run :func:`main`, then exit with status 1 if any job failed (after the whole sweep)."""
    config.check_command_line("libra_jax.train", "conf=turing_nlg")
    runtime.compose_once()
    main()
    runtime.exit_on_failures()
    runtime.end_process()
