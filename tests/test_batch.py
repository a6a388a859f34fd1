"""Batched solves (`batch.solve_batch` / `solve_stacked`) against single solves (`solve.solve`).

One module-scoped batch of 200 random problems of mixed sizes (D 1..8, K 1..20, with and
without linear rows, bounds and cost budgets; generators of test_solve_random.py) is solved in
ONE solve_batch call and once per problem with `solve`; the other tests reuse its compiled
buckets (same shapes and batch sizes), so the module compiles 4 single + 4 batched programs.
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

from libra_jax import batch as B
from libra_jax.barrier import BarrierConfig
from libra_jax.solve import solve
from test_solve_random import build, make_case

jax.config.update("jax_enable_x64", True)

ROOT = pathlib.Path(__file__).resolve().parents[1]

# (D, K, mix, count). Buckets (D, K, I, E): (1,1,1,1), (4,8,1,1), (4,16,4,1), (8,32,4,1).
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
    from libra_jax.batch import solve_batch
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
    before = B.solve_stacked._cache_size()
    # Sequential: scipy's HiGHS (used by both paths for certificates) is not re-entrant.
    res = B.solve_batch(probs)
    singles = [solve(p, "perf") for p in probs]
    growth = B.solve_stacked._cache_size() - before
    return dict(probs=probs, tags=tags, singles=singles, res=res, growth=growth)


def _total(p) -> float:
    return float(np.sum(np.asarray(p.upper)))


def _unique_optimum_likely(p, single) -> bool:
    """Bandwidths are compared only where the optimum is (very likely) unique: every dimension
    carries traffic, the single solve is certified to a tiny gap and no equalities of the
    constraint set leave a flat direction we could detect cheaply."""
    used = np.all(np.any(np.asarray(p.traffic_gb) > 0, axis=0))
    return bool(used and single.status == "ok" and single.optimality_gap <= 1e-10)


def _status_mismatch_known(single_status, batch_status) -> bool:
    """solve() certifies with max(closed-form dual bound, tangent-LP bound); solve_stacked has
    only the closed-form bound, so a problem certified by solve() can come back "not
    converged" from the batch (see test_batch_status_equals_single_status)."""
    return single_status == "ok" and batch_status == "not converged"


def test_batched_equals_single(mixed):
    probs, singles, res = mixed["probs"], mixed["singles"], mixed["res"]
    assert len(probs) >= 200 and len(res) == len(probs)
    assert len({B.bucket_shape(p) for p in probs}) == NUM_BUCKETS
    compared_bw = known = 0
    for i, (p, s) in enumerate(zip(probs, singles)):
        msg = f"#{i} {mixed['tags'][i]} single={s} batch status={res.status[i]}"
        if res.status[i] != s.status:
            assert _status_mismatch_known(s.status, res.status[i]), msg
            known += 1
        assert res.bandwidth_gbps[i].shape == (p.num_dims,), msg
        if s.status in ("ok", "not converged"):
            # 1e-9 where the batch certifies its point; an uncertified batch point (always a
            # problem with dims no phase uses, i.e. a non-unique optimum) within 1e-7.
            rel = 1e-9 if res.status[i] == "ok" else 1e-7
            assert res.step_time_ns[i] == pytest.approx(s.step_time_ns, rel=rel), msg
            assert res.step_time_ns[i] >= s.lower_bound * (1 - 1e-12), msg
            assert res.max_violation[i] <= 1e-9, msg
        if res.status[i] == "ok":
            # The batched certificate (closed-form dual bound only) is valid on its own.
            assert res.lower_bound_ns[i] <= res.step_time_ns[i] * (1 + 1e-12), msg
            assert res.lower_bound_ns[i] <= s.step_time_ns * (1 + 1e-9), msg
            assert res.optimality_gap[i] <= 1e-6, msg
        if res.status[i] == "ok" and _unique_optimum_likely(p, s):
            np.testing.assert_allclose(res.bandwidth_gbps[i], s.bandwidth_gbps, rtol=0,
                                       atol=1e-6 * _total(p), err_msg=msg)
            compared_bw += 1
    # Most problems must be certified, and the bandwidth check must not be vacuous.
    assert sum(st == "ok" for st in res.status) >= 0.9 * len(probs)
    assert known <= 0.1 * len(probs), known
    assert compared_bw >= 50, compared_bw


def test_batch_status_equals_single_status(mixed):
    bad = [(i, s.status, b, s.optimality_gap, g) for i, (s, b, g) in enumerate(
        zip(mixed["singles"], mixed["res"].status, mixed["res"].optimality_gap))
        if s.status != b]
    assert not bad, f"{len(bad)} of {len(mixed['singles'])} differ: {bad[:5]}"


def test_compilations_bounded_by_buckets(mixed):
    # 0 when an earlier test already compiled these buckets (same shapes and batch sizes).
    assert 0 <= mixed["growth"] <= NUM_BUCKETS


def test_no_recompilation_when_only_values_change(mixed):
    """Same shapes and counts, new values: solve_stacked is not traced or compiled again."""
    probs = mixed["probs"]
    scaled = [dataclasses.replace(p, traffic_gb=p.traffic_gb * 1.37,
                                  compute_s=p.compute_s * 0.5) for p in probs]
    before = B.solve_stacked._cache_size()
    res = B.solve_batch(scaled)
    assert B.solve_stacked._cache_size() == before
    ref = mixed["res"].status
    same = sum(a == b for a, b in zip(res.status, ref))
    assert same >= 0.95 * len(ref)  # only borderline certificates may flip
    # Scaling the traffic leaves the optimal bandwidths of a perf problem unchanged.
    for i, p in enumerate(probs):
        if res.status[i] == "ok" and _unique_optimum_likely(p, mixed["singles"][i]):
            np.testing.assert_allclose(res.bandwidth_gbps[i], mixed["res"].bandwidth_gbps[i],
                                       rtol=0, atol=1e-6 * _total(p))


def _bucket_members(probs, shape):
    return [i for i, p in enumerate(probs) if B.bucket_shape(p) == shape]


def test_padding_never_changes_a_result(mixed):
    """Problems of the three smaller buckets, padded into the largest bucket (8, 32, 4, 1, 1, 1),
    give the results of their own bucket (same compiled program as the big batch: the first
    slots of that bucket's stack are replaced)."""
    probs, res = mixed["probs"], mixed["res"]
    big = (8, 32, 4, 1, 1, 1)
    slots = _bucket_members(probs, big)
    small = [i for i, p in enumerate(probs) if B.bucket_shape(p) != big]
    small = [i for i in small if res.status[i] == "ok"][: len(slots) // 2]
    assert len(small) >= 30
    members = small + slots[len(small):]
    stacked = B.stack([B.pad_problem(probs[i], big) for i in members])
    valid = np.zeros((len(members), big[0]), bool)
    for j, i in enumerate(members):
        valid[j, : probs[i].num_dims] = True
    before = B.solve_stacked._cache_size()
    out = jax.device_get(B.solve_stacked(stacked, valid, BarrierConfig()))
    assert B.solve_stacked._cache_size() == before
    # The in-jit status of each problem in its own bucket (no host certificate), to compare
    # like with like; same buckets as the big batch, so no compilation.
    own = B.solve_batch([probs[i] for i in small], certify_on_host=False)
    for j, i in enumerate(small):
        d = probs[i].num_dims
        msg = f"#{i} {mixed['tags'][i]}"
        got = B.STATUS_NAMES[B.Status(int(out["status"][j]))]
        if got != own.status[j]:
            # Different shapes round differently: only a gap right at the 1e-6 line may flip.
            gaps = sorted([float(out["gap"][j]), float(own.optimality_gap[j])])
            assert gaps[0] <= 1e-6 <= gaps[1] <= 1e-4, (msg, got, own.status[j], gaps)
        assert out["step_s"][j] * 1e9 == pytest.approx(res.step_time_ns[i], rel=1e-9), msg
        np.testing.assert_allclose(out["bw"][j][:d], res.bandwidth_gbps[i], rtol=0,
                                   atol=1e-6 * _total(probs[i]), err_msg=msg)
        # Padded dimensions stay at their fixed 1 GB/s.
        np.testing.assert_array_equal(out["bw"][j][d:], 1.0)


def _with_bad(mixed, make_bad):
    """The (4, 8, 1, 1) bucket of the big batch (same count: no recompilation) with problems
    1, 2, 3 replaced by make_bad(p, slot)."""
    probs = mixed["probs"]
    idx = _bucket_members(probs, (4, 8, 1, 1, 1, 1))
    batch = [probs[i] for i in idx]
    bad_slots = (1, 2, 3)
    for s in bad_slots:
        batch[s] = make_bad(batch[s], s)
    before = B.solve_stacked._cache_size()
    res = B.solve_batch(batch)
    assert B.solve_stacked._cache_size() == before
    ref = mixed["res"]
    for j, i in enumerate(idx):  # the others are untouched, bit for bit
        if j in bad_slots:
            continue
        assert res.status[j] == ref.status[i]
        assert res.step_time_ns[j] == ref.step_time_ns[i]
        np.testing.assert_array_equal(res.bandwidth_gbps[j], ref.bandwidth_gbps[i])
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
        t[0, 0] = np.nan
        return dataclasses.replace(p, traffic_gb=t)

    statuses, res = _with_bad(mixed, make_bad)
    assert statuses == ["non-finite"] * 3, (statuses, res.step_time_ns[1:4])


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
    np.testing.assert_allclose(r["four_bw"], r["one_bw"], rtol=1e-12,
                               atol=1e-12 * np.max(r["one_bw"]))
    fin = np.isfinite(r["one_gap"])
    np.testing.assert_allclose(r["four_gap"][fin], r["one_gap"][fin], rtol=1e-6, atol=1e-15)
