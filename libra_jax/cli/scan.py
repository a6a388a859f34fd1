"""Design-space scan: ``python -m libra_jax.scan [key=value ...]`` (config ``conf/scan.yaml``).

Enumerates network designs for N NPUs and optimises every one (LIBRA, Won et al. ISPASS 2024,
Sec. V "design-space exploration"): a design is

    (shape, blocks, cost tiers, budget, workload)

* shape: an ordered factorisation N = n_0 * ... * n_{D-1} (dim 0 innermost), D in
  [min_dims, max_dims], each n_d in [min_dim_size, max_dim_size];
* blocks: one of {Ring, FullyConnected, Switch} per dimension (product over dims);
* cost tiers: one cost-model row per dimension (default: the last D of ``tier_order``, so the
  innermost dims get the cheaper tiers); a Switch needs a tier with a Switch price;
* budget: per-NPU bandwidth summed over the dimensions, sum(bw) == budget (GB/s);
* workload: a shipped text workload whose collectives use communicators derived from its
  tensor- and data-parallel degrees (`parallel_communicators`): Forward and InputGrad use the
  TP group, WeightGrad the DP group, TP filling dimensions from the innermost outward.

Each design is solved for minimum step time (`perf`) with `batch.solve_batch` (jit(vmap) over
buckets), in chunks of ``scan.chunk_size`` designs enumerated lazily in a fixed order, so
memory is bounded by the chunk size whatever the size of the space. Each finished chunk is
written atomically (temp file + rename) as ``chunk_NNNNNN.csv`` (``.parquet`` when pyarrow is
installed); a rerun with the same ``scan.output_dir`` skips chunks whose file exists, so a
killed scan resumes without recomputing or losing anything. At the end the chunk files are
streamed once to build the top-k table (``top_k.md``), the per-workload Pareto fronts of
(step time, network cost) (``pareto_front.csv``) and their plot (``pareto.png``).

The optimal bandwidths of the `perf` problem depend on the traffic (shape, workload) and the
budget only, not on the building blocks or cost tiers, which only price the result. With
``scan.dedup=true`` (default) a chunk solves each distinct (shape, workload, budget) problem
once and prices it for every design sharing it; ``scan.dedup=false`` solves every design
(same numbers, tested).
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import heapq
import importlib.util
import itertools
import json
import math
import os
import pathlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, List, NamedTuple, Optional

import hydra
import numpy as np
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from libra_jax.cli import config
from libra_jax.inputs.cost import CostModel, cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.generators import parallel_communicators
from libra_jax.inputs.topology import Network, network_from_lists
from libra_jax.inputs.workload import load_workload
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.problem import Problem, merge_phases
from libra_jax.solvers import batch
from libra_jax.types import LibraInputError, float64

# --------------------------------------------------------------------------------------------
# Config schema (values in conf/scan.yaml)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class ScanWorkloadConfig:
    """A workload and its parallelisation (tp * dp must equal space.npus)."""

    file: str = "workload/GPT_3.txt"  # ASTRA-sim text (.txt) or native YAML workload
    name: Optional[str] = None  # default: file stem
    tp: int = 1  # tensor-parallel degree: Forward / InputGrad communicator size
    dp: Optional[int] = None  # data-parallel degree: WeightGrad; null -> npus / tp


@dataclasses.dataclass
class SpaceConfig:
    """The design space."""

    npus: int = 4096  # N, NPUs of every design
    min_dims: int = 2  # D range, inclusive
    max_dims: int = 4
    min_dim_size: int = 2  # NPUs per dimension, inclusive bounds (>= 2)
    max_dim_size: Optional[int] = None
    blocks: List[str] = dataclasses.field(
        default_factory=lambda: ["Ring", "FullyConnected", "Switch"]
    )
    budgets_gbps: List[float] = dataclasses.field(default_factory=lambda: [500.0])
    cost_model: str = "cost_model/4d_cost_model.yml"
    # Tiers innermost (cheapest) -> outermost; D dims use the last D of them ...
    tier_order: List[str] = dataclasses.field(
        default_factory=lambda: ["InterChiplet", "InterPackage", "InterNode", "InterPod"]
    )
    # ... unless tier_options is set: per-dim tier lists, each used for shapes of its length.
    tier_options: Optional[List[List[str]]] = None


@dataclasses.dataclass
class RunConfig:
    """How the scan runs."""

    output_dir: Optional[str] = None  # null -> the Hydra run dir; reuse a dir to resume
    chunk_size: int = 2048  # designs per chunk file (part of the resume identity)
    solve_chunk: Optional[int] = None  # most problems per device call (null: the engine's
    #   default, batch.default_max_chunk: 1024 on CPUs, 65536 on GPUs)
    dtype: str = "float64"  # float64 | float32 (the kernel's precision; certified in float64)
    dedup: bool = True  # solve each distinct (shape, workload, budget) once per chunk
    format: str = "auto"  # auto (parquet if pyarrow is installed, else csv) | csv | parquet
    max_chunks: Optional[int] = None  # compute at most this many chunks, then stop
    progress: bool = True  # progress line on stderr


@dataclasses.dataclass
class ReportConfig:
    """The summary written when every chunk is done."""

    top_k: int = 10  # rows per workload in the top-k table
    rank_by: str = "time_x_cost"  # time_x_cost | step_time_ns | network_cost_usd
    plot_labels: int = 4  # Pareto points labelled per workload (best by rank_by)
    plot_points: int = 20000  # at most this many background points per workload


@dataclasses.dataclass
class ScanConfig:
    space: SpaceConfig = dataclasses.field(default_factory=SpaceConfig)
    workloads: List[ScanWorkloadConfig] = dataclasses.field(
        default_factory=lambda: [ScanWorkloadConfig()]
    )
    scan: RunConfig = dataclasses.field(default_factory=RunConfig)
    report: ReportConfig = dataclasses.field(default_factory=ReportConfig)
    # JAX's persistent compilation cache (repeat runs skip XLA compilation); null: off.
    compilation_cache_dir: Optional[str] = "~/.cache/libra_jax/jax"


def register_configs() -> None:
    """Registers the schema ``base_scan`` in Hydra's ConfigStore (idempotent)."""
    ConfigStore.instance().store(name="base_scan", node=ScanConfig)


RANK_KEYS = ("time_x_cost", "step_time_ns", "network_cost_usd")
FORMATS = ("auto", "csv", "parquet")
COLUMNS = (
    "design_id", "workload", "notation", "dims", "blocks", "tiers", "npus", "budget_gbps",
    "bandwidth_gbps", "step_time_ns", "network_cost_usd", "time_x_cost", "optimality_gap",
    "max_violation", "status",
)
_INT_COLUMNS = ("design_id", "npus")
_FLOAT_COLUMNS = (
    "budget_gbps", "step_time_ns", "network_cost_usd", "time_x_cost", "optimality_gap",
    "max_violation",
)

# --------------------------------------------------------------------------------------------
# Enumeration
# --------------------------------------------------------------------------------------------


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
    path = config.resolve_path(w.file, f"{key}.file")
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
    blocks = network_from_lists(list(s.blocks), [2] * len(s.blocks), source="space.blocks").blocks
    if len(set(blocks)) != len(blocks):
        raise LibraInputError(f"space.blocks = {list(s.blocks)}: a block is listed twice.")
    budgets = tuple(float(b) for b in s.budgets_gbps)
    if not budgets or any(not (b > 0 and math.isfinite(b)) for b in budgets):
        raise LibraInputError(
            f"space.budgets_gbps = {list(s.budgets_gbps)}: need finite budgets > 0 (GB/s)."
        )
    cm = load_cost_model(config.resolve_path(s.cost_model, "space.cost_model"))
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


# --------------------------------------------------------------------------------------------
# Problems
# --------------------------------------------------------------------------------------------


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


def fast_problem(
    traffic_gb: np.ndarray,
    weight: np.ndarray,
    compute_s: float,
    cost_rates_usd_per_gbps: np.ndarray | None,
    budget_gbps: float,
) -> Problem:
    """The `Problem` of ``sum(bw) == budget, bw >= 0`` in closed form (no LPs).

    Gives the same fields as ``problem_from_arrays(..., ConstraintSpec(total_bw_gbps=
    budget))`` (tested): every dim can take the whole budget (``upper``), the equal split is
    the most interior point, and the least-cost point puts the budget on the cheapest dim.
    """
    traffic_gb = np.asarray(traffic_gb, np.float64)
    d = traffic_gb.shape[1]
    budget = float(budget_gbps)
    has_cost = cost_rates_usd_per_gbps is not None
    rates = np.zeros(d) if not has_cost else np.asarray(cost_rates_usd_per_gbps, np.float64)
    ones = np.ones(d)
    norm = np.linalg.norm(ones)
    interior = np.full(d, budget / d)
    if has_cost:
        min_cost_bw = np.zeros(d)
        min_cost_bw[int(np.argmin(rates))] = budget
    else:
        min_cost_bw = interior.copy()
    return Problem(
        traffic_gb=traffic_gb.reshape(-1, d),
        weight=np.asarray(weight, np.float64),
        compute_s=np.asarray(compute_s, np.float64),
        cost_rate=rates,
        lo=np.zeros(d),
        hi=np.full(d, np.inf),
        upper=np.full(d, budget),
        a_eq=(ones / norm)[None, :],
        b_eq=np.array([budget / norm]),
        a_in=np.zeros((0, d)),
        b_in=np.zeros((0,)),
        lo_tight=np.zeros(d, bool),
        hi_tight=np.zeros(d, bool),
        in_tight=np.zeros((0,), bool),
        interior=interior,
        min_cost_bw=min_cost_bw,
        total_bw_gbps=np.asarray(budget, np.float64),
        piece_weight=np.zeros(0),
        row_piece=np.zeros(0, np.int32),
        row_const_s=np.zeros(0),
        row_gb=np.zeros((0, d)),
        row_nest=np.zeros((0, 0)),
        row_on=np.zeros(0, bool),
        comm_const_s=np.asarray(0.0),
        has_cost=has_cost,
    )


class _Builder:
    """Builds a chunk's problems and network prices with small caches (shape-major order)."""

    def __init__(self, space: ScanSpace):
        self.space = space
        self._traffic: dict = {}
        self._nets: dict = {}

    def traffic(self, shape, wi):
        key = (shape, wi)
        if key not in self._traffic:
            if len(self._traffic) > 1024:
                self._traffic.clear()
            self._traffic[key] = design_traffic(self.space.workloads[wi], shape)
        return self._traffic[key]

    def network(self, shape, blocks, tiers) -> tuple[Network, np.ndarray]:
        key = (shape, blocks, tiers)
        if key not in self._nets:
            if len(self._nets) > 4096:
                self._nets.clear()
            net = Network(blocks=blocks, npus=shape, cost_tiers=tiers, source="scan")
            self._nets[key] = (net, cost_rates_usd_per_gbps(net, self.space.cost_model))
        return self._nets[key]

    def problem(self, design: Design, rates: np.ndarray | None) -> Problem:
        t, wgt = self.traffic(design.shape, design.workload)
        compute = self.space.workloads[design.workload].compute_s
        return fast_problem(t, wgt, compute, rates, design.budget_gbps)


def _fmt_list(xs) -> str:
    return "[" + ", ".join(f"{float(x):.6g}" for x in xs) + "]"


def solve_designs(
    designs: list[Design],
    space: ScanSpace,
    *,
    dedup: bool = True,
    solve_chunk: int | None = None,
    dtype: str = "float64",
    solver: Callable | None = None,
    builder: _Builder | None = None,
    timings: dict | None = None,
) -> list[dict]:
    """Optimises a chunk of designs; one result row (dict of `COLUMNS`) per design.

    Args:
      designs: the chunk.
      space: its space.
      dedup: solve each distinct (shape, workload, budget) once (see module docstring).
      solve_chunk: most problems per device call (`batch.solve_batch`'s ``chunk``).
      dtype: the kernel's precision, "float64" or "float32" (`batch.solve_batch`).
      solver: ``solve_batch``-compatible function (tests count calls); default
        `batch.solve_batch`.
      builder: caches shared across chunks.
      timings: adds seconds spent in "build" and "solve".
    """
    solver = batch.solve_batch if solver is None else solver
    builder = _Builder(space) if builder is None else builder
    timings = {} if timings is None else timings
    t0 = time.perf_counter()
    nets = [builder.network(x.shape, x.blocks, x.tiers) for x in designs]
    if dedup:
        keys: dict = {}
        which = []
        problems = []
        for x in designs:
            k = (x.shape, x.workload, x.budget_gbps)
            if k not in keys:
                keys[k] = len(problems)
                problems.append(builder.problem(x, None))  # bw does not depend on prices
            which.append(keys[k])
    else:
        problems = [builder.problem(x, rates) for x, (_, rates) in zip(designs, nets)]
        which = list(range(len(designs)))
    t1 = time.perf_counter()
    res = solver(problems, chunk=solve_chunk, dtype=np.dtype(dtype))
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
            "bandwidth_gbps": _fmt_list(bw),
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


# --------------------------------------------------------------------------------------------
# Chunk files
# --------------------------------------------------------------------------------------------


def resolve_format(fmt: str) -> str:
    """'csv' or 'parquet' ('auto': parquet when pyarrow is importable)."""
    if fmt not in FORMATS:
        raise LibraInputError(f"scan.format = {fmt!r}: expected one of {', '.join(FORMATS)}.")
    if fmt == "auto":
        return "parquet" if importlib.util.find_spec("pyarrow") is not None else "csv"
    if fmt == "parquet" and importlib.util.find_spec("pyarrow") is None:
        raise LibraInputError("scan.format = parquet needs pyarrow; use csv or auto.")
    return fmt


def chunk_path(output_dir: pathlib.Path, index: int, fmt: str) -> pathlib.Path:
    return pathlib.Path(output_dir) / "chunks" / f"chunk_{index:06d}.{fmt}"


def write_chunk(rows: list[dict], path: pathlib.Path, fmt: str) -> None:
    """Writes rows atomically: a temp file in the same dir, fsync, then rename."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    if fmt == "parquet":
        import pyarrow as pa  # noqa: PLC0415  (optional)
        import pyarrow.parquet as pq  # noqa: PLC0415

        pq.write_table(pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows]), tmp)
    else:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            for r in rows:
                w.writerow({c: (repr(r[c]) if isinstance(r[c], float) else r[c])
                            for c in COLUMNS})
            f.flush()
            os.fsync(f.fileno())
    os.replace(tmp, path)


def read_chunk(path: pathlib.Path) -> list[dict]:
    """Rows of a chunk file, numbers as int / float."""
    path = pathlib.Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # noqa: PLC0415

        return pq.read_table(path).to_pylist()
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for c in _INT_COLUMNS:
            r[c] = int(r[c])
        for c in _FLOAT_COLUMNS:
            r[c] = float(r[c])
    return rows


def _chunks(it: Iterable, size: int) -> Iterator[list]:
    it = iter(it)
    while True:
        part = list(itertools.islice(it, size))
        if not part:
            return
        yield part


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------


def _clock(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress:
    """One stderr line, rewritten with ``\\r``: designs done, designs/s, ETA."""

    def __init__(self, total: int, done: int = 0, enabled: bool = True, stream=None):
        self.total, self.done, self.enabled = total, done, enabled
        self.stream = sys.stderr if stream is None else stream
        self.start = time.perf_counter()
        self.new = 0  # designs computed by this run (the rate counts only these)
        self.resumed = 0  # designs found in chunk files of an earlier run

    def update(self, computed: int = 0, resumed: int = 0) -> None:
        self.done += computed + resumed
        self.new += computed
        self.resumed += resumed
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self.start
        rate = self.new / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else math.inf
        pct = 100.0 * self.done / max(self.total, 1)
        self.stream.write(
            f"\rscan: {self.done:,}/{self.total:,} designs ({pct:5.1f}%; "
            f"{self.resumed:,} from files) | "
            f"{rate:,.0f} designs/s | elapsed {_clock(elapsed)} | ETA {_clock(eta)} "
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------------------------
# Pareto front, top-k, plot
# --------------------------------------------------------------------------------------------


def pareto_front(step_time, cost) -> np.ndarray:
    """Indices of the points no other point beats on both (minimising both), by time.

    A point is kept when its cost is below the cost of every point with a smaller time (ties
    in time: the cheaper one first), so weakly dominated points and duplicates are dropped.

    Args:
      step_time: [B] times; cost: [B] costs.

    Returns:
      [F] indices into the inputs, in increasing time (and decreasing cost).
    """
    t = np.asarray(step_time, np.float64)
    c = np.asarray(cost, np.float64)
    if t.size == 0:
        return np.zeros((0,), np.int64)
    order = np.lexsort((c, t))
    cs = c[order]
    best_before = np.concatenate([[np.inf], np.minimum.accumulate(cs)[:-1]])
    return order[cs < best_before]


_FRONT_FIELDS = ("step_time_ns", "network_cost_usd")


def _tie_key(r: dict) -> tuple:
    """Designs that differ only in blocks of equal price (e.g. Ring vs FullyConnected, both
    N x Link per GB/s) and get the same numbers: collapsed into one top-k row."""
    return (r["workload"], r["dims"], r["tiers"], r["budget_gbps"],
            float(f"{r['step_time_ns']:.9g}"), float(f"{r['network_cost_usd']:.9g}"))


class _Summary:
    """Streams chunk rows once: per workload top-k, Pareto front, a reservoir sample.

    The top-k heap keeps ``top_k * max_ties`` rows, where ``max_ties`` bounds the designs of
    one tie group (the block choices of one shape), so the best ``top_k`` tie groups are
    complete when collapsed at the end.
    """

    def __init__(self, rank_by: str, top_k: int, sample: int, max_ties: int = 1,
                 seed: int = 0):
        self.rank_by, self.top_k, self.sample = rank_by, top_k, sample
        self.keep = top_k * max(max_ties, 1)
        self.heaps: dict = {}
        self.fronts: dict = {}
        self.points: dict = {}
        self.seen: dict = {}
        self.status: dict = {}
        self.rng = np.random.default_rng(seed)

    def add(self, rows: list[dict]) -> None:
        by_wl: dict = {}
        for r in rows:
            self.status[r["status"]] = self.status.get(r["status"], 0) + 1
            if r["status"] != "ok":
                continue
            by_wl.setdefault(r["workload"], []).append(r)
        for wl, rs in by_wl.items():
            heap = self.heaps.setdefault(wl, [])
            for r in rs:
                item = (-r[self.rank_by], -r["design_id"], r)
                if len(heap) < self.keep:
                    heapq.heappush(heap, item)
                elif item[:2] > heap[0][:2]:
                    heapq.heapreplace(heap, item)
            cand = self.fronts.get(wl, []) + rs
            keep = pareto_front([r["step_time_ns"] for r in cand],
                                [r["network_cost_usd"] for r in cand])
            self.fronts[wl] = [cand[i] for i in keep]
            pts = self.points.setdefault(wl, [])
            for r in rs:  # reservoir sampling (Algorithm R), bounded memory
                n = self.seen.get(wl, 0)
                self.seen[wl] = n + 1
                p = (r["network_cost_usd"], r["step_time_ns"])
                if len(pts) < self.sample:
                    pts.append(p)
                else:
                    j = int(self.rng.integers(0, n + 1))
                    if j < self.sample:
                        pts[j] = p

    def top(self, wl: str) -> list[dict]:
        """Best ``top_k`` tie groups: first design of each, with ``ties`` = group size."""
        rows = [r for _, _, r in sorted(self.heaps.get(wl, []), key=lambda x: (-x[0], -x[1]))]
        groups: dict = {}
        for r in rows:
            k = _tie_key(r)
            if k in groups:
                groups[k]["ties"] += 1
            else:
                groups[k] = dict(r, ties=1)
        return list(groups.values())[: self.top_k]


def _md_table(rows: list[dict]) -> list[str]:
    head = ["rank", "workload", "network", "ties", "tiers", "budget (GB/s)",
            "bandwidth (GB/s)", "step time (ms)", "network cost ($M)",
            "time x cost (s x $M)", "gap"]
    out = ["| " + " | ".join(head) + " |", "|---:|---|---|---:|---|" + "---:|" * 6]
    rank = 0
    last = None
    for r in rows:
        rank = rank + 1 if r["workload"] == last else 1
        last = r["workload"]
        out.append("| " + " | ".join([
            str(rank), r["workload"], f"`{r['notation']}`", str(r.get("ties", 1)),
            r["tiers"], f"{r['budget_gbps']:g}", r["bandwidth_gbps"],
            f"{r['step_time_ns'] / 1e6:.3f}", f"{r['network_cost_usd'] / 1e6:.3f}",
            f"{r['time_x_cost'] / 1e15:.4g}", f"{r['optimality_gap']:.1e}",
        ]) + " |")
    return out


def top_k_markdown(summary: _Summary, workloads: list[str]) -> str:
    """The top-k table (Markdown), per workload best first."""
    lines = [
        f"Top {summary.top_k} designs per workload by {summary.rank_by} (lower is better); "
        "ties = designs with the same numbers that differ only in equally priced blocks "
        "(Ring and FullyConnected both cost N x Link per GB/s), the first one shown.",
        "",
    ]
    rows = [r for wl in workloads for r in summary.top(wl)]
    lines += _md_table(rows)
    return "\n".join(lines) + "\n"


def _label_points(front: list[dict], rank_by: str, n: int) -> list[dict]:
    """Up to n front points to label: best by rank_by, fastest, cheapest, then spread out."""
    if not front or n <= 0:
        return []
    picks = [min(range(len(front)), key=lambda i: front[i][rank_by]), 0, len(front) - 1]
    picks += [int(round(x)) for x in np.linspace(0, len(front) - 1, n + 2)[1:-1]]
    out: list[int] = []
    for i in picks:
        if i not in out:
            out.append(i)
    return [front[i] for i in sorted(out[:n])]  # front order (callers sort by cost)


def plot_pareto(summary: _Summary, workloads: list[str], path: pathlib.Path, rank_by: str,
                labels: int) -> None:
    """Per-workload panel: sampled designs, the Pareto front, some front points labelled."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    n = max(len(workloads), 1)
    fig, axes = plt.subplots(1, n, figsize=(6.5 * n, 5.5), squeeze=False)
    for ax, wl in zip(axes[0], workloads):
        pts = np.asarray(summary.points.get(wl, []), np.float64).reshape(-1, 2)
        front = sorted(summary.fronts.get(wl, []), key=lambda r: r["network_cost_usd"])
        ax.scatter(pts[:, 0] / 1e6, pts[:, 1] / 1e6, s=3, c="0.75", lw=0,
                   label=f"designs ({summary.seen.get(wl, 0):,}; {len(pts):,} drawn)")
        fx = np.array([r["network_cost_usd"] for r in front]) / 1e6
        fy = np.array([r["step_time_ns"] for r in front]) / 1e6
        ax.step(fx, fy, where="post", c="tab:red", lw=1.0)
        ax.plot(fx, fy, "o", c="tab:red", ms=3, label=f"Pareto front ({len(front)})")
        chosen = _label_points(front, rank_by, labels)
        for i, r in enumerate(chosen):
            ax.plot(r["network_cost_usd"] / 1e6, r["step_time_ns"] / 1e6, "o", ms=6,
                    mfc="none", mec="black", mew=0.8)
            ax.annotate(
                f"{r['notation']} @ {r['budget_gbps']:g} GB/s",
                (r["network_cost_usd"] / 1e6, r["step_time_ns"] / 1e6),
                xytext=(0.30, 0.90 - 0.09 * i), textcoords="axes fraction", fontsize=7,
                bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="0.6", alpha=0.85),
                arrowprops=dict(arrowstyle="-", lw=0.5, color="0.3"),
            )
        ax.set_xscale("log")
        ax.set_xlabel("network cost (million $, log scale)")
        ax.set_ylabel("step time (ms)")
        ax.set_title(f"{wl}: step time vs network cost")
        ax.grid(True, which="both", lw=0.3, alpha=0.5)
        ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summarise(output_dir: pathlib.Path, n_chunks: int, fmt: str, workloads: list[str],
              report: ReportConfig, max_ties: int = 1) -> tuple[_Summary, str]:
    """Reads every chunk once; writes top_k.md, pareto_front.csv, pareto.png."""
    output_dir = pathlib.Path(output_dir)
    s = _Summary(report.rank_by, report.top_k, report.plot_points, max_ties)
    for i in range(n_chunks):
        s.add(read_chunk(chunk_path(output_dir, i, fmt)))
    md = top_k_markdown(s, workloads)
    (output_dir / "top_k.md").write_text(md, encoding="utf-8")
    with open(output_dir / "pareto_front.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for wl in workloads:
            for r in s.fronts.get(wl, []):
                w.writerow({c: r[c] for c in COLUMNS})
    plot_pareto(s, workloads, output_dir / "pareto.png", report.rank_by, report.plot_labels)
    return s, md


# --------------------------------------------------------------------------------------------
# The scan
# --------------------------------------------------------------------------------------------


def _fingerprint(cfg: ScanConfig, space: ScanSpace, fmt: str) -> dict:
    """What must not change between a run and its resume (enumeration and chunking)."""
    return {
        "space": dataclasses.asdict(cfg.space),
        "cost_model": space.cost_model.tiers,
        "workloads": [dataclasses.asdict(w) for w in cfg.workloads],
        "chunk_size": cfg.scan.chunk_size,
        "format": fmt,
    }


@dataclasses.dataclass
class ScanResult:
    output_dir: pathlib.Path
    total_designs: int
    skipped: dict
    computed: int  # designs solved by this run
    resumed: int  # designs found in existing chunk files
    chunks: int
    complete: bool
    seconds: float
    timings: dict
    top_k_markdown: str | None = None

    @property
    def designs_per_s(self) -> float:
        return self.computed / self.seconds if self.seconds > 0 else 0.0


def run_scan(cfg: ScanConfig, output_dir: str | os.PathLike, *,
             solver: Callable | None = None) -> ScanResult:
    """Runs (or resumes) a scan into ``output_dir``; summarises when every chunk exists.

    Args:
      cfg: the scan config (`ScanConfig`).
      output_dir: where chunks and the summary go; reuse it to resume.
      solver: ``solve_batch``-compatible function (default `batch.solve_batch`).

    Raises:
      LibraInputError: bad config, or an output_dir holding a different scan.
    """
    start = time.perf_counter()
    r = cfg.scan
    if r.chunk_size < 1 or (r.solve_chunk is not None and r.solve_chunk < 1):
        raise LibraInputError(
            f"scan.chunk_size = {r.chunk_size}, scan.solve_chunk = {r.solve_chunk}: both must "
            "be >= 1 (solve_chunk may be null)."
        )
    if r.dtype not in ("float64", "float32"):
        raise LibraInputError(f"scan.dtype = {r.dtype!r}: choose float64 or float32.")
    if cfg.report.rank_by not in RANK_KEYS:
        raise LibraInputError(
            f"report.rank_by = {cfg.report.rank_by!r}: expected one of {', '.join(RANK_KEYS)}."
        )
    fmt = resolve_format(r.format)
    space = make_space(cfg)
    names = [w.name for w in space.workloads]
    if len(set(names)) != len(names):
        raise LibraInputError(f"workloads: names {names} repeat; give each a distinct name.")
    out = pathlib.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    fp = _fingerprint(cfg, space, fmt)
    manifest = out / "scan_manifest.json"
    if manifest.exists():
        old = json.loads(manifest.read_text(encoding="utf-8"))
        if old.get("fingerprint_sha256") != _sha(fp):
            raise LibraInputError(
                f"{out} holds chunks of a different scan (space, workloads, chunk size or "
                "format differ); use a new scan.output_dir or delete that directory."
            )
    total, skipped = count_designs(space)
    n_chunks = -(-total // r.chunk_size)
    tmp_manifest = manifest.with_name(manifest.name + ".tmp")
    tmp_manifest.write_text(json.dumps({
        "fingerprint_sha256": _sha(fp), "fingerprint": fp, "total_designs": total,
        "chunks": n_chunks, "skipped": skipped}, indent=1, default=str), encoding="utf-8")
    os.replace(tmp_manifest, manifest)
    for stale in (out / "chunks").glob("*.tmp*") if (out / "chunks").exists() else ():
        stale.unlink()  # a temp file left by a killed run: its chunk is recomputed

    progress = Progress(total, 0, r.progress)
    builder = _Builder(space)
    timings: dict = {}
    computed = resumed = done_now = 0
    t_loop = time.perf_counter()
    for ci, chunk in enumerate(_chunks(iter_designs(space), r.chunk_size)):
        path = chunk_path(out, ci, fmt)
        if path.exists():
            resumed += len(chunk)
            progress.update(resumed=len(chunk))
            continue
        if r.max_chunks is not None and done_now >= r.max_chunks:
            break
        rows = solve_designs(chunk, space, dedup=r.dedup, solve_chunk=r.solve_chunk,
                             dtype=r.dtype, solver=solver, builder=builder, timings=timings)
        t = time.perf_counter()
        write_chunk(rows, path, fmt)
        timings["write"] = timings.get("write", 0.0) + time.perf_counter() - t
        computed += len(chunk)
        done_now += 1
        progress.update(computed=len(chunk))
    progress.close()
    loop_s = time.perf_counter() - t_loop
    complete = all(chunk_path(out, i, fmt).exists() for i in range(n_chunks))
    md = None
    status_counts = None
    if complete:
        t = time.perf_counter()
        max_ties = len(space.blocks) ** max(space.dims)  # block choices of one shape
        summ, md = summarise(out, n_chunks, fmt, names, cfg.report, max_ties)
        status_counts = summ.status
        timings["summary"] = time.perf_counter() - t
    result = ScanResult(out, total, skipped, computed, resumed, n_chunks, complete,
                        loop_s, timings, md)
    (out / "scan_summary.json").write_text(json.dumps({
        "total_designs": total, "skipped": skipped, "chunks": n_chunks,
        "computed_this_run": computed, "resumed_from_files": resumed, "complete": complete,
        "loop_seconds": loop_s, "designs_per_s": result.designs_per_s,
        "wall_seconds": time.perf_counter() - start, "timings_s": timings,
        "status_counts": status_counts}, indent=1), encoding="utf-8")
    return result


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def describe(result: ScanResult) -> str:
    """The text the CLI prints after a run."""
    s = result.skipped
    shapes = ", ".join(f"{k}: {v}" for k, v in s["mapping_shapes"].items())
    lines = [
        f"designs: {result.total_designs:,} in {result.chunks} chunks "
        f"(computed now {result.computed:,}, found on disk {result.resumed:,})",
        f"skipped: {s['mapping_designs'] + s['switch_designs']:,} designs "
        f"({s['mapping_designs']:,} whose shape the TP/DP mapping cannot fit, shapes per "
        f"workload: {shapes}; {s['switch_designs']:,} with a Switch on a tier without a "
        "Switch price)",
        f"time: {result.seconds:.1f} s, {result.designs_per_s:,.0f} designs/s "
        f"(build {result.timings.get('build', 0.0):.1f} s, solve "
        f"{result.timings.get('solve', 0.0):.1f} s, write "
        f"{result.timings.get('write', 0.0):.1f} s, summary "
        f"{result.timings.get('summary', 0.0):.1f} s)",
    ]
    if result.complete:
        lines += ["", result.top_k_markdown or "",
                  f"table: {result.output_dir / 'top_k.md'}",
                  f"plot: {result.output_dir / 'pareto.png'}",
                  f"Pareto fronts: {result.output_dir / 'pareto_front.csv'}"]
    else:
        lines.append(f"stopped early (scan.max_chunks); rerun with "
                     f"scan.output_dir={result.output_dir} to resume.")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

register_configs()


@hydra.main(version_base="1.3", config_path="../conf", config_name="scan")
@float64
def main(cfg: DictConfig) -> ScanResult | None:
    """Hydra entry: runs or resumes the configured scan, prints the summary."""
    c: ScanConfig = OmegaConf.to_object(cfg)
    out = c.scan.output_dir or HydraConfig.get().runtime.output_dir
    try:
        result = run_scan(c, out)
    except LibraInputError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(describe(result), flush=True)
    return result


def cli() -> None:
    """Console entry point (``libra-scan``)."""
    main()
