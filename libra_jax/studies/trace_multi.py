"""Multi-workload runs with imported trace sets (issue 32): ``workloads`` entries that are
Chakra trace sets (``{chakra_et: <prefix>, comm_groups: <json or null>, name: ...}``) next to
workload files, on one network, timed by the simulated step (``model=pipelined``).

* Timing: a trace entry's step is `step_trace.simulate_trace` of the trace set (the slowest
  rank, as ASTRA-sim reports it); a file entry's is `timing.step_time_ns` of its step graph
  (as ``model=pipelined`` single runs report it: `step.simulate_step`, or the pg_name rings
  of `step_partial` where a group spans part of a dimension), with the run's
  ``training_loop``. A trace's own dependencies say what overlaps, so ``training_loop``
  applies to the file entries only.
* Objectives: ``sum_time`` = sum_i w_i step_i (ns) and ``sum_time_x_cost`` = network cost x
  that sum (ns x $). ``worst_slowdown`` is refused: a slowdown divides by the workload's
  own best simulated step, which is known only within a gap, and its robust solver
  (`studies.multi`) takes LIBRA's model only.
* libra-evaluate (`evaluate_timed_multi`): each workload's simulated step at the design and
  the weighted objective.
* libra-train (`train_timed_multi`): the cutting plane of `studies.job.trace.cutting_plane`
  over sum_i w_i model_i, each model a convex lower bound of its workload's simulated step
  at every design (a trace's `trace_rows.TraceBound`, its paths added as needed; a file's
  `timing.model_rows` plus its compute), so the solver's certified lower bound of the sum
  bounds the best simulated objective; then `trace.pattern_search` on the simulated
  objective from the model's optimum and the equal split. The design returned is the best
  simulated; its gap to that bound is certified.

Units: GB/s per NPU per dimension, ns, $.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import time

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import Network
from libra_jax.model import timing
from libra_jax.model.objective import max_violation
from libra_jax.model.problem import ConstraintSpec, ModelRows, problem_from_arrays
from libra_jax.model.trace_rows import TraceBound
from libra_jax.solvers.solve import SolveResult, equal_split, solve, violation_scale
from libra_jax.studies.job import trace
from libra_jax.studies.job.config import LibraConfig, TrainingLoop
from libra_jax.studies.job.evaluate import check_lengths, constraint_report, design_bandwidths
from libra_jax.studies.job.inputs import (
    check_workload_entry,
    design_inputs,
    entry_config,
    entry_errors,
    to_inputs,
    to_timing,
)
from libra_jax.studies.multi import check_weights
from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)


def has_trace(c: LibraConfig) -> bool:
    """True when the run's ``workloads`` name a trace set (this module runs it)."""
    return c.workloads is not None and any(e.chakra_et is not None for e in c.workloads)


@dataclasses.dataclass(frozen=True)
class TimedWorkload:
    """One entry of ``workloads``, timed by its simulated step.

    Attributes:
      name, weight: the entry's name (default: the trace prefix's or the file's stem) and w_i.
      source: ``"chakra_et"`` or ``"file"``; path: the trace prefix or the resolved file.
      trace_inputs: the trace's `trace.TraceInputs` (None for a file).
      workload: the file's `Workload` (None for a trace). timing_model: its `TimingModel`.
      model: its convex lower bound: a `TraceBound`, or a file's `ModelRows` (its compute
        in ``const0_s``).
    """

    name: str
    weight: float
    source: str
    path: str
    trace_inputs: trace.TraceInputs | None
    workload: object
    timing_model: object
    model: TraceBound | ModelRows

    def simulate_ns(self, network: Network, bw) -> float:
        """The simulated step at ``bw`` [D] GB/s (ns)."""
        if self.trace_inputs is not None:
            return float(trace.simulate(self.trace_inputs, bw).time_ns)
        return float(timing.step_time_ns(self.workload, network, self.timing_model,
                                         np.asarray(bw, np.float64)))

    def used_dims(self) -> np.ndarray:
        """[D] bool: the dimensions its traffic crosses."""
        if isinstance(self.model, TraceBound):
            return self.model.used_dims()
        return np.any(np.asarray(self.model.coef_gb) > 0, axis=0)


@dataclasses.dataclass(frozen=True)
class TimedMultiInputs:
    """A timed multi-workload run's inputs: the network, cost rates [D] $ per GB/s (or
    None), spec, the workloads, their weights [N] and the multi objective."""

    network: Network
    cost_rates: np.ndarray | None
    spec: ConstraintSpec
    workloads: list
    weights: np.ndarray
    objective: str

    def objective_value(self, bw, steps_ns) -> float:
        """The multi objective at ``bw`` of the workloads' simulated steps [N] ns: ns
        (sum_time) or ns x $ (sum_time_x_cost)."""
        total = float(self.weights @ np.asarray(steps_ns, np.float64))
        if self.objective == "sum_time_x_cost":
            return total * float(self.cost_rates @ np.asarray(bw, np.float64))
        return total


def timed_multi_inputs(c: LibraConfig) -> TimedMultiInputs:
    """The config of a multi-workload run with a trace set turned into its inputs."""
    if c.workloads is None or len(c.workloads) == 0:
        raise LibraInputError("workloads is null or empty; give at least one entry.")
    first = next((i for i, e in enumerate(c.workloads) if e.chakra_et is not None), None)
    named = (f"workloads[{first}].chakra_et={show(c.workloads[first].chakra_et)}"
             if first is not None else "workloads")
    w = c.workload
    given = [f"workload.{k}={show(getattr(w, k))}" for k in
             ("file", "communicator_file", "chakra_et", "comm_groups", "generator")
             if getattr(w, k) is not None]
    if given:
        raise LibraInputError(
            f"workloads and {', '.join(given)} are both set: give the workloads either as "
            "one workload or as the workloads list (set those keys to null).")
    if c.cosearch.enabled:
        raise LibraInputError("workloads with cosearch.enabled=true: the co-search maps one "
                              "generated workload; set cosearch.enabled=false.")
    if c.model != "pipelined":
        raise LibraInputError(
            f"{named} with model={c.model}: a trace set is timed as ASTRA-sim runs it, by the "
            "simulated step, and so is every workload of the run; set model=pipelined.")
    if c.objective != "perf":
        raise LibraInputError(
            f"objective={c.objective} is not used with workloads; choose multi_objective "
            "(sum_time | sum_time_x_cost) and leave objective=perf.")
    objective = str(c.multi_objective.value)
    if objective == "worst_slowdown":
        raise LibraInputError(
            f"multi_objective=worst_slowdown with {named}: not available; a slowdown divides "
            "by a workload's own best simulated step, which is known only within a gap, and "
            "the robust solver takes LIBRA's model only. Use multi_objective=sum_time or "
            "sum_time_x_cost.")
    if objective == "sum_time_x_cost" and c.cost_model.file is None:
        raise LibraInputError(
            "multi_objective=sum_time_x_cost needs a cost model, but cost_model.file is null; "
            "set cost_model.file or use multi_objective=sum_time.")
    weights = check_weights(c.weights, len(c.workloads), "weights")
    network, cost_rates, spec = design_inputs(c)
    out = []
    for i, entry in enumerate(c.workloads):
        source = check_workload_entry(entry, i)
        sub = entry_config(c, entry)
        with entry_errors(i):
            if source == "chakra_et":
                sub = dataclasses.replace(sub, training_loop=TrainingLoop.no_overlap)
                ti = trace.trace_inputs(sub)
                out.append(TimedWorkload(
                    entry.name or pathlib.Path(ti.prefix).name, float(weights[i]), source,
                    ti.trace.prefix, ti, None, ti.timing_model,
                    TraceBound(ti.trace, network, ti.timing_model)))
                continue
            _, workload, _, _ = to_inputs(sub)
            path = str(resolve_path(entry.file, "workload.file"))
            tm, chunks = to_timing(sub, network.num_dims, network)
            if chunks is not None:
                raise LibraInputError(
                    f"system.chunks = {show(chunks)}: a run with a trace set in workloads "
                    "takes one chunk count.")
        rows = timing.model_rows(workload, network, tm)
        rows = dataclasses.replace(rows, const0_s=float(rows.const0_s) + float(
            np.sum(workload.compute_ns)) / 1e9)
        out.append(TimedWorkload(entry.name or workload.name, float(weights[i]), source,
                                 path, None, workload, tm, rows))
    if c.training_loop != "no_overlap":
        log.info("training_loop=%s applies to the workload files; the trace sets' own "
                 "dependencies say what overlaps", c.training_loop)
    return TimedMultiInputs(network, cost_rates, spec, out, weights, objective)


@dataclasses.dataclass(frozen=True)
class TimedMultiEvaluation:
    """A design evaluated on the workloads: ``steps_ns`` [N] their simulated steps,
    ``objective_value`` (ns or ns x $), ``network_cost_usd`` (or None), ``constraints``
    (`constraint_report`), ``simulate_seconds``."""

    inputs: TimedMultiInputs
    bandwidth_gbps: np.ndarray
    steps_ns: np.ndarray
    objective_value: float
    network_cost_usd: float | None
    constraints: dict
    simulate_seconds: float


def evaluate_timed_multi(c: LibraConfig) -> TimedMultiEvaluation:
    """Each workload's simulated step at the configured design and the multi objective."""
    inputs = timed_multi_inputs(c)
    net = inputs.network
    bw = design_bandwidths(c, net.num_dims)
    check_lengths(inputs.spec, net.num_dims)
    for i, wl in enumerate(inputs.workloads):
        used = wl.used_dims()
        for d in range(net.num_dims):
            if bw[d] <= 0 and used[d]:
                raise LibraInputError(
                    f"bandwidth_gbps[{d}] = {show(float(bw[d]))} but the traffic of "
                    f"workloads[{i}] ({wl.name}) crosses dimension {d}: give it a bandwidth "
                    "> 0.")
    t0 = time.perf_counter()
    steps = np.array([wl.simulate_ns(net, bw) for wl in inputs.workloads])
    seconds = time.perf_counter() - t0
    cost = None if inputs.cost_rates is None else float(inputs.cost_rates @ bw)
    return TimedMultiEvaluation(inputs, bw, steps, inputs.objective_value(bw, steps), cost,
                                constraint_report(inputs.spec, bw, cost, inputs.cost_rates),
                                seconds)


@dataclasses.dataclass(frozen=True)
class TimedMultiRun:
    """`train_timed_multi`'s result.

    Attributes:
      inputs: the `TimedMultiInputs`.
      result: the solver's `SolveResult` on the final model; its ``lower_bound`` (ns, or
        ns x $) is a certified lower bound of the best simulated objective.
      bandwidth_gbps: [D] the design returned (the best simulated of the pattern search).
      steps_ns: [N] each workload's simulated step there; objective_value: the simulated
        objective there (ns or ns x $).
      baseline_bw_gbps, baseline_steps_ns, baseline_objective_value: the equal split (or
        the feasible point nearest to it), its steps and objective.
      rounds, converged, paths: the cutting plane (`trace.CuttingPlane`): solves, whether
        no trace's path was longer than its model at the last design, paths per trace
        (None for a file). searched: designs simulated by the pattern search.
      max_violation: the design's largest constraint violation over the total bandwidth.
      solve_seconds, compile_seconds: the cutting plane's wall time net of JAX compilation,
        and that compilation.
    """

    inputs: TimedMultiInputs
    result: SolveResult
    bandwidth_gbps: np.ndarray
    steps_ns: np.ndarray
    objective_value: float
    baseline_bw_gbps: np.ndarray
    baseline_steps_ns: np.ndarray
    baseline_objective_value: float
    rounds: int
    converged: bool
    paths: list
    searched: int
    max_violation: float
    solve_seconds: float
    compile_seconds: float

    @property
    def gap(self) -> float | None:
        """(simulated objective - certified lower bound) / that bound, or None."""
        lb = self.result.lower_bound
        if lb is None or not np.isfinite(lb) or lb <= 0:
            return None
        return (self.objective_value - float(lb)) / float(lb)


def train_timed_multi(c: LibraConfig) -> TimedMultiRun:
    """The design of the least simulated multi objective (module docstring)."""
    if c.bandwidth_gbps is not None:
        raise LibraInputError(
            f"bandwidth_gbps={show(list(c.bandwidth_gbps))} is an input of libra-evaluate "
            "(evaluate a given design); libra-train optimises the bandwidths. Remove it, or "
            "run libra-evaluate.")
    inputs = timed_multi_inputs(c)
    net, wls = inputs.network, inputs.workloads
    check_lengths(inputs.spec, net.num_dims)
    solver_objective = "perf" if inputs.objective == "sum_time" else "perf_per_cost"

    def make_problem(rows):
        return problem_from_arrays(np.zeros((0, net.num_dims)), np.zeros(0), 0.0,
                                   inputs.cost_rates, inputs.spec, rows=rows)

    cut = trace.cutting_plane(
        [(wl.weight, wl.model) for wl in wls], make_problem,
        lambda p: solve(p, objective=solver_objective, method=c.solver.method),
        trace.start_point(net.num_dims, inputs.spec))
    log.info("%d workloads: %d cutting-plane rounds (%s), %.2f s", len(wls), cut.rounds,
             "converged" if cut.converged else "stopped", cut.seconds)
    problem = cut.problem
    base = equal_split(problem)
    used = np.any([wl.used_dims() for wl in wls], axis=0)

    def value(x):
        steps = np.array([wl.simulate_ns(net, x) for wl in wls])
        return inputs.objective_value(x, steps), steps

    t1 = time.perf_counter()
    bw, steps, searched = trace.pattern_search(
        value, problem, [cut.result.bandwidth_gbps, base.bandwidth_gbps], used,
        trace.REFINE_EVALS * net.num_dims)
    base_bw = np.asarray(base.bandwidth_gbps, np.float64)
    base_value, base_steps = value(base_bw)
    log.info("%d designs simulated around the model's optimum, %.2f s", searched,
             time.perf_counter() - t1)
    with jax.enable_x64(True):
        viol = float(max_violation(jnp.asarray(bw), problem)) / violation_scale(problem)
    return TimedMultiRun(inputs, cut.result, np.asarray(bw, np.float64), steps,
                         inputs.objective_value(bw, steps), base_bw, base_steps, base_value,
                         cut.rounds, cut.converged, cut.paths, searched, max(viol, 0.0),
                         cut.seconds, cut.compile_seconds)

