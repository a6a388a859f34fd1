"""experiments/physical_study.py (issue 19, point 8): one small case solved and checked by
hand against the technology catalogue, and the shipped results.csv checked for completeness."""

from __future__ import annotations

import csv
import importlib.util
import math
import pathlib
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "experiments" / "physical_study.py"
RESULTS = REPO / "experiments" / "results" / "physical_study"
CATALOGUE = REPO / "libra_jax" / "data" / "technologies.yaml"


@pytest.fixture(scope="module")
def study():
    if "physical_study" in sys.modules:
        return sys.modules["physical_study"]
    spec = importlib.util.spec_from_file_location("physical_study", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["physical_study"] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _w_per_gbps(n_npus: int, tier: dict) -> float:
    """N x 0.008 x pJ/bit of a tier on a Switch dimension, from the catalogue itself."""
    e = tier["Energy"]
    return n_npus * 8e9 * 1e-12 * (e["Link"] + e["Switch"] + e.get("Nic", 0.0))


def _usd_per_gbps(n_npus: int, tier: dict) -> float:
    return n_npus * (tier["Link"] + tier["Switch"] + tier.get("Nic", 0.0))


def test_small_case_by_hand(study):
    cat = yaml.safe_load(CATALOGUE.read_text())
    npu_w = yaml.safe_load((REPO / "libra_jax/conf/conf/gb200_nvl72.yaml").read_text())[
        "power"]["npu_w"]
    techs = ["CopperDAC", "CoPackagedOptics"]
    rows = study.run_study(scenarios=["rack"], workloads=["moe"], technologies=techs,
                           budgets=[("medium", 0.75)], ppw=False, variants=(),
                           log=lambda *_: None)
    ref = [r for r in rows if r["objective"] == "reference"]
    assert len(ref) == 1
    n = 32
    up = cat["ScaleUpSerDes"]
    dsp = cat["DspOptics800G"]
    p_ref = _w_per_gbps(n, up) * 900 + _w_per_gbps(n, dsp) * 50
    assert ref[0]["network_power_w"] == pytest.approx(p_ref, rel=1e-12)
    cap = 0.75 * p_ref
    solved = [r for r in rows if r["objective"] == "perf"]
    assert [r["technology"] for r in solved] == techs
    for r in solved:
        out = cat[r["scaleout_tier"]]
        bw0, bw1 = r["bw_scaleup_gbps"], r["bw_scaleout_gbps"]
        power = _w_per_gbps(n, up) * bw0 + _w_per_gbps(n, out) * bw1
        assert r["network_power_w"] == pytest.approx(power, rel=1e-9)
        assert r["network_cost_usd"] == pytest.approx(
            _usd_per_gbps(n, up) * bw0 + _usd_per_gbps(n, out) * bw1, rel=1e-9)
        assert r["power_cap_w"] == pytest.approx(cap, rel=1e-12)
        assert r["network_power_w"] <= cap * (1 + 1e-9)
        assert r["total_power_w"] == pytest.approx(n * npu_w + power, rel=1e-9)
        assert r["energy_per_step_j"] == pytest.approx(
            r["step_time_ms"] / 1e3 * (n * npu_w + power), rel=1e-9)
        assert r["status"] == "ok"
        assert r["optimality_gap"] <= 1e-6
        # the tiers' MaxGbps bound the bandwidths
        assert bw0 <= up["MaxGbps"] * (1 + 1e-9) and bw1 <= out["MaxGbps"] * (1 + 1e-9)
        assert r["scaleout_upper_binds"] == (bw1 >= out["MaxGbps"] * (1 - 1e-6))
    # copper's lower pJ/bit but 100 GB/s port vs CPO's 200 GB/s: the MoE hits copper's port
    cu, cpo = solved
    assert cu["scaleout_upper_binds"] and cpo["bw_scaleout_gbps"] > 100


def test_copper_refused_beyond_reach(study):
    reason = study.reach_problem(study.SCENARIOS["row"], "CopperDAC")
    assert reason.startswith("does not reach (span 30 m > reach 3 m)")
    assert study.reach_problem(study.SCENARIOS["rack"], "CopperDAC") is None


def test_shipped_results_complete(study):
    path = RESULTS / "results.csv"
    assert path.exists(), "run python experiments/physical_study.py"
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == study.COLUMNS
        rows = list(reader)
    for name in ("table.md", "plot.png", "run_info.json"):
        assert (RESULTS / name).exists()
    cat = yaml.safe_load(CATALOGUE.read_text())
    key = {}
    for r in rows:
        k = (r["scenario"], r["workload"], r["technology"], r["objective"], r["budget"])
        assert k not in key, f"duplicate row {k}"
        key[k] = r
    for s, sc in study.SCENARIOS.items():
        for wl in study.WORKLOADS:
            assert key[(s, wl, study.REFERENCE_TIER, "reference", "shipped")]["status"] == \
                "evaluated"
            for tech in study.TECHNOLOGIES:
                reaches = sc.span_m[1] <= cat[tech]["ReachM"]
                entries = [key[(s, wl, tech, "perf", b)] for b, _ in study.BUDGETS]
                entries.append(key[(s, wl, tech, "perf_per_watt", "none")])
                for r in entries:
                    if not reaches:
                        assert r["status"] == "no_reach" and "does not reach" in r["note"]
                        continue
                    assert r["status"] == "ok", (s, wl, tech, r["budget"])
                    assert float(r["optimality_gap"]) <= 1e-6
                    if r["objective"] == "perf":
                        assert float(r["network_power_w"]) <= float(r["power_cap_w"]) * (1 + 1e-9)
                    assert math.isclose(
                        float(r["energy_per_step_j"]),
                        float(r["step_time_ms"]) / 1e3 * float(r["total_power_w"]),
                        rel_tol=1e-9)
