"""Sensitivities (`sensitivity.py`) against central finite differences of re-solves.

Every derivative of the optimal value is compared with (V(theta + h) - V(theta - h)) / 2h,
each V a fresh solve of the shipped inputs with theta moved (h = 1e-4 of theta's scale, small
enough that no active set changes, large enough that solver noise of ~1e-12 relative stays
below 1e-7 of the derivative). Tolerance: 1e-4 relative, plus, where the derivative is 0, an
absolute 1e-6 of (value / theta's scale). Re-solves of one problem shape reuse its compilation.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import pytest
from test_optima import DATA, SPECS

from libra_jax.inputs.cost import CostModel, cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_workload
from libra_jax.model.problem import ConstraintSpec, build_problem
from libra_jax.solvers.solve import solve
from libra_jax.studies.sensitivity import sensitivities

REL = 1e-4
STEP = 1e-4


@functools.lru_cache(maxsize=None)
def _inputs(workload, dims, communicator):
    net = load_network_file(str(DATA / "network" / f"{dims}_network.yml"))
    cm = load_cost_model(str(DATA / "cost_model" / f"{dims}_cost_model.yml"))
    wl = load_workload(str(DATA / "workload" / f"{workload}.txt"),
                       str(DATA / "communicator" / communicator), net.num_dims)
    return net, cm, wl


GPT3_4D = ("GPT_3", "4d", "GPT_3_4d.yml")
TNLG_3D = ("Turing_NLG", "3d", "Turing_NLG_3D.yml")


class Case:
    """One shipped case: its optimum, sensitivities and a re-solve under changes."""

    def __init__(self, inputs, spec, objective="perf"):
        self.net, self.cm, self.wl = _inputs(*inputs)
        self.spec, self.objective = spec, objective
        self.p = self.build()
        self.r = solve(self.p, objective)
        assert self.r.status == "ok"
        self.s = sensitivities(self.p, self.r, spec=spec, network=self.net, workload=self.wl,
                               cost_model=self.cm)
        self.prefix = "d_step_ns_d_" if objective == "perf" else "d_time_x_cost_d_"
        self.value = self.value_of(self.r)

    def value_of(self, r):
        assert r.status == "ok"
        return r.step_time_ns if self.objective == "perf" else r.time_x_cost

    def build(self, spec=None, wl=None, cm=None):
        rates = cost_rates_usd_per_gbps(self.net, cm or self.cm)
        return build_problem(self.net, wl or self.wl, rates, spec or self.spec)

    def resolve(self, **kw):
        return self.value_of(solve(self.build(**kw), self.objective))

    def __getitem__(self, key):
        return self.s[self.prefix + key]


def _central(f, theta, h):
    return (f(theta + h) - f(theta - h)) / (2 * h)


def _close(got, fd, scale):
    """|got - fd| <= 1e-4 |fd| + 1e-6 scale (scale: value / parameter scale)."""
    assert got is not None
    assert abs(got - fd) <= REL * abs(fd) + 1e-6 * scale, (got, fd)


def _gift(case, j, g):
    """The optimum with g GB/s given free to dimension j: with y = bw + g e_j the step time
    is T(y) and every constraint on bw is shifted (lo is inactive in these cases: kept)."""
    p = case.p
    e = np.zeros(p.num_dims)
    e[j] = g
    q = dataclasses.replace(
        p, hi=p.hi + e, upper=p.upper + e, interior=p.interior + e,
        min_cost_bw=p.min_cost_bw + e, b_eq=p.b_eq + g * p.a_eq[:, j],
        b_in=p.b_in + g * p.a_in[:, j],
    )
    return case.value_of(solve(q, case.objective))


@functools.lru_cache(maxsize=None)
def _case(name):
    total = SPECS["total_bw_500gbps"]
    if name == "gpt3_4d":
        return Case(GPT3_4D, total)
    if name == "tnlg_3d":
        return Case(TNLG_3D, total)
    if name == "gpt3_4d_multi":
        return Case(GPT3_4D, SPECS["multiple_constraints"])
    if name == "gpt3_4d_bounds":  # the optimum is 338 / 85 / 58 / 19: both bounds bind
        return Case(GPT3_4D, ConstraintSpec(total_bw_gbps=500, upper_gbps=[300, None, None, None],
                                            lower_gbps=[0, 0, 0, 25]))
    if name == "gpt3_4d_budget":  # 500 GB/s at 80% of the perf optimum's cost
        cost = _case("gpt3_4d").r.network_cost_usd
        return Case(GPT3_4D, ConstraintSpec(total_bw_gbps=500, max_cost_usd=0.8 * cost))
    if name == "gpt3_4d_ppc":
        return Case(GPT3_4D, total, "perf_per_cost")
    raise KeyError(name)


def _total(case):
    h = STEP * case.spec.total_bw_gbps
    fd = _central(lambda t: case.resolve(spec=dataclasses.replace(case.spec, total_bw_gbps=t)),
                  case.spec.total_bw_gbps, h)
    _close(case["total_bw_gbps"], fd, case.value / case.spec.total_bw_gbps)


@pytest.mark.parametrize("name", ["gpt3_4d", "tnlg_3d", "gpt3_4d_multi", "gpt3_4d_budget"])
def test_total_bandwidth(name):
    case = _case(name)
    assert case.s["status"] == "ok" and case.s["one_sided"] == {}
    _total(case)


@pytest.mark.parametrize("name", ["gpt3_4d", "tnlg_3d", "gpt3_4d_multi", "gpt3_4d_budget"])
def test_gift_per_dimension(name):
    case = _case(name)
    x = case.r.bandwidth_gbps
    for j in range(len(x)):
        h = STEP * x[j]
        fd = _central(lambda g, j=j: _gift(case, j, g), 0.0, h)
        _close(case["gift_gbps"][j], fd, case.value / x[j])


def test_gift_equals_total_with_only_the_total_row():
    # Only sum(bw) == 500 binds, so every dimension's gift is worth what the total is.
    case = _case("gpt3_4d")
    np.testing.assert_allclose(case["gift_gbps"], case["total_bw_gbps"], rtol=1e-9)


def test_bounds():
    case = _case("gpt3_4d_bounds")
    assert case.s["status"] == "ok"
    up, lo = case["upper_gbps"], case["lower_gbps"]
    assert up[0] < 0 < lo[3] and up[1:] == [None, None, None]

    def with_bound(field, j, v):
        vals = list(getattr(case.spec, field))
        vals[j] = v
        return case.resolve(spec=dataclasses.replace(case.spec, **{field: vals}))

    fd = _central(lambda v: with_bound("upper_gbps", 0, v), 300.0, 300 * STEP)
    _close(up[0], fd, case.value / 300)
    fd = _central(lambda v: with_bound("lower_gbps", 3, v), 25.0, 25 * STEP)
    _close(lo[3], fd, case.value / 25)
    # Inactive lower bounds of dims 0..2 (at 0, so one-sided: raise them a little).
    for j in range(3):
        h = STEP * 10
        fd = (with_bound("lower_gbps", j, h) - case.value) / h
        _close(lo[j], fd, case.value / 10)


def _relaxed(text, h):
    """The constraint with its right-hand side b (of ``a @ bw <= b`` / ``== b``) raised by h."""
    for op in ("==", "<=", ">="):
        if op in text:
            lhs, rhs = text.split(op)
            sign = "+" if h >= 0 else "-"
            if op == ">=":
                return f"{lhs} {sign} {abs(h)!r} >= {rhs}"
            return f"{lhs} {op} {rhs} {sign} {abs(h)!r}"
    raise ValueError(text)


def test_linear_rows_multiple_constraints():
    case = _case("gpt3_4d_multi")
    got = case["linear_rhs_gbps"]
    assert len(got) == 4 and got[0] < 0 and got[3] < 0
    for i, text in enumerate(case.spec.linear):
        def value(b, i=i, text=text):
            lin = list(case.spec.linear)
            lin[i] = _relaxed(text, b)
            return case.resolve(spec=dataclasses.replace(case.spec, linear=lin))

        h = 0.05  # GB/s (1e-4 of the 500 GB/s these rows are about)
        fd = _central(value, 0.0, h)
        _close(got[i], fd, case.value / 500)


def _price_cases():
    return [("gpt3_4d_budget", "InterChiplet", "Link"), ("gpt3_4d_budget", "InterPod", "Nic"),
            ("gpt3_4d_budget", "InterPackage", "Switch"), ("gpt3_4d_ppc", "InterPackage", "Link"),
            ("gpt3_4d_ppc", "InterPod", "Switch")]


@pytest.mark.parametrize("name,tier,comp", _price_cases())
def test_prices(name, tier, comp):
    case = _case(name)
    base = case.cm.tiers[tier][comp]

    def value(v):
        tiers = {t: dict(c) for t, c in case.cm.tiers.items()}
        tiers[tier][comp] = v
        return case.resolve(cm=CostModel(tiers=tiers, source="test"))

    got = case["price_usd_per_gbps"][tier][comp]
    fd = _central(value, base, STEP * base)
    _close(got, fd, case.value / base)


def test_cost_budget():
    case = _case("gpt3_4d_budget")
    b = case.spec.max_cost_usd
    fd = _central(lambda v: case.resolve(spec=dataclasses.replace(case.spec, max_cost_usd=v)),
                  b, STEP * b)
    got = case["max_cost_usd"]
    assert got < 0
    _close(got, fd, case.value / b)


def test_prices_do_not_enter_without_cost():
    case = _case("gpt3_4d")
    for comps in case["price_usd_per_gbps"].values():
        assert all(v == 0.0 for v in comps.values())


@pytest.mark.parametrize("name,entries", [
    ("gpt3_4d", [(0, 1), (0, 2), (5, 0), (5, 1), (1, 1)]),
    ("tnlg_3d", [(0, 2), (3, 2), (0, 0)]),
])
def test_collective_sizes(name, entries):
    case = _case(name)
    got = np.asarray(case["size_bytes"])
    assert got.shape == (case.wl.num_layers, 3)
    for layer, phase in entries:
        size = float(case.wl.size_bytes[layer, phase])
        h = STEP * max(size, 1e6)

        def value(v, layer=layer, phase=phase):
            sizes = np.array(case.wl.size_bytes, np.float64)
            sizes[layer, phase] = v
            return case.resolve(wl=dataclasses.replace(case.wl, size_bytes=sizes))

        fd = _central(value, size, h) if size > h else (value(size + h) - case.value) / h
        _close(float(got[layer, phase]), fd, case.value / max(size, 1e6))


def test_kink_is_reported_not_guessed():
    # Two copies of one active bound: how the multiplier splits between them is free, so
    # raising either alone gains nothing (right derivative 0) while lowering either costs
    # the full multiplier (left derivative): the value is null, both sides are given.
    spec = ConstraintSpec(total_bw_gbps=500, upper_gbps=[300, None, None, None],
                          linear=["bw[0] <= 300"])
    case = Case(GPT3_4D, spec)
    assert case.s["status"] == "kink"
    assert case["upper_gbps"][0] is None and case["linear_rhs_gbps"][0] is None
    side = case.s["one_sided"]["d_step_ns_d_upper_gbps"][0]
    assert side["index"] == 0
    h = 300 * STEP

    def value(v):
        return case.resolve(spec=dataclasses.replace(case.spec, upper_gbps=[v, None, None,
                                                                            None]))

    left = (case.value - value(300 - h)) / h
    right = (value(300 + h) - case.value) / h
    assert right == pytest.approx(0.0, abs=1e-6 * case.value / 300)
    # One-sided differences have O(h) error: 1e-3 here.
    assert side["left"] == pytest.approx(left, rel=1e-3)
    assert side["right"] == 0.0
    # The derivatives that do exist are still there.
    _total(case)


def test_units_and_json():
    import json

    s = _case("gpt3_4d").s
    json.dumps(s, allow_nan=False)
    assert s["objective"] == "perf" and s["value"] == "step_time_ns"
    assert s["residual"] < 1e-9
