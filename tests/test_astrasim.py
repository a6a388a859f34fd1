"""Tests of libra_jax.inputs.astrasim: ASTRA-sim 2.x network YAML / system JSON interop."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from libra_jax.inputs.astrasim import GIB_PER_GB, export_design, import_network_yaml
from libra_jax.inputs.topology import network_from_lists, parse_notation
from libra_jax.types import LibraInputError

NET = parse_notation("RI(4)_FC(8)_RI(4)_SW(32)")
BW = [500.0, 300.0, 151.18, 48.82]

# The form of astra-sim/astra-sim inputs/network/analytical/*.yml (comments, spacing,
# flow lists, trailing '# unit' comments), with values of our own.
ASTRA_STYLE_YAML = """\
# Analytical Network Input File

# 3D topology with 128 NPUs (4 x 8 x 4)
# 1st Dim is (bi-directional) Ring, 2nd Dim is FullyConnected, the last is Switch.

# 3D topology
topology: [ Ring, FullyConnected, Switch ]  # Ring, Switch, FullyConnected

# 4 x 8 x 4 = 128 NPUs
npus_count: [ 4, 8, 4 ]  # number of NPUs

# Bandwidth per each dimension and direction (per link)
bandwidth: [ 150.0, 25.0, 40 ]  # GB/s

# Latency per each dimension and direction
latency: [ 50.0, 500.0, 2000.0 ]  # ns
"""


def _write(tmp_path, text, name="net.yml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_export_hand_written_case(tmp_path):
    yml, js = export_design(
        NET, BW, out_dir=tmp_path / "out", latency_ns=[10, 20, 30, 40]
    )
    assert yml.endswith("network.yml") and js.endswith("system.json")
    text = Path(yml).read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert list(data) == ["topology", "npus_count", "bandwidth", "latency"]
    assert data["topology"] == ["Ring", "FullyConnected", "Ring", "Switch"]
    assert data["npus_count"] == [4, 8, 4, 32]
    # ring on every dim: link = per-NPU bandwidth, in GiB/s.
    f = 1e9 / 2**30
    np.testing.assert_allclose(data["bandwidth"], [x * f for x in BW], rtol=1e-15)
    np.testing.assert_allclose(data["bandwidth"][0], 465.66128730773926, rtol=1e-15)
    assert data["latency"] == [10.0, 20.0, 30.0, 40.0]
    # Header names libra_jax, the notation and the units / GiB rule.
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert "libra_jax" in header[0]
    assert any("RI(4)_FC(8)_RI(4)_SW(32)" in line for line in header)
    assert any("2^30" in line and "GB/s" in line for line in header)
    assert any("latency: ns" in line for line in header)

    system = json.loads(Path(js).read_text(encoding="utf-8"))
    assert system == {
        "scheduling-policy": "LIFO",
        "endpoint-delay": 1,
        "active-chunks-per-dimension": 1,
        "preferred-dataset-splits": 4,
        "all-reduce-implementation": ["ring"] * 4,
        "reduce-scatter-implementation": ["ring"] * 4,
        "all-gather-implementation": ["ring"] * 4,
        "all-to-all-implementation": ["ring"] * 4,
        "collective-optimization": "localBWAware",
        "local-mem-bw": 1000000,
        "boost-mode": 0,
    }


def test_export_direct_splits_fully_connected_bandwidth(tmp_path):
    algs = ["ring", "direct", "ring", "ring"]
    yml, js = export_design(
        NET,
        np.array(BW),
        out_dir=tmp_path,
        algorithm=algs,
        gb_is_gib=False,
        chunks=16,
        endpoint_delay_ns=10,
        local_mem_bw_gbps=1600.5,
    )
    data = yaml.safe_load(Path(yml).read_text(encoding="utf-8"))
    # direct on FC(8): 300 GB/s per NPU over 7 links; gb_is_gib=False: no 2^30 factor.
    np.testing.assert_allclose(
        data["bandwidth"], [500.0, 300.0 / 7, 151.18, 48.82], rtol=1e-15
    )
    assert data["latency"] == [0.0] * 4  # latency_ns=None: LIBRA's model has none
    system = json.loads(Path(js).read_text(encoding="utf-8"))
    for key in (
        "all-reduce-implementation",
        "reduce-scatter-implementation",
        "all-gather-implementation",
        "all-to-all-implementation",
    ):
        assert system[key] == algs
    assert system["preferred-dataset-splits"] == 16
    assert system["endpoint-delay"] == 10
    assert system["local-mem-bw"] == 1600.5


@pytest.mark.parametrize("gb_is_gib", [True, False])
@pytest.mark.parametrize(
    "algorithm", ["ring", "direct", ["direct", "ring", "direct", "ring"]]
)
def test_round_trip(tmp_path, gb_is_gib, algorithm):
    rng = np.random.default_rng(0)
    bw = rng.uniform(1e-3, 1e4, size=4)
    bw[0] = 1e-5  # repr '1e-05' must still read back as a number
    lat = [0.0, 1.5, 700.0, 1e-7]
    yml, _ = export_design(
        NET,
        bw,
        out_dir=tmp_path,
        latency_ns=lat,
        algorithm=algorithm,
        gb_is_gib=gb_is_gib,
    )
    net, bw2, lat2 = import_network_yaml(yml, algorithm=algorithm, gb_is_gib=gb_is_gib)
    assert net.blocks == NET.blocks and net.npus == NET.npus
    assert net.cost_tiers is None and net.source == yml
    np.testing.assert_allclose(bw2, bw, rtol=1e-12, atol=0)
    np.testing.assert_allclose(lat2, lat, rtol=1e-12, atol=0)


def test_round_trip_scalar_latency_and_cost_tiers(tmp_path):
    net = network_from_lists(["Switch"], [64])
    yml, _ = export_design(net, [123.25], out_dir=tmp_path, latency_ns=500)
    tiers = ["InterPod"]
    net2, bw, lat = import_network_yaml(yml, cost_tiers=tiers)
    assert net2.notation == "SW(64)" and net2.cost_tiers == ("InterPod",)
    np.testing.assert_allclose(bw, [123.25], rtol=1e-12)
    assert lat.tolist() == [500.0]


def test_import_astra_style_file(tmp_path):
    p = _write(tmp_path, ASTRA_STYLE_YAML)
    net, bw, lat = import_network_yaml(p)
    assert net.blocks == ("Ring", "FullyConnected", "Switch")
    assert net.npus == (4, 8, 4) and net.notation == "RI(4)_FC(8)_SW(4)"
    # Link GB/s count 2^30 bytes; per-NPU = link for ring.
    np.testing.assert_allclose(
        bw, np.array([150.0, 25.0, 40.0]) / GIB_PER_GB, rtol=1e-15
    )
    assert bw.dtype == np.float64 and lat.tolist() == [50.0, 500.0, 2000.0]
    _, bw_direct, _ = import_network_yaml(p, algorithm="direct", gb_is_gib=False)
    np.testing.assert_allclose(bw_direct, [150.0 * 3, 25.0 * 7, 40.0 * 3], rtol=1e-15)


def test_import_without_bandwidth_and_latency(tmp_path):
    p = _write(tmp_path, "topology: [ Ring ]\nnpus_count: [ 8 ]\n")
    net, bw, lat = import_network_yaml(p)
    assert net.notation == "RI(8)" and bw is None and lat is None


@pytest.mark.parametrize(
    "text, needles",
    [
        ("npus_count: [ 4 ]\nbandwidth: [ 1.0 ]\n", ["missing key 'topology'"]),
        ("topology: [ Ring ]\nlatency: [ 1.0 ]\n", ["missing key 'npus_count'"]),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nNpusCount: [ 4 ]\n",
            ["unknown key 'NpusCount'"],
        ),
        (
            "topology: Switch\nnpus_count: [ 4 ]\n",
            ["topology must be a list", "'Switch'"],
        ),
        ("topology: []\nnpus_count: []\n", ["topology is empty"]),
        ("topology: [ Ring, ring ]\nnpus_count: [ 4, 4 ]\n", ["topology[1]", "'ring'"]),
        (
            "topology: [ Ring, Torus ]\nnpus_count: [ 4, 4 ]\n",
            ["topology[1]", "'Torus'"],
        ),
        (
            "topology: [ Ring, Switch ]\nnpus_count: [ 4 ]\n",
            ["npus_count", "1 entries"],
        ),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1.0, 2.0 ]\n",
            ["bandwidth [1.0, 2.0]", "2 entries"],
        ),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nlatency: [ 1.0, 2.0 ]\n",
            ["latency [1.0, 2.0]", "2 entries"],
        ),
        ("topology: [ Ring ]\nnpus_count: [ 1 ]\n", ["npus_count[0]", "1;"]),
        ("topology: [ Ring ]\nnpus_count: [ 4.5 ]\n", ["npus_count[0]", "4.5"]),
        ("topology: [ Ring ]\nnpus_count: [ true ]\n", ["npus_count[0]", "True"]),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ -5.0 ]\n",
            ["bandwidth[0]", "-5.0"],
        ),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 0 ]\n",
            ["bandwidth[0]", "> 0"],
        ),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ fast ]\n",
            ["bandwidth[0]", "'fast'"],
        ),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ .inf ]\n",
            ["bandwidth[0]", "inf"],
        ),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nlatency: [ -1.0 ]\n",
            ["latency[0]", ">= 0"],
        ),
        (
            "topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: 5\n",
            ["bandwidth must be a list"],
        ),
        ("- topology\n", ["must be a YAML mapping"]),
        ("topology: [ Ring\n", ["not valid YAML"]),
    ],
)
def test_import_errors_name_the_field(tmp_path, text, needles):
    p = _write(tmp_path, text)
    with pytest.raises(LibraInputError) as e:
        import_network_yaml(p)
    msg = str(e.value)
    assert str(p) in msg
    for needle in needles:
        assert needle in msg, msg


def test_import_errors_missing_file_and_bad_algorithm(tmp_path):
    with pytest.raises(LibraInputError, match="cannot read the ASTRA-sim network file"):
        import_network_yaml(tmp_path / "nope.yml")
    p = _write(tmp_path, ASTRA_STYLE_YAML)
    with pytest.raises(
        LibraInputError, match=r"algorithm of dimension 0 is 'halvingDoubling'"
    ):
        import_network_yaml(p, algorithm="halvingDoubling")
    with pytest.raises(LibraInputError, match=r"algorithm \['ring'\] has 1 entries"):
        import_network_yaml(p, algorithm=["ring"])
    with pytest.raises(LibraInputError, match="cost tier"):
        import_network_yaml(p, cost_tiers=["InterNode"])


@pytest.mark.parametrize(
    "kwargs, needles",
    [
        (
            dict(bandwidth_gbps=[1.0, 2.0]),
            ["bandwidth_gbps", "2 entries", "4 dimensions"],
        ),
        (dict(bandwidth_gbps=[1.0, 0.0, 1.0, 1.0]), ["bandwidth_gbps[1]", "> 0"]),
        (dict(bandwidth_gbps=[1.0, 1.0, math.nan, 1.0]), ["bandwidth_gbps[2]", "nan"]),
        (dict(bandwidth_gbps=7.0), ["bandwidth_gbps must be a list"]),
        (dict(latency_ns=-1.0), ["latency_ns", ">= 0"]),
        (dict(latency_ns=[0.0, 0.0, math.inf, 0.0]), ["latency_ns[2]", "inf"]),
        (dict(latency_ns=[0.0]), ["latency_ns", "1 entries"]),
        (
            dict(algorithm="halvingDoubling"),
            ["algorithm of dimension 0", "halvingDoubling"],
        ),
        (dict(algorithm=["ring", "direct"]), ["algorithm", "2 entries"]),
        (dict(chunks=0), ["chunks is 0"]),
        (dict(chunks=2.0), ["chunks is 2.0"]),
        (dict(endpoint_delay_ns=-1), ["endpoint_delay_ns is -1"]),
        (dict(local_mem_bw_gbps=0), ["local_mem_bw_gbps is 0"]),
        (dict(gb_is_gib="yes"), ["gb_is_gib"]),
        (dict(network="RI(4)"), ["network must be a libra_jax Network"]),
    ],
)
def test_export_errors_name_the_field(tmp_path, kwargs, needles):
    args = dict(network=NET, bandwidth_gbps=BW, out_dir=tmp_path)
    args.update(kwargs)
    network, bw = args.pop("network"), args.pop("bandwidth_gbps")
    with pytest.raises(LibraInputError) as e:
        export_design(network, bw, **args)
    for needle in needles:
        assert needle in str(e.value), str(e.value)
    assert not (tmp_path / "network.yml").exists()


def test_export_unwritable_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(LibraInputError, match="cannot write the ASTRA-sim inputs"):
        export_design(NET, BW, out_dir=blocker / "sub")


@pytest.mark.parametrize(
    "yaml_text, libra_traffic_bytes, astra_ns",
    [
        # Rows of the shared ASTRA-sim 2.x microbenchmarks (analytical, congestion-
        # unaware; ring algorithm, no latency, endpoint delay 1 ns, free reductions):
        # all_reduce of 2^30 bytes on Ring(8) at link bandwidth 100, 1 chunk ...
        (
            "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 100 ]\n",
            [2 * 2**30 * 7 / 8],
            17502829,
        ),
        # ... and on Ring(4) x Switch(8) at 100 / 100, 16 chunks (pipelined: the
        # slowest dimension, dim 0, sets the time, as in LIBRA's model).
        (
            "topology: [ Ring, Switch ]\nnpus_count: [ 4, 8 ]\n"
            "bandwidth: [ 100, 100 ]\n",
            [2 * 2**30 * 3 / 4, 2 * (2**30 / 4) * 7 / 8],
            15002432,
        ),
    ],
)
def test_import_convention_matches_simulator(
    tmp_path, yaml_text, libra_traffic_bytes, astra_ns
):
    """Imported per-NPU bandwidth (1e9-byte GB/s) in LIBRA's model = ASTRA-sim's time.

    With 1e9 bytes per GB the link value 100 would predict a 1.0737x longer time; the
    remaining 0.02% is the simulator's per-message endpoint delay.
    """
    _, bw, _ = import_network_yaml(_write(tmp_path, yaml_text))
    libra_ns = max(t / b for t, b in zip(libra_traffic_bytes, bw, strict=True))
    assert libra_ns == pytest.approx(astra_ns, rel=2e-4)
    _, bw_1e9, _ = import_network_yaml(_write(tmp_path, yaml_text), gb_is_gib=False)
    libra_1e9_ns = max(t / b for t, b in zip(libra_traffic_bytes, bw_1e9, strict=True))
    assert libra_1e9_ns / astra_ns == pytest.approx(2**30 / 1e9, rel=2e-4)
