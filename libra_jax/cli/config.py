"""Hydra structured configs for ``python -m libra_jax.train`` and the bridge to model inputs.

The dataclasses below are the *schema* (every key, its type and its default); the YAML files in
``conf/`` fill in values (STYLE.md section 7, hydra tutorial 5.1). The schema is registered in
Hydra's ConfigStore on import as ``base_config`` (:class:`LibraConfig`), the first entry of
``conf/config.yaml``'s defaults list. It types every node below it, so the ``constraints/*.yaml`` group options are checked
against :class:`ConstraintsConfig` without a group schema of their own (which ``--help`` would
list as one more option). Choice fields are :class:`Choice` enums: Hydra rejects any other value
when it composes the config.

Hydra adds any key given with ``+`` (or ``++``) even in struct mode (it sets struct off for that
update, ``force_add``), so a misspelt ``+key=value`` cannot be refused at compose time;
:func:`reject_unknown_keys` compares the composed config with the schema instead, and every
DictConfig passes through it on its way in. :func:`check_command_line` is what the ``cli()``
entry points run before Hydra, so that what Hydra would report as a composition error (or a
traceback) is one ``error:`` paragraph: a call with no arguments is told how to pick a preset,
an override Hydra's parser rejects or the shell split gets a hint on quoting, a misspelt key
the closest key, a value of the wrong type what the key takes.

:func:`to_inputs` is the boundary: it turns a composed config into plain model inputs
``(Network, Workload, cost rates or None, ConstraintSpec)``; nothing past it sees a DictConfig.
Every problem with the config is a :class:`~libra_jax.types.LibraInputError` whose message names
the config key.

Relative paths (``network.file``, ``cost_model.file``, ``workload.file``,
``workload.communicator_file``) are looked up first in the directory the command was started in,
then in the LIBRA inputs shipped with the package (``libra_jax/data/libra_inputs/``), so presets
can say ``network/3d_network.yml``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import pathlib
import re
import sys
import tempfile
import typing
import weakref
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np
from hydra._internal.utils import get_args_parser  # Hydra's own command-line parser
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException, ValidationError

from libra_jax.inputs.cost import (
    check_reach,
    cost_rates_usd_per_gbps,
    load_cost_model,
    power_rates_w_per_gbps,
    tier_latency_ns,
    tier_max_gbps,
)
from libra_jax.inputs.generators import GENERATORS, generate
from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import (
    Network,
    load_network_file,
    network_from_lists,
    parse_notation,
)
from libra_jax.inputs.workload import Workload, check_workload_network, load_workload
from libra_jax.model.pipelined import SCHEDULES
from libra_jax.model.problem import ConstraintSpec
from libra_jax.model.step import NETWORK_BACKENDS, QUEUE_POLICIES
from libra_jax.model.timing import MODELS, TRAINING_LOOPS, TimingModel, check_timing
from libra_jax.studies.multi import MULTI_OBJECTIVES, check_weights
from libra_jax.types import Choice, LibraInputError, clip, show, show_path

#: ``config.yaml`` and its groups (``conf/conf/<preset>.yaml``, ...), inside the package.
CONF_DIR = pathlib.Path(__file__).resolve().parents[1] / "conf"


def _choice(name: str, values: Sequence[str]) -> type[Choice]:
    """A :class:`Choice` of ``values``, the tuple the consuming module checks against."""
    return Choice(name, [(v, v) for v in values], module=__name__)


class Objective(Choice):
    perf = "perf"  # min step time
    perf_per_cost = "perf_per_cost"  # min step time x network cost
    perf_per_watt = "perf_per_watt"  # min step time x total power = energy per step


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
    whose keys libra_jax/inputs/generators.py defines and checks; presets in ``conf/dnn/``)."""

    file: Optional[str] = None
    communicator_file: Optional[str] = None
    generator: Optional[Generator] = None  # transformer | moe | resnet50 | dlrm (file: null)
    model: Dict[str, Any] = dataclasses.field(default_factory=dict)  # architecture, batch
    parallel: Dict[str, Any] = dataclasses.field(default_factory=dict)  # tp/pp/dp, ZeRO, ...
    npu: Dict[str, Any] = dataclasses.field(default_factory=dict)  # TFLOP/s, efficiency, GB


@dataclasses.dataclass
class WorkloadEntryConfig:
    """One entry of ``workloads`` (multi-workload runs): like ``workload`` plus a name."""

    file: Optional[str] = None
    communicator_file: Optional[str] = None
    name: Optional[str] = None  # default: the workload's own name (file stem)


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


@dataclasses.dataclass
class SolverConfig:
    """Which optimiser runs (see README "How the solver works")."""

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
    # python -m libra_jax.evaluate only: the design to evaluate, GB/s per dim.
    bandwidth_gbps: Optional[List[float]] = None
    # A shipped system's per-NPU GB/s per dim (real-system presets): libra-train shows it next
    # to the optimum at the same network power and at the same network cost.
    reference_bw_gbps: Optional[List[float]] = None
    export_astrasim: bool = False  # write the design as ASTRA-sim network YAML + system JSON
    # JAX's persistent compilation cache (repeat runs skip XLA compilation); null: off.
    compilation_cache_dir: Optional[str] = "~/.cache/libra_jax/jax"


def register_configs() -> None:
    """Register the schema in Hydra's ConfigStore (idempotent; runs on import)."""
    ConfigStore.instance().store(name="base_config", node=LibraConfig)


register_configs()


# --------------------------------------------------------------------------------------------
# Config -> model inputs
# --------------------------------------------------------------------------------------------


#: id -> (weak reference, repr) of the LibraConfig objects that went through the schema:
#: `_as_config` hands such an object back as it is while its repr is unchanged.
_CHECKED: dict[int, tuple[weakref.ref, str]] = {}


def mark_checked(c: LibraConfig) -> LibraConfig:
    """Records that ``c`` came out of the schema (:func:`_as_config`, or a command's one
    conversion of its composed config), so the job's later ``_as_config(c)`` calls (inputs,
    timing, power: four per ``libra-train`` run, ~30 ms each) do not convert it again; a
    later change to ``c`` (its repr differs) sends it through the schema again."""
    key = id(c)
    _CHECKED[key] = (weakref.ref(c, lambda _, key=key: _CHECKED.pop(key, None)), repr(c))
    return c


def _as_config(cfg: Any) -> LibraConfig:
    """The run config as a :class:`LibraConfig` object (accepts a DictConfig or the object).

    Both go through the schema: a DictConfig's keys (:func:`reject_unknown_keys`), an object's
    choice strings (``objective="perf"`` becomes ``Objective.perf``; an unknown one raises).
    An object is typed by its own class (~5 ms); only a DictConfig, which may lack keys, is
    merged into the schema's defaults (~25 ms). An object that already went through the
    schema unchanged (:func:`mark_checked`) is returned as it is.
    """
    if isinstance(cfg, LibraConfig):
        seen = _CHECKED.get(id(cfg))
        if seen is not None and seen[0]() is cfg and seen[1] == repr(cfg):
            return cfg
    if isinstance(cfg, DictConfig):
        reject_unknown_keys(cfg)
    elif not isinstance(cfg, LibraConfig):
        raise TypeError(f"expected a LibraConfig or DictConfig, got {type(cfg).__name__}")
    try:
        if isinstance(cfg, LibraConfig):
            typed = OmegaConf.to_object(OmegaConf.structured(cfg))
        else:
            typed = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(LibraConfig), cfg))
    except ValidationError as e:
        detail = e.msg.splitlines()[0] if e.msg else type(e).__name__
        raise LibraInputError(f"{e.full_key}: {clip(detail, 300)}") from None
    return mark_checked(typed)


def _dataclass_in(tp: Any) -> Any:
    """The dataclass a field type holds (itself, Optional[...] or List[...] of it), or None."""
    while not dataclasses.is_dataclass(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) not in (typing.Union, list) or len(args) != 1:
            return None
        tp = args[0]
    return tp


def _schema_paths(schema: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key the schema defines (list items as ``workloads.file``)."""
    for name, tp in typing.get_type_hints(schema).items():
        yield prefix + name
        sub = _dataclass_in(tp)
        if sub is not None:
            yield from _schema_paths(sub, f"{prefix}{name}.")


def _unknown_keys(data: dict, schema: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """``(dotted key, value, schema of its parent)`` of each key of ``data`` not in the schema."""
    hints = typing.get_type_hints(schema)
    for key, value in data.items():
        if key not in hints:
            yield prefix + str(key), value, schema
            continue
        sub = _dataclass_in(hints[key])
        if sub is None or value is None:
            continue
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    yield from _unknown_keys(item, sub, f"{prefix}{key}[{i}].")
        elif isinstance(value, dict):
            yield from _unknown_keys(value, sub, f"{prefix}{key}.")


def _key_hint(path: str, parent: Any, schema: Any) -> str:
    """What to say about ``path`` (dotted, list indices as ``[i]``), a key that is not in
    ``parent`` (the schema of the node it was put in): the closest valid key (``difflib``;
    among its siblings first, then among every key of ``schema``), or the keys there."""
    head, _, key = path.rpartition(".")
    siblings = list(typing.get_type_hints(parent))
    close = difflib.get_close_matches(key, siblings, n=1)
    if close:
        guess = f"{head}.{close[0]}" if head else close[0]
    else:  # a key put under the wrong parent: compare with every key's own name
        flat = re.sub(r"\[\d+\]", "", path)
        paths = [p for p in _schema_paths(schema) if not flat.startswith(p + ".")]
        close = difflib.get_close_matches(key, [p.rpartition(".")[2] for p in paths], n=1)
        guess = next((p for p in paths if p.rpartition(".")[2] == close[0]), None) \
            if close else None
    return (f"did you mean {guess}?" if guess else
            f"the keys there are {', '.join(siblings)}")


def reject_unknown_keys(cfg: DictConfig, schema: Any = LibraConfig) -> None:
    """Raises unless every key of a composed config is defined by ``schema``.

    Hydra adds a key given as ``+key=value`` whatever the schema says, so a typo such as
    ``+constraints.total_bw_gpbs=400`` would otherwise be ignored silently.

    Raises:
      LibraInputError: names the first unknown key, its value and the closest valid key
        (``difflib``; among its siblings first, then among every key of the schema).
    """
    data = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    for path, value, parent in _unknown_keys(data, schema):
        raise LibraInputError(f"{path}={show(value)}: not a config key; "
                              f"{_key_hint(path, parent, schema)} (--help lists every key)")


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
    cfg: Any, base_dir: str | os.PathLike | None = None
) -> tuple[Network, Workload, np.ndarray | None, ConstraintSpec]:
    """Turn a composed run config into model inputs.

    Args:
      cfg: the composed config (DictConfig from Hydra, or a :class:`LibraConfig`).
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
    return _inputs(_as_config(cfg), base_dir)


def _inputs(
    c: LibraConfig, base_dir: str | os.PathLike | None
) -> tuple[Network, Workload, np.ndarray | None, ConstraintSpec]:
    """:func:`to_inputs` of a config already through the schema (:func:`_as_config`)."""
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
    source = _network_source(c.network)
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
    generated = c.workload.generator is not None
    if generated and (c.workload.file is not None or c.workload.communicator_file is not None):
        raise LibraInputError(
            f"workload.generator={show(c.workload.generator)} and workload.file="
            f"{show(c.workload.file)} / workload.communicator_file="
            f"{show(c.workload.communicator_file)} "
            "are both set: a workload is either generated or read from a file; set "
            "workload.file=null workload.communicator_file=null (or workload.generator=null)."
        )
    if not generated and c.workload.file is None:
        raise LibraInputError(
            "workload.file is null; give a workload (ASTRA-sim 1.0 text or native YAML), e.g. "
            f"workload.file=workload/Turing_NLG.txt, {preset_hint()}, or generate one "
            "(workload.generator=transformer with a model, e.g. dnn=gpt3_175b)."
        )

    # Resolve every path before loading anything, so a typo is reported at once.
    network_path = (
        resolve_path(c.network.file, "network.file", base_dir) if source == "file" else None
    )
    cost_path = (
        resolve_path(c.cost_model.file, "cost_model.file", base_dir)
        if c.cost_model.file is not None
        else None
    )
    workload_path = (
        None if generated else resolve_path(c.workload.file, "workload.file", base_dir)
    )
    communicator_path = (
        resolve_path(c.workload.communicator_file, "workload.communicator_file", base_dir)
        if c.workload.communicator_file is not None
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

    if generated:
        workload = generate(c.workload.generator.value, c.workload.model, c.workload.parallel,
                            c.workload.npu, network.npus)
    else:
        workload = load_workload(
            workload_path, communicator_file=communicator_path, num_dims=network.num_dims
        )
    check_workload_network(workload, network)

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
    return network, workload, cost_rates, spec


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


def physical_inputs(cfg: Any, network: Network, cost_model=None) -> PhysicalInputs:
    """The catalogue's figures for a run's network: power rates, the tiers' bandwidth limits
    merged with ``constraints.upper_gbps``, and the spans checked against the reach.

    Raises:
      LibraInputError: a span beyond its tier's reach, a malformed span list, or a tier the
        catalogue lacks (naming the key, dimension, span, tier and reach).
    """
    c = _as_config(cfg)
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


# --------------------------------------------------------------------------------------------
# Multi-workload runs
# --------------------------------------------------------------------------------------------


def to_timing(cfg: Any, num_dims: int, network: Network | None = None):
    """The step-time model of a run: (`timing.TimingModel`, chunk counts to search or None).

    ``system.chunks`` may be a list (model=pipelined): the run then optimises the bandwidths
    for every count and reports the best pair; the returned model carries the first count.
    With ``network`` given, ``model=pipelined`` and ``network.latency_ns`` null, the tiers'
    ``LatencyNs`` (technology catalogue) are the latencies, when every dimension's tier has one.
    """
    c = _as_config(cfg)
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
    if isinstance(chunks, (list, tuple)) or OmegaConf.is_list(chunks):
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
    tm = TimingModel(
        model=c.model.value, schedule=c.schedule.value, training_loop=c.training_loop.value,
        latency_ns=latency,
        chunks=chunks, endpoint_delay_ns=float(c.system.endpoint_delay_ns),
        local_mem_bw_gbps=None if c.system.local_mem_bw_gbps is None
        else float(c.system.local_mem_bw_gbps),
        gb_is_gib=bool(c.system.gb_is_gib), queue_policy=c.system.queue_policy.value,
        queues_per_dim=c.system.queues_per_dim,
        network_backend=c.system.network_backend.value,
        max_inflight_collectives=c.system.max_inflight_collectives)
    if search is not None and c.model != "pipelined":
        raise LibraInputError(
            f"system.chunks = {show(search)}: a chunk-count search needs model=pipelined.")
    check_timing(tm, num_dims)
    return tm, search


def is_multi(cfg: Any) -> bool:
    """True when the config names several workloads (``workloads`` is set)."""
    return _as_config(cfg).workloads is not None


def to_multi_inputs(cfg: Any, base_dir: str | os.PathLike | None = None):
    """Turn a multi-workload run config into model inputs.

    Returns:
      ``(network, entries, weights, cost_rates, spec, multi_objective)``: ``entries`` is a
      list of ``(name, Workload, resolved workload path)``, ``weights`` [N] float64.

    Raises:
      LibraInputError: as :func:`to_inputs`, naming ``workloads[i]``; also ``workloads`` with
        ``workload.file`` set, an empty list, bad ``weights`` or ``multi_objective``.
    """
    c = _as_config(cfg)
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
        if entry.file is None:
            raise LibraInputError(f"workloads[{i}].file is null; every entry needs a file.")
        sub = dataclasses.replace(
            c,
            workload=WorkloadConfig(file=entry.file, communicator_file=entry.communicator_file),
            workloads=None, weights=None, objective=Objective.perf,
        )
        try:
            network, workload, cost_rates, spec = _inputs(sub, base_dir)
            path = resolve_path(entry.file, "workload.file", base_dir)
        except LibraInputError as e:
            msg = str(e).replace("workload.communicator_file", f"workloads[{i}].communicator_file")
            msg = msg.replace("workload.file", f"workloads[{i}].file")
            raise LibraInputError(msg if msg.startswith(f"workloads[{i}]") else
                                  f"workloads[{i}]: {msg}") from None
        entries.append((entry.name or workload.name, workload, path))
    return network, entries, weights, cost_rates, spec, c.multi_objective.value


# --------------------------------------------------------------------------------------------
# The command line, before Hydra
# --------------------------------------------------------------------------------------------

#: How an override starts: ``key=``, ``+key=``, ``++key=`` or ``~key``; any other argument is
#: a piece the shell split off the one before (at the spaces of ``bw[0] >= bw[1]``).
_OVERRIDE_START = re.compile(r"^(\+\+|\+)?[\w./@\-]+=|^~")

#: The config groups of ``libra-train`` and ``libra-evaluate`` (``conf/<group>/*.yaml``:
#: ``conf``, ``constraints``, ``dnn``); the scan has none.
GROUPS = tuple(sorted(p.name for p in CONF_DIR.iterdir()
                      if p.is_dir() and p.name not in ("hydra", "__pycache__")))

#: Longest override quoted back whole in a suggestion (longer ones are described instead).
_QUOTE_CHARS = 1000


def presets() -> list[str]:
    """The names ``conf=<name>`` accepts (``conf/conf/*.yaml``), sorted."""
    return sorted(p.stem for p in (CONF_DIR / "conf").glob("*.yaml"))


def preset_hint() -> str:
    """How to pick a preset, with every name."""
    return f"pick a preset: conf=<name>, one of: {', '.join(presets())}"


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (``bw[0] >= bw[1], x`` -> 2 items)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return items + [text[start:]]


def quoted_override(override: str) -> str:
    """``override`` written so the shell and Hydra's grammar both keep its string intact:
    single quotes for the shell, double quotes around the value (around each item of a
    list) for Hydra, e.g. ``network.notation=RI(4)_FC(8)`` ->
    ``'network.notation="RI(4)_FC(8)"'``."""
    key, _, value = override.partition("=")
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        items = [i.strip().strip("\"'") for i in _split_top(value[1:-1])]
        value = "[" + ", ".join(f'"{i}"' for i in items if i) + "]"
    else:
        value = '"' + value.strip("\"'") + '"'
    return f"'{key}={value}'"


def _joined(overrides: Sequence[str]) -> list[tuple[str, int]]:
    """The overrides with the words the shell split off one (at the spaces of
    ``bw[0] >= bw[1]`` or ``[100, 200]``) joined back to it: ``(override, arguments)``."""
    joined: list[list] = []
    for arg in overrides:
        if joined and not _OVERRIDE_START.match(arg):
            joined[-1][0] += " " + arg
            joined[-1][1] += 1
        else:
            joined.append([arg, 1])
    return [(text, n) for text, n in joined]


def _parse(parser: OverridesParser, override: str) -> tuple[Any, str | None]:
    """``(Hydra's parsed override, None)``, or ``(None, the message)`` when Hydra cannot read
    it: its grammar refuses it (with how to quote it), or the value is more than Python reads
    (an integer of over 4,300 digits)."""
    try:
        parsed = parser.parse_overrides([override])[0]
        parsed.value()  # evaluates functions such as choice(...) too
        return parsed, None
    except HydraException as e:
        problem = " ".join(str(e).split())
        quoted = (f"quote the value: {quoted_override(override)}"
                  if len(override) <= _QUOTE_CHARS else
                  "quote the value (double quotes inside single quotes)")
        return None, (
            f"cannot parse the override {show(override)}: {clip(problem, 400)}. A string with "
            "characters Hydra's grammar reserves (parentheses, brackets, spaces, comparisons, "
            "commas) needs double quotes for Hydra inside single quotes for the shell; "
            + quoted)
    except Exception as e:  # noqa: BLE001 -- e.g. int() refusing 5,000 digits
        key = override.partition("=")[0]
        digits = re.search(r"value has (\d+) digits", str(e))
        if digits:
            return None, (
                f"{clip(key)}: the override {show(override)} holds an integer of "
                f"{int(digits.group(1)):,} digits, more than Python reads (4,300 digits at "
                "most); no input of libra_jax needs a number that large.")
        return None, (f"cannot read the override {show(override)}: "
                      f"{clip(' '.join(str(e).split()), 400)}.")


def _schema_walk(schema: Any, key: str) -> tuple[str, Any]:
    """Follows the dotted ``key`` through the schema's dataclasses:

    * ``("field", (parent dataclass, field name, field type))`` when every part is a field;
    * ``("unknown", (dotted path up to the first unknown part, its parent dataclass))``;
    * ``("free", None)`` when the key goes on into a list or a free-form dict (an index,
      ``workload.model.<key>``): not checked here.
    """
    parts = key.split(".")
    tp = schema
    for i, part in enumerate(parts):
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            return "free", None
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return "unknown", (".".join(parts[: i + 1]), tp)
        if i == len(parts) - 1:
            return "field", (tp, part, hints[part])
        tp = hints[part]
    return "free", None  # not reached


_WORDS = {float: ("a number", "numbers"), int: ("an integer", "integers"),
          bool: ("true or false", "true/false values"), str: ("a string", "strings")}


def _type_words(tp: Any) -> tuple[str, str]:
    """What a field of type ``tp`` takes, in words: (singular, plural)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin is typing.Union and len(args) == 1:
        one, many = _type_words(args[0])
        return f"{one} or null", f"{many} or nulls"
    if origin in (list, List):
        one = _type_words(args[0])[1] if args else "values"
        return f"a list of {one}", f"lists of {one}"
    if origin in (dict, Dict) or tp is dict:
        return "a mapping {key: value, ...}", "mappings"
    if isinstance(tp, type) and issubclass(tp, Choice):
        names = ", ".join(m.value for m in tp)
        return f"one of {names}", f"values among {names}"
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        keys = ", ".join(typing.get_type_hints(tp))
        return f"a mapping with keys among {keys}", f"mappings with keys among {keys},"
    return _WORDS.get(tp, ("a value", "values"))


@functools.lru_cache(maxsize=None)
def _one_field(parent: Any, leaf: str, tp: Any) -> type:
    """A dataclass with field ``leaf`` of ``parent`` (its type and default) alone."""
    field = next(f for f in dataclasses.fields(parent) if f.name == leaf)
    default = ({"default_factory": field.default_factory}
               if field.default_factory is not dataclasses.MISSING
               else {"default": field.default})
    return dataclasses.make_dataclass(f"{parent.__name__}_{leaf}",
                                      [(leaf, tp, dataclasses.field(**default))])


def _type_problem(parent: Any, leaf: str, tp: Any, value: Any) -> str | None:
    """Why the schema refuses ``value`` for field ``leaf`` of dataclass ``parent`` (what
    Hydra would refuse when it composes), or None. Tried on a fresh node holding that field
    alone (with its default), ~50x cheaper than a whole config."""
    node = OmegaConf.structured(_one_field(parent, leaf, tp))
    try:
        OmegaConf.update(node, leaf, value, merge=True)
    except (OmegaConfBaseException, ValueError, TypeError, OverflowError) as e:
        detail = (getattr(e, "msg", None) or str(e)).splitlines()
        where = getattr(e, "full_key", None) or ""
        expected = f"expected {_type_words(tp)[0]}"
        if detail and "[" in where:  # an element of a list: say which one
            expected += f" ({where[len(leaf):]}: {clip(detail[0], 200)})"
        elif detail and not isinstance(e, ValidationError):  # e.g. a key, an overflow
            expected += f" ({clip(detail[0], 200)})"
        return expected
    return None


def _value_text(value: Any) -> str:
    """A parsed override value as a message shows it: ``null``, ``true`` / ``false`` as
    typed, anything else by ``show``."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return show(value)


def _label(parsed: Any, key: str) -> str:
    """``key=value`` as a message names an override (the value bounded by ``show``)."""
    if parsed.is_delete():
        return f"~{key}"
    if parsed.is_sweep_override():  # as typed, e.g. choice(1,2) or 1,2
        return f"{key}={clip(parsed.input_line.partition('=')[2])}"
    return f"{key}={_value_text(parsed.value())}"


def _run_dir_problem(key: str, value: Any) -> str | None:
    """Why Hydra could not make the run directory ``value`` (``hydra.run.dir`` /
    ``hydra.sweep.dir``), or None. The nearest existing ancestor must be a directory in
    which this process can make a directory: tried with a probe made and removed at once
    (permission bits are not enough: as root ``os.access`` allows ``/proc``, a read-only
    mount or a full disk, where ``mkdir`` then fails). Interpolations are left to Hydra."""
    if not isinstance(value, str) or "${" in value or not value:
        return None
    path = pathlib.Path(value).absolute()
    for ancestor in (path, *path.parents):
        if ancestor.exists():
            break
    if ancestor == path and path.is_dir():
        return None
    if not ancestor.is_dir():
        return (f"{key}={show_path(value)}: {show_path(ancestor)} is a file, so the run directory "
                "cannot be made there; give a directory path.")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".libra_probe_", dir=ancestor))
    except OSError as e:
        return (f"{key}={show_path(value)}: cannot make the run directory: making a directory "
                f"in {show_path(ancestor)} fails ({e.strerror or e}); give a directory this "
                "user can write.")
    return None


def _check_override(parsed: Any, command: str, schema: Any, groups: Sequence[str],
                    config_dir: str | None) -> str | None:
    """The message for an override the command cannot take (a key that is not in
    ``schema``, a value of the wrong type, a group of another command or an option a
    group does not have), or None. Hydra's own keys and the options of groups Hydra finds
    in another ``--config-dir`` are left to Hydra."""
    key = parsed.key_or_group
    if len(key) > 200:
        return f"{show(key)}: not a config key (--help lists every key)"
    if key in ("hydra.run.dir", "hydra.sweep.dir") and not parsed.is_sweep_override():
        return _run_dir_problem(key, parsed.value())
    if parsed.is_hydra_override() or key.split("/")[0].split(".")[0] == "hydra" \
            or parsed.package is not None:
        return None
    label = _label(parsed, key)
    if key in groups or config_dir is not None and (pathlib.Path(config_dir) / key).is_dir():
        if config_dir is None and not parsed.is_delete():
            options = sorted(p.stem for p in (CONF_DIR / key).glob("*.yaml"))
            value = parsed.value()
            values = value.list if parsed.is_choice_sweep() else (
                [] if parsed.is_sweep_override() else [value])
            for v in values:
                if v is not None and str(v) not in options:
                    return (f"{label}: {key} has no option {show(str(v))}; the options are "
                            f"{', '.join(options)} (conf/{key}/<option>.yaml).")
        return None
    if key in GROUPS:
        fields = ", ".join(typing.get_type_hints(schema))
        return (f"{label}: {command} has no config group {key} ({', '.join(GROUPS)} are "
                f"groups of libra_jax.train and libra_jax.evaluate); its keys are {fields} "
                "(--help lists them).")
    kind, info = _schema_walk(schema, key)
    if kind == "unknown" and not (parsed.is_add() or parsed.is_force_add()):
        # (a key added with + is Hydra's to add; reject_unknown_keys refuses it once composed)
        path, parent = info
        return f"{label}: not a config key; {_key_hint(path, parent, schema)} (--help lists " \
               "every key)"
    if kind != "field" or parsed.is_delete():
        return None
    value = parsed.value()
    if parsed.is_sweep_override():
        if not parsed.is_choice_sweep():
            return None  # range(...), interval(...): numbers Hydra makes
        values = list(value.list)
    else:
        values = [value]
    for v in values:
        if isinstance(v, str) and "${" in v:
            continue  # an interpolation: resolved against the whole config, later
        problem = _type_problem(*info, v)
        if problem is not None:
            return f"{key}={_value_text(v)}: {problem}."
    return None


def _override_error(overrides: Sequence[str], command: str = "libra_jax.train",
                    schema: Any = LibraConfig, groups: Sequence[str] = GROUPS,
                    config_dir: str | None = None) -> str | None:
    """The message for the first override the command cannot take, or None when every one
    is fine: one Hydra's parser rejects (with how to quote it), one the shell split at its
    spaces (with how to quote it whole), a key that is not in ``schema`` (with the closest
    key), a value of the wrong type, a group the command does not have or an option a group
    does not have."""
    parser = OverridesParser.create()
    for override, pieces in _joined(overrides):
        parsed, problem = _parse(parser, override)
        if problem is not None:
            if pieces > 1:
                problem = problem.replace(
                    "; quote the value:", " (the shell also split this one at its spaces); "
                    "quote the value:")
            return problem
        if pieces > 1:
            whole = (f"'{override}'" if len(override) <= _QUOTE_CHARS and "'" not in override
                     else "in single quotes")
            return (f"the shell split the override {show(override)} at its spaces into "
                    f"{pieces} arguments, which Hydra reads one by one; quote it whole: "
                    f"{whole}")
        problem = _check_override(parsed, command, schema, groups, config_dir)
        if problem is not None:
            return problem
    return None


def check_command_line(command: str, example: str | None,
                       argv: Sequence[str] | None = None, schema: Any = LibraConfig,
                       groups: Sequence[str] = GROUPS) -> None:
    """What a CLI's ``cli()`` runs before Hydra: exits with status 2 and an ``error:``
    paragraph on stderr when the call cannot mean anything sensible, instead of Hydra's
    composition error.

    * No argument at all: nothing to solve (every input is null); the message says how to
      pick a preset and lists them.
    * An override Hydra's parser rejects (e.g. ``network.notation=RI(4)_FC(8)``, whose
      ``_FC`` Hydra reads as a syntax error): Hydra's message plus how to quote it; one the
      shell split at its spaces (``bandwidth_gbps=[100, 200, 200]`` unquoted): how to quote
      it whole; a number Python refuses to read (an integer of over 4,300 digits).
    * A key that is not in ``schema``: the closest key, e.g. ``objectiv=perf_per_cost`` ->
      "did you mean objective?" (Hydra's own message only suggests ``+objectiv=``; a key
      added with ``+`` is refused by :func:`reject_unknown_keys` once composed).
    * ``hydra.run.dir`` / ``hydra.sweep.dir`` under a file or in a directory that cannot be
      written (checked without creating anything).
    * A value the schema refuses (``constraints.total_bw_gbps=abc``, ``network.npus=[4,"x"]``,
      ``objective=fastest``): what the key takes; a group option that does not exist; a
      group of another command (``libra-scan conf=gpt3``).

    Args:
      command: the module, e.g. ``"libra_jax.train"`` (for messages).
      example: a complete example call's arguments, e.g. ``"conf=turing_nlg"``; None for a
        command whose defaults already run (the scan), so no argument is fine.
      argv: the arguments (default ``sys.argv[1:]``).
      schema: the command's config dataclass (:class:`LibraConfig`, the scan's
        ``ScanConfig``).
      groups: the command's config groups (:data:`GROUPS`; the scan: none).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args, _ = get_args_parser().parse_known_args(argv)
    if not argv and example is not None:
        message = (
            f"no arguments: every input is null, so there is nothing to solve; "
            f"{preset_hint()}; e.g. python -m {command} {example}. Or give the network and "
            "workload yourself (network.*, workload.*); --help lists every key.")
    else:
        message = _override_error(args.overrides, command, schema, groups, args.config_dir)
    if message is not None:
        print(f"error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)
