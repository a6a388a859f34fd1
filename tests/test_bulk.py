"""Problems that `problem_from_arrays` leaves unbuilt (`quick_checks.surely_builds`) and
builds in bulk (`bulk.build_all`, through `batch.solve_batch`): the same arrays and results,
to the last bit, as building each problem at once (`problem_build.build`, the reference), and
every error still raised by `problem_from_arrays` itself, with the same message.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import pickle

import jax
import numpy as np
import pytest

from libra_jax.model import bulk, problem, problem_build, quick_checks
from libra_jax.model.problem import ConstraintSpec, Problem, problem_from_arrays
from libra_jax.solvers import batch as B
from libra_jax.solvers.solve import solve
from libra_jax.types import LibraInputError


def _case(rng, d=None, k=None):
    """A random problem's arguments (D 1-9, K 0-10 with repeated, idle and empty phases;
    bounds with zeros and infinities; a total as == or <= or none; cost rates, some of them
    0, with or without a budget), inputs as lists or arrays."""
    d = int(rng.integers(1, 10)) if d is None else d
    k = int(rng.integers(0, 11)) if k is None else k
    traffic = 10.0 ** rng.uniform(-3, 2, (k, d)) * (rng.random((k, d)) < 0.7)
    weight = rng.integers(0, 40, k).astype(float)
    if k > 2:
        traffic[-1] = traffic[0]  # repeated phases are merged
        weight[1] = 0.0  # an idle phase is dropped
    total = float(10.0 ** rng.uniform(1, 3))
    lo = total / d * rng.uniform(0, 0.4, d) * (rng.random(d) < 0.6)
    hi = np.where(rng.random(d) < 0.25, np.inf,
                  np.maximum(total * rng.uniform(0.2, 1.0, d), lo + 1.0))
    mode = str(rng.choice(["eq", "le", "none"]))
    rates = budget = None
    if rng.random() < 0.5:
        rates = rng.uniform(0.5, 10.0, d) * (rng.random(d) < 0.9)
        if rng.random() < 0.6:
            budget = float(rates @ np.minimum(hi, total) * rng.uniform(0.3, 1.2) + 1.0)
    if mode == "none" and np.isinf(hi).any() and budget is None:
        hi = np.where(np.isinf(hi), total, hi)  # (bounded)
    as_list = rng.random() < 0.5
    spec = ConstraintSpec(
        total_bw_gbps=None if mode == "none" else total,
        total_bw_mode="le" if mode == "none" else mode,
        lower_gbps=lo.tolist() if as_list else (None if not lo.any() else lo),
        upper_gbps=hi.tolist() if as_list else hi, max_cost_usd=budget)
    return (traffic.tolist() if as_list else traffic, weight.tolist() if as_list else weight,
            float(rng.uniform(0, 1)), rates, spec)


def _reference(args):
    """The problem built at once (no unbuilt path), or the error building it raises."""
    try:
        return problem_build.build(*args, "constraints", None, True)
    except LibraInputError as e:
        return e


def _assert_same_arrays(got: Problem, ref: Problem, msg=""):
    assert got.has_cost == ref.has_cost, msg
    for f in problem.ARRAY_FIELDS:
        a, b = getattr(got, f.name), getattr(ref, f.name)
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, \
            (msg, f.name)
        assert np.array_equal(a, b, equal_nan=True), (msg, f.name, a, b)


def _random_list(seed, n):
    rng = np.random.default_rng(seed)
    cases = [_case(rng) for _ in range(n)]
    refs = [_reference(c) for c in cases]
    keep = [i for i, r in enumerate(refs) if isinstance(r, Problem)]
    return [cases[i] for i in keep], [refs[i] for i in keep]


def test_unbuilt_problems_build_in_bulk_to_the_same_arrays():
    cases, refs = _random_list(0, 600)
    assert len(cases) >= 400
    probs = [problem_from_arrays(*c) for c in cases]
    unbuilt = [problem.unbuilt(p) is not None for p in probs]
    assert sum(unbuilt) >= 0.8 * len(probs), sum(unbuilt)  # (most of them were deferred)
    assert sum(len(p.__dict__["_lazy"].lo) >= 8 for p, u in zip(probs, unbuilt) if u) > 0
    bulk.build_all(probs)
    assert not any(problem.unbuilt(p) is not None for p in probs)
    for i, (p, ref) in enumerate(zip(probs, refs)):
        _assert_same_arrays(p, ref, f"#{i}")


def test_phases_merged_in_bulk_equal_merged_one_by_one(monkeypatch):
    """`bulk._merge_many` (a sort by a hash of each row) against
    `merge_weighted_phases` of each problem: rows, weights (bit for bit: the same sums in
    the same order) and counts, with repeated, idle, empty and -0.0 entries; again with
    every hash equal (then the rows are sorted lexicographically)."""
    rng = np.random.default_rng(11)
    for d in (1, 2, 3, 5, 7):
        traffic, weight = [], []
        for _ in range(400):
            k = int(rng.integers(0, 12))
            traffic.append(rng.choice([0.0, -0.0, 1.0, 2.5, 3.0], (k, d)))
            weight.append(rng.choice([0.0, 1.0, 2.0, 0.1, 0.7, 1e-17], k))
        one = [problem.merge_weighted_phases(t, w)[:2] for t, w in zip(traffic, weight)]
        ref = (np.concatenate([t for t, _ in one]), np.concatenate([w for _, w in one]),
               np.array([len(w) for _, w in one]))
        for hashes in ("", "equal"):
            if hashes:
                monkeypatch.setattr(bulk, "_HASH", np.zeros(3, np.uint64))
            got = bulk._merge_many(traffic, weight, d)
            for a, b in zip(got, ref):
                assert a.shape == b.shape and a.tobytes() == b.tobytes(), (d, hashes)
        monkeypatch.undo()


def test_an_unbuilt_problem_builds_alone_on_first_access():
    cases, refs = _random_list(1, 80)
    for i, (c, ref) in enumerate(zip(cases, refs)):
        p = problem_from_arrays(*c)
        _assert_same_arrays(p, ref, f"#{i}")  # (the first field read builds it)
        assert "_lazy" not in p.__dict__


def test_solve_batch_of_unbuilt_problems_gives_the_same_results():
    # D 2-5, K 1-8: the buckets of the benchmark's cold-start mix; unbuilt, built, and the
    # same unbuilt problem twice in one list. Fixed programs: otherwise the engine picks
    # chunk sizes and merged buckets from what the process compiled before (earlier tests),
    # and two programs may round the last bit differently, whatever built the problems.
    run = functools.partial(B.solve_batch, fixed_programs=True, chunk=256)
    rng = np.random.default_rng(2)
    cases = [_case(rng, d=int(rng.integers(2, 6)), k=int(rng.integers(1, 9)))
             for _ in range(400)]
    cases = [c for c in cases if isinstance(_reference(c), Problem)][:300]
    built = [problem_build.build(*c, "constraints", None, True) for c in cases]
    ref = run(built)
    lazy = [problem_from_arrays(*c) for c in cases]
    assert sum(problem.unbuilt(p) is not None for p in lazy) >= 250
    mixed = lazy[:100] + built[100:200] + lazy[200:]
    for res in (run(mixed), run(mixed)):  # (the second: built blocks)
        np.testing.assert_array_equal(res.step_time_ns, ref.step_time_ns)
        np.testing.assert_array_equal(res.lower_bound_ns, ref.lower_bound_ns)
        np.testing.assert_array_equal(res.iterations, ref.iterations)
        assert res.status == ref.status
        for a, b in zip(res.bandwidth_gbps, ref.bandwidth_gbps):
            np.testing.assert_array_equal(a, b)
    twice = B.solve_batch([lazy[5], lazy[5], lazy[7]])
    assert twice.step_time_ns[0] == twice.step_time_ns[1]
    assert twice.status == ["ok"] * 3


def _hostile(rng):
    """Arguments near every edge of building: totals at the lower bounds' sum, widths and
    budgets at their least, bandwidths of 1e-300, weights of 1e300, unbounded dims."""
    d = int(rng.integers(1, 5))
    k = int(rng.integers(1, 4))
    scale = 10.0 ** float(rng.choice([-300, -200, -8, 0, 3, 8, 9]))
    traffic = 10.0 ** rng.uniform(-2, 2, (k, d)) * (rng.random((k, d)) < 0.8)
    weight = np.full(k, 10.0 ** float(rng.choice([0, 100, 250, 290, 300])))
    total = min(scale * float(rng.uniform(0.5, 2)), 1e9)
    edge = rng.random() < 0.5  # (else the widths and bounds of a problem that builds)
    lo = np.minimum(total / d * rng.choice([0.0, 1.0 - 1e-13, 1.0, 1.0 + 1e-9, 0.5] if edge
                                           else [0.0, 0.1, 0.3], d), 1e9)
    hi = lo + total * rng.choice([1e-12, 1e-7, 1e-3, 1.0, np.inf] if edge
                                 else [0.5, 1.0, np.inf], d)
    hi = np.minimum(hi, 1e9)
    hi = np.where(hi <= 0, total, hi)
    mode = str(rng.choice(["eq", "le", "none"]))
    rates = budget = None
    if rng.random() < 0.5:
        rates = rng.choice([0.0, 1.0, 1e-9, 1e6], d)
        least = float(rates @ lo)
        budget = max(least * float(rng.choice([1.0, 1 + 1e-9, 1.5, 0.9])), 1e-300)
        budget = budget if budget > 0 and math.isfinite(budget) else None
        if rng.random() < 0.3:
            budget = None
    spec = ConstraintSpec(total_bw_gbps=None if mode == "none" else total,
                          total_bw_mode="le" if mode == "none" else mode,
                          lower_gbps=lo.tolist(), upper_gbps=hi.tolist(), max_cost_usd=budget)
    return traffic.tolist(), weight.tolist(), 0.0, rates, spec


def test_every_error_is_raised_by_problem_from_arrays_with_the_same_message():
    """`surely_builds` vouches only for problems that build: whatever it leaves unbuilt
    builds without an error, and every problem that cannot be built is refused at once,
    with the message of building it at once."""
    rng = np.random.default_rng(3)
    refused = deferred = 0
    for i in range(1500):
        args = _hostile(rng)
        ref = _reference(args)
        if isinstance(ref, LibraInputError):
            with pytest.raises(LibraInputError) as got:
                problem_from_arrays(*args)
            assert str(got.value) == str(ref), i
            refused += 1
        else:
            p = problem_from_arrays(*args)
            deferred += problem.unbuilt(p) is not None
            _assert_same_arrays(p, ref, f"#{i}")
    assert refused >= 200 and deferred >= 60, (refused, deferred)


@pytest.mark.parametrize("traffic,weight,compute,rates,spec_kw", [
    ([[1.0, True]], [1.0], 0.5, None, {}),  # a bool in a nested list
    ([[1.0, np.bool_(True)]], [1.0], 0.5, None, {}),
    ([[1.0, 2.0]], [True], 0.5, None, {}),
    ([[1.0, "2"]], [1.0], 0.5, None, {}),
    ([[1.0, float("nan")]], [1.0], 0.5, None, {}),
    ([[1.0, float("inf")]], [1.0], 0.5, None, {}),
    ([[1.0, -1.0]], [1.0], 0.5, None, {}),
    ([[1.0, 2.0]], [-1.0], 0.5, None, {}),
    ([[1.0, 2.0]], [1.0, 2.0], 0.5, None, {}),  # shapes
    ([[1.0], [1.0, 2.0]], [1.0, 1.0], 0.5, None, {}),  # ragged
    ([[1.0, 2.0]], [1.0], True, None, {}),
    ([[1.0, 2.0]], [1.0], -0.5, None, {}),
    ([[1.0, 2.0]], [1.0], 0.5, [1.0, True], {"max_cost_usd": 100.0}),
    ([[1.0, 2.0]], [1.0], 0.5, [1.0], {"max_cost_usd": 100.0}),
    ([[1.0, 2.0]], [1.0], 0.5, None, {"max_cost_usd": 100.0}),  # a budget without rates
    ([[1.0, 2.0]], [1.0], 0.5, None, {"lower_gbps": [1.0, 2.0, 3.0]}),
    ([[1.0, 2.0]], [1.0], 0.5, None, {"lower_gbps": [5.0, 1.0], "upper_gbps": [4.0, None]}),
    ([[1.0, 2.0]], [1.0], 0.5, None, {"lower_gbps": [1, 2]}),  # ints: the full checks
    ([[1, 2]], [1], 0, None, {"upper_gbps": np.array([50.0, np.inf])}),
    ([[1.0, 2.0]], [1.0], 0.5, None, {"total_bw_gbps": 1e10}),
])
def test_fast_checks_accept_only_what_the_full_checks_accept(traffic, weight, compute, rates,
                                                             spec_kw):
    kw = dict(total_bw_gbps=100.0) | spec_kw
    try:
        spec = ConstraintSpec(**kw)
    except LibraInputError:
        return  # (refused when the spec was made)
    try:
        ref = problem_build._checked(traffic, weight, compute, rates, spec, "constraints", None)
    except LibraInputError as e:
        assert problem_build._quick_inputs(traffic, weight, compute, rates, spec,
                                     "constraints") is None
        with pytest.raises(LibraInputError) as got:
            problem_from_arrays(traffic, weight, compute, rates, spec)
        assert str(got.value) == str(e)
        return
    quick = problem_build._quick_inputs(traffic, weight, compute, rates, spec, "constraints")
    if quick is not None:
        quick = problem.with_arrays(quick)
        for name in ("traffic", "weight", "rates", "lo", "hi"):
            np.testing.assert_array_equal(getattr(quick, name), getattr(ref, name))
            assert getattr(quick, name).dtype == getattr(ref, name).dtype
        assert (quick.compute, quick.total, quick.budget, quick.mode) == (
            ref.compute, ref.total, ref.budget, ref.mode)


@pytest.mark.parametrize("value,hi", [
    ([[1.0, 2.0], [0.0, -0.0]], None), (((1.0, 2.0), [3.0, 4.0]), 10.0), ([0.5, 0.25], None),
    ([[1.0, 2.0]], 1.5), ([[1.0], [1.0, 2.0]], None), ([[]], None), ([[1.0, 1]], None),
    ([1.0, True], None), ([[1.0, float("nan")]], None), ([1e308, 1e308], None),
    ([[1.0, [2.0]]], None), (np.array([[1.0, 2.0]]), None), (np.array([3, 4]), 5.0),
    ([np.float64(1.0), 2.0], None), ([], None), (np.array([1e308, 1e308]), None),
])
def test_checked_gives_the_array_its_largest_entry_and_its_sum(value, hi):
    """`quick_checks.checked`: the array of `numbers` (a copy), its largest entry and its
    sum where every entry is in [0, hi] (finite without ``hi``), else None; the array path
    and the list path agree."""
    got = quick_checks.checked(value, hi)
    try:
        ref = np.asarray(value, np.float64)
        with np.errstate(over="ignore"):
            ok = (ref.size > 0 and ref.ndim <= 2 and bool((ref >= 0).all())
                  and bool(np.isfinite(ref).all()) and (hi is None or bool((ref <= hi).all()))
                  # (a list whose sum overflows declines; an array's sum may be +inf)
                  and (isinstance(value, np.ndarray) or bool(np.isfinite(ref.sum()))))
    except (TypeError, ValueError):
        ok = False
    if ok and quick_checks.numbers(value) is None:
        ok = False  # (bools, strings: the full check decides)
    if not ok:
        assert got is None, value
        return
    x, top, total = got
    np.testing.assert_array_equal(x, ref)
    assert x.dtype == np.float64 and x.shape == ref.shape and top == ref.max()
    with np.errstate(over="ignore"):
        assert total == pytest.approx(ref.sum(), rel=1e-15)
    assert not np.shares_memory(x, value) if isinstance(value, np.ndarray) else True


def test_a_spec_changed_after_it_was_made_is_checked_again():
    spec = ConstraintSpec(total_bw_gbps=100.0, lower_gbps=[1.0, 2.0])
    spec.lower_gbps[1] = True  # (a bool is not a number)
    with pytest.raises(LibraInputError, match=r"lower_gbps\[1\]"):
        problem_from_arrays([[1.0, 1.0]], [1.0], 0.0, None, spec)
    spec.lower_gbps[1] = 60.0
    spec.total_bw_gbps = 50.0  # lower bounds above the total: infeasible, refused at once
    with pytest.raises(LibraInputError, match="cannot all hold"):
        problem_from_arrays([[1.0, 1.0]], [1.0], 0.0, None, spec)


def test_an_unbuilt_problem_behaves_as_a_built_one():
    args = ([[1.0, 2.0], [0.5, 0.0]], [3.0, 1.0], 0.25, [1.0, 2.0],
            ConstraintSpec(total_bw_gbps=100.0, lower_gbps=[1.0, 1.0], max_cost_usd=180.0))
    ref = problem_build.build(*args, "constraints", None, True)
    assert problem.unbuilt(problem_from_arrays(*args)) is not None
    # pickled (built first), a pytree, replaced, solved alone
    _assert_same_arrays(pickle.loads(pickle.dumps(problem_from_arrays(*args))), ref)
    leaves = jax.tree.leaves(problem_from_arrays(*args))
    assert all(np.array_equal(a, b) for a, b in zip(leaves, jax.tree.leaves(ref)))
    moved = dataclasses.replace(problem_from_arrays(*args), compute_s=np.asarray(1.0))
    assert float(moved.compute_s) == 1.0 and np.array_equal(moved.upper, ref.upper)
    one, base = solve(problem_from_arrays(*args), "perf"), solve(ref, "perf")
    assert one.step_time_ns == base.step_time_ns and one.status == base.status == "ok"
    # placed in a block by a batch call, then pickled and read
    p = problem_from_arrays(*args)
    B.solve_batch([p, problem_from_arrays(*args)])
    assert problem.block_row(p) is not None
    _assert_same_arrays(pickle.loads(pickle.dumps(p)), ref)
    with pytest.raises(AttributeError):
        problem_from_arrays(*args).no_such_field  # noqa: B018
    # warm_up builds its sample together too
    sample = [problem_from_arrays(*args) for _ in range(3)]
    B.warm_up(sample)
    assert all(q.upper.base is sample[0].upper.base is not None for q in sample)  # one block


def test_surely_builds_needs_a_margin():
    lo, hi = [10.0, 0.0], [20.0, 30.0]
    x = problem_build._quick_inputs([[1.0, 1.0]], [1.0], 0.0, None,
                              ConstraintSpec(total_bw_gbps=40.0, lower_gbps=lo,
                                             upper_gbps=hi), "constraints")
    assert quick_checks.surely_builds(x)
    for total in (10.0, 10.0 + 1e-9, 50.0 - 1e-9, 50.0):  # at the ends of the sums allowed
        x = problem_build._quick_inputs([[1.0, 1.0]], [1.0], 0.0, None,
                                  ConstraintSpec(total_bw_gbps=total, lower_gbps=lo,
                                                 upper_gbps=hi), "constraints")
        assert not quick_checks.surely_builds(x), total
