"""Command line: ``python -m libra_jax.train conf=turing_nlg [key=value ...]``.

Composes the Hydra config (``conf/config.yaml``; schema in :mod:`libra_jax.cli.config`), solves the
bandwidth-allocation problem, compares it with the equal split of the budget, prints a table and
writes ``result.json`` to the Hydra run directory.

Bad input (:class:`~libra_jax.types.LibraInputError`) prints one ``error: ...`` paragraph to
stderr without a traceback, writes ``result.json`` with status "error" and exits non-zero. In a
multirun (``-m``) a failing job is reported and the sweep goes on; the process exits non-zero at
the end if any job failed. Multirun uses Hydra's basic launcher (jobs run in this process, one
after another): JAX must not be forked.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import traceback

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from libra_jax.cli import config, report
from libra_jax.inputs.cost import load_cost_model
from libra_jax.model import timing
from libra_jax.model.problem import build_problem
from libra_jax.solvers.solve import equal_split, solve
from libra_jax.studies import multi
from libra_jax.studies.chunk_counts import solve_chunk_counts
from libra_jax.studies.sensitivity import sensitivities
from libra_jax.types import LibraInputError, float64

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
        _refuse_timing(cfg, "multi-workload runs (workloads=...)")
        return run_multi(cfg, output_dir)
    if cfg.cosearch.enabled:
        _refuse_timing(cfg, "the mapping co-search")
        return run_cosearch(cfg, output_dir)
    _refuse_evaluate_key(cfg)
    network, workload, cost_rates, spec = config.to_inputs(cfg)
    tm, chunk_counts = config.to_timing(cfg, network.num_dims)
    memory_line = _check_generated_memory(cfg)
    choice = None
    if chunk_counts is not None:
        choice = solve_chunk_counts(network, workload, cost_rates, spec, tm,
                                           chunk_counts, cfg.objective, cfg.solver.method)
        tm = dataclasses.replace(tm, chunks=choice.chunks[choice.best])
        result = choice.results[choice.best]
        problem = choice.problems[choice.best]
    else:
        problem = timing.build_timed_problem(network, workload, cost_rates, spec, tm)
        result = solve(problem, objective=cfg.objective, method=cfg.solver.method)
    baseline = equal_split(problem)
    exact_ns = None
    if tm.model == "pipelined":
        coll_ns, _ = timing.collective_times_ns(workload, network, tm, result.bandwidth_gbps)
        exact_ns = timing.loop_step_time_ns(workload.compute_ns, coll_ns, tm.training_loop)
    sens = sensitivities(problem, result, spec=spec, network=network, workload=workload,
                         cost_model=_cost_model(cfg), timing_model=tm)
    workload_file = (None if cfg.workload.file is None
                     else config.resolve_path(cfg.workload.file, "workload.file"))
    print(report.format_table(result, baseline, network, workload, spec), flush=True)
    print("\n".join(report.format_extras(tm, result, exact_ns, choice, sens)), flush=True)
    if memory_line:
        print(memory_line, flush=True)
    extras = dict(timing_model=report.timing_dict(tm), step_time_exact_ns=exact_ns,
                  chunk_search=None if choice is None else report.chunk_search_list(choice),
                  sensitivities=sens)
    data = report.result_dict(result, baseline, network, workload, workload_file, extras)
    export_astrasim(cfg, output_dir, network, result.bandwidth_gbps, tm)
    report.write_json(output_dir / "result.json", data)
    print(f"result: {output_dir / 'result.json'}", flush=True)
    return data


def export_astrasim(cfg: DictConfig, output_dir: pathlib.Path, network, bandwidth_gbps,
                    tm: timing.TimingModel) -> None:
    """With ``export_astrasim=true``: the design as ASTRA-sim 2.x network YAML + system JSON
    in ``<run dir>/astrasim/`` (libra_jax/astrasim.py; link GB/s written in 2^30 bytes)."""
    if not cfg.get("export_astrasim"):
        return
    from libra_jax.inputs import astrasim

    delay = tm.endpoint_delay_ns
    if delay != int(delay):
        raise LibraInputError(
            f"system.endpoint_delay_ns = {delay!r}: ASTRA-sim counts whole ns; give an integer "
            "to export the design (export_astrasim=true).")
    yml, js = astrasim.export_design(
        network, bandwidth_gbps, out_dir=output_dir / "astrasim", latency_ns=tm.latency_ns,
        chunks=tm.chunks, endpoint_delay_ns=int(delay),
        local_mem_bw_gbps=1e6 if tm.local_mem_bw_gbps is None else tm.local_mem_bw_gbps)
    print(f"ASTRA-sim design: {yml} and {js}", flush=True)


def _cost_model(cfg: DictConfig):
    """The run's cost model (for the price sensitivities), or None."""
    if cfg.cost_model.file is None:
        return None
    return load_cost_model(config.resolve_path(cfg.cost_model.file, "cost_model.file"))


def _refuse_evaluate_key(cfg: DictConfig) -> None:
    if cfg.get("bandwidth_gbps") is not None:
        raise LibraInputError(
            f"bandwidth_gbps={list(cfg.bandwidth_gbps)} is an input of python -m "
            "libra_jax.evaluate (evaluate a given design); libra_jax.train optimises the "
            "bandwidths. Remove it, or run libra_jax.evaluate.")


def _refuse_timing(cfg: DictConfig, what: str) -> None:
    """Multi-workload runs and the co-search use LIBRA's model only."""
    changed = [f"{k}={cfg.get(k)}" for k, default in
               (("model", "libra"), ("training_loop", "no_overlap")) if cfg.get(k) != default]
    if cfg.system.chunks is not None:
        changed.append(f"system.chunks={cfg.system.chunks}")
    if changed:
        raise LibraInputError(
            f"{', '.join(changed)}: {what} use LIBRA's model (model=libra, "
            "training_loop=no_overlap) only; remove these keys or run a single workload.")


def _transformer_inputs(cfg: DictConfig, npus):
    """(Transformer, Parallel, Npu) of a generated transformer workload, else None."""
    from libra_jax.inputs import generators

    w = cfg.workload
    if w.generator not in ("transformer", "moe"):
        return None
    return (generators.Transformer.parse(w.model), generators.Parallel.parse(w.parallel, npus),
            generators.Npu.parse(w.npu))


def _check_generated_memory(cfg: DictConfig) -> str | None:
    """For a generated transformer: the memory line to print; raises when it does not fit."""
    from libra_jax.model import memory

    if cfg.workload.generator is None:
        return None
    parsed = _transformer_inputs(cfg, None)
    if parsed is None:
        return None
    est = memory.transformer_memory(*parsed)
    memory.check_fits(est, "workload")
    return f"memory per NPU: {est.describe()}" + (
        "" if est.capacity_bytes is not None else " (workload.npu.memory_gb is null: not checked)")


def run_cosearch(cfg: DictConfig, output_dir: pathlib.Path) -> dict:
    """Mapping co-search (``cosearch.enabled=true``): print the ranking and write result.json
    for the best mapping, with a ``cosearch`` entry (top-k, reference, dropped counts)."""
    from libra_jax.inputs.workload import load_communicator
    from libra_jax.studies import cosearch

    if cfg.workload.generator not in ("transformer", "moe"):
        raise LibraInputError(
            f"cosearch.enabled=true needs a generated transformer workload "
            f"(workload.generator=transformer or moe); got workload.generator="
            f"{cfg.workload.generator!r}."
        )
    if cfg.objective != "perf":
        raise LibraInputError(
            f"cosearch ranks mappings by step time: objective must be perf (got "
            f"{cfg.objective})."
        )
    network, workload, cost_rates, spec = config.to_inputs(cfg)
    model, par, npu = _transformer_inputs(cfg, network.npus)
    template = build_problem(network, workload, cost_rates, spec)
    c = cfg.cosearch
    reference = None
    if c.reference_communicator is not None:
        path = config.resolve_path(c.reference_communicator, "cosearch.reference_communicator")
        comm = load_communicator(path)
        if comm.shape[1] != network.num_dims:
            raise LibraInputError(
                f"cosearch.reference_communicator: {path} has {comm.shape[1]} entries per row "
                f"but the network has {network.num_dims} dimensions."
            )
        reference = cosearch.placement_from_communicator(
            comm, network.npus, "cosearch.reference_communicator")
    if not (isinstance(c.top_k, int) and c.top_k >= 1):
        raise LibraInputError(f"cosearch.top_k = {c.top_k!r}: expected an integer >= 1.")
    res = cosearch.cosearch(template, network, model, par, npu, c.tp, c.pp, c.dp, reference)
    # The best mapping, solved and reported like a single run (with the equal-split baseline).
    best_par = dataclasses.replace(par, tp=res.best.degrees[0], pp=res.best.degrees[1],
                                   dp=res.best.degrees[2], placement=res.best.placement)
    from libra_jax.inputs.generators import transformer_workload

    best_wl = transformer_workload(model, best_par, npu, network.num_dims,
                                   f"generator {cfg.workload.generator} (co-search best)")
    problem = build_problem(network, best_wl, cost_rates, spec)
    result = solve(problem, objective="perf", method=cfg.solver.method)
    baseline = equal_split(problem)
    print(report.format_table(result, baseline, network, best_wl, spec), flush=True)
    print(f"best mapping: {res.best.description}; memory per NPU: "
          f"{res.best.memory.describe()}", flush=True)
    print("", flush=True)
    print(report.format_cosearch_table(res, c.top_k), flush=True)
    data = report.result_dict(result, baseline, network, best_wl, None)
    data["cosearch"] = report.cosearch_dict(res, c.top_k)
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


def run_job(cfg: DictConfig, job) -> dict | None:
    """Runs ``job(cfg, output_dir)`` as one Hydra job: bad input prints one ``error:``
    paragraph and writes an error ``result.json``; returns the result dict or None."""
    hydra_cfg = HydraConfig.get()
    _JOBS.append(hydra_cfg.mode == RunMode.MULTIRUN)
    output_dir = pathlib.Path(hydra_cfg.runtime.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        return job(cfg, output_dir)
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


def exit_on_failures() -> None:
    """Exits with status 1 if any job of this process failed (after the whole sweep)."""
    if FAILURES:
        if any(_JOBS):
            print(f"error: {len(FAILURES)} of {len(_JOBS)} jobs failed:", file=sys.stderr)
            for failure in FAILURES:
                print(f"  {failure}", file=sys.stderr)
        sys.exit(1)


@hydra.main(version_base="1.3", config_path="../conf", config_name="config")
@float64
def main(cfg: DictConfig) -> dict | None:
    """Hydra entry point (one job); returns the result dict, or None if the job failed."""
    return run_job(cfg, run)


def cli() -> None:
    """Run :func:`main`, then exit with status 1 if any job failed (after the whole sweep)."""
    config.check_command_line("libra_jax.train", "conf=turing_nlg")
    main()
    exit_on_failures()

