"""Step-time models beyond LIBRA's (`timing.py`): training loops with overlap, the pipelined
collective model inside the solver, and the chunk-count search, against hand computations."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from libra_jax.inputs.topology import network_from_lists
from libra_jax.inputs.workload import Workload
from libra_jax.model import objective as model
from libra_jax.model import pipelined
from libra_jax.model import timing as timing_mod
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.problem import ConstraintSpec, build_problem
from libra_jax.model.timing import TimingModel, build_timed_problem
from libra_jax.solvers.solve import solve
from libra_jax.studies.chunk_counts import solve_chunk_counts
from libra_jax.types import Block, Collective, LibraInputError

AR, RS, AG = int(Collective.ALLREDUCE), int(Collective.REDUCESCATTER), int(Collective.ALLGATHER)
NONE = int(Collective.NONE)
NET = network_from_lists(["Ring", "Switch"], [4, 8])
SPEC = ConstraintSpec(total_bw_gbps=200.0)
# Compiled once per problem shape (eager calls would re-trace the loop over pieces each time).
step_ns = jax.jit(lambda bw, p: model.step_time_s(bw, p) * 1e9)
comm_ns = jax.jit(lambda bw, p: model.comm_time_s(bw, p) * 1e9)


def _workload(compute_ns, collective, size_bytes, communicator):
    compute_ns = np.asarray(compute_ns, np.float64)
    return Workload(
        name="hand", layer_names=tuple(f"l{i}" for i in range(compute_ns.shape[0])),
        compute_ns=compute_ns, collective=np.asarray(collective, np.int32),
        size_bytes=np.asarray(size_bytes, np.float64),
        communicator=np.asarray(communicator, np.int32), source="test")


def _three_layers(seed=0):
    """3 layers: TP all-reduce (dim 0) forward and input-grad, DP all-reduce (dim 1) of the
    weight gradients in every layer."""
    rng = np.random.default_rng(seed)
    compute = rng.uniform(1e5, 1e6, (3, 3))
    coll = [[AR, AR, AR]] * 3
    size = rng.uniform(1e7, 1e8, (3, 3))
    comm = [[[4, -1], [4, -1], [-1, 8]]] * 3
    return _workload(compute, coll, size, comm)


def _libra_times_ns(wl, bw):
    """[L, 3] LIBRA time of each layer-phase's collective (max over dims of traffic / bw)."""
    t = np.asarray(traffic_bytes(wl.collective, wl.size_bytes, wl.communicator))
    return np.max(np.where(t > 0, t / np.asarray(bw), 0.0), axis=-1)


def _critical_path_ns(wl, bw, full):
    """The training loop by direct simulation: forward, then backward last layer first;
    weight-gradient collectives queue on the network in issue order."""
    c = np.asarray(wl.compute_ns)
    t = _libra_times_ns(wl, bw)
    both = (lambda a, b: max(a, b)) if full else (lambda a, b: a + b)
    now = sum(both(c[l, 0], t[l, 0]) for l in range(c.shape[0]))
    queue = -np.inf
    for l in range(c.shape[0] - 1, -1, -1):
        now += both(c[l, 1], t[l, 1]) + c[l, 2]
        queue = max(queue, now) + t[l, 2]
    return max(now, queue)


def test_hand_computed_dp_overlap():
    """One dim, 100 GB/s; 2 layers, every compute 1000 ns; AR of 4 NPUs moves 1.5 m, so an
    AR of 20,000 bytes takes 300 ns. Forward: 2 x (1000 + 300) = 2600. Backward, layer 1:
    IG 1000 + 300, WG 1000 -> 4900; its WG AR (40,000 B: 600 ns) runs 4900..5500.
    Layer 0: IG 1000 + 300, WG 1000 -> 7200; WG AR 7200..7800. Step 7800 ns
    (no overlap: 6000 + 6 x 300 + 2 x 300 extra = 8400)."""
    net = network_from_lists(["Ring"], [4])
    wl = _workload([[1000.0] * 3] * 2, [[AR] * 3] * 2, [[2e4, 2e4, 4e4]] * 2, [[[4]] * 3] * 2)
    bw = jnp.asarray([100.0])
    dp = build_timed_problem(net, wl, None, ConstraintSpec(total_bw_gbps=100.0),
                             TimingModel(training_loop="dp_overlap"))
    ref = build_problem(net, wl, None, ConstraintSpec(total_bw_gbps=100.0))
    np.testing.assert_allclose(step_ns(bw, dp), 7800.0, rtol=1e-12)
    np.testing.assert_allclose(step_ns(bw, ref), 8400.0, rtol=1e-12)
    # Exposed communication = step - compute.
    np.testing.assert_allclose(comm_ns(bw, dp), 1800.0, rtol=1e-12)
    full = build_timed_problem(net, wl, None, ConstraintSpec(total_bw_gbps=100.0),
                               TimingModel(training_loop="full_overlap"))
    # full: forward 2 x 1000, layer 1: 1000 + 1000 -> 4000, AR 4000..4600; layer 0 ->
    # 6000, AR 6000..6600.
    np.testing.assert_allclose(step_ns(bw, full), 6600.0, rtol=1e-12)


@pytest.mark.parametrize("loop", ["dp_overlap", "full_overlap"])
@pytest.mark.parametrize("seed", range(3))
def test_overlap_loops_match_a_direct_simulation(loop, seed):
    wl = _three_layers(seed)
    p = build_timed_problem(NET, wl, None, SPEC, TimingModel(training_loop=loop))
    rng = np.random.default_rng(seed + 10)
    for _ in range(5):
        bw = rng.uniform(5, 150, 2)
        want = _critical_path_ns(wl, bw, full=loop == "full_overlap")
        np.testing.assert_allclose(step_ns(jnp.asarray(bw), p), want, rtol=1e-12)


def test_overlap_is_never_slower_and_solves_certified():
    wl = _three_layers(1)
    times = {}
    for loop in ("no_overlap", "dp_overlap", "full_overlap"):
        r = solve(build_timed_problem(NET, wl, None, SPEC, TimingModel(training_loop=loop)))
        assert r.status == "ok" and r.optimality_gap <= 1e-6
        times[loop] = r.step_time_ns
    assert times["full_overlap"] <= times["dp_overlap"] * (1 + 1e-9)
    assert times["dp_overlap"] <= times["no_overlap"] * (1 + 1e-9)
    # The optimum of each loop is a true minimum of that loop: a grid over the budget.
    p = build_timed_problem(NET, wl, None, SPEC, TimingModel(training_loop="dp_overlap"))
    b = np.linspace(1, 199, 397)
    grid = jax.jit(jax.vmap(step_ns, (0, None)))(jnp.asarray(np.stack([b, 200.0 - b], 1)), p)
    assert times["dp_overlap"] <= float(np.min(grid)) * (1 + 1e-9)


def test_libra_rows_and_reference_agree():
    """model=libra with dp_overlap on a workload whose only weight-gradient collective is
    in the first layer (issued last) has nothing to overlap: same optimum as LIBRA's."""
    wl = _three_layers(2)
    coll = np.asarray(wl.collective).copy()
    coll[1:, 2] = NONE
    wl = _workload(wl.compute_ns, coll, wl.size_bytes, wl.communicator)
    a = solve(build_problem(NET, wl, None, SPEC))
    b = solve(build_timed_problem(NET, wl, None, SPEC, TimingModel(training_loop="dp_overlap")))
    np.testing.assert_allclose(b.step_time_ns, a.step_time_ns, rtol=1e-9)


@pytest.mark.parametrize("schedule", ["pipelined", "sequential", "balanced"])
def test_pipelined_rows_sum_the_collective_model(schedule):
    """no_overlap with model=pipelined: step = compute + sum of the pieces of each
    collective (`pipelined.pieces_time_ns`), merged identical collectives counted; each
    collective as the streams ASTRA-sim splits it into (the sizes here are not multiples of
    the 4 chunks but one: 5 streams of floor(size / 4) bytes, `step.chunk_split`)."""
    wl = _three_layers(0)
    tm = TimingModel(model="pipelined", schedule=schedule, chunks=4, latency_ns=[500.0, 700.0],
                     endpoint_delay_ns=10.0, local_mem_bw_gbps=1600.0, gb_is_gib=True)
    p = build_timed_problem(NET, wl, None, SPEC, tm)
    bw = np.asarray([120.0, 80.0])
    want = float(np.sum(wl.compute_ns))
    uneven = 0
    for l in range(3):
        for ph in range(3):
            size = float(wl.size_bytes[l, ph])
            n = int(round(size))
            k, run = (4, size) if n % 4 == 0 else (5, 5 * (n // 4))
            uneven += k == 5
            pcs = pipelined.collective_pieces(
                wl.collective[l, ph], run, wl.communicator[l, ph],
                NET.block_codes, latency_ns=np.asarray([500.0, 700.0]), chunks=k,
                endpoint_delay_ns=10.0, local_mem_bw_gbps=1600.0, gb_is_gib=True,
                schedule=schedule)
            want += float(pipelined.pieces_time_ns(pcs, jnp.asarray(bw)))
    assert uneven == 8
    np.testing.assert_allclose(step_ns(jnp.asarray(bw), p), want, rtol=1e-10)
    r = solve(p)
    assert r.status == "ok" and r.optimality_gap <= 1e-6


def test_chunk_count_search_picks_the_best_pair():
    """With 2 us per hop, more chunks pay more latency; with none, more chunks pipeline
    better. The search returns each count's optimum and the least of them."""
    wl = _three_layers(0)
    comm = np.asarray(wl.communicator).copy()
    comm[:, 2] = [4, 8]  # the weight-gradient all-reduce spans both dimensions
    wl = _workload(wl.compute_ns, wl.collective, wl.size_bytes, comm)
    for lat, expect_more_is_better in ((0.0, True), (2e5, False)):
        tm = TimingModel(model="pipelined", latency_ns=[lat, lat])
        out = solve_chunk_counts(NET, wl, None, SPEC, tm, [1, 4, 16])
        steps = [r.step_time_ns for r in out.results]
        assert all(r.status == "ok" for r in out.results)
        assert out.best == int(np.argmin(steps))
        assert (steps[2] < steps[0]) == expect_more_is_better
        single = solve(build_timed_problem(NET, wl, None, SPEC,
                                           TimingModel(model="pipelined", chunks=4,
                                                       latency_ns=[lat, lat])))
        np.testing.assert_allclose(steps[1], single.step_time_ns, rtol=1e-8)


def test_bad_timing_options_name_the_key():
    wl = _three_layers(0)
    for tm, key in [
        (TimingModel(model="astra"), "model"),
        (TimingModel(training_loop="async"), "training_loop"),
        (TimingModel(model="pipelined", schedule="themis"), "schedule"),
        (TimingModel(model="pipelined", chunks=0), "system.chunks"),
        (TimingModel(model="pipelined", latency_ns=[1.0]), "network.latency_ns"),
        (TimingModel(model="pipelined", latency_ns=[1.0, -2.0]), r"network.latency_ns\[1\]"),
        (TimingModel(latency_ns=[1.0, 1.0]), "only apply to model=pipelined"),
        (TimingModel(model="pipelined", local_mem_bw_gbps=0.0), "system.local_mem_bw_gbps"),
    ]:
        with pytest.raises(LibraInputError, match=key):
            build_timed_problem(NET, wl, None, SPEC, tm)


def test_block_hops_follow_the_ring_data():
    assert int(Block.SWITCH) == 2 and NET.block_codes.tolist() == [0, 2]


@pytest.mark.parametrize("loop", ["dp_overlap", "full_overlap"])
def test_sensitivities_of_overlap_loops_match_re_solves(loop):
    """Nested rows (critical paths): the marginal value of the budget against central
    differences of re-solves, and of a free GB/s on each dimension."""
    from libra_jax.studies.sensitivity import sensitivities

    wl = _three_layers(1)
    tm = TimingModel(training_loop=loop)
    p = build_timed_problem(NET, wl, None, SPEC, tm)
    res = solve(p)
    sens = sensitivities(p, res, spec=SPEC, network=NET, workload=wl)
    assert sens["status"] == "ok", sens

    def opt(total):
        spec = ConstraintSpec(total_bw_gbps=total)
        return solve(build_timed_problem(NET, wl, None, spec, tm)).step_time_ns

    h = 0.01
    fd = (opt(200.0 + h) - opt(200.0 - h)) / (2 * h)
    # full_overlap nests 19 pieces: the interior-point kernel certifies its optimum to ~1e-9
    # (not 1e-12: the Newton matrix is too ill-conditioned at the end of the path), so the
    # bandwidths, hence the multipliers, are good to ~3e-4 there (measured: -16315.8 against
    # central differences -16310..-16313).
    rtol = 5e-4 if loop == "full_overlap" else 1e-4
    np.testing.assert_allclose(sens["d_step_ns_d_total_bw_gbps"], fd, rtol=rtol)
    # Only the total binds, so a free GB/s is worth the same on either dimension.
    np.testing.assert_allclose(sens["d_step_ns_d_gift_gbps"], [fd, fd], rtol=rtol)


def test_collectives_issued_per_micro_batch_pay_latency_each_time():
    """A phase that issues its all-reduce 3 times per step (Workload.issues, e.g. once per
    micro-batch), 3 x 1e6 B on Ring(4) at 100 GB/s, 1000 ns per hop, 1 chunk: each all-reduce
    is 6 steps of 250,000 B: 6 x (2500 + 1000) = 21,000 ns; the step pays 3 x 21,000 =
    63,000 ns. LIBRA's model sees only the total: 1.5 x 3e6 / 100 = 45,000 ns."""
    net = network_from_lists(["Ring"], [4])
    wl = _workload([[0.0] * 3], [[AR, NONE, NONE]], [[3e6, 0, 0]], [[[4]] * 3])
    import dataclasses

    wl3 = dataclasses.replace(wl, issues=np.asarray([[3, 1, 1]]))
    spec = ConstraintSpec(total_bw_gbps=100.0)
    bw = jnp.asarray([100.0])
    tm = TimingModel(model="pipelined", latency_ns=[1000.0])
    np.testing.assert_allclose(step_ns(bw, build_timed_problem(net, wl3, None, spec, tm)),
                               63_000.0, rtol=1e-12)
    np.testing.assert_allclose(step_ns(bw, build_timed_problem(net, wl, None, spec, tm)),
                               6 * (7500 + 1000), rtol=1e-12)
    for w in (wl, wl3):
        np.testing.assert_allclose(step_ns(bw, build_problem(net, w, None, spec)), 45_000.0,
                                   rtol=1e-12)
    for loop in ("dp_overlap", "full_overlap"):
        p = build_timed_problem(net, wl3, None, spec, dataclasses.replace(tm, training_loop=loop))
        np.testing.assert_allclose(step_ns(bw, p), 63_000.0, rtol=1e-12)
    times, breakdown = timing_mod.collective_times_ns(wl3, net, tm, [100.0])
    assert breakdown[0]["issues"] == 3 and breakdown[0]["size_bytes"] == 3e6
    np.testing.assert_allclose(times[0, 0], 63_000.0, rtol=1e-12)


def test_size_sensitivities_of_the_pipelined_model_match_re_solves():
    """model=pipelined (latency, 4 chunks): d(optimal step)/d(size of one layer's collective)
    from the multipliers against central differences of re-solves; the weight-gradient
    all-reduce spans both dimensions (its rows mix bandwidth and latency terms)."""
    wl = _three_layers(2)
    comm = np.asarray(wl.communicator).copy()
    comm[:, 2] = [4, 8]
    wl = _workload(wl.compute_ns, wl.collective, wl.size_bytes, comm)
    tm = TimingModel(model="pipelined", chunks=4, latency_ns=[500.0, 1500.0],
                     endpoint_delay_ns=10.0, local_mem_bw_gbps=1600.0)
    grad = _check_size_sensitivities(wl, tm, ((1, 0), (0, 2)))
    assert np.all(grad > 0)


@pytest.mark.parametrize("model_name,loop", [("libra", "dp_overlap"), ("pipelined", "full_overlap")])
def test_size_sensitivities_of_overlap_loops_match_re_solves(model_name, loop):
    """Overlap loops (each layer-phase has its own pieces in the critical path): the size
    derivative of a forward and of a weight-gradient collective against re-solves."""
    wl = _three_layers(1)
    tm = (TimingModel(training_loop=loop) if model_name == "libra" else
          TimingModel(model="pipelined", training_loop=loop, chunks=4,
                      latency_ns=[500.0, 1500.0]))
    _check_size_sensitivities(wl, tm, ((2, 0), (0, 2)), hidden_ok=True)


def _check_size_sensitivities(wl, tm, entries, hidden_ok=False):
    """d(optimal step)/d(size) of layer-phases ``entries`` from the multipliers against
    central differences of re-solves (1e-4 relative; with ``hidden_ok``, a hidden collective's
    0 to within the differences' noise: re-solves of nested rows are certified to ~1e-10 of
    the step, which over 2h = 2e-3 m is 1e-7 of the step per byte). Returns the [L, 3]
    gradient."""
    from libra_jax.studies.sensitivity import sensitivities

    p = build_timed_problem(NET, wl, None, SPEC, tm)
    res = solve(p)
    sens = sensitivities(p, res, spec=SPEC, network=NET, workload=wl, timing_model=tm)
    grad = np.asarray(sens["d_step_ns_d_size_bytes"])

    def opt(l, ph, size):
        sizes = np.asarray(wl.size_bytes).copy()
        sizes[l, ph] = size
        w = _workload(wl.compute_ns, wl.collective, sizes, wl.communicator)
        return solve(build_timed_problem(NET, w, None, SPEC, tm)).step_time_ns

    for l, ph in entries:
        m = float(wl.size_bytes[l, ph])
        # h a multiple of the chunk count: m +- h split like m (a size that the chunks do
        # not divide runs one stream more, `timing_rows.streams`: a step in the size)
        h = tm.chunks * round(1e-3 * m / tm.chunks)
        fd = (opt(l, ph, m + h) - opt(l, ph, m - h)) / (2 * h)
        atol = 1e-7 * res.step_time_ns / m if hidden_ok else 0.0
        np.testing.assert_allclose(grad[l, ph], fd, rtol=1e-4, atol=atol)
    return grad
