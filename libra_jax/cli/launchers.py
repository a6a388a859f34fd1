"""A multirun's tasks fitted to the cluster its launcher submits them to, before any is
submitted: the Hydra callback :class:`ClusterFit` (``hydra.callbacks`` of the commands'
configs), run by the launching process at the start of every multirun.

* **Ray** (``hydra/launcher=libra_ray``, or any config of hydra-ray-launcher's
  ``RayLauncher``): connects to the cluster as the launcher would (the launcher then finds
  the connection made) and reads each live node's totals. ``remote.num_cpus: auto`` (the
  shipped default) becomes min(:data:`SHARD_CPUS`, the CPUs of the largest node), so a task
  fits the cluster; a request that no node can hold on its own (``num_cpus``, ``num_gpus``,
  ``memory``, ``resources``, ``accelerator_type``, alone or together) is refused. Without the
  check Ray queues such a task forever ("cannot be scheduled right now" in its raylet log)
  and the command waits silently. A loopback address (127.0.0.1:PORT, or ``auto`` finding a
  head on 127.0.0.1) is connected to as is (:func:`_loopback_driver`).
* **SLURM** (``hydra/launcher=libra_slurm``, submitit's ``SlurmLauncher``): reads the
  partition's nodes with ``sinfo`` and refuses ``cpus_per_task`` x ``tasks_per_node``,
  ``mem_gb`` or ``gpus_per_node`` that fewer than ``nodes`` of them have, or a partition the
  cluster does not have (sbatch would refuse it with a traceback from submitit).

The check uses each node's totals, not what is free now: a busy cluster still queues the
tasks. A refusal prints one ``error:`` paragraph naming the key, the request and the nodes'
totals, and exits with status 2 before any task is submitted.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import shutil
import socket
import subprocess
import sys
from collections import Counter
from typing import Any, Mapping, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)

#: The CPUs a task asks for with ``num_cpus: auto`` (the build and the write of a shard run on
#: the CPU), when the cluster's largest node has as many.
SHARD_CPUS = 8
RAY_LAUNCHER = "hydra_plugins.hydra_ray_launcher.ray_launcher.RayLauncher"
SLURM_LAUNCHER = "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
#: hydra-ray-launcher 1.2.2 adds this to ray.init() when the config lacks the key (_core.py).
_RAY_OBJECT_STORE_DEFAULT = 78643200
#: Ray's option -> the node resource it takes (ray.remote's keyword arguments).
_RAY_RESOURCES = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}
_UNITS = {"CPU": "CPUs", "GPU": "GPUs"}


class ClusterFit(Callback):
    """Hydra callback: fits the tasks of a Ray or SLURM multirun to the cluster, or exits
    with status 2 and one ``error:`` paragraph (the module's docstring)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        launcher = config.hydra.launcher
        target = launcher.get("_target_")
        try:
            if target == RAY_LAUNCHER:
                _fit_ray(launcher)
            elif target == SLURM_LAUNCHER:
                check_slurm(launcher, sinfo_nodes())
        except LibraInputError as e:
            # SystemExit, not an exception: Hydra turns a callback's exceptions into warnings.
            print(f"error: {' '.join(str(e).split())}", file=sys.stderr, flush=True)
            sys.exit(2)


# ---------------------------------------------------------------------------------------- Ray


def _fit_ray(launcher: DictConfig) -> None:
    """Connects to the launcher's Ray cluster and sets ``ray.remote.num_cpus`` to the fitted
    request (the launcher is made from this config after the callback, and finds the
    connection made)."""
    init = OmegaConf.to_container(launcher.ray.init, resolve=True) or {}
    init.setdefault("object_store_memory", _RAY_OBJECT_STORE_DEFAULT)
    remote = OmegaConf.to_container(launcher.ray.remote, resolve=True) or {}
    import ray

    address = init.get("address")
    if not ray.is_initialized():
        _connect_ray(ray, init)
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    where = "the Ray cluster" + (f" at {address}" if address not in (None, "auto") else "")
    fitted = fit_ray_request(remote, nodes, where)
    if remote.get("num_cpus") == "auto":
        log.info("hydra.launcher.ray.remote.num_cpus = auto: %s CPUs per task (min(%d, the "
                 "largest node's CPUs))", _num(fitted), SHARD_CPUS)
        with read_write(launcher), open_dict(launcher):
            launcher.ray.remote.num_cpus = fitted


def _connect_ray(ray: Any, init: dict[str, Any]) -> None:
    """``ray.init(**init)``, or an error naming the address where nothing answers (Ray
    itself retries a silent address for minutes)."""
    from ray._private import services

    address, temp_dir = init.get("address"), init.get("_temp_dir")
    key = f"hydra.launcher.ray.init.address = {show(address)}"
    if address is not None and "://" not in str(address):  # not a new local Ray, not a client
        try:
            found = services.get_ray_address_from_environment(address, temp_dir)
        except ConnectionError as e:  # auto: no cluster on this machine
            raise LibraInputError(f"{key}: {' '.join(str(e).split())}") from None
        if "://" not in found:
            _loopback_driver(found)
            host, port = services.canonicalize_bootstrap_address(found, temp_dir).rsplit(":", 1)
            try:
                socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
            except OSError as e:
                raise LibraInputError(
                    f"{key}: no Ray cluster answers at {found} ({e.strerror or e}); start its "
                    "head first (ray start --head, docs/launchers.md) or fix the address."
                ) from None
    try:
        ray.init(**init)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise LibraInputError(f"{key}: cannot connect to a Ray cluster "
                              f"({' '.join(str(e).split())[:300]})") from None


def _loopback_driver(address: str) -> None:
    """Lets this process reach a Ray head bound to 127.0.0.1 (docs/launchers.md).

    Ray replaces a loopback address by the machine's network address before it connects
    (``services.resolve_ip_for_localhost``), except where multi-node clusters are switched
    off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, read once when Ray is imported into the
    constant ``ray_constants.ENABLE_RAY_CLUSTER``). A head started with that switch and
    ``--node-ip-address=127.0.0.1`` listens on 127.0.0.1 only, where the replaced address
    finds nothing. For a loopback address (given, or found by ``auto``) this process takes
    the switch: the address is used as given (a head on the machine's network address listens
    on every interface, loopback included, and is reached as well)."""
    import ray._private.ray_constants as ray_constants

    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost" or _is_loopback(host):
        ray_constants.ENABLE_RAY_CLUSTER = False


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def fit_ray_request(remote: Mapping[str, Any], nodes: Sequence[Mapping[str, float]],
                    where: str = "the Ray cluster") -> float:
    """The ``num_cpus`` a task asks for (``remote.num_cpus`` with ``auto`` resolved) on a
    cluster whose live nodes have the totals ``nodes`` (``ray.nodes()[i]["Resources"]``).

    Raises:
      LibraInputError: no node has every resource the task asks for, naming each request no
        node meets alone (or the combination) and the nodes' totals.
    """
    if not nodes:
        raise LibraInputError(f"{where} has no live node.")
    request = {}
    for key, resource in _RAY_RESOURCES.items():
        if key != "num_cpus" and remote.get(key) is not None:
            request[resource] = _amount(key, remote[key])
    for name, amount in (remote.get("resources") or {}).items():
        request[str(name)] = _amount(f"resources.{name}", amount)
    if remote.get("accelerator_type") is not None:
        request[f"accelerator_type:{remote['accelerator_type']}"] = 0.001  # as Ray asks
    cpus = remote.get("num_cpus", 1)  # Ray's default for a task
    if cpus == "auto":  # the largest node that has the task's other resources
        able = [n for n in nodes if all(n.get(r, 0.0) >= a for r, a in request.items())]
        largest = max((n.get("CPU", 0.0) for n in able), default=0.0)
        if able and largest <= 0:
            raise LibraInputError(
                f"hydra.launcher.ray.remote.num_cpus = auto: no node of {where} that has "
                f"the task's other resources has a CPU; its live nodes: "
                f"{_ray_nodes(nodes, list(request))}.")
        cpus = min(float(SHARD_CPUS), largest)
    request = {"CPU": _amount("num_cpus", cpus), **request}
    asked = {r: a for r, a in request.items() if a > 0}
    if any(all(node.get(r, 0.0) >= a for r, a in asked.items()) for node in nodes):
        return int(cpus) if float(cpus).is_integer() else cpus
    alone = [r for r, a in asked.items() if max(node.get(r, 0.0) for node in nodes) < a]
    names = alone or list(asked)
    keys = " and ".join(f"{_key(r)} = {_show(r, asked[r])}" for r in names)
    has = (", nor ".join(_amount_text(r, asked[r]) for r in alone) if alone else
           " and ".join(_amount_text(r, asked[r]) for r in names) + " together")
    hint = (f" (num_cpus=auto: the largest node's CPUs, up to {SHARD_CPUS})"
            if "CPU" in names else "")
    raise LibraInputError(
        f"hydra.launcher.ray.remote.{keys}: no node of {where} has {has}; its live nodes: "
        f"{_ray_nodes(nodes, list(asked))}. Ask for what a node has{hint}.")


def _amount(key: str, value: Any) -> float:
    """A request's amount as a float, or an error naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 \
            or not math.isfinite(value):
        raise LibraInputError(
            f"hydra.launcher.ray.remote.{key} = {show(value)}: must be a number >= 0"
            + (" or auto." if key == "num_cpus" else "."))
    return float(value)


def _key(resource: str) -> str:
    """The ``ray.remote`` key that asks for ``resource``."""
    keys = {v: k for k, v in _RAY_RESOURCES.items()}
    if resource in keys:
        return keys[resource]
    if resource.startswith("accelerator_type:"):
        return "accelerator_type"
    return f"resources.{resource}"


def _show(resource: str, amount: float) -> str:
    """The value of :func:`_key` as the config has it."""
    if resource.startswith("accelerator_type:"):
        return resource.split(":", 1)[1]
    return _num(amount)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _amount_text(resource: str, amount: float) -> str:
    """E.g. "1 GPU", "64 CPUs", "40 GiB of memory", "an accelerator of type A100"."""
    if resource == "memory":
        return f"{amount / 2**30:.3g} GiB of memory"
    if resource.startswith("accelerator_type:"):
        return f"an accelerator of type {resource.split(':', 1)[1]}"
    return _count(amount, _UNITS.get(resource, f"{resource!r} resources"))


def _count(amount: float, units: str) -> str:
    """E.g. "1 GPU", "2 GPUs", "0.5 CPUs"."""
    return f"{_num(amount)} {units[:-1] if amount == 1 else units}"


def _ray_nodes(nodes: Sequence[Mapping[str, float]], resources: Sequence[str]) -> str:
    """The live nodes' totals of CPUs, GPUs and ``resources``, alike nodes counted once,
    e.g. "2 CPUs, 0 GPUs (1 node); 8 CPUs, 1 GPU (3 nodes)"."""
    shown = ["CPU", "GPU"] + [r for r in resources if r not in ("CPU", "GPU")]

    def text(node: Mapping[str, float]) -> str:
        parts = []
        for r in shown:
            if r.startswith("accelerator_type:"):
                parts.append(f"{'an' if node.get(r) else 'no'} accelerator of type "
                             f"{r.split(':', 1)[1]}")
            else:
                parts.append(_amount_text(r, node.get(r, 0.0)))
        return ", ".join(parts)

    counts = Counter(text(node) for node in nodes)
    return "; ".join(f"{t} ({n} node{'s' * (n > 1)})" for t, n in counts.most_common())


# -------------------------------------------------------------------------------------- SLURM


def sinfo_nodes() -> list[dict[str, Any]]:
    """The cluster's nodes as ``sinfo`` sees them (SLURM_CONF applies): one entry per node and
    partition (:func:`parse_sinfo`)."""
    sinfo = shutil.which("sinfo")
    if sinfo is None:
        raise LibraInputError("hydra/launcher=libra_slurm: sinfo is not on PATH; launch from a "
                              "SLURM submit host (the launcher submits with sbatch).")
    try:
        proc = subprocess.run([sinfo, "-h", "-N", "-o", "%N|%P|%c|%m|%G"], capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise LibraInputError("hydra/launcher=libra_slurm: sinfo did not answer in 60 s "
                              "(is slurmctld running?).") from None
    if proc.returncode != 0:
        raise LibraInputError(f"hydra/launcher=libra_slurm: sinfo failed: "
                              f"{' '.join(proc.stderr.split())[:300]}")
    return parse_sinfo(proc.stdout)


def parse_sinfo(text: str) -> list[dict[str, Any]]:
    """``sinfo -h -N -o "%N|%P|%c|%m|%G"`` as ``{"node", "partition", "default", "cpus",
    "mem_mb", "gpus"}`` entries (the default partition is marked ``*`` by sinfo; GRES such as
    ``gpu:4`` or ``gpu:a100:2(S:0-1)``, several separated by commas)."""
    nodes = []
    for line in text.splitlines():
        if not line.strip():
            continue
        name, partition, cpus, mem, gres = line.strip().split("|")
        gpus = 0
        for item in gres.split(","):
            fields = item.split("(")[0].split(":")
            if fields[0] == "gpu" and len(fields) > 1 and fields[-1].isdigit():
                gpus += int(fields[-1])
        nodes.append({"node": name, "partition": partition.rstrip("*"),
                      "default": partition.endswith("*"), "cpus": int(cpus),
                      "mem_mb": int(mem.rstrip("+")), "gpus": gpus})
    return nodes


def check_slurm(launcher: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> None:
    """Refuses a SLURM launcher config (``hydra.launcher``) that fewer than ``nodes`` nodes of
    its partition can run (``nodes``: :func:`parse_sinfo`'s entries).

    Raises:
      LibraInputError: the partition does not exist (or none is given and the cluster has no
        default), or a per-node request exceeds what enough of its nodes have, naming the
        key, the request and the partition's nodes."""
    partitions = sorted({n["partition"] for n in nodes})
    default = sorted({n["partition"] for n in nodes if n["default"]})
    asked = launcher.get("partition")
    if asked is None:
        if not default:
            raise LibraInputError(
                "hydra.launcher.partition = null: the SLURM cluster has no default partition; "
                f"name one of {', '.join(partitions) or '(none)'}.")
        names, where = default, f"the default partition {default[0]}"
    else:
        names = [p.strip() for p in str(asked).split(",")]
        missing = [p for p in names if p not in partitions]
        if missing:
            raise LibraInputError(
                f"hydra.launcher.partition = {asked}: the SLURM cluster has no partition "
                f"{', '.join(missing)}; it has {', '.join(partitions) or '(none)'}.")
        where = f"partition {asked}"
    members = list({n["node"]: n for n in nodes if n["partition"] in names}.values())
    cpus, tasks = launcher.get("cpus_per_task") or 1, launcher.get("tasks_per_node") or 1
    per_node = {"cpus": cpus * tasks, "mem_mb": (launcher.get("mem_gb") or 0) * 1024,
                "gpus": launcher.get("gpus_per_node") or 0}
    count = launcher.get("nodes") or 1
    if len(members) < count:
        raise LibraInputError(f"hydra.launcher.nodes = {count}: {where} has {len(members)} "
                              f"node{'s' * (len(members) != 1)}.")
    if sum(all(n[k] >= v for k, v in per_node.items()) for n in members) >= count:
        return
    keys = {"cpus": f"cpus_per_task = {cpus}" + (f" x tasks_per_node = {tasks}" if tasks > 1
                                                  else ""),
            "mem_mb": f"mem_gb = {_num(per_node['mem_mb'] / 1024)}",
            "gpus": f"gpus_per_node = {per_node['gpus']}"}
    amounts = {"cpus": _count(per_node["cpus"], "CPUs"), "gpus": _count(per_node["gpus"], "GPUs"),
               "mem_mb": f"{_num(per_node['mem_mb'] / 1024)} GB of memory"}
    alone = [k for k, v in per_node.items()
             if v > 0 and sum(n[k] >= v for n in members) < count]
    named = alone or [k for k, v in per_node.items() if v > 0]
    has = (", nor ".join(amounts[k] for k in named) if alone
           else " and ".join(amounts[k] for k in named) + " together")
    shapes = Counter(f"{n['cpus']} CPUs, {n['mem_mb'] / 1024:.3g} GB memory, {n['gpus']} GPUs"
                     for n in members)
    totals = "; ".join(f"{s} ({c} node{'s' * (c > 1)})" for s, c in shapes.most_common())
    nodes_text = f"fewer than {count} nodes of" if count > 1 else "no node of"
    raise LibraInputError(
        f"hydra.launcher.{' and '.join(keys[k] for k in named)}: {nodes_text} {where} "
        f"{'have' if count > 1 else 'has'} {has}; its nodes: {totals}. Ask for what a node "
        "has.")
