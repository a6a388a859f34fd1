"""What ``libra-train`` runs in one job: a single solve, a multi-workload solve or the mapping
co-search, chosen by the config (:func:`train`).

Each job prints its table to stdout, logs its status and result summary
(``<run dir>/train.log``), writes ``result.json`` to the run directory and returns the
objective value: the step time in ns (``objective=perf``, and the co-search), step time x
network cost in ns*$ (``perf_per_cost``), or the multi objective (ns, ns*$ or a ratio) of a
multi-workload run. Every job takes the typed config (:class:`~libra_jax.cli.config.LibraConfig`).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib

import numpy as np

from libra_jax.cli import config, report, runtime, tables
from libra_jax.cli.config import LibraConfig
from libra_jax.inputs import astrasim, chakra, generators
from libra_jax.inputs.cost import load_cost_model
from libra_jax.inputs.workload import load_communicator
from libra_jax.model import memory, step, timing
from libra_jax.model.problem import build_problem
from libra_jax.solvers.solve import design_metrics, equal_split, solve
from libra_jax.studies import cosearch, multi
from libra_jax.studies.chunk_counts import solve_chunk_counts
from libra_jax.studies.sensitivity import sensitivities
from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)


def train(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """The job of ``libra-train``: the one the config asks for; returns its objective value."""
    if c.workloads is not None:
        _refuse_timing(c, "multi-workload runs (workloads=...)")
        return run_multi(c, output_dir)
    if c.cosearch.enabled:
        _refuse_timing(c, "the mapping co-search")
        return run_cosearch(c, output_dir)
    return run_single(c, output_dir)


def objective_key(objective: str) -> str:
    """The ``result.json`` key of the value a single-workload ``objective`` minimises."""
    return {"perf_per_cost": "time_x_cost",
            "perf_per_watt": "energy_per_step_j"}.get(objective, "step_time_ns")


def _log_result(status: str, key: str, value: float, solve_s: float, compile_s: float,
                path: pathlib.Path) -> None:
    log.info("status %s, %s %.10g; solve %.3f s, compile %.3f s", status, key, value,
             solve_s, compile_s)
    log.info("result: %s", path)


def run_single(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """Solve one configured problem (with a chunk-count search when ``system.chunks`` is a
    list), print the table, write ``result.json``; returns the objective value."""
    if c.bandwidth_gbps is not None:
        raise LibraInputError(
            f"bandwidth_gbps={show(list(c.bandwidth_gbps))} is an input of libra-evaluate "
            "(evaluate a given design); libra-train optimises the bandwidths. Remove it, or "
            "run libra-evaluate.")
    network, workload, cost_rates, spec = config.to_inputs(c)
    tm, chunk_counts = config.to_timing(c, network.num_dims, network)
    memory_line = _check_generated_memory(c)
    log.info("solving %s on %s: objective %s, solver %s", workload.name, network.notation,
             c.objective, c.solver.method)
    power = power_of_run(c, network, spec)
    choice = None
    if chunk_counts is None:
        problem = timing.build_timed_problem(network, workload, cost_rates, spec, tm)
        with runtime.CompileClock() as clock:
            result = solve(problem, objective=c.objective, method=c.solver.method,
                           **_power_kwargs(power))
    else:  # one problem per count, solved together; the best pair is the run's result
        if c.objective == "perf_per_watt":
            raise LibraInputError(
                f"system.chunks = {show(list(chunk_counts))}: a chunk-count search is not "
                "available with objective=perf_per_watt; give one count.")
        with runtime.CompileClock() as clock:
            choice = solve_chunk_counts(network, workload, cost_rates, spec, tm, chunk_counts,
                                        c.objective, c.solver.method)
        tm = dataclasses.replace(tm, chunks=choice.chunks[choice.best])
        result = choice.results[choice.best]
        problem = choice.problems[choice.best]
    result = clock.net(result)
    baseline = equal_split(problem)
    exact_ns = None
    if tm.model == "pipelined":
        exact_ns = timing.step_time_ns(workload, network, tm, result.bandwidth_gbps)
    if c.objective == "perf_per_watt":
        sens = dict(objective="perf_per_watt", status="unavailable", message=(
            "sensitivities are computed for objective perf and perf_per_cost only."))
    else:
        sens = sensitivities(problem, result, spec=spec, network=network, workload=workload,
                             cost_model=_cost_model(c), timing_model=tm)
    workload_file = (None if c.workload.file is None
                     else config.resolve_path(c.workload.file, "workload.file"))
    limits = _bandwidth_limits(c, network, result.bandwidth_gbps)
    reference = _reference_design(c, network, workload, cost_rates, spec, tm, problem, power)
    print(tables.format_table(result, baseline, network, workload, spec, clock.seconds,
                              power=power), flush=True)
    print("\n".join(tables.format_extras(tm, result, exact_ns, choice, sens)), flush=True)
    for line in tables.format_physical(limits, reference):
        print(line, flush=True)
    if memory_line:
        print(memory_line, flush=True)
    extras = dict(timing_model=report.timing_dict(tm), step_time_exact_ns=exact_ns,
                  exact_optimality_gap=report.exact_gap(result, exact_ns),
                  chunk_search=None if choice is None else report.chunk_search_list(choice),
                  sensitivities=sens, bandwidth_limits=limits, reference_design=reference)
    data = report.result_dict(result, baseline, network, workload, workload_file, extras,
                              compile_seconds=clock.seconds, power=power)
    export_astrasim(c, output_dir, network, result.bandwidth_gbps, tm, workload)
    report.write_json(output_dir / "result.json", data)
    key = objective_key(c.objective)
    value = runtime.objective_value(data[key])
    _log_result(result.status, key, value, result.solve_seconds, clock.seconds,
                output_dir / "result.json")
    return value


def power_of_run(c: LibraConfig, network, spec):
    """(rates [D] W per GB/s, static W) when the tiers give Energy, else None."""
    if spec.power_rates_w_per_gbps is None:
        return None
    return (np.asarray(spec.power_rates_w_per_gbps, np.float64),
            float(c.power.npu_w) * float(np.prod(network.npus)))


def _power_kwargs(power) -> dict:
    if power is None:
        return {}
    return dict(power_rates_w_per_gbps=power[0], static_power_w=power[1])


def _bandwidth_limits(c: LibraConfig, network, bw) -> list | None:
    """Per dimension: the upper bound the run used, where it came from (the config or a
    tier's MaxGbps) and whether it binds at the optimum; None without any bound."""
    if c.cost_model.file is None:
        if c.constraints.upper_gbps is None:
            return None
        ups = list(c.constraints.upper_gbps)
        frm = [None if u is None else "constraints.upper_gbps" for u in ups]
    else:
        phys = config.physical_inputs(c, network)
        if phys.upper_gbps is None:
            return None
        ups, frm = list(phys.upper_gbps), list(phys.upper_from)
    out = []
    for d, (u, f) in enumerate(zip(ups, frm)):
        finite = u is not None and np.isfinite(float(u))
        out.append(dict(upper_gbps=float(u) if finite else None, source=f if finite else None,
                        binding=bool(finite and float(bw[d]) >= float(u) * (1 - 1e-6))))
    return out


def _reference_design(c: LibraConfig, network, workload, cost_rates, spec, tm, problem,
                      power) -> dict | None:
    """With ``reference_bw_gbps`` (a shipped system): its step time, cost and power, and
    libra_jax's optimum at the same network power and at the same network cost (each with
    the run's other constraints)."""
    if c.reference_bw_gbps is None:
        return None
    ref = np.array([float(v) for v in c.reference_bw_gbps], np.float64)
    if ref.shape != (network.num_dims,) or not np.all(np.isfinite(ref)) or np.any(ref <= 0):
        raise LibraInputError(
            f"reference_bw_gbps = {show(list(c.reference_bw_gbps))}: give {network.num_dims} "
            "finite bandwidths > 0 (GB/s per NPU, one per dimension).")

    def summary(bw, step_ns, status=None, gap=None):
        out = dict(bandwidth_gbps=[float(x) for x in bw], step_time_ns=float(step_ns),
                   network_cost_usd=None if cost_rates is None else float(cost_rates @ bw),
                   **report.power_of(list(bw), step_ns, power))
        if status is not None:
            out.update(status=status, optimality_gap=gap)
        return out

    step_ns, _, _ = design_metrics(problem, ref)
    data = dict(shipped=summary(ref, step_ns), same_power=None, same_cost=None)
    cases = []
    if power is not None:
        cases.append(("same_power", dataclasses.replace(
            spec, max_power_w=float(power[0] @ ref), max_cost_usd=None)))
    if cost_rates is not None:
        cases.append(("same_cost", dataclasses.replace(
            spec, max_cost_usd=float(cost_rates @ ref), max_power_w=None)))
    for key, sp in cases:
        p = timing.build_timed_problem(network, workload, cost_rates, sp, tm)
        r = solve(p, method=c.solver.method, **_power_kwargs(power))
        data[key] = summary(r.bandwidth_gbps, r.step_time_ns, r.status, r.optimality_gap)
    return data


def export_astrasim(c: LibraConfig, output_dir: pathlib.Path, network, bandwidth_gbps,
                    tm: timing.TimingModel, workload=None) -> None:
    """With ``export_astrasim=true``: the design as ASTRA-sim 2.x network YAML + system JSON
    in ``<run dir>/astrasim/`` (`libra_jax.inputs.astrasim`; link GB/s written in 2^30
    bytes) and, given the workload, the step as per-NPU Chakra execution traces
    ``astrasim/et/wl.<rank>.et`` (`libra_jax.inputs.chakra`; the configured training
    loop's dependencies, compute rounded to whole microseconds) with the simulator's
    command line in ``astrasim/run.sh``."""
    if not c.export_astrasim:
        return
    delay = tm.endpoint_delay_ns
    if delay != int(delay):
        raise LibraInputError(
            f"system.endpoint_delay_ns = {show(delay)}: ASTRA-sim counts whole ns; give an integer "
            "to export the design (export_astrasim=true).")
    yml, js = astrasim.export_design(
        network, bandwidth_gbps, out_dir=output_dir / "astrasim", latency_ns=tm.latency_ns,
        chunks=tm.chunks, endpoint_delay_ns=int(delay),
        local_mem_bw_gbps=1e6 if tm.local_mem_bw_gbps is None else tm.local_mem_bw_gbps,
        scheduling_policy=tm.queue_policy.upper())
    log.info("ASTRA-sim design: %s and %s", yml, js)
    if workload is None:
        return
    out = output_dir / "astrasim"
    nodes = step.step_graph(workload, tm.training_loop)
    try:
        paths = chakra.write_traces(nodes, network.npus, out / "et")
    except LibraInputError as e:  # e.g. a group over part of a dimension (needs pg_name)
        log.warning("Chakra ETs not written: %s", e)
        return
    rounding = chakra.rounding_report(nodes)
    backend = "Aware" if tm.network_backend == "aware" else "Unaware"
    inflight = tm.max_inflight_collectives or 1024
    (out / "run.sh").write_text(
        "#!/bin/sh\n# ASTRA-sim 2.x (analytical backend) on the step libra_jax timed; "
        "ASTRASIM_MAX_INFLIGHT_COMM needs the local patch of\n# "
        "shared/reference/astrasim_workload (stock ASTRA-sim runs one collective per NPU).\n"
        'echo \'{"memory-type": "NO_MEMORY_EXPANSION"}\' > "$(dirname "$0")/memory.json"\n'
        f"ASTRASIM_MAX_INFLIGHT_COMM={inflight} "
        f"${{ASTRA_SIM_BIN:-AstraSim_Analytical_Congestion_{backend}}} "
        '--workload-configuration="$(dirname "$0")/et/wl" --comm-group-configuration=empty '
        '--system-configuration="$(dirname "$0")/system.json" '
        '--remote-memory-configuration="$(dirname "$0")/memory.json" '
        '--network-configuration="$(dirname "$0")/network.yml" '
        f"--num-queues-per-dim={tm.queues_per_dim}\n")
    log.info("Chakra ETs: %d files in %s (compute rounded to whole us: %+.0f ns in all, "
             "%d node(s) written as 0 us); command: %s", len(paths), out / "et",
             rounding.total_change_ns, len(rounding.zero_us_nodes), out / "run.sh")


def _cost_model(c: LibraConfig):
    """The run's cost model (for the price sensitivities), or None."""
    if c.cost_model.file is None:
        return None
    return load_cost_model(config.resolve_path(c.cost_model.file, "cost_model.file"))


def _refuse_timing(c: LibraConfig, what: str) -> None:
    """Multi-workload runs and the co-search use LIBRA's model only."""
    changed = [f"{k}={getattr(c, k)}" for k, default in
               (("model", "libra"), ("training_loop", "no_overlap")) if getattr(c, k) != default]
    if c.system.chunks is not None:
        changed.append(f"system.chunks={show(c.system.chunks)}")
    if changed:
        raise LibraInputError(
            f"{', '.join(changed)}: {what} use LIBRA's model (model=libra, "
            "training_loop=no_overlap) only; remove these keys or run a single workload.")


def _transformer_inputs(c: LibraConfig, npus):
    """(Transformer, Parallel, Npu) of a generated transformer workload, else None."""
    w = c.workload
    if w.generator not in ("transformer", "moe"):
        return None
    return (generators.Transformer.parse(w.model), generators.Parallel.parse(w.parallel, npus),
            generators.Npu.parse(w.npu))


def _check_generated_memory(c: LibraConfig) -> str | None:
    """For a generated transformer: the memory line to print; raises when it does not fit."""
    parsed = _transformer_inputs(c, None)
    if parsed is None:
        return None
    est = memory.transformer_memory(*parsed)
    memory.check_fits(est, "workload")
    return f"memory per NPU: {est.describe()}" + (
        "" if est.capacity_bytes is not None else " (workload.npu.memory_gb is null: not checked)")


def run_cosearch(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """Mapping co-search (``cosearch.enabled=true``): print the ranking and write result.json
    for the best mapping, with a ``cosearch`` entry (top-k, reference, dropped counts);
    returns the best mapping's step time in ns."""
    if c.workload.generator not in ("transformer", "moe"):
        raise LibraInputError(
            f"cosearch.enabled=true needs a generated transformer workload "
            f"(workload.generator=transformer or moe); got workload.generator="
            f"{show(c.workload.generator)}."
        )
    if c.objective != "perf":
        raise LibraInputError(
            f"cosearch ranks mappings by step time: objective must be perf (got "
            f"{c.objective})."
        )
    network, workload, cost_rates, spec = config.to_inputs(c)
    model, par, npu = _transformer_inputs(c, network.npus)
    template = build_problem(network, workload, cost_rates, spec)
    cs = c.cosearch
    reference = None
    if cs.reference_communicator is not None:
        path = config.resolve_path(cs.reference_communicator, "cosearch.reference_communicator")
        comm = load_communicator(path)
        if comm.shape[1] != network.num_dims:
            raise LibraInputError(
                f"cosearch.reference_communicator: {path} has {comm.shape[1]} entries per row "
                f"but the network has {network.num_dims} dimensions."
            )
        reference = cosearch.placement_from_communicator(
            comm, network.npus, "cosearch.reference_communicator")
    if not (isinstance(cs.top_k, int) and cs.top_k >= 1):
        raise LibraInputError(f"cosearch.top_k = {show(cs.top_k)}: expected an integer >= 1.")
    log.info("co-search of the mappings of %s on %s", workload.name, network.notation)
    res = cosearch.cosearch(template, network, model, par, npu, cs.tp, cs.pp, cs.dp, reference)
    # The best mapping, solved and reported like a single run (with the equal-split baseline).
    best_par = dataclasses.replace(par, tp=res.best.degrees[0], pp=res.best.degrees[1],
                                   dp=res.best.degrees[2], placement=res.best.placement)
    best_wl = generators.transformer_workload(model, best_par, npu, network.num_dims,
                                   f"generator {c.workload.generator} (co-search best)")
    problem = build_problem(network, best_wl, cost_rates, spec)
    with runtime.CompileClock() as clock:
        result = solve(problem, objective="perf", method=c.solver.method)
    result = clock.net(result)
    baseline = equal_split(problem)
    print(tables.format_table(result, baseline, network, best_wl, spec, clock.seconds),
          flush=True)
    print(f"best mapping: {res.best.description}; memory per NPU: "
          f"{res.best.memory.describe()}", flush=True)
    print("", flush=True)
    print(tables.format_cosearch_table(res, cs.top_k), flush=True)
    data = report.result_dict(result, baseline, network, best_wl, None,
                              compile_seconds=clock.seconds)
    data["cosearch"] = report.cosearch_dict(res, cs.top_k)
    report.write_json(output_dir / "result.json", data)
    value = runtime.objective_value(data["step_time_ns"])
    _log_result(result.status, "step_time_ns", value, result.solve_seconds, clock.seconds,
                output_dir / "result.json")
    return value


def run_multi(c: LibraConfig, output_dir: pathlib.Path) -> float:
    """A multi-workload run (``workloads=[...]``): solve, print, write ``result.json``;
    returns the multi objective's value (ns, ns*$ or a ratio)."""
    network, entries, weights, cost_rates, spec, objective = config.to_multi_inputs(c)
    problems = [build_problem(network, wl, cost_rates, spec) for _, wl, _ in entries]
    log.info("solving %d workloads on %s: multi objective %s", len(problems),
             network.notation, objective)
    with runtime.CompileClock() as clock:
        result = multi.solve_multi(
            problems, [name for name, _, _ in entries], weights, objective, cost_rates, spec)
    result = clock.net(result)
    print(tables.format_multi_table(result, network, spec, clock.seconds), flush=True)
    data = report.multi_result_dict(result, network, clock.seconds)
    report.write_json(output_dir / "result.json", data)
    value = runtime.objective_value(data["objective_value"])
    _log_result(result.status, f"{objective} value", value, result.solve_seconds,
                clock.seconds, output_dir / "result.json")
    return value
