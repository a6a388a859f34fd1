"""The chunk-count search: the best (chunk count, bandwidths) pair of a pipelined timing model.

More chunks pipeline a collective better across dimensions but pay the per-step latency once
per chunk, so the best count depends on the bandwidths and the other way round: every
candidate count is solved (one batched call for ``perf``) and the best certified one wins.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Sequence

from libra_jax.inputs.limits import as_instance, as_int, as_list
from libra_jax.model import pipelined, timing
from libra_jax.model.problem import ConstraintSpec
from libra_jax.solvers import batch
from libra_jax.solvers import solve as solve_mod
from libra_jax.types import LibraInputError, float64, show


@dataclasses.dataclass(frozen=True)
class ChunkChoice:
    """The chunk-count search: one result per candidate, and the best."""

    chunks: tuple[int, ...]
    results: tuple  # SolveResult per candidate, same order
    best: int  # index into chunks of the best certified result (least objective)
    problems: tuple = ()  # the Problem of each candidate, same order


@float64
def solve_chunk_counts(network, workload, cost_rates_usd_per_gbps, spec: ConstraintSpec,
                       tm: timing.TimingModel, chunks: Sequence[int], objective: str = "perf",
                       method: str = "ipm") -> ChunkChoice:
    """Optimises the bandwidths for every chunk count in ``chunks`` and picks the best pair
    (see the module docstring). For ``perf`` the candidates have the same array shapes and
    are solved in one batched call (`batch.solve_batch`, with either method);
    ``perf_per_cost`` runs one certified search per candidate.
    The best is the least objective among the results with status ok (all of them when
    none is ok).

    Raises:
      LibraInputError: ``tm`` not a pipelined `TimingModel`, ``chunks`` not a list of distinct
        integers in [1, `pipelined.MAX_CHUNKS`], an unknown objective or method, or what
        building and solving the problems raise.
    """
    as_instance(tm, timing.TimingModel, "tm")
    chunks = as_list(chunks, "system.chunks", what="a list of chunk counts")
    if tm.model != "pipelined":
        raise LibraInputError(
            f"system.chunks = {show(chunks)}: a chunk-count search needs model=pipelined.")
    cands = [as_int(k, f"system.chunks[{i}]", 1, pipelined.MAX_CHUNKS)
             for i, k in enumerate(chunks)]
    if not cands or len(set(cands)) != len(cands):
        raise LibraInputError(f"system.chunks = {show(chunks)}: give distinct counts >= 1.")
    if not isinstance(objective, str) or objective not in ("perf", "perf_per_cost"):
        raise LibraInputError(
            f"objective = {show(objective)}: unknown; choose 'perf' or 'perf_per_cost'.")
    problems = [timing.build_timed_problem(network, workload, cost_rates_usd_per_gbps, spec,
                                           dataclasses.replace(tm, chunks=k)) for k in cands]
    if objective == "perf":
        start = time.perf_counter()
        out = batch.solve_batch(problems, method=method)
        seconds = time.perf_counter() - start  # the whole batch: every candidate at once
        results = tuple(solve_mod.result_from_batch(p, out, i, seconds)
                        for i, p in enumerate(problems))
    else:
        results = tuple(solve_mod.solve(p, objective, method=method) for p in problems)
    key = "step_time_ns" if objective == "perf" else "time_x_cost"
    ok = [i for i, r in enumerate(results) if r.status == "ok"] or list(range(len(results)))
    best = min(ok, key=lambda i: getattr(results[i], key))
    return ChunkChoice(chunks=tuple(cands), results=results, best=best,
                       problems=tuple(problems))
