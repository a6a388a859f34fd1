"""ASTRA-sim's runtime as config keys (issue 33): every bad value is an error naming the key
and the value; the keys reach the timing model; the export writes the runtime into
system.json as the (locally patched) simulator reads it; the defaults change nothing."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from libra_jax.cli import config
from libra_jax.inputs import astrasim
from libra_jax.inputs.topology import network_from_lists
from libra_jax.studies import runtime
from libra_jax.studies.job import train as study
from libra_jax.types import LibraInputError


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def _timing(*overrides: str):
    cfg = _compose("conf=turing_nlg", "model=pipelined", *overrides)
    network, _, _, _ = config.to_inputs(cfg)
    return config.to_timing(cfg, network.num_dims, network)[0]


def test_defaults_are_astrasims_runtime():
    cfg = _compose()
    assert cfg.runtime == "fixed"
    s = cfg.system
    assert (s.inter_dim_scheduling, s.intra_dim_scheduling, s.collective_optimization,
            s.algorithm, s.active_chunks_per_dim) == (
        "ascending", "fifo", "local_bw_aware", None, 1)
    tm = _timing()
    assert tm.is_default_runtime
    assert not study.runtime_requested(config._as_config(cfg))


def test_keys_reach_the_timing_model():
    tm = _timing("system.inter_dim_scheduling=themis_flex",
                 "system.intra_dim_scheduling=smallest_first",
                 "system.collective_optimization=baseline",
                 "system.algorithm=[ring,direct,halving_doubling]",
                 "system.active_chunks_per_dim=2")
    assert (tm.inter_dim_scheduling, tm.intra_dim_scheduling, tm.collective_optimization,
            tuple(tm.algorithm), tm.active_chunks_per_dim) == (
        "themis_flex", "smallest_first", "baseline", ("ring", "direct", "halving_doubling"), 2)
    assert all(type(a) is str for a in tm.algorithm)
    assert not tm.is_default_runtime
    # all-ring is the default runtime: not routed to the runtime study
    c = config._as_config(_compose("conf=turing_nlg", "system.algorithm=[ring,ring,ring]"))
    assert not study.runtime_requested(c)
    c = config._as_config(_compose("conf=turing_nlg", "runtime=search"))
    assert study.runtime_requested(c)


@pytest.mark.parametrize("override, key, value", [
    ("system.inter_dim_scheduling=greedy", "system.inter_dim_scheduling", "greedy"),
    ("system.intra_dim_scheduling=lifo", "system.intra_dim_scheduling", "lifo"),
    ("system.collective_optimization=fast", "system.collective_optimization", "fast"),
    ("system.algorithm=[ring,tree,ring]", "system.algorithm[1]", "tree"),
    ("system.active_chunks_per_dim=many", "system.active_chunks_per_dim", "many"),
    ("runtime=auto", "runtime", "auto"),
    ("runtime_search.inter_dim_scheduling=[themis,best]",
     "runtime_search.inter_dim_scheduling[1]", "best"),
])
def test_bad_choice_names_key_and_value(override, key, value):
    """Refused by the schema (Hydra refuses the override on the command line the same way:
    ``Error merging override ...``, with the key and the value)."""
    with pytest.raises(LibraInputError) as e:
        config._as_config(OmegaConf.from_dotlist([override]))
    assert key in str(e.value) and value in str(e.value)
    with pytest.raises(Exception) as e:
        _compose("conf=turing_nlg", override)
    text = f"{e.value} {e.value.__cause__}"
    assert key.split("[")[0] in text and value in text


@pytest.mark.parametrize("overrides, key, value", [
    (["system.algorithm=[ring,direct]"], "system.algorithm", "2 entries"),
    (["system.active_chunks_per_dim=0"], "system.active_chunks_per_dim", "0"),
    (["model=libra", "system.inter_dim_scheduling=themis"], "system.inter_dim_scheduling",
     "model=pipelined"),
])
def test_bad_timing_value_names_key_and_value(overrides, key, value):
    cfg = _compose("conf=turing_nlg", "model=pipelined", *overrides)
    network, _, _, _ = config.to_inputs(cfg)
    with pytest.raises(LibraInputError) as e:
        config.to_timing(cfg, network.num_dims, network)
    assert key in str(e.value) and value in str(e.value)


NET = network_from_lists(["Ring", "FullyConnected", "Switch"], [4, 8, 16])


@pytest.mark.parametrize("kw, key, value", [
    (dict(inter_dim_scheduling=["themis", "fast"]), "runtime_search.inter_dim_scheduling[1]",
     "fast"),
    (dict(intra_dim_scheduling=["fifo", "fifo"]), "runtime_search.intra_dim_scheduling",
     "distinct"),
    (dict(collective_optimization=["nccl"]), "runtime_search.collective_optimization[0]",
     "nccl"),
    (dict(algorithm=[["ring"], ["ring"]]), "runtime_search.algorithm", "3 dimensions"),
    (dict(algorithm=[["ring"], ["tree"], ["ring"]]), "runtime_search.algorithm[1][0]", "tree"),
    (dict(active_chunks_per_dim=[1, 0]), "runtime_search.active_chunks_per_dim[1]", "0"),
])
def test_bad_candidate_lists(kw, key, value):
    tm = _timing()
    with pytest.raises(LibraInputError) as e:
        runtime.candidate_runtimes(tm, NET, **kw)
    assert key in str(e.value) and value in str(e.value)


def test_default_candidates():
    """ring plus the block's alternative (Ring: none, FC: direct, Switch: halving-doubling,
    direct where not a power of two), three schedulings; the default runtime first."""
    tm = _timing()
    assert runtime.default_algorithms(NET) == [["ring"], ["ring", "direct"],
                                               ["ring", "halving_doubling"]]
    odd = network_from_lists(["Switch", "Switch"], [8, 12])
    assert runtime.default_algorithms(odd) == [["ring", "halving_doubling"], ["ring", "direct"]]
    cands = runtime.candidate_runtimes(tm, NET)
    assert len(cands) == 3 * 4 and cands[0].is_default_runtime
    assert {c.inter_dim_scheduling for c in cands} == {"ascending", "themis", "round_robin"}
    two = runtime.candidate_runtimes(tm, NET, inter_dim_scheduling=["themis"],
                                     active_chunks_per_dim=[1, 2],
                                     algorithm=[["ring"], ["direct"], ["ring"]])
    assert [(c.algorithm, c.active_chunks_per_dim) for c in two] == [
        (("ring", "direct", "ring"), 1), (("ring", "direct", "ring"), 2)]


def _export(tmp_path, **kw):
    _, js = astrasim.export_design(NET, [100.0, 80.0, 40.0], out_dir=tmp_path, gb_is_gib=False,
                                   **kw)
    text = pathlib.Path(js).read_text()
    yml = (tmp_path / "network.yml").read_text()
    return json.loads(text), text, yml


def test_export_default_runtime_unchanged(tmp_path):
    """The default runtime, given or not, writes the same bytes as before (no scheduling
    keys, localBWAware, one active chunk, ring everywhere)."""
    _, before, yml_before = _export(tmp_path / "a")
    _, same, yml_same = _export(tmp_path / "b", algorithm=["ring"] * 3,
                                inter_dim_scheduling="ascending", intra_dim_scheduling="fifo",
                                collective_optimization="local_bw_aware",
                                active_chunks_per_dim=1)
    assert before == same and yml_before == yml_same
    assert "scheduling\"" not in before.replace("scheduling-policy\"", "")
    assert '"active-chunks-per-dimension": 1,' in before
    assert '"collective-optimization": "localBWAware"' in before


@pytest.mark.parametrize("inter, astra", [("themis", "offlineGreedy"),
                                          ("themis_flex", "offlineGreedyFlex"),
                                          ("round_robin", "roundRobin"),
                                          ("ascending", "ascending")])
def test_export_scheduling_keys(tmp_path, inter, astra):
    data, _, _ = _export(tmp_path, inter_dim_scheduling=inter,
                         intra_dim_scheduling="smallest_first",
                         collective_optimization="baseline", active_chunks_per_dim=3)
    assert data["inter-dimension-scheduling"] == astra
    assert data["intra-dimension-scheduling"] == "smallestFirst"
    assert data["collective-optimization"] == "baseline"
    assert data["active-chunks-per-dimension"] == 3
    assert list(data)[:3] == ["scheduling-policy", "inter-dimension-scheduling",
                              "intra-dimension-scheduling"]


def test_export_algorithms_and_link_bandwidth(tmp_path):
    """ASTRA-sim's names; doubleBinaryTree in the all-reduce list only (ring in the others);
    link = bw (ring, halving-doubling), bw / (n - 1) (direct), bw / 2 (binary tree)."""
    data, _, yml = _export(tmp_path, algorithm=["double_binary_tree", "direct",
                                                "halving_doubling"])
    assert data["all-reduce-implementation"] == ["doubleBinaryTree", "direct", "halvingDoubling"]
    for key in ("reduce-scatter-implementation", "all-gather-implementation",
                "all-to-all-implementation"):
        assert data[key] == ["ring", "direct", "halvingDoubling"]
    link = [float(x) for x in yml.split("bandwidth: [")[1].split("]")[0].split(",")]
    assert link == pytest.approx([100.0 / 2, 80.0 / 7, 40.0])
    net, bw, _ = astrasim.import_network_yaml(tmp_path / "network.yml", gb_is_gib=False,
                                              algorithm=["double_binary_tree", "direct",
                                                         "halving_doubling"])
    np.testing.assert_allclose(bw, [100.0, 80.0, 40.0])
    two = network_from_lists(["Ring", "Switch"], [2, 8])
    astrasim.export_design(two, [10.0, 10.0], out_dir=tmp_path / "two", gb_is_gib=False,
                           algorithm=["double_binary_tree", "ring"])
    assert "bandwidth: [ 10.0, 10.0 ]" in (tmp_path / "two" / "network.yml").read_text()


@pytest.mark.parametrize("kw, text", [
    (dict(inter_dim_scheduling="greedy"), "inter_dim_scheduling = 'greedy'"),
    (dict(intra_dim_scheduling="LIFO"), "intra_dim_scheduling = 'LIFO'"),
    (dict(collective_optimization="localBWAware"), "collective_optimization = 'localBWAware'"),
    (dict(active_chunks_per_dim=0), "active_chunks_per_dim is 0"),
    (dict(algorithm=["ring", "oneRing", "ring"]), "'oneRing'"),
])
def test_export_bad_runtime(tmp_path, kw, text):
    with pytest.raises(LibraInputError) as e:
        _export(tmp_path, **kw)
    assert text in str(e.value)


def test_export_power_of_two(tmp_path):
    odd = network_from_lists(["Ring", "Switch"], [4, 12])
    with pytest.raises(LibraInputError, match="dimension 1 is halving_doubling.*12"):
        astrasim.export_design(odd, [1.0, 1.0], out_dir=tmp_path,
                               algorithm=["ring", "halving_doubling"])
