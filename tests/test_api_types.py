"""Issue 17, "Typed public API" and "Limits that say what is physical": every public function
and `ConstraintSpec` check their argument types (a bool is not a number, a string is not a
number, a mapping is not a list) and magnitudes before any arithmetic, and raise
`LibraInputError` naming the argument (and the limit, where one applies). Problems whose step
time or cost would not be finite are refused when they are built, not solved `ok`.

Every call here raises before anything is compiled, so the file runs in seconds."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import libra_jax as lj
from libra_jax.inputs.generators import generate
from libra_jax.inputs.workload import Workload
from libra_jax.model import objective, pipelined
from libra_jax.model.problem import ModelRows, with_workload
from libra_jax.solvers.barrier import BarrierConfig
from libra_jax.solvers.first_order import FirstOrderConfig
from libra_jax.solvers.ipm import IpmConfig
from libra_jax.studies import cosearch, multi, scan
from libra_jax.studies.chunk_counts import solve_chunk_counts
from libra_jax.studies.sensitivity import sensitivities
from libra_jax.types import LibraInputError

NET = lj.parse_notation("RI(4)_SW(8)")
WL = Workload(
    name="w", layer_names=("a",), compute_ns=np.array([[1e6, 1e6, 1e6]]),
    collective=np.array([[1, 0, 1]], np.int32), size_bytes=np.array([[1e8, 0.0, 1e8]]),
    communicator=np.array([[[4, 8], [-1, -1], [4, 8]]], np.int32), source="test")
SPEC = lj.ConstraintSpec(total_bw_gbps=100.0)
T = np.array([[1.0, 2.0]])
P = lj.problem_from_arrays(T, np.ones(1), 0.5, None, SPEC)
PC = lj.problem_from_arrays(T, np.ones(1), 0.5, np.array([1.0, 3.0]), SPEC)
STACKED = lj.problems_from_stacked(np.ones((3, 1, 2)), np.ones((3, 1)), 0.0,
                                   total_bw_gbps=100.0)


def _raises(call, *needles):
    """``call()`` raises LibraInputError whose message holds every needle."""
    with pytest.raises(LibraInputError) as e:
        call()
    for n in needles:
        assert n in str(e.value), (n, str(e.value))
    return str(e.value)


# --------------------------------------------------------------------------- ConstraintSpec


@pytest.mark.parametrize("kw,needles", [
    (dict(total_bw_gbps=True), ["constraints.total_bw_gbps = True"]),
    (dict(total_bw_gbps="500"), ["constraints.total_bw_gbps = '500'"]),
    (dict(total_bw_gbps=[500]), ["constraints.total_bw_gbps = [500]"]),
    (dict(total_bw_gbps={"a": 500}), ["constraints.total_bw_gbps"]),
    (dict(total_bw_gbps=1e308), ["constraints.total_bw_gbps = 1e+308", "1e+09",
                                 "LIMITS.max_gbps"]),
    (dict(total_bw_gbps=0.0), ["constraints.total_bw_gbps = 0"]),
    (dict(total_bw_gbps=math.nan), ["constraints.total_bw_gbps = nan"]),
    (dict(total_bw_gbps=math.inf), ["constraints.total_bw_gbps = inf"]),
    (dict(total_bw_mode=5), ["constraints.total_bw_mode = 5", "'eq' or 'le'"]),
    (dict(total_bw_mode=["eq"]), ["constraints.total_bw_mode = ['eq']"]),
    (dict(total_bw_mode="ge"), ["constraints.total_bw_mode = 'ge'"]),
    (dict(lower_gbps={"a": 1.0}), ["constraints.lower_gbps = {'a': 1.0}", "list"]),
    (dict(lower_gbps="12"), ["constraints.lower_gbps = '12'", "list"]),
    (dict(lower_gbps=[True, 1.0]), ["constraints.lower_gbps[0] = True"]),
    (dict(lower_gbps=[1.0, "2"]), ["constraints.lower_gbps[1] = '2'"]),
    (dict(lower_gbps=[2e16, 0.0]), ["constraints.lower_gbps[0] = 2e+16", "1e+09",
                                   "LIMITS.max_gbps"]),
    (dict(lower_gbps=[-1.0, 0.0]), ["constraints.lower_gbps[0] = -1"]),
    (dict(upper_gbps=[0.0, None]), ["constraints.upper_gbps[0] = 0"]),
    (dict(upper_gbps=[1e16, None]), ["constraints.upper_gbps[0] = 1e+16", "1e+09"]),
    (dict(upper_gbps=[math.nan, None]), ["constraints.upper_gbps[0] = nan"]),
    (dict(upper_gbps=[-math.inf, None]), ["constraints.upper_gbps[0] = -inf"]),
    (dict(linear=5), ["constraints.linear = 5", "list"]),
    (dict(linear="bw[0] >= 1"), ["constraints.linear = 'bw[0] >= 1'", "list"]),
    (dict(linear={"bw[0] >= 1": 1}), ["constraints.linear = {'bw[0] >= 1': 1}", "list"]),
    (dict(linear=["bw[0] >= 1", 5]), ["constraints.linear[1] = 5", "string"]),
    (dict(max_cost_usd=math.inf), ["constraints.max_cost_usd = inf", "1e+18",
                                   "LIMITS.max_usd"]),
    (dict(max_cost_usd=1e19), ["constraints.max_cost_usd = 1e+19", "1e+18"]),
    (dict(max_cost_usd=True), ["constraints.max_cost_usd = True"]),
    (dict(max_cost_usd="5"), ["constraints.max_cost_usd = '5'"]),
    (dict(max_cost_usd=0.0), ["constraints.max_cost_usd = 0"]),
])
def test_constraint_spec_refuses_wrong_types_and_magnitudes(kw, needles):
    _raises(lambda: lj.ConstraintSpec(**kw), *needles)


def test_constraint_spec_accepts_numpy_numbers_and_infinite_upper_bounds():
    spec = lj.ConstraintSpec(total_bw_gbps=np.float64(100.0), lower_gbps=np.array([1.0, 2.0]),
                             upper_gbps=[math.inf, None], linear=("bw[0] >= bw[1]",),
                             max_cost_usd=np.int64(10**6))
    p = lj.problem_from_arrays(T, np.ones(1), 0.0, np.array([1.0, 2.0]), spec)
    assert np.isinf(p.hi).all() and float(p.total_bw_gbps) == 100.0


def test_a_spec_changed_after_it_is_made_is_checked_when_built():
    spec = lj.ConstraintSpec(total_bw_gbps=100.0)
    spec.total_bw_gbps = "100"
    _raises(lambda: lj.problem_from_arrays(T, np.ones(1), 0.0, None, spec),
            "constraints.total_bw_gbps = '100'")
    spec = lj.ConstraintSpec(total_bw_gbps=100.0)
    spec.linear = 5
    _raises(lambda: lj.build_problem(NET, WL, None, spec, field_prefix="c"), "c.linear = 5")


# --------------------------------------------------------------------------- problem builders


@pytest.mark.parametrize("args,needles", [
    (dict(traffic_gb=[[True, 1.0]]), ["traffic_gb", "not numbers"]),
    (dict(traffic_gb="1"), ["traffic_gb = '1'"]),
    (dict(traffic_gb={"a": 1}), ["traffic_gb = {'a': 1}"]),
    (dict(traffic_gb=[[1e300, 1.0]]), ["traffic_gb[0][0] = 1e+300", "1.07374e+18",
                                       "LIMITS.max_bytes x LIMITS.max_npus"]),
    (dict(traffic_gb=[[-1.0, 1.0]]), ["traffic_gb[0][0] = -1", ">= 0"]),
    (dict(weight=[math.nan]), ["weight[0] = nan"]),
    (dict(weight=["1"]), ["weight = ['1']"]),
    (dict(compute_s="0"), ["compute_s = '0'"]),
    (dict(compute_s=True), ["compute_s = True"]),
    (dict(compute_s=1e300), ["compute_s = 1e+300", "3e+14", "LIMITS.max_ns"]),
    (dict(compute_s=np.array([1.0, 2.0])), ["compute_s"]),
    (dict(rates=[1e308, 1.0]), ["cost_rates_usd_per_gbps[0] = 1e+308", "1e+18",
                                "LIMITS.max_usd"]),
    (dict(rates=[True, 1.0]), ["cost_rates_usd_per_gbps", "not numbers"]),
    (dict(rates=["1", "2"]), ["cost_rates_usd_per_gbps"]),
    (dict(rates=[1.0, math.nan]), ["cost_rates_usd_per_gbps[1] = nan"]),
    (dict(rates=[1.0, -2.0]), ["cost_rates_usd_per_gbps[1] = -2"]),
    (dict(rates=[1.0, 2.0, 3.0]), ["cost_rates_usd_per_gbps has shape (3,)", "[2]"]),
    (dict(rows="rows"), ["rows", "ModelRows"]),
    (dict(field_prefix=5), ["field_prefix"]),
])
def test_problem_from_arrays_refuses_wrong_types_and_magnitudes(args, needles):
    kw = dict(traffic_gb=T, weight=[1.0], compute_s=0.0, rates=None, spec=SPEC)
    kw.update(args)
    extra = {k: kw.pop(k) for k in ("rows", "field_prefix") if k in kw}
    _raises(lambda: lj.problem_from_arrays(kw["traffic_gb"], kw["weight"], kw["compute_s"],
                                           kw["rates"], kw["spec"], **extra), *needles)


def test_a_step_time_that_would_overflow_is_refused_when_built():
    # 1e300 times 10 GB at 50 GB/s: 2e299 s, beyond float64 in ns.
    msg = _raises(lambda: lj.problem_from_arrays(T * 10, [1e300], 0.0, None, SPEC),
                  "step time would not be a finite number", "constraints.total_bw_gbps")
    assert "1.79769e+308" in msg
    # The same through a linear constraint (the LP path) and a general model row.
    _raises(lambda: lj.problem_from_arrays(
        T * 10, [1e300], 0.0, None, lj.ConstraintSpec(total_bw_gbps=100.0,
                                                      linear=["bw[0] >= bw[1]"])),
            "step time would not be a finite number")
    rows = ModelRows(weight=np.array([1e300]), piece=np.array([0]), const_s=np.array([0.0]),
                     coef_gb=np.array([[10.0, 0.0]]))
    _raises(lambda: lj.problem_from_arrays(np.zeros((0, 2)), [], 0.0, None, SPEC, rows=rows),
            "step time would not be a finite number")


def test_a_cost_that_would_overflow_is_refused_when_built():
    # Cost 1e27 $ at the largest bandwidths, times a step of ~2e290 ns: beyond float64.
    spec = lj.ConstraintSpec(total_bw_gbps=1e9)
    _raises(lambda: lj.problem_from_arrays(T, [1e290], 0.0, np.array([1e18, 1e18]), spec),
            "network cost would not be a finite number", "cost_rates")
    # Within range: built (and an extreme but finite design is fine).
    lj.problem_from_arrays(T, [1.0], 0.0, np.array([1e18, 1e18]), spec)


def test_build_problem_checks_its_arguments():
    _raises(lambda: lj.build_problem("RI(4)_SW(8)", WL, None, SPEC), "network", "Network")
    _raises(lambda: lj.build_problem(NET, "w", None, SPEC), "workload", "Workload")
    _raises(lambda: lj.build_problem(NET, WL, None, {"total_bw_gbps": 100}), "spec",
            "ConstraintSpec")
    _raises(lambda: lj.build_problem(lj.parse_notation("RI(4)_SW(8)_SW(2)"), WL, None, SPEC),
            "2 entries", "3 dimensions")
    p = lj.build_problem(NET, WL, np.array([1.0, 2.0]), SPEC)
    assert p.num_dims == 2


def test_with_workload_checks_the_traffic_it_puts_in_a_template():
    q = with_workload(P, [[2.0, 0.0]], [3.0], 1.0)
    assert float(q.compute_s) == 1.0 and np.asarray(q.upper).tolist() == [100.0, 100.0]
    _raises(lambda: with_workload(P, [[1e300, 0.0]], [1.0], 0.0), "traffic_gb[0][0]")
    _raises(lambda: with_workload(P, [[1.0, 0.0, 1.0]], [1.0], 0.0), "[K, 2]")
    _raises(lambda: with_workload(P, [[10.0, 0.0]], [1e300], 0.0), "step time")
    _raises(lambda: with_workload(STACKED, [[1.0, 0.0]], [1.0], 0.0), "template")


# --------------------------------------------------------------------------- stacked batches


def _stacked(**kw):
    base = dict(total_bw_gbps=np.full(3, 100.0))
    base.update(kw)
    return lambda: lj.problems_from_stacked(np.ones((3, 2, 2)), np.ones((3, 2)), 0.0, **base)


@pytest.mark.parametrize("kw,needles", [
    (dict(total_bw_gbps=True), ["constraints.total_bw_gbps = True", "not numbers"]),
    (dict(total_bw_gbps="100"), ["constraints.total_bw_gbps = '100'"]),
    (dict(total_bw_gbps=[100.0, True, 100.0]), ["constraints.total_bw_gbps"]),
    (dict(total_bw_gbps={"a": 1}), ["constraints.total_bw_gbps"]),
    (dict(total_bw_gbps=[100.0, 1e300, 100.0]), ["constraints.total_bw_gbps[1] = 1e+300",
                                                  "1e+09", "LIMITS.max_gbps"]),
    (dict(upper_gbps=[[1e16, np.inf]] * 3), ["constraints.upper_gbps[0][0] = 1e+16",
                                            "1e+09"]),
    (dict(lower_gbps=[[2e16, 0.0]] * 3, total_bw_gbps=None, upper_gbps=[3e16, 3e16]),
     ["constraints.lower_gbps[0][0] = 2e+16", "1e+09"]),
    (dict(cost_rates_usd_per_gbps=[1e300, 1.0]), ["cost_rates_usd_per_gbps[0][0] = 1e+300",
                                                  "1e+18", "LIMITS.max_usd"]),
    (dict(cost_rates_usd_per_gbps=[1.0, 1.0], max_cost_usd=[1e6, 1e19, 1e6]),
     ["constraints.max_cost_usd[1] = 1e+19", "1e+18"]),
    (dict(total_bw_mode=np.array(["eq"])), ["constraints.total_bw_mode"]),
    (dict(total_bw_mode=None), ["constraints.total_bw_mode = None"]),
    (dict(field_prefix=5), ["field_prefix = 5"]),
])
def test_stacked_refuses_wrong_types_and_magnitudes(kw, needles):
    _raises(_stacked(**kw), *needles)


def test_stacked_refuses_traffic_compute_and_overflow_naming_the_problem():
    t = np.ones((3, 2, 2))
    w = np.ones((3, 2))
    t[1, 0, 1] = 1e300
    _raises(lambda: lj.problems_from_stacked(t, w, 0.0, total_bw_gbps=100.0),
            "traffic_gb[1][0][1] = 1e+300", "1.07374e+18")
    _raises(lambda: lj.problems_from_stacked(np.ones((3, 2, 2)), w, [0.0, 1e300, 0.0],
                                             total_bw_gbps=100.0),
            "compute_s[1] = 1e+300", "3e+14")
    w[2, 1] = 1e300
    _raises(lambda: lj.problems_from_stacked(np.ones((3, 2, 2)) * 10, w, 0.0,
                                             total_bw_gbps=100.0),
            "problem 2 of the batch: the step time would not be a finite number")
    w[2, 1] = 1e290
    _raises(lambda: lj.problems_from_stacked(np.ones((3, 2, 2)), w, 0.0, total_bw_gbps=1e9,
                                             cost_rates_usd_per_gbps=[1e18, 1e18]),
            "problem 2 of the batch: the network cost would not be a finite number")


# --------------------------------------------------------------------------- solvers


@pytest.mark.parametrize("call,needles", [
    (lambda: lj.solve("x"), ["p: expected a Problem, got str"]),
    (lambda: lj.solve(STACKED), ["p: a stacked batch", "solve_stacked"]),
    (lambda: lj.solve(P, objective=5), ["objective = 5"]),
    (lambda: lj.solve(P, method=["ipm"]), ["solver.method = ['ipm']"]),
    (lambda: lj.solve(P, method="newton"), ["solver.method = 'newton'"]),
    (lambda: lj.solve(P, max_rounds=True), ["max_rounds = True"]),
    (lambda: lj.solve(P, max_rounds=-1), ["max_rounds = -1"]),
    (lambda: lj.solve(P, batch=10**9), ["batch = 1000000000", "4,096"]),
    (lambda: lj.solve(P, config="x"), ["config: expected a IpmConfig"]),
    (lambda: lj.solve(P, config=IpmConfig(max_iter=1e9)), ["config.max_iter", "1,000,000"]),
    (lambda: lj.solve(P, config=IpmConfig(gap_tol="1e-6")), ["config.gap_tol = '1e-6'"]),
    (lambda: lj.solve_batch(5), ["problems = 5", "list"]),
    (lambda: lj.solve_batch({}), ["problems = {}", "list"]),
    (lambda: lj.solve_batch("pp"), ["problems = 'pp'", "list"]),
    (lambda: lj.solve_batch(P), ["problems: a Problem", "solve"]),
    (lambda: lj.solve_batch([P, "x"]), ["problems[1]: expected a Problem"]),
    (lambda: lj.solve_batch([STACKED]), ["problems[0]: a stacked batch"]),
    (lambda: lj.solve_batch([P], dtype="float16"), ["dtype = 'float16'"]),
    (lambda: lj.solve_batch([P], dtype=True), ["dtype = True"]),
    (lambda: lj.solve_batch([P], dtype=None), ["dtype = None"]),
    (lambda: lj.solve_batch([P], chunk=0), ["chunk = 0"]),
    (lambda: lj.solve_batch([P], chunk="8"), ["chunk = '8'"]),
    (lambda: lj.solve_batch([P], caps=[-1.0]), ["caps[0] = -1"]),
    (lambda: lj.solve_batch([P], caps=["1"]), ["caps = ['1']"]),
    (lambda: lj.solve_batch([P], caps=[1.0, 2.0]), ["caps has shape (2,)", "[1]"]),
    (lambda: lj.solve_batch([P], devices=["cpu"]), ["devices[0]: expected a Device"]),
    (lambda: lj.solve_batch([P], devices=[]), ["devices = []"]),
    (lambda: lj.solve_batch([P], certify_on_host="yes"), ["certify_on_host = 'yes'"]),
    (lambda: lj.solve_batch([P], float64_fallback=1), ["float64_fallback = 1"]),
    (lambda: lj.solve_batch([P], method=5), ["solver.method = 5"]),
    (lambda: lj.solve_batch([P], config=FirstOrderConfig()), ["config: expected a IpmConfig"]),
    (lambda: lj.solve_batch([P], method="optax", config=FirstOrderConfig(num_steps=0)),
     ["config.num_steps = 0"]),
    (lambda: lj.solve_stacked(P), ["p: a Problem", "solve_batch"]),
    (lambda: lj.solve_stacked([STACKED, P]), ["p[1]: a Problem"]),
    (lambda: lj.solve_stacked("x"), ["p = 'x'"]),
    (lambda: lj.solve_stacked(STACKED, caps=[1.0]), ["caps has shape (1,)", "[3]"]),
    (lambda: lj.equal_split(STACKED), ["p: a stacked batch"]),
    (lambda: lj.equal_split(P, config=3), ["config: expected a BarrierConfig"]),
    (lambda: lj.equal_split(P, config=BarrierConfig(mu=-1.0)), ["config.mu = -1"]),
])
def test_solvers_refuse_wrong_argument_types(call, needles):
    _raises(call, *needles)


def test_solver_configs_come_back_as_plain_values():
    from libra_jax.solvers.batch import check_config

    assert check_config(IpmConfig(max_iter=8.0), IpmConfig) == IpmConfig(max_iter=8)
    assert type(check_config(IpmConfig(max_iter=np.int64(8)), IpmConfig).max_iter) is int


@pytest.mark.parametrize("fn", [objective.step_time_s, objective.comm_time_s,
                                objective.network_cost_usd, objective.time_x_cost,
                                objective.max_violation])
def test_model_functions_check_their_arguments(fn):
    _raises(lambda: fn(np.ones(2), "p"), "p: expected a Problem")
    _raises(lambda: fn("1, 2", P), "bw_gbps = '1, 2'")
    _raises(lambda: fn({"a": 1}, P), "bw_gbps")


# --------------------------------------------------------------------------- studies


def test_solve_multi_checks_its_arguments():
    q = lj.problem_from_arrays([[0.5, 1.0]], np.ones(1), 0.2, None, SPEC)
    ok = dict(problems=[P, q], names=["a", "b"], weights=None, objective="sum_time",
              cost_rates_usd_per_gbps=None, spec=SPEC)
    for change, needles in [
        (dict(problems=P), ["problems: a Problem"]),
        (dict(problems={"a": P}), ["problems = {"]),
        (dict(problems=[P, "q"]), ["problems[1]: expected a Problem"]),
        (dict(names="ab"), ["names = 'ab'"]),
        (dict(names=["a", 2]), ["names[1] = 2"]),
        (dict(names=["a"]), ["names: 1 names for 2 workloads"]),
        (dict(weights=[True, 1.0]), ["weights[0] = True"]),
        (dict(weights=["1", 1.0]), ["weights[0] = '1'"]),
        (dict(weights={"a": 1.0}), ["weights = {'a': 1.0}"]),
        (dict(weights=[1e16, 1.0]), ["weights[0] = 1e+16", "1e+12",
                                     "LIMITS.max_coefficient"]),
        (dict(weights=[math.inf, 1.0]), ["weights[0] = inf"]),
        (dict(weights=[0.0, 0.0]), ["at least one weight must be > 0"]),
        (dict(objective=5), ["multi_objective = 5"]),
        (dict(spec="x"), ["spec: expected a ConstraintSpec"]),
        (dict(config="x"), ["config: expected a BarrierConfig"]),
    ]:
        kw = {**ok, **change}
        _raises(lambda kw=kw: lj.solve_multi(**kw), *needles)
    np.testing.assert_array_equal(multi.check_weights(np.array([1, 2]), 2), [1.0, 2.0])


def test_chunk_counts_check_their_arguments():
    tm = lj.TimingModel(model="pipelined", chunks=2)
    for chunks, needles in [(5, ["system.chunks = 5"]), ("14", ["system.chunks = '14'"]),
                            ([True, 2], ["system.chunks[0] = True"]),
                            ([1, 10**6], ["system.chunks[1] = 1000000", "4,096"])]:
        _raises(lambda c=chunks: solve_chunk_counts(NET, WL, None, SPEC, tm, c), *needles)
    _raises(lambda: solve_chunk_counts(NET, WL, None, SPEC, "tm", [1, 2]), "tm: expected")
    _raises(lambda: solve_chunk_counts(NET, WL, None, SPEC, tm, [1, 2], objective=3),
            "objective = 3")


def test_sensitivities_check_their_arguments():
    result = lj.SolveResult("perf", "ok", np.ones(2), 1.0, 1.0, None, None, 0.0, 0.0, 0.0)
    _raises(lambda: sensitivities("p", result, spec=SPEC), "problem: expected a Problem")
    _raises(lambda: sensitivities(P, {"status": "ok"}, spec=SPEC),
            "result: expected a SolveResult")
    _raises(lambda: sensitivities(P, result, spec="x"), "spec: expected a ConstraintSpec")
    _raises(lambda: sensitivities(P, result, spec=SPEC, network="RI(4)"),
            "network: expected a Network")
    _raises(lambda: sensitivities(P, result, spec=SPEC, timing_model={}),
            "timing_model: expected a TimingModel")


def test_cosearch_checks_its_arguments():
    from libra_jax.inputs.generators import Npu, Parallel, Transformer

    model = Transformer(name="m", layers=2, hidden=64, heads=4, ffn_hidden=256, seq_len=16,
                        vocab_size=0, micro_batch=1, global_batch=8, bytes_per_element=2,
                        convention="megatron", optimizer_bytes_per_param=12.0)
    base = Parallel(tp=1, pp=1, dp=32, zero_stage=0, recompute="none")
    npu = Npu(peak_tflops=100.0, efficiency=1.0)
    _raises(lambda: cosearch.cosearch("p", NET, model, base, npu), "cosearch: template")
    _raises(lambda: cosearch.cosearch(STACKED, NET, model, base, npu), "stacked batch")
    _raises(lambda: cosearch.cosearch(P, NET, {"layers": 2}, base, npu), "cosearch: model")
    _raises(lambda: cosearch.cosearch(P, NET, model, base, npu, tp=True), "cosearch.tp = True")
    _raises(lambda: cosearch.cosearch(P, NET, model, base, npu, dp=10**12), "cosearch.dp")
    _raises(lambda: cosearch.cosearch(P, NET, model, base, npu, reference="TP4"),
            "cosearch: reference = 'TP4'")


# --------------------------------------------------------------------------- timing model


@pytest.mark.parametrize("change,needles", [
    (dict(chunks=True), ["system.chunks = True"]),
    (dict(chunks="4"), ["system.chunks = '4'"]),
    (dict(chunks=10**6), ["system.chunks = 1000000", "4,096", "MAX_CHUNKS"]),
    (dict(latency_ns={"a": 1.0}), ["network.latency_ns = {'a': 1.0}"]),
    (dict(latency_ns="10"), ["network.latency_ns = '10'"]),
    (dict(latency_ns=[True, 1.0]), ["network.latency_ns[0] = True"]),
    (dict(latency_ns=[1e19, 1.0]), ["network.latency_ns[0] = 1e+19", "1e+18",
                                    "LIMITS.max_ns"]),
    (dict(endpoint_delay_ns="1"), ["system.endpoint_delay_ns = '1'"]),
    (dict(endpoint_delay_ns=1e19), ["system.endpoint_delay_ns = 1e+19", "1e+18"]),
    (dict(local_mem_bw_gbps=True), ["system.local_mem_bw_gbps = True"]),
    (dict(local_mem_bw_gbps=1e16), ["system.local_mem_bw_gbps = 1e+16", "1e+09"]),
    (dict(gb_is_gib=1), ["system.gb_is_gib = 1"]),
    (dict(schedule=["pipelined"]), ["schedule = ['pipelined']"]),
    (dict(training_loop=None), ["training_loop = None"]),
    (dict(model=5), ["model = 5"]),
])
def test_timing_model_fields_are_checked(change, needles):
    tm = dataclasses.replace(lj.TimingModel(model="pipelined"), **change)
    _raises(lambda: lj.build_timed_problem(NET, WL, None, SPEC, tm), *needles)


def test_build_timed_problem_checks_its_arguments():
    tm = lj.TimingModel()
    _raises(lambda: lj.build_timed_problem(NET, WL, None, SPEC, "libra"), "tm: expected")
    _raises(lambda: lj.build_timed_problem("net", WL, None, SPEC, tm), "network: expected")
    _raises(lambda: lj.build_timed_problem(NET, WL, None, None, tm), "spec: expected")
    _raises(lambda: pipelined.collective_time_ns(1, 1e6, np.array([4]), np.array([0]),
                                                 np.array([10.0]), latency_ns=0.0,
                                                 chunks=10**7), "chunks", "4096")
    # The pieces are closed form in the count: far more chunks are fine there (the limit of
    # many chunks), up to 2**53.
    _raises(lambda: pipelined.collective_pieces(1, 1e6, np.array([4]), np.array([0]),
                                                latency_ns=0.0, chunks=2**60),
            "chunks", "MAX_CHUNKS_CLOSED_FORM")
    _raises(lambda: pipelined.collective_pieces(1, 1e6, np.array([4]), np.array([0]),
                                                latency_ns=0.0, chunks=True), "chunks")


# --------------------------------------------------------------------------- scan


def test_scan_space_checks_types_and_limits():
    def cfg(**space):
        s = dict(npus=16, min_dims=2, max_dims=2, budgets_gbps=[100.0])
        s.update(space)
        return scan.ScanConfig(space=scan.SpaceConfig(**s),
                               workloads=[scan.ScanWorkloadConfig(file="workload/GPT_3.txt",
                                                                  tp=4)])

    _raises(lambda: scan.make_space(cfg(budgets_gbps=[1e300])),
            "space.budgets_gbps[0] = 1e+300", "1e+09")
    _raises(lambda: scan.make_space(cfg(budgets_gbps=[True])), "space.budgets_gbps[0] = True")
    _raises(lambda: scan.make_space(cfg(budgets_gbps=500.0)), "space.budgets_gbps = 500.0")
    _raises(lambda: scan.make_space(cfg(npus=10**40)), "space.npus", "LIMITS.max_npus")
    _raises(lambda: scan.make_space(cfg(max_dims="3")), "space.max_dims = '3'")
    _raises(lambda: scan.make_space(cfg(blocks="Ring")), "space.blocks = 'Ring'")
    _raises(lambda: scan.make_space("cfg"), "cfg: expected a ScanConfig")
    _raises(lambda: scan.run_scan(dataclasses.replace(cfg(), scan=scan.RunConfig(
        chunk_size="8")), "out"), "scan.chunk_size = '8'")


# --------------------------------------------------------------------------- generators


def _gpt(**blocks):
    m = dict(
        model=dict(name="m", layers=4, hidden=64, heads=4, ffn_hidden=256, seq_len=16,
                   vocab_size=0, micro_batch=1, global_batch=32, bytes_per_element=2,
                   convention="megatron", optimizer_bytes_per_param=12),
        parallel=dict(tp=1, pp=1, dp=32, zero_stage=0, recompute="none"),
        npu=dict(peak_tflops=100.0, efficiency=1.0))
    for block, values in blocks.items():
        m[block] = values if not isinstance(values, dict) else {**m[block], **values}
    return lambda: generate("transformer", m["model"], m["parallel"], m["npu"], [4, 8])


def test_generator_numbers_have_upper_limits():
    assert _gpt()().num_layers > 0
    _raises(_gpt(model={"layers": 10**40}), "workload.model.layers", "100,000")
    _raises(_gpt(model={"hidden": 1e300}), "workload.model.hidden = ", "2.14748e+09")
    _raises(_gpt(model={"seq_len": True}), "workload.model.seq_len = True")
    _raises(_gpt(model={"heads": "4"}), "workload.model.heads = '4'")
    _raises(_gpt(parallel={"tp": 10**40}), "workload.parallel.tp", "1.07374e+09")
    _raises(_gpt(parallel={"zero_stage": True}), "workload.parallel.zero_stage = True")
    _raises(_gpt(npu={"peak_tflops": 1e300}), "workload.npu.peak_tflops = 1e+300", "1e+12")
    _raises(_gpt(npu={"memory_bw_gbps": 1e16}), "workload.npu.memory_bw_gbps = 1e+16",
            "1e+09")
    _raises(_gpt(model=[1, 2]), "workload.model = [1, 2]", "mapping")
    # Each number in range, the workload they make is not: too many lines, too long a
    # compute, too large a collective.
    _raises(_gpt(model={"layers": 20_000}), "workload.model.layers = 20,000", "180,000 lines",
            "LIMITS.max_layers")
    _raises(_gpt(npu={"peak_tflops": 1e-300}), "the generated line", "LIMITS.max_ns")
    _raises(_gpt(model={"hidden": 2**30, "heads": 2**10, "ffn_hidden": 2**30}),
            "the generated line", "LIMITS.max_bytes")
    _raises(lambda: generate("transformer", {}, {}, {}, "48"), "npus = '48'")
    _raises(lambda: generate(["transformer"], {}, {}, {}, [4, 8]),
            "workload.generator = ['transformer']")
