"""The design space: validated config -> a lazy, fixed-order enumeration of designs.

A design is (shape, blocks, cost tiers, budget, workload, mapping); see
`libra_jax.studies.scan` for the space. `iter_designs` yields them in one order that never
changes for a given space (D, shape, workload, mapping, budget, tiers, blocks), which is what
chunk files and resuming rely on; designs that cannot be built are counted, not yielded
(`count_designs`, `new_skip_counts`).

The mapping is where a workload's TP and DP groups sit on the shape: by default the fixed
one (TP from the innermost dim outward, one per shape); with ``workloads[i].mapping: search``
every placement of the co-search (`cosearch.enumerate_placements` with PP 1: per dim
n_d = tp_d * dp_d, prod tp_d = TP). The text workloads fix the TP and DP degrees (their
collective sizes depend on them), so only the placement varies.

Technology catalogue (a cost model whose tiers add ``ReachM`` / ``MaxGbps``, `cost`): with
``space.span_m_by_npus`` dimension d of a shape spans the metres of the smallest key >= the
NPUs dims 0..d enclose (`dim_spans_m`), and a tier option with a tier whose ReachM is below
its dimension's span is skipped on that shape (``reach_designs``); a (budget, tier option)
whose tiers' MaxGbps sum below the budget is skipped (``max_gbps_designs``; the solver then
bounds each dimension by its tier's MaxGbps, `problems`).

Counting and jumping are arithmetic, not enumeration: the designs of one (shape, workload,
mapping) are the sum over the (budget, tier option) pairs kept of the valid block tuples,
which depends on the shape only through which tier options reach (`_Layouts`, cached), so
`count_designs` and ``iter_designs(space, start, stop)`` walk the shapes (thousands) and
never the designs before ``start`` (10^8 and more).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import pathlib
import tempfile
from collections.abc import Iterable, Iterator
from collections.abc import Mapping as MappingABC
from typing import NamedTuple

import numpy as np

from libra_jax.inputs.cost import MAX_REACH_M, CostModel, load_cost_model
from libra_jax.inputs.generators import Placement, parallel_communicators
from libra_jax.inputs.limits import LIMITS, as_instance, as_int, as_list, as_real, as_str
from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import network_from_lists
from libra_jax.inputs.workload import load_workload
from libra_jax.studies.cosearch import enumerate_placements
from libra_jax.studies.job.inputs import check_workload_entry
from libra_jax.studies.scan.config import (
    Mapping,
    ScanConfig,
    ScanWorkloadConfig,
    SpaceConfig,
    choice,
)
from libra_jax.studies.scan.traces import load_scan_trace, trace_name
from libra_jax.types import BLOCK_ABBREV, BLOCKS, LibraInputError, show


def enumerate_shapes(
    npus: int, num_dims: int, min_size: int = 2, max_size: int | None = None
) -> Iterator[tuple[int, ...]]:
    """Ordered factorisations of ``npus`` into ``num_dims`` sizes, lexicographic order.

    Args:
      npus: N.
      num_dims: D >= 1.
      min_size: smallest NPUs per dimension (>= 2: a dimension of one NPU has no links).
      max_size: largest NPUs per dimension, or None.

    Yields:
      Tuples (n_0, ..., n_{D-1}) with prod == npus and min_size <= n_d <= max_size.
    """
    hi = npus if max_size is None else max_size
    if num_dims == 1:
        if min_size <= npus <= hi:
            yield (npus,)
        return
    for n in range(min_size, min(hi, npus) + 1):
        if npus % n == 0:
            for rest in enumerate_shapes(npus // n, num_dims - 1, min_size, max_size):
                yield (n, *rest)


@dataclasses.dataclass(frozen=True)
class ScanWorkload:
    """A loaded workload of the scan (host numpy)."""

    name: str
    tp: int
    compute_s: float  # total compute of one step (s)
    collective: np.ndarray  # [L, 3] int Collective codes
    size_bytes: np.ndarray  # [L, 3] float64
    mapping: Mapping = Mapping.fixed  # fixed | search (`workload_placements`)
    trace: object = None  # an imported trace set (`traces.ScanTrace`), or None: a file


@dataclasses.dataclass(frozen=True)
class ScanSpace:
    """The validated design space."""

    npus: int
    dims: tuple[int, ...]  # the D values scanned
    min_dim_size: int
    max_dim_size: int | None
    blocks: tuple[str, ...]  # canonical block names
    budgets_gbps: tuple[float, ...]
    cost_model: CostModel
    tier_options: dict  # D -> list of tier tuples
    workloads: tuple[ScanWorkload, ...]
    npu_w: float = 0.0  # W of one NPU apart from the network (energy_per_step_j)
    # ((NPUs, span m), ...) by NPUs, or None: no reach check (`dim_spans_m`)
    span_m_by_npus: tuple[tuple[int, float], ...] | None = None


class Design(NamedTuple):
    """One design (a lightweight descriptor; problems are built per chunk)."""

    design_id: int  # position in the enumeration order
    shape: tuple[int, ...]
    blocks: tuple[str, ...]
    tiers: tuple[str, ...]
    budget_gbps: float
    workload: int  # index into ScanSpace.workloads
    # Where the workload's TP and DP groups sit (pp all 1); None: its fixed mapping
    # (`fixed_placement`). `iter_designs` always gives it.
    mapping: Placement | None = None


def _load_scan_workload(w: ScanWorkloadConfig, npus: int, index: int,
                        dims: tuple[int, ...]) -> ScanWorkload:
    key = f"workloads[{index}]"
    as_instance(w, ScanWorkloadConfig, key)
    if check_workload_entry(w, index) == "chakra_et":
        if w.name is not None:
            as_str(w.name, f"{key}.name")
        trace = load_scan_trace(w, npus, dims, index)
        return ScanWorkload(name=trace_name(w, trace), tp=1, compute_s=0.0,
                            collective=np.zeros((0, 3), np.int32),
                            size_bytes=np.zeros((0, 3)), trace=trace)
    path = resolve_path(w.file, f"{key}.file")
    as_int(w.tp, f"{key}.tp", 1, LIMITS.max_npus)
    if w.dp is not None:
        as_int(w.dp, f"{key}.dp", 1, LIMITS.max_npus)
    if w.name is not None:
        as_str(w.name, f"{key}.name")
    if npus % w.tp:
        raise LibraInputError(f"{key}.tp = {w.tp} does not divide space.npus = {npus}.")
    if w.dp is not None and w.tp * w.dp != npus:
        raise LibraInputError(
            f"{key}: tp * dp = {w.tp} * {w.dp} = {w.tp * w.dp}, but space.npus = {npus}; "
            "set dp = npus / tp or null."
        )
    if path.lower().endswith(".txt"):
        # Text workloads need a communicator file; the scan replaces it, so give a dummy.
        with tempfile.TemporaryDirectory() as tmp:
            comm = pathlib.Path(tmp) / "none.yml"
            comm.write_text("Forward: [-1]\nInputGrad: [-1]\nWeightGrad: [-1]\n")
            wl = load_workload(path, comm, 1)
    else:
        wl = load_workload(path)
    return ScanWorkload(
        name=w.name or wl.name,
        tp=int(w.tp),
        compute_s=float(np.sum(wl.compute_ns)) / 1e9,
        collective=np.asarray(wl.collective),
        size_bytes=np.asarray(wl.size_bytes, np.float64),
        mapping=choice(Mapping, w.mapping, f"{key}.mapping"),
    )


def _canonical_block(name, index: int) -> str:
    """The canonical name of entry ``index`` of space.blocks.

    Raises:
      LibraInputError: naming the list entry, its value and the closest valid block.
    """
    try:
        return network_from_lists([name], [2], source=f"space.blocks[{index}]").blocks[0]
    except LibraInputError:
        spellings = {**{b: b for b in BLOCKS}, **{a: b for b, a in BLOCK_ABBREV.items()}}
        close = difflib.get_close_matches(str(name), spellings, n=1, cutoff=0.0)
        hint = f" Did you mean {spellings[close[0]]!r}?" if close else ""
        accepted = ", ".join(f"{b} ({BLOCK_ABBREV[b]})" for b in BLOCKS)
        raise LibraInputError(
            f"space.blocks[{index}] = {show(name)}: unknown building block.{hint} Accepted "
            f"(case-insensitive): {accepted}."
        ) from None


def _span_table(value, npus: int) -> tuple[tuple[int, float], ...] | None:
    """``space.span_m_by_npus`` checked, as ((NPUs, span m), ...) sorted by NPUs; None when
    it is empty (or None): no reach check.

    Raises:
      LibraInputError: not a mapping, a key that is not an integer >= 1, a span that is not a
        finite number > 0 (m), spans that shrink as the NPU count grows, or a largest key
        below space.npus (the outermost dimension encloses every NPU, so no design could be
        built).
    """
    key = "space.span_m_by_npus"
    if value is None or (isinstance(value, MappingABC) and not value):
        return None
    if not isinstance(value, MappingABC):
        raise LibraInputError(
            f"{key} = {show(value)}: expected a mapping of NPU counts to spans in metres, "
            "e.g. {8: 0.05, 72: 2, 1024: 30, 65536: 500}.")
    table = []
    for n, m in value.items():
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise LibraInputError(
                f"{key}: key {show(n)} (-> {show(m)}): expected an NPU count, an integer >= 1.")
        table.append((int(n), as_real(m, f"{key}[{int(n)}]", 0.0, MAX_REACH_M, lo_open=True,
                                      unit=" (m)")))
    table.sort()
    for (n0, m0), (n1, m1) in zip(table, table[1:]):
        if m1 < m0:
            raise LibraInputError(
                f"{key}: {n1} NPUs span {m1:g} m but {n0} NPUs span {m0:g} m; a larger group "
                "cannot span less: give spans that do not shrink as the NPU count grows.")
    if table[-1][0] < npus:
        raise LibraInputError(
            f"{key}: the largest key is {table[-1][0]} NPUs, below space.npus = {npus}; the "
            "outermost dimension encloses every NPU, so no design could be built: add a key "
            f">= {npus} (its span in m).")
    return tuple(table)


def dim_spans_m(space: ScanSpace, shape: tuple[int, ...]) -> list[float] | None:
    """[D] span of each dimension (m): dim d gets the span of the smallest key of
    ``space.span_m_by_npus`` >= prod(shape[:d+1]) (the NPUs dims 0..d enclose); None without
    the table. (make_space ensures a key >= space.npus, so every dimension has one.)"""
    if space.span_m_by_npus is None:
        return None
    out, enclosed = [], 1
    for n in shape:
        enclosed *= n
        out.append(next(m for k, m in space.span_m_by_npus if k >= enclosed))
    return out


def _check_energy(cm: CostModel, options: dict, blocks: tuple[str, ...]) -> None:
    """With Energy in the cost model, every tier scanned needs Energy.Link, and Energy.Switch
    where Switch designs use it (refused here, not in the middle of the scan)."""
    if not cm.has_energy:
        return
    used = dict.fromkeys(t for opts in options.values() for tt in opts for t in tt)
    for tier in used:
        e = cm.energy.get(tier, {})
        needed = ["Link"] + (["Switch"] if "Switch" in blocks and "Switch" in cm.tiers[tier]
                             else [])
        missing = [c for c in needed if c not in e]
        if missing:
            raise LibraInputError(
                f"{cm.source}: tier {show(tier)} (space.tier_order / space.tier_options) has "
                f"no Energy.{'/'.join(missing)}, but other tiers give Energy, so the scan "
                "computes network power: add Energy: {Link: <pJ per bit>"
                + (", Switch: <pJ per bit>" if "Switch" in missing else "") + "} to it.")


def make_space(cfg: ScanConfig) -> ScanSpace:
    """Validates the config and loads workloads and cost model.

    Raises:
      LibraInputError: naming the config key and value.
    """
    as_instance(cfg, ScanConfig, "cfg")
    s = as_instance(cfg.space, SpaceConfig, "cfg.space")
    as_int(s.npus, "space.npus", 2, LIMITS.max_npus, what=" (LIMITS.max_npus)")
    as_int(s.min_dims, "space.min_dims", 1, LIMITS.max_dims, what=" (LIMITS.max_dims)")
    as_int(s.max_dims, "space.max_dims", 1, LIMITS.max_dims, what=" (LIMITS.max_dims)")
    as_int(s.min_dim_size, "space.min_dim_size", 2, LIMITS.max_npus_per_dim)
    if s.max_dim_size is not None:
        as_int(s.max_dim_size, "space.max_dim_size", 2, LIMITS.max_npus_per_dim)
    as_list(s.blocks, "space.blocks", what="a list of building blocks")
    budgets_list = as_list(s.budgets_gbps, "space.budgets_gbps", what="a list of budgets")
    for i, b in enumerate(budgets_list):
        as_real(b, f"space.budgets_gbps[{i}]", 0.0, LIMITS.max_gbps, lo_open=True,
                unit=" (GB/s per NPU, LIMITS.max_gbps)")
    for i, t in enumerate(as_list(s.tier_order, "space.tier_order", what="a list of tiers")):
        as_str(t, f"space.tier_order[{i}]")
    if s.tier_options is not None:
        for i, row in enumerate(as_list(s.tier_options, "space.tier_options",
                                        what="a list of tier lists")):
            for j, t in enumerate(as_list(row, f"space.tier_options[{i}]",
                                          what="a list of tiers")):
                as_str(t, f"space.tier_options[{i}][{j}]")
    as_list(cfg.workloads, "workloads", what="a list of workloads")
    if s.npus < 2:
        raise LibraInputError(f"space.npus = {s.npus}: need at least 2 NPUs.")
    if not 1 <= s.min_dims <= s.max_dims:
        raise LibraInputError(
            f"space.min_dims = {s.min_dims}, space.max_dims = {s.max_dims}: need "
            "1 <= min_dims <= max_dims."
        )
    if s.min_dim_size < 2:
        raise LibraInputError(f"space.min_dim_size = {s.min_dim_size}: must be >= 2.")
    if s.max_dim_size is not None and s.max_dim_size < s.min_dim_size:
        raise LibraInputError(
            f"space.max_dim_size = {s.max_dim_size} is below space.min_dim_size = "
            f"{s.min_dim_size}."
        )
    if not s.blocks:
        raise LibraInputError("space.blocks is empty; give e.g. [Ring, FullyConnected, Switch].")
    blocks = tuple(_canonical_block(b, i) for i, b in enumerate(s.blocks))
    if len(set(blocks)) != len(blocks):
        raise LibraInputError(f"space.blocks = {show(list(s.blocks))}: a block is listed twice.")
    budgets = tuple(float(b) for b in s.budgets_gbps)
    if not budgets or any(not (b > 0 and math.isfinite(b)) for b in budgets):
        raise LibraInputError(
            f"space.budgets_gbps = {list(s.budgets_gbps)}: need finite budgets > 0 (GB/s)."
        )
    cm = load_cost_model(resolve_path(s.cost_model, "space.cost_model"))
    dims = tuple(range(s.min_dims, s.max_dims + 1))
    options: dict = {}
    for d in dims:
        if s.tier_options is None:
            if d > len(s.tier_order):
                raise LibraInputError(
                    f"space.tier_order = {list(s.tier_order)} has {len(s.tier_order)} tiers "
                    f"but shapes of {d} dimensions are scanned; give more tiers or "
                    "space.tier_options."
                )
            options[d] = [tuple(s.tier_order[len(s.tier_order) - d:])]
        else:
            options[d] = [tuple(t) for t in s.tier_options if len(t) == d]
            if not options[d]:
                raise LibraInputError(
                    f"space.tier_options has no tier list of length {d}, but shapes of {d} "
                    "dimensions are scanned."
                )
        for tiers in options[d]:
            for t in tiers:
                if t not in cm.tiers:
                    raise LibraInputError(
                        f"cost tier {show(t)} (space.tier_order / space.tier_options) is not in "
                        f"the cost model {cm.source} (it has {', '.join(cm.tiers)})."
                    )
    npu_w = as_real(s.npu_w, "space.npu_w", 0.0, LIMITS.max_w, unit=" (W per NPU)")
    spans = _span_table(s.span_m_by_npus, int(s.npus))
    _check_energy(cm, options, blocks)
    if not cfg.workloads:
        raise LibraInputError("workloads is empty; give at least one workload.")
    workloads = tuple(
        _load_scan_workload(w, s.npus, i, dims) for i, w in enumerate(cfg.workloads)
    )
    return ScanSpace(
        npus=int(s.npus), dims=dims, min_dim_size=int(s.min_dim_size),
        max_dim_size=s.max_dim_size, blocks=blocks, budgets_gbps=budgets, cost_model=cm,
        tier_options=options, workloads=workloads, npu_w=npu_w, span_m_by_npus=spans,
    )


def new_skip_counts(space: ScanSpace) -> dict:
    """Zeroed skip counters (filled by `count_designs`)."""
    return {
        "mapping_designs": 0,  # designs of shapes the TP/DP mapping cannot fit
        "mapping_shapes": {w.name: 0 for w in space.workloads},
        "switch_designs": 0,  # a Switch on a tier without a Switch price
        "reach_designs": 0,  # a tier whose ReachM is below its dimension's span
        "max_gbps_designs": 0,  # a budget above the sum of the tiers' MaxGbps
    }


def fixed_placement(shape: tuple[int, ...], tp: int) -> Placement | None:
    """The fixed mapping (`parallel_communicators`: TP from the innermost dim outward, DP the
    rest) as a `Placement` (pp all 1), or None when TP cannot be laid on the shape."""
    comms = parallel_communicators(shape, tp)
    if comms is None:
        return None
    tp_comm, dp_comm = comms
    return Placement(tuple(max(int(g), 1) for g in tp_comm), (1,) * len(shape),
                     tuple(max(int(g), 1) for g in dp_comm))


def workload_placements(w: ScanWorkload, shape: tuple[int, ...]) -> list[Placement]:
    """The mappings of a workload on a shape, in scan order: the fixed one (or none), or
    with ``mapping: search`` every TP x DP placement (`cosearch.enumerate_placements`)."""
    if w.mapping == Mapping.search:
        return enumerate_placements(shape, tp=w.tp, pp=1, dp=math.prod(shape) // w.tp)
    p = fixed_placement(shape, w.tp)
    return [] if p is None else [p]


def count_placements(w: ScanWorkload, shape: tuple[int, ...]) -> int:
    """``len(workload_placements(w, shape))`` without building them: with ``search``, the
    tuples (t_0, ..., t_{D-1}) with t_d | n_d and prod t_d == TP (DP takes the rest)."""
    if w.mapping != Mapping.search:
        return int(parallel_communicators(shape, w.tp) is not None)

    def count(dims: tuple[int, ...], left: int) -> int:
        if not dims:
            return int(left == 1)
        g = math.gcd(dims[0], left)
        return sum(count(dims[1:], left // t) for t in range(1, g + 1) if g % t == 0)

    return count(tuple(shape), w.tp)


class _Layout(NamedTuple):
    """The designs of one (shape, workload, mapping) of D dims: budgets x tiers x blocks.

    A design that cannot be built is counted under the first reason that applies, in this
    order: the mapping (the whole shape, `count_designs`), a Switch on a tier without a
    Switch price, a tier whose ReachM is below its dimension's span, a budget above the sum
    of the tiers' MaxGbps."""

    entries: tuple  # ((budget, tiers, [valid block tuples in product order]), ...) in order
    per_mapping: int  # designs per (shape, workload, mapping)
    switch_skips: int  # designs per mapping skipped for a Switch on a tier without one
    reach_skips: int  # ... for a tier that does not reach across its dimension
    max_gbps_skips: int  # ... for a budget the tiers' MaxGbps cannot carry
    all_blocks: int  # budgets x tier options x blocks^D (what an unmappable shape skips)


def _tier_blocks(space: ScanSpace) -> dict[int, list]:
    """Per D, per tier option: (tiers, valid block tuples, sum of the tiers' MaxGbps). A
    Switch needs a tier with a Switch price, a per-dimension rule, so the valid tuples are
    the product of per-dimension lists, in the order of ``itertools.product(space.blocks,
    repeat=D)``."""
    cm = space.cost_model
    out = {}
    for d in space.dims:
        options = []
        for tiers in space.tier_options[d]:
            allowed = [[b for b in space.blocks if b != "Switch" or "Switch" in cm.tiers[t]]
                       for t in tiers]
            cap = math.fsum(cm.max_gbps.get(t, math.inf) for t in tiers)
            options.append((tiers, list(itertools.product(*allowed)), cap))
        out[d] = options
    return out


class _Layouts:
    """`_Layout` of each shape, cached by what it depends on: D and, with
    ``space.span_m_by_npus``, which tier options reach across the shape's spans."""

    def __init__(self, space: ScanSpace):
        self.space = space
        self.options = _tier_blocks(space)
        self.cache: dict = {}

    def reaches(self, d: int, shape: tuple[int, ...]) -> tuple[bool, ...]:
        """Per tier option of D dims: every tier's ReachM (if any) >= its dimension's span."""
        spans = dim_spans_m(self.space, shape)
        reach = self.space.cost_model.reach_m
        if spans is None or not reach:
            return (True,) * len(self.options[d])
        return tuple(all(reach.get(t, math.inf) >= m for t, m in zip(tiers, spans))
                     for tiers, _, _ in self.options[d])

    def __call__(self, d: int, shape: tuple[int, ...]) -> _Layout:
        key = (d, self.reaches(d, shape))
        if key not in self.cache:
            self.cache[key] = self._build(d, key[1])
        return self.cache[key]

    def _build(self, d: int, ok: tuple[bool, ...]) -> _Layout:
        budgets, blocks = self.space.budgets_gbps, len(self.space.blocks)
        entries = []
        switch = reach = cap_skips = 0
        for budget in budgets:
            for (tiers, combos, cap), reaches in zip(self.options[d], ok):
                switch += blocks ** d - len(combos)
                if not reaches:
                    reach += len(combos)
                elif cap < budget:
                    cap_skips += len(combos)
                else:
                    entries.append((budget, tiers, combos))
        full = len(budgets) * len(self.options[d]) * blocks ** d
        return _Layout(tuple(entries), sum(len(c) for _, _, c in entries), switch, reach,
                       cap_skips, full)


def _shape_workloads(space: ScanSpace) -> Iterator[tuple[int, tuple[int, ...], int, int]]:
    """(D, shape, workload index, number of mappings) in scan order; no design is built."""
    for d in space.dims:
        for shape in enumerate_shapes(space.npus, d, space.min_dim_size, space.max_dim_size):
            for wi, w in enumerate(space.workloads):
                yield d, shape, wi, count_placements(w, shape)


def _check_range(start: int, stop: int | None) -> None:
    for key, v in (("start", start), ("stop", stop)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise LibraInputError(f"iter_designs {key} = {show(v)}: expected an integer >= 0.")
    if stop is not None and stop < start:
        raise LibraInputError(f"iter_designs stop = {stop} is below start = {start}.")


def iter_designs(space: ScanSpace, start: int = 0, stop: int | None = None
                 ) -> Iterator[Design]:
    """Designs ``start <= design_id < stop`` (all by default), lazily, in the fixed order
    D, shape, workload, mapping, budget, tiers, blocks.

    Designs that cannot be built take no id (`count_designs` counts them). The order never
    changes for a given space, which is what resuming relies on. Designs before ``start``
    are not built: whole (shape, workload) groups, mappings and tier options are skipped by
    their counts, so the start of a range costs one pass over the shapes, not over designs.
    Memory does not depend on the number of designs (the per-D valid block tuples are at
    most blocks^D each; one shape's placements at a time).

    Raises:
      LibraInputError: ``start`` or ``stop`` not an integer >= 0, or ``stop < start``.
    """
    _check_range(start, stop)
    stop = math.inf if stop is None else stop
    layouts = _Layouts(space)
    pos = 0  # design_id of the first design of the current group
    for d, shape, wi, n_map in _shape_workloads(space):
        if pos >= stop:
            return
        lay = layouts(d, shape)
        size = n_map * lay.per_mapping
        if size == 0 or pos + size <= start:
            pos += size
            continue
        first = max(0, start - pos) // lay.per_mapping
        at = pos + first * lay.per_mapping
        for mapping in workload_placements(space.workloads[wi], shape)[first:]:
            for budget, tiers, combos in lay.entries:
                n = len(combos)
                if at + n > start and at < stop:
                    for k in range(max(0, start - at), min(n, stop - at)):
                        yield Design(at + k, shape, combos[k], tiers, budget, wi, mapping)
                at += n
        pos += size


def count_designs(space: ScanSpace) -> tuple[int, dict]:
    """(number of designs, skip counts), by arithmetic per (shape, workload): no design is
    built, so it costs the same for 10^3 or 10^9 designs. Each skipped design is counted
    once, under the first reason of `_Layout`'s order (`new_skip_counts` names them)."""
    skipped = new_skip_counts(space)
    layouts = _Layouts(space)
    total = 0
    for d, shape, wi, n_map in _shape_workloads(space):
        lay = layouts(d, shape)
        if n_map == 0:
            skipped["mapping_designs"] += lay.all_blocks
            skipped["mapping_shapes"][space.workloads[wi].name] += 1
        total += n_map * lay.per_mapping
        skipped["switch_designs"] += n_map * lay.switch_skips
        skipped["reach_designs"] += n_map * lay.reach_skips
        skipped["max_gbps_designs"] += n_map * lay.max_gbps_skips
    return total, skipped


def chunked(it: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of ``size`` items (the last one shorter)."""
    it = iter(it)
    while True:
        part = list(itertools.islice(it, size))
        if not part:
            return
        yield part
