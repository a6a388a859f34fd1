"""Design time and run time together (issue 33; docs/runtime.md, "Co-design"): the
bandwidths optimised for ASTRA-sim's runtime (the order each chunk visits the dimensions,
the order at a dimension, the all-reduce's hierarchy, each dimension's algorithm, the active
chunks per dimension), and the runtime chosen with them.

* `optimise_for_runtime`: one runtime. The convex problem of `timing.build_timed_problem`
  is solved; its certified lower bound bounds the simulated objective from below at every
  design (for the default runtime the model is today's). The simulated objective
  (`timing.step_time_ns`, then `simulated_search.objective_value`) is then refined by the
  pattern search of `simulated_search.pattern_search` from the model's optimum and the
  equal split (and any design given), and the gap (simulated - bound) / bound is certified.
* `search_runtime`: ``runtime=search``. Every candidate runtime (`candidate_runtimes`)
  optimised as above; the joint optimum is the best simulated; the table compares it with
  LIBRA alone (the default runtime's model optimum, run with the best runtime there),
  runtime alone (the equal split, best runtime) and the default (LIBRA's optimum with the
  default runtime). The certified bound of the search is the least candidate bound.

Objective values are in the units of `simulated_search.objective_value`: ns (perf), ns x $
(perf_per_cost), J per step (perf_per_watt).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Sequence

import numpy as np

from libra_jax.model import pipelined, timing
from libra_jax.model.timing import TimingModel
from libra_jax.model.timing_spec import (
    ALGORITHMS,
    COLLECTIVE_OPTIMIZATIONS,
    INTER_DIM_SCHEDULING,
    INTRA_DIM_SCHEDULING,
    MAX_ACTIVE_CHUNKS,
)
from libra_jax.solvers.solve import SolveResult, equal_split, solve
from libra_jax.studies.simulated_search import objective_value, pattern_search
from libra_jax.types import LibraInputError, show

#: ASTRA-sim's default runtime, as `TimingModel` fields.
DEFAULT_RUNTIME = dict(inter_dim_scheduling="ascending", intra_dim_scheduling="fifo",
                       collective_optimization="local_bw_aware", algorithm=None,
                       active_chunks_per_dim=1)
#: ``runtime_search.inter_dim_scheduling`` when null (themis_flex: name it to try it).
DEFAULT_SCHEDULINGS = ("ascending", "themis", "round_robin")
#: The one alternative to ring each block is searched with when ``runtime_search.algorithm``
#: is null: FullyConnected's dedicated links suit direct, a Switch halving-doubling (direct
#: where the dimension is not a power of two); a Ring's links join neighbours only.
BLOCK_ALTERNATIVE = {"Ring": None, "FullyConnected": "direct", "Switch": "halving_doubling"}
#: Simulations per dimension of a candidate's pattern search by default.
REFINE_EVALS = 12


def default_runtime(tm: TimingModel) -> TimingModel:
    """``tm`` with ASTRA-sim's default runtime (its other fields kept)."""
    return dataclasses.replace(tm, **DEFAULT_RUNTIME)


def runtime_of(tm: TimingModel) -> dict:
    """The runtime fields of ``tm`` (algorithm as a list, or None)."""
    out = {k: getattr(tm, k) for k in DEFAULT_RUNTIME}
    out["algorithm"] = None if tm.algorithm is None else list(tm.algorithm)
    return out


def runtime_label(tm: TimingModel) -> str:
    """A short name, e.g. ``themis fifo local_bw_aware [ring,direct] x1``."""
    algo = "ring" if tm.algorithm is None else ",".join(tm.algorithm)
    return (f"{tm.inter_dim_scheduling} {tm.intra_dim_scheduling} "
            f"{tm.collective_optimization} [{algo}] x{tm.active_chunks_per_dim}")


def default_algorithms(network) -> list[list[str]]:
    """Per dimension, the algorithms ``runtime=search`` tries when none are given: ring and
    the block's alternative (`BLOCK_ALTERNATIVE`)."""
    out = []
    for block, n in zip(network.blocks, network.npus):
        alt = BLOCK_ALTERNATIVE[block]
        if alt == "halving_doubling" and n & (n - 1):
            alt = "direct"
        out.append(["ring"] if alt is None else ["ring", alt])
    return out


def _names(values, key: str, choices: Sequence[str], default) -> list:
    """A candidate list of names, checked (null: ``default``)."""
    if values is None:
        return list(default)
    values = [getattr(v, "value", v) for v in values]
    if not values or len(set(values)) != len(values):
        raise LibraInputError(f"{key} = {show(values)}: give distinct values (or null).")
    for i, v in enumerate(values):
        if not isinstance(v, str) or v not in choices:
            raise LibraInputError(
                f"{key}[{i}] = {show(v)}: choose one of {', '.join(choices)}.")
    return values


def candidate_runtimes(tm: TimingModel, network, *, inter_dim_scheduling=None,
                       intra_dim_scheduling=None, collective_optimization=None,
                       algorithm=None, active_chunks_per_dim=None,
                       chunks=None) -> list[TimingModel]:
    """Every combination of the candidate lists (``runtime_search.*``; null: the default
    list) as timing models (``tm``'s other fields kept). Raises `LibraInputError` naming
    ``runtime_search.<key>`` and the value for a bad entry."""
    d = network.num_dims
    inter = _names(inter_dim_scheduling, "runtime_search.inter_dim_scheduling",
                   INTER_DIM_SCHEDULING, DEFAULT_SCHEDULINGS)
    intra = _names(intra_dim_scheduling, "runtime_search.intra_dim_scheduling",
                   INTRA_DIM_SCHEDULING, [tm.intra_dim_scheduling])
    coll = _names(collective_optimization, "runtime_search.collective_optimization",
                  COLLECTIVE_OPTIMIZATIONS, [tm.collective_optimization])
    if algorithm is None:
        algos = default_algorithms(network)
    else:
        algos = list(algorithm)
        if len(algos) != d:
            raise LibraInputError(
                f"runtime_search.algorithm = {show(algos)}: has {len(algos)} lists but the "
                f"network has {d} dimensions (one list of algorithms per dimension).")
        algos = [_names(a, f"runtime_search.algorithm[{i}]", ALGORITHMS, ())
                 for i, a in enumerate(algos)]
    active = [tm.active_chunks_per_dim] if active_chunks_per_dim is None \
        else list(active_chunks_per_dim)
    if not active or len(set(active)) != len(active):
        raise LibraInputError(f"runtime_search.active_chunks_per_dim = {show(active)}: give "
                              "distinct counts (or null).")
    for i, k in enumerate(active):
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_ACTIVE_CHUNKS:
            raise LibraInputError(
                f"runtime_search.active_chunks_per_dim[{i}] = {show(k)}: an integer in "
                f"1..{MAX_ACTIVE_CHUNKS}.")
    counts = [tm.chunks] if chunks is None else list(chunks)
    if not counts or len(set(counts)) != len(counts):
        raise LibraInputError(f"runtime_search.chunks = {show(counts)}: give distinct counts "
                              "(or null).")
    for i, k in enumerate(counts):
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= pipelined.MAX_CHUNKS:
            raise LibraInputError(f"runtime_search.chunks[{i}] = {show(k)}: an integer in "
                                  f"1..{pipelined.MAX_CHUNKS} (chunks per collective).")
    out = []
    for n, s, q, c, a, k in itertools.product(counts, inter, intra, coll,
                                              itertools.product(*algos), active):
        alg = None if all(x == "ring" for x in a) else tuple(a)
        out.append(dataclasses.replace(tm, chunks=n, inter_dim_scheduling=s,
                                       intra_dim_scheduling=q, collective_optimization=c,
                                       algorithm=alg, active_chunks_per_dim=k))
    return out


@dataclasses.dataclass(frozen=True)
class RuntimeInputs:
    """What a runtime study needs of a run: the network, workload, cost rates [D] $ per
    GB/s (or None), the `ConstraintSpec`, the objective, the solver method and power
    ((rates [D] W per GB/s, static W) or None)."""

    network: object
    workload: object
    cost_rates: np.ndarray | None
    spec: object
    objective: str = "perf"
    method: str = "ipm"
    power: object = None


@dataclasses.dataclass(frozen=True)
class RuntimeOptimum:
    """`optimise_for_runtime`'s result (objective values in `objective_value`'s units).

    Attributes:
      timing_model: the runtime (with the run's other timing fields).
      problem, model_result: the convex problem and its solve (the model's optimum).
      bandwidth_gbps: [D] the best simulated design found; step_time_ns: its simulated step;
        objective_value: its simulated objective.
      lower_bound: the model's certified lower bound, in the objective's units (None when
        the solve gave none); gap: (objective_value - lower_bound) / lower_bound.
      model_step_ns: the simulated step at the model's optimum.
      equal_split_gbps, equal_split_step_ns: the equal split (projected if infeasible) and
        its simulated step.
      searched: designs simulated; seconds: wall time (solve and search).
    """

    timing_model: TimingModel
    problem: object
    model_result: SolveResult
    bandwidth_gbps: np.ndarray
    step_time_ns: float
    objective_value: float
    lower_bound: float | None
    gap: float | None
    model_step_ns: float
    equal_split_gbps: np.ndarray
    equal_split_step_ns: float
    searched: int
    seconds: float


def simulated_value(inputs: RuntimeInputs, tm: TimingModel, bw) -> tuple[float, float]:
    """(simulated objective, simulated step ns) of design ``bw`` [D] GB/s under ``tm``."""
    bw = np.asarray(bw, np.float64)
    step_ns = float(timing.step_time_ns(inputs.workload, inputs.network, tm, bw))
    return objective_value(inputs, inputs.objective, inputs.power, bw, step_ns), step_ns


def bound_in_objective_units(objective: str, lower_bound) -> float | None:
    """The solver's lower bound (ns, ns x $, ns x W) in `objective_value`'s units (ns,
    ns x $, J); None without a finite positive one."""
    if lower_bound is None or not np.isfinite(float(lower_bound)) or float(lower_bound) <= 0:
        return None
    return float(lower_bound) * (1e-9 if objective == "perf_per_watt" else 1.0)


def optimise_for_runtime(inputs: RuntimeInputs, tm: TimingModel, *,
                         refine_evals: int = REFINE_EVALS,
                         starts: Sequence = ()) -> RuntimeOptimum:
    """The bandwidths for runtime ``tm`` (module docstring): the certified bound of the
    convex model, then the pattern search on the simulated objective from the model's
    optimum, the equal split and ``starts`` (designs [D] GB/s, e.g. another runtime's
    optimum); at most ``refine_evals`` x D simulations."""
    t0 = time.perf_counter()
    net = inputs.network
    problem = timing.build_timed_problem(net, inputs.workload, inputs.cost_rates, inputs.spec, tm)
    kw = {} if inputs.power is None else dict(power_rates_w_per_gbps=inputs.power[0],
                                              static_power_w=inputs.power[1])
    result = solve(problem, objective=inputs.objective, method=inputs.method, **kw)
    base = equal_split(problem)
    used = (np.any(np.asarray(problem.traffic_gb) > 0, axis=0)
            | np.any(np.asarray(problem.row_gb) > 0, axis=0))
    bw, step_ns, searched = pattern_search(
        lambda x: simulated_value(inputs, tm, x), problem,
        [result.bandwidth_gbps, base.bandwidth_gbps, *starts], used,
        int(refine_evals) * net.num_dims)
    value = objective_value(inputs, inputs.objective, inputs.power, bw, step_ns)
    bound = bound_in_objective_units(inputs.objective, result.lower_bound)
    return RuntimeOptimum(
        timing_model=tm, problem=problem, model_result=result,
        bandwidth_gbps=np.asarray(bw, np.float64), step_time_ns=float(step_ns),
        objective_value=float(value), lower_bound=bound,
        gap=None if bound is None else (float(value) - bound) / bound,
        model_step_ns=simulated_value(inputs, tm, result.bandwidth_gbps)[1],
        equal_split_gbps=np.asarray(base.bandwidth_gbps, np.float64),
        equal_split_step_ns=simulated_value(inputs, tm, base.bandwidth_gbps)[1],
        searched=int(searched), seconds=time.perf_counter() - t0)


@dataclasses.dataclass(frozen=True)
class RuntimeRow:
    """One row of the co-design table: ``name`` (joint optimum, LIBRA alone, runtime
    alone, default), its runtime (`TimingModel`), design [D] GB/s, simulated step (ns),
    network cost ($ or None), simulated objective, and the default's step / this step
    (``speedup``) and objective / this objective (``gain``)."""

    name: str
    timing_model: TimingModel
    bandwidth_gbps: np.ndarray
    step_time_ns: float
    network_cost_usd: float | None
    objective_value: float
    speedup: float
    gain: float


@dataclasses.dataclass(frozen=True)
class RuntimeSearch:
    """`search_runtime`'s result: every candidate's `RuntimeOptimum`, the index of the
    best, the table (`RuntimeRow`: joint optimum, LIBRA alone, runtime alone, default),
    the search's certified lower bound (least candidate bound, objective units, or None)
    and the joint optimum's gap to it."""

    candidates: list
    best: int
    rows: list
    lower_bound: float | None
    gap: float | None
    seconds: float

    @property
    def optimum(self) -> RuntimeOptimum:
        return self.candidates[self.best]


ROW_NAMES = ("joint optimum", "LIBRA alone", "runtime alone", "default")


def search_runtime(inputs: RuntimeInputs, tm: TimingModel, candidates: Sequence[TimingModel],
                   *, refine_evals: int = REFINE_EVALS) -> RuntimeSearch:
    """``runtime=search`` (module docstring): ``candidates`` (`candidate_runtimes`) each
    optimised by `optimise_for_runtime`, also from LIBRA's design (so the joint optimum is
    at least as good as every other row's design under its runtime)."""
    if not candidates:
        raise LibraInputError("runtime=search: no candidate runtime (runtime_search lists).")
    t0 = time.perf_counter()
    default_tm = default_runtime(tm)
    net = inputs.network
    default_problem = timing.build_timed_problem(net, inputs.workload, inputs.cost_rates,
                                                 inputs.spec, default_tm)
    kw = {} if inputs.power is None else dict(power_rates_w_per_gbps=inputs.power[0],
                                              static_power_w=inputs.power[1])
    libra_bw = np.asarray(solve(default_problem, objective=inputs.objective,
                                method=inputs.method, **kw).bandwidth_gbps, np.float64)
    equal_bw = np.asarray(equal_split(default_problem).bandwidth_gbps, np.float64)
    opts = [optimise_for_runtime(inputs, c, refine_evals=refine_evals, starts=[libra_bw])
            for c in candidates]
    best = first_best([o.objective_value for o in opts])

    def best_at(bw):
        vals = [simulated_value(inputs, c, bw) for c in candidates]
        i = first_best([v[0] for v in vals])
        return candidates[i], vals[i]

    default_val = simulated_value(inputs, default_tm, libra_bw)
    designs = [(ROW_NAMES[0], opts[best].timing_model, opts[best].bandwidth_gbps,
                (opts[best].objective_value, opts[best].step_time_ns)),
               (ROW_NAMES[1], *_swap(best_at(libra_bw), libra_bw)),
               (ROW_NAMES[2], *_swap(best_at(equal_bw), equal_bw)),
               (ROW_NAMES[3], default_tm, libra_bw, default_val)]
    rows = []
    for name, rt, bw, (value, step_ns) in designs:
        cost = None if inputs.cost_rates is None else float(inputs.cost_rates @ bw)
        rows.append(RuntimeRow(name, rt, np.asarray(bw, np.float64), float(step_ns), cost,
                               float(value), default_val[1] / step_ns,
                               default_val[0] / value))
    bounds = [o.lower_bound for o in opts]
    bound = None if any(b is None for b in bounds) else min(bounds)
    return RuntimeSearch(opts, best, rows, bound,
                         None if bound is None
                         else (opts[best].objective_value - bound) / bound,
                         time.perf_counter() - t0)


def first_best(values, rtol: float = 1e-9) -> int:
    """The first index within ``rtol`` of the least value: ties (runtimes the step does not
    tell apart) go to the earlier candidate, the default first in `candidate_runtimes`."""
    v = np.asarray(values, np.float64)
    return int(np.flatnonzero(v <= v.min() * (1 + rtol))[0])


def _swap(found, bw):
    """(runtime, design, value) from `best_at`'s (runtime, value) and the design."""
    return found[0], bw, found[1]
