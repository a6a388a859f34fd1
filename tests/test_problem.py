"""Tests for libra_jax.model.problem: phase merging, traffic of shipped inputs, input errors,
implicit equalities and the equal-split baseline."""

from pathlib import Path

import numpy as np
import pytest

from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_workload
from libra_jax.model.problem import (
    ConstraintSpec,
    build_problem,
    merge_phases,
    problem_from_arrays,
    problems_from_stacked,
)
from libra_jax.solvers.solve import equal_split, solve
from libra_jax.types import LibraInputError

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "libra_jax" / "data" / "libra_inputs"


def _gpt3_4d(spec):
    net = load_network_file(INPUTS / "network" / "4d_network.yml")
    wl = load_workload(INPUTS / "workload" / "GPT_3.txt",
                       INPUTS / "communicator" / "GPT_3_4d.yml", num_dims=4)
    return build_problem(net, wl, None, spec), wl


def _arrays(spec, traffic=((1.0, 1.0),), rates=None):
    t = np.asarray(traffic, np.float64)
    return problem_from_arrays(t, np.ones(t.shape[0]), 0.0, rates, spec)


# --------------------------------------------------------------------------- merge_phases


def test_merge_phases_merges_identical_and_drops_zero():
    traffic = np.array([
        [1.0, 2.0, 0.0],
        [0.0, 0.0, 0.0],  # moves nothing: dropped
        [3.0, 0.0, 0.0],
        [1.0, 2.0, 0.0],
        [0.0, 0.0, 0.0],
        [1.0, 2.0, 0.0],
        [3.0, 0.0, 0.0],
        [0.0, 0.0, 5.0],
    ])
    uniq, count = merge_phases(traffic)
    # first-appearance order, weight = number of copies
    np.testing.assert_array_equal(uniq, [[1, 2, 0], [3, 0, 0], [0, 0, 5]])
    np.testing.assert_array_equal(count, [3, 2, 1])


def test_merge_phases_all_zero():
    uniq, count = merge_phases(np.zeros((4, 2)))
    assert uniq.shape == (0, 2) and count.shape == (0,)


# --------------------------------------------------------------------------- shipped inputs


def test_gpt3_4d_traffic_by_hand():
    p, wl = _gpt3_4d(ConstraintSpec(total_bw_gbps=500.0))
    t = np.asarray(p.traffic_gb)
    w = np.asarray(p.weight)
    # All-Reduce of m = 805306368 bytes over [4, 4, -1, -1] (Forward and InputGrad):
    #   dim0: 2 m (4-1)/4 = 1.207959552e9 bytes; then m -> m/4
    #   dim1: 2 (m/4) (4-1)/4 = 0.301989888e9 bytes; dims 2, 3 not involved.
    m = 805306368.0
    expected = np.array([2 * m * 3 / 4, 2 * (m / 4) * 3 / 4, 0.0, 0.0]) / 1e9
    np.testing.assert_allclose(expected, [1.207959552, 0.301989888, 0.0, 0.0], rtol=1e-15)
    match = [k for k in range(t.shape[0]) if np.allclose(t[k], expected, rtol=1e-12, atol=0)]
    assert len(match) == 1
    # 4 forward (concat1, X1W2b2, concat2, X2W2b2) + 4 input-grad (Q1, X1W1b1, Q2, X2W1b1)
    assert w[match[0]] == 8.0
    # All-Reduce of 452984832 bytes over [-1, 2, 4, 32] (WeightGrad of Q1):
    #   dim1: 2 m/2 = m; m -> m/2; dim2: 2 (m/2) 3/4; m -> m/8; dim3: 2 (m/8) 31/32.
    m = 452984832.0
    expected = np.array([0.0, m, 2 * (m / 2) * 3 / 4, 2 * (m / 8) * 31 / 32]) / 1e9
    assert any(np.allclose(row, expected, rtol=1e-12, atol=0) for row in t)
    # compute: every phase's compute time, ns -> s
    assert float(p.compute_s) == pytest.approx(float(np.sum(wl.compute_ns)) / 1e9, rel=1e-15)
    assert t.shape[1] == 4 and np.all(w >= 1)


# --------------------------------------------------------------------------- input errors


def test_infeasible_names_conflicting_constraints():
    with pytest.raises(LibraInputError) as e:
        _arrays(ConstraintSpec(total_bw_gbps=500.0, lower_gbps=[300.0, 300.0]))
    msg = str(e.value)
    assert "constraints.total_bw_gbps" in msg and "500" in msg
    assert "constraints.lower_gbps[0]" in msg and "constraints.lower_gbps[1]" in msg


def test_infeasible_with_linear_names_the_linear_row():
    with pytest.raises(LibraInputError) as e:
        _arrays(ConstraintSpec(total_bw_gbps=100.0, upper_gbps=[None, 10.0, None],
                               linear=["bw[0] <= bw[1]", "bw[2] >= 1", "bw[2] == 20"]),
                traffic=((1.0, 1.0, 1.0),))
    msg = str(e.value)
    # sum 100 with bw[2] == 20 needs bw[0] + bw[1] = 80, but bw[0] <= bw[1] <= 10; the
    # conflict is minimal: "bw[2] >= 1" is not part of it.
    assert 'constraints.linear[0] = "bw[0] <= bw[1]"' in msg
    assert 'constraints.linear[2] = "bw[2] == 20"' in msg
    assert "constraints.upper_gbps[1]" in msg
    assert "constraints.total_bw_gbps" in msg
    assert "linear[1]" not in msg


@pytest.mark.parametrize("spec", [ConstraintSpec(), ConstraintSpec(lower_gbps=[1.0, 1.0])])
def test_unbounded(spec):
    with pytest.raises(LibraInputError, match="unbounded"):
        _arrays(spec)


def test_lower_above_upper():
    with pytest.raises(LibraInputError, match=r"upper_gbps\[0\] = 4 is below .*lower_gbps\[0\] = 5"):
        _arrays(ConstraintSpec(total_bw_gbps=10.0, lower_gbps=[5.0, 1.0], upper_gbps=[4.0, None]))


def test_negative_lower():
    with pytest.raises(LibraInputError, match=r"lower_gbps\[1\] = -1"):
        _arrays(ConstraintSpec(total_bw_gbps=10.0, lower_gbps=[0.0, -1.0]))


@pytest.mark.parametrize("field,value", [("lower_gbps", [1.0, 1.0, 1.0]), ("upper_gbps", [1.0])])
def test_wrong_length(field, value):
    with pytest.raises(LibraInputError, match=rf"{field} .*{len(value)} entries .*2 dimensions"):
        _arrays(ConstraintSpec(total_bw_gbps=10.0, **{field: value}))


@pytest.mark.parametrize("spec,least", [
    # A total equality: the cheapest dim takes it all (100 GB/s x $1).
    (ConstraintSpec(total_bw_gbps=100.0, max_cost_usd=60.0), 100.0),
    # Lower bounds alone: 10 x $1 + 20 x $3.
    (ConstraintSpec(lower_gbps=[10.0, 20.0], max_cost_usd=60.0), 70.0),
    # A linear row (bw[0] <= bw[1]) with the total: 50 x $1 + 50 x $3.
    (ConstraintSpec(total_bw_gbps=100.0, linear=["bw[0] <= bw[1]"], max_cost_usd=150.0),
     200.0),
])
def test_unreachable_budget_names_the_least_feasible_cost(spec, least):
    with pytest.raises(LibraInputError) as e:
        _arrays(spec, rates=np.array([1.0, 3.0]))
    msg = str(e.value)
    assert msg.startswith(f"constraints.max_cost_usd = {spec.max_cost_usd:g}: ")
    assert f"least feasible network cost, ${least:,.2f}" in msg


def test_unreachable_budget_in_a_batch_names_the_problem_and_least_cost():
    with pytest.raises(LibraInputError, match=(
            r"^problem 1 of the batch: constraints\.max_cost_usd = 60: .*least feasible "
            r"network cost, \$100\.00")):
        problems_from_stacked(np.ones((2, 1, 2)), np.ones((2, 1)), 0.0, total_bw_gbps=100.0,
                              cost_rates_usd_per_gbps=[1.0, 3.0], max_cost_usd=[300.0, 60.0])


def test_budget_among_other_conflicts_gets_the_minimal_conflict():
    # Lower bounds above the total: infeasible without the budget, so the message is the
    # minimal conflict (no least cost exists).
    with pytest.raises(LibraInputError, match="cannot all hold") as e:
        _arrays(ConstraintSpec(total_bw_gbps=100.0, lower_gbps=[80.0, 80.0],
                               max_cost_usd=1e6), rates=np.array([1.0, 3.0]))
    assert "least feasible" not in str(e.value)


def test_budget_without_cost_model():
    with pytest.raises(LibraInputError, match="max_cost_usd.*cost model"):
        _arrays(ConstraintSpec(total_bw_gbps=10.0, max_cost_usd=5.0))


def test_unknown_objective():
    p = _arrays(ConstraintSpec(total_bw_gbps=10.0))
    with pytest.raises(LibraInputError, match="objective = 'fastest'"):
        solve(p, "fastest")


def test_perf_per_cost_without_cost_model():
    p = _arrays(ConstraintSpec(total_bw_gbps=10.0))
    with pytest.raises(LibraInputError, match="perf_per_cost needs a cost model"):
        solve(p, "perf_per_cost")


# --------------------------------------------------------------------------- implicit equalities


def test_implicit_equalities_become_equalities():
    spec = ConstraintSpec(total_bw_gbps=100.0, linear=["bw[0] >= bw[1]", "bw[1] >= bw[0]"])
    p = _arrays(spec, traffic=((1.0, 3.0),))
    assert np.all(np.asarray(p.in_tight))
    res = solve(p)
    assert res.status == "ok"
    np.testing.assert_allclose(res.bandwidth_gbps, [50.0, 50.0], rtol=1e-9)
    # step = 0 + max(1/50, 3/50) s
    assert res.step_time_ns == pytest.approx(3 / 50 * 1e9, rel=1e-9)


# --------------------------------------------------------------------------- equal split


def test_equal_split_feasible_unchanged():
    p = _arrays(ConstraintSpec(total_bw_gbps=90.0, lower_gbps=[10.0, 0.0, 0.0],
                               linear=["bw[0] <= 2 bw[2]"]), traffic=((1.0, 1.0, 1.0),))
    base = equal_split(p)
    assert not base.projected
    np.testing.assert_array_equal(base.bandwidth_gbps, [30.0, 30.0, 30.0])
    assert base.step_time_ns == pytest.approx(1 / 30 * 1e9, rel=1e-12)


def test_equal_split_projected_multiple_constraints():
    spec = ConstraintSpec(total_bw_gbps=1000.0, linear=[
        "bw[0] == 500", "bw[0] >= bw[1]", "bw[1] >= bw[2]", "bw[2] + bw[3] == 200"])
    p, _ = _gpt3_4d(spec)
    base = equal_split(p)
    assert base.projected
    # nearest point to (250, 250, 250, 250): bw0 = 500, bw1 = 1000 - 500 - 200 = 300,
    # bw2 = bw3 = 100.
    np.testing.assert_allclose(base.bandwidth_gbps, [500.0, 300.0, 100.0, 100.0],
                               rtol=0, atol=1e-9)
