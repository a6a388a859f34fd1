"""A chunk of designs -> its stacked `Problem` batches -> one result row per design.

Problems are built with the model's vectorised builder (`problem.problems_from_stacked`), one
call per group of equal sizes (D dims, K phases), so the chunk's problems never go through a
Python loop over `Problem` fields. With ``dedup`` the chunk solves each distinct (shape,
workload, mapping, budget, per-dimension bound) once, without prices: the optimal bandwidths
of the `perf` problem do not depend on the blocks or cost tiers, which only price the result,
except through a catalogue tier's ``MaxGbps`` (an upper bound on its dimension, so part of
the key; LIBRA's cost models have none). The dedup keys live for one chunk only, so nothing
grows with the number of designs scanned. Rows get ``network_power_w`` and
``energy_per_step_j`` when the cost model has ``Energy`` (`cost.power_rates_w_per_gbps`).

A design's result does not depend on how the scan is split (shards, ``scan.chunk_size``).
The problem solved for a dedup key is built from the key's fields alone (shape, workload,
mapping, budget, bounds), whichever design of the group comes first. The compiled program
that solves it must not depend on the split either: the engine's planner merges a call's
small buckets into larger ones and picks chunk sizes by what the call holds and what the
process compiled before, and XLA's programs for two chunk sizes or buckets round the last
digits differently (measured: one MSFT-1T design gave 923.3571114288541 GB/s in a call of
16 and 923.3571114288593 in a call of 1024, the same in any position of either). So a scan
solves with ``fixed_programs`` (`batch.solve_stacked`): each problem in its own bucket's
program, in calls of one size, `program_size`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import jax
import numpy as np

from libra_jax.inputs.cost import (
    cost_rates_usd_per_gbps,
    power_rates_w_per_gbps,
    tier_max_gbps,
)
from libra_jax.inputs.generators import Placement
from libra_jax.inputs.topology import Network
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.problem import Problem, merge_phases, problems_from_stacked
from libra_jax.solvers import batch
from libra_jax.studies.scan.space import (
    Design,
    ScanSpace,
    ScanWorkload,
    fixed_placement,
)
from libra_jax.studies.scan.traces import solve_trace_design
from libra_jax.types import LibraInputError


def design_mapping(
    w: ScanWorkload, shape: tuple[int, ...], mapping: Placement | None = None
) -> Placement:
    """``mapping``, or with None the workload's fixed mapping on the shape (`fixed_placement`).

    Raises:
      LibraInputError: None given and the TP group does not fit the shape.
    """
    if mapping is not None:
        return mapping
    p = fixed_placement(shape, w.tp)
    if p is None:
        raise LibraInputError(f"tp = {w.tp} cannot be laid on the shape {list(shape)}.")
    return p


def design_traffic(
    w: ScanWorkload, shape: tuple[int, ...], mapping: Placement | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Merged traffic (traffic_gb [K, D], weight [K]) of a workload on a shape.

    Forward and InputGrad use the TP group, WeightGrad the DP group, each on the dims (and
    shares of dims) the mapping gives it.

    Args:
      w: the workload.
      shape: [D] NPUs per dimension.
      mapping: where TP and DP sit (pp all 1); None: the fixed mapping (`fixed_placement`).

    Raises:
      LibraInputError: the TP group does not fit the shape, or the mapping does not match
        the shape and the workload's TP degree.
    """
    if mapping is None:
        mapping = design_mapping(w, shape)
    elif (len(mapping.tp) != len(shape) or math.prod(mapping.tp) != w.tp
          or any(t * p * d != n for t, p, d, n in zip(mapping.tp, mapping.pp, mapping.dp, shape))
          or math.prod(mapping.pp) != 1):
        raise LibraInputError(
            f"mapping = {mapping} of workload {w.name!r} (tp = {w.tp}) does not fit the shape "
            f"{list(shape)}: need tp_d * dp_d == n_d, pp all 1 and prod tp_d == tp."
        )
    tp_comm, dp_comm = Placement.comm(mapping.tp), Placement.comm(mapping.dp)
    rows = np.array([tp_comm, tp_comm, dp_comm], np.int32)  # Forward, InputGrad, WeightGrad
    comm = np.broadcast_to(rows[None], (w.collective.shape[0], 3, len(shape)))
    traffic = np.asarray(
        traffic_bytes(w.collective, w.size_bytes, comm), np.float64
    ).reshape(-1, len(shape))
    return merge_phases(traffic / 1e9)


class ChunkBuilder:
    """Traffic, mappings and network prices of designs, with caches of bounded size (designs
    come shape-major, so a cache that is cleared when full keeps the entries in use)."""

    def __init__(self, space: ScanSpace):
        self.space = space
        self._traffic: dict = {}
        self._nets: dict = {}
        self._physics: dict = {}
        self.traces: dict = {}  # (shape, blocks, workload, budget, MaxGbps) -> `_trace_row`

    def mapping(self, design: Design) -> Placement:
        """The design's TP/DP placement (its own, or its workload's fixed mapping)."""
        return design_mapping(self.space.workloads[design.workload], design.shape,
                              design.mapping)

    def traffic(self, design: Design) -> tuple[np.ndarray, np.ndarray]:
        """(traffic_gb [K, D], weight [K]) of the design's (shape, workload, mapping)."""
        mapping = self.mapping(design)
        key = (design.shape, design.workload, mapping)
        if key not in self._traffic:
            if len(self._traffic) > 1024:
                self._traffic.clear()
            self._traffic[key] = design_traffic(self.space.workloads[design.workload],
                                                design.shape, mapping)
        return self._traffic[key]

    def network(self, design: Design) -> tuple[Network, np.ndarray]:
        """(network, cost rates [D] $ per GB/s) of a design."""
        key = (design.shape, design.blocks, design.tiers)
        if key not in self._nets:
            if len(self._nets) > 4096:
                self._nets.clear()
            net = Network(blocks=design.blocks, npus=design.shape, cost_tiers=design.tiers,
                          source="scan")
            self._nets[key] = (net, cost_rates_usd_per_gbps(net, self.space.cost_model))
        return self._nets[key]

    def physics(self, design: Design) -> tuple[np.ndarray | None, np.ndarray]:
        """(power rates [D] W per GB/s or None without Energy, upper bounds [D] GB/s: each
        dimension's tier ``MaxGbps``, +inf where none) of a design (`cost`)."""
        key = (design.shape, design.blocks, design.tiers)
        if key not in self._physics:
            if len(self._physics) > 4096:
                self._physics.clear()
            net = self.network(design)[0]
            cm = self.space.cost_model
            self._physics[key] = (power_rates_w_per_gbps(net, cm), tier_max_gbps(net, cm))
        return self._physics[key]

    def problems(self, designs: list[Design], rates: list[np.ndarray] | None,
                 upper: list[np.ndarray] | None = None) -> tuple[list[Problem], np.ndarray]:
        """The designs' `perf` problems (sum(bw) == budget, bw <= upper), stacked by size.

        Args:
          designs: [B] designs.
          rates: [B] cost rates [D] of each design, or None to build unpriced problems.
          upper: [B] upper bounds [D] (GB/s, +inf for none) of each design, or None: none.

        Returns:
          (batches, position): stacked problems of one (D, K) each, and [B] the position of
          each design's problem in the batches taken in list order.
        """
        traffic = [self.traffic(x) for x in designs]
        groups: dict = {}
        for i, (t, _) in enumerate(traffic):
            groups.setdefault(t.shape, []).append(i)
        batches = []
        position = np.empty(len(designs), np.int64)
        start = 0
        for idx in groups.values():
            hi = None if upper is None else np.stack([upper[i] for i in idx])
            if hi is not None and np.isinf(hi).all():
                hi = None  # no bound at all: the same problems as without MaxGbps
            batches.append(problems_from_stacked(
                np.stack([traffic[i][0] for i in idx]),
                np.stack([traffic[i][1] for i in idx]),
                np.array([self.space.workloads[designs[i].workload].compute_s for i in idx]),
                total_bw_gbps=np.array([designs[i].budget_gbps for i in idx]),
                upper_gbps=hi,
                cost_rates_usd_per_gbps=None if rates is None else np.stack(
                    [rates[i] for i in idx]),
                field_prefix="space",
            ))
            position[idx] = np.arange(start, start + len(idx))
            start += len(idx)
        return batches, position


def program_size(solve_chunk: int | None, dedup: bool) -> int:
    """The problems in every device call of a scan: ``solve_chunk`` rounded down to the
    engine's ladder (`batch.CHUNK_LADDER`: 16, 256, 1024, 65536, ...; at least 16). None: on
    CPUs, 16 with ``dedup`` (a chunk holds few distinct problems per bucket) and 256 without
    (a bucket's last call is padded: 256 pads little and runs as fast per problem as 1024);
    on accelerators, the engine's default (`batch.default_max_chunk`)."""
    if solve_chunk is None:
        solve_chunk = batch.default_max_chunk()
        if jax.default_backend() == "cpu":
            solve_chunk = batch.CHUNK_LADDER[0] if dedup else batch.CHUNK_LADDER[1]
    return batch.ladder_sizes(solve_chunk)[-1]


def solve_designs(
    designs: list[Design],
    space: ScanSpace,
    *,
    dedup: bool = True,
    solve_chunk: int | None = None,
    dtype: str = "float64",
    solver: Callable | None = None,
    builder: ChunkBuilder | None = None,
    timings: dict | None = None,
) -> list[dict]:
    """Optimises a chunk of designs; one result row (dict of `files.COLUMNS`, and
    `files.POWER_COLUMNS` when the cost model has Energy) per design. Each dimension's
    bandwidth is bounded by its tier's MaxGbps (`ChunkBuilder.physics`).

    Args:
      designs: the chunk.
      space: its space.
      dedup: solve each distinct (shape, workload, mapping, budget, MaxGbps bounds) once
        (module docstring).
      solve_chunk: problems per device call, every call the same size (`program_size`;
        None: its default).
      dtype: the kernel's precision, "float64" or "float32".
      solver: `batch.solve_stacked`-compatible function, called once per chunk with the list
        of stacked batches (tests count calls); default `batch.solve_stacked`.
      builder: caches shared across chunks.
      timings: adds seconds spent in "build" and "solve".
    """
    solver = batch.solve_stacked if solver is None else solver
    builder = ChunkBuilder(space) if builder is None else builder
    timings = {} if timings is None else timings
    traced = [i for i, x in enumerate(designs) if space.workloads[x.workload].trace is not None]
    if traced:  # trace sets: one cutting plane per design (`traces`), the rest as below
        rows: list = [None] * len(designs)
        t0 = time.perf_counter()
        for i in traced:
            rows[i] = _trace_row(designs[i], space, builder)
        timings["solve"] = timings.get("solve", 0.0) + (time.perf_counter() - t0)
        rest = [i for i in range(len(designs)) if rows[i] is None]
        if rest:
            for i, row in zip(rest, solve_designs(
                    [designs[i] for i in rest], space, dedup=dedup, solve_chunk=solve_chunk,
                    dtype=dtype, solver=solver, builder=builder, timings=timings)):
                rows[i] = row
        return rows
    t0 = time.perf_counter()
    nets = [builder.network(x) for x in designs]
    mappings = [builder.mapping(x) for x in designs]
    physics = [builder.physics(x) for x in designs]
    upper = [hi for _, hi in physics]
    if dedup:
        keys: dict = {}
        unique: list[int] = []
        which = np.empty(len(designs), np.int64)
        for i, x in enumerate(designs):
            # The tiers' MaxGbps bound bw, so they are part of the problem; prices are not.
            key = (x.shape, x.workload, mappings[i], x.budget_gbps, tuple(upper[i].tolist()))
            which[i] = keys.setdefault(key, len(unique))
            if which[i] == len(unique):
                unique.append(i)
        batches, position = builder.problems(  # bw does not depend on prices
            [designs[i] for i in unique], None, [upper[i] for i in unique])
        which = position[which]
    else:
        batches, which = builder.problems(designs, [rates for _, rates in nets], upper)
    t1 = time.perf_counter()
    # The full tier throughout: a scan makes many calls, and its first alone would pick the
    # quick tier (fast to compile, 4.5x slower to run) and keep it for all the others. Fixed
    # programs: a design's result must not depend on the split (module docstring). No
    # iteration limit: the designs come in order, so a bucket's first chunk is no sample of
    # its others (with it, whole chunks were stopped and solved again).
    res = solver(batches, chunk=program_size(solve_chunk, dedup), dtype=np.dtype(dtype),
                 tier="full", fixed_programs=True, iteration_limit=False)
    t2 = time.perf_counter()
    rows = []
    for x, (net, rates), (power_rates, _), mapping, j in zip(designs, nets, physics, mappings,
                                                             which):
        rows.append(_row(x, space, net, rates, power_rates, mapping.describe(),
                         np.asarray(res.bandwidth_gbps[j], np.float64),
                         float(res.step_time_ns[j]), float(res.optimality_gap[j]),
                         float(res.max_violation[j]), res.status[j]))
    timings["build"] = timings.get("build", 0.0) + (t1 - t0) + (time.perf_counter() - t2)
    timings["solve"] = timings.get("solve", 0.0) + (t2 - t1)
    return rows


def _row(x: Design, space: ScanSpace, net: Network, rates, power_rates, mapping: str, bw,
         step: float, gap: float, violation: float, status: str) -> dict:
    """A design's result row (`files.COLUMNS`, and the power columns with Energy)."""
    cost = float(rates @ bw)
    power = ({} if power_rates is None else
             _power_columns(power_rates, bw, step, space.npus * space.npu_w))
    return {
        "design_id": x.design_id,
        "workload": space.workloads[x.workload].name,
        "notation": net.notation,
        "dims": "x".join(str(n) for n in x.shape),
        "blocks": "-".join(x.blocks),
        "tiers": "-".join(x.tiers),
        "mapping": mapping,
        "npus": space.npus,
        "budget_gbps": x.budget_gbps,
        "bandwidth_gbps": bw.tolist(),
        "step_time_ns": step,
        "network_cost_usd": cost,
        "time_x_cost": step * cost,
        **power,
        "optimality_gap": gap,
        "max_violation": violation,
        "status": status,
    }


def _trace_row(x: Design, space: ScanSpace, builder: ChunkBuilder) -> dict:
    """A trace workload's design (`traces.solve_trace_design`): its simulated step at the
    optimum of the trace's convex bound, the certified gap as ``optimality_gap``, mapping
    ``trace``."""
    net, rates = builder.network(x)
    power_rates, upper = builder.physics(x)
    key = (x.shape, x.blocks, x.workload, x.budget_gbps, tuple(upper.tolist()))
    if key not in builder.traces:  # tiers only price the design
        if len(builder.traces) > 1024:
            builder.traces.clear()
        builder.traces[key] = solve_trace_design(space.workloads[x.workload].trace, net,
                                                 x.budget_gbps, upper)
    out = builder.traces[key]
    return _row(x, space, net, rates, power_rates, "trace", out["bandwidth_gbps"],
                out["step_ns"], out["gap"], out["max_violation"], out["status"])


def _power_columns(power_rates: np.ndarray, bw: np.ndarray, step_ns: float,
                   static_w: float) -> dict:
    """network_power_w = power_rates @ bw (W); energy_per_step_j = step time (s) x (NPUs x
    npu_w + network power) (J)."""
    net_w = float(power_rates @ bw)
    return {"network_power_w": net_w, "energy_per_step_j": step_ns * 1e-9 * (static_w + net_w)}
