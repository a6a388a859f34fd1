"""ASTRA-sim 2.x interop: write a design as simulator inputs, read a network back.

ASTRA-sim's analytical network backend reads a network YAML (one entry per dimension)::

    topology: [ Ring, FullyConnected, Switch ]   # building block of each dimension
    npus_count: [ 2, 8, 4 ]                      # NPUs per dimension
    bandwidth: [ 200.0, 100.0, 50.0 ]            # GB/s per link, per direction
    latency: [ 50.0, 500.0, 2000.0 ]             # ns per link (a Switch step is 2 hops)

and its system layer a JSON of scheduling and collective-algorithm settings
(``scheduling-policy``, ``endpoint-delay``, ``active-chunks-per-dimension``,
``preferred-dataset-splits``, ``<collective>-implementation`` lists with one algorithm
per dimension, ``collective-optimization``, ``local-mem-bw``, ``boost-mode``).

Two conversions separate libra_jax's per-NPU bandwidth ``bw[d]`` (GB/s, 1 GB = 1e9
bytes) from the simulator's per-link bandwidth:

* **Link vs per-NPU.** With the ``ring`` algorithm each NPU sends one message at a time
  over one link, so ``link = bw``, on every block. With ``direct`` each NPU sends to all
  ``n - 1`` peers of the dimension at once, one message per peer, so
  ``link = bw / (n - 1)`` (on FullyConnected these are the n - 1 dedicated links, and
  this is LIBRA's cost-model per-link bandwidth; on Ring and Switch it holds for the
  congestion-unaware backend, where concurrent messages do not share links).
  Halving-doubling sends to one partner per step, so ``link = bw``; a double binary
  tree's inner node sends to its two children at once, so ``link = bw / 2`` (``bw`` when
  n = 2). On a Ring block their partners are hops away: the rule holds on the
  congestion-unaware backend there.
* **GB vs GiB.** ASTRA-sim converts link GB/s with 1 GB = 2^30 bytes
  (astra-network-analytical ``bw_GBps_to_Bpns``), so with ``gb_is_gib=True`` the file
  holds ``link * 1e9 / 2^30`` and the simulator moves the same bytes per second as
  libra_jax. ``local-mem-bw`` is not converted (ASTRA-sim reads it with 1 GB = 1e9
  bytes).

See ``docs/astrasim.md`` for the rule table and what the simulator adds to LIBRA's
model.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_path, real_or_none
from libra_jax.inputs.reading import SMALL_FILE_NODES, read_yaml_mapping
from libra_jax.inputs.topology import Network, network_from_lists
from libra_jax.types import BLOCKS, LibraInputError, show

# ASTRA-sim 2.x reads link GB/s as 2^30 bytes/s; libra_jax counts 1e9 bytes/s.
GIB_PER_GB = 1e9 / 2**30

ALGORITHMS = ("ring", "direct", "halving_doubling", "double_binary_tree")
#: libra_jax's algorithm names as ASTRA-sim's system JSON spells them.
ASTRA_ALGORITHMS = dict(ring="ring", direct="direct", halving_doubling="halvingDoubling",
                        double_binary_tree="doubleBinaryTree")
#: The runtime keys of the system JSON: libra_jax's value -> ASTRA-sim's (the scheduling
#: keys are read by the locally patched simulator only; experiments/astrasim/).
INTER_DIM_SCHEDULING = dict(ascending="ascending", themis="offlineGreedy",
                            themis_flex="offlineGreedyFlex", round_robin="roundRobin")
INTRA_DIM_SCHEDULING = dict(fifo="FIFO", smallest_first="smallestFirst")
COLLECTIVE_OPTIMIZATION = dict(local_bw_aware="localBWAware", baseline="baseline")

# Keys of the analytical network YAML, as astra-network-analytical's NetworkParser reads
# them. topology and npus_count are required here; bandwidth and latency may be absent
# (the simulator itself needs all four).
_YAML_KEYS = ("topology", "npus_count", "bandwidth", "latency")

_NETWORK_FILE = "network.yml"
_SYSTEM_FILE = "system.json"

_COLLECTIVE_KEYS = (
    "all-reduce-implementation",
    "reduce-scatter-implementation",
    "all-gather-implementation",
    "all-to-all-implementation",
)


def _per_dim_algorithms(algorithm: Any, num_dims: int, where: str) -> tuple[str, ...]:
    """[D] algorithm names from one name or a per-dimension list."""
    if isinstance(algorithm, str):
        algs = [algorithm] * num_dims
    elif isinstance(algorithm, Sequence) and not isinstance(algorithm, bytes):
        algs = list(algorithm)
        if len(algs) != num_dims:
            raise LibraInputError(
                f"{where}: algorithm {show(algs)} has {len(algs)} entries but the network "
                f"has {num_dims} dimensions; give one name or one per dimension."
            )
    else:
        raise LibraInputError(
            f"{where}: algorithm must be 'ring', 'direct' or a list of them per "
            f"dimension, got {show(algorithm)}."
        )
    for d, a in enumerate(algs):
        if a not in ALGORITHMS:
            raise LibraInputError(
                f"{where}: algorithm of dimension {d} is {show(a)}; expected one of "
                f"{', '.join(ALGORITHMS)} (other ASTRA-sim algorithms have no per-link "
                "bandwidth rule that reproduces LIBRA's per-NPU bandwidth)."
            )
    return tuple(algs)


def _check_power_of_two(algs: Sequence[str], npus: Sequence[int], where: str) -> None:
    """Halving-doubling (log2 n steps) and ASTRA-sim's binary trees (2^floor(log2 n)
    nodes) need a power-of-two dimension."""
    for d, (a, n) in enumerate(zip(algs, npus)):
        if a in ("halving_doubling", "double_binary_tree") and n & (n - 1):
            raise LibraInputError(
                f"{where}: algorithm of dimension {d} is {a}, which ASTRA-sim runs on a "
                f"power-of-two number of NPUs only, but the dimension has {n}; use ring or "
                "direct there.")


def links_sharing(algorithm: str, npus: int) -> int:
    """How many links carry one NPU's traffic at once: per-NPU bw = link bw x this. Ring
    and halving-doubling send one message at a time, direct one to each of the n - 1 peers,
    a binary tree's inner node one to each of its two children (n = 2: a root and a leaf)."""
    if algorithm == "direct":
        return npus - 1
    if algorithm == "double_binary_tree":
        return 2 if npus > 2 else 1
    return 1


def _real_vector(
    value: Any, num_dims: int, where: str, field: str, *, positive: bool
) -> np.ndarray:
    """[D] finite float64 values, each > 0 (positive) or >= 0; bools are rejected."""
    if isinstance(value, np.ndarray):
        items = value.tolist() if value.ndim == 1 else None
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        items = list(value)
    else:
        items = None
    if items is None:
        raise LibraInputError(
            f"{where}: {field} must be a list of numbers, got {show(value)}."
        )
    if len(items) != num_dims:
        raise LibraInputError(
            f"{where}: {field} {show(items)} has {len(items)} entries but the network has "
            f"{num_dims} dimensions; give one per dimension."
        )
    out = np.empty(num_dims, dtype=np.float64)
    for d, x in enumerate(items):
        out[d] = _real(x, where, f"{field}[{d}]", positive=positive)
    return out


def _real(x: Any, where: str, field: str, *, positive: bool) -> float:
    """One finite real number; ``positive``: a bandwidth, > 0 and at most
    ``LIMITS.max_gbps``; else a time, >= 0 and at most ``LIMITS.max_ns``."""
    v = real_or_none(x)
    if v is None:
        raise LibraInputError(f"{where}: {field} is {show(x)}; expected a number.")
    if not math.isfinite(v) or (v <= 0 if positive else v < 0):
        need = "> 0" if positive else ">= 0"
        raise LibraInputError(
            f"{where}: {field} is {show(x)}; expected a finite number {need}."
        )
    limit, unit = (LIMITS.max_gbps, "GB/s") if positive else (LIMITS.max_ns, "ns")
    if v > limit:
        raise LibraInputError(
            f"{where}: {field} is {show(x)}; beyond the limit of {limit:g} {unit}.")
    return v


def _yaml_float(x: float) -> str:
    """Shortest round-trip text of a float that YAML 1.1 (PyYAML) also reads as a float.

    PyYAML needs a '.' before an exponent: ``repr(1e-05)`` is ``'1e-05'``, written
    here as ``'1.0e-05'``.
    """
    s = repr(float(x))
    if "e" in s and "." not in s:
        mant, exp = s.split("e")
        s = f"{mant}.0e{exp}"
    return s


def _yaml_list(values: Sequence[Any]) -> str:
    return "[ " + ", ".join(str(v) for v in values) + " ]"


def _json_text(obj: dict) -> str:
    """A flat JSON object, one key a line, lists inline (as in ASTRA-sim's samples)."""
    items = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()]
    return "{\n" + ",\n".join(items) + "\n}\n"


def export_design(
    network: Network,
    bandwidth_gbps: Any,
    *,
    out_dir: str | os.PathLike,
    latency_ns: Any = None,
    chunks: int = 4,
    endpoint_delay_ns: int = 1,
    local_mem_bw_gbps: float = 1e6,
    algorithm: str | Sequence[str] = "ring",
    gb_is_gib: bool = True,
    scheduling_policy: str = "LIFO",
    inter_dim_scheduling: str = "ascending",
    intra_dim_scheduling: str = "fifo",
    collective_optimization: str = "local_bw_aware",
    active_chunks_per_dim: int = 1,
) -> tuple[str, str]:
    """Writes a libra_jax design as an ASTRA-sim 2.x network YAML and system JSON.

    The files are ``out_dir/network.yml`` (analytical backend) and
    ``out_dir/system.json``; existing files of those names are overwritten, ``out_dir``
    is created if missing. Every collective uses the same algorithm on a dimension,
    since the link bandwidth written for it depends on the algorithm.

    Args:
      network: the network (blocks and NPUs per dimension; cost tiers are not written).
      bandwidth_gbps: [D] per-NPU bandwidth of each dimension, GB/s with 1 GB = 1e9
        bytes (libra_jax's convention, e.g. ``result.bw_gbps``); each finite and > 0,
        as ASTRA-sim requires.
      out_dir: directory for the two files.
      latency_ns: link latency in ns, one number for every dimension or [D]; each
        finite and >= 0. ``None`` writes 0 on every dimension (LIBRA's model has no
        latency; a Switch step is two hops in the simulator).
      chunks: ``preferred-dataset-splits``, the number of chunks each collective is
        split into (int >= 1). LIBRA's model assumes chunks pipeline across dimensions;
        the shared microbenchmarks come close to it from 4 chunks on.
      endpoint_delay_ns: ``endpoint-delay``, fixed cost per message at the receiver,
        in 1 ns cycles (int >= 0). The default 1 is what the shared microbenchmark runs
        without latency used.
      local_mem_bw_gbps: ``local-mem-bw``, GB/s with 1 GB = 1e9 bytes (not converted);
        reductions cost 3 x bytes / this. The default 1e6 makes them practically free,
        as in LIBRA's model. Finite and > 0.
      algorithm: one of `ALGORITHMS`, or [D] of them, written to the four
        ``*-implementation`` lists (ASTRA-sim's spelling, `ASTRA_ALGORITHMS`);
        ``double_binary_tree`` exists in ASTRA-sim for all-reduce only, so the
        reduce-scatter, all-gather and all-to-all lists get ``ring`` on such a dimension.
        Link bandwidth = per-NPU bandwidth / the messages one NPU sends at once: 1 for ring
        and halving_doubling, n - 1 for direct, 2 for double_binary_tree (1 when n = 2);
        halving_doubling and double_binary_tree need n a power of two.
      gb_is_gib: write link bandwidth as ``bw * 1e9 / 2^30`` so that ASTRA-sim, which
        reads GB as 2^30 bytes, moves bw x 1e9 bytes/s. ``False`` writes bw unchanged
        (for a simulator build that reads GB as 1e9 bytes).
      scheduling_policy: ``scheduling-policy``, ``"LIFO"`` (a newer collective's chunks
        go first on a queue) or ``"FIFO"``.
      inter_dim_scheduling, intra_dim_scheduling: the runtime's orders (`docs/runtime.md`),
        written as ``inter-dimension-scheduling`` (`INTER_DIM_SCHEDULING`) and
        ``intra-dimension-scheduling`` (`INTRA_DIM_SCHEDULING`) unless both are the
        defaults (ascending, fifo: the keys are then left out, as stock ASTRA-sim, which
        does not parse them, runs).
      collective_optimization: ``collective-optimization``: ``local_bw_aware`` or
        ``baseline`` (`COLLECTIVE_OPTIMIZATION`).
      active_chunks_per_dim: ``active-chunks-per-dimension`` (int >= 1).

    Returns:
      ``(yaml_path, json_path)``.

    Raises:
      LibraInputError: bandwidth/latency of the wrong length, not finite, bandwidth
        <= 0 or latency < 0, unknown algorithm, bad chunks / endpoint delay / memory
        bandwidth, or an output file that cannot be written.
    """
    where = "export_design"
    if not isinstance(network, Network):
        raise LibraInputError(
            f"{where}: network must be a libra_jax Network, got "
            f"{type(network).__name__}."
        )
    num_dims = network.num_dims
    bw = _real_vector(bandwidth_gbps, num_dims, where, "bandwidth_gbps", positive=True)
    if latency_ns is None:
        lat = np.zeros(num_dims)
    elif isinstance(latency_ns, numbers.Real) and not isinstance(latency_ns, bool):
        lat = np.full(num_dims, _real(latency_ns, where, "latency_ns", positive=False))
    else:
        lat = _real_vector(latency_ns, num_dims, where, "latency_ns", positive=False)
    algs = _per_dim_algorithms(algorithm, num_dims, where)
    _check_power_of_two(algs, network.npus, where)
    for name, value, table in (
        ("inter_dim_scheduling", inter_dim_scheduling, INTER_DIM_SCHEDULING),
        ("intra_dim_scheduling", intra_dim_scheduling, INTRA_DIM_SCHEDULING),
        ("collective_optimization", collective_optimization, COLLECTIVE_OPTIMIZATION),
    ):
        if not isinstance(value, str) or value not in table:
            raise LibraInputError(
                f"{where}: {name} = {show(value)}: choose one of {', '.join(table)}.")
    for name, value, lo in (
        ("chunks", chunks, 1),
        ("endpoint_delay_ns", endpoint_delay_ns, 0),
        ("active_chunks_per_dim", active_chunks_per_dim, 1),
    ):
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Integral)
            or value < lo
        ):
            raise LibraInputError(
                f"{where}: {name} is {show(value)}; expected an integer >= {lo}."
            )
    mem_bw = _real(local_mem_bw_gbps, where, "local_mem_bw_gbps", positive=True)
    if not isinstance(gb_is_gib, bool):
        raise LibraInputError(
            f"{where}: gb_is_gib must be True or False, got {show(gb_is_gib)}."
        )
    if scheduling_policy not in ("LIFO", "FIFO"):
        raise LibraInputError(
            f"{where}: scheduling_policy = {show(scheduling_policy)}: LIFO or FIFO.")

    scale = GIB_PER_GB if gb_is_gib else 1.0
    link = np.array(
        [bw[d] / links_sharing(algs[d], n) * scale for d, n in enumerate(network.npus)]
    )

    unit = (
        "GB/s per link and direction; ASTRA-sim reads 1 GB = 2^30 bytes, so each "
        "value is libra_jax's 1e9-byte GB/s x 1e9 / 2^30"
        if gb_is_gib
        else "GB/s per link and direction, written unchanged from libra_jax (1 GB = "
        "1e9 bytes); a simulator that reads 1 GB = 2^30 bytes runs 1.0737x faster"
    )
    rule = {
        "ring": "link = per-NPU bandwidth (ring sends over one link at a time)",
        "direct": "link = per-NPU bandwidth / (n - 1) (direct sends to n - 1 peers "
        "at once)",
        "halving_doubling": "link = per-NPU bandwidth (one partner per step)",
        "double_binary_tree": "link = per-NPU bandwidth / 2 (an inner node sends to its "
        "two children at once; n = 2: / 1); all-reduce only, the other collectives ring",
    }
    lines = [
        "# ASTRA-sim 2.x analytical network input, written by libra_jax.",
        f"# Network: {network.notation} ({network.num_npus} NPUs), dimension 0 first.",
        f"# bandwidth: {unit}.",
        "# latency: ns per link (a Switch step is two hops).",
        "# Per-NPU bandwidth (libra_jax, GB/s, 1 GB = 1e9 bytes) and algorithm per "
        "dimension:",
    ]
    for d in range(num_dims):
        caveat = ""
        if ((algs[d] == "direct" and network.blocks[d] != "FullyConnected")
                or (algs[d] in ("halving_doubling", "double_binary_tree")
                    and network.blocks[d] == "Ring")):
            # Concurrent messages share this block's links on the congestion-aware
            # backend, so the rule holds only where they do not.
            caveat = "; exact on the congestion-unaware backend only"
        lines.append(
            f"#   dim {d} {network.blocks[d]}({network.npus[d]}): "
            f"{_yaml_float(bw[d])} GB/s per NPU, {algs[d]}: {rule[algs[d]]}{caveat}"
        )
    lines += [
        "",
        f"topology: {_yaml_list(network.blocks)}",
        f"npus_count: {_yaml_list(network.npus)}",
        f"bandwidth: {_yaml_list(_yaml_float(x) for x in link)}  # GB/s",
        f"latency: {_yaml_list(_yaml_float(x) for x in lat)}  # ns",
        "",
    ]

    names = [ASTRA_ALGORITHMS[a] for a in algs]
    # ASTRA-sim's double binary tree is an all-reduce only (DoubleBinaryTreeAllReduce).
    not_ar = ["ring" if a == "double_binary_tree" else ASTRA_ALGORITHMS[a] for a in algs]
    system = {"scheduling-policy": scheduling_policy}
    if (inter_dim_scheduling, intra_dim_scheduling) != ("ascending", "fifo"):
        system["inter-dimension-scheduling"] = INTER_DIM_SCHEDULING[inter_dim_scheduling]
        system["intra-dimension-scheduling"] = INTRA_DIM_SCHEDULING[intra_dim_scheduling]
    system.update({
        "endpoint-delay": int(endpoint_delay_ns),
        "active-chunks-per-dimension": int(active_chunks_per_dim),
        "preferred-dataset-splits": int(chunks),
        **{key: list(names if key == _COLLECTIVE_KEYS[0] else not_ar)
           for key in _COLLECTIVE_KEYS},
        # localBWAware: reduce-scatter up the dimensions, all-reduce on the last,
        # all-gather back down (the order in which LIBRA counts an all-reduce's traffic).
        "collective-optimization": COLLECTIVE_OPTIMIZATION[collective_optimization],
        "local-mem-bw": int(mem_bw) if float(mem_bw).is_integer() else mem_bw,
        "boost-mode": 0,
    })

    out_dir = as_path(out_dir, "out_dir")
    yaml_path = os.path.join(out_dir, _NETWORK_FILE)
    json_path = os.path.join(out_dir, _SYSTEM_FILE)
    try:
        os.makedirs(out_dir, exist_ok=True)
        with open(yaml_path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        with open(json_path, "w", encoding="utf-8") as f:
            f.write(_json_text(system))
    except OSError as e:
        raise LibraInputError(
            f"{where}: cannot write the ASTRA-sim inputs to {show(out_dir)} "
            f"({e.strerror or e})."
        ) from e
    return yaml_path, json_path


_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*")


def _yaml_number(x: Any, *, integer: bool) -> Any:
    """A YAML value as ASTRA-sim's yaml-cpp reads it: numbers, or numeric text.

    PyYAML reads ``1e-05`` (no '.') as a string where yaml-cpp's ``as<double>`` reads a
    number; such text is converted. Bools and other text are returned unchanged for the
    caller's checks to reject.
    """
    if isinstance(x, str):
        if integer:
            return int(x) if len(x) <= 40 and _INT_TEXT.fullmatch(x) else x
        try:
            return float(x)
        except ValueError:
            return x
    return x


def import_network_yaml(
    path: str | os.PathLike,
    *,
    algorithm: str | Sequence[str] = "ring",
    gb_is_gib: bool = True,
    cost_tiers: Sequence[str] | None = None,
) -> tuple[Network, np.ndarray | None, np.ndarray | None]:
    """Reads an ASTRA-sim 2.x analytical network YAML into a libra_jax network.

    The file has ``topology`` (block names spelled as ASTRA-sim does, case-sensitive:
    ``Ring``, ``FullyConnected``, ``Switch``) and ``npus_count``, and optionally
    ``bandwidth`` (GB/s per link) and ``latency`` (ns), each a list with one entry per
    dimension; other keys are rejected. Link bandwidth is turned back into libra_jax's
    per-NPU bandwidth with the rules of :func:`export_design`, so an exported file
    imports to the bandwidth it was written from.

    Args:
      path: the YAML file.
      algorithm: ``"ring"`` or ``"direct"``, or [D] of them: the algorithm the
        bandwidth was meant for (per-NPU = link for ring, link x (n - 1) for direct).
      gb_is_gib: the file's GB/s count 2^30 bytes (ASTRA-sim's convention); the
        per-NPU bandwidth returned is in 1e9-byte GB/s (link x 2^30 / 1e9).
      cost_tiers: [D] cost-model row per dimension, or ``None`` (ASTRA-sim files do not
        price the network; the result then has ``cost_tiers=None``).

    Returns:
      ``(network, bandwidth_gbps, latency_ns)``: the network (``source`` is the path),
      [D] float64 per-NPU bandwidth in GB/s or ``None`` when the file has no
      ``bandwidth``, and [D] float64 link latency in ns or ``None`` when it has no
      ``latency``.

    Raises:
      LibraInputError: unreadable file or invalid YAML, missing ``topology`` or
        ``npus_count``, unknown key, a field that is not a list, an unknown block, lists
        of different lengths, NPU count not an integer >= 2, bandwidth not finite and
        > 0, latency not finite and >= 0, or a bad ``algorithm`` / ``cost_tiers``.
    """
    path = as_path(path, "path")
    data = read_yaml_mapping(path, "ASTRA-sim network", allowed=_YAML_KEYS,
                             max_nodes=SMALL_FILE_NODES)
    for key in ("topology", "npus_count"):
        if key not in data:
            raise LibraInputError(
                f"{path}: missing key {show(key)} in the ASTRA-sim network file (needs "
                "topology and npus_count; bandwidth and latency are optional here)."
            )
    for key in _YAML_KEYS:
        if key in data and not isinstance(data[key], list):
            raise LibraInputError(
                f"{path}: {key} must be a list with one entry per dimension, e.g. "
                f"'{key}: [ ... ]'; got {show(data[key])}."
            )
    topo = data["topology"]
    if not topo:
        raise LibraInputError(
            f"{path}: topology is empty; give at least one dimension."
        )
    num_dims = len(topo)
    for key in _YAML_KEYS[1:]:
        if key in data and len(data[key]) != num_dims:
            raise LibraInputError(
                f"{path}: topology {show(topo)} has {num_dims} dimensions but {key} "
                f"{show(data[key])} has {len(data[key])} entries; give one per dimension."
            )
    for d, b in enumerate(topo):
        if b not in BLOCKS:
            raise LibraInputError(
                f"{path}: topology[{d}] is {show(b)}; ASTRA-sim's analytical backend "
                f"accepts {', '.join(BLOCKS)} (spelled exactly so)."
            )
    npus = []
    for d, n in enumerate(data["npus_count"]):
        n = _yaml_number(n, integer=True)
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
            raise LibraInputError(
                f"{path}: npus_count[{d}] is {show(data['npus_count'][d])}; expected an "
                "integer >= 2."
            )
        npus.append(int(n))
    network = network_from_lists(topo, npus, cost_tiers, source=path)
    algs = _per_dim_algorithms(algorithm, num_dims, path)
    if not isinstance(gb_is_gib, bool):
        raise LibraInputError(
            f"{path}: gb_is_gib must be True or False, got {show(gb_is_gib)}."
        )

    def floats(key, positive):
        return np.array([_real(_yaml_number(x, integer=False), path, f"{key}[{d}]",
                               positive=positive) for d, x in enumerate(data[key])])

    bw = lat = None
    if "bandwidth" in data:
        link = floats("bandwidth", positive=True)
        scale = GIB_PER_GB if gb_is_gib else 1.0
        bw = np.array([link[d] / scale * links_sharing(algs[d], n)
                       for d, n in enumerate(network.npus)])
    if "latency" in data:
        lat = floats("latency", positive=False)
    return network, bw, lat
