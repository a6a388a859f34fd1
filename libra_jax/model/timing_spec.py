"""The step-time model's spec: `TimingModel` (the collective model, the schedule, the
training loop and the system options of `timing.py`'s module docstring) and its host checks.

Split from `timing.py` (which re-exports every name): the rows that model builds are in
`timing_rows.py`, the exact step time and the collective breakdown in `timing_exact.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_bool, as_instance, as_int, as_list, as_real
from libra_jax.model import pipelined, step
from libra_jax.types import LibraInputError, show

MODELS = ("libra", "pipelined")
#: ASTRA-sim's runtime (`docs/runtime.md`): the order in which each chunk visits the
#: dimensions (``inter-dimension-scheduling``: ascending, offlineGreedy = Themis,
#: offlineGreedyFlex, roundRobin), the order of the streams waiting at a dimension
#: (``intra-dimension-scheduling``: FIFO, smallestFirst), the all-reduce's hierarchy
#: (``collective-optimization``) and each dimension's algorithm.
INTER_DIM_SCHEDULING = ("ascending", "themis", "themis_flex", "round_robin")
INTRA_DIM_SCHEDULING = ("fifo", "smallest_first")
COLLECTIVE_OPTIMIZATIONS = ("local_bw_aware", "baseline")
ALGORITHMS = ("ring", "direct", "halving_doubling", "double_binary_tree")
#: Most active chunks per dimension accepted (ASTRA-sim runs use 1-4).
MAX_ACTIVE_CHUNKS = 64
TRAINING_LOOPS = step.TRAINING_LOOPS
HOPS = np.asarray([1.0, 1.0, 2.0])  # per ring step, by types.Block: Ring, FC, Switch


@dataclasses.dataclass(frozen=True)
class TimingModel:
    """How a step's time is computed from the workload and the bandwidths.

    Attributes:
      model: "libra" | "pipelined" (collective model).
      schedule: "pipelined" | "sequential" | "balanced" (pipelined model only).
      training_loop: "no_overlap" | "dp_overlap" | "full_overlap".
      latency_ns: [D] link latency per hop (ns), or None for 0 (pipelined model).
      chunks: chunks per collective (pipelined model), >= 1.
      endpoint_delay_ns: fixed cost per message at the endpoint (ns).
      local_mem_bw_gbps: local memory bandwidth for reductions (1 GB = 1e9 bytes), or None
        for free reductions.
      gb_is_gib: link bandwidths count 1 GB = 2^30 bytes (ASTRA-sim's convention).
      queue_policy: "lifo" | "fifo": which collective's chunks a dimension's queue serves
        first when several wait (pipelined model; `step.py`).
      queues_per_dim: queues per dimension (ASTRA-sim ``--num-queues-per-dim``), >= 1.
      network_backend: "unaware" | "aware" (ASTRA-sim's congestion-aware link model:
        store-and-forward through a Switch, links shared by concurrent stages).
      max_inflight_collectives: None (no limit) or >= 1 collectives in flight per NPU
        (1 = stock ASTRA-sim).
      inter_dim_scheduling: the order each chunk visits the dimensions in:
        "ascending" (ASTRA-sim's default) | "themis" (offlineGreedy) | "themis_flex"
        (offlineGreedyFlex) | "round_robin" (pipelined model).
      intra_dim_scheduling: "fifo" (default) | "smallest_first" (ASTRA-sim's SCF).
      collective_optimization: "local_bw_aware" (default: reduce-scatter up, all-reduce on
        the last dimension, all-gather down) | "baseline" (a full all-reduce per dimension).
      algorithm: None (ring on every dimension) or one of `ALGORITHMS` per dimension.
      active_chunks_per_dim: streams a dimension's queues run at once (1 = default).
      whole_ns: the congestion-aware link model times every message in whole ns, as
        ASTRA-sim's links do (an integer cast), so messages tie at a link as they do there
        (default False: real-valued times; the certified bounds are bounds of those).
    """

    model: str = "libra"
    schedule: str = "pipelined"
    training_loop: str = "no_overlap"
    latency_ns: Sequence[float] | None = None
    chunks: int = 1
    endpoint_delay_ns: float = 0.0
    local_mem_bw_gbps: float | None = None
    gb_is_gib: bool = False
    queue_policy: str = "lifo"
    queues_per_dim: int = 1
    network_backend: str = "unaware"
    max_inflight_collectives: int | None = None
    inter_dim_scheduling: str = "ascending"
    intra_dim_scheduling: str = "fifo"
    collective_optimization: str = "local_bw_aware"
    algorithm: Sequence[str] | None = None
    active_chunks_per_dim: int = 1
    whole_ns: bool = False

    @property
    def themis_scheduling(self) -> bool:
        """Whether the inter-dimension scheduling is Themis (``OfflineGreedy``, -Flex): the
        loads carried between collectives, and whose NPU schedules first."""
        return self.inter_dim_scheduling in ("themis", "themis_flex")

    @property
    def is_default_runtime(self) -> bool:
        """True for ASTRA-sim's default runtime (ascending order, FIFO within a dimension,
        localBWAware, ring everywhere, one active chunk per dimension): the runtime the
        JAX list schedule of `pipelined.py` replays."""
        return (self.inter_dim_scheduling == "ascending"
                and self.intra_dim_scheduling == "fifo"
                and self.collective_optimization == "local_bw_aware"
                and (self.algorithm is None or all(a == "ring" for a in self.algorithm))
                and self.active_chunks_per_dim == 1)

    @property
    def is_reference(self) -> bool:
        """True for LIBRA's own model (no general rows are needed)."""
        return self.model == "libra" and self.training_loop == "no_overlap"


def check_timing(tm: TimingModel, num_dims: int) -> None:
    """Validates a `TimingModel` on the host; errors name the config key and value.

    Types and limits: ``model``, ``schedule``, ``training_loop`` strings of their choices;
    ``chunks`` an integer in [1, `pipelined.MAX_CHUNKS`]; ``latency_ns`` None or one number
    per dimension and ``endpoint_delay_ns`` a number, each in [0, ``LIMITS.max_ns``];
    ``local_mem_bw_gbps`` None or a number in (0, ``LIMITS.max_gbps``]; ``gb_is_gib`` a bool.
    """
    as_instance(tm, TimingModel, "timing model")
    for key, value, choices in (("model", tm.model, MODELS),
                                ("training_loop", tm.training_loop, TRAINING_LOOPS),
                                ("schedule", tm.schedule, pipelined.SCHEDULES),
                                ("system.queue_policy", tm.queue_policy, step.QUEUE_POLICIES),
                                ("system.network_backend", tm.network_backend,
                                 step.NETWORK_BACKENDS),
                                ("system.inter_dim_scheduling", tm.inter_dim_scheduling,
                                 INTER_DIM_SCHEDULING),
                                ("system.intra_dim_scheduling", tm.intra_dim_scheduling,
                                 INTRA_DIM_SCHEDULING),
                                ("system.collective_optimization", tm.collective_optimization,
                                 COLLECTIVE_OPTIMIZATIONS)):
        if not isinstance(value, str) or value not in choices:
            raise LibraInputError(
                f"{key} = {show(value)}: choose one of {', '.join(choices)}.")
    as_int(tm.chunks, "system.chunks", 1, pipelined.MAX_CHUNKS,
           what=" (chunks per collective, pipelined.MAX_CHUNKS)")
    if tm.latency_ns is not None:
        lat = as_list(tm.latency_ns, "network.latency_ns", what="a list of numbers (ns)")
        if len(lat) != num_dims:
            raise LibraInputError(
                f"network.latency_ns = {show(lat)}: has {len(lat)} entries but the network "
                f"has {num_dims} dimensions.")
        for i, v in enumerate(lat):
            as_real(v, f"network.latency_ns[{i}]", 0.0, LIMITS.max_ns,
                    unit=" (ns, LIMITS.max_ns)")
    as_real(tm.endpoint_delay_ns, "system.endpoint_delay_ns", 0.0, LIMITS.max_ns,
            unit=" (ns, LIMITS.max_ns)")
    if tm.local_mem_bw_gbps is not None:
        as_real(tm.local_mem_bw_gbps, "system.local_mem_bw_gbps", 0.0,
                LIMITS.max_gbps, lo_open=True,
                unit=" (GB/s, LIMITS.max_gbps; null for free reductions)")
    as_bool(tm.gb_is_gib, "system.gb_is_gib")
    as_bool(tm.whole_ns, "system.whole_ns")
    if tm.whole_ns and tm.network_backend != "aware":
        raise LibraInputError(
            "system.whole_ns = true: only the congestion-aware link model times messages "
            "(set system.network_backend=aware, or remove it).")
    as_int(tm.queues_per_dim, "system.queues_per_dim", 1, step.MAX_QUEUES_PER_DIM,
           what=" (queues per dimension, step.MAX_QUEUES_PER_DIM)")
    if tm.max_inflight_collectives is not None:
        as_int(tm.max_inflight_collectives, "system.max_inflight_collectives", 1,
               step.MAX_QUEUES_PER_DIM, what=" (null for no limit)")
    as_int(tm.active_chunks_per_dim, "system.active_chunks_per_dim", 1, MAX_ACTIVE_CHUNKS,
           what=" (streams a dimension runs at once, MAX_ACTIVE_CHUNKS)")
    if tm.algorithm is not None:
        algo = as_list(tm.algorithm, "system.algorithm",
                       what="a list of algorithm names, one per dimension")
        if len(algo) != num_dims:
            raise LibraInputError(
                f"system.algorithm = {show(list(algo))}: has {len(algo)} entries but the "
                f"network has {num_dims} dimensions (one algorithm per dimension).")
        for i, a in enumerate(algo):
            if not isinstance(a, str) or a not in ALGORITHMS:
                raise LibraInputError(
                    f"system.algorithm[{i}] = {show(a)}: choose one of {', '.join(ALGORITHMS)}.")
    if tm.model == "libra":
        extra = [k for k, v in (("network.latency_ns", tm.latency_ns is not None),
                                ("system.chunks", tm.chunks != 1),
                                ("system.endpoint_delay_ns", tm.endpoint_delay_ns != 0),
                                ("system.local_mem_bw_gbps", tm.local_mem_bw_gbps is not None),
                                ("system.gb_is_gib", tm.gb_is_gib),
                                ("system.queue_policy", tm.queue_policy != "lifo"),
                                ("system.queues_per_dim", tm.queues_per_dim != 1),
                                ("system.network_backend", tm.network_backend != "unaware"),
                                ("system.max_inflight_collectives",
                                 tm.max_inflight_collectives is not None),
                                ("schedule", tm.schedule != "pipelined"),
                                ("system.inter_dim_scheduling",
                                 tm.inter_dim_scheduling != "ascending"),
                                ("system.intra_dim_scheduling",
                                 tm.intra_dim_scheduling != "fifo"),
                                ("system.collective_optimization",
                                 tm.collective_optimization != "local_bw_aware"),
                                ("system.algorithm", tm.algorithm is not None),
                                ("system.active_chunks_per_dim",
                                 tm.active_chunks_per_dim != 1),
                                ("system.whole_ns", tm.whole_ns)) if v]
        if extra:
            raise LibraInputError(
                f"{', '.join(extra)} only apply to model=pipelined (LIBRA's model has no "
                "latency, chunks or schedule); set model=pipelined or remove them.")
