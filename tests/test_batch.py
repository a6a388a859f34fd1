"""Batched solves (`batch.solve_batch` / `solve_stacked`) against single solves (`solve.solve`).

One module-scoped batch of 200 random problems of mixed sizes (D 1..8, K 1..20, with and
without linear rows, bounds and cost budgets; generators of test_solve_random.py) is solved in
ONE solve_batch call and once per problem with `solve` (a batch of one); every bucket's problems
fit chunks of 16, so single and batched solves share one program per bucket and the other
tests reuse them.
The sharding check runs in a subprocess (XLA_FLAGS must be set before JAX is imported) that is
started when the module starts and overlaps the single solves.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from test_solve_random import build, make_case

from libra_jax.model import problem
from libra_jax.model.problem import (
    ConstraintSpec,
    ModelRows,
    problem_from_arrays,
    problems_from_stacked,
)
from libra_jax.solvers import batch as B
from libra_jax.solvers import batch_plan as BP
from libra_jax.solvers import batch_run as BR
from libra_jax.solvers import ipm
from libra_jax.solvers.certificate import status_codes
from libra_jax.solvers.solve import solve
from libra_jax.types import LibraInputError, Status

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (D, K, mix, count): four buckets (see batch.bucket_shape).
GROUPS = [
    (1, 1, "cost", 36),
    (3, 5, "le_hi", 50),
    (4, 11, "linear", 50),
    (8, 20, "all", 64),
]
NUM_BUCKETS = 4

# --------------------------------------------------------------------------- sharding script

SHARD_SCRIPT = textwrap.dedent(
    """
    import os, sys
    assert "jax" not in sys.modules
    sys.path.insert(0, {tests!r})
    import jax
    import numpy as np
    jax.config.update("jax_enable_x64", True)
    from libra_jax.solvers.batch import solve_batch
    from test_solve_random import build, make_case

    assert len(jax.devices()) == 4, jax.devices()
    rng = np.random.default_rng(7)
    # 38 problems: not a multiple of 4, so the chunk is padded by repetition.
    probs = [build(make_case(rng, 5, 3, "le_hi")) for _ in range(38)]
    out = {{}}
    for name, devs in (("four", None), ("one", [jax.devices()[0]])):
        r = solve_batch(probs, devices=devs)
        out[name + "_step"] = r.step_time_ns
        out[name + "_bw"] = np.stack(r.bandwidth_gbps)
        out[name + "_gap"] = r.optimality_gap
        out[name + "_status"] = np.array(r.status)
    np.savez({out!r}, **out)
    """
)


@pytest.fixture(scope="module", autouse=True)
def shard_proc(tmp_path_factory):
    """Starts the 4-device subprocess at module start; the sharding test waits for it."""
    out = tmp_path_factory.mktemp("shard") / "shard.npz"
    script = out.with_name("shard.py")
    script.write_text(SHARD_SCRIPT.format(tests=str(ROOT / "tests"), out=str(out)))
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4")
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.Popen([sys.executable, str(script)], cwd=str(ROOT), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    yield proc, out
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    proc.stdout.close()  # (left open when the sharding test is deselected)


# --------------------------------------------------------------------------- the big batch


@pytest.fixture(scope="module")
def mixed():
    """200 problems in a shuffled order, their single solves and one solve_batch call."""
    rng = np.random.default_rng(2024)
    probs, tags = [], []
    for d, k, mix, count in GROUPS:
        for _ in range(count):
            probs.append(build(make_case(rng, k, d, mix)))
            tags.append((d, k, mix))
    order = rng.permutation(len(probs))
    probs = [probs[i] for i in order]
    tags = [tags[i] for i in order]
    before = B.compiled_programs()
    res = B.solve_batch(probs)
    singles = [solve(p, "perf") for p in probs]
    growth = B.compiled_programs() - before
    return dict(probs=probs, tags=tags, singles=singles, res=res, growth=growth)


def _total(p) -> float:
    return float(np.sum(np.asarray(p.upper)))


def _unique_optimum_likely(p, single) -> bool:
    """Bandwidths are compared only where the optimum is (very likely) unique: every dimension
    carries traffic and the single solve is certified to a tiny gap."""
    used = np.all(np.any(np.asarray(p.traffic_gb) > 0, axis=0))
    return bool(used and single.status == "ok" and single.optimality_gap <= 1e-10)


def test_batched_equals_single(mixed):
    probs, singles, res = mixed["probs"], mixed["singles"], mixed["res"]
    assert len(probs) >= 200 and len(res) == len(probs)
    assert len({B.bucket_shape(p) for p in probs}) == NUM_BUCKETS
    compared_bw = 0
    for i, (p, s) in enumerate(zip(probs, singles)):
        msg = f"#{i} {mixed['tags'][i]} single={s} batch status={res.status[i]}"
        assert res.status[i] == s.status == "ok", msg
        assert res.bandwidth_gbps[i].shape == (p.num_dims,), msg
        assert res.step_time_ns[i] == pytest.approx(s.step_time_ns, rel=1e-9), msg
        assert res.max_violation[i] <= 1e-9, msg
        assert res.lower_bound_ns[i] <= res.step_time_ns[i] * (1 + 1e-12), msg
        assert res.lower_bound_ns[i] <= s.step_time_ns * (1 + 1e-9), msg
        assert res.optimality_gap[i] <= 1e-6, msg
        if _unique_optimum_likely(p, s):
            np.testing.assert_allclose(res.bandwidth_gbps[i], s.bandwidth_gbps, rtol=0,
                                       atol=1e-6 * _total(p), err_msg=msg)
            compared_bw += 1
    assert compared_bw >= 50, compared_bw
    # The kernel's own bound certified (almost) everything: the host LP is the exception.
    assert res.host_certified <= 0.05 * len(probs), res.host_certified


def test_compilations_bounded_by_buckets(mixed):
    # One chunk program per bucket for the batch, one of 16 for the single solves.
    # 0 when an earlier test already compiled these buckets.
    assert 0 <= mixed["growth"] <= 2 * NUM_BUCKETS


def test_another_batch_size_compiles_nothing(mixed):
    """A second call with another number of problems per bucket reuses the compiled chunks
    (the batch axis is padded to a fixed ladder of chunk sizes), and gives the same results."""
    probs, ref = mixed["probs"], mixed["res"]
    before = B.compiled_programs()
    sub = B.solve_batch(probs[:137])
    assert B.compiled_programs() == before
    np.testing.assert_allclose(sub.step_time_ns, ref.step_time_ns[:137], rtol=1e-12)
    assert sub.status == ref.status[:137]


def _plan_buckets_naive(counts, max_chunk, compiled=frozenset(), tiers=tuple(B.TIERS)):
    """`B.plan_buckets` as it was before its merges were cached: every pair's merge costed
    again at every step (the reference)."""
    def best_target(join, n):
        options = [join] + [shape for shape, _, _ in compiled
                            if all(x >= y for x, y in zip(shape, join))]
        return min(((B.program_plan(t, n, max_chunk, compiled, tiers)[0], t)
                    for t in set(options)), key=lambda ct: (ct[0], ct[1]))

    clusters = [[*best_target(shape, n), shape, n, [shape]]
                for shape, n in sorted(counts.items())]
    while len(clusters) > 1:
        best = None
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                ca, cb = clusters[a], clusters[b]
                join, n = BP._join(ca[2], cb[2]), ca[3] + cb[3]
                c, t = best_target(join, n)
                saving = ca[0] + cb[0] - c
                if saving > 0 and (best is None or saving > best[0]):
                    best = (saving, a, b, [c, t, join, n, ca[4] + cb[4]])
        if best is None:
            break
        _, a, b, merged = best
        clusters = [c for i, c in enumerate(clusters) if i not in (a, b)] + [merged]
    return {shape: c[1] for c in clusters for shape in c[4]}


def test_plan_buckets_equals_the_plan_without_cached_merges():
    rng = np.random.default_rng(9)
    sizes = [4, 6, 8, 12, 16, 24]
    for case in range(12):
        counts = {}
        for _ in range(int(rng.integers(2, 30))):
            shape = (int(rng.choice(sizes[:3])), int(rng.choice(sizes)), int(rng.integers(0, 3)),
                     int(rng.integers(0, 2)), 0, 0)
            counts[shape] = int(10 ** rng.uniform(0, 4.5))
        compiled = frozenset() if case % 3 else frozenset(
            {(max(counts), 256, "full"), ((8, 24, 2, 1, 0, 0), 16, "quick")})
        for max_chunk in (256, 1024):
            assert B.plan_buckets(counts, max_chunk, compiled) == _plan_buckets_naive(
                counts, max_chunk, compiled), (case, max_chunk)


def test_a_plan_made_before_is_the_plan_made_again(monkeypatch):
    """`plan_call` takes a plan it made for the same arguments (`_PLANS`) rather than
    planning again: equal to planning afresh, and not shared with the caller."""
    rng = np.random.default_rng(10)
    monkeypatch.setattr(BP, "_PLANS", {})
    for case in range(6):
        counts = {(int(rng.choice([4, 6])), int(rng.choice([4, 8, 16])), 2, 1, 0, 0):
                  int(10 ** rng.uniform(0, 4)) for _ in range(int(rng.integers(1, 8)))}
        compiled = frozenset() if case % 2 else frozenset({(max(counts), 256, "full")})
        fresh = []
        for _ in range(2):
            target, plans = BP.plan_call(counts, 256, compiled, None)
            fresh.append((target, plans))
            target[max(counts)] = None  # (a caller's change stays the caller's)
            plans.clear()
        monkeypatch.setattr(BP, "_PLANS", {})
        again = BP.plan_call(counts, 256, compiled, None)
        assert fresh[0] == fresh[1] and again[0] == BP.plan_buckets(counts, 256, compiled)
        assert all(again[1][t] == BP.program_plan(
            t, sum(c for s, c in counts.items() if again[0][s] == t), 256, compiled)[1:]
            for t in set(again[0].values()))
        assert BP.plan_call(counts, 256, compiled, None) == again
    assert BP.plan_call({(4, 4, 0, 1, 0, 0): 300}, 256, frozenset(), None, fixed=True) == (
        {(4, 4, 0, 1, 0, 0): (4, 4, 0, 1, 0, 0)}, {(4, 4, 0, 1, 0, 0): ("full", [256, 256])})


def test_the_planner_rents_padding_until_it_has_paid_for_a_program(monkeypatch):
    """Ski rental across calls (`batch_plan.Paid`, `paid_credit`): the padding earlier
    calls paid, per (bucket, bucket it ran in), is taken off the estimated compilation of
    a program that would have saved it, by hand; a mix whose small-bucket problems ran
    padded in a compiled large program stays there on a first call and gets its own
    program once the padding it paid exceeds a compilation; the key holds the counts as
    they stood when the total last doubled (a plan is made again only then)."""
    small, large = (4, 8, 2, 1, 0, 0), (6, 16, 2, 1, 0, 0)
    per = BP.problem_seconds(large) - BP.problem_seconds(small)
    assert per == pytest.approx(10.5e-6 * (6 ** 1.2 * 2.6 - 4 ** 1.2 * 1.8))
    assert BP.paid_credit(frozenset({(small, large, 1000)}), small) == pytest.approx(1000 * per)
    assert BP.paid_credit(frozenset({(small, large, 1000)}), large) == 0.0
    assert BP.paid_credit(frozenset({(large, (8, 16, 2, 1, 0, 0), 64)}), small) == 0.0
    counts = {small: 3750, large: 1250}
    compiled = frozenset({(large, 256, "full")})
    assert set(BP.plan_buckets(counts, 256, compiled).values()) == {large}
    paid = BP.Paid()
    calls = 0
    while BP.plan_buckets(counts, 256, compiled, paid=paid.key("k"))[small] == large:
        paid.add("k", small, large, 3750)
        paid.add("k", large, large, 1250)  # (a bucket in its own program pays nothing)
        calls += 1
        assert calls < 100
    # it split once the padding paid (in the key's powers of two) neared a compilation
    credit = BP.paid_credit(paid.key("k"), small)
    assert credit > 0.5 * BP.COMPILE_SECONDS["full"] and 3750 * per * (calls - 1) < (
        2 * BP.COMPILE_SECONDS["full"]), (calls, credit)
    # (the key: the counts as they stood when the kind's total last doubled)
    last = 1 << ((3750 * calls).bit_length() - 1)
    assert paid.key("k") == frozenset({(small, large, 3750 * -(-last // 3750))})
    assert BP.program_plan(small, 3750, 256, compiled, credit=1e9)[0] == pytest.approx(
        15 * 256 * BP.problem_seconds(small) + BP.MIN_COMPILE_SHARE
        * BP.COMPILE_SECONDS["full"] + 15 * BP.CHUNK_SECONDS["full"])


def test_programs_noted_in_the_store_count_as_compiled(monkeypatch):
    """A program another process compiled and stored (its note in the store: `STORE.note`)
    is planned as stored (a load); notes of another kind, or damaged ones, are not."""
    kind = B._kind(B.ipm.IpmConfig(), np.float64, jax.local_devices())
    notes = (f"{kind!r}|{((4, 8, 2, 1, 0, 0), 256, 'full')!r}",
             f"{kind!r}|((4, 8, 2",  # damaged
             f"('other', 1)|{((6, 8, 2, 1, 0, 0), 256, 'full')!r}")
    monkeypatch.setattr(BP.STORE, "notes", lambda: notes)
    monkeypatch.setattr(BP, "STORED", {})
    monkeypatch.setattr(BP, "COMPILED", set())
    compiled, stored = BP.compiled_for(kind)
    assert compiled == frozenset() and stored == {((4, 8, 2, 1, 0, 0), 256, "full")}
    # a stored program costs a load, not a compilation: a small call takes it over a
    # larger compiled program only where the padding saved pays for the load
    small, big = (4, 8, 2, 1, 0, 0), (6, 16, 2, 1, 0, 0)
    have = frozenset({(big, 256, "full")})
    assert BP.plan_buckets({small: 16}, 256, have, stored=stored) == {small: big}
    assert BP.plan_buckets({small: 10000}, 256, have, stored=stored) == {small: small}
    assert BP.program_plan(small, 256, 256, tiers=("full",), stored=stored)[0] == (
        pytest.approx(256 * BP.problem_seconds(small) + BP.LOAD_SECONDS
                      + BP.CHUNK_SECONDS["full"]))


def test_chunk_plan_covers_every_size_with_ladder_sizes():
    for n in [2, 15, 16, 17, 200, 1000, 1024, 1025, 12345]:
        plan = B.chunk_plan(n, 1024)
        assert set(plan) <= {16, 256, 1024} and len(set(plan)) <= 2
        assert sum(plan) >= n and sum(plan) - plan[-1] < n  # only the last chunk is padded
    assert B.chunk_plan(100000, 65536) == [65536, 65536]
    assert B.chunk_plan(3, 65536) == [16]
    # One problem runs alone (the single-problem program) unless a chunk program of its
    # bucket is compiled already.
    assert B.chunk_plan(1, 1024) == [1]
    assert B.chunk_plan(1, 1024, {16}, 1e-4) == [16]


def test_bucket_sizes_step_by_at_most_half():
    assert [BP._ladder(n) for n in range(0, 33)] == (
        [4] * 5 + [6] * 2 + [8] * 2 + [12] * 4 + [16] * 4 + [24] * 8 + [32] * 8)
    assert BP._ladder(33) == 48 and BP._ladder(1000) == 1024
    p = problem_from_arrays(np.arange(1.0, 46.0).reshape(9, 5), np.arange(1.0, 10.0), 0.1, None,
                            ConstraintSpec(total_bw_gbps=100.0))
    assert B.bucket_shape(p) == (6, 12, 0, 1, 0, 0)


def test_an_iteration_limit_changes_no_result(monkeypatch):
    """Chunks may run under an iteration limit (`BR._IterationLimit`); the problems it stops
    are solved again from their start, in chunks of their size (the same program): every
    output equals that of the run without a limit, bit for bit."""
    rng = np.random.default_rng(5)
    probs = [build(make_case(rng, 5, 3, "le_hi")) for _ in range(70)]
    bucket = B.pad_concat([B.stack([p]) for p in probs], B.bucket_shape(probs[0]))
    caps, ons = np.zeros(70), np.zeros(70, bool)
    run = dict(dtype=np.float64, plan=[16] * 5, devices=jax.local_devices()[:1],
               config=ipm.IpmConfig(), tier="quick")
    monkeypatch.setattr(BR, "LIMIT_MIN_CHUNKS", 10**9)  # (no limit)
    ref = B.run_bucket(bucket, caps, ons, **run)
    monkeypatch.setattr(BR, "LIMIT_MIN_CHUNKS", 0)
    limits = []

    def current(self, size):  # a limit below most problems' iterations, after the first
        self.calls += 1
        limits.append(self.max_iter if self.calls == 1 or not self.active else 4)
        return limits[-1]

    monkeypatch.setattr(BR._IterationLimit, "current", current)
    got = B.run_bucket(bucket, caps, ons, **run)
    assert limits.count(4) == 4 and np.sum(ref[4][16:] > 4) >= 20  # (stopped, solved again)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)


def test_buckets_side_by_side_give_each_buckets_own_results(monkeypatch):
    """`run_buckets` runs several buckets' chunks in one pool (each bucket's first chunk,
    then the rest of all, then what a limit stopped): every output equals that of running
    each bucket alone (`run_bucket`), bit for bit, limits included."""
    rng = np.random.default_rng(6)
    run = dict(dtype=np.float64, devices=jax.local_devices()[:1], config=ipm.IpmConfig())
    monkeypatch.setattr(BR, "LIMIT_MIN_CHUNKS", 0)
    work = []
    for d, k, n in ((3, 2, 70), (5, 3, 40)):
        probs = [build(make_case(rng, d, k, "le_hi")) for _ in range(n)]
        bucket = B.pad_concat([B.stack([p]) for p in probs], B.bucket_shape(probs[0]))
        work.append((bucket, np.zeros(n), np.zeros(n, bool), [16] * -(-n // 16), "quick"))
    together = BR.run_buckets(work, **run)
    for (bucket, caps, ons, plan, tier), got in zip(work, together):
        alone = B.run_bucket(bucket, caps, ons, plan=plan, tier=tier, **run)
        assert len(got) == len(alone) == 7
        for a, b in zip(got, alone):
            np.testing.assert_array_equal(a, b)


def test_warm_up_calls_plan_finer_buckets_for_a_long_run():
    """``calls`` (`warm_up`): the planner weighs a program's compilation over that many
    calls: a mix that one call runs in one padded program gets programs of its own sizes
    when it will be solved many times."""
    small, large = (4, 8, 2, 1, 0, 0), (6, 16, 2, 1, 0, 0)
    counts = {small: 3750, large: 1250}
    assert set(BP.plan_buckets(counts, 256).values()) == {large}
    assert BP.plan_buckets(counts, 256, calls=100) == {small: small, large: large}
    cost_1 = BP.program_plan(small, 3750, 256, tiers=("full",))[0]
    cost_100 = BP.program_plan(small, 3750, 256, tiers=("full",), calls=100)[0]
    assert cost_1 - cost_100 == pytest.approx(0.99 * BP.COMPILE_SECONDS["full"])
    with pytest.raises(LibraInputError, match="calls"):
        B.warm_up([build(make_case(np.random.default_rng(0), 3, 2, "le_hi"))], calls=0)


def test_the_iteration_limit_follows_the_sampled_iterations():
    lim = BR._IterationLimit(80, n=10240, active=True)
    assert lim.current(256) == 80  # (no sample yet: the first chunk runs without a limit)
    lim.observe(np.array([9] * 250 + [20] * 6), 80)
    # 6 in 256 need 20 iterations: every chunk would run 20; with a limit of 9 they run 9,
    # and the few above are solved again in chunks of their own.
    assert [lim.current(256) for _ in range(7)] == [9] * 7
    assert lim.current(256) == 80  # (every LIMIT_SAMPLE_EVERY-th chunk samples again)
    even = BR._IterationLimit(80, n=10240, active=True)
    even.observe(np.array([9] * 128 + [10] * 128), 80)
    assert even.current(256) == 80  # (half of them above any lower limit: none pays)
    lim.observe(np.array([30] * 256), 12)  # (a chunk run under a limit adds nothing)
    assert lim.seen.sum() == 256
    lim.stop()
    assert lim.current(256) == 80


def test_single_problem_program_matches_the_chunk_program():
    """A call of one problem runs `BR._kernel_one` (traced without vmap; plan [1]): the same
    iterations as the vmapped chunk program, so the same results up to XLA's rounding, with
    and without a cost cap, at both tiers."""
    rng = np.random.default_rng(11)
    devices = jax.local_devices()[:1]
    cases = [build(make_case(rng, k, d, mix)) for d, k, mix, _ in GROUPS for _ in range(4)]
    checked = 0
    for i, p in enumerate(cases):
        bucket = B.stack([B.pad_one(p)])
        rate = np.asarray(p.cost_rate)
        c_int = float(rate @ np.asarray(p.interior))
        c_min = float(rate @ np.asarray(p.min_cost_bw))
        # (a cap below the interior point's cost: the start moves towards the least cost)
        for cap, on in ((0.0, False), (c_min + 0.7 * (c_int - c_min), True)):
            caps, ons = np.array([cap]), np.array([on])
            for tier in ("quick", "full"):
                one, chunk = (B.run_bucket(bucket, caps, ons, dtype=np.float64, plan=[size],
                                           devices=devices, config=ipm.IpmConfig(),
                                           tier=tier) for size in (1, 16))
                msg = f"case {i} cap {on} {tier}"
                assert all(bool(x[5][0]) and bool(x[6][0]) for x in (one, chunk)), msg
                assert one[2][0] > -np.inf, msg  # (finite and started inside: certified)
                assert one[1][0] == pytest.approx(chunk[1][0], rel=1e-12), msg  # step
                assert one[2][0] == pytest.approx(chunk[2][0], rel=1e-9), msg  # bound
                np.testing.assert_allclose(one[0][0], chunk[0][0], rtol=0,
                                           atol=1e-9 * _total(p), err_msg=msg)
                checked += 1
    assert checked == 4 * len(GROUPS) * 4
    # A fresh bucket's single solve runs the single-problem program.
    assert B.chunk_plan(1, B.default_max_chunk()) == [1]


def test_no_recompilation_when_only_values_change(mixed):
    """Same shapes and counts, new values: nothing is traced or compiled again."""
    probs = mixed["probs"]
    scaled = [dataclasses.replace(p, traffic_gb=np.asarray(p.traffic_gb) * 1.37,
                                  compute_s=np.asarray(p.compute_s) * 0.5) for p in probs]
    before = B.compiled_programs()
    res = B.solve_batch(scaled)
    assert B.compiled_programs() == before
    assert all(s == "ok" for s in res.status)
    # Scaling the traffic leaves the optimal bandwidths of a perf problem unchanged.
    for i, p in enumerate(probs):
        if _unique_optimum_likely(p, mixed["singles"][i]):
            np.testing.assert_allclose(res.bandwidth_gbps[i], mixed["res"].bandwidth_gbps[i],
                                       rtol=0, atol=1e-6 * _total(p))


def test_padding_never_changes_a_result(mixed):
    """Problems of every bucket, padded into one bucket that holds them all, give the results
    of their own bucket; padded dimensions stay at their fixed 1 GB/s."""
    probs, res = mixed["probs"], mixed["res"]
    big = tuple(np.max([B.bucket_shape(p) for p in probs], axis=0))
    small = [i for i, p in enumerate(probs) if B.bucket_shape(p) != big][:16]
    stacked = B.stack([_padded(probs[i], big) for i in small])
    assert B.bucket_shape(stacked) == big
    out = B.solve_stacked(stacked)
    for j, i in enumerate(small):
        d = probs[i].num_dims
        msg = f"#{i} {mixed['tags'][i]}"
        assert out.status[j] == "ok", msg
        assert out.step_time_ns[j] == pytest.approx(res.step_time_ns[i], rel=1e-9), msg
        np.testing.assert_allclose(out.bandwidth_gbps[j][:d], res.bandwidth_gbps[i], rtol=0,
                                   atol=1e-6 * _total(probs[i]), err_msg=msg)
        np.testing.assert_array_equal(out.bandwidth_gbps[j][d:], 1.0)


def test_every_field_is_padded_to_the_bucket_by_its_metadata():
    # A problem with general rows (J, R > 0), a linear row (I) and a total (E), padded to a
    # bucket larger on every axis: each array field takes the sizes its metadata names.
    rows = ModelRows(weight=np.array([1.0, 2.0]), piece=np.array([0, 0, 1]),
                     const_s=np.array([1e-6, 0.0, 2e-6]), coef_gb=np.ones((3, 3)),
                     nest=np.array([[0.0, 0.0], [0.0, 0.0], [0.5, 0.0]]))
    p = problem.problem_from_arrays(
        np.array([[1.0, 2.0, 0.0]]), np.ones(1), 0.1, None,
        ConstraintSpec(total_bw_gbps=10.0, linear=["bw[0] >= bw[1]"]), rows=rows)
    stacked = B.stack([p, p])
    shape = tuple(2 * n + 1 for n in problem.problem_sizes(stacked))
    padded = B.pad_stacked(stacked, shape)
    assert problem.problem_sizes(padded) == shape
    size = dict(zip(problem.SIZE_AXES, shape))
    static = [f.name for f in dataclasses.fields(problem.Problem) if f.metadata.get("static")]
    assert {f.name for f in problem.ARRAY_FIELDS} | set(static) == {
        f.name for f in dataclasses.fields(problem.Problem)}
    for f in problem.ARRAY_FIELDS:
        x, meta = getattr(padded, f.name), f.metadata
        assert x.shape == (2,) + tuple(size[a] for a in meta["axes"]), f.name
        assert x.dtype == meta["dtype"], f.name
        before = np.asarray(getattr(stacked, f.name))
        np.testing.assert_array_equal(x[tuple(slice(n) for n in before.shape)], before)
        # What the padding added holds the field's neutral value.
        added = np.ones(x.shape, bool)
        added[tuple(slice(n) for n in before.shape)] = False
        assert np.all(x[added] == meta["fill"]), f.name


def test_status_rule_table_eager_and_jitted():
    inside = np.array([False, False, True, True, True, True])
    finite = np.array([True, False, False, True, True, True])
    gap = np.array([0.0, 0.0, 0.0, 1e-7, 1e-5, 1e-7])
    viol = np.array([0.0, 0.0, 0.0, 1e-10, 0.0, 1e-8])
    want = [Status.INFEASIBLE, Status.INFEASIBLE, Status.NONFINITE, Status.OK,
            Status.NOT_CONVERGED, Status.NOT_CONVERGED]
    with jax.enable_x64(True):
        eager = np.asarray(status_codes(inside, finite, gap, viol))
        jitted = np.asarray(jax.jit(status_codes)(inside, finite, gap, viol))
    np.testing.assert_array_equal(eager, [int(s) for s in want])
    np.testing.assert_array_equal(jitted, eager)


def _padded(p, shape):
    """One problem padded to ``shape`` (a stacked batch of one, unstacked)."""
    return B.unstack(B.pad_stacked(B.stack([p]), shape), 0)


def _with_bad(mixed, make_bad):
    """16 problems of one bucket of the big batch (a kernel program already compiled) with
    problems 1, 2, 3 replaced by make_bad(p, slot)."""
    probs = mixed["probs"]
    shape = B.bucket_shape(probs[0])
    idx = [i for i, p in enumerate(probs) if B.bucket_shape(p) == shape][:16]
    batch = [probs[i] for i in idx]
    bad_slots = (1, 2, 3)
    for s in bad_slots:
        batch[s] = make_bad(batch[s], s)
    before = B.STORE.programs(BR._kernel)  # (the host's polish may compile its exact step)
    res = B.solve_batch(batch)
    assert B.STORE.programs(BR._kernel) == before
    ref = mixed["res"]
    for j, i in enumerate(idx):  # the others are untouched
        if j in bad_slots:
            continue
        assert res.status[j] == ref.status[i]
        assert res.step_time_ns[j] == pytest.approx(ref.step_time_ns[i], rel=1e-12)
    return [res.status[s] for s in bad_slots], res


def test_bad_start_and_nan_weight_do_not_abort_the_batch(mixed):
    def make_bad(p, slot):
        if slot == 1:  # start point outside the domain: negative bandwidths violate lo
            return dataclasses.replace(p, interior=-np.asarray(p.interior) - 1.0)
        if slot == 2:  # NaN weight
            return dataclasses.replace(p, weight=np.asarray(p.weight).copy() * np.nan)
        return dataclasses.replace(p, compute_s=np.asarray(np.inf))  # non-finite compute

    statuses, _ = _with_bad(mixed, make_bad)
    assert statuses == ["infeasible", "non-finite", "non-finite"]


def test_nan_traffic_is_non_finite(mixed):
    def make_bad(p, slot):
        t = np.array(p.traffic_gb)
        t[0, np.argmax(t[0] > 0)] = np.nan
        return dataclasses.replace(p, traffic_gb=t)

    statuses, res = _with_bad(mixed, make_bad)
    assert statuses == ["non-finite"] * 3, (statuses, res.step_time_ns[1:4])


def test_shipped_cases_in_one_batch_equal_single_solves():
    """The 15 shipped perf cases (3D and 4D, both constraint sets) in one solve_batch call
    against their single solves and the pinned exact optima."""
    from test_optima import CASES, _problem

    cases = [c for c in CASES if c["objective"] == "perf"]
    probs = [_problem(c["workload"], c["network"], c["communicator_file"], c["constraints"])
             for c in cases]
    res = B.solve_batch(probs)
    for i, (c, p) in enumerate(zip(cases, probs)):
        single = solve(p)
        assert res.status[i] == single.status == "ok", c
        assert res.step_time_ns[i] == pytest.approx(single.step_time_ns, rel=1e-9)
        assert res.step_time_ns[i] == pytest.approx(c["step_time_ns"], rel=1e-9)
        assert res.optimality_gap[i] <= 1e-9
        np.testing.assert_allclose(res.bandwidth_gbps[i], single.bandwidth_gbps, rtol=1e-6,
                                   atol=1e-6)


def test_optax_method_runs_vmapped_through_the_batch_api():
    """solver.method=optax: the 15 shipped perf cases in one vmapped call (first-order phase,
    then the exact step on its active set), every one certified ok by the in-kernel bound
    (no host LP) and at the pinned optimum. Measured: gaps <= 1.3e-16, step times within
    1.6e-10 of the pinned optima (which are rounded)."""
    from test_optima import CASES, _problem

    cases = [c for c in CASES if c["objective"] == "perf"]
    probs = [_problem(c["workload"], c["network"], c["communicator_file"], c["constraints"])
             for c in cases]
    res = B.solve_batch(probs, method="optax")
    assert res.host_certified == 0
    for i, c in enumerate(cases):
        assert res.status[i] == "ok", c
        assert res.step_time_ns[i] == pytest.approx(c["step_time_ns"], rel=1e-9), c
        assert res.lower_bound_ns[i] <= c["step_time_ns"] * (1 + 1e-9), c
        assert res.optimality_gap[i] <= 1e-6, c
        assert res.max_violation[i] <= 1e-9, c
    with pytest.raises(Exception, match="optax"):
        B.solve_batch(probs[:1], method="optax", caps=[1.0])


def test_optax_method_on_random_problems_matches_the_interior_point_kernel():
    """50 random problems (4 dims, 6 phases; a total budget, == with lower bounds or <= with
    upper and lower bounds): method=optax against the interior-point kernel. Every ok
    result is at the kernel's optimum, and every bound is a true bound. Measured: 49 of 50
    ok (within 9e-13); the other one's first-order phase stops 15% above the optimum, too
    far for its active set to be read off, and it says "not converged"."""
    rng = np.random.default_rng(0)
    mixes = ("eq_lo", "le_hi")
    probs = [build(make_case(rng, 6, 4, mixes[i % 2])) for i in range(50)]
    got = B.solve_batch(probs, method="optax", certify_on_host=False)
    want = B.solve_batch(probs)
    assert all(s == "ok" for s in want.status)
    ok = np.array([s == "ok" for s in got.status])
    assert ok.sum() >= 49
    np.testing.assert_allclose(got.step_time_ns[ok], want.step_time_ns[ok], rtol=1e-9)
    assert np.all(got.lower_bound_ns <= want.step_time_ns * (1 + 1e-9))
    assert all(s == "not converged" for s in np.asarray(got.status)[~ok])
    assert np.all(got.optimality_gap[~ok] > 1e-6)


# --------------------------------------------------------------------------- float32


def _check_float32(p, chunk=None):
    """Solves the stacked batch(es) ``p`` in float64 and in float32 without the float64
    fallback: float32 alone certifies every problem (gap <= 1e-4, violation <= 1e-6, both in
    float64), its bound never exceeds the float64 optimum, and its step time is within 1e-4
    of it (below it only by what its <= 1e-6 violation buys). Returns (float64, float32)."""
    exact = B.solve_stacked(p, chunk=chunk)
    low = B.solve_stacked(p, dtype=np.float32, float64_fallback=False, chunk=chunk)
    assert all(s == "ok" for s in exact.status)
    bad = [i for i, s in enumerate(low.status) if s != "ok"]
    assert not bad, [(i, low.optimality_gap[i], low.max_violation[i]) for i in bad]
    assert np.all(low.optimality_gap <= 1e-4) and np.all(low.max_violation <= 1e-6)
    assert low.host_certified == 0
    assert np.all(low.lower_bound_ns <= exact.step_time_ns * (1 + 1e-9))
    rel = low.step_time_ns / exact.step_time_ns - 1
    assert np.all(rel >= -1e-5) and np.all(rel <= 1e-4), (rel.min(), rel.max())
    return exact, low


def test_float32_kernel_is_certified_in_float64():
    """GPT-3-4D-size problems (K 11, D 4, budget and upper bounds): the float32 kernel alone
    certifies every one (gap <= 1e-4 in float64), and its bound is a true bound."""
    rng = np.random.default_rng(5)
    n, k, d = 64, 11, 4
    traffic = np.where(rng.random((n, k, d)) < 0.6, 10.0 ** rng.uniform(-2, 1, (n, k, d)), 0.0)
    traffic[:, 0, :] = np.maximum(traffic[:, 0, :], 1e-2)
    total = rng.uniform(100, 1000, n)
    hi = total[:, None] * rng.uniform(0.4, 1.0, (n, d))
    p = problems_from_stacked(traffic, rng.integers(1, 97, (n, k)).astype(float),
                              rng.uniform(0.05, 2.0, n), total_bw_gbps=total, upper_gbps=hi)
    _, low = _check_float32(p, chunk=16)
    # By default what float32 leaves uncertified is solved again in float64, and counted:
    # here nothing.
    again = B.solve_stacked(p, dtype=np.float32, chunk=16)
    assert again.float64_fallback == 0
    np.testing.assert_array_equal(again.step_time_ns, low.step_time_ns)


def _mixed_float32_family(rng, n, d, mode):
    """n problems like experiments/bench_batch.py's "mixed" family for one (D, mode): K 1..16
    (phases beyond K carry nothing), traffic over four decades, lower bounds on ~30% and
    upper bounds on ~50% of the dims (some barely above the lower one, or at 1 GB/s), the
    total as == or <=."""
    k_max = 16
    k = rng.integers(1, k_max + 1, n)
    live = np.arange(k_max)[None, :] < k[:, None]
    used = (rng.random((n, k_max, d)) < 0.6) & live[:, :, None]
    used[:, 0, :] = True
    traffic = np.where(used, 10.0 ** rng.uniform(-3, 1, (n, k_max, d)), 0.0)
    weight = np.where(live, rng.integers(1, 20, (n, k_max)), 0).astype(float)
    total = rng.uniform(50, 2000, n)
    share = rng.dirichlet(np.ones(d), n)
    lo = np.where(rng.random((n, d)) < 0.3, 0.5 * share * total[:, None], 0.0)
    hi = np.where(rng.random((n, d)) < 0.5, np.maximum(1.5 * share * total[:, None], lo + 1.0),
                  np.inf)
    return problems_from_stacked(traffic, weight, rng.uniform(0.0, 2.0, n), total_bw_gbps=total,
                                 total_bw_mode=mode, lower_gbps=lo, upper_gbps=hi)


def test_float32_alone_certifies_mixed_bound_problems():
    """The problems float32 used to leave to the float64 fallback (~2.7% of the mixed
    benchmark family): lower and upper bounds (active ones at 1 GB/s next to 1000 GB/s dims,
    dims at a bound with curvature 1e-6 next to 1e5), D 2..4, total == and <=. 192 problems
    in one bucket per mode, chunks of 16 (the module's programs)."""
    rng = np.random.default_rng(11)
    groups = [_mixed_float32_family(rng, 32, d, mode) for d in (2, 3, 4) for mode in ("eq", "le")]
    _check_float32(groups, chunk=16)


def test_float32_alone_certifies_every_scan_problem():
    """The default scan (conf/scan.yaml: 4096 NPUs, 2-4 dims, GPT-3 / Turing-NLG / MSFT-1T,
    three budgets; 94,446 designs) has 2,079 distinct problems (shape, workload, mapping,
    budget: the blocks and tiers only price the result): float32 certifies every one on its
    own (float32 used to leave 558 designs to the float64 fallback)."""
    from libra_jax.studies import scan
    from libra_jax.studies.scan import problems as scan_problems
    from libra_jax.studies.scan import space as scan_space

    cfg = scan.ScanConfig(
        space=scan.SpaceConfig(budgets_gbps=[250.0, 500.0, 1000.0]),
        workloads=[scan.ScanWorkloadConfig(file="workload/GPT_3.txt", tp=16, dp=256),
                   scan.ScanWorkloadConfig(file="workload/Turing_NLG.txt", tp=1, dp=4096),
                   scan.ScanWorkloadConfig(file="workload/MSFT_1T.txt", tp=128, dp=32)])
    space = scan.make_space(cfg)
    builder = scan_problems.ChunkBuilder(space)
    unique = {}
    for x in scan_space.iter_designs(space):
        unique.setdefault((x.shape, x.workload, builder.mapping(x), x.budget_gbps), x)
    assert (scan.count_designs(space)[0], len(unique)) == (94446, 2079)
    batches, _ = builder.problems(list(unique.values()), None)
    _check_float32(batches)


# --------------------------------------------------------------------------- no hangs

HANG_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import jax
    import numpy as np
    jax.config.update("jax_enable_x64", True)
    from libra_jax.solvers import batch as B
    from libra_jax.model.problem import problems_from_stacked

    rng = np.random.default_rng(3)
    n, k, d = 10000, 8, 4
    traffic = np.where(rng.random((n, k, d)) < 0.6, rng.uniform(0.01, 10, (n, k, d)), 0.0)
    traffic[:, 0, :] += 0.01
    total = rng.uniform(100, 1000, n)
    p = problems_from_stacked(traffic, np.ones((n, k)), np.full(n, 0.1), total_bw_gbps=total)
    for rep in range(4):
        t = time.perf_counter()
        r = B.solve_stacked(p)
        ok = sum(s == "ok" for s in r.status)
        print(rep, ok, round(time.perf_counter() - t, 2), flush=True)
        assert ok == n
    """
)


def test_vmapped_engine_does_not_hang_on_repeated_large_batches(tmp_path):
    """10^4 problems, four calls in a row, in a subprocess under a timeout: the XLA:CPU
    deadlock of batched LAPACK kernels must not come back (the kernel has no LAPACK call)."""
    script = tmp_path / "hang.py"
    script.write_text(HANG_SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], cwd=str(ROOT), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(proc.stdout.strip().splitlines()) == 4


# --------------------------------------------------------------------------- sharding


def test_sharded_over_four_host_devices_matches_one_device(shard_proc):
    proc, out = shard_proc
    try:
        log, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == 0, log
    r = np.load(out)
    assert list(r["four_status"]) == list(r["one_status"])
    assert np.sum(r["one_status"] == "ok") >= 30
    np.testing.assert_allclose(r["four_step"], r["one_step"], rtol=1e-12)
    # Bandwidths of a problem whose optimum is flat in some direction may move by ~1e-11
    # between shard sizes (XLA vectorises the chunk's loops differently); the times agree.
    np.testing.assert_allclose(r["four_bw"], r["one_bw"], rtol=1e-9,
                               atol=1e-9 * np.max(r["one_bw"]))
    fin = np.isfinite(r["one_gap"])
    np.testing.assert_allclose(r["four_gap"][fin], r["one_gap"][fin], rtol=1e-6, atol=1e-15)


def test_a_kernel_stall_is_finished_by_the_exact_step_on_the_host():
    """Problem 30455 of the benchmark's mixed family (seed 10^5): the interior point stalls
    near its two upper bounds (80 iterations, 0.1% above the optimum, gap 3.5e-3 even with
    the tangent-plane LP). The host's exact step on the active set of the kernel's point
    finishes it: ok, certified to 1e-9, the Optax method's optimum, counted as host work."""
    traffic = np.array([[0.33049122008106635, 0.0011360670894555599, 0.07158438509906763],
                        [3.568865043000199, 0.03477607495094521, 1.766037977587236],
                        [0.0, 1.9844910243526208, 0.0],
                        [7.222175369373542, 0.010962499214307734, 0.0]])
    p = problem_from_arrays(traffic, np.array([13.0, 7.0, 4.0, 13.0]), 0.03606673407747696,
                            None, ConstraintSpec(total_bw_gbps=1102.1724377482815,
                                                 upper_gbps=[600.153337660618,
                                                             237.82313830878167, None]))
    res = B.solve_batch([p])
    assert res.status == ["ok"] and res.host_certified == 1
    assert res.optimality_gap[0] <= 1e-9
    assert res.iterations[0] == ipm.IpmConfig().max_iter  # the kernel alone stalled
    ref = B.solve_batch([p], method="optax")
    assert ref.status == ["ok"]
    assert res.step_time_ns[0] == pytest.approx(ref.step_time_ns[0], rel=1e-12)
    np.testing.assert_allclose(res.bandwidth_gbps[0], ref.bandwidth_gbps[0], rtol=1e-9)
