"""What a training job computes from its config (``libra-train``), as typed results: a single
solve (:func:`run_single`: the chunk-count search, the memory check of a generated workload,
power, the exact simulated time, sensitivities, the binding bandwidth limits and a shipped
reference design), the mapping co-search (:func:`run_cosearch`) and a multi-workload solve
(:func:`run_multi`). :func:`train` picks the one the config asks for.

Nothing here prints or writes: the command (`libra_jax.cli.jobs`) turns the config into a
:class:`~libra_jax.studies.job.config.LibraConfig`, calls :func:`train`, and prints the tables
and writes ``result.json`` from what it returns.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from libra_jax.inputs import generators
from libra_jax.inputs.cost import load_cost_model
from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import Network
from libra_jax.inputs.workload import Workload, load_communicator
from libra_jax.model import memory, timing
from libra_jax.model.problem import ConstraintSpec, Problem, build_problem, with_cost_rates
from libra_jax.solvers.compilation import CompileClock
from libra_jax.solvers.solve import Baseline, SolveResult, design_metrics, equal_split, solve
from libra_jax.studies import cosearch, multi
from libra_jax.studies import runtime as runtime_study
from libra_jax.studies.chunk_counts import ChunkChoice, solve_chunk_counts
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.inputs import (
    check_serving_keys,
    physical_inputs,
    to_inputs,
    to_multi_inputs,
    to_timing,
)
from libra_jax.studies.sensitivity import sensitivities
from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)

#: (rates [D] W per GB/s, static W: all NPUs apart from the network), or None.
Power = Any


@dataclasses.dataclass(frozen=True)
class ReferenceDesign:
    """A shipped system's design (``reference_bw_gbps``) next to libra_jax's optima.

    Attributes:
      bandwidth_gbps: [D] the shipped design, GB/s per NPU per dimension.
      step_time_ns: its step time, ns.
      same_power: the optimum at the shipped design's network power (with the run's other
        constraints), or None without the tiers' Energy.
      same_cost: the optimum at the shipped design's network cost, or None without a cost
        model.
    """

    bandwidth_gbps: np.ndarray
    step_time_ns: float
    same_power: SolveResult | None
    same_cost: SolveResult | None


@dataclasses.dataclass(frozen=True)
class SingleRun:
    """One workload's optimum (:func:`run_single`).

    Attributes:
      network, workload, spec, cost_rates: the run's inputs (cost_rates [D] $ per GB/s, or
        None).
      timing_model: the step-time model (with the chosen chunk count after a search).
      problem: the problem solved (the chosen count's after a search).
      result: the optimum, its solve time net of JAX compilation.
      baseline: the equal split of the budget.
      compile_seconds: JAX compilation during the solve(s).
      chunk_search: the chunk-count search (``system.chunks`` a list), or None.
      exact_step_ns: the step simulated exactly at the optimum (model=pipelined), or None.
      sensitivities: marginal values (`studies.sensitivity`), or an "unavailable" record.
      bandwidth_limits: per dimension {upper_gbps, source, binding}, or None without bounds.
      reference: the shipped design next to the optima, or None.
      power: (rates [D] W per GB/s, static W), or None without the tiers' Energy.
      memory: a generated transformer's memory per NPU (checked to fit), or None.
      workload_file: the workload file as resolved, or None for a generated workload.
    """

    network: Network
    workload: Workload
    spec: ConstraintSpec
    cost_rates: np.ndarray | None
    timing_model: timing.TimingModel
    problem: Problem
    result: SolveResult
    baseline: Baseline
    compile_seconds: float
    chunk_search: ChunkChoice | None
    exact_step_ns: float | None
    sensitivities: dict
    bandwidth_limits: list | None
    reference: ReferenceDesign | None
    power: Power
    memory: memory.MemoryEstimate | None
    workload_file: Any


@dataclasses.dataclass(frozen=True)
class CosearchRun:
    """The mapping co-search (:func:`run_cosearch`): the best mapping solved like a single run.

    Attributes:
      network, spec: the run's inputs.
      workload: the best mapping's workload.
      result, baseline, compile_seconds: the best mapping's optimum, equal split, compilation.
      search: the ranking (`studies.cosearch.CosearchResult`).
      top_k: how many mappings to report.
    """

    network: Network
    spec: ConstraintSpec
    workload: Workload
    result: SolveResult
    baseline: Baseline
    compile_seconds: float
    search: Any
    top_k: int


@dataclasses.dataclass(frozen=True)
class MultiRun:
    """Several workloads on one network (:func:`run_multi`).

    Attributes:
      network, spec: the run's inputs.
      objective: the multi objective (sum_time, sum_time_x_cost or worst_slowdown).
      result: `studies.multi.MultiResult`, its solve time net of compilation.
      compile_seconds: JAX compilation during the solve.
    """

    network: Network
    spec: ConstraintSpec
    objective: str
    result: multi.MultiResult
    compile_seconds: float


@dataclasses.dataclass(frozen=True)
class RuntimeRun:
    """A run for a runtime other than ASTRA-sim's default, or ``runtime=search``
    (`studies.runtime`).

    Attributes:
      inputs: `studies.runtime.RuntimeInputs` (network, workload, cost rates, spec,
        objective, solver method, power).
      optimum: the chosen runtime's `RuntimeOptimum` (design, simulated step, bound, gap).
      search: the `RuntimeSearch` (every candidate and the table), or None for one runtime.
      compile_seconds: JAX compilation during the solves.
      memory: a generated transformer's memory per NPU, or None.
      workload_file: the workload file as resolved, or None for a generated workload.
    """

    inputs: runtime_study.RuntimeInputs
    optimum: runtime_study.RuntimeOptimum
    search: runtime_study.RuntimeSearch | None
    compile_seconds: float
    memory: memory.MemoryEstimate | None
    workload_file: Any


def train(c: LibraConfig) -> SingleRun | CosearchRun | MultiRun | RuntimeRun:
    """The job of ``libra-train``: the run the config asks for (multi-workload with
    ``workloads``, the co-search with ``cosearch.enabled``, a runtime other than the default
    or ``runtime=search`` (`run_runtime`), else a single workload). A serving run
    (``workload.generator=serving``) is `job.serving.run_serving`'s."""
    check_serving_keys(c)
    if c.workloads is not None:
        _refuse_timing(c, "multi-workload runs (workloads=...)")
        return run_multi(c)
    if c.cosearch.enabled:
        _refuse_timing(c, "the mapping co-search")
        return run_cosearch(c)
    if runtime_requested(c):
        return run_runtime(c)
    return run_single(c)


def runtime_requested(c: LibraConfig) -> bool:
    """True when the config asks for ``runtime=search`` or a runtime other than ASTRA-sim's
    default (`TimingModel.is_default_runtime` of its ``system.*`` runtime keys)."""
    def name(v):
        return getattr(v, "value", v)

    s = c.system
    tm = timing.TimingModel(
        inter_dim_scheduling=name(s.inter_dim_scheduling),
        intra_dim_scheduling=name(s.intra_dim_scheduling),
        collective_optimization=name(s.collective_optimization),
        algorithm=None if s.algorithm is None else [name(a) for a in s.algorithm],
        active_chunks_per_dim=s.active_chunks_per_dim)
    return name(c.runtime) == "search" or not tm.is_default_runtime


def run_runtime(c: LibraConfig) -> RuntimeRun:
    """The bandwidths for the configured runtime (`runtime_study.optimise_for_runtime`), or
    the runtime chosen with them (``runtime=search``: `runtime_study.search_runtime` over
    `runtime_study.candidate_runtimes` of ``runtime_search``)."""
    what = ("runtime=search" if c.runtime == "search"
            else "a runtime other than the default (system.inter_dim_scheduling, ...)")
    if c.bandwidth_gbps is not None:
        raise LibraInputError(
            f"bandwidth_gbps={show(list(c.bandwidth_gbps))} is an input of libra-evaluate "
            "(evaluate a given design); libra-train optimises the bandwidths. Remove it, or "
            "run libra-evaluate.")
    if c.model != "pipelined":
        raise LibraInputError(
            f"{what} with model={c.model}: ASTRA-sim's runtime is modelled by "
            "model=pipelined only; set model=pipelined.")
    network, workload, cost_rates, spec = to_inputs(c)
    tm, chunk_counts = to_timing(c, network.num_dims, network)
    if chunk_counts is not None:
        raise LibraInputError(
            f"system.chunks = {show(list(chunk_counts))} with {what}: give one chunk count.")
    rs = c.runtime_search
    evals = rs.refine_evals
    if isinstance(evals, bool) or not isinstance(evals, int) or evals < 1:
        raise LibraInputError(
            f"runtime_search.refine_evals = {show(evals)}: an integer >= 1 (simulations "
            "per dimension).")
    mem = generated_memory(c)
    inputs = runtime_study.RuntimeInputs(
        network, workload, cost_rates, spec, getattr(c.objective, "value", c.objective),
        getattr(c.solver.method, "value", c.solver.method), power_of_run(c, network, spec))
    log.info("optimising %s on %s for %s: objective %s", workload.name, network.notation,
             what, c.objective)
    search = None
    with CompileClock() as clock:
        if c.runtime == "search":
            cands = runtime_study.candidate_runtimes(
                tm, network, inter_dim_scheduling=rs.inter_dim_scheduling,
                intra_dim_scheduling=rs.intra_dim_scheduling,
                collective_optimization=rs.collective_optimization,
                algorithm=rs.algorithm, active_chunks_per_dim=rs.active_chunks_per_dim,
                chunks=rs.chunks)
            log.info("runtime=search: %d candidate runtimes", len(cands))
            search = runtime_study.search_runtime(inputs, tm, cands, refine_evals=evals)
            opt = search.optimum
        else:
            opt = runtime_study.optimise_for_runtime(inputs, tm, refine_evals=evals)
    return RuntimeRun(inputs, opt, search, clock.seconds, mem,
                      None if c.workload.file is None
                      else resolve_path(c.workload.file, "workload.file"))


def run_single(c: LibraConfig) -> SingleRun:
    """One configured problem solved (with a chunk-count search when ``system.chunks`` is a
    list), and what the command reports next to it."""
    if c.bandwidth_gbps is not None:
        raise LibraInputError(
            f"bandwidth_gbps={show(list(c.bandwidth_gbps))} is an input of libra-evaluate "
            "(evaluate a given design); libra-train optimises the bandwidths. Remove it, or "
            "run libra-evaluate.")
    network, workload, cost_rates, spec = to_inputs(c)
    tm, chunk_counts = to_timing(c, network.num_dims, network)
    mem = generated_memory(c)
    log.info("solving %s on %s: objective %s, solver %s", workload.name, network.notation,
             c.objective, c.solver.method)
    power = power_of_run(c, network, spec)
    choice = None
    if chunk_counts is None:
        problem = timing.build_timed_problem(network, workload, cost_rates, spec, tm)
        check_product_bounded(
            getattr(c.objective, "value", c.objective), problem, power,
            "Give a budget (constraints.total_bw_gbps, as LIBRA's runs do) or "
            "constraints.lower_gbps, or use objective=perf with constraints.max_cost_usd.")
        with CompileClock() as clock:
            result = solve(problem, objective=c.objective, method=c.solver.method,
                           **power_kwargs(power))
    else:  # one problem per count, solved together; the best pair is the run's result
        if c.objective == "perf_per_watt":
            raise LibraInputError(
                f"system.chunks = {show(list(chunk_counts))}: a chunk-count search is not "
                "available with objective=perf_per_watt; give one count.")
        with CompileClock() as clock:
            choice = solve_chunk_counts(network, workload, cost_rates, spec, tm, chunk_counts,
                                        c.objective, c.solver.method)
        tm = dataclasses.replace(tm, chunks=choice.chunks[choice.best])
        result = choice.results[choice.best]
        problem = choice.problems[choice.best]
    result = clock.net(result)
    exact_ns = None
    if tm.model == "pipelined":
        exact_ns = timing.step_time_ns(workload, network, tm, result.bandwidth_gbps)
    if c.objective == "perf_per_watt":
        sens = dict(objective="perf_per_watt", status="unavailable", message=(
            "sensitivities are computed for objective perf and perf_per_cost only."))
    else:
        sens = sensitivities(problem, result, spec=spec, network=network, workload=workload,
                             cost_model=_cost_model(c), timing_model=tm)
    return SingleRun(
        network=network, workload=workload, spec=spec, cost_rates=cost_rates, timing_model=tm,
        problem=problem, result=result, baseline=equal_split(problem),
        compile_seconds=clock.seconds, chunk_search=choice, exact_step_ns=exact_ns,
        sensitivities=sens,
        bandwidth_limits=_bandwidth_limits(c, network, result.bandwidth_gbps),
        reference=_reference_design(c, network, workload, cost_rates, spec, tm, problem, power),
        power=power, memory=mem,
        workload_file=(None if c.workload.file is None
                       else resolve_path(c.workload.file, "workload.file")))


def power_of_run(c: LibraConfig, network: Network, spec: ConstraintSpec) -> Power:
    """(rates [D] W per GB/s, static W) when the tiers give Energy, else None."""
    if spec.power_rates_w_per_gbps is None:
        return None
    return (np.asarray(spec.power_rates_w_per_gbps, np.float64),
            float(c.power.npu_w) * float(np.prod(network.npus)))


def check_product_bounded(objective: str, problem: Problem, power: Power, hint: str) -> None:
    """Raises when ``perf_per_cost`` (``perf_per_watt``) has no optimum: the cost (total
    power) is linear in the bandwidths with no constant, and the constraints let it fall to
    0, so (compute + traffic / bw) x cost only falls as every bandwidth does (the search
    would end 'not converged' at a ~0 GB/s design). ``hint``: the keys that bound it."""
    if objective == "perf_per_cost":
        rates, offset, what = problem.cost_rate, 0.0, "network cost"
    elif objective == "perf_per_watt" and power is not None:
        rates, offset, what = power[0], power[1], "total power (power.npu_w = 0)"
    else:
        return
    if rates is None:
        return
    least = with_cost_rates(problem, np.asarray(rates, np.float64)).min_cost_bw
    if offset <= 0.0 and float(np.asarray(rates) @ np.asarray(least)) <= 0.0:
        raise LibraInputError(
            f"objective={objective} has no optimum here: the {what} is linear in the "
            "bandwidths and the constraints let every bandwidth fall to 0, so its product "
            f"with the time only falls as the network vanishes. {hint}")


def power_kwargs(power: Power) -> dict:
    """`solve`'s keyword arguments for the run's power."""
    if power is None:
        return {}
    return dict(power_rates_w_per_gbps=power[0], static_power_w=power[1])


def _bandwidth_limits(c: LibraConfig, network: Network, bw) -> list | None:
    """Per dimension: the upper bound the run used, where it came from (the config or a
    tier's MaxGbps) and whether it binds at the optimum; None without any bound."""
    if c.cost_model.file is None:
        if c.constraints.upper_gbps is None:
            return None
        ups = list(c.constraints.upper_gbps)
        frm = [None if u is None else "constraints.upper_gbps" for u in ups]
    else:
        phys = physical_inputs(c, network)
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
                      power) -> ReferenceDesign | None:
    """With ``reference_bw_gbps`` (a shipped system): its step time, and libra_jax's optimum
    at the same network power and at the same network cost (each with the run's other
    constraints)."""
    if c.reference_bw_gbps is None:
        return None
    ref = np.array([float(v) for v in c.reference_bw_gbps], np.float64)
    if ref.shape != (network.num_dims,) or not np.all(np.isfinite(ref)) or np.any(ref <= 0):
        raise LibraInputError(
            f"reference_bw_gbps = {show(list(c.reference_bw_gbps))}: give {network.num_dims} "
            "finite bandwidths > 0 (GB/s per NPU, one per dimension).")
    step_ns, _, _ = design_metrics(problem, ref)
    found = {}
    cases = []
    if power is not None:
        cases.append(("same_power", dataclasses.replace(
            spec, max_power_w=float(power[0] @ ref), max_cost_usd=None)))
    if cost_rates is not None:
        cases.append(("same_cost", dataclasses.replace(
            spec, max_cost_usd=float(cost_rates @ ref), max_power_w=None)))
    for key, sp in cases:
        p = timing.build_timed_problem(network, workload, cost_rates, sp, tm)
        found[key] = solve(p, method=c.solver.method, **power_kwargs(power))
    return ReferenceDesign(ref, float(step_ns), found.get("same_power"), found.get("same_cost"))


def _cost_model(c: LibraConfig):
    """The run's cost model (for the price sensitivities), or None."""
    if c.cost_model.file is None:
        return None
    return load_cost_model(resolve_path(c.cost_model.file, "cost_model.file"))


def _refuse_timing(c: LibraConfig, what: str) -> None:
    """Multi-workload runs and the co-search use LIBRA's model only."""
    changed = [f"{k}={getattr(c, k)}" for k, default in
               (("model", "libra"), ("training_loop", "no_overlap")) if getattr(c, k) != default]
    if c.system.chunks is not None:
        changed.append(f"system.chunks={show(c.system.chunks)}")
    if runtime_requested(c):
        changed.append("runtime=search" if c.runtime == "search"
                       else "the system.* runtime keys (not the default runtime)")
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


def generated_memory(c: LibraConfig) -> memory.MemoryEstimate | None:
    """A generated transformer's memory per NPU (raises when it does not fit), else None."""
    parsed = _transformer_inputs(c, None)
    if parsed is None:
        return None
    est = memory.transformer_memory(*parsed)
    memory.check_fits(est, "workload")
    return est


def run_cosearch(c: LibraConfig) -> CosearchRun:
    """Mapping co-search (``cosearch.enabled=true``): every TP / PP / DP placement ranked by
    its optimal step time, the best one solved like a single run."""
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
    network, workload, cost_rates, spec = to_inputs(c)
    model, par, npu = _transformer_inputs(c, network.npus)
    template = build_problem(network, workload, cost_rates, spec)
    cs = c.cosearch
    reference = None
    if cs.reference_communicator is not None:
        path = resolve_path(cs.reference_communicator, "cosearch.reference_communicator")
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
    with CompileClock() as clock:
        result = solve(problem, objective="perf", method=c.solver.method)
    return CosearchRun(network=network, spec=spec, workload=best_wl, result=clock.net(result),
                       baseline=equal_split(problem), compile_seconds=clock.seconds,
                       search=res, top_k=cs.top_k)


def run_multi(c: LibraConfig) -> MultiRun:
    """A multi-workload run (``workloads=[...]``): one network for every workload."""
    network, entries, weights, cost_rates, spec, objective = to_multi_inputs(c)
    problems = [build_problem(network, wl, cost_rates, spec) for _, wl, _ in entries]
    log.info("solving %d workloads on %s: multi objective %s", len(problems),
             network.notation, objective)
    with CompileClock() as clock:
        result = multi.solve_multi(
            problems, [name for name, _, _ in entries], weights, objective, cost_rates, spec)
    return MultiRun(network=network, spec=spec, objective=objective,
                    result=clock.net(result), compile_seconds=clock.seconds)
