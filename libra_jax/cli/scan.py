"""``python -m libra_jax.scan`` / ``libra-scan``: the design-space scan's command.

The scan itself is :mod:`libra_jax.studies.scan` (its docstring describes the space, the
output files and how to load them). This module registers the schema with Hydra, runs one
scan (or one shard of it, or the merge of its shards) per Hydra job, logs the run's status
(the job's ``scan.log`` holds it) and prints the top-k table on stdout.

Shards run as the jobs of a Hydra multirun, through any launcher, all into one
``scan.output_dir``::

    python -m libra_jax.scan -m scan.num_shards=3 'scan.shard_index=range(0,3)' \
        scan.output_dir=DIR hydra/launcher=libra_joblib   # or submitit_slurm, ray, ...
    python -m libra_jax.scan scan.merge=true scan.output_dir=DIR

JAX must not be forked: a launcher must start each job in a fresh process (joblib's default
``loky`` backend, SLURM tasks, Ray workers), never fork the launching process, which has
imported JAX (joblib ``backend=multiprocessing`` on Linux, or threads) (see
``conf/hydra/launcher/libra_joblib.yaml``).
"""

from __future__ import annotations

import logging
import pathlib

import hydra
from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig

from libra_jax.cli.config import check_command_line
from libra_jax.cli.runtime import compose_once, end_process, exit_on_failures, run_job
from libra_jax.studies.scan import (
    ScanConfig,
    ScanResult,
    describe,
    merge_scan,
    outputs_text,
    run_scan,
)
from libra_jax.types import LibraInputError, float64

log = logging.getLogger(__name__)


def register_configs() -> None:
    """Registers the schema ``base_scan`` in Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(name="base_scan", node=ScanConfig)


register_configs()


@hydra.main(version_base="1.3", config_path="../conf", config_name="scan")
@float64
def main(cfg: DictConfig) -> ScanResult | float:
    """Hydra entry (one job): runs or resumes the configured scan or shard, or merges the
    shards (`runtime.run_job`: bad input is one logged error, and a failed job of a sweep is
    reported at the end); +inf if the job failed."""
    return run_job(cfg, _scan_job, schema=ScanConfig, result_json=False)


def _scan_job(c: ScanConfig, run_dir: pathlib.Path) -> ScanResult:
    """The scan, shard or merge of one job; logs the status, prints the table."""
    r = c.scan
    if r.output_dir is None and (r.merge or r.num_shards != 1):
        key = "scan.merge = true" if r.merge else f"scan.num_shards = {r.num_shards}"
        raise LibraInputError(
            f"{key} needs scan.output_dir: the one directory of all the shards (each "
            "Hydra job has a run directory of its own)."
        )
    if r.merge:
        log.info("merging the shards of %s (space, workloads and format as their "
                 "manifests record; report.* from this command)", r.output_dir)
        result = merge_scan(r.output_dir, c.report)
    else:
        result = run_scan(c, r.output_dir or run_dir)
    for line in describe(result).splitlines():
        log.info(line)
    if result.top_k_markdown is not None:  # this run wrote the summary
        print(outputs_text(result), flush=True)
    return result


def cli() -> None:
    """Console entry point (``libra-scan``)."""
    check_command_line("libra_jax.scan", None, schema=ScanConfig, groups=())
    compose_once()
    main()
    exit_on_failures()
    end_process()
