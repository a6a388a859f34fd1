"""A job's config turned into model inputs: the boundary between the schema
(:mod:`libra_jax.studies.job.config`) and the model.

:func:`to_inputs` turns a run config into plain model inputs ``(Network, Workload, cost rates or
None, ConstraintSpec)``, :func:`to_timing` into the step-time model, :func:`physical_inputs`
into a technology catalogue's figures and :func:`to_multi_inputs` into a multi-workload run's
inputs; nothing past them sees a config. Every problem with the config is a
:class:`~libra_jax.types.LibraInputError` whose message names the config key.

Relative paths (``network.file``, ``cost_model.file``, ``workload.file``,
``workload.communicator_file``) are looked up first in the directory the command was started
in, then in the LIBRA inputs shipped with the package (``libra_jax/data/libra_inputs/``), so
presets can say ``network/3d_network.yml``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os

import numpy as np

from libra_jax.inputs.cost import (
    check_reach,
    cost_rates_usd_per_gbps,
    load_cost_model,
    power_rates_w_per_gbps,
    tier_latency_ns,
    tier_max_gbps,
)
from libra_jax.inputs.generators import generate
from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import (
    Network,
    load_network_file,
    network_from_lists,
    parse_notation,
)
from libra_jax.inputs.workload import Workload, check_workload_network, load_workload
from libra_jax.model.problem import ConstraintSpec
from libra_jax.model.timing import TimingModel, check_timing
from libra_jax.studies.job.config import (
    LibraConfig,
    NetworkConfig,
    Objective,
    WorkloadConfig,
    preset_hint,
)
from libra_jax.studies.multi import check_weights
from libra_jax.types import LibraInputError, show


def _network_source(net: NetworkConfig) -> str:
    """Which of ``file`` / ``notation`` / ``topology`` is set; raises unless exactly one."""
    given = [k for k in ("file", "notation", "topology") if getattr(net, k) is not None]
    if not given and net.npus is not None:
        raise LibraInputError(
            f"network.npus={show(net.npus)} needs network.topology (the block of each "
            "dimension, e.g. network.topology=[Ring,FullyConnected,Switch]), which is null; "
            "network.file and network.notation are null too. Give network.topology with "
            "network.npus, or the network as network.file or network.notation (and "
            "network.npus=null)."
        )
    if len(given) != 1:
        got = (
            "none is set (network.file, network.notation and network.topology are all null)"
            if not given
            else "got " + " and ".join(f"network.{k}={show(getattr(net, k))}" for k in given)
        )
        raise LibraInputError(
            "network: set exactly one of network.file (a LIBRA network YAML), network.notation "
            "(e.g. \"RI(16)_FC(8)_SW(32)\") or network.topology together with network.npus; "
            f"{got}. To replace a preset's network, also set its source to null, e.g. "
            "network.file=null."
        )
    source = given[0]
    if source == "topology" and net.npus is None:
        raise LibraInputError(
            f"network.topology={show(net.topology)} needs network.npus (NPUs per dimension), "
            "which is null."
        )
    if source != "topology" and net.npus is not None:
        raise LibraInputError(
            f"network.npus={show(net.npus)} is only used with network.topology, but the "
            f"network comes from network.{source}; set network.npus=null or give the network "
            "as network.topology + network.npus (with network.file=null / "
            "network.notation=null)."
        )
    if source == "file" and net.cost_tiers is not None:
        raise LibraInputError(
            f"network.cost_tiers={show(net.cost_tiers)} is only used with network.notation or "
            "network.topology; a network file names its cost tiers itself (CostDimension). "
            "Set network.cost_tiers=null."
        )
    return source


def to_inputs(
    c: LibraConfig, base_dir: str | os.PathLike | None = None
) -> tuple[Network, Workload, np.ndarray | None, ConstraintSpec]:
    """Turn a run config (already through the schema) into model inputs.

    Args:
      c: the run config (:class:`LibraConfig`; `libra_jax.cli.config.to_inputs` takes a
        composed DictConfig too).
      base_dir: where relative paths are tried first; default the current working directory.

    Returns:
      ``(network, workload, cost_rates, spec)``: the :class:`Network`; the :class:`Workload`
      (checked against the network); ``cost_rates`` [D] $ per GB/s of per-NPU bandwidth on each
      dimension, or ``None`` when ``cost_model.file`` is null; the
      :class:`~libra_jax.model.problem.ConstraintSpec`.

    Raises:
      LibraInputError: any bad or inconsistent input; the message names the config key (or the
        file and field) and the offending value.
    """
    if c.workloads is not None:
        raise LibraInputError(
            "workloads is set: this is a multi-workload run (see to_multi_inputs)."
        )
    if c.weights is not None:
        raise LibraInputError(
            f"weights={show(c.weights)} is only used with workloads (a multi-workload run); "
            "set weights=null or give workloads."
        )

    # Cheap consistency checks first, before any file is read.
    if not serving_requested(c):
        check_serving_keys(c)
    _network_source(c.network)
    _check_cost_keys(c)
    generated = c.workload.generator is not None
    if generated and (c.workload.file is not None or c.workload.communicator_file is not None):
        raise LibraInputError(
            f"workload.generator={show(c.workload.generator)} and workload.file="
            f"{show(c.workload.file)} / workload.communicator_file="
            f"{show(c.workload.communicator_file)} "
            "are both set: a workload is either generated or read from a file; set "
            "workload.file=null workload.communicator_file=null (or workload.generator=null)."
        )
    check_workload_source(c.workload)
    if c.workload.chakra_et is not None:
        raise LibraInputError(
            f"workload.chakra_et={show(c.workload.chakra_et)}: an imported trace set is read "
            "by trace_inputs (libra-train and libra-evaluate run it); this run needs a "
            "workload as a file or a generator.")
    if not generated and c.workload.file is None:
        raise LibraInputError(
            "workload.file is null; give a workload (ASTRA-sim 1.0 text or native YAML), e.g. "
            f"workload.file=workload/Turing_NLG.txt, {preset_hint()}, or generate one "
            "(workload.generator=transformer with a model, e.g. dnn=gpt3_175b)."
        )

    # Resolve every path before loading anything, so a typo is reported at once.
    workload_path = (
        None if generated else resolve_path(c.workload.file, "workload.file", base_dir)
    )
    communicator_path = (
        resolve_path(c.workload.communicator_file, "workload.communicator_file", base_dir)
        if c.workload.communicator_file is not None
        else None
    )
    network, cost_rates, spec = design_inputs(c, base_dir)
    if generated:
        workload = generate(c.workload.generator.value, c.workload.model, c.workload.parallel,
                            c.workload.npu, network.npus)
    else:
        workload = load_workload(
            workload_path, communicator_file=communicator_path, num_dims=network.num_dims
        )
    check_workload_network(workload, network)
    return network, workload, cost_rates, spec


def check_workload_source(w: WorkloadConfig) -> None:
    """Exactly one of ``workload.file``, ``workload.chakra_et`` and ``workload.generator``
    (a workload is read from one file, from a trace set, or generated); ``comm_groups``
    only with ``chakra_et``."""
    given = [k for k in ("file", "chakra_et", "generator") if getattr(w, k) is not None]
    if len(given) > 1:
        raise LibraInputError(
            " and ".join(f"workload.{k}={show(getattr(w, k))}" for k in given)
            + f" are {'both' if len(given) == 2 else 'all'} set: a workload is read from a "
            "file (workload.file), from a Chakra trace set (workload.chakra_et) or generated "
            "(workload.generator); set the others to null"
            f" (e.g. workload.{given[0]}=null).")
    if w.comm_groups is not None and w.chakra_et is None:
        raise LibraInputError(
            f"workload.comm_groups={show(w.comm_groups)} is the communicator groups of a "
            "Chakra trace set, but workload.chakra_et is null; give the traces "
            "(workload.chakra_et=<prefix> for <prefix>.<rank>.et) or set "
            "workload.comm_groups=null.")
    if w.chakra_et is not None and w.communicator_file is not None:
        raise LibraInputError(
            f"workload.communicator_file={show(w.communicator_file)} belongs to a workload "
            "file; a trace set's groups come from its nodes (involved_dim, pg_name) and "
            "workload.comm_groups. Set workload.communicator_file=null.")


def _check_cost_keys(c: LibraConfig) -> None:
    """Keys that need a cost model have one."""
    if c.cost_model.file is None:
        if c.objective == "perf_per_cost":
            raise LibraInputError(
                "objective=perf_per_cost needs a cost model, but cost_model.file is null; set "
                "cost_model.file (e.g. cost_model/3d_cost_model.yml) or use objective=perf."
            )
        if c.constraints.max_cost_usd is not None:
            raise LibraInputError(
                f"constraints.max_cost_usd={show(c.constraints.max_cost_usd)} needs a cost model, "
                "but cost_model.file is null; set cost_model.file or "
                "constraints.max_cost_usd=null."
            )


def design_inputs(
    c: LibraConfig, base_dir: str | os.PathLike | None = None
) -> tuple[Network, np.ndarray | None, ConstraintSpec]:
    """The design part of a run config: ``(network, cost_rates [D] $ per GB/s or None,
    spec)`` (`to_inputs` without the workload; a trace set's run uses it as is)."""
    source = _network_source(c.network)
    _check_cost_keys(c)
    network_path = (
        resolve_path(c.network.file, "network.file", base_dir) if source == "file" else None
    )
    cost_path = (
        resolve_path(c.cost_model.file, "cost_model.file", base_dir)
        if c.cost_model.file is not None
        else None
    )
    if source == "file":
        network = load_network_file(network_path)
    elif source == "notation":
        network = parse_notation(
            c.network.notation, cost_tiers=c.network.cost_tiers, source="network.notation"
        )
    else:
        network = network_from_lists(
            c.network.topology, c.network.npus, cost_tiers=c.network.cost_tiers, source="network"
        )

    cost_rates = None
    phys = None
    if cost_path is not None:
        cm = load_cost_model(cost_path)
        cost_rates = np.asarray(cost_rates_usd_per_gbps(network, cm), dtype=np.float64)
        phys = physical_inputs(c, network, cm)
    elif c.network.span_m is not None:
        raise LibraInputError(
            f"network.span_m = {show(list(c.network.span_m))} is checked against the tiers' "
            "reach (ReachM), but cost_model.file is null; set a technology catalogue (e.g. "
            "cost_model.file=technologies.yaml) or network.span_m=null.")
    if c.constraints.max_power_w is not None and (phys is None or phys.power_rates is None):
        raise LibraInputError(
            f"constraints.max_power_w={show(c.constraints.max_power_w)} needs the network's "
            "power: a cost model whose tiers give Energy (e.g. "
            f"cost_model.file=technologies.yaml){'' if cost_path is None else ', but ' + str(cost_path) + ' has none'}; "
            "or set constraints.max_power_w=null.")
    if c.objective == "perf_per_watt" and (phys is None or phys.power_rates is None):
        raise LibraInputError(
            "objective=perf_per_watt needs the network's power: a cost model whose tiers give "
            "Energy (e.g. cost_model.file=technologies.yaml)"
            f"{'' if cost_path is None else ', but ' + str(cost_path) + ' has none'}.")

    k = c.constraints
    spec = ConstraintSpec(
        total_bw_gbps=k.total_bw_gbps,
        total_bw_mode=k.total_bw_mode.value,
        lower_gbps=None if k.lower_gbps is None else list(k.lower_gbps),
        upper_gbps=(None if k.upper_gbps is None else list(k.upper_gbps)) if phys is None
        else phys.upper_gbps,
        linear=list(k.linear),
        max_cost_usd=k.max_cost_usd,
        max_power_w=k.max_power_w,
        power_rates_w_per_gbps=None if phys is None or phys.power_rates is None
        else list(phys.power_rates),
    )
    return network, cost_rates, spec


@dataclasses.dataclass(frozen=True)
class PhysicalInputs:
    """What a technology catalogue adds to a run (`physical_inputs`).

    Attributes:
      power_rates: [D] W of network power per GB/s, or None (no ``Energy`` in the tiers).
      npu_w: one NPU's power apart from the network, W (``power.npu_w``).
      static_power_w: all NPUs' power apart from the network, W (NPUs x npu_w).
      tier_max_gbps: [D] the tiers' ``MaxGbps`` (+inf where none).
      upper_gbps: [D] the upper bounds the run uses: the smaller of
        ``constraints.upper_gbps`` and ``MaxGbps`` (None entries: no bound), or None.
      upper_from: [D] which one each bound is ("constraints.upper_gbps", "MaxGbps of tier
        <name>", or None).
      span_m: [D] ``network.span_m`` (checked against the tiers' ``ReachM``), or None.
    """

    power_rates: np.ndarray | None
    npu_w: float
    static_power_w: float
    tier_max_gbps: np.ndarray
    upper_gbps: list | None
    upper_from: list
    span_m: np.ndarray | None


def physical_inputs(c: LibraConfig, network: Network, cost_model=None) -> PhysicalInputs:
    """The catalogue's figures for a run's network: power rates, the tiers' bandwidth limits
    merged with ``constraints.upper_gbps``, and the spans checked against the reach.

    Raises:
      LibraInputError: a span beyond its tier's reach, a malformed span list, or a tier the
        catalogue lacks (naming the key, dimension, span, tier and reach).
    """
    if cost_model is None:
        cost_model = load_cost_model(resolve_path(c.cost_model.file, "cost_model.file"))
    d = network.num_dims
    power = power_rates_w_per_gbps(network, cost_model)
    tier_max = tier_max_gbps(network, cost_model)
    span = None
    if c.network.span_m is not None:
        span = check_reach(network, cost_model, list(c.network.span_m), "network.span_m")
    user = None if c.constraints.upper_gbps is None else list(c.constraints.upper_gbps)
    if user is not None and len(user) != d:  # the problem builder names the wrong length
        return PhysicalInputs(power, float(c.power.npu_w),
                              float(c.power.npu_w) * float(np.prod(network.npus)), tier_max,
                              user, [None] * d, span)
    upper, frm = [], []
    for i in range(d):
        u = None if user is None else user[i]
        if u is not None and float(u) == float("inf"):
            u = None
        t = float(tier_max[i])
        if np.isfinite(t) and (u is None or t < float(u)):
            upper.append(t)
            frm.append(f"MaxGbps of tier {network.cost_tiers[i]}")
        else:
            upper.append(u)
            frm.append(None if u is None else "constraints.upper_gbps")
    if user is None and all(u is None for u in upper):
        upper = None
    npu_w = float(c.power.npu_w)
    return PhysicalInputs(power_rates=power, npu_w=npu_w,
                          static_power_w=npu_w * float(np.prod(network.npus)),
                          tier_max_gbps=tier_max, upper_gbps=upper, upper_from=frm,
                          span_m=span)


def to_timing(c: LibraConfig, num_dims: int, network: Network | None = None):
    """The step-time model of a run: (`timing.TimingModel`, chunk counts to search or None).

    ``system.chunks`` may be a list (model=pipelined): the run then optimises the bandwidths
    for every count and reports the best pair; the returned model carries the first count.
    With ``network`` given, ``model=pipelined`` and ``network.latency_ns`` null, the tiers'
    ``LatencyNs`` (technology catalogue) are the latencies, when every dimension's tier has one.
    """
    latency = None if c.network.latency_ns is None else list(c.network.latency_ns)
    if (latency is None and network is not None and c.model == "pipelined"
            and c.cost_model.file is not None and network.cost_tiers is not None):
        cm = load_cost_model(resolve_path(c.cost_model.file, "cost_model.file"))
        tier_lat = tier_latency_ns(network, cm)
        if np.all(np.isfinite(tier_lat)):
            latency = [float(v) for v in tier_lat]
        elif np.any(np.isfinite(tier_lat)):
            missing = [network.cost_tiers[i] for i in range(num_dims)
                       if not np.isfinite(tier_lat[i])]
            raise LibraInputError(
                f"{cm.source}: tiers {', '.join(sorted(set(missing)))} have no LatencyNs but "
                "other tiers of the network do; give every tier LatencyNs or set "
                "network.latency_ns (one per dimension, ns).")
    chunks = c.system.chunks
    search = None
    if isinstance(chunks, (list, tuple)):
        search = list(chunks)
        for i, k in enumerate(search):
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise LibraInputError(
                    f"system.chunks[{i}] = {show(k)}: every chunk count must be an integer >= 1.")
        if not search or len(set(search)) != len(search):
            raise LibraInputError(f"system.chunks = {show(search)}: give distinct counts.")
        chunks = search[0]
    elif chunks is None:
        chunks = 1

    def name(v):  # a choice key's string (any other value as it is, for check_timing)
        return getattr(v, "value", v)

    tm = TimingModel(
        model=c.model.value, schedule=c.schedule.value, training_loop=c.training_loop.value,
        latency_ns=latency,
        chunks=chunks, endpoint_delay_ns=float(c.system.endpoint_delay_ns),
        local_mem_bw_gbps=None if c.system.local_mem_bw_gbps is None
        else float(c.system.local_mem_bw_gbps),
        gb_is_gib=bool(c.system.gb_is_gib), queue_policy=c.system.queue_policy.value,
        queues_per_dim=c.system.queues_per_dim,
        network_backend=c.system.network_backend.value,
        max_inflight_collectives=c.system.max_inflight_collectives,
        inter_dim_scheduling=name(c.system.inter_dim_scheduling),
        intra_dim_scheduling=name(c.system.intra_dim_scheduling),
        collective_optimization=name(c.system.collective_optimization),
        algorithm=None if c.system.algorithm is None
        else tuple(name(a) for a in c.system.algorithm),
        active_chunks_per_dim=c.system.active_chunks_per_dim,
        whole_ns=c.system.whole_ns)
    if search is not None and c.model != "pipelined":
        raise LibraInputError(
            f"system.chunks = {show(search)}: a chunk-count search needs model=pipelined.")
    check_timing(tm, num_dims)
    return tm, search


# --------------------------------------------------------------------------------------------
# Multi-workload runs
# --------------------------------------------------------------------------------------------


def to_multi_inputs(c: LibraConfig, base_dir: str | os.PathLike | None = None):
    """Turn a multi-workload run config into model inputs.

    Returns:
      ``(network, entries, weights, cost_rates, spec, multi_objective)``: ``entries`` is a
      list of ``(name, Workload, resolved workload path)``, ``weights`` [N] float64.

    Raises:
      LibraInputError: as :func:`to_inputs`, naming ``workloads[i]``; also ``workloads`` with
        ``workload.file`` set, an empty list, bad ``weights`` or ``multi_objective``.
    """
    if c.workloads is None:
        raise LibraInputError("workloads is null; a multi-workload run needs a list of workloads.")
    if c.workload.file is not None or c.workload.communicator_file is not None:
        raise LibraInputError(
            f"workloads and workload.file={show(c.workload.file)} are both set: give the workloads "
            "either as one workload.file or as the workloads list, not both (set "
            "workload.file=null workload.communicator_file=null)."
        )
    if len(c.workloads) == 0:
        raise LibraInputError(
            "workloads is an empty list; give at least one entry {file, communicator_file, name}."
        )
    if c.objective != "perf":
        raise LibraInputError(
            f"objective={c.objective} is not used with workloads; choose multi_objective "
            "(sum_time | sum_time_x_cost | worst_slowdown) and leave objective=perf."
        )
    if c.solver.method != "ipm":
        raise LibraInputError(
            f"solver.method={c.solver.method} is not supported with workloads; use "
            "solver.method=ipm."
        )
    if c.multi_objective == "sum_time_x_cost" and c.cost_model.file is None:
        raise LibraInputError(
            "multi_objective=sum_time_x_cost needs a cost model, but cost_model.file is null; "
            "set cost_model.file or use multi_objective=sum_time."
        )
    weights = check_weights(c.weights, len(c.workloads), "weights")
    entries = []
    network = cost_rates = spec = None
    for i, entry in enumerate(c.workloads):
        if check_workload_entry(entry, i) == "chakra_et":
            raise LibraInputError(
                f"workloads[{i}].chakra_et={show(entry.chakra_et)}: a run with a trace set "
                "in workloads is timed by simulated steps (studies.trace_multi; libra-train "
                "and libra-evaluate run it), not by LIBRA's model.")
        sub = entry_config(c, entry)
        with entry_errors(i):
            network, workload, cost_rates, spec = to_inputs(sub, base_dir)
            path = resolve_path(entry.file, "workload.file", base_dir)
        entries.append((entry.name or workload.name, workload, path))
    return network, entries, weights, cost_rates, spec, c.multi_objective.value


def check_workload_entry(entry, i: int) -> str:
    """Which source ``workloads[i]`` names, ``"file"`` or ``"chakra_et"``: exactly one of
    them; ``communicator_file`` only with a file, ``comm_groups`` only with a trace set (an
    entry of ``workloads`` of a run or of a scan)."""
    given = [k for k in ("file", "chakra_et") if getattr(entry, k) is not None]
    if len(given) != 1:
        got = ("both are null" if not given else
               f"got workloads[{i}].file={show(entry.file)} and "
               f"workloads[{i}].chakra_et={show(entry.chakra_et)}")
        raise LibraInputError(
            f"workloads[{i}]: set exactly one of workloads[{i}].file (a workload file) and "
            f"workloads[{i}].chakra_et (a Chakra trace set <prefix>.<rank>.et); {got}.")
    if entry.comm_groups is not None and entry.chakra_et is None:
        raise LibraInputError(
            f"workloads[{i}].comm_groups={show(entry.comm_groups)} is the communicator groups "
            f"of a trace set, but workloads[{i}].chakra_et is null; set "
            f"workloads[{i}].comm_groups=null or give the trace set.")
    if getattr(entry, "communicator_file", None) is not None and entry.chakra_et is not None:
        raise LibraInputError(
            f"workloads[{i}].communicator_file={show(entry.communicator_file)} belongs to a "
            "workload file; a trace set's groups come from its nodes and "
            f"workloads[{i}].comm_groups. Set workloads[{i}].communicator_file=null.")
    return given[0]


def entry_config(c: LibraConfig, entry) -> LibraConfig:
    """The single-workload config of one entry of ``workloads`` (the run's network,
    constraints and timing; objective perf)."""
    return dataclasses.replace(
        c, workload=WorkloadConfig(file=entry.file, communicator_file=entry.communicator_file,
                                   chakra_et=entry.chakra_et, comm_groups=entry.comm_groups),
        workloads=None, weights=None, objective=Objective.perf)


@contextlib.contextmanager
def entry_errors(i: int):
    """Re-raises a `LibraInputError` of an entry's single-workload config naming
    ``workloads[i].<key>`` instead of ``workload.<key>`` (prefixed ``workloads[i]:`` when it
    names no key of the entry)."""
    try:
        yield
    except LibraInputError as e:
        msg = str(e)
        for key in ("communicator_file", "comm_groups", "chakra_et", "file"):
            msg = msg.replace(f"workload.{key}", f"workloads[{i}].{key}")
        raise LibraInputError(msg if msg.startswith(f"workloads[{i}]") else
                              f"workloads[{i}]: {msg}") from None


# --------------------------------------------------------------------------------------------
# Serving keys
# --------------------------------------------------------------------------------------------


def serving_requested(c: LibraConfig) -> bool:
    g = c.workload.generator
    return g is not None and getattr(g, "value", g) == "serving"


def check_serving_keys(c: LibraConfig) -> None:
    """The serving keys are refused on a training run, and training-only keys on a serving
    run (nothing is silently ignored)."""
    k = c.constraints
    if not serving_requested(c):
        for name, v in (("constraints.max_ttft_ms", k.max_ttft_ms),
                        ("constraints.max_tpot_ms", k.max_tpot_ms)):
            if v is not None:
                raise LibraInputError(
                    f"{name}={show(v)} is a serving SLO; it needs workload.generator=serving "
                    f"(e.g. conf=serving_llama3_70b), or set {name}=null.")
        if c.objective == "serving_throughput":
            raise LibraInputError(
                "objective=serving_throughput needs a serving workload "
                "(workload.generator=serving, e.g. conf=serving_llama3_70b); a training run "
                "takes objective=perf, perf_per_cost or perf_per_watt.")
        return
    if c.objective == "perf":
        raise LibraInputError(
            "objective=perf with workload.generator=serving: a serving run maximises tokens/s; "
            "use objective=serving_throughput (or perf_per_cost / perf_per_watt, on tokens/s).")
    for name, bad in (("workloads", c.workloads is not None),
                      ("cosearch.enabled", c.cosearch.enabled),
                      ("runtime=search", getattr(c.runtime, "value", c.runtime) == "search"),
                      ("training_loop", getattr(c.training_loop, "value", c.training_loop)
                       != "no_overlap")):
        if bad:
            raise LibraInputError(
                f"{name} is not available with workload.generator=serving (a serving run "
                "optimises one network for the phases of one served model).")
    for name, v in (("constraints.max_ttft_ms", k.max_ttft_ms),
                    ("constraints.max_tpot_ms", k.max_tpot_ms)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise LibraInputError(f"{name} = {show(v)}: expected a positive number of ms.")
