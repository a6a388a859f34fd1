"""Tests for libra_jax.inputs.cost: reference cost formula, hand numbers, errors."""

import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from libra_jax.inputs.cost import (
    CostModel,
    cost_rates_usd_per_gbps,
    load_cost_model,
)
from libra_jax.inputs.topology import (
    load_network_file,
    network_from_lists,
    parse_notation,
)
from libra_jax.model.objective import network_cost_usd
from libra_jax.model.problem import ConstraintSpec, problem_from_arrays
from libra_jax.types import LibraInputError

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "libra_jax" / "data" / "libra_inputs"
OPTIMA = ROOT / "tests" / "fixtures" / "libra_optima.json"


def _shipped(d):
    net = load_network_file(INPUTS / "network" / f"{d}_network.yml")
    cm = load_cost_model(INPUTS / "cost_model" / f"{d}_cost_model.yml")
    return net, cm


def test_load_shipped_cost_models():
    _, cm3 = _shipped("3d")
    assert cm3.tiers == {
        "InterPackage": {"Link": 4.00001, "Switch": 13.00001},
        "InterNode": {"Link": 4.00002, "Switch": 13.00002},
        "InterPod": {"Link": 7.80003, "Switch": 18.00003, "Nic": 31.60003},
    }
    _, cm4 = _shipped("4d")
    assert set(cm4.tiers) == {"InterChiplet", "InterPackage", "InterNode", "InterPod"}
    assert cm4.tiers["InterChiplet"] == {"Link": 2.00001}


def test_rates_3d_hand():
    net, cm = _shipped("3d")
    rates = cost_rates_usd_per_gbps(net, cm)
    assert rates.dtype == np.float64 and rates.shape == (3,)
    # Ring(16): 4096/16 blocks x 2*16 links x bw/2 x Link = 4096 Link
    # FC(8):    4096/8 blocks x 8*7 links x bw/7 x Link   = 4096 Link
    # SW(32):   1 block x 4096 links x bw x (Link + Switch + Nic)
    expect = [
        (4096 / 16) * 32 * 0.5 * 4.00001,
        (4096 / 8) * 56 * (1 / 7) * 4.00002,
        1 * 4096 * 1.0 * (7.80003 + 18.00003 + 31.60003),
    ]
    np.testing.assert_allclose(rates, expect, rtol=1e-14)
    np.testing.assert_allclose(
        rates, [4096 * 4.00001, 4096 * 4.00002, 4096 * 57.40009], rtol=1e-14
    )
    # The reference's cost of the 3D equal split (500/3 GB/s each).
    cost = float(rates @ np.full(3, 500 / 3))
    assert math.isclose(cost, 44646481.92, rel_tol=1e-12)


def test_rates_4d_hand():
    net, cm = _shipped("4d")
    rates = cost_rates_usd_per_gbps(net, cm)
    expect = [
        (4096 / 4) * 8 * 0.5 * 2.00001,  # Ring(4)
        (4096 / 8) * 56 * (1 / 7) * 4.00002,  # FC(8)
        (4096 / 4) * 8 * 0.5 * 4.00003,  # Ring(4), Switch price of the tier unused
        1 * 4096 * (7.80004 + 18.00004 + 31.60004),  # SW(32)
    ]
    np.testing.assert_allclose(rates, expect, rtol=1e-14)
    cost = float(rates @ np.full(4, 125.0))
    assert math.isclose(cost, 34508892.16, rel_tol=1e-12)


def test_switch_in_middle_dimension():
    # A switch on dim 1 of RI(4)_SW(8)_RI(2): one switch spans dims 0..1 ->
    # blocks = prod(npus after) = 2, links = prod(npus up to it) = 32.
    net = parse_notation("RI(4)_SW(8)_RI(2)", cost_tiers=["A", "B", "A"])
    cm = CostModel({"A": {"Link": 1.0}, "B": {"Link": 2.0, "Switch": 3.0}}, source="cm")
    rates = cost_rates_usd_per_gbps(net, cm)
    np.testing.assert_allclose(
        rates, [64 / 4 * 8 * 0.5 * 1.0, 2 * 32 * 5.0, 64 / 2 * 4 * 0.5], rtol=1e-14
    )


def test_equal_split_costs_match_reference_optima():
    cases = json.loads(OPTIMA.read_text())["cases"]
    for case in cases:
        net, cm = _shipped(case["network"])
        rates = cost_rates_usd_per_gbps(net, cm)
        # Optimum bandwidths are stored rounded to ~6 digits; the equal split is exact.
        for entry, rtol in ((case, 1e-6), (case["equal_split"], 1e-12)):
            cost = float(rates @ np.asarray(entry["bandwidth_gbps"]))
            assert math.isclose(cost, entry["network_cost_usd"], rel_tol=rtol), case


def test_network_cost_jit_vmap_grad():
    # The rates enter the problem as cost_rate; the model prices bandwidths with them.
    net, cm = _shipped("4d")
    rates = cost_rates_usd_per_gbps(net, cm)
    p = problem_from_arrays(np.ones((1, 4)), np.ones(1), 0.0, rates,
                            ConstraintSpec(total_bw_gbps=500.0))
    bw = np.array([[125.0, 125.0, 125.0, 125.0], [500.0, 300.0, 100.0, 100.0]])
    with jax.numpy_rank_promotion("raise"), jax.enable_x64(True):
        eager = network_cost_usd(jnp.asarray(bw[1]), p)
        jitted = jax.jit(network_cost_usd)(jnp.asarray(bw[1]), p)
        vm = jax.vmap(network_cost_usd, in_axes=(0, None))(jnp.asarray(bw), p)
        g = jax.grad(lambda b: network_cost_usd(b, p))(jnp.asarray(bw[0]))
    expect = bw @ rates
    np.testing.assert_allclose(eager, expect[1], rtol=1e-14)
    np.testing.assert_allclose(jitted, expect[1], rtol=1e-14)
    np.testing.assert_allclose(vm, expect, rtol=1e-14)
    np.testing.assert_allclose(g, rates, rtol=1e-14)
    assert vm.shape == (2,)


def _write(tmp_path, text, name="cost.yml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    "text, needles",
    [
        ("A:\n  Link: -1.0\n", ["A.Link", "-1.0", ">= 0"]),
        ("A:\n  Link: .nan\n", ["A.Link", "nan"]),
        ("A:\n  Link: cheap\n", ["A.Link", "'cheap'"]),
        ("A:\n  Link: 1.0\n  Cable: 2.0\n", ["Cable", "unknown component"]),
        ("A: 3.0\n", ["'A'", "3.0"]),
        ("", ["mapping"]),
        ("A: [1, 2\n", ["not valid YAML"]),
    ],
)
def test_cost_file_errors(tmp_path, text, needles):
    p = _write(tmp_path, text)
    with pytest.raises(LibraInputError) as e:
        load_cost_model(p)
    msg = str(e.value)
    assert p in msg
    for n in needles:
        assert n in msg


def test_missing_cost_file(tmp_path):
    p = str(tmp_path / "missing.yml")
    with pytest.raises(LibraInputError, match="cannot read") as e:
        load_cost_model(p)
    assert p in str(e.value)


def test_rates_errors():
    cm = CostModel(
        {"A": {"Link": 1.0}, "B": {"Link": 1.0, "Switch": 2.0}}, source="cm.yml"
    )
    with pytest.raises(LibraInputError, match=r"net.*no cost tiers"):
        cost_rates_usd_per_gbps(network_from_lists(["Ring"], [4], source="net"), cm)
    with pytest.raises(LibraInputError) as e:
        cost_rates_usd_per_gbps(
            network_from_lists(["Ring", "FC"], [4, 4], ["A", "C"], "net"), cm
        )
    assert (
        "dimension 1" in str(e.value)
        and "'C'" in str(e.value)
        and "cm.yml" in str(e.value)
    )
    with pytest.raises(LibraInputError) as e:
        cost_rates_usd_per_gbps(
            network_from_lists(["Ring", "Switch"], [4, 4], ["A", "A"], "net"), cm
        )
    assert (
        "'Switch'" in str(e.value)
        and "'A'" in str(e.value)
        and "dimension 1" in str(e.value)
    )
    cm_nolink = CostModel({"A": {"Switch": 1.0}}, source="cm.yml")
    with pytest.raises(LibraInputError, match="'Link'"):
        cost_rates_usd_per_gbps(
            network_from_lists(["Ring"], [4], ["A"], "net"), cm_nolink
        )


def test_nic_optional_for_switch():
    cm = CostModel({"B": {"Link": 1.0, "Switch": 2.0}}, source="cm")
    rates = cost_rates_usd_per_gbps(network_from_lists(["Switch"], [8], ["B"]), cm)
    np.testing.assert_allclose(rates, [8 * 3.0])
