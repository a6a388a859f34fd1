"""Network cost model (LIBRA, Won et al. ISPASS 2024, Sec. IV-C).

A cost model prices components per GB/s of bandwidth, by tier (one row per kind of
dimension, e.g. ``InterNode``): ``Link``, ``Switch`` and ``Nic`` in $ per GB/s.

For dimension d with block t, size n = npus[d], N = prod(npus) NPUs and per-NPU
bandwidth bw_d (GB/s), the reference prices

    blocks_d = N / n                   (Ring, FullyConnected)
             = prod(npus[d+1:])        (Switch: one switch spans all dims up to d)
    links_d  = 2 n                     (Ring, bidirectional)
             = n (n - 1)               (FullyConnected)
             = prod(npus[:d+1])        (Switch)
    link_bw  = bw_d / 2 | bw_d / (n - 1) | bw_d       (Ring | FullyConnected | Switch)
    cost_d   = blocks_d * links_d * link_bw * (Link + [Switch + Nic if t is Switch])

so cost is linear in bw: ``cost = rates @ bw`` with ``rates`` from
:func:`cost_rates_usd_per_gbps` (a `Problem` carries them as ``cost_rate``;
`objective.network_cost_usd` evaluates the cost). For Ring and FullyConnected the rate is
``N * Link``; for Switch it is ``N * (Link + Switch + Nic)``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_instance, as_path, as_real
from libra_jax.inputs.reading import SMALL_FILE_NODES, read_yaml_mapping
from libra_jax.inputs.topology import Network
from libra_jax.types import LibraInputError, clip, show

COMPONENTS = ("Link", "Switch", "Nic")


@dataclasses.dataclass(frozen=True)
class CostModel:
    """Component prices per tier.

    Attributes:
      tiers: tier name -> {component -> $ per GB/s}; components are ``Link``,
        ``Switch``, ``Nic`` (each optional here; :func:`cost_rates_usd_per_gbps` says
        which are needed). Stored as plain dicts of Python floats.
      source: file path or config field the model came from, for messages.

    Raises:
      LibraInputError: from ``__post_init__`` for an empty model, unknown components, or
        prices that are not finite numbers >= 0.
    """

    tiers: Mapping[str, Mapping[str, float]]
    source: str

    def __post_init__(self):
        where = self.source
        if not isinstance(self.tiers, Mapping) or not self.tiers:
            raise LibraInputError(
                f"{where}: the cost model must map tier names to component prices, got "
                f"{show(self.tiers)}."
            )
        clean: dict[str, dict[str, float]] = {}
        for tier, prices in self.tiers.items():
            if not isinstance(tier, str):
                raise LibraInputError(f"{where}: tier name {show(tier)} is not a string.")
            if not isinstance(prices, Mapping):
                raise LibraInputError(
                    f"{where}: tier {show(tier)} must map components "
                    f"({', '.join(COMPONENTS)}) to "
                    f"$ per GB/s, got {show(prices)}."
                )
            row: dict[str, float] = {}
            for comp, price in prices.items():
                if comp not in COMPONENTS:
                    raise LibraInputError(
                        f"{where}: {clip(tier)}.{clip(comp)}: unknown component "
                        f"{show(comp)}; expected {', '.join(COMPONENTS)}."
                    )
                row[comp] = as_real(price, f"{where}: {clip(tier)}.{comp}", 0.0,
                                    LIMITS.max_usd_per_gbps, unit=" ($ per GB/s)")
            clean[tier] = row
        object.__setattr__(self, "tiers", clean)


def load_cost_model(path: str | os.PathLike) -> CostModel:
    """Loads a LIBRA cost-model YAML (tier -> {Link, Switch, Nic} in $ per GB/s).

    Args:
      path: the YAML file.

    Returns:
      The cost model, ``source`` set to the path.

    Raises:
      LibraInputError: unreadable or invalid file, or a bad tier (see
        :class:`CostModel`).
    """
    path = as_path(path, "path")
    data = read_yaml_mapping(path, "cost model", max_nodes=SMALL_FILE_NODES)
    return CostModel(tiers=data, source=path)


def cost_rates_usd_per_gbps(network: Network, cost_model: CostModel) -> np.ndarray:
    """Dollars of network per GB/s of per-NPU bandwidth on each dimension.

    Implements the reference's blocks x links x link-bandwidth x price formula (module
    docstring) literally. ``Link`` is required for every tier the network uses;
    ``Switch`` is required for a Switch dimension; ``Nic`` is optional and counts as 0 $
    when absent (the shipped models give it only for the top tier). The ``Switch`` and
    ``Nic`` prices of a tier used by a Ring or FullyConnected dimension are ignored, as
    in the reference.

    Args:
      network: the network; needs ``cost_tiers``.
      cost_model: the component prices.

    Returns:
      [D] float64 $ per GB/s; network cost = ``rates @ bw_gbps``.

    Raises:
      LibraInputError: network without cost tiers, a tier missing from the cost model,
        or a required price missing.
    """
    as_instance(network, Network, "network")
    as_instance(cost_model, CostModel, "cost_model")
    if network.cost_tiers is None:
        raise LibraInputError(
            f"{network.source}: the network {network.notation} has no cost tiers "
            "(CostDimension / cost_tiers), so it cannot be priced with the cost model "
            f"{cost_model.source}."
        )
    if (
        len(network.cost_tiers) != network.num_dims
    ):  # pragma: no cover  (Network checks it)
        raise LibraInputError(
            f"{network.source}: {network.num_dims} dimensions but cost tiers "
            f"{list(network.cost_tiers)}."
        )
    npus = network.npus
    total = math.prod(npus)
    rates = np.zeros(network.num_dims, dtype=np.float64)
    for d, (block, n, tier) in enumerate(
        zip(network.blocks, npus, network.cost_tiers, strict=False)
    ):
        if tier not in cost_model.tiers:
            raise LibraInputError(
                f"{network.source}: dimension {d} uses cost tier {show(tier)}, which the "
                "cost model "
                f"{cost_model.source} does not define (it has "
                f"{', '.join(cost_model.tiers)})."
            )
        prices = cost_model.tiers[tier]
        needed = ("Link", "Switch") if block == "Switch" else ("Link",)
        for comp in needed:
            if comp not in prices:
                raise LibraInputError(
                    f"{cost_model.source}: tier {show(tier)} has no {show(comp)} price, needed "
                    "by "
                    f"dimension {d} ({block}) of {network.source}."
                )
        if block == "Ring":
            blocks, links, link_bw = total / n, 2 * n, 1.0 / 2.0
            price = prices["Link"]
        elif block == "FullyConnected":
            blocks, links, link_bw = total / n, n * (n - 1), 1.0 / (n - 1)
            price = prices["Link"]
        else:  # Switch
            blocks, links, link_bw = (
                math.prod(npus[d + 1 :]),
                math.prod(npus[: d + 1]),
                1.0,
            )
            price = prices["Link"] + prices["Switch"] + prices.get("Nic", 0.0)
        rates[d] = blocks * links * link_bw * price
    return rates

