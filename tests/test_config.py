"""Hydra configs: every preset composes and builds its inputs; network forms; path rules."""

from __future__ import annotations

import pathlib
import shutil

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.inputs import LIBRA_INPUTS_DIR
from libra_jax.types import LibraInputError

REPO = pathlib.Path(__file__).resolve().parents[1]
PRESETS = config.presets()
TIERS_3D = ["InterPackage", "InterNode", "InterPod"]


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_presets_found():
    expected = {
        f"{w}{s}"
        for w in ("gpt3", "turing_nlg", "msft_1t", "resnet50", "dlrm")
        for s in ("", "_4d")
    } | {"gpt3_4d_multi"}
    assert expected <= set(PRESETS)


#: Real systems on the technology catalogue (tests/test_technologies.py checks them).
REAL_SYSTEMS = ("h100_dgx", "gb200_nvl72", "tpu_v4")


#: Serving fleets (tests/test_serving.py runs them): libra-train's serving job, no one step.
SERVING = ("serving_llama3_70b", "serving_deepseek_v3")


@pytest.mark.parametrize("name", [p for p in PRESETS if p not in REAL_SYSTEMS + SERVING])
def test_preset_builds_inputs(name):
    cfg = _compose(f"conf={name}")
    if config.is_multi(cfg):
        network, entries, weights, rates, spec, _ = config.to_multi_inputs(cfg)
        assert network.num_dims == 4 and len(entries) == 3 and spec.total_bw_gbps == 500.0
        return
    network, workload, rates, spec = config.to_inputs(cfg)
    dims = 4 if ("_4d" in name or name.endswith("_cosearch")) else 3  # co-search: 4D
    assert network.num_dims == dims
    assert network.num_npus == 4096
    assert rates is not None and rates.shape == (dims,)
    assert np.all(np.isfinite(rates)) and np.all(rates > 0)
    assert workload.communicator.shape[-1] == dims
    assert spec.total_bw_mode == "eq"
    if name.endswith("_multi"):
        assert spec.total_bw_gbps == 1000.0
        assert list(spec.linear) == [
            "bw[0] == 500",
            "bw[0] >= bw[1]",
            "bw[1] >= bw[2]",
            "bw[2] + bw[3] == 200",
        ]
    else:
        assert spec.total_bw_gbps == 500.0
        assert list(spec.linear) == []
    assert cfg.objective == "perf"


def test_default_config_has_every_key():
    cfg = _compose()
    assert set(cfg) == {
        "network", "cost_model", "workload", "constraints", "objective", "solver",
        "workloads", "weights", "multi_objective", "cosearch", "model", "schedule",
        "training_loop", "system", "bandwidth_gbps", "export_astrasim", "compilation_cache_dir",
        "power", "reference_bw_gbps", "runtime", "runtime_search",
    }
    assert cfg.runtime == "fixed"
    assert cfg.power.npu_w == 0.0 and cfg.reference_bw_gbps is None
    assert cfg.constraints.max_power_w is None and cfg.network.span_m is None
    assert cfg.solver.method == "ipm" and cfg.workloads is None
    assert (cfg.model, cfg.schedule, cfg.training_loop) == ("libra", "pipelined", "no_overlap")
    assert set(cfg.system) == {"chunks", "endpoint_delay_ns", "local_mem_bw_gbps", "gb_is_gib",
                               "queue_policy", "queues_per_dim", "network_backend",
                               "max_inflight_collectives", "inter_dim_scheduling",
                               "intra_dim_scheduling", "collective_optimization", "algorithm",
                               "active_chunks_per_dim", "whole_ns"}
    assert (cfg.system.inter_dim_scheduling, cfg.system.intra_dim_scheduling,
            cfg.system.collective_optimization, cfg.system.algorithm,
            cfg.system.active_chunks_per_dim, cfg.system.whole_ns) == (
        "ascending", "fifo", "local_bw_aware", None, 1, False)
    assert set(cfg.network) == {"file", "notation", "topology", "npus", "cost_tiers",
                                "latency_ns", "span_m"}
    assert set(cfg.cost_model) == {"file"}
    assert set(cfg.workload) == {
        "file", "communicator_file", "generator", "model", "parallel", "npu", "chakra_et",
        "comm_groups",
    }
    assert set(cfg.constraints) == {
        "total_bw_gbps",
        "total_bw_mode",
        "lower_gbps",
        "upper_gbps",
        "linear",
        "max_cost_usd",
        "max_power_w",
        "max_ttft_ms",
        "max_tpot_ms",
    }
    assert cfg.constraints.max_ttft_ms is None and cfg.constraints.max_tpot_ms is None
    assert cfg.constraints.total_bw_gbps is None and list(cfg.constraints.linear) == []


@pytest.mark.parametrize(
    "network_overrides",
    [
        ['network.notation="RI(16)_FC(8)_SW(32)"'],
        ["network.topology=[Ring,FullyConnected,Switch]", "network.npus=[16,8,32]"],
    ],
    ids=["notation", "inline"],
)
def test_other_network_forms_match_file(network_overrides):
    _, _, file_rates, _ = config.to_inputs(_compose("conf=turing_nlg"))
    cfg = _compose(
        "conf=turing_nlg",
        "network.file=null",
        f"network.cost_tiers=[{','.join(TIERS_3D)}]",
        *network_overrides,
    )
    network, _, rates, _ = config.to_inputs(cfg)
    assert network.blocks == ("Ring", "FullyConnected", "Switch")
    assert network.npus == (16, 8, 32)
    assert network.notation == "RI(16)_FC(8)_SW(32)"
    np.testing.assert_allclose(rates, file_rates, rtol=1e-12)


def test_notation_without_cost_model_gives_no_rates():
    cfg = _compose(
        "conf=turing_nlg",
        "network.file=null",
        'network.notation="RI(16)_FC(8)_SW(32)"',
        "cost_model.file=null",
    )
    network, _, rates, _ = config.to_inputs(cfg)
    assert network.cost_tiers is None and rates is None


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["network.file=null"], ["exactly one", "none is set"]),
        (
            ['network.notation="RI(16)_FC(8)_SW(32)"'],
            ["exactly one", "network.file", "network.notation"],
        ),
        (["network.npus=[16,8,32]"], ["network.npus", "network.topology"]),
        (
            ["network.file=null", "network.topology=[Ring,FullyConnected,Switch]"],
            ["network.npus"],
        ),
        ([f"network.cost_tiers=[{','.join(TIERS_3D)}]"], ["network.cost_tiers"]),
    ],
    ids=["none", "two", "npus-without-topology", "topology-without-npus", "tiers-with-file"],
)
def test_exactly_one_network_source(overrides, words):
    cfg = _compose("conf=turing_nlg", *overrides)
    with pytest.raises(LibraInputError) as info:
        config.to_inputs(cfg)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize(
    "overrides, words",
    [
        (["cost_model.file=null", "objective=perf_per_cost"], ["perf_per_cost", "cost_model"]),
        (["cost_model.file=null", "constraints.max_cost_usd=1e6"], ["max_cost_usd", "cost_model"]),
        (["workload.file=null"], ["workload.file"]),
    ],
    ids=["ppc-without-cost", "budget-without-cost", "no-workload"],
)
def test_inconsistent_inputs_name_the_key(overrides, words):
    cfg = _compose("conf=turing_nlg", *overrides)
    with pytest.raises(LibraInputError) as info:
        config.to_inputs(cfg)
    for word in words:
        assert word in str(info.value)


def test_missing_file_names_key_and_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _compose("conf=turing_nlg", "workload.communicator_file=communicator/nope.yml")
    with pytest.raises(LibraInputError) as info:
        config.to_inputs(cfg)
    message = str(info.value)
    assert "workload.communicator_file" in message and "communicator/nope.yml" in message
    assert str(tmp_path) in message and str(LIBRA_INPUTS_DIR) in message


def test_relative_paths_try_working_dir_first(tmp_path, monkeypatch):
    # A file of the same relative name in the working directory wins over the shipped one.
    (tmp_path / "network").mkdir()
    shipped = LIBRA_INPUTS_DIR / "network" / "3d_network.yml"
    text = shipped.read_text().replace(
        "Topology: [ Ring, FullyConnected, Switch ]", "Topology: [ Ring, Ring, Switch ]"
    )
    assert text != shipped.read_text()
    (tmp_path / "network" / "3d_network.yml").write_text(text)
    monkeypatch.chdir(tmp_path)
    network, _, _, _ = config.to_inputs(_compose("conf=turing_nlg"))
    assert network.blocks == ("Ring", "Ring", "Switch")
    # Without it, the shipped input is used; an explicit base_dir works the same way.
    network, _, _, _ = config.to_inputs(_compose("conf=turing_nlg"), base_dir=REPO)
    assert network.blocks == ("Ring", "FullyConnected", "Switch")


def test_absolute_paths(tmp_path):
    src = LIBRA_INPUTS_DIR / "workload" / "Turing_NLG.txt"
    dst = tmp_path / "my_workload.txt"
    shutil.copy(src, dst)
    _, workload, _, _ = config.to_inputs(_compose("conf=turing_nlg", f"workload.file={dst}"))
    assert workload.name == "my_workload"
