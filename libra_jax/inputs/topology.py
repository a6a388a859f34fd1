"""Multi-dimensional network topologies (LIBRA, Won et al. ISPASS 2024, Sec. III).

A network is a stack of D dimensions; dimension d is built from one kind of building
block (Ring, FullyConnected or Switch) joining ``npus[d]`` NPUs, and the whole network
has ``prod(npus)`` NPUs. Each dimension may name the cost-model row (``cost_tiers[d]``)
that prices it; see ``libra_jax.inputs.cost``.

Three ways to build a :class:`Network`, all validated on the host and all raising
:class:`~libra_jax.types.LibraInputError` for bad input:

* :func:`load_network_file` -- a LIBRA network YAML (``Topology``, ``NpusCount``,
  ``CostDimension``);
* :func:`parse_notation` -- a compact string such as ``"RI(16)_FC(8)_SW(32)"``;
* :func:`network_from_lists` -- Python lists, e.g. from a Hydra config.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_list, as_path, check_npus
from libra_jax.inputs.reading import SMALL_FILE_NODES, read_yaml_mapping
from libra_jax.types import BLOCK_ABBREV, BLOCKS, Block, LibraInputError, show

# Accepted spellings of each block, compared after lower-casing and dropping "_", "-"
# and spaces.
_BLOCK_ALIASES = {
    "ring": "Ring",
    "ri": "Ring",
    "fullyconnected": "FullyConnected",
    "fc": "FullyConnected",
    "switch": "Switch",
    "sw": "Switch",
}
_BLOCK_CODE = {
    "Ring": Block.RING,
    "FullyConnected": Block.FULLYCONNECTED,
    "Switch": Block.SWITCH,
}
_ACCEPTED_BLOCKS = "Ring / RI, FullyConnected / FC, Switch / SW (case-insensitive)"

_NETWORK_KEYS = ("Topology", "NpusCount", "CostDimension")


@dataclasses.dataclass(frozen=True)
class Network:
    """A D-dimensional network of building blocks.

    Attributes:
      blocks: [D] canonical block name of each dimension, one of ``types.BLOCKS``
        (``"Ring"``, ``"FullyConnected"``, ``"Switch"``); dimension 0 is the innermost.
      npus: [D] NPUs per dimension, each an int >= 2; the network has
        ``prod(npus)`` NPUs.
      cost_tiers: [D] cost-model row that prices each dimension, or ``None`` when the
        input gave none (then the network cannot be priced).
      source: where the network came from (file path or config field), for messages.

    Raises:
      LibraInputError: from ``__post_init__`` when the fields are not in canonical form
        (use :func:`network_from_lists` to build from loose input).
    """

    blocks: tuple[str, ...]
    npus: tuple[int, ...]
    cost_tiers: tuple[str, ...] | None
    source: str

    def __post_init__(self):
        where = self.source
        if not isinstance(self.blocks, tuple) or not isinstance(self.npus, tuple):
            raise LibraInputError(
                f"{where}: Network.blocks and Network.npus must be tuples, got "
                f"{type(self.blocks).__name__} and {type(self.npus).__name__}."
            )
        if len(self.blocks) == 0:
            raise LibraInputError(
                f"{where}: the network has no dimensions (empty topology)."
            )
        if len(self.blocks) > LIMITS.max_dims:
            raise LibraInputError(
                f"{where}: {len(self.blocks)} dimensions; at most {LIMITS.max_dims} are "
                "supported.")
        for d, b in enumerate(self.blocks):
            if b not in BLOCKS:
                raise LibraInputError(
                    f"{where}: block {d} is {show(b)}; expected one of {', '.join(BLOCKS)}."
                )
        if len(self.npus) != len(self.blocks):
            raise LibraInputError(
                f"{where}: {len(self.blocks)} blocks {list(self.blocks)} but "
                f"{len(self.npus)} "
                f"NPU counts {list(self.npus)}; give one NPU count per dimension."
            )
        for d, n in enumerate(self.npus):
            if isinstance(n, bool) or not isinstance(n, int) or n < 2:
                raise LibraInputError(
                    f"{where}: NPU count of dimension {d} is {show(n)}; every dimension "
                    "needs an "
                    "integer number of NPUs >= 2."
                )
        check_npus(self.npus, where)
        if self.cost_tiers is not None:
            if not isinstance(self.cost_tiers, tuple) or len(self.cost_tiers) != len(
                self.blocks
            ):
                raise LibraInputError(
                    f"{where}: {len(self.blocks)} dimensions but cost tiers "
                    f"{_show(self.cost_tiers)}; give one cost tier per dimension."
                )
            for d, t in enumerate(self.cost_tiers):
                if not isinstance(t, str) or not t:
                    raise LibraInputError(
                        f"{where}: cost tier of dimension {d} is {show(t)}; expected a "
                        "non-empty "
                        "cost-model row name such as 'InterNode'."
                    )

    @property
    def num_dims(self) -> int:
        """D, the number of dimensions."""
        return len(self.blocks)

    @property
    def num_npus(self) -> int:
        """Total NPUs, ``prod(npus)``."""
        return math.prod(self.npus)

    @property
    def notation(self) -> str:
        """Compact name such as ``"RI(16)_FC(8)_SW(32)"`` (input of parse_notation)."""
        return "_".join(
            f"{BLOCK_ABBREV[b]}({n})"
            for b, n in zip(self.blocks, self.npus, strict=False)
        )

    @property
    def block_codes(self) -> np.ndarray:
        """[D] int ``types.Block`` code of each dimension."""
        return np.array([int(_BLOCK_CODE[b]) for b in self.blocks], dtype=np.int32)


def _show(value: Any) -> str:
    """Short repr for messages (tuples shown as lists)."""
    return show(list(value) if isinstance(value, tuple) else value)


def _canonical_block(name: Any, where: str, d: int) -> str:
    if isinstance(name, str):
        key = re.sub(r"[\s_\-]", "", name).lower()
        if key in _BLOCK_ALIASES:
            return _BLOCK_ALIASES[key]
    raise LibraInputError(
        f"{where}: unknown building block {show(name)} for dimension {d}; accepted names "
        "are "
        f"{_ACCEPTED_BLOCKS}."
    )


def _as_npus(value: Any, where: str, d: int) -> int:
    """An NPU count as a Python int; integral floats (e.g. ``8.0``) are accepted."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LibraInputError(
            f"{where}: NPU count of dimension {d} is {show(value)}; expected an integer >= "
            "2."
        )
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif math.isfinite(float(value)) and float(value).is_integer():
        n = int(value)
    else:
        raise LibraInputError(
            f"{where}: NPU count of dimension {d} is {show(value)}; expected an integer >= "
            "2."
        )
    if n < 2:
        raise LibraInputError(
            f"{where}: NPU count of dimension {d} is {n}; every dimension needs at "
            "least 2 NPUs "
            "(a dimension of 1 NPU has no links -- drop it instead)."
        )
    return n


def _as_list(value: Any, where: str, field: str) -> list:
    return as_list(value, f"{where}: {field}", what="a list")


def network_from_lists(
    topology: Sequence[str],
    npus: Sequence[int],
    cost_tiers: Sequence[str] | None = None,
    source: str = "network",
) -> Network:
    """Builds a validated :class:`Network` from per-dimension lists.

    Args:
      topology: [D] block names; case-insensitive ``Ring``, ``FullyConnected``,
        ``Switch``
        or the abbreviations ``RI``, ``FC``, ``SW`` ("_", "-" and spaces are ignored, so
        ``fully_connected`` works too).
      npus: [D] NPUs per dimension, integers >= 2.
      cost_tiers: [D] cost-model row per dimension, or ``None``.
      source: name of the file or config field, used in error messages.

    Returns:
      The network with canonical block names.

    Raises:
      LibraInputError: unknown block, NPU count not an integer >= 2, empty topology, or
        ``topology`` / ``npus`` / ``cost_tiers`` of different lengths.
    """
    topo = _as_list(topology, source, "topology")
    counts = _as_list(npus, source, "npus")
    if not topo:
        raise LibraInputError(
            f"{source}: topology is empty; give at least one dimension."
        )
    if len(topo) > LIMITS.max_dims:
        raise LibraInputError(
            f"{source}: topology has {len(topo):,} dimensions; at most {LIMITS.max_dims} "
            "are supported.")
    if len(topo) != len(counts):
        raise LibraInputError(
            f"{source}: topology {_show(topo)} has {len(topo)} dimensions but npus "
            f"{_show(counts)} has {len(counts)} entries; give one NPU count per "
            "dimension."
        )
    blocks = tuple(_canonical_block(b, source, d) for d, b in enumerate(topo))
    counts_int = tuple(_as_npus(n, source, d) for d, n in enumerate(counts))
    tiers = None
    if cost_tiers is not None:
        tier_list = _as_list(cost_tiers, source, "cost_tiers")
        if len(tier_list) != len(topo):
            raise LibraInputError(
                f"{source}: topology {_show(topo)} has {len(topo)} dimensions but cost "
                "tiers "
                f"{_show(tier_list)} has {len(tier_list)} entries; give one cost tier "
                "per "
                "dimension."
            )
        tiers = tuple(tier_list)
    return Network(blocks=blocks, npus=counts_int, cost_tiers=tiers, source=source)


_NOTATION_PART = re.compile(r"\s*([A-Za-z][A-Za-z_\-]*?)\s*\(\s*([+-]?[0-9]+)\s*\)\s*")


def parse_notation(
    notation: str,
    cost_tiers: Sequence[str] | None = None,
    source: str = "network.notation",
) -> Network:
    """Parses a compact topology name such as ``"RI(16)_FC(8)_SW(32)"``.

    Parts are ``BLOCK(N)`` joined by ``_``; BLOCK is RI/FC/SW or
    Ring/FullyConnected/Switch, case-insensitive.

    Args:
      notation: the topology string.
      cost_tiers: [D] cost-model row per dimension, or ``None``.
      source: name of the config field, used in error messages.

    Returns:
      The network.

    Raises:
      LibraInputError: malformed string, unknown block, NPU count < 2, or cost tiers of
        the wrong length.
    """
    if not isinstance(notation, str) or not notation.strip():
        raise LibraInputError(
            f"{source}: expected a topology string such as 'RI(16)_FC(8)_SW(32)', "
            f"got {show(notation)}."
        )
    blocks, counts = [], []
    pos = 0
    text = notation
    while True:
        m = _NOTATION_PART.match(text, pos)
        if m is None:
            raise LibraInputError(
                f"{source} = {show(notation)}: cannot parse at character {pos} "
                f"({show(text[pos:])}); "
                "expected parts like 'RI(16)' joined by '_', e.g. "
                "'RI(16)_FC(8)_SW(32)'."
            )
        blocks.append(m.group(1))
        digits = m.group(2).lstrip("+-").lstrip("0")
        if len(digits) > 12:  # int() of a 5,000-digit count would fail; the limit is far below
            raise LibraInputError(
                f"{source} = {show(notation)}: NPU count {show(m.group(2), 40)} of part "
                f"{len(blocks) - 1} is far beyond the limit of {LIMITS.max_npus_per_dim:,} NPUs "
                "per dimension.")
        counts.append(int(m.group(2)))
        pos = m.end()
        if pos == len(text):
            break
        if text[pos] != "_":
            raise LibraInputError(
                f"{source} = {show(notation)}: expected '_' between parts at character "
                f"{pos}, "
                f"got {show(text[pos])}."
            )
        pos += 1
    # Messages show the whole string; the network's source stays the field name.
    net = network_from_lists(
        blocks, counts, cost_tiers, source=f"{source} = {show(notation)}"
    )
    return dataclasses.replace(net, source=source)


def load_network_file(path: str | os.PathLike) -> Network:
    """Loads a LIBRA network YAML.

    Example file::

        Topology: [ Ring, FullyConnected, Switch ]
        NpusCount: [ 16, 8, 32 ]
        CostDimension: [ InterPackage, InterNode, InterPod ]

    ``Topology`` and ``NpusCount`` are required; ``CostDimension`` is optional (the
    network then has ``cost_tiers=None`` and cannot be priced). Other keys are rejected.

    Args:
      path: the YAML file.

    Returns:
      The network, with ``source`` set to the path.

    Raises:
      LibraInputError: unreadable file, invalid YAML, missing or unknown keys, or any
        error of :func:`network_from_lists`.
    """
    path = as_path(path, "path")
    data = read_yaml_mapping(path, "network", allowed=_NETWORK_KEYS,
                             max_nodes=SMALL_FILE_NODES)
    for key in ("Topology", "NpusCount"):
        if key not in data:
            raise LibraInputError(
                f"{path}: missing key {show(key)} in the network file (needs Topology, "
                "NpusCount "
                "and optionally CostDimension)."
            )
    for key in _NETWORK_KEYS:
        if key in data and not isinstance(data[key], list):
            if key == "CostDimension" and data[key] is None:
                continue
            raise LibraInputError(f"{path}: {key} must be a list, got {show(data[key])}.")
    topo, counts = data["Topology"], data["NpusCount"]
    tiers = data.get("CostDimension")
    if len(counts) != len(topo):
        raise LibraInputError(
            f"{path}: Topology {show(topo)} has {len(topo)} dimensions but NpusCount "
            f"{show(counts)} has "
            f"{len(counts)} entries."
        )
    if tiers is not None and len(tiers) != len(topo):
        raise LibraInputError(
            f"{path}: Topology {show(topo)} has {len(topo)} dimensions but CostDimension "
            f"{show(tiers)} has "
            f"{len(tiers)} entries."
        )
    return network_from_lists(topo, counts, tiers, source=path)
