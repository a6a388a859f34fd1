"""The scan's config schema: plain dataclasses (values in ``libra_jax/conf/scan.yaml``).

Choice fields are `str` Enums whose member names are their values, so Hydra rejects a bad value
when it composes the config (``scan.format=parqet`` lists the choices) and each member still
compares equal to its string (``Format.parquet == "parquet"``). Hydra's ConfigStore
registration lives in :mod:`libra_jax.cli.scan`; nothing here imports Hydra.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, List, Optional

from libra_jax.types import Choice, LibraInputError, show


class Dtype(Choice):
    """The solver kernel's precision (certificates are always float64)."""

    float64 = "float64"
    float32 = "float32"


class Format(Choice):
    """Chunk file format (see `libra_jax.studies.scan.files`)."""

    parquet = "parquet"
    csv = "csv"


class Mapping(Choice):
    """How a workload's TP and DP groups sit on each shape (`space.workload_placements`)."""

    fixed = "fixed"  # TP fills dims from the innermost outward, DP the rest (one per shape)
    search = "search"  # every TP x DP placement of the co-search (a design per placement)


class RankBy(Choice):
    """Column the top-k table ranks by (lower is better)."""

    time_x_cost = "time_x_cost"
    step_time_ns = "step_time_ns"
    network_cost_usd = "network_cost_usd"


def choice(kind: type[enum.Enum], value, key: str):
    """``value`` as a member of ``kind`` (for configs built in Python, which Hydra did not
    check).

    Raises:
      LibraInputError: naming ``key``, the value and the choices.
    """
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(m.value for m in kind)
        raise LibraInputError(f"{key} = {show(value)}: expected one of {names}.") from None


@dataclasses.dataclass
class ScanWorkloadConfig:
    """A workload and its parallelisation (tp * dp must equal space.npus), or an imported
    Chakra trace set (``chakra_et``, with ``file: null``; its mapping is in the trace:
    `studies.scan.traces`). Exactly one of ``file`` and ``chakra_et``."""

    file: Optional[str] = None  # ASTRA-sim text (.txt) or native YAML workload
    name: Optional[str] = None  # default: file stem (a trace: its prefix's last part)
    tp: int = 1  # tensor-parallel degree: Forward / InputGrad communicator size
    dp: Optional[int] = None  # data-parallel degree: WeightGrad; null -> npus / tp
    mapping: Mapping = Mapping.fixed  # fixed | search: also scan where TP and DP sit
    chakra_et: Optional[str] = None  # <prefix> of <prefix>.<rank>.et(.gz): ranks = space.npus
    comm_groups: Optional[str] = None  # its pg_name groups (JSON {"<id>": [npus...]})


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
    # Power of one NPU (W) for energy_per_step_j (only with a cost model that has Energy).
    npu_w: float = 0.0
    # NPUs enclosed -> physical span (m), {int: float}: dim d spans the value of the smallest
    # key >= the NPUs of dims 0..d; a design whose tier's ReachM is shorter is skipped.
    # null: no check. (Typed Any: Hydra cannot put a command-line mapping into an empty or
    # null Dict[int, float] node; make_space checks keys and values.)
    span_m_by_npus: Any = None


@dataclasses.dataclass
class RunConfig:
    """How the scan runs."""

    output_dir: Optional[str] = None  # null -> the Hydra run dir; reuse a dir to resume
    chunk_size: int = 2048  # designs per chunk file (part of the resume identity)
    solve_chunk: Optional[int] = None  # problems per device call, every call this size
    #   (rounded down to 16, 256, 1024, 65536, ...; null: on CPUs 16 with dedup, else 256;
    #   65536 on GPUs); problems.program_size
    dtype: Dtype = Dtype.float64  # the kernel's precision (certified in float64)
    dedup: bool = True  # solve each distinct (shape, workload, mapping, budget) once per chunk
    format: Format = Format.parquet  # chunk files (part of the resume identity)
    max_chunks: Optional[int] = None  # compute at most this many chunks, then stop
    progress: bool = True  # progress bar on stderr (only when stderr is a terminal)
    # Sharding: this process computes shard `shard_index` of `num_shards` (every design in
    # exactly one shard); `merge=true` combines the finished shards of `output_dir` instead.
    shard_index: int = 0
    num_shards: int = 1
    merge: bool = False


@dataclasses.dataclass
class ReportConfig:
    """The summary written when every chunk is done."""

    top_k: int = 10  # rows per workload in the top-k table
    rank_by: RankBy = RankBy.time_x_cost  # lower is better
    plot_labels: int = 4  # Pareto points labelled per workload (best by rank_by)
    plot_points: int = 20000  # at most this many background points per workload
    html_points: int = 2000  # of those, at most this many per workload in pareto.html


@dataclasses.dataclass
class ScanConfig:
    space: SpaceConfig = dataclasses.field(default_factory=SpaceConfig)
    workloads: List[ScanWorkloadConfig] = dataclasses.field(
        default_factory=lambda: [ScanWorkloadConfig(file="workload/GPT_3.txt")]
    )
    scan: RunConfig = dataclasses.field(default_factory=RunConfig)
    report: ReportConfig = dataclasses.field(default_factory=ReportConfig)
    # JAX's persistent compilation cache (repeat runs skip XLA compilation); null: off.
    compilation_cache_dir: Optional[str] = "~/.cache/libra_jax/jax"
