"""Every shipped workload x network x constraint set x objective against the exact optima.

The numbers in fixtures/libra_optima.json come from two independent exact solvers of the
reference model (not from libra_jax). Step time (perf) and time x cost (perf_per_cost) must
match to 1e-6 relative, with a certified gap <= 1e-6 and violation <= 1e-9; the bandwidths
where the optimum is unique, and the equal-split baseline to 1e-9.
"""

from __future__ import annotations

import functools
import json
import pathlib

import numpy as np
import pytest

from libra_jax.inputs.cost import cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_workload
from libra_jax.model.problem import ConstraintSpec, build_problem
from libra_jax.solvers.solve import equal_split, solve

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE.parent / "libra_jax" / "data" / "libra_inputs"
CASES = json.loads((HERE / "fixtures" / "libra_optima.json").read_text())["cases"]
#: The same cases' objective values before issue 20's compile-time changes (commit cd36411).
BEFORE = json.loads((HERE / "fixtures" / "issue20_before.json").read_text())["shipped"]
SPECS = {
    "total_bw_500gbps": ConstraintSpec(total_bw_gbps=500),
    "multiple_constraints": ConstraintSpec(
        total_bw_gbps=1000,
        linear=["bw[0] == 500", "bw[0] >= bw[1]", "bw[1] >= bw[2]", "bw[2] + bw[3] == 200"],
    ),
}


@functools.lru_cache(maxsize=None)
def _problem(workload, network, communicator, constraints):
    net = load_network_file(str(DATA / "network" / f"{network}_network.yml"))
    rates = cost_rates_usd_per_gbps(
        net, load_cost_model(str(DATA / "cost_model" / f"{network}_cost_model.yml"))
    )
    wl = load_workload(
        str(DATA / "workload" / f"{workload}.txt"),
        str(DATA / "communicator" / communicator),
        net.num_dims,
    )
    return build_problem(net, wl, rates, SPECS[constraints])


def _id(c):
    return f"{c['workload']}-{c['network']}-{c['constraints']}-{c['objective']}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_shipped_optimum(case):
    p = _problem(case["workload"], case["network"], case["communicator_file"],
                 case["constraints"])
    r = solve(p, case["objective"])
    assert r.status == "ok"
    assert r.optimality_gap <= 1e-6
    assert r.max_violation <= 1e-9
    key = "step_time_ns" if case["objective"] == "perf" else "time_x_cost"
    got = r.step_time_ns if key == "step_time_ns" else r.time_x_cost
    assert got == pytest.approx(case[key], rel=1e-6)
    # Issue 20 changed how the kernel compiles (and its Newton solves), not its results: the
    # perf optimum to 1e-12; time x cost (flat along a direction, so the level search may
    # stop at another point of it) measured to 2.4e-12 (MSFT_1T 4d).
    assert got == pytest.approx(BEFORE[_id(case)], rel=1e-12 if key == "step_time_ns" else 1e-11)
    # The certificate never claims more than the truth.
    assert r.lower_bound <= case[key] * (1 + 1e-9)
    if case["note"] is None:
        # The pinned bandwidths are rounded to ~6 significant digits. time x cost can be flat
        # along a direction to 1e-10 (Turing-NLG 3D: dims 0 and 1 cost 4.00001 vs 4.00002 $
        # per GB/s and neither limits the step), so its bandwidths get a looser check.
        tol = 2e-4 if case["objective"] == "perf" else 1e-2
        np.testing.assert_allclose(r.bandwidth_gbps, case["bandwidth_gbps"], rtol=tol,
                                   atol=2e-4)
    base = equal_split(p)
    ref = case["equal_split"]
    np.testing.assert_allclose(base.bandwidth_gbps, ref["bandwidth_gbps"], rtol=1e-9)
    assert base.step_time_ns == pytest.approx(ref["step_time_ns"], rel=1e-9)
    assert base.network_cost_usd == pytest.approx(ref["network_cost_usd"], rel=1e-9)
    assert base.projected == (case["constraints"] == "multiple_constraints")


def test_reference_default_run():
    """The reference's default run: GPT-3, 4D, multiple_constraints, perf."""
    p = _problem("GPT_3", "4d", "GPT_3_4d.yml", "multiple_constraints")
    r = solve(p, "perf")
    np.testing.assert_allclose(r.bandwidth_gbps, [500, 300, 151.181102, 48.818898], rtol=1e-6)
    assert r.step_time_ns == pytest.approx(7.084387433760699e8, rel=1e-9)
