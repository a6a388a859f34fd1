"""Command line: ``libra-evaluate conf=gpt3_4d bandwidth_gbps=[...] [key=value ...]`` (or
``python -m libra_jax.evaluate``).

Evaluates a given design (no optimisation) with the same configs as ``libra_jax.train``: the
step time of the configured workload at the given per-dimension bandwidths under the chosen
step-time model (``model``, ``schedule``, ``training_loop``, ``network.latency_ns``,
``system.*``), its network cost, whether it meets the configured constraints, and where the
time goes: a per-collective, per-dimension breakdown (bandwidth, latency, local reduction,
pipeline fill/drain). This is also how to check the model against one's own measurements.

Prints a table and writes ``result.json`` (docs/guide/evaluate.md); logs the status
(``<run dir>/evaluate.log``); bad input logs one ``error:`` paragraph and exits non-zero, as
``libra-train`` does. :func:`main` returns the design's objective value (step time in ns, or
step time x network cost in ns*$ for ``objective=perf_per_cost``), so a sweeper plugin can
search designs.
"""

from __future__ import annotations

import logging
import pathlib

import hydra
from omegaconf import DictConfig

from libra_jax.cli import config, report, runtime, tables, trace_multi_report, trace_report
from libra_jax.cli.report import EVALUATE_KEYS  # noqa: F401  (the command's result keys)
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.evaluate import constraint_report, evaluate, rounding_gbps  # noqa: F401
from libra_jax.studies.job.export import export_astrasim
from libra_jax.studies.trace_multi import has_trace
from libra_jax.types import float64

log = logging.getLogger(__name__)


def run(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """Evaluate the configured design (`studies.job.evaluate`), print the table, write
    ``result.json``; returns the objective value (ns, or ns*$ for
    ``objective=perf_per_cost``). A trace set (``workload.chakra_et``) goes to
    `trace_report.evaluate`, ``workloads`` naming a trace set to
    `trace_multi_report.evaluate`."""
    if c.workload.chakra_et is not None:
        return trace_report.evaluate(c, output_dir)
    if has_trace(c):
        return trace_multi_report.evaluate(c, output_dir)
    ev = evaluate(c)
    data = report.evaluation_dict(ev)
    print(tables.format_evaluation(data, ev.network, ev.workload, ev.timing_model), flush=True)
    export_astrasim(c, output_dir, ev.network, ev.bandwidth_gbps, ev.timing_model, ev.workload)
    report.write_json(output_dir / "result.json", data)
    key = report.objective_key(c.objective)
    value = runtime.objective_value(data[key])
    violated = data["constraints"]["violated"]
    verdict = "met" if not violated else "VIOLATED" + (
        " (within the rounding of the digits given)"
        if all("within the rounding" in v for v in violated) else "")
    log.info("design %s GB/s: %s %.10g, constraints %s", data["bandwidth_gbps"], key, value,
             verdict)
    log.info("result: %s", output_dir / "result.json")
    return value


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
@float64
def main(cfg: DictConfig) -> float:
    """Hydra entry point (one job): the design's objective value; +inf if the job failed."""
    return runtime.run_job(cfg, run)


def cli() -> None:
    config.check_command_line("libra_jax.evaluate",
                              "conf=gpt3_4d bandwidth_gbps=[125,125,125,125]")
    runtime.compose_once()
    main()
    runtime.exit_on_failures()
    runtime.end_process()

