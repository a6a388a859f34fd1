"""Training and serving on one network (`libra_jax.studies.serving_shared`): the shared
design's value against a brute-force search over the feasible bandwidths of small 2-dim
problems (sum == budget: one free variable), its certified lower bound, and the weights'
extremes reproducing each workload's own optimum."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from libra_jax.model.problem import ConstraintSpec, problem_from_arrays
from libra_jax.studies import serving, serving_shared

TOTAL = 100.0
SPEC = ConstraintSpec(total_bw_gbps=TOTAL)


def _problems(seed: int, disaggregated: bool):
    """Random phases (prefill heavy on dim 1, decode on dim 0, KV on dim 1) and a training
    step (both dims), with compute and several collectives each."""
    rng = np.random.default_rng(seed)

    def prob(scale0, scale1, k):
        tr = np.stack([rng.uniform(0.2, 1.0, k) * scale0, rng.uniform(0.2, 1.0, k) * scale1],
                      axis=1)
        return problem_from_arrays(tr, rng.uniform(0.5, 1.5, k), float(rng.uniform(0, 0.05)),
                                   None, SPEC)

    phases = [prob(0.3, 2.0, 2), prob(1.5, 0.2, 3)]
    if disaggregated:
        phases.append(prob(0.0, 1.0, 1))
        a = np.array([[0.5, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.5]])
    else:
        a = np.array([[0.25, 1.0]])
    train = prob(1.0, 1.0, 3)
    return phases, train, a


def _brute(fun) -> float:
    """min over bw = (x, TOTAL - x): a grid, then a bounded scalar search around its best."""
    grid = np.linspace(1e-3, TOTAL - 1e-3, 201)
    vals = np.array([fun(x) for x in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    r = minimize_scalar(fun, bounds=(lo, hi), method="bounded",
                        options=dict(xatol=1e-9, maxiter=200))
    return min(float(r.fun), float(vals[i]))


def _g(x, phases, train, form, d):
    t = serving.phase_times_s([x, TOTAL - x], phases)
    tt = serving.phase_times_s([x, TOTAL - x], [train])[0]
    w_t, w_s = d.weights
    return w_t * tt / d.train.value_s + w_s * float(np.max(form.a @ t)) / d.serve.value_s


@pytest.mark.parametrize("seed, disaggregated, weights, slo", [
    (0, False, (1.0, 1.0), False),
    (1, False, (3.0, 1.0), False),
    (2, True, (1.0, 1.0), False),
    (3, False, (1.0, 2.0), True),
])
def test_shared_design_matches_brute_force(seed, disaggregated, weights, slo):
    phases, train, a = _problems(seed, disaggregated)
    c, b, names = np.zeros((0, a.shape[1])), np.zeros(0), ()
    if slo:
        # TPOT <= 1.1x its least value: binds away from the decode-only design.
        best = serving.min_seconds_per_token(
            phases, serving.ServingForm(np.array([[0.0, 1.0]]), c, b, ()), None, SPEC)
        c, b, names = np.array([[0.0, 1.0]]), np.array([1.1 * best.value]), ("tpot",)
    form = serving.ServingForm(a, c, b, names)
    d = serving_shared.solve_shared(train, phases, form, None, SPEC, *weights)
    assert d.max_violation <= 1e-9
    assert d.lower_bound <= d.value * (1 + 1e-12)
    assert d.gap <= 1e-3
    if slo:
        assert d.slo_violation <= 1e-9

        def fun(x):
            t = serving.phase_times_s([x, TOTAL - x], phases)
            pen = 0.0 if t[1] <= b[0] else 1e6 * (t[1] - b[0]) / b[0] + 1e3
            return _g(x, phases, train, form, d) + pen
    else:
        def fun(x):
            return _g(x, phases, train, form, d)
    ref = _brute(fun)
    assert d.lower_bound <= ref * (1 + 1e-7)
    assert d.value == pytest.approx(ref, rel=2e-4)
    # The objective is the weighted sum of the two slowdowns; each >= 1 (own optima).
    assert d.value == pytest.approx(weights[0] * d.train_slowdown
                                    + weights[1] * d.serve_slowdown, rel=1e-9)
    # (up to the own optima's certified gaps)
    assert d.train_slowdown >= 1 - 1e-4 and d.serve_slowdown >= 1 - 1e-4
    assert d.value >= sum(weights) * (1 - 1e-4)


@pytest.mark.parametrize("disaggregated", [False, True])
def test_weight_extremes_reproduce_each_own_optimum(disaggregated):
    phases, train, a = _problems(7, disaggregated)
    form = serving.ServingForm(a, np.zeros((0, a.shape[1])), np.zeros(0), ())
    own = (serving_shared.own_training(train),
           serving_shared.own_serving(phases, form, None, SPEC))
    only_train = serving_shared.solve_shared(train, phases, form, None, SPEC, 1.0, 0.0, own)
    only_serve = serving_shared.solve_shared(train, phases, form, None, SPEC, 0.0, 1.0, own)
    assert only_train.train_slowdown == pytest.approx(1.0, abs=2e-4)
    assert only_serve.serve_slowdown == pytest.approx(1.0, abs=2e-4)
    np.testing.assert_allclose(only_train.bandwidth_gbps, own[0].bandwidth_gbps, atol=0.05)
    np.testing.assert_allclose(only_serve.bandwidth_gbps, own[1].bandwidth_gbps, atol=0.05)
    # The two workloads want different splits here, so each pays on the other's design ...
    assert only_train.train_design_serve_slowdown > 1.01
    assert only_train.serve_design_train_slowdown > 1.01
    # ... and the 1:1 design sits between: each loses less than on the other's own design.
    both = serving_shared.solve_shared(train, phases, form, None, SPEC, 1.0, 1.0, own)
    assert both.train_slowdown <= both.serve_design_train_slowdown + 1e-9
    assert both.serve_slowdown <= both.train_design_serve_slowdown + 1e-9
    assert both.value <= min(1 + both.serve_design_train_slowdown,
                             1 + both.train_design_serve_slowdown) + 1e-9


def test_bad_weights_are_errors():
    from libra_jax.types import LibraInputError

    phases, train, a = _problems(0, False)
    form = serving.ServingForm(a, np.zeros((0, 2)), np.zeros(0), ())
    with pytest.raises(LibraInputError, match="weights"):
        serving_shared.shared_form(form, 0.0, 0.0, 1.0, 1.0)
    with pytest.raises(LibraInputError, match="weights"):
        serving_shared.shared_form(form, -1.0, 1.0, 1.0, 1.0)


def test_serving_study_runs_one_case(tmp_path):
    """experiments/serving_study.py on one preset and model (the study's rows and plot)."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "serving_study.py"
    spec = importlib.util.spec_from_file_location("serving_study", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--presets", "h100_dgx", "--models", "llama", "--levels", "2",
                     "--out", str(tmp_path)]) == 0
    text = (tmp_path / "serving_study.md").read_text()
    assert "Llama_3_70B" in text and "(b) One network for both" in text
    assert (tmp_path / "serving_study_tpot_vs_cost.png").stat().st_size > 0
    import csv

    with open(tmp_path / "serving_study.csv", newline="") as fh:
        row = next(csv.DictReader(fh))
    assert float(row["shared_gap"]) <= 1e-3
    assert 1.0 <= float(row["train_design_serve_slowdown"]) < 1.2
