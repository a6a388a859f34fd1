"""Co-search of the parallel mapping and the network bandwidths (``cosearch.enabled=true``).

For a network (D dimensions of n_d NPUs) and a generated transformer, every *placement* of the
tensor-, pipeline- and data-parallel groups is tried: on each dimension d the n_d NPUs factor as
tp_d * pp_d * dp_d (a group may span whole dimensions or share one with another group), and
TP = prod tp_d, PP = prod pp_d, DP = prod dp_d. Degrees are fixed by ``cosearch.tp/pp/dp`` or
free (every divisor, TP * PP * DP = NPUs). Orderings inside a dimension are equivalent in
LIBRA's model (only NPUs per dimension matter), so the per-dimension factors are the canonical
form; placements that still give identical problems are solved once (counted as duplicates).

Placements whose degrees do not divide the model (heads, FFN size, layers, global batch) or
that do not fit in NPU memory (:mod:`libra_jax.model.memory`) are dropped, counted by reason. Every
other one becomes a `Problem` (same constraints as the template `problem.build_problem` builds,
its own traffic and compute) and all are optimised for step time in one
`batch.solve_batch` call. The report ranks them by optimal step time and compares with a
reference placement (e.g. the shipped LIBRA communicator's), solved in the same batch.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from typing import Any, Sequence

import numpy as np

from libra_jax.inputs.generators import (
    Npu,
    Parallel,
    Placement,
    Transformer,
    check_transformer_parallel,
    group_comms,
    transformer_lines,
)
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.memory import MemoryEstimate, transformer_memory
from libra_jax.inputs.limits import LIMITS, as_instance, as_int
from libra_jax.inputs.topology import Network
from libra_jax.model.problem import Problem, merge_weighted_phases, with_workload
from libra_jax.solvers.batch import solve_batch
from libra_jax.types import Collective, LibraInputError, show


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def enumerate_placements(npus: Sequence[int], tp: int | None = None, pp: int | None = None,
                         dp: int | None = None) -> list[Placement]:
    """Every placement (per-dimension factors tp_d * pp_d * dp_d = n_d) with the given degrees
    (None: any), in a fixed order."""
    per_dim = [[(a, b, n // (a * b)) for a in _divisors(n) for b in _divisors(n // a)]
               for n in npus]
    out = []
    for combo in itertools.product(*per_dim):
        t, p, d = (tuple(c[i] for c in combo) for i in range(3))
        if ((tp is None or math.prod(t) == tp) and (pp is None or math.prod(p) == pp)
                and (dp is None or math.prod(d) == dp)):
            out.append(Placement(t, p, d))
    return out


def placement_from_communicator(comm: np.ndarray, npus: Sequence[int], where: str) -> Placement:
    """The placement of a LIBRA communicator [3, D] (Forward = TP, WeightGrad = DP, the rest of
    each dimension = PP)."""
    tp = [max(int(g), 1) for g in comm[0]]
    dp = [max(int(g), 1) for g in comm[2]]
    pp = []
    for d, n in enumerate(npus):
        if n % (tp[d] * dp[d]):
            raise LibraInputError(
                f"{where}: dimension {d} has {n} NPUs, not a multiple of its TP x DP share "
                f"{tp[d]} x {dp[d]}."
            )
        pp.append(n // (tp[d] * dp[d]))
    return Placement(tuple(tp), tuple(pp), tuple(dp))


@dataclasses.dataclass
class MappingResult:
    """One solved placement."""

    placement: Placement
    description: str  # e.g. "TP16=RI4xFC4, PP1, DP256=FC2xRI4xSW32"
    step_time_ns: float
    comm_time_ns: float
    bandwidth_gbps: np.ndarray  # [D]
    optimality_gap: float
    status: str
    memory: MemoryEstimate

    @property
    def degrees(self) -> tuple[int, int, int]:
        p = self.placement
        return math.prod(p.tp), math.prod(p.pp), math.prod(p.dp)


@dataclasses.dataclass
class CosearchResult:
    """Ranked results (best first), the reference, and what was dropped and why."""

    ranked: list[MappingResult]
    reference: MappingResult | None
    enumerated: int
    dropped: dict[str, int]  # reason -> number of placements
    dropped_examples: dict[str, str]  # reason -> one example with its numbers
    duplicates: int
    solve_seconds: float
    total_seconds: float

    @property
    def best(self) -> MappingResult:
        return self.ranked[0]


def _reason(message: str) -> str:
    """A short category of a divisibility error of `check_transformer_parallel`."""
    for start, words in (("workload.parallel.tp", "TP does not divide heads / FFN size"),
                         ("workload.parallel.pp", "PP does not divide layers"),
                         ("workload.parallel.ep", "EP does not divide experts / DP"),
                         ("workload.model.global_batch",
                          "global batch not a multiple of micro-batch x DP")):
        if message.startswith(start):
            return words
    return message


class _Unique:
    """The distinct communicating phases of one degree triple: (collective, size, role) with
    counts, and the step's compute; a placement only changes the communicators."""

    def __init__(self, m: Transformer, par: Parallel, npu: Npu):
        lines = transformer_lines(m, par, npu)
        coll = np.array(lines.coll, np.int32).reshape(-1)
        size = np.array(lines.size, np.float64).reshape(-1)
        role = np.array([r or "" for row in lines.role for r in row])
        keep = coll != int(Collective.NONE)
        keys: dict[tuple, int] = {}
        for c, s, r in zip(coll[keep], size[keep], role[keep]):
            keys[(int(c), float(s), str(r))] = keys.get((int(c), float(s), str(r)), 0) + 1
        self.coll = np.array([k[0] for k in keys], np.int32)
        self.size = np.array([k[1] for k in keys], np.float64)
        self.role = [k[2] for k in keys]
        self.count = np.array(list(keys.values()), np.float64)
        self.compute_s = float(np.sum(lines.compute)) / 1e9

    def traffic(self, placement: Placement, ep: int) -> tuple[np.ndarray, np.ndarray]:
        comms = group_comms(placement, ep)
        comm = np.stack([comms[r] for r in self.role]).astype(np.int32)
        t = np.asarray(traffic_bytes(self.coll, self.size, comm), np.float64) / 1e9
        return merge_weighted_phases(t, self.count)[:2]


def cosearch(template: Problem, network: Any, model: Transformer, base: Parallel, npu: Npu,
             tp: int | None = None, pp: int | None = None, dp: int | None = None,
             reference: Placement | None = None) -> CosearchResult:
    """Enumerates, filters, builds and batch-solves every placement (module docstring).

    Args:
      template: a problem of this network and constraints (`problem.build_problem`); each
        placement's problem takes its constraints and replaces traffic, weights and compute.
      network: the `topology.Network`.
      model: the transformer.
      base: ZeRO stage, recomputation and EP degree (its degrees / placement are not used).
      npu: the NPU (memory_gb null: memory is not checked).
      tp, pp, dp: fixed degrees, or None to enumerate.
      reference: a placement to solve and report for comparison (kept even if it does not fit).

    Raises:
      LibraInputError: no placement survives (the message gives the counts by reason).
    """
    start = time.perf_counter()
    for name, value, kind in (("template", template, Problem), ("network", network, Network),
                              ("model", model, Transformer), ("base", base, Parallel),
                              ("npu", npu, Npu)):
        as_instance(value, kind, f"cosearch: {name}")
    if np.ndim(template.lo) != 1:
        raise LibraInputError("cosearch: template is a stacked batch; expected one Problem.")
    tp, pp, dp = (None if v is None else as_int(v, f"cosearch.{k}", 1, LIMITS.max_npus)
                  for k, v in (("tp", tp), ("pp", pp), ("dp", dp)))
    if reference is not None and not isinstance(reference, Placement):
        raise LibraInputError(
            f"cosearch: reference = {show(reference)}: expected a Placement or None.")
    npus = tuple(int(n) for n in network.npus)
    placements = enumerate_placements(npus, tp, pp, dp)
    enumerated = len(placements)
    if reference is not None and reference not in placements:
        placements.append(reference)
    by_degrees: dict[tuple, list[Placement]] = {}
    for p in placements:
        by_degrees.setdefault((math.prod(p.tp), math.prod(p.pp), math.prod(p.dp)), []).append(p)

    dropped: dict[str, int] = {}
    examples: dict[str, str] = {}
    candidates: list[tuple[Placement, MemoryEstimate, Problem, float]] = []
    seen: dict[tuple, int] = {}
    duplicates = 0
    ref_index = None
    upper = np.asarray(template.upper)

    def drop(reason, n, example):
        dropped[reason] = dropped.get(reason, 0) + n
        examples.setdefault(reason, example)

    for (t, p, d), group in by_degrees.items():
        par = dataclasses.replace(base, tp=t, pp=p, dp=d, placement=None)
        try:
            if base.ep > 1 and d % base.ep:
                raise LibraInputError(f"workload.parallel.ep = {base.ep} does not divide dp {d}")
            check_transformer_parallel(model, par)
        except LibraInputError as e:
            n = sum(1 for q in group if q != reference)
            if n:
                drop(_reason(str(e)), n, f"TP{t} PP{p} DP{d}: {e}")
            if reference in group:
                raise LibraInputError(f"cosearch.reference_communicator: {e}") from None
            continue
        mem = transformer_memory(model, par, npu)
        unique = _Unique(model, par, npu)
        for q in group:
            is_ref = q == reference
            if not mem.fits and not is_ref:
                drop("does not fit in memory", 1,
                     f"TP{t} PP{p} DP{d}: needs {mem.describe()}")
                continue
            try:
                traffic, weight = unique.traffic(q, base.ep)
            except LibraInputError as e:
                if is_ref:
                    raise
                drop("EP group cannot be laid on the DP group", 1, str(e))
                continue
            if np.any((traffic > 0).any(axis=0) & (upper <= 0)):
                drop("uses a dimension the constraints force to 0 GB/s", 1, q.describe(
                    network.blocks))
                continue
            key = (traffic.tobytes(), weight.tobytes(), unique.compute_s)
            if key in seen:
                if is_ref:
                    ref_index = seen[key]
                else:
                    duplicates += 1
                continue
            try:  # checks the magnitudes (a finite step time under the constraints)
                problem = with_workload(template, traffic, weight, unique.compute_s)
            except LibraInputError as e:
                if is_ref:
                    raise LibraInputError(f"cosearch.reference_communicator: {e}") from None
                drop("beyond the input limits", 1, f"{q.describe(network.blocks)}: {e}")
                continue
            seen[key] = len(candidates)
            if is_ref:
                ref_index = len(candidates)
            candidates.append((q, mem, problem, unique.compute_s))
    if not candidates:
        reasons = "; ".join(f"{k}: {v}" for k, v in dropped.items())
        raise LibraInputError(
            f"cosearch: none of the {enumerated} placements is usable ({reasons}). Examples: "
            + " | ".join(examples.values())
        )
    problems = [problem for _, _, problem, _ in candidates]
    t0 = time.perf_counter()
    out = solve_batch(problems)
    solve_seconds = time.perf_counter() - t0
    results = []
    for i, (q, mem, _, c) in enumerate(candidates):
        results.append(MappingResult(
            placement=q, description=q.describe(network.blocks),
            step_time_ns=float(out.step_time_ns[i]),
            comm_time_ns=float(out.step_time_ns[i]) - c * 1e9,
            bandwidth_gbps=np.asarray(out.bandwidth_gbps[i]),
            optimality_gap=float(out.optimality_gap[i]), status=out.status[i], memory=mem,
        ))
    ref = results[ref_index] if ref_index is not None else None
    ranked = [r for i, r in enumerate(results) if r.memory.fits or i != ref_index]
    ranked.sort(key=lambda r: (r.status != "ok", r.step_time_ns))
    return CosearchResult(ranked, ref, enumerated, dropped, examples, duplicates,
                          solve_seconds, time.perf_counter() - start)
