"""A chunk of designs -> its stacked `Problem` batches -> one result row per design.

Problems are built with the model's vectorised builder (`problem.problems_from_stacked`), one
call per group of equal sizes (D dims, K phases), so the chunk's problems never go through a
Python loop over `Problem` fields. With ``dedup`` the chunk solves each distinct (shape,
workload, budget) once, without prices: the optimal bandwidths of the `perf` problem do not
depend on the blocks or cost tiers, which only price the result.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from libra_jax.inputs.cost import cost_rates_usd_per_gbps
from libra_jax.inputs.generators import parallel_communicators
from libra_jax.inputs.topology import Network
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.problem import Problem, merge_phases, problems_from_stacked
from libra_jax.solvers import batch
from libra_jax.studies.scan.space import Design, ScanSpace, ScanWorkload
from libra_jax.types import LibraInputError


def design_traffic(
    w: ScanWorkload, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Merged traffic (traffic_gb [K, D], weight [K]) of a workload on a shape.

    Raises:
      LibraInputError: the TP group does not fit the shape.
    """
    comms = parallel_communicators(shape, w.tp)
    if comms is None:
        raise LibraInputError(f"tp = {w.tp} cannot be laid on the shape {list(shape)}.")
    tp_comm, dp_comm = comms
    rows = np.array([tp_comm, tp_comm, dp_comm], np.int32)  # Forward, InputGrad, WeightGrad
    comm = np.broadcast_to(rows[None], (w.collective.shape[0], 3, len(shape)))
    traffic = np.asarray(
        traffic_bytes(w.collective, w.size_bytes, comm), np.float64
    ).reshape(-1, len(shape))
    return merge_phases(traffic / 1e9)


class ChunkBuilder:
    """Traffic and network prices of designs, with small caches (designs come shape-major)."""

    def __init__(self, space: ScanSpace):
        self.space = space
        self._traffic: dict = {}
        self._nets: dict = {}

    def traffic(self, shape: tuple[int, ...], wi: int) -> tuple[np.ndarray, np.ndarray]:
        key = (shape, wi)
        if key not in self._traffic:
            if len(self._traffic) > 1024:
                self._traffic.clear()
            self._traffic[key] = design_traffic(self.space.workloads[wi], shape)
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

    def problems(self, designs: list[Design], rates: list[np.ndarray] | None
                 ) -> tuple[list[Problem], np.ndarray]:
        """The designs' `perf` problems (sum(bw) == budget), stacked by size.

        Args:
          designs: [B] designs.
          rates: [B] cost rates [D] of each design, or None to build unpriced problems.

        Returns:
          (batches, position): stacked problems of one (D, K) each, and [B] the position of
          each design's problem in the batches taken in list order.
        """
        groups: dict = {}
        for i, x in enumerate(designs):
            t, _ = self.traffic(x.shape, x.workload)
            groups.setdefault(t.shape, []).append(i)
        batches = []
        position = np.empty(len(designs), np.int64)
        start = 0
        for idx in groups.values():
            members = [designs[i] for i in idx]
            traffic = [self.traffic(x.shape, x.workload) for x in members]
            batches.append(problems_from_stacked(
                np.stack([t for t, _ in traffic]),
                np.stack([w for _, w in traffic]),
                np.array([self.space.workloads[x.workload].compute_s for x in members]),
                total_bw_gbps=np.array([x.budget_gbps for x in members]),
                cost_rates_usd_per_gbps=None if rates is None else np.stack(
                    [rates[i] for i in idx]),
                field_prefix="space",
            ))
            position[idx] = np.arange(start, start + len(idx))
            start += len(idx)
        return batches, position


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
    """Optimises a chunk of designs; one result row (dict of `files.COLUMNS`) per design.

    Args:
      designs: the chunk.
      space: its space.
      dedup: solve each distinct (shape, workload, budget) once (module docstring).
      solve_chunk: most problems per device call (`batch.solve_stacked`'s ``chunk``).
      dtype: the kernel's precision, "float64" or "float32".
      solver: `batch.solve_stacked`-compatible function, called once per chunk with the list
        of stacked batches (tests count calls); default `batch.solve_stacked`.
      builder: caches shared across chunks.
      timings: adds seconds spent in "build" and "solve".
    """
    solver = batch.solve_stacked if solver is None else solver
    builder = ChunkBuilder(space) if builder is None else builder
    timings = {} if timings is None else timings
    t0 = time.perf_counter()
    nets = [builder.network(x) for x in designs]
    if dedup:
        keys: dict = {}
        unique: list[Design] = []
        which = np.empty(len(designs), np.int64)
        for i, x in enumerate(designs):
            which[i] = keys.setdefault((x.shape, x.workload, x.budget_gbps), len(unique))
            if which[i] == len(unique):
                unique.append(x)
        batches, position = builder.problems(unique, None)  # bw does not depend on prices
        which = position[which]
    else:
        batches, which = builder.problems(designs, [rates for _, rates in nets])
    t1 = time.perf_counter()
    res = solver(batches, chunk=solve_chunk, dtype=np.dtype(dtype))
    t2 = time.perf_counter()
    rows = []
    for x, (net, rates), j in zip(designs, nets, which):
        bw = np.asarray(res.bandwidth_gbps[j], np.float64)
        step = float(res.step_time_ns[j])
        cost = float(rates @ bw)
        rows.append({
            "design_id": x.design_id,
            "workload": space.workloads[x.workload].name,
            "notation": net.notation,
            "dims": "x".join(str(n) for n in x.shape),
            "blocks": "-".join(x.blocks),
            "tiers": "-".join(x.tiers),
            "npus": space.npus,
            "budget_gbps": x.budget_gbps,
            "bandwidth_gbps": bw.tolist(),
            "step_time_ns": step,
            "network_cost_usd": cost,
            "time_x_cost": step * cost,
            "optimality_gap": float(res.optimality_gap[j]),
            "max_violation": float(res.max_violation[j]),
            "status": res.status[j],
        })
    timings["build"] = timings.get("build", 0.0) + (t1 - t0) + (time.perf_counter() - t2)
    timings["solve"] = timings.get("solve", 0.0) + (t2 - t1)
    return rows
