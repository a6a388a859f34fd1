"""Experiments 1-3 (speed-up, perf-per-cost, Pareto front): configs compose and tiny runs work.

Each script's ``main`` runs on a tiny grid (one workload, one network, two budgets / four cost
caps) into tmp_path; the Markdown table and PNGs must exist and the numbers be sane.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments"


def _module(name: str):
    if str(EXP) not in sys.path:
        sys.path.insert(0, str(EXP))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXP / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["speedup", "perf_per_cost", "pareto"])
def test_configs_compose(name):
    common = _module("speedup")
    cfg = common.load_experiment(name)
    assert cfg.name == name
    assert (ROOT / "experiments" / "conf" / f"{name}.yaml").exists()
    if name == "pareto":
        assert [list(c) for c in cfg.cases] == [["turing_nlg", "3d"], ["msft_1t", "4d"]]
        assert cfg.total_bw_mode == "le" and cfg.objective == "perf"
    else:
        assert list(cfg.workloads) == ["gpt3", "turing_nlg", "msft_1t", "resnet50", "dlrm"]
        assert list(cfg.networks) == ["3d", "4d"]
        budgets = list(cfg.budgets_gbps)
        assert len(budgets) >= 8 and min(budgets) == 50 and max(budgets) == 1000
        assert cfg.objective == ("perf" if name == "speedup" else "perf_per_cost")
    # Command-line style overrides work.
    over = common.load_experiment(name, ["output_dir=/tmp/x", "name=tiny"])
    assert over.output_dir == "/tmp/x" and over.name == "tiny"
    # Every case maps to a shipped preset.
    pairs = ([tuple(c) for c in cfg.cases] if name == "pareto"
             else [(w, n) for w in cfg.workloads for n in cfg.networks])
    for w, n in pairs:
        assert (ROOT / "conf" / "conf" / f"{w}{common.NETWORK_SUFFIX[n]}.yaml").exists()


def _tiny(tmp_path):
    return ["workloads=[turing_nlg]", "networks=[3d]", "budgets_gbps=[100,500]",
            f"output_dir={tmp_path}"]


def test_speedup_tiny(tmp_path):
    rows = _module("speedup").main(_tiny(tmp_path))
    assert len(rows) == 2
    for r in rows:
        assert r["status"] == "ok"
        assert r["speedup"] >= 1 - 1e-9
        assert np.sum(r["bw"]) == pytest.approx(r["budget"], rel=1e-9)
        assert r["case"].notation == "RI(16)_FC(8)_SW(32)"
    # Less bandwidth -> communication matters more -> larger speed-up.
    assert rows[0]["speedup"] > rows[1]["speedup"]
    # 500 GB/s matches the pinned optimum (tests/fixtures/libra_optima.json).
    assert rows[1]["step_ms"] == pytest.approx(330.62561184092846, rel=1e-6)
    md = (tmp_path / "speedup.md").read_text()
    assert "RI(16)_FC(8)_SW(32)" in md and "Turing-NLG" in md
    for png in ("speedup_speedup.png", "speedup_bandwidth_3d.png"):
        assert (tmp_path / png).stat().st_size > 1000


def test_perf_per_cost_tiny(tmp_path):
    rows = _module("perf_per_cost").main(_tiny(tmp_path))
    assert len(rows) == 2
    for r in rows:
        assert r["status"] == "ok"
        assert r["gain"] >= 1 - 1e-9  # never worse than the equal split in time x cost
        assert r["txc"] <= r["perf_txc"] * (1 + 1e-9)  # nor than the perf optimum
        assert r["step_ms"] >= r["perf_ms"] * (1 - 1e-9)  # never faster than the perf optimum
        assert np.sum(r["bw"]) == pytest.approx(r["budget"], rel=1e-9)
    md = (tmp_path / "perf_per_cost.md").read_text()
    assert "slower" in md or "faster" in md
    for png in ("perf_per_cost_ratios.png", "perf_per_cost_bandwidth_3d.png"):
        assert (tmp_path / png).stat().st_size > 1000


def test_pareto_tiny(tmp_path):
    res = _module("pareto").main(["cases=[[turing_nlg,3d]]", "num_caps=4",
                                  f"output_dir={tmp_path}"])
    (r,) = res
    le = r["le"]
    assert all(s == "ok" for s in le["status"] + r["eq"]["status"])
    steps, costs = np.array(le["step_ms"]), np.array(le["cost"])
    assert np.all(costs <= r["caps"] * (1 + 1e-9))
    assert np.all(np.diff(steps) <= 1e-9 * steps[0])  # more money, never slower
    perf, ppc, base = r["perf"], r["ppc"], r["base"]
    assert steps[-1] == pytest.approx(perf.step_time_ns / 1e6, rel=1e-8)  # cap = perf cost
    assert perf.step_time_ns <= base.step_time_ns and perf.step_time_ns <= ppc.step_time_ns
    assert ppc.time_x_cost <= min(perf.time_x_cost, base.time_x_cost) * (1 + 1e-9)
    # The front (sum <= budget) at the perf-per-cost design's cost is at least as fast.
    assert r["le_at_ppc"].step_time_ns <= ppc.step_time_ns * (1 + 1e-9)
    assert "perf-per-cost optimum" in (tmp_path / "pareto.md").read_text()
    assert (tmp_path / "pareto.png").stat().st_size > 1000
