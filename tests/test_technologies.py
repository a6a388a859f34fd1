"""The technology catalogue (libra_jax/data/technologies.yaml) and the real-system presets
(conf/conf/h100_dgx, gb200_nvl72, tpu_v4): the catalogue loads and is complete, every figure
carries a source, power rates by hand, reach errors, bad entries, and each preset's reference
design at exactly its power cap."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.inputs import DATA_DIR, cost
from libra_jax.inputs.generators import Npu, Parallel, Transformer
from libra_jax.inputs.paths import resolve_path
from libra_jax.inputs.topology import network_from_lists
from libra_jax.model import memory
from libra_jax.types import LibraInputError

CATALOGUE = DATA_DIR / "technologies.yaml"
#: One tier per technology class the catalogue must offer.
CLASSES = ("D2D_UCIe", "ScaleUpSerDes", "CopperDAC", "LinearDriveOptics", "DspOptics800G",
           "CoPackagedOptics")
#: Tiers priced and powered for Switch dimensions (switch price and energy required).
SWITCHED = ("ScaleUpSerDes", "CopperDAC", "LinearDriveOptics", "DspOptics800G",
            "CoPackagedOptics")
PRESETS = ("h100_dgx", "gb200_nvl72", "tpu_v4")


@pytest.fixture(scope="module")
def cm() -> cost.CostModel:
    return cost.load_cost_model(CATALOGUE)


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


# ------------------------------------------------------------------------------------------
# The catalogue
# ------------------------------------------------------------------------------------------


def test_catalogue_is_found_by_its_short_name():
    assert pathlib.Path(resolve_path("technologies.yaml", "cost_model.file",
                                     base_dir=pathlib.Path(__file__).parent)) == CATALOGUE


def test_catalogue_has_every_class_and_figure(cm):
    assert set(CLASSES) <= set(cm.tiers)
    assert cm.has_energy
    for tier, prices in cm.tiers.items():
        figures = {
            "Link $": prices.get("Link"),
            "Energy.Link": cm.energy.get(tier, {}).get("Link"),
            "ReachM": cm.reach_m.get(tier),
            "LatencyNs": cm.latency_ns.get(tier),
            "MaxGbps": cm.max_gbps.get(tier),
        }
        for name, value in figures.items():
            assert value is not None, f"{tier} has no {name}"
            assert math.isfinite(value) and value > 0, f"{tier} {name} = {value}"
        for comp, value in list(prices.items()) + list(cm.energy[tier].items()):
            assert math.isfinite(value) and value > 0, f"{tier} {comp} = {value}"
        # a tier priced for switches is also powered for them, and the other way round
        assert ("Switch" in prices) == ("Switch" in cm.energy[tier]), tier
        assert ("Nic" not in cm.energy[tier]) or ("Nic" in prices), tier
    for tier in SWITCHED:
        assert "Switch" in cm.tiers[tier] and "Switch" in cm.energy[tier], tier
    assert "Switch" not in cm.tiers["D2D_UCIe"]


def test_catalogue_orders_like_the_physics(cm):
    e = {t: cm.energy[t]["Link"] for t in cm.tiers}
    reach = cm.reach_m
    # pJ/bit: die-to-die < board SerDes < co-packaged < linear-drive < DSP pluggable optics
    assert e["D2D_UCIe"] < e["ScaleUpSerDes"] < e["CoPackagedOptics"] \
        < e["LinearDriveOptics"] < e["DspOptics800G"]
    assert e["CopperDAC"] < e["ScaleUpSerDes"]  # a passive cable; its SerDes are in Nic
    # reach: package mm < copper m < optical hundreds of m
    assert reach["D2D_UCIe"] < 0.1 < reach["ScaleUpSerDes"] <= reach["CopperDAC"] < 10
    assert all(reach[t] >= 100 for t in ("LinearDriveOptics", "DspOptics800G",
                                          "CoPackagedOptics"))
    assert cm.latency_ns["DspOptics800G"] > cm.latency_ns["LinearDriveOptics"]  # the DSP
    # price per GB/s of link: copper < optics, CPO and LPO below DSP pluggables
    price = {t: cm.tiers[t]["Link"] for t in cm.tiers}
    assert price["CopperDAC"] < price["CoPackagedOptics"] < price["DspOptics800G"]
    assert price["LinearDriveOptics"] < price["DspOptics800G"]


#: A figure on a line of its own: ``Key: number  # comment``.
_NUMBER_LINE = re.compile(r"^\s*[A-Za-z_][\w]*:\s*(-?[0-9][0-9_.]*(?:[eE][-+]?[0-9]+)?)\s*(#.*)?$")
_CONFIDENCE = re.compile(r"\[(H|M|L|estimate)\]\s*$")


def _numeric_leaves(node) -> int:
    if isinstance(node, dict):
        return sum(_numeric_leaves(v) for v in node.values())
    return int(isinstance(node, (int, float)) and not isinstance(node, bool))


def test_every_figure_has_a_source_and_confidence():
    lines = CATALOGUE.read_text(encoding="utf-8").splitlines()
    figures = [(i + 1, line, m) for i, line in enumerate(lines)
               if (m := _NUMBER_LINE.match(line))]
    # every number of the file is on such a line (none hidden in flow style)
    assert len(figures) == _numeric_leaves(yaml.safe_load(CATALOGUE.read_text()))
    for no, line, m in figures:
        comment = m.group(2)
        assert comment, f"technologies.yaml:{no}: a figure without a comment: {line.strip()}"
        assert _CONFIDENCE.search(comment), (
            f"technologies.yaml:{no}: the comment must end with [H], [M], [L] or [estimate]")
        assert re.search(r"§\d|https?://|LIBRA|cost_model\.yml", comment), (
            f"technologies.yaml:{no}: the comment names no source (§ of physical_layer.md, "
            "URL or LIBRA's cost model)")
        if comment.rstrip().endswith("[estimate]"):
            # an estimate says what it rests on: arithmetic or the value it borrows
            assert re.search(r"[x/=+]|LIBRA|proxy|assumed", comment), f"line {no}"


# ------------------------------------------------------------------------------------------
# Power rates by hand
# ------------------------------------------------------------------------------------------


def test_power_rates_by_hand_switched_3d(cm):
    # 4 dies x 8 packages x 16 nodes = 512 NPUs: UCIe on a fully connected package, NVLink-class
    # switch in the node, DSP optics to a switch between nodes.
    net = network_from_lists(["FullyConnected", "Switch", "Switch"], [4, 8, 16],
                             cost_tiers=["D2D_UCIe", "ScaleUpSerDes", "DspOptics800G"])
    rates = cost.power_rates_w_per_gbps(net, cm)
    # N x 0.008 = 512 x 0.008 = 4.096 W per GB/s per pJ/bit
    expected = [
        4.096 * 0.6,                  # = 2.4576: Energy.Link only (not a Switch dim)
        4.096 * (5.5 + 9.3),          # = 60.6208: Link + Switch (no Nic in the tier)
        4.096 * (42.5 + 9.3 + 5.5),   # = 234.7008: Link + Switch + Nic
    ]
    np.testing.assert_allclose(rates, [2.4576, 60.6208, 234.7008], rtol=1e-12)
    np.testing.assert_allclose(rates, expected, rtol=1e-12)
    bw = np.array([1000.0, 400.0, 50.0])
    # 2,457.6 + 24,248.32 + 11,735.04 W
    assert rates @ bw == pytest.approx(38440.96, rel=1e-12)


def test_power_rates_by_hand_ring_fc_switch(cm):
    # 4 x 4 x 8 = 128 NPUs; a Ring and a FullyConnected dim count Energy.Link only (CopperDAC's
    # Switch and Nic energy are ignored there), CPO has no Nic energy.
    net = network_from_lists(["Ring", "FullyConnected", "Switch"], [4, 4, 8],
                             cost_tiers=["TorusIciOcs", "CopperDAC", "CoPackagedOptics"])
    rates = cost.power_rates_w_per_gbps(net, cm)
    # N x 0.008 = 1.024
    np.testing.assert_allclose(rates, [1.024 * 10.8125,      # = 11.072
                                       1.024 * 0.25,         # = 0.256
                                       1.024 * (12.5 + 9.3)  # = 22.3232
                                       ], rtol=1e-12)
    np.testing.assert_allclose(rates, [11.072, 0.256, 22.3232], rtol=1e-12)


def test_max_gbps_and_latency_per_dimension(cm):
    net = network_from_lists(["Switch", "Switch"], [8, 16],
                             cost_tiers=["ScaleUpSerDes", "DspOptics800G"])
    np.testing.assert_array_equal(cost.tier_max_gbps(net, cm), [900.0, 100.0])
    np.testing.assert_array_equal(cost.tier_latency_ns(net, cm), [95.0, 195.0])


# ------------------------------------------------------------------------------------------
# Reach
# ------------------------------------------------------------------------------------------


def test_reach_within_passes_and_beyond_fails(cm):
    net = network_from_lists(["Switch", "Switch"], [8, 16],
                             cost_tiers=["CopperDAC", "DspOptics800G"])
    np.testing.assert_array_equal(cost.check_reach(net, cm, [3.0, 500.0]), [3.0, 500.0])
    with pytest.raises(LibraInputError) as err:
        cost.check_reach(net, cm, [5.0, 100.0])
    msg = str(err.value)
    for part in ("network.span_m[0]", "dimension 0", "5 m", "CopperDAC", "reach of 3 m"):
        assert part in msg, (part, msg)
    with pytest.raises(LibraInputError) as err:
        cost.check_reach(net, cm, [1.0, 2000.0])
    msg = str(err.value)
    for part in ("dimension 1", "2000 m", "DspOptics800G", "reach of 500 m"):
        assert part in msg, (part, msg)


def test_package_link_does_not_reach_across_a_board(cm):
    net = network_from_lists(["FullyConnected", "Switch"], [4, 8],
                             cost_tiers=["D2D_UCIe", "ScaleUpSerDes"])
    cost.check_reach(net, cm, [0.02, 1.0])
    with pytest.raises(LibraInputError, match=r"D2D_UCIe.*0\.025 m"):
        cost.check_reach(net, cm, [0.1, 1.0])


# ------------------------------------------------------------------------------------------
# Bad catalogue entries
# ------------------------------------------------------------------------------------------


def _catalogue_with(tmp_path, tier: str, key: str, value, sub: str | None = None):
    data = yaml.safe_load(CATALOGUE.read_text())
    if sub is None:
        data[tier][key] = value
    else:
        data[tier][key][sub] = value
    path = tmp_path / "bad_technologies.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("tier, key, sub, value, says", [
    ("DspOptics800G", "Energy", "Link", -1.0, "pJ per bit"),
    ("CopperDAC", "Energy", "Switch", float("nan"), "pJ per bit"),
    ("LinearDriveOptics", "Energy", "Nic", "five", "pJ per bit"),
    ("ScaleUpSerDes", "ReachM", None, 0.0, "(m)"),
    ("CoPackagedOptics", "ReachM", None, -2.0, "(m)"),
    ("D2D_UCIe", "MaxGbps", None, 0.0, "GB/s"),
    ("TorusIciOcs", "LatencyNs", None, float("inf"), "ns"),
    ("DspOptics800G", "Reach", None, 500.0, "unknown component"),
    ("CopperDAC", "Energy", "Cable", 1.0, "unknown component"),
    ("CopperDAC", "Energy", None, 5.0, "expected a mapping"),
    ("ScaleUpSerDes", "Energy", None, [5.5, 9.3], "expected a mapping"),
    ("ScaleUpSerDes", "Energy", None, {}, "expected a mapping"),
])
def test_bad_entry_names_file_and_tier(tmp_path, tier, key, sub, value, says):
    path = _catalogue_with(tmp_path, tier, key, value, sub)
    with pytest.raises(LibraInputError) as err:
        cost.load_cost_model(path)
    msg = str(err.value)
    assert str(path) in msg and tier in msg and says in msg, msg


def test_tier_without_energy_among_powered_tiers_is_named(tmp_path, cm):
    data = yaml.safe_load(CATALOGUE.read_text())
    del data["DspOptics800G"]["Energy"]
    path = tmp_path / "partial.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    partial = cost.load_cost_model(path)
    net = network_from_lists(["Switch", "Switch"], [8, 16],
                             cost_tiers=["ScaleUpSerDes", "DspOptics800G"])
    with pytest.raises(LibraInputError, match=r"DspOptics800G.*no Energy.*dimension 1"):
        cost.power_rates_w_per_gbps(net, partial)


# ------------------------------------------------------------------------------------------
# Real-system presets
# ------------------------------------------------------------------------------------------

#: (blocks, NPUs per dim, tiers, reference GB/s per dim) of each preset, from its comments.
EXPECTED = {
    "h100_dgx": (("Switch", "Switch"), (8, 128), ("ScaleUpSerDes", "DspOptics800G"),
                 [450.0, 50.0]),
    "gb200_nvl72": (("Switch", "Switch"), (72, 8), ("ScaleUpSerDes", "DspOptics800G"),
                    [900.0, 50.0]),
    "tpu_v4": (("Ring", "Ring", "Ring"), (16, 16, 16), ("TorusIciOcs",) * 3,
               [90.0, 90.0, 90.0]),
}


def test_presets_are_listed():
    assert set(PRESETS) <= set(config.presets())


@pytest.mark.parametrize("name", PRESETS)
def test_preset_composes_and_builds_inputs(name, cm):
    cfg = _compose(f"conf={name}")
    network, workload, rates, spec = config.to_inputs(cfg)
    blocks, npus, tiers, ref = EXPECTED[name]
    assert network.blocks == blocks and network.npus == npus
    assert tuple(network.cost_tiers) == tiers
    assert list(cfg.reference_bw_gbps) == ref
    assert workload.name == "GPT_3_175B"
    assert workload.communicator.shape[-1] == len(npus)
    assert rates is not None and np.all(np.isfinite(rates)) and np.all(rates > 0)
    # the catalogue is the cost model
    assert pathlib.Path(resolve_path(cfg.cost_model.file, "cost_model.file")) == CATALOGUE
    np.testing.assert_allclose(rates, cost.cost_rates_usd_per_gbps(network, cm), rtol=1e-12)
    # every span within its tier's reach
    spans = cost.check_reach(network, cm, list(cfg.network.span_m))
    assert spans.shape == (len(npus),) and np.all(spans > 0)
    # the shipped bandwidths fit their technologies
    assert np.all(np.array(ref) <= cost.tier_max_gbps(network, cm))
    # the power cap is the reference design's network power
    power = cost.power_rates_w_per_gbps(network, cm) @ np.array(ref)
    assert cfg.constraints.max_power_w == pytest.approx(power, rel=1e-9)
    assert cfg.power.npu_w > 0
    # the mapping fits the NPU's memory
    parsed = (Transformer.parse(dict(cfg.workload.model)),
              Parallel.parse(dict(cfg.workload.parallel), network.npus),
              Npu.parse(dict(cfg.workload.npu)))
    assert memory.transformer_memory(*parsed).fits


def test_preset_power_caps_by_hand():
    # sum_d N x 0.008 x pJ/bit_d x bw_d, as written in each preset's comment
    assert _compose("conf=h100_dgx").constraints.max_power_w == pytest.approx(
        1024 * 0.008 * (5.5 + 9.3) * 450 + 1024 * 0.008 * (42.5 + 9.3 + 5.5) * 50, rel=1e-12)
    assert _compose("conf=gb200_nvl72").constraints.max_power_w == pytest.approx(
        576 * 0.008 * (5.5 + 9.3) * 900 + 576 * 0.008 * (42.5 + 9.3 + 5.5) * 50, rel=1e-12)
    assert _compose("conf=tpu_v4").constraints.max_power_w == pytest.approx(
        3 * 4096 * 0.008 * 10.8125 * 90, rel=1e-12)
    assert _compose("conf=h100_dgx").constraints.max_power_w == pytest.approx(78028.8)
    assert _compose("conf=gb200_nvl72").constraints.max_power_w == pytest.approx(74580.48)
    assert _compose("conf=tpu_v4").constraints.max_power_w == pytest.approx(95662.08)
