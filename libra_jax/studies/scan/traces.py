"""Trace sets in a scan (issue 32): a ``workloads`` entry ``{file: null, chakra_et: <prefix>,
comm_groups: <json or null>, name: ...}`` is an imported Chakra trace set, scanned on every
shape of the space like a workload file, timed as ASTRA-sim runs it.

* Fit, checked up front (`load_scan_trace`; a design it cannot fit is refused, never
  skipped): the trace has one rank per NPU, so ``space.npus`` must equal its rank count; its
  collectives' ``involved_dim`` lists have one entry per network dimension, so it is read
  once per dimension count the space scans (``space.min_dims`` .. ``space.max_dims``) and
  every count must read (`read_chakra` refuses a shorter list, trims a longer one only when
  its extra entries are all False). A trace whose groups are all ``pg_name`` groups (flat
  rings over listed NPUs) fits every shape of that NPU count.
* Each design (`solve_trace_design`): the cutting plane of `studies.job.trace.cutting_plane`
  on the design's network (its blocks matter: a trace's collectives and messages are timed
  per block) under sum(bw) == budget and the tiers' MaxGbps, objective perf; the row's
  design's bandwidths are the best simulated of the pattern search
  (`studies.job.trace.pattern_search`, as ``libra-train`` on a trace) from the model's optimum
  and the equal split; ``step_time_ns`` is their simulated step
  (`step_trace.simulate_trace`) and ``optimality_gap`` its certified gap to the best
  simulated step of that design, (step - the solver's certified lower bound of the model) /
  that bound. Where contention dominates the bound is loose (flat near the equal split), so
  the search, not the model, picks the design, and the gap says how far it may be.
* Timing model: ``model=pipelined`` with its defaults (one chunk, LIFO, one queue per
  dimension, the congestion-unaware backend, no link latency, GB = 1e9 bytes), the same for
  every design; the ``mapping`` column reads ``trace`` (the mapping is in the trace).

Units: GB/s per NPU per dimension, ns.
"""

from __future__ import annotations

import dataclasses
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.inputs.chakra_import import read_chakra
from libra_jax.inputs.paths import resolve_path
from libra_jax.model import step_trace
from libra_jax.model.problem import ConstraintSpec, problem_from_arrays
from libra_jax.model.timing_spec import TimingModel
from libra_jax.model.trace_rows import TraceBound
from libra_jax.model.objective import max_violation
from libra_jax.solvers.solve import equal_split, solve, violation_scale
from libra_jax.studies.job.trace import (
    REFINE_EVALS,
    cutting_plane,
    pattern_search,
    start_point,
    trace_prefix,
)
from libra_jax.types import LibraInputError, show

#: The timing model of every trace design of a scan (module docstring).
SCAN_TRACE_TIMING = TimingModel(model="pipelined")


@dataclasses.dataclass(frozen=True)
class ScanTrace:
    """A trace set of the scan: its ``prefix``, ``comm_groups`` (resolved path or None),
    ``ranks`` and ``sets`` {dimension count: `TraceSet` read for it}."""

    prefix: str
    comm_groups: str | None
    ranks: int
    sets: dict


def load_scan_trace(w, npus: int, dims, index: int) -> ScanTrace:
    """``workloads[index]`` (a `ScanWorkloadConfig` with ``chakra_et``) read for every
    dimension count of the space, checked to fit (module docstring).

    Raises:
      LibraInputError: naming ``workloads[index].<key>``: parallel degrees or a mapping
        search given (the mapping is in the trace), a missing trace set, a rank count other
        than ``space.npus``, a dimension count its ``involved_dim`` lists do not fit.
    """
    key = f"workloads[{index}]"
    if w.tp != 1 or w.dp is not None or str(w.mapping) != "fixed":
        raise LibraInputError(
            f"{key}.chakra_et={show(w.chakra_et)} with tp={show(w.tp)}, dp={show(w.dp)}, "
            f"mapping={show(str(w.mapping))}: a trace set's mapping is in the trace; leave "
            f"{key}.tp, .dp and .mapping at their defaults (1, null, fixed).")
    try:
        prefix = trace_prefix(w.chakra_et)
    except LibraInputError as e:
        raise LibraInputError(str(e).replace("workload.chakra_et", f"{key}.chakra_et")) \
            from None
    groups = None if w.comm_groups is None else str(
        resolve_path(w.comm_groups, f"{key}.comm_groups"))
    sets = {}
    for d in dims:
        try:
            sets[d] = read_chakra(prefix, groups, num_dims=d)
        except LibraInputError as e:
            raise LibraInputError(
                f"{key}.chakra_et={show(w.chakra_et)} does not fit the shapes of {d} "
                f"dimensions the scan covers (space.min_dims..space.max_dims = "
                f"{min(dims)}..{max(dims)}): {e} Scan only the dimension counts the trace "
                "fits (space.min_dims and space.max_dims).") from None
        ranks = sets[d].num_ranks
        if ranks != npus:
            raise LibraInputError(
                f"{key}.chakra_et={show(w.chakra_et)}: {ranks} ranks but space.npus = "
                f"{npus}; a trace set runs one rank per NPU, so it fits only designs of "
                f"{ranks} NPUs: set space.npus={ranks} or scan it apart.")
    return ScanTrace(prefix, groups, npus, sets)


def trace_name(w, trace: ScanTrace) -> str:
    """The entry's name: ``name``, else the prefix's last part."""
    return w.name or pathlib.Path(trace.prefix).name


def solve_trace_design(trace: ScanTrace, network, budget_gbps: float, upper_gbps) -> dict:
    """One design of a trace workload (module docstring): {bandwidth_gbps [D], step_ns
    (simulated), lower_bound_ns (certified), gap, status, max_violation}."""
    d = network.num_dims
    ts = trace.sets[d]
    upper = [None if not np.isfinite(u) else float(u) for u in np.asarray(upper_gbps)]
    spec = ConstraintSpec(total_bw_gbps=float(budget_gbps),
                          upper_gbps=None if all(u is None for u in upper) else upper)
    bound = TraceBound(ts, network, SCAN_TRACE_TIMING)

    def make_problem(rows):
        return problem_from_arrays(np.zeros((0, d)), np.zeros(0), 0.0, None, spec, rows=rows,
                                   field_prefix="space")

    cut = cutting_plane([(1.0, bound)], make_problem, lambda p: solve(p, "perf"),
                        start_point(d, spec))
    def value(x):
        t = float(step_trace.simulate_trace(ts, network.block_codes, network.npus, x,
                                            SCAN_TRACE_TIMING).time_ns)
        return t, t

    bw, step, _ = pattern_search(value, cut.problem, [cut.result.bandwidth_gbps,
                                                      equal_split(cut.problem).bandwidth_gbps],
                                 bound.used_dims(), REFINE_EVALS * d)
    with jax.enable_x64(True):
        viol = float(max_violation(jnp.asarray(bw), cut.problem)) / violation_scale(
            cut.problem)
    lb = cut.result.lower_bound
    gap = (step - float(lb)) / float(lb) if lb is not None and np.isfinite(lb) and lb > 0 \
        else float("inf")
    return dict(bandwidth_gbps=bw, step_ns=step, lower_bound_ns=lb, gap=gap,
                status=cut.result.status, max_violation=max(viol, 0.0))
