"""``python -m libra_jax.scan`` / ``libra-scan``: the design-space scan's command.

The scan itself is :mod:`libra_jax.studies.scan` (its docstring describes the space, the
output files and how to load them). This module registers the schema with Hydra, runs one
scan per Hydra job, logs the run's status (the job's ``scan.log`` holds it) and prints the
top-k table on stdout.
"""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from libra_jax.cli.config import check_command_line, reject_unknown_keys
from libra_jax.cli.runtime import enable_compilation_cache
from libra_jax.studies.scan import (
    ScanConfig,
    ScanResult,
    describe,
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
def main(cfg: DictConfig) -> ScanResult:
    """Hydra entry: runs or resumes the configured scan; logs its status, prints the table."""
    try:
        reject_unknown_keys(cfg, ScanConfig)
        c: ScanConfig = OmegaConf.to_object(cfg)
        enable_compilation_cache(c.compilation_cache_dir)
        out = c.scan.output_dir or HydraConfig.get().runtime.output_dir
        result = run_scan(c, out)
    except LibraInputError as e:
        log.error("error: %s", " ".join(str(e).split()))
        sys.exit(1)
    for line in describe(result).splitlines():
        log.info(line)
    if result.complete:
        print(outputs_text(result), flush=True)
    return result


def cli() -> None:
    """Console entry point (``libra-scan``)."""
    check_command_line("libra_jax.scan", None)
    main()
