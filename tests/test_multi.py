"""Multi-workload optimisation (libra_jax/multi.py): exactness against cvxpy, the merging
identity, the robust (worst-slowdown) design, and the CLI (`conf=multi_llm`)."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import subprocess
import sys

import cvxpy as cp
import jax.numpy as jnp
import numpy as np
import pytest
from reference_cvxpy import PerfReference, RefConstraints, _solve

from libra_jax.cli.report import MULTI_WORKLOAD_KEYS, RESULT_KEYS
from libra_jax.inputs.cost import cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_workload
from libra_jax.model import objective as model
from libra_jax.model.problem import ConstraintSpec, build_problem
from libra_jax.studies import multi
from libra_jax.types import LibraInputError

REPO = pathlib.Path(__file__).resolve().parents[1]
DATA = REPO / "libra_jax" / "data" / "libra_inputs"
LLMS = (("GPT_3", "GPT_3_4d.yml"), ("Turing_NLG", "Turing_NLG_4D.yml"),
        ("MSFT_1T", "MSFT_1T_4d.yml"))
TOTAL = 500.0
SPEC = ConstraintSpec(total_bw_gbps=TOTAL)
# The same constraint set for the reference, built independently: sum(bw) == 500, bw >= 0.
REF_CONS = RefConstraints(lo=np.zeros(4), hi=np.full(4, np.inf), a_eq=np.ones((1, 4)),
                          b_eq=np.array([TOTAL]), a_in=np.zeros((0, 4)), b_in=np.zeros(0))


@functools.lru_cache(maxsize=None)
def _inputs():
    net = load_network_file(str(DATA / "network" / "4d_network.yml"))
    rates = np.asarray(cost_rates_usd_per_gbps(
        net, load_cost_model(str(DATA / "cost_model" / "4d_cost_model.yml"))), np.float64)
    problems = [
        build_problem(net, load_workload(str(DATA / "workload" / f"{w}.txt"),
                                         str(DATA / "communicator" / c), 4), rates, SPEC)
        for w, c in LLMS
    ]
    return problems, rates


@functools.lru_cache(maxsize=None)
def _solved(objective, weights=None):
    problems, rates = _inputs()
    return multi.solve_multi(problems, [w for w, _ in LLMS], weights, objective, rates, SPEC)


def _steps(bw, problems):
    return np.array([float(model.step_time_s(jnp.asarray(bw), p)) for p in problems])


def _ref_weighted_sum(weights):
    """cvxpy optimum of sum_i w_i step_i (all phases of all workloads, unmerged), scaled."""
    problems, _ = _inputs()
    traffic = np.concatenate([np.asarray(p.traffic_gb) for p in problems])
    weight = np.concatenate([w * np.asarray(p.weight) for w, p in zip(weights, problems)])
    compute = sum(w * float(p.compute_s) for w, p in zip(weights, problems))
    bw = PerfReference(traffic, weight, compute, REF_CONS).solve()
    return bw, float(np.dot(weights, _steps(bw, problems)))


@pytest.mark.parametrize("weights", [None, (3.0, 1.0, 0.5)], ids=["uniform", "weighted"])
def test_weighted_sum_matches_cvxpy(weights):
    problems, _ = _inputs()
    r = _solved("sum_time", weights)
    w = np.ones(3) if weights is None else np.asarray(weights)
    _, ref = _ref_weighted_sum(w)
    ours = r.objective_value / 1e9
    assert r.status == "ok"
    assert ours <= ref * (1 + 1e-6)
    assert r.lower_bound / 1e9 <= ref * (1 + 1e-9)
    assert r.optimality_gap <= 1e-6
    # The objective is the weighted sum of the workloads' own step times at the design.
    assert ours == pytest.approx(float(w @ _steps(r.bandwidth_gbps, problems)), rel=1e-12)
    assert sum(r.bandwidth_gbps) == pytest.approx(TOTAL, rel=1e-9)
    for o, p in zip(r.workloads, problems):
        # a shared design never beats a workload's own optimum (up to its certified gap)
        assert o.step_time_ns >= o.own_optimum_step_time_ns * (1 - 1e-6)
        assert o.own_status == "ok"
    assert r.objective_value <= r.baseline_objective_value


def test_merging_identity():
    problems, rates = _inputs()
    rng = np.random.default_rng(0)
    for weights in ([1.0, 1.0, 1.0], [0.3, 2.0, 0.0], [1.0, 5.0, 0.25]):
        merged = multi.merge_problems(problems, weights, rates, SPEC)
        for _ in range(5):
            bw = rng.uniform(1.0, 300.0, 4)
            lhs = float(model.step_time_s(jnp.asarray(bw), merged))
            rhs = float(np.dot(weights, _steps(bw, problems)))
            assert lhs == pytest.approx(rhs, rel=1e-12)
    # Identical phases merge (weights summed): the same workload twice has its own K.
    twice = multi.merge_problems([problems[0], problems[0]], [1.0, 2.0], rates, SPEC)
    assert twice.traffic_gb.shape == problems[0].traffic_gb.shape
    np.testing.assert_allclose(np.asarray(twice.weight), 3 * np.asarray(problems[0].weight))


def test_bad_weights_and_networks():
    problems, rates = _inputs()
    with pytest.raises(LibraInputError, match="3 workloads"):
        multi.merge_problems(problems, [1.0, 1.0], rates, SPEC)
    with pytest.raises(LibraInputError, match=">= 0"):
        multi.merge_problems(problems, [1.0, -1.0, 1.0], rates, SPEC)
    with pytest.raises(LibraInputError, match="> 0"):
        multi.merge_problems(problems, [0.0, 0.0, 0.0], rates, SPEC)
    other = build_problem(
        load_network_file(str(DATA / "network" / "4d_network.yml")),
        load_workload(str(DATA / "workload" / "GPT_3.txt"),
                      str(DATA / "communicator" / "GPT_3_4d.yml"), 4),
        rates, ConstraintSpec(total_bw_gbps=400.0))
    with pytest.raises(LibraInputError, match="must share the network"):
        multi.merge_problems([problems[0], other], None, rates, SPEC)


def _ref_worst_slowdown(own_s):
    """cvxpy optimum of max_i step_i / own_i (scaled: bw / 125, times / typical phase)."""
    problems, _ = _inputs()
    sb = TOTAL / 4
    y = cp.Variable(4)
    s = cp.Variable()
    cons = [y >= 1e-8, cp.sum(y) == TOTAL / sb]
    for p, own in zip(problems, own_s):
        t = np.asarray(p.traffic_gb)
        w = np.asarray(p.weight)
        st = float(np.max(t)) / sb
        tau = cp.Variable(t.shape[0])
        rows, cols = np.nonzero(t > 0)
        cons.append(tau[rows] >= cp.multiply(t[rows, cols] / (sb * st), cp.inv_pos(y[cols])))
        cons.append((float(p.compute_s) + st * (w @ tau)) / own <= s)
    prob = cp.Problem(cp.Minimize(s), cons)
    assert _solve(prob) in ("optimal", "optimal_inaccurate")
    bw = np.asarray(y.value) * sb
    bw = bw + (TOTAL - bw.sum()) / 4  # exact onto the equality row
    return float(np.max(_steps(bw, problems) / own_s))


def test_worst_slowdown():
    problems, _ = _inputs()
    r = _solved("worst_slowdown")
    own_s = np.array([o.own_optimum_step_time_ns for o in r.workloads]) / 1e9
    slow = _steps(r.bandwidth_gbps, problems) / own_s
    s_star = r.objective_value
    assert r.status == "ok"
    assert s_star >= 1.0
    assert np.all(slow <= s_star * (1 + 1e-9))
    assert s_star == pytest.approx(float(np.max(slow)), rel=1e-12)
    assert r.optimality_gap <= 1e-6
    assert r.lower_bound <= s_star
    # no worse than the weighted-sum design on this objective
    ws = _solved("sum_time")
    assert s_star <= max(o.slowdown for o in ws.workloads) * (1 + 1e-12)
    ref = _ref_worst_slowdown(own_s)
    assert s_star <= ref * (1 + 1e-6)
    assert r.lower_bound <= ref * (1 + 1e-9)


# ----------------------------------------------------------------------------------------
# CLI


def _train(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "libra_jax.train", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_cli_multi_llm(tmp_path):
    run_dir = tmp_path / "run"
    proc = _train("conf=multi_llm", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for words in ("GPT_3", "Turing_NLG", "MSFT_1T", "shared design", "own optimum",
                  "equal split", "status"):
        assert words in proc.stdout
    result = json.loads((run_dir / "result.json").read_text())
    assert tuple(result)[:len(RESULT_KEYS)] == RESULT_KEYS
    assert result["status"] == "ok"
    assert result["objective"] == "sum_time"
    ref = _solved("sum_time")
    assert result["objective_value"] == pytest.approx(ref.objective_value, rel=1e-9)
    assert [w["name"] for w in result["workloads"]] == [w for w, _ in LLMS]
    for entry in result["workloads"]:
        assert set(MULTI_WORKLOAD_KEYS) <= set(entry)
        assert entry["weight"] == 1.0
    total = sum(e["weight"] * e["step_time_ns"] for e in result["workloads"])
    assert total == pytest.approx(result["objective_value"], rel=1e-12)


def test_cli_bad_input(tmp_path):
    proc = _train("conf=multi_llm", "workload.file=workload/GPT_3.txt",
                  f"hydra.run.dir={tmp_path / 'both'}", cwd=tmp_path)
    assert proc.returncode != 0
    assert "error:" in proc.stderr and "workload.file" in proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads((tmp_path / "both" / "result.json").read_text())
    assert result["status"] == "error"
    # One process, two jobs: a weights length mismatch and a negative weight.
    proc = _train("-m", "conf=multi_llm", "weights=[1,1],[1,-1,1]",
                  f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "error: weights = [1.0, 1.0]: has 2 entries but there are 3 workloads" in proc.stderr
    assert "error: weights[1] = -1.0" in proc.stderr
