"""The design space: validated config -> a lazy, fixed-order enumeration of designs.

A design is (shape, blocks, cost tiers, budget, workload); see `libra_jax.studies.scan` for
the space. `iter_designs` yields them in one order that never changes for a given space (D,
shape, workload, budget, tiers, blocks), which is what chunk files and resuming rely on;
designs that cannot be built are counted, not yielded (`new_skip_counts`).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import pathlib
import tempfile
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np

from libra_jax.inputs.cost import CostModel, load_cost_model
from libra_jax.inputs.generators import parallel_communicators
from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import network_from_lists
from libra_jax.inputs.workload import load_workload
from libra_jax.studies.scan.config import ScanConfig, ScanWorkloadConfig
from libra_jax.types import BLOCK_ABBREV, BLOCKS, LibraInputError


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


class Design(NamedTuple):
    """One design (a lightweight descriptor; problems are built per chunk)."""

    design_id: int  # position in the enumeration order
    shape: tuple[int, ...]
    blocks: tuple[str, ...]
    tiers: tuple[str, ...]
    budget_gbps: float
    workload: int  # index into ScanSpace.workloads


def _load_scan_workload(w: ScanWorkloadConfig, npus: int, index: int) -> ScanWorkload:
    key = f"workloads[{index}]"
    path = resolve_path(w.file, f"{key}.file")
    if isinstance(w.tp, bool) or not isinstance(w.tp, int) or w.tp < 1:
        raise LibraInputError(f"{key}.tp = {w.tp!r}: expected an integer >= 1.")
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
            f"space.blocks[{index}] = {name!r}: unknown building block.{hint} Accepted "
            f"(case-insensitive): {accepted}."
        ) from None


def make_space(cfg: ScanConfig) -> ScanSpace:
    """Validates the config and loads workloads and cost model.

    Raises:
      LibraInputError: naming the config key and value.
    """
    s = cfg.space
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
        raise LibraInputError(f"space.blocks = {list(s.blocks)}: a block is listed twice.")
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
                        f"cost tier {t!r} (space.tier_order / space.tier_options) is not in "
                        f"the cost model {cm.source} (it has {', '.join(cm.tiers)})."
                    )
    if not cfg.workloads:
        raise LibraInputError("workloads is empty; give at least one workload.")
    workloads = tuple(
        _load_scan_workload(w, s.npus, i) for i, w in enumerate(cfg.workloads)
    )
    return ScanSpace(
        npus=int(s.npus), dims=dims, min_dim_size=int(s.min_dim_size),
        max_dim_size=s.max_dim_size, blocks=blocks, budgets_gbps=budgets, cost_model=cm,
        tier_options=options, workloads=workloads,
    )


def new_skip_counts(space: ScanSpace) -> dict:
    """Zeroed skip counters (filled by `iter_designs`)."""
    return {
        "mapping_designs": 0,  # designs of shapes the TP/DP mapping cannot fit
        "mapping_shapes": {w.name: 0 for w in space.workloads},
        "switch_designs": 0,  # a Switch on a tier without a Switch price
    }


def iter_designs(space: ScanSpace, skipped: dict | None = None) -> Iterator[Design]:
    """All designs, lazily, in the fixed order D, shape, workload, budget, tiers, blocks.

    Designs that cannot be built are not yielded and do not take an id; they are counted in
    ``skipped`` (see `new_skip_counts`). The order never changes for a given space, which is
    what resuming relies on.
    """
    skipped = new_skip_counts(space) if skipped is None else skipped
    idx = 0
    cm = space.cost_model.tiers
    for d in space.dims:
        tier_opts = space.tier_options[d]
        per_shape = len(space.budgets_gbps) * len(tier_opts) * len(space.blocks) ** d
        for shape in enumerate_shapes(space.npus, d, space.min_dim_size, space.max_dim_size):
            for wi, w in enumerate(space.workloads):
                if parallel_communicators(shape, w.tp) is None:
                    skipped["mapping_designs"] += per_shape
                    skipped["mapping_shapes"][w.name] += 1
                    continue
                for budget in space.budgets_gbps:
                    for tiers in tier_opts:
                        for blocks in itertools.product(space.blocks, repeat=d):
                            if any(b == "Switch" and "Switch" not in cm[t]
                                   for b, t in zip(blocks, tiers)):
                                skipped["switch_designs"] += 1
                                continue
                            yield Design(idx, shape, blocks, tiers, budget, wi)
                            idx += 1


def count_designs(space: ScanSpace) -> tuple[int, dict]:
    """(number of designs, skip counts), by one pass over the lazy enumeration."""
    skipped = new_skip_counts(space)
    n = sum(1 for _ in iter_designs(space, skipped))
    return n, skipped


def chunked(it: Iterable, size: int) -> Iterator[list]:
    """Consecutive lists of ``size`` items (the last one shorter)."""
    it = iter(it)
    while True:
        part = list(itertools.islice(it, size))
        if not part:
            return
        yield part
