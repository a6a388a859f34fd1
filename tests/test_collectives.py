"""Tests for libra_jax.model.collectives.traffic_bytes: hand numbers, dim order, jit/vmap/grad."""

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from libra_jax.inputs.workload import load_workload
from libra_jax.model.collectives import traffic_bytes
from libra_jax.types import Collective as C

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "libra_jax" / "data" / "libra_inputs"
OPTIMA = ROOT / "tests" / "fixtures" / "libra_optima.json"
_traffic_jit = jax.jit(traffic_bytes)  # one compile per shape keeps the many cases fast

# (collective, size_bytes, communicator, expected traffic per dim), all by hand.
CASES = [
    # 1 dim
    (C.ALLREDUCE, 1000.0, [4], [2 * 1000 * 3 / 4]),
    (C.REDUCESCATTER, 1000.0, [4], [1000 * 3 / 4]),
    (C.ALLGATHER, 1000.0, [4], [1000 * 3]),
    (C.ALLTOALL, 1000.0, [4], [1000 * 3 / 4]),
    (C.NONE, 1000.0, [4], [0.0]),
    (C.ALLREDUCE, 1000.0, [-1], [0.0]),
    (C.ALLREDUCE, 1000.0, [1], [0.0]),
    # 2 dims
    (C.ALLREDUCE, 1200.0, [4, 3], [2 * 1200 * 3 / 4, 2 * 300 * 2 / 3]),
    (C.REDUCESCATTER, 1200.0, [4, 3], [1200 * 3 / 4, 300 * 2 / 3]),
    (
        C.ALLGATHER,
        100.0,
        [2, 3],
        [(100 * 3) * 1, 100 * 2],
    ),  # dim1 first, then dim0 on 300
    (C.ALLGATHER, 100.0, [3, 2], [(100 * 2) * 2, 100 * 1]),
    (C.ALLTOALL, 600.0, [2, 3], [600 * 1 / 2, 600 * 2 / 3]),  # size unchanged
    (C.ALLREDUCE, 1200.0, [-1, 3], [0.0, 2 * 1200 * 2 / 3]),
    (C.ALLGATHER, 100.0, [2, -1], [100 * 1, 0.0]),
    (C.NONE, 1200.0, [4, 3], [0.0, 0.0]),
    # 3 dims, including a skipped middle dim
    (C.ALLREDUCE, 1200.0, [4, -1, 3], [1800.0, 0.0, 400.0]),
    (C.REDUCESCATTER, 1200.0, [4, -1, 3], [900.0, 0.0, 200.0]),
    (C.ALLGATHER, 10.0, [2, -1, 5], [10 * 5 * 1, 0.0, 10 * 4]),
    (C.ALLTOALL, 1200.0, [4, -1, 3], [900.0, 0.0, 800.0]),
    (C.ALLREDUCE, 2400.0, [2, 3, 4], [2 * 2400 / 2, 2 * 1200 * 2 / 3, 2 * 400 * 3 / 4]),
    (C.REDUCESCATTER, 2400.0, [2, 3, 4], [1200.0, 800.0, 300.0]),
    (C.ALLGATHER, 1.0, [2, 3, 4], [12 * 1, 4 * 2, 1 * 3]),
    (C.ALLTOALL, 2400.0, [2, 3, 4], [1200.0, 1600.0, 1800.0]),
]


def _reference_loop(kind, m, g):
    """The README's loops, written literally in Python."""
    out = [0.0] * len(g)
    order = range(len(g) - 1, -1, -1) if kind == C.ALLGATHER else range(len(g))
    for d in order:
        if g[d] <= 0 or kind == C.NONE:
            continue
        if kind == C.ALLREDUCE:
            out[d] = 2 * m * (g[d] - 1) / g[d]
            m = m / g[d]
        elif kind == C.REDUCESCATTER:
            out[d] = m * (g[d] - 1) / g[d]
            m = m / g[d]
        elif kind == C.ALLGATHER:
            out[d] = m * (g[d] - 1)
            m = m * g[d]
        else:
            out[d] = m * (g[d] - 1) / g[d]
    return out


@pytest.mark.parametrize("kind, size, comm, expect", CASES)
def test_hand_cases(kind, size, comm, expect):
    with jax.numpy_rank_promotion("raise"):
        got = _traffic_jit(np.int32(kind), np.float32(size), np.array(comm, np.int32))
    assert got.shape == (len(comm),)
    np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(expect, _reference_loop(kind, size, comm), rtol=1e-12)


def _batch():
    d = 3
    kinds = np.array([c[0] for c in CASES if len(c[2]) == d], np.int32)
    sizes = np.array([c[1] for c in CASES if len(c[2]) == d], np.float32)
    comms = np.array([c[2] for c in CASES if len(c[2]) == d], np.int32)
    expect = np.array([c[3] for c in CASES if len(c[2]) == d])
    return kinds, sizes, comms, expect


def test_batched_jit_equals_eager_and_vmap():
    kinds, sizes, comms, expect = _batch()
    with jax.numpy_rank_promotion("raise"):
        eager = traffic_bytes(kinds, sizes, comms)
        jitted = jax.jit(traffic_bytes)(kinds, sizes, comms)
        vm = jax.vmap(traffic_bytes)(kinds, sizes, comms)
        # [L, P] leading shape, as for a workload.
        two = traffic_bytes(
            kinds.reshape(2, 4), sizes.reshape(2, 4), comms.reshape(2, 4, 3)
        )
    np.testing.assert_allclose(eager, expect, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(eager))
    np.testing.assert_allclose(vm, eager, rtol=1e-6)
    np.testing.assert_allclose(two.reshape(8, 3), eager, rtol=1e-6)


def test_differentiable_in_size():
    kinds, sizes, comms, expect = _batch()

    def total(s):
        return traffic_bytes(kinds, s, comms).sum()

    g = jax.jit(jax.grad(total))(jnp.asarray(sizes))
    # Traffic is linear in size: d(sum traffic)/d(size) = sum traffic / size.
    np.testing.assert_allclose(g, expect.sum(-1) / sizes, rtol=1e-6)
    assert np.all(np.isfinite(g))


def test_integer_sizes_are_cast_to_float():
    got = traffic_bytes(C.ALLREDUCE, 1200, np.array([4, -1, 3]))
    assert jnp.issubdtype(got.dtype, jnp.floating)
    np.testing.assert_allclose(got, [1800.0, 0.0, 400.0], rtol=1e-6)


def test_float64_matches_loop_on_shipped_workloads():
    """Under x64, traffic of every shipped workload equals the README loops exactly."""
    with jax.enable_x64(True):
        for name, comm in [
            ("GPT_3", "GPT_3_4d"),
            ("DLRM", "ResNet_50_3d"),
            ("MSFT_1T", "MSFT_1T_3d"),
        ]:
            w = load_workload(
                INPUTS / "workload" / f"{name}.txt",
                INPUTS / "communicator" / f"{comm}.yml",
            )
            got = np.asarray(_traffic_jit(w.collective, w.size_bytes, w.communicator))
            assert got.dtype == np.float64
            for li in range(w.num_layers):
                for p in range(3):
                    ref = _reference_loop(
                        int(w.collective[li, p]),
                        w.size_bytes[li, p],
                        w.communicator[li, p].tolist(),
                    )
                    np.testing.assert_allclose(got[li, p], ref, rtol=1e-15)


def test_equal_split_step_times_match_reference():
    """No-overlap step time (compute + sum of slowest-dim times) at the reference's equal
    split reproduces libra_optima.json exactly: pins the traffic model end to end."""
    cases = json.loads(OPTIMA.read_text())["cases"]
    seen = set()
    with jax.enable_x64(True):
        for case in cases:
            key = (case["workload"], case["communicator_file"], case["constraints"])
            if key in seen:
                continue
            seen.add(key)
            w = load_workload(
                INPUTS / "workload" / f"{case['workload']}.txt",
                INPUTS / "communicator" / case["communicator_file"],
            )
            t = np.asarray(_traffic_jit(w.collective, w.size_bytes, w.communicator))
            for entry, rtol in ((case["equal_split"], 1e-12), (case, 1e-6)):
                bw = np.asarray(entry["bandwidth_gbps"])
                step = w.compute_ns.sum() + (t / bw).max(-1).sum()
                np.testing.assert_allclose(
                    step, entry["step_time_ns"], rtol=rtol, err_msg=str(key)
                )
