"""Hydra's side of a job's config for ``libra-train`` and ``libra-evaluate``: the schema
registered in Hydra's ConfigStore, the composed config turned into the typed schema object,
and the config -> model inputs calls as the commands and tests use them (they accept a
composed DictConfig as well as the object).

The schema itself (:class:`LibraConfig` and its parts: every key, its type and its default) is
:mod:`libra_jax.studies.job.config`; the YAML files in ``conf/`` fill in values (STYLE.md
section 7, hydra tutorial 5.1). It is registered in Hydra's ConfigStore on import as
``base_config``, the first entry of ``conf/config.yaml``'s defaults list. It types every node
below it, so the ``constraints/*.yaml`` group options are checked against
:class:`ConstraintsConfig` without a group schema of their own (which ``--help`` would list as
one more option). What the command line is checked for before Hydra runs is
:mod:`libra_jax.cli.command_line` (:func:`check_command_line`).

:func:`to_inputs` is the boundary: it turns a composed config into plain model inputs
``(Network, Workload, cost rates or None, ConstraintSpec)`` (`libra_jax.studies.job.inputs`);
nothing past it sees a DictConfig. Every problem with the config is a
:class:`~libra_jax.types.LibraInputError` whose message names the config key.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ValidationError

from libra_jax.cli.command_line import (  # noqa: F401  (the commands' names for them)
    GROUPS,
    check_command_line,
    quoted_override,
    reject_unknown_keys,
)
from libra_jax.inputs.paths import resolve_path  # noqa: F401  (the jobs' name for it)
from libra_jax.studies.job import inputs
from libra_jax.studies.job.config import (  # noqa: F401  (the schema, under its old names)
    CONF_DIR,
    ConstraintsConfig,
    CosearchConfig,
    CostModelConfig,
    LibraConfig,
    NetworkConfig,
    Objective,
    PowerConfig,
    SolverConfig,
    SystemConfig,
    WorkloadConfig,
    WorkloadEntryConfig,
    preset_hint,
    presets,
)
from libra_jax.studies.job.inputs import PhysicalInputs  # noqa: F401
from libra_jax.types import LibraInputError, clip


def register_configs() -> None:
    """Register the schema in Hydra's ConfigStore (idempotent; runs on import)."""
    ConfigStore.instance().store(name="base_config", node=LibraConfig)


register_configs()


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


def to_inputs(cfg: Any, base_dir: str | os.PathLike | None = None):
    """`libra_jax.studies.job.inputs.to_inputs` of a composed config (DictConfig or
    :class:`LibraConfig`): ``(network, workload, cost_rates, spec)``."""
    return inputs.to_inputs(_as_config(cfg), base_dir)


def physical_inputs(cfg: Any, network, cost_model=None) -> PhysicalInputs:
    """`libra_jax.studies.job.inputs.physical_inputs` of a composed config."""
    return inputs.physical_inputs(_as_config(cfg), network, cost_model)


def to_timing(cfg: Any, num_dims: int, network=None):
    """`libra_jax.studies.job.inputs.to_timing` of a composed config: (timing model, chunk
    counts to search or None)."""
    return inputs.to_timing(_as_config(cfg), num_dims, network)


def is_multi(cfg: Any) -> bool:
    """True when the config names several workloads (``workloads`` is set)."""
    return _as_config(cfg).workloads is not None


def to_multi_inputs(cfg: Any, base_dir: str | os.PathLike | None = None):
    """`libra_jax.studies.job.inputs.to_multi_inputs` of a composed config."""
    return inputs.to_multi_inputs(_as_config(cfg), base_dir)
