"""The jobs of an imported Chakra trace set (``workload.chakra_et=<prefix>``, issue 32):
``libra-evaluate`` times the step at a given design, ``libra-train`` finds the design of the
fastest step (or the objective's best) under the run's constraints.

* Inputs: the design part of the config as every run has it (`inputs.design_inputs`), the
  trace set (`inputs.chakra_import.read_chakra`, its ranks one per NPU of the network) and
  the timing model (``model=pipelined``: the step as ASTRA-sim's system layer runs it, with
  ``system.*``). The trace's own dependencies say what overlaps, so ``training_loop`` and
  ``schedule`` keep their defaults.
* Evaluate: `step_trace.simulate_trace` at the design: the step (max over the ranks, as
  ASTRA-sim reports it), each class of identical ranks' finish, and the lower bound of
  `trace_rows.TraceBound` at the design (how much of the step the critical path explains).
* Train: the cutting plane of `trace_rows`: solve the model over the paths found so far,
  add the longest path at the new design, until no path is longer than the model there
  (or `MAX_ROUNDS`). The model bounds the simulated step from below everywhere, so the
  solver's certified lower bound of it bounds the best simulated step. Where contention
  matters the model is loose, and its optimum need not be the best simulated design, so a
  pattern search on the simulated step itself (`_refine`) starts from the model's optimum
  and the equal split; the design returned is the best simulated, and the gap between its
  simulated step and that lower bound is the certified gap to the best simulated step.
  `pattern_search` (`studies.simulated_search`) is the search itself, on any simulated
  objective (the multi-workload runs with trace sets and `studies.runtime` use it too).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.inputs import DATA_DIR
from libra_jax.inputs.chakra_import import read_chakra
from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import Network
from libra_jax.model import step_trace
from libra_jax.model.objective import max_violation
from libra_jax.model.problem import ConstraintSpec, ModelRows, problem_from_arrays
from libra_jax.model.timing import TimingModel
from libra_jax.model.trace_rows import TraceBound
from libra_jax.solvers.solve import SolveResult, equal_split, solve, violation_scale
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.evaluate import check_lengths, constraint_report, design_bandwidths
from libra_jax.studies.job.inputs import check_workload_source, design_inputs, to_timing
from libra_jax.studies.job.train import power_kwargs, power_of_run
from libra_jax.studies.simulated_search import objective_value, pattern_search
from libra_jax.types import LibraInputError, TraceSet, show

log = logging.getLogger(__name__)

#: Most cutting-plane rounds of `train_trace` (each adds one path); the gap is certified
#: whenever it stops.
MAX_ROUNDS = 40
#: Simulations per dimension the pattern search of `train_trace` may run (`_refine`).
REFINE_EVALS = 12


@dataclasses.dataclass(frozen=True)
class TraceInputs:
    """A trace run's inputs: network, cost rates [D] $ per GB/s (or None), spec, timing
    model, the trace set and where it came from."""

    network: Network
    cost_rates: np.ndarray | None
    spec: ConstraintSpec
    timing_model: TimingModel
    trace: TraceSet
    prefix: str


def trace_inputs(c: LibraConfig) -> TraceInputs:
    """The config of a trace run turned into its inputs (`TraceInputs`)."""
    w = c.workload
    check_workload_source(w)
    if w.chakra_et is None:
        raise LibraInputError("workload.chakra_et is null: this run reads no trace set.")
    if c.workloads is not None or c.cosearch.enabled:
        raise LibraInputError(
            f"workload.chakra_et={show(w.chakra_et)} with "
            f"{'workloads=...' if c.workloads is not None else 'cosearch.enabled=true'}: "
            "a trace set is one fixed job (its mapping is in the trace); run it alone.")
    if c.model != "pipelined":
        raise LibraInputError(
            f"workload.chakra_et={show(w.chakra_et)} with model={c.model}: a trace set is "
            "timed as ASTRA-sim runs it, by the simulated step; set model=pipelined.")
    if c.training_loop != "no_overlap":
        raise LibraInputError(
            f"training_loop={c.training_loop}: a trace set's own dependencies say what "
            "overlaps; remove training_loop (keep its default).")
    network, cost_rates, spec = design_inputs(c)
    tm, chunk_counts = to_timing(c, network.num_dims, network)
    if chunk_counts is not None:
        raise LibraInputError(
            f"system.chunks = {show(list(chunk_counts))}: a trace set's run takes one chunk "
            "count (the chunk-count search is for generated and file workloads).")
    groups = None if w.comm_groups is None else str(
        resolve_path(w.comm_groups, "workload.comm_groups"))
    trace = read_chakra(trace_prefix(w.chakra_et), groups, num_dims=network.num_dims)
    npus = int(np.prod(network.npus))
    if trace.num_ranks != npus:
        raise LibraInputError(
            f"workload.chakra_et={show(w.chakra_et)}: {trace.num_ranks} ranks "
            f"({trace.prefix}.0.et .. .{trace.num_ranks - 1}.et) but the network "
            f"{network.notation} has {npus} NPUs; ASTRA-sim runs one rank per NPU: give a "
            "network of that many NPUs.")
    return TraceInputs(network, cost_rates, spec, tm, trace, str(w.chakra_et))


def trace_prefix(value) -> str:
    """Where ``workload.chakra_et`` points: the prefix as given when its rank 0 file is
    there (relative to the working directory), else the one shipped with the package
    (``libra_jax/data/<prefix>``, e.g. ``traces/llm8/wl``) when that exists; otherwise a
    `LibraInputError` naming the key and where it looked."""
    text = os.path.expanduser(str(value))
    candidates = [pathlib.Path(text)]
    if not os.path.isabs(text):
        candidates.append(DATA_DIR / text)
    for c in candidates:
        if any(pathlib.Path(f"{c}.0{ext}").is_file() for ext in (".et", ".et.gz")):
            return str(c)
    looked = " and ".join(f"{c}.0.et(.gz)" for c in candidates)
    raise LibraInputError(
        f"workload.chakra_et = {show(str(value))}: no trace set there (a Chakra trace set is "
        f"<prefix>.<rank>.et or .et.gz for ranks 0, 1, ...; looked for {looked}).")


@dataclasses.dataclass(frozen=True)
class TraceEvaluation:
    """A design evaluated on a trace set.

    Attributes:
      inputs: the `TraceInputs`. bandwidth_gbps: [D] the design, GB/s per NPU.
      timing: `step_trace.simulate_trace`'s result (step ns, each rank's end, classes).
      lower_bound_ns: `TraceBound`'s lower bound at the design: the longest path, every
        node at its isolated time, or a rank's compute or queue work if longer.
      network_cost_usd: the design's cost, or None without a cost model.
      power: (rates [D] W per GB/s, static W) or None. constraints: `constraint_report`.
      simulate_seconds: wall time of the simulation.
    """

    inputs: TraceInputs
    bandwidth_gbps: np.ndarray
    timing: object
    lower_bound_ns: float
    network_cost_usd: float | None
    power: object
    constraints: dict
    simulate_seconds: float


def simulate(inputs: TraceInputs, bw) -> object:
    """The simulated step of the trace set at ``bw`` [D] GB/s (`step_trace.simulate_trace`)."""
    n = inputs.network
    return step_trace.simulate_trace(inputs.trace, n.block_codes, n.npus,
                                     np.asarray(bw, np.float64), inputs.timing_model)


def evaluate_trace(c: LibraConfig) -> TraceEvaluation:
    """Time the trace set at the configured design (``bandwidth_gbps``)."""
    inputs = trace_inputs(c)
    bw = design_bandwidths(c, inputs.network.num_dims)
    check_lengths(inputs.spec, inputs.network.num_dims)
    bound = TraceBound(inputs.trace, inputs.network, inputs.timing_model)
    used = bound.used_dims()
    for d in range(inputs.network.num_dims):
        if bw[d] <= 0 and used[d]:
            raise LibraInputError(
                f"bandwidth_gbps[{d}] = {show(float(bw[d]))} but the trace set's traffic "
                f"crosses dimension {d}: give it a bandwidth > 0.")
    t0 = time.perf_counter()
    timing = simulate(inputs, bw)
    seconds = time.perf_counter() - t0
    x = np.where(bw > 0, bw, 1.0)
    lower = bound.value_ns(bound.rows([bound.best_cut(x)[1]]), x)
    cost = None if inputs.cost_rates is None else float(inputs.cost_rates @ bw)
    return TraceEvaluation(inputs, bw, timing, float(lower), cost,
                           power_of_run(c, inputs.network, inputs.spec),
                           constraint_report(inputs.spec, bw, cost, inputs.cost_rates),
                           seconds)


@dataclasses.dataclass(frozen=True)
class TraceRun:
    """`train_trace`'s result.

    Attributes:
      inputs: the `TraceInputs`.
      result: the solver's `SolveResult` on the final model (its ``lower_bound`` is a
        certified lower bound of the best simulated step, for ``objective=perf``).
      bandwidth_gbps: [D] the design returned: the best simulated of the model's optimum,
        the equal split and the pattern search around them (`_refine`).
      exact_step_ns: its simulated step (ns). timing: its simulation.
      baseline_bw_gbps, baseline_exact_ns: the equal split of the budget (or the feasible
        point nearest to it) and its simulated step.
      rounds: cutting-plane rounds (paths in the model). converged: the last design's
        longest path equals the model there (no path left to add). searched: designs
        simulated by the pattern search. max_violation: the design's largest constraint
        violation over the total bandwidth (as `SolveResult.max_violation`).
      solve_seconds: the solves and the path searches, wall; compile_seconds: JAX
        compilation in the solves. power: (rates [D] W per GB/s, static W) or None.
    """

    inputs: TraceInputs
    result: SolveResult
    bandwidth_gbps: np.ndarray
    exact_step_ns: float
    timing: object
    baseline_bw_gbps: np.ndarray
    baseline_exact_ns: float
    rounds: int
    converged: bool
    searched: int
    max_violation: float
    solve_seconds: float
    compile_seconds: float
    power: object


def train_trace(c: LibraConfig) -> TraceRun:
    """The design the run's objective prefers for the trace set (module docstring)."""
    if c.bandwidth_gbps is not None:
        raise LibraInputError(
            f"bandwidth_gbps={show(list(c.bandwidth_gbps))} is an input of libra-evaluate "
            "(evaluate a given design); libra-train optimises the bandwidths. Remove it, or "
            "run libra-evaluate.")
    inputs = trace_inputs(c)
    net = inputs.network
    power = power_of_run(c, net, inputs.spec)
    bound = TraceBound(inputs.trace, net, inputs.timing_model)

    def make_problem(rows):
        return problem_from_arrays(np.zeros((0, net.num_dims)), np.zeros(0), 0.0,
                                   inputs.cost_rates, inputs.spec, rows=rows)

    cut = cutting_plane([(1.0, bound)], make_problem, lambda p: solve(
        p, objective=c.objective, method=c.solver.method, **power_kwargs(power)),
        start_point(net.num_dims, inputs.spec))
    problem, result = cut.problem, cut.result
    log.info("trace %s: %d cutting-plane rounds (%s), %.2f s", inputs.prefix, cut.rounds,
             "converged" if cut.converged else "stopped", cut.seconds)
    base = equal_split(problem)
    used = bound.used_dims()
    t1 = time.perf_counter()
    bw, timing, searched = _refine(inputs, problem, [result.bandwidth_gbps,
                                                     base.bandwidth_gbps],
                                   str(c.objective), power, used)
    base_timing = simulate(inputs, base.bandwidth_gbps)
    log.info("trace %s: %d designs simulated around the model's optimum, %.2f s",
             inputs.prefix, searched, time.perf_counter() - t1)
    with jax.enable_x64(True):
        viol = float(max_violation(jnp.asarray(bw), problem)) / violation_scale(problem)
    return TraceRun(inputs, result, bw, float(timing.time_ns), timing,
                    np.asarray(base.bandwidth_gbps, np.float64), float(base_timing.time_ns),
                    cut.rounds, cut.converged, searched, max(viol, 0.0), cut.seconds,
                    cut.compile_seconds, power)


def merge_rows(parts) -> ModelRows:
    """The `ModelRows` of ``sum_i w_i model_i``: ``parts`` is [(w_i >= 0, ModelRows)]; each
    part's pieces follow the previous parts' (its nesting shifted with them), their weights
    and its ``const0_s`` times w_i. A single part of weight 1 comes back with the same
    numbers."""
    d = parts[0][1].coef_gb.shape[1]
    offset, weight, piece, const, coef, nests, const0 = 0, [], [], [], [], [], 0.0
    total = sum(int(np.asarray(r.weight).shape[0]) for _, r in parts)
    for w, r in parts:
        j = int(np.asarray(r.weight).shape[0])
        weight.append(float(w) * np.asarray(r.weight, np.float64))
        piece.append(np.asarray(r.piece, int) + offset)
        const.append(np.asarray(r.const_s, np.float64))
        coef.append(np.asarray(r.coef_gb, np.float64).reshape(-1, d))
        nest = np.zeros((piece[-1].shape[0], total))
        if r.nest is not None:
            nest[:, offset:offset + j] = np.asarray(r.nest, np.float64)
        nests.append(nest)
        const0 += float(w) * float(r.const0_s)
        offset += j
    return ModelRows(weight=np.concatenate(weight), piece=np.concatenate(piece),
                     const_s=np.concatenate(const), coef_gb=np.concatenate(coef),
                     const0_s=const0, nest=np.concatenate(nests))


@dataclasses.dataclass(frozen=True)
class CuttingPlane:
    """`cutting_plane`'s result: the last model's ``problem`` and its solve ``result`` (its
    ``lower_bound`` bounds the best simulated objective), ``rounds`` (solves), whether it
    ``converged`` (no trace had a path longer than its model at the last design), ``paths``
    (per part, the cuts of a `TraceBound`; None for fixed rows), wall ``seconds`` net of
    ``compile_seconds``."""

    problem: object
    result: SolveResult
    rounds: int
    converged: bool
    paths: list
    seconds: float
    compile_seconds: float


def cutting_plane(parts, make_problem, solve_problem, start) -> CuttingPlane:
    """Minimise ``sum_i w_i model_i`` where ``parts`` = [(w_i, model_i)] and a model is a
    `TraceBound` (its paths found as needed, from its longest path at ``start``) or fixed
    `ModelRows` (e.g. a workload file's convex step, `timing.model_rows`): solve the model
    over the paths so far (``solve_problem(make_problem(rows))``), add each trace's longest
    cut at the new design where it is longer than its model there, until none is (converged)
    or `MAX_ROUNDS` solves. Every part bounds its simulated step from below at every design,
    so the solver's certified lower bound bounds the best simulated weighted sum."""
    t0 = time.perf_counter()
    paths = [[m.best_cut(start)[1]] if isinstance(m, TraceBound) else None for _, m in parts]
    rounds, compile_s, converged = 0, 0.0, False
    while True:
        rows = [m.rows(p) if p is not None else m for (_, m), p in zip(parts, paths)]
        problem = make_problem(merge_rows([(w, r) for (w, _), r in zip(parts, rows)]))
        result = solve_problem(problem)
        rounds += 1
        compile_s += float(result.compile_seconds or 0.0)
        if result.status != "ok" or rounds >= MAX_ROUNDS:
            break
        x = np.asarray(result.bandwidth_gbps, np.float64)
        added = False
        for (_, m), p, r in zip(parts, paths, rows):
            if p is None:
                continue
            longest, path = m.best_cut(x)
            if longest > m.value_ns(r, x) * (1 + 1e-9) + 1e-6:
                p.append(path)
                added = True
        if not added:
            converged = True
            break
    return CuttingPlane(problem, result, rounds, converged, paths,
                        time.perf_counter() - t0 - compile_s, compile_s)


def _refine(inputs: TraceInputs, problem, starts, objective: str, power, used):
    """`pattern_search` on the trace set's simulated objective (`objective_value`): (design,
    its simulation, designs simulated)."""
    def value(x):
        t = simulate(inputs, x)
        return objective_value(inputs, objective, power, x, float(t.time_ns)), t

    return pattern_search(value, problem, starts, used, REFINE_EVALS * inputs.network.num_dims)


def start_point(num_dims: int, spec: ConstraintSpec) -> np.ndarray:
    """A design to find the first path at: the equal split of the budget, else 1 GB/s per
    dimension (only which path is longest there matters)."""
    total = spec.total_bw_gbps
    return np.full(num_dims, float(total) / num_dims if total else 1.0)
