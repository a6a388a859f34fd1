"""Tests for libra_jax.inputs.topology: loading, notation, validation messages."""

from pathlib import Path

import numpy as np
import pytest

from libra_jax.inputs.topology import (
    Network,
    load_network_file,
    network_from_lists,
    parse_notation,
)
from libra_jax.types import Block, LibraInputError

INPUTS = Path(__file__).resolve().parents[1] / "libra_jax" / "data" / "libra_inputs"


def _write(tmp_path, text, name="net.yml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_load_shipped_3d():
    net = load_network_file(INPUTS / "network" / "3d_network.yml")
    assert net.blocks == ("Ring", "FullyConnected", "Switch")
    assert net.npus == (16, 8, 32)
    assert net.cost_tiers == ("InterPackage", "InterNode", "InterPod")
    assert net.num_dims == 3
    assert net.num_npus == 4096
    assert net.notation == "RI(16)_FC(8)_SW(32)"
    np.testing.assert_array_equal(
        net.block_codes, [Block.RING, Block.FULLYCONNECTED, Block.SWITCH]
    )
    assert "3d_network.yml" in net.source


def test_load_shipped_4d():
    net = load_network_file(str(INPUTS / "network" / "4d_network.yml"))
    assert net.blocks == ("Ring", "FullyConnected", "Ring", "Switch")
    assert net.npus == (4, 8, 4, 32)
    assert net.cost_tiers == ("InterChiplet", "InterPackage", "InterNode", "InterPod")
    assert net.num_npus == 4096
    assert net.notation == "RI(4)_FC(8)_RI(4)_SW(32)"
    np.testing.assert_array_equal(net.block_codes, [0, 1, 0, 2])


def test_notation_roundtrip_and_spellings():
    a = parse_notation("RI(16)_FC(8)_SW(32)")
    b = parse_notation("ring(16)_FullyConnected(8)_sw( 32 )")
    assert a.blocks == b.blocks == ("Ring", "FullyConnected", "Switch")
    assert a.npus == b.npus == (16, 8, 32)
    assert a.cost_tiers is None
    assert a.source == "network.notation"
    c = parse_notation("Switch(4)", cost_tiers=["InterPod"])
    assert c.blocks == ("Switch",) and c.npus == (4,) and c.cost_tiers == ("InterPod",)
    assert parse_notation(a.notation) == a


def test_from_lists_spellings():
    net = network_from_lists(["ri", "FC", "switch", "fully_connected"], [2, 3.0, 4, 5])
    assert net.blocks == ("Ring", "FullyConnected", "Switch", "FullyConnected")
    assert net.npus == (2, 3, 4, 5)
    assert all(type(n) is int for n in net.npus)


def test_cost_dimension_optional(tmp_path):
    p = _write(tmp_path, "Topology: [Ring, Switch]\nNpusCount: [4, 8]\n")
    net = load_network_file(p)
    assert net.cost_tiers is None


@pytest.mark.parametrize(
    "topology, npus, tiers, needles",
    [
        (["Ring", "Torus"], [4, 4], None, ["Torus", "dimension 1"]),
        (["Ring", "FC"], [4, 1], None, ["dimension 1", "is 1", "at least 2"]),
        (["Ring", "FC"], [4, 0], None, ["dimension 1", "0"]),
        (["Ring", "FC"], [4, -3], None, ["-3"]),
        (["Ring", "FC"], [4, 2.5], None, ["2.5"]),
        (["Ring", "FC"], [4, "8"], None, ["'8'"]),
        (["Ring", "FC"], [4, True], None, ["True"]),
        (["Ring", "FC"], [4, 8, 2], None, ["2 dimensions", "3 entries"]),
        (["Ring", "FC"], [4, 8], ["A"], ["cost tiers", "['A']"]),
        (["Ring", "FC"], [4, 8], ["A", "B", "C"], ["cost tiers", "3 entries"]),
        ([], [], None, ["empty"]),
        ("Ring", [4], None, ["topology", "'Ring'"]),
    ],
)
def test_from_lists_errors(topology, npus, tiers, needles):
    with pytest.raises(LibraInputError) as e:
        network_from_lists(topology, npus, tiers, source="network")
    msg = str(e.value)
    assert msg.startswith("network")
    for n in needles:
        assert n in msg


@pytest.mark.parametrize(
    "notation, needles",
    [
        ("RI(16)_XX(8)", ["XX", "RI(16)_XX(8)"]),
        ("RI(16)_FC(1)", ["1", "at least 2"]),
        ("RI(16)-FC(8)", ["'_'", "'-'"]),
        ("RI16_FC(8)", ["cannot parse", "RI16"]),
        ("RI(16)_", ["cannot parse"]),
        ("", ["expected a topology string"]),
    ],
)
def test_notation_errors(notation, needles):
    with pytest.raises(LibraInputError) as e:
        parse_notation(notation)
    msg = str(e.value)
    assert msg.startswith("network.notation")
    for n in needles:
        assert n in msg


def test_notation_tier_mismatch():
    with pytest.raises(LibraInputError, match=r"cost tiers.*1 entries"):
        parse_notation("RI(4)_SW(8)", cost_tiers=["InterPod"])


@pytest.mark.parametrize(
    "text, needles",
    [
        ("Topology: [Ring, Switch]\n", ["NpusCount", "missing"]),
        ("NpusCount: [4, 8]\n", ["Topology", "missing"]),
        (
            "Topology: [Ring, Switch]\nNpusCount: [4]\n",
            ["NpusCount", "[4]", "1 entries"],
        ),
        ("Topology: [Ring, Hypercube]\nNpusCount: [4, 8]\n", ["Hypercube"]),
        ("Topology: [Ring, Switch]\nNpusCount: [4, 1]\n", ["dimension 1", "1"]),
        (
            "Topology: [Ring, Switch]\nNpusCount: [4, 8]\nCostDimension: [A]\n",
            ["CostDimension", "['A']"],
        ),
        (
            "Topology: [Ring, Switch]\nNpusCount: [4, 8]\nCostDimensions: [A, B]\n",
            ["CostDimensions"],
        ),
        ("Topology: Ring\nNpusCount: [4]\n", ["Topology", "Ring"]),
        ("- Ring\n- Switch\n", ["mapping"]),
        ("Topology: [Ring, Switch\n", ["not valid YAML"]),
        ("", ["mapping"]),
    ],
)
def test_network_file_errors(tmp_path, text, needles):
    p = _write(tmp_path, text)
    with pytest.raises(LibraInputError) as e:
        load_network_file(p)
    msg = str(e.value)
    assert p in msg
    for n in needles:
        assert n in msg


def test_missing_network_file(tmp_path):
    p = str(tmp_path / "nope.yml")
    with pytest.raises(LibraInputError, match="cannot read") as e:
        load_network_file(p)
    assert p in str(e.value)


def test_network_direct_construction_is_validated():
    with pytest.raises(LibraInputError, match="Torus"):
        Network(blocks=("Torus",), npus=(4,), cost_tiers=None, source="x")
    with pytest.raises(LibraInputError, match="NPU count"):
        Network(blocks=("Ring",), npus=(1,), cost_tiers=None, source="x")
