"""What ``libra-train`` prints and writes for one job: the study the config asks for
(`libra_jax.studies.job.train`: a single solve, a multi-workload solve or the mapping
co-search) runs on the typed config, and this module turns its typed result into the table on
stdout, the status and result summary in the log (``<run dir>/train.log``), ``result.json`` in
the run directory and, with ``export_astrasim=true``, the ASTRA-sim files.

:func:`train` returns the objective value: the step time in ns (``objective=perf``, and the
co-search), step time x network cost in ns*$ (``perf_per_cost``), energy per step in J
(``perf_per_watt``), or the multi objective (ns, ns*$ or a ratio) of a multi-workload run.
"""

from __future__ import annotations

import logging
import pathlib

from libra_jax.cli import (
    report,
    runtime,
    serving_report,
    tables,
    trace_multi_report,
    trace_report,
)
from libra_jax.cli.report import objective_key
from libra_jax.studies.job import train as study
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.export import export_astrasim
from libra_jax.studies.job.inputs import serving_requested
from libra_jax.studies.trace_multi import has_trace

log = logging.getLogger(__name__)


def train(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """The job of ``libra-train``: runs the study, prints and writes its result; returns its
    objective value."""
    if c.workload.chakra_et is not None:
        return trace_report.train(c, output_dir)
    if serving_requested(c):
        return serving_report.train(c, output_dir)
    if has_trace(c):
        return trace_multi_report.train(c, output_dir)
    run = study.train(c)
    if isinstance(run, study.MultiRun):
        return _multi(run, output_dir)
    if isinstance(run, study.CosearchRun):
        return _cosearch(run, output_dir)
    return _single(c, run, output_dir)


def _log_result(status: str, key: str, value: float, solve_s: float, compile_s: float,
                path: pathlib.Path) -> None:
    log.info("status %s, %s %.10g; solve %.3f s, compile %.3f s", status, key, value,
             solve_s, compile_s)
    log.info("result: %s", path)


def _single(c: LibraConfig, run: study.SingleRun, output_dir: pathlib.Path) -> float:
    """A single workload's optimum: the table, the lines after it, ``result.json``."""
    result, tm = run.result, run.timing_model
    reference = report.reference_dict(run.reference, run.cost_rates, run.power)
    print(tables.format_table(result, run.baseline, run.network, run.workload, run.spec,
                              run.compile_seconds, power=run.power), flush=True)
    print("\n".join(tables.format_extras(tm, result, run.exact_step_ns, run.chunk_search,
                                         run.sensitivities)), flush=True)
    for line in tables.format_physical(run.bandwidth_limits, reference):
        print(line, flush=True)
    if run.memory is not None:
        print(tables.memory_line(run.memory), flush=True)
    extras = dict(timing_model=report.timing_dict(tm), step_time_exact_ns=run.exact_step_ns,
                  exact_optimality_gap=report.exact_gap(result, run.exact_step_ns),
                  chunk_search=None if run.chunk_search is None
                  else report.chunk_search_list(run.chunk_search),
                  sensitivities=run.sensitivities, bandwidth_limits=run.bandwidth_limits,
                  reference_design=reference)
    data = report.result_dict(result, run.baseline, run.network, run.workload,
                              run.workload_file, extras, compile_seconds=run.compile_seconds,
                              power=run.power)
    export_astrasim(c, output_dir, run.network, result.bandwidth_gbps, tm, run.workload)
    report.write_json(output_dir / "result.json", data)
    key = objective_key(c.objective)
    value = runtime.objective_value(data[key])
    _log_result(result.status, key, value, result.solve_seconds, run.compile_seconds,
                output_dir / "result.json")
    return value


def _cosearch(run: study.CosearchRun, output_dir: pathlib.Path) -> float:
    """The co-search: the best mapping's table, the ranking, ``result.json`` with a
    ``cosearch`` entry (top-k, reference, dropped counts); the best step time in ns."""
    result, res = run.result, run.search
    print(tables.format_table(result, run.baseline, run.network, run.workload, run.spec,
                              run.compile_seconds), flush=True)
    print(f"best mapping: {res.best.description}; memory per NPU: "
          f"{res.best.memory.describe()}", flush=True)
    print("", flush=True)
    print(tables.format_cosearch_table(res, run.top_k), flush=True)
    data = report.result_dict(result, run.baseline, run.network, run.workload, None,
                              compile_seconds=run.compile_seconds)
    data["cosearch"] = report.cosearch_dict(res, run.top_k)
    report.write_json(output_dir / "result.json", data)
    value = runtime.objective_value(data["step_time_ns"])
    _log_result(result.status, "step_time_ns", value, result.solve_seconds,
                run.compile_seconds, output_dir / "result.json")
    return value


def _multi(run: study.MultiRun, output_dir: pathlib.Path) -> float:
    """A multi-workload run: the table and ``result.json``; the multi objective's value."""
    result = run.result
    print(tables.format_multi_table(result, run.network, run.spec, run.compile_seconds),
          flush=True)
    data = report.multi_result_dict(result, run.network, run.compile_seconds)
    report.write_json(output_dir / "result.json", data)
    value = runtime.objective_value(data["objective_value"])
    _log_result(result.status, f"{run.objective} value", value, result.solve_seconds,
                run.compile_seconds, output_dir / "result.json")
    return value
