"""The schema of a training or evaluation job: plain dataclasses (every key, its type and its
default; values in ``libra_jax/conf/config.yaml`` and its groups).

Choice fields are :class:`~libra_jax.types.Choice` enums whose members compare equal to their
strings, so Hydra rejects any other value when it composes the config. Hydra's ConfigStore
registration, the conversion of a composed config to :class:`LibraConfig` and the checks of the
command line live in :mod:`libra_jax.cli.config`; nothing here imports Hydra (the same split as
the scan's :mod:`libra_jax.studies.scan.config`).
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Dict, List, Optional, Sequence

from libra_jax.inputs.generators import GENERATORS
from libra_jax.model.pipelined import SCHEDULES
from libra_jax.model.step import NETWORK_BACKENDS, QUEUE_POLICIES
from libra_jax.model.timing import MODELS, TRAINING_LOOPS
from libra_jax.model.timing_spec import (
    ALGORITHMS,
    COLLECTIVE_OPTIMIZATIONS,
    INTER_DIM_SCHEDULING,
    INTRA_DIM_SCHEDULING,
)
from libra_jax.studies.multi import MULTI_OBJECTIVES
from libra_jax.types import Choice

#: ``config.yaml`` and its groups (``conf/conf/<preset>.yaml``, ...), inside the package.
CONF_DIR = pathlib.Path(__file__).resolve().parents[2] / "conf"


def _choice(name: str, values: Sequence[str]) -> type[Choice]:
    """A :class:`Choice` of ``values``, the tuple the consuming module checks against."""
    return Choice(name, [(v, v) for v in values], module=__name__)


class Objective(Choice):
    perf = "perf"  # min step time
    perf_per_cost = "perf_per_cost"  # min step time x network cost
    perf_per_watt = "perf_per_watt"  # min step time x total power = energy per step
    serving_throughput = "serving_throughput"  # serving: max tokens/s (min s per token)


class SolverMethod(Choice):
    ipm = "ipm"  # primal-dual interior point (certified, default)
    optax = "optax"  # first order, then an exact step on the active set


class TotalBwMode(Choice):
    eq = "eq"  # sum(bw) == total_bw_gbps
    le = "le"  # sum(bw) <= total_bw_gbps


MultiObjective = _choice("MultiObjective", MULTI_OBJECTIVES)
TimeModel = _choice("TimeModel", MODELS)
Schedule = _choice("Schedule", SCHEDULES)
TrainingLoop = _choice("TrainingLoop", TRAINING_LOOPS)
QueuePolicy = _choice("QueuePolicy", QUEUE_POLICIES)
NetworkBackend = _choice("NetworkBackend", NETWORK_BACKENDS)
Generator = _choice("Generator", GENERATORS)
InterDimScheduling = _choice("InterDimScheduling", INTER_DIM_SCHEDULING)
IntraDimScheduling = _choice("IntraDimScheduling", INTRA_DIM_SCHEDULING)
CollectiveOptimization = _choice("CollectiveOptimization", COLLECTIVE_OPTIMIZATIONS)
Algorithm = _choice("Algorithm", ALGORITHMS)


class Runtime(Choice):
    fixed = "fixed"  # the bandwidths optimised for the configured runtime (system.*)
    search = "search"  # the runtime searched too (runtime_search), jointly with the bandwidths


@dataclasses.dataclass
class NetworkConfig:
    """The network: set exactly one of ``file``, ``notation`` or ``topology`` (+ ``npus``)."""

    file: Optional[str] = None  # LIBRA network YAML (Topology, NpusCount, CostDimension)
    notation: Optional[str] = None  # e.g. "RI(16)_FC(8)_SW(32)"
    topology: Optional[List[str]] = None  # [D] block per dim: Ring | FullyConnected | Switch
    npus: Optional[List[int]] = None  # [D] NPUs per dim (with topology only)
    cost_tiers: Optional[List[str]] = None  # [D] cost-model row per dim (notation/topology only)
    latency_ns: Optional[List[float]] = None  # [D] link latency per hop, ns (model=pipelined)
    span_m: Optional[List[float]] = None  # [D] metres each dimension's links cover (reach check)


@dataclasses.dataclass
class PowerConfig:
    """Power apart from the network (the network's comes from the tiers' ``Energy``)."""

    npu_w: float = 0.0  # W of one NPU apart from the network: total = N * npu_w + network


@dataclasses.dataclass
class CostModelConfig:
    """LIBRA cost model YAML ($ per GB/s per component); null -> the network is not priced."""

    file: Optional[str] = None


@dataclasses.dataclass
class WorkloadConfig:
    """Training workload: ASTRA-sim 1.0 text (+ communicator YAML) or native YAML, or generated
    from a model description (``generator`` + the ``model`` / ``parallel`` / ``npu`` blocks,
    whose keys libra_jax/inputs/generators/ defines and checks; presets in ``conf/dnn/``)."""

    file: Optional[str] = None
    communicator_file: Optional[str] = None
    generator: Optional[Generator] = None  # transformer | moe | resnet50 | dlrm (file: null)
    # A Chakra trace set: <prefix>.<rank>.et (or .et.gz) per NPU (file: null); its pg_name
    # groups from ASTRA-sim's --comm-group-configuration JSON ({"<id>": [npus...]}).
    chakra_et: Optional[str] = None
    comm_groups: Optional[str] = None
    model: Dict[str, Any] = dataclasses.field(default_factory=dict)  # architecture, batch
    parallel: Dict[str, Any] = dataclasses.field(default_factory=dict)  # tp/pp/dp, ZeRO, ...
    npu: Dict[str, Any] = dataclasses.field(default_factory=dict)  # TFLOP/s, efficiency, GB


@dataclasses.dataclass
class WorkloadEntryConfig:
    """One entry of ``workloads`` (multi-workload runs): like ``workload`` plus a name; set
    exactly one of ``file`` and ``chakra_et`` (a trace set: every workload is then timed by
    its simulated step, model=pipelined; libra_jax/studies/trace_multi.py)."""

    file: Optional[str] = None
    communicator_file: Optional[str] = None
    chakra_et: Optional[str] = None  # <prefix> of <prefix>.<rank>.et(.gz), one rank per NPU
    comm_groups: Optional[str] = None  # its pg_name groups (JSON {"<id>": [npus...]})
    name: Optional[str] = None  # default: the workload's own name (file stem, trace prefix)


@dataclasses.dataclass
class ConstraintsConfig:
    """Constraints on the bandwidth vector ``bw`` [D] in GB/s per NPU."""

    total_bw_gbps: Optional[float] = None  # sum(bw) == (eq) or <= (le) this, GB/s
    total_bw_mode: TotalBwMode = TotalBwMode.eq
    lower_gbps: Optional[List[float]] = None  # [D] per-dim lower bounds, GB/s
    upper_gbps: Optional[List[Optional[float]]] = None  # [D] per-dim upper bounds (null: none)
    linear: List[str] = dataclasses.field(default_factory=list)  # e.g. "bw[0] >= bw[1]"
    max_cost_usd: Optional[float] = None  # network cost <= this, $ (needs a cost model)
    max_power_w: Optional[float] = None  # network power <= this, W (needs Energy in the tiers)
    # Serving SLOs (workload.generator=serving only; libra_jax/studies/serving.py):
    max_ttft_ms: Optional[float] = None  # time to first token <= this, ms
    max_tpot_ms: Optional[float] = None  # time per output token <= this, ms


@dataclasses.dataclass
class SolverConfig:
    """Which optimiser runs (docs/solver.md)."""

    method: SolverMethod = SolverMethod.ipm


@dataclasses.dataclass
class CosearchConfig:
    """Mapping co-search (libra_jax/studies/cosearch.py): which TP / PP / DP placements to try."""

    enabled: bool = False
    tp: Optional[int] = None  # fixed degree, or null: every divisor (TP * PP * DP = NPUs)
    pp: Optional[int] = None
    dp: Optional[int] = None
    top_k: int = 10  # rows of the printed table and of result.json's top_k
    reference_communicator: Optional[str] = None  # LIBRA communicator YAML to compare with


@dataclasses.dataclass
class SystemConfig:
    """Collective execution (``model=pipelined`` only; libra_jax/model/pipelined.py)."""

    chunks: Optional[Any] = None  # chunks per collective (null = 1), or a list to search
    endpoint_delay_ns: float = 0.0  # fixed cost per message at the endpoint, ns
    local_mem_bw_gbps: Optional[float] = None  # reductions' memory bandwidth (1e9 B/s); null: free
    gb_is_gib: bool = False  # link GB/s count 2^30 bytes (ASTRA-sim's convention)
    # How collectives in flight together share the network (libra_jax/model/step.py):
    queue_policy: QueuePolicy = QueuePolicy.lifo  # lifo (ASTRA-sim's default) | fifo
    queues_per_dim: int = 1  # queues per dimension (ASTRA-sim --num-queues-per-dim)
    network_backend: NetworkBackend = NetworkBackend.unaware  # unaware | aware (link model)
    max_inflight_collectives: Optional[int] = None  # null: no limit; 1 = stock ASTRA-sim
    # ASTRA-sim's runtime (docs/runtime.md; the defaults are ASTRA-sim's own):
    inter_dim_scheduling: InterDimScheduling = InterDimScheduling.ascending  # chunk's dim order
    intra_dim_scheduling: IntraDimScheduling = IntraDimScheduling.fifo  # fifo | smallest_first
    collective_optimization: CollectiveOptimization = CollectiveOptimization.local_bw_aware
    algorithm: Optional[List[Algorithm]] = None  # [D] one per dim (null: ring everywhere)
    active_chunks_per_dim: int = 1  # streams a dimension runs at once
    whole_ns: bool = False  # aware link times in whole ns, as ASTRA-sim's (docs/runtime.md)


@dataclasses.dataclass
class RuntimeSearchConfig:
    """The candidate runtimes of ``runtime=search`` (libra_jax/studies/runtime.py): every
    combination of the lists is optimised; null: the default list."""

    inter_dim_scheduling: Optional[List[InterDimScheduling]] = None  # null: ascending, themis,
    # round_robin
    intra_dim_scheduling: Optional[List[IntraDimScheduling]] = None  # null: [the system's]
    collective_optimization: Optional[List[CollectiveOptimization]] = None  # null: [the system's]
    # [D] lists, one per dim, of the algorithms to try there (null: ring plus the one
    # alternative the dimension's block supports: docs/runtime.md)
    algorithm: Optional[List[List[str]]] = None
    active_chunks_per_dim: Optional[List[int]] = None  # null: [system.active_chunks_per_dim]
    chunks: Optional[List[int]] = None  # chunk counts tried; null: [system.chunks]
    refine_evals: int = 12  # simulations per dimension of each candidate's pattern search


@dataclasses.dataclass
class LibraConfig:
    """One optimisation run."""

    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    cost_model: CostModelConfig = dataclasses.field(default_factory=CostModelConfig)
    workload: WorkloadConfig = dataclasses.field(default_factory=WorkloadConfig)
    constraints: ConstraintsConfig = dataclasses.field(default_factory=ConstraintsConfig)
    power: PowerConfig = dataclasses.field(default_factory=PowerConfig)
    objective: Objective = Objective.perf
    solver: SolverConfig = dataclasses.field(default_factory=SolverConfig)
    # Multi-workload runs (libra_jax/studies/multi.py): several workloads share one network.
    workloads: Optional[List[WorkloadEntryConfig]] = None  # set -> workload.file must be null
    weights: Optional[List[float]] = None  # [N] >= 0, one per workload; null -> all 1
    multi_objective: MultiObjective = MultiObjective.sum_time
    cosearch: CosearchConfig = dataclasses.field(default_factory=CosearchConfig)
    # Step-time model beyond LIBRA's (libra_jax/model/timing.py); the defaults are LIBRA's.
    model: TimeModel = TimeModel.libra  # pipelined: latency- and chunk-aware (ASTRA-sim)
    schedule: Schedule = Schedule.pipelined  # order across dimensions (model=pipelined)
    training_loop: TrainingLoop = TrainingLoop.no_overlap
    system: SystemConfig = dataclasses.field(default_factory=SystemConfig)
    runtime: Runtime = Runtime.fixed  # search: choose the runtime too (runtime_search)
    runtime_search: RuntimeSearchConfig = dataclasses.field(default_factory=RuntimeSearchConfig)
    # python -m libra_jax.evaluate only: the design to evaluate, GB/s per dim.
    bandwidth_gbps: Optional[List[float]] = None
    # A shipped system's per-NPU GB/s per dim (real-system presets): libra-train shows it next
    # to the optimum at the same network power and at the same network cost.
    reference_bw_gbps: Optional[List[float]] = None
    export_astrasim: bool = False  # write the design as ASTRA-sim network YAML + system JSON
    # JAX's persistent compilation cache (repeat runs skip XLA compilation); null: off.
    compilation_cache_dir: Optional[str] = "~/.cache/libra_jax/jax"


def presets() -> list[str]:
    """The names ``conf=<name>`` accepts (``conf/conf/*.yaml``), sorted."""
    return sorted(p.stem for p in (CONF_DIR / "conf").glob("*.yaml"))


def preset_hint() -> str:
    """How to pick a preset, with every name."""
    return f"pick a preset: conf=<name>, one of: {', '.join(presets())}"
