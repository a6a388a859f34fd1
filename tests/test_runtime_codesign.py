"""The runtime co-design (issue 33, `libra_jax.studies.runtime`) on a tiny 2-dimension
workload: the certified bound is below the simulated objective, the gap is honest, the
search's table is consistent with its candidates, and libra-train writes result.json."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.cli import train as cli_train
from libra_jax.inputs.topology import network_from_lists
from libra_jax.inputs.workload import Workload
from libra_jax.model.problem import ConstraintSpec
from libra_jax.model.timing import TimingModel
from libra_jax.studies import runtime
from libra_jax.studies.job import train as study
from libra_jax.types import Collective, LibraInputError, float64

AR, NONE = int(Collective.ALLREDUCE), int(Collective.NONE)
NET = network_from_lists(["Ring", "Switch"], [4, 8])
# layer 0: a TP all-reduce on dim 0 in forward and input gradient; layer 1: a DP all-reduce
# over both dimensions in the weight gradient.
WL = Workload(name="tiny", layer_names=("l0", "l1"),
              compute_ns=np.array([[2e4, 2e4, 2e4], [3e4, 3e4, 3e4]]),
              collective=np.array([[AR, AR, NONE], [NONE, NONE, AR]], np.int32),
              size_bytes=np.array([[4e6, 4e6, 0.0], [0.0, 0.0, 3.2e7]]),
              communicator=np.array([[[4, -1], [4, -1], [-1, -1]],
                                     [[-1, -1], [-1, -1], [4, 8]]], np.int32),
              source="test")
SPEC = ConstraintSpec(total_bw_gbps=100.0)
RATES = np.array([1.0, 3.0])
TM = TimingModel(model="pipelined", chunks=2)


def _inputs(objective="perf"):
    return runtime.RuntimeInputs(NET, WL, RATES, SPEC, objective)


@float64
def _optimise(objective, tm):
    return runtime.optimise_for_runtime(_inputs(objective), tm, refine_evals=4)


@pytest.mark.parametrize("objective", ["perf", "perf_per_cost"])
@pytest.mark.parametrize("inter", ["themis", "round_robin"])
def test_optimise_for_runtime_bound_below_simulated(objective, inter):
    tm = dataclasses.replace(TM, inter_dim_scheduling=inter)
    o = _optimise(objective, tm)
    assert o.timing_model == tm
    assert o.bandwidth_gbps.sum() == pytest.approx(100.0, rel=1e-9)
    value, step = runtime.simulated_value(_inputs(objective), tm, o.bandwidth_gbps)
    assert (o.objective_value, o.step_time_ns) == pytest.approx((value, step), rel=1e-12)
    assert o.lower_bound is not None and o.lower_bound <= o.objective_value * (1 + 1e-9)
    assert o.gap == pytest.approx((o.objective_value - o.lower_bound) / o.lower_bound)
    assert o.gap >= -1e-9
    # the search starts from the model's optimum and the equal split: never worse than them
    for bw in (o.model_result.bandwidth_gbps, o.equal_split_gbps):
        assert o.objective_value <= runtime.simulated_value(_inputs(objective), tm, bw)[0] * (
            1 + 1e-12)
    assert 0 < o.searched <= 4 * NET.num_dims + 2


def test_bound_units():
    assert runtime.bound_in_objective_units("perf_per_watt", 2e9) == pytest.approx(2.0)
    assert runtime.bound_in_objective_units("perf", 5.0) == 5.0
    assert runtime.bound_in_objective_units("perf", None) is None
    assert runtime.bound_in_objective_units("perf", float("inf")) is None


@float64
def _search(objective):
    cands = runtime.candidate_runtimes(TM, NET, inter_dim_scheduling=["ascending", "themis"],
                                       algorithm=[["ring"], ["ring", "halving_doubling"]])
    return cands, runtime.search_runtime(_inputs(objective), TM, cands, refine_evals=3)


@pytest.mark.parametrize("objective", ["perf", "perf_per_cost"])
def test_search_runtime_table_consistent(objective):
    cands, s = _search(objective)
    inputs = _inputs(objective)
    assert len(s.candidates) == len(cands) == 4
    assert [o.timing_model for o in s.candidates] == cands
    assert s.optimum is s.candidates[s.best]
    values = [o.objective_value for o in s.candidates]
    assert s.optimum.objective_value == pytest.approx(min(values), rel=1e-9)
    assert s.lower_bound == min(o.lower_bound for o in s.candidates)
    assert s.lower_bound <= s.optimum.objective_value * (1 + 1e-9)
    assert s.gap == pytest.approx((s.optimum.objective_value - s.lower_bound) / s.lower_bound)
    rows = {r.name: r for r in s.rows}
    assert list(rows) == list(runtime.ROW_NAMES)
    default = rows["default"]
    assert default.timing_model.is_default_runtime
    for r in s.rows:  # each row is its runtime simulated at its design
        v, step = runtime.simulated_value(inputs, r.timing_model, r.bandwidth_gbps)
        assert (r.objective_value, r.step_time_ns) == pytest.approx((v, step), rel=1e-12)
        assert r.speedup == pytest.approx(default.step_time_ns / r.step_time_ns)
        assert r.gain == pytest.approx(default.objective_value / r.objective_value)
        assert r.network_cost_usd == pytest.approx(float(RATES @ r.bandwidth_gbps))
        assert r.timing_model in cands or r is default
    # the joint optimum is at least as good as every other row; LIBRA alone and runtime
    # alone choose the best candidate at their design (the default is a candidate)
    assert all(rows["joint optimum"].objective_value <= r.objective_value * (1 + 1e-9)
               for r in s.rows)
    assert rows["LIBRA alone"].objective_value <= default.objective_value * (1 + 1e-9)
    np.testing.assert_allclose(rows["LIBRA alone"].bandwidth_gbps, default.bandwidth_gbps)
    np.testing.assert_allclose(rows["runtime alone"].bandwidth_gbps, [50.0, 50.0])
    for row in ("LIBRA alone", "runtime alone"):
        r = rows[row]
        assert r.objective_value <= min(
            runtime.simulated_value(inputs, c, r.bandwidth_gbps)[0] for c in cands) * (1 + 1e-9)


def test_first_best_prefers_the_earlier_tie():
    assert runtime.first_best([3.0, 2.0 * (1 + 1e-12), 2.0]) == 1
    assert runtime.first_best([3.0, 2.1, 2.0]) == 2


def test_search_runs_refuse_bad_config():
    with pytest.raises(LibraInputError, match="no candidate runtime"):
        runtime.search_runtime(_inputs(), TM, [])


def _config(*overrides):
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["conf=turing_nlg", "model=pipelined",
                                                      "compilation_cache_dir=null",
                                                      *overrides])
    return config._as_config(cfg)


@float64
def test_train_writes_result_json(tmp_path):
    """libra-train's job with runtime=search: the table, result.json and the export of the
    chosen runtime."""
    c = _config("runtime=search", "runtime_search.inter_dim_scheduling=[ascending,themis]",
                "runtime_search.algorithm=[[ring],[ring],[ring,halving_doubling]]",
                "runtime_search.refine_evals=2", "export_astrasim=true")
    value = cli_train.train_runtime(c, tmp_path)
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["runtime_mode"] == "search" and data["objective"] == "perf"
    assert value == pytest.approx(data["step_time_ns"])
    table = data["runtime_search"]["table"]
    assert [r["name"] for r in table] == list(runtime.ROW_NAMES)
    assert len(data["runtime_search"]["candidates"]) == 4
    assert table[0]["step_time_ns"] == pytest.approx(data["step_time_ns"])
    assert data["lower_bound"] == min(x["lower_bound"] for x in data["runtime_search"]["candidates"])
    assert data["exact_optimality_gap"] >= 0
    assert data["lower_bound"] <= data["objective_value"]
    system = json.loads((tmp_path / "astrasim" / "system.json").read_text())
    rt = data["runtime"]
    algo = rt["algorithm"] or ["ring"] * 3
    assert system["all-reduce-implementation"] == [
        {"halving_doubling": "halvingDoubling"}.get(a, a) for a in algo]
    if rt["inter_dim_scheduling"] == "themis":
        assert system["inter-dimension-scheduling"] == "offlineGreedy"
    else:
        assert "inter-dimension-scheduling" not in system


@float64
def test_train_fixed_runtime(tmp_path):
    c = _config("system.inter_dim_scheduling=round_robin", "runtime_search.refine_evals=2")
    cli_train.train_runtime(c, tmp_path)
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["runtime_mode"] == "fixed" and data["runtime_search"] is None
    assert data["runtime"]["inter_dim_scheduling"] == "round_robin"
    assert data["lower_bound"] <= data["objective_value"] and data["exact_optimality_gap"] >= 0


def test_runtime_needs_pipelined():
    with pytest.raises(LibraInputError, match="runtime=search with model=libra"):
        study.train(_config("model=libra", "runtime=search"))


def test_candidates_include_chunk_counts():
    """``runtime_search.chunks`` multiplies the candidates (the chunk count outermost)."""
    net = network_from_lists(["Ring", "Switch"], [4, 8], source="t")
    tm = TimingModel(model="pipelined", chunks=4)
    one = runtime.candidate_runtimes(tm, net, inter_dim_scheduling=["ascending", "themis"],
                                     algorithm=[["ring"], ["ring"]])
    two = runtime.candidate_runtimes(tm, net, inter_dim_scheduling=["ascending", "themis"],
                                     algorithm=[["ring"], ["ring"]], chunks=[1, 8])
    assert [c.chunks for c in one] == [4, 4]
    assert [(c.chunks, c.inter_dim_scheduling) for c in two] == [
        (1, "ascending"), (1, "themis"), (8, "ascending"), (8, "themis")]
    with pytest.raises(LibraInputError, match=r"runtime_search.chunks\[1\] = 0"):
        runtime.candidate_runtimes(tm, net, chunks=[2, 0])
    with pytest.raises(LibraInputError, match="runtime_search.chunks"):
        runtime.candidate_runtimes(tm, net, chunks=[2, 2])


def test_codesign_study_case():
    """`experiments/codesign_study.py`'s row on a small case: the speed-ups are consistent
    (the joint optimum is at least as fast as LIBRA's design with its best runtime, which is
    at least LIBRA's design with the default runtime, up to the search's tolerance)."""
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
    import codesign_study as cs
    r = float64(cs.run_case)("dlrm", "perf", 1.0, True, 1)
    assert r["candidates"] == 3 and r["network"] == "RI(16)_FC(8)_SW(32)"
    assert r["both"] >= r["libra_then_runtime"] * (1 - 1e-9)
    assert r["libra_then_runtime"] >= r["design_only"] * (1 - 1e-9)
    assert r["design_only"] > 1.0 and r["runtime_only"] >= 1.0 - 1e-9
    assert r["gap"] is not None and r["gap"] >= -1e-6
