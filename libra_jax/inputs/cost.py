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

The technology catalogue (issue 19) extends a tier row with physical figures, all optional,
so LIBRA's own files stay valid:

* ``Energy``: {Link, Switch, Nic} pJ per bit, counted like the prices (the Switch and Nic
  parts on Switch dimensions only). Network power is linear too: ``power = power_rates @
  bw`` W, ``power_rate_d = N * 0.008 * (Energy.Link + [Switch: Energy.Switch + Energy.Nic])``
  W per GB/s (1 GB/s = 8e9 bit/s, 1 pJ = 1e-12 J) (:func:`power_rates_w_per_gbps`);
* ``ReachM``: longest span the technology covers, m (:func:`check_reach`);
* ``LatencyNs``: latency per hop, ns (the default of ``network.latency_ns`` for
  ``model=pipelined``; :func:`tier_latency_ns`);
* ``MaxGbps``: most per-NPU bandwidth one dimension of this technology carries (lanes x
  lane rate), GB/s (:func:`tier_max_gbps`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_instance, as_list, as_path, as_real
from libra_jax.inputs.reading import SMALL_FILE_NODES, read_yaml_mapping
from libra_jax.inputs.topology import Network
from libra_jax.types import LibraInputError, clip, show

COMPONENTS = ("Link", "Switch", "Nic")
#: Physical keys a tier row may add (the technology catalogue).
PHYSICAL_KEYS = ("Energy", "ReachM", "LatencyNs", "MaxGbps")
#: W per (GB/s x pJ/bit): 1 GB/s = 8e9 bit/s, 1 pJ = 1e-12 J.
W_PER_GBPS_PJ = 8e9 * 1e-12
#: Largest energy accepted, pJ per bit (1 nJ/bit is far beyond any link).
MAX_PJ_PER_BIT = 1e3
#: Largest reach accepted, m (40,000 km: the circumference of the earth).
MAX_REACH_M = 4e7


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
    #: tier -> {component -> pJ per bit}; tiers without ``Energy`` are absent.
    energy: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    #: tier -> longest span, m.
    reach_m: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: tier -> latency per hop, ns.
    latency_ns: Mapping[str, float] = dataclasses.field(default_factory=dict)
    #: tier -> most per-NPU GB/s of one dimension.
    max_gbps: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @property
    def has_energy(self) -> bool:
        return bool(self.energy)

    def __post_init__(self):
        where = self.source
        if not isinstance(self.tiers, Mapping) or not self.tiers:
            raise LibraInputError(
                f"{where}: the cost model must map tier names to component prices, got "
                f"{show(self.tiers)}."
            )
        clean: dict[str, dict[str, float]] = {}
        energy = {k: dict(v) for k, v in self.energy.items()}
        reach, latency, max_gbps = dict(self.reach_m), dict(self.latency_ns), dict(self.max_gbps)
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
                at = f"{where}: {clip(tier)}.{clip(comp)}"
                if comp == "Energy":
                    energy[tier] = _energy_row(price, f"{where}: {clip(tier)}.Energy")
                elif comp == "ReachM":
                    reach[tier] = as_real(price, at, 0.0, MAX_REACH_M, lo_open=True,
                                          unit=" (m)")
                elif comp == "LatencyNs":
                    latency[tier] = as_real(price, at, 0.0, LIMITS.max_ns,
                                            unit=" (ns per hop)")
                elif comp == "MaxGbps":
                    max_gbps[tier] = as_real(price, at, 0.0, LIMITS.max_gbps, lo_open=True,
                                             unit=" (GB/s per NPU)")
                elif comp not in COMPONENTS:
                    raise LibraInputError(
                        f"{at}: unknown component {show(comp)}; expected "
                        f"{', '.join(COMPONENTS + PHYSICAL_KEYS)}."
                    )
                else:
                    row[comp] = as_real(price, at, 0.0, LIMITS.max_usd_per_gbps,
                                        unit=" ($ per GB/s)")
            clean[tier] = row
        for name, table in (("Energy", energy), ("ReachM", reach), ("LatencyNs", latency),
                            ("MaxGbps", max_gbps)):
            for tier in table:
                if tier not in clean:
                    raise LibraInputError(
                        f"{where}: {name} given for tier {show(tier)}, which has no row.")
        object.__setattr__(self, "tiers", clean)
        object.__setattr__(self, "energy", energy)
        object.__setattr__(self, "reach_m", reach)
        object.__setattr__(self, "latency_ns", latency)
        object.__setattr__(self, "max_gbps", max_gbps)


def _energy_row(value, where: str) -> dict[str, float]:
    if not isinstance(value, Mapping) or not value:
        raise LibraInputError(
            f"{where} = {show(value)}: expected a mapping of components "
            f"({', '.join(COMPONENTS)}) to pJ per bit, e.g. {{Link: 5.0}}.")
    out = {}
    for comp, pj in value.items():
        if comp not in COMPONENTS:
            raise LibraInputError(
                f"{where}.{clip(comp)}: unknown component {show(comp)}; expected "
                f"{', '.join(COMPONENTS)}.")
        out[comp] = as_real(pj, f"{where}.{comp}", 0.0, MAX_PJ_PER_BIT, unit=" (pJ per bit)")
    return out


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



def _network_tiers(network: Network, cost_model: CostModel, what: str) -> list[str]:
    """The network's tier per dimension, each one the cost model defines."""
    as_instance(network, Network, "network")
    as_instance(cost_model, CostModel, "cost_model")
    if network.cost_tiers is None:
        raise LibraInputError(
            f"{network.source}: the network {network.notation} has no cost tiers "
            f"(CostDimension / cost_tiers), so the {what} of {cost_model.source} cannot be "
            "applied to it.")
    for d, tier in enumerate(network.cost_tiers):
        if tier not in cost_model.tiers:
            raise LibraInputError(
                f"{network.source}: dimension {d} uses cost tier {show(tier)}, which "
                f"{cost_model.source} does not define (it has {', '.join(cost_model.tiers)}).")
    return list(network.cost_tiers)


def power_rates_w_per_gbps(network: Network, cost_model: CostModel) -> np.ndarray | None:
    """Watts of network per GB/s of per-NPU bandwidth on each dimension, or None when the
    cost model has no ``Energy`` at all (LIBRA's files).

    ``power_rate_d = N * 0.008 * (Energy.Link + [Switch: Energy.Switch + Energy.Nic])``
    (module docstring): every NPU sends bw_d GB/s = 8 bw_d Gbit/s over dimension d, each bit
    costing the link's energy, and on a Switch dimension the switch's and NIC's too.
    ``Energy.Link`` is needed on every tier the network uses, ``Energy.Switch`` on a Switch
    dimension's; ``Energy.Nic`` counts 0 when absent.

    Raises:
      LibraInputError: a tier the network uses without ``Energy`` (when another has it), or
        a needed component missing, naming the file, tier and dimension.
    """
    if not cost_model.has_energy:
        return None
    tiers = _network_tiers(network, cost_model, "energy")
    total = math.prod(network.npus)
    rates = np.zeros(network.num_dims, dtype=np.float64)
    for d, (block, tier) in enumerate(zip(network.blocks, tiers)):
        e = cost_model.energy.get(tier)
        if e is None:
            raise LibraInputError(
                f"{cost_model.source}: tier {show(tier)} has no Energy, needed by dimension "
                f"{d} of {network.source} (other tiers have it, so network power is "
                "computed): add Energy: {Link: <pJ per bit>, ...} to it.")
        needed = ("Link", "Switch") if block == "Switch" else ("Link",)
        for comp in needed:
            if comp not in e:
                raise LibraInputError(
                    f"{cost_model.source}: tier {show(tier)} has no Energy.{comp}, needed by "
                    f"dimension {d} ({block}) of {network.source}.")
        pj = e["Link"] + (e["Switch"] + e.get("Nic", 0.0) if block == "Switch" else 0.0)
        rates[d] = total * W_PER_GBPS_PJ * pj
    return rates


def tier_max_gbps(network: Network, cost_model: CostModel) -> np.ndarray:
    """[D] the ``MaxGbps`` of each dimension's tier, +inf where the tier gives none."""
    tiers = _network_tiers(network, cost_model, "bandwidth limits")
    return np.array([cost_model.max_gbps.get(t, math.inf) for t in tiers], np.float64)


def tier_latency_ns(network: Network, cost_model: CostModel) -> np.ndarray:
    """[D] the ``LatencyNs`` of each dimension's tier, NaN where the tier gives none."""
    tiers = _network_tiers(network, cost_model, "latencies")
    return np.array([cost_model.latency_ns.get(t, math.nan) for t in tiers], np.float64)


def check_reach(network: Network, cost_model: CostModel, span_m, field: str = "network.span_m"
                ) -> np.ndarray:
    """Checks that every dimension's links reach across its span.

    Args:
      network: the network (with cost tiers). cost_model: the catalogue.
      span_m: [D] metres each dimension's links cover (its physical extent).
      field: the config key, for messages.

    Returns:
      [D] float64 spans.

    Raises:
      LibraInputError: a span that is not a finite number > 0, the wrong length, or a
        dimension whose span exceeds its tier's ``ReachM`` (naming dimension, span, tier,
        reach).
    """
    tiers = _network_tiers(network, cost_model, "reach")
    spans = as_list(span_m, field, what="a list of spans in metres, one per dimension")
    if len(spans) != network.num_dims:
        raise LibraInputError(
            f"{field} = {show(span_m)}: {len(spans)} spans for {network.num_dims} dimensions "
            f"of {network.notation}; give one per dimension (m).")
    out = np.array([as_real(v, f"{field}[{d}]", 0.0, MAX_REACH_M, lo_open=True, unit=" (m)")
                    for d, v in enumerate(spans)], np.float64)
    for d, (span, tier) in enumerate(zip(out, tiers)):
        reach = cost_model.reach_m.get(tier)
        if reach is not None and span > reach:
            raise LibraInputError(
                f"{field}[{d}] = {span:g} m: dimension {d} ({network.blocks[d]}, tier "
                f"{show(tier)}) spans {span:g} m but {cost_model.source} gives tier "
                f"{show(tier)} a reach of {reach:g} m (ReachM); pick a technology that "
                "reaches, or place the NPUs closer.")
    return out
