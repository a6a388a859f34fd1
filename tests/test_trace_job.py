"""An imported trace set's jobs (issue 32): the cutting-plane lower bound of its step
(`model.trace_rows`), ``libra-evaluate`` and ``libra-train`` on it (`studies.job.trace`,
`cli.trace_report`), the export back to ASTRA-sim, and the config's refusals."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from libra_jax.inputs.chakra_export import build_rank_trace, write_trace_set
from libra_jax.inputs.chakra_import import read_chakra
from libra_jax.inputs.topology import network_from_lists
from libra_jax.model import step_trace
from libra_jax.model.problem import ConstraintSpec, problem_from_arrays
from libra_jax.model.timing_spec import TimingModel
from libra_jax.model.trace_rows import TraceBound, differing_dims
from libra_jax.solvers.solve import solve
from libra_jax.types import Collective, CommGroup, LibraInputError, TraceNode, TraceSet

ROOT = pathlib.Path(__file__).resolve().parents[1]
C, COLL, SEND, RECV = (int(TraceNode.COMPUTE), int(TraceNode.COLLECTIVE), int(TraceNode.SEND),
                       int(TraceNode.RECV))
AR = int(Collective.ALLREDUCE)


def pipeline_set(micro: int = 1, tp_mib: float = 64.0, act_mib: float = 32.0) -> TraceSet:
    """8 NPUs on Ring(4) x Switch(2): stage 0 = ranks 0-3 (coordinate 0 on dim 1), stage 1
    = ranks 4-7. Per micro-batch, stage 0 computes 1 ms, all-reduces ``tp_mib`` MiB over
    dim 0 (tensor parallel) and sends ``act_mib`` MiB to the same position of stage 1,
    which receives, computes 1 ms and all-reduces over dim 0."""
    groups = (CommGroup("dims:0", involved=(True, False)),)
    tp, act = tp_mib * 2**20, act_mib * 2**20
    ranks = []
    for r in range(8):
        nodes, last = [], None
        for m in range(micro):
            base = 10 * m
            if r < 4:
                nodes += [dict(id=base, name=f"F{m}", kind=C, duration_ns=1e6,
                               deps=[] if last is None else [last]),
                          dict(id=base + 1, name=f"TP{m}", kind=COLL, collective=AR,
                               size_bytes=tp, group=0, deps=[base]),
                          dict(id=base + 2, name=f"S{m}", kind=SEND, peer=r + 4, tag=m,
                               size_bytes=act, deps=[base + 1])]
                last = base + 1
            else:
                nodes += [dict(id=base, name=f"R{m}", kind=RECV, peer=r - 4, tag=m,
                               size_bytes=act),
                          dict(id=base + 1, name=f"F{m}", kind=C, duration_ns=1e6,
                               deps=[base] + ([] if last is None else [last])),
                          dict(id=base + 2, name=f"TP{m}", kind=COLL, collective=AR,
                               size_bytes=tp, group=0, deps=[base + 1])]
                last = base + 2
        ranks.append(build_rank_trace(r, nodes, path=f"mem.{r}.et"))
    return TraceSet("mem", tuple(ranks), groups, {})


NET = network_from_lists(["Ring", "Switch"], [4, 2])
TM = TimingModel(model="pipelined")


def test_differing_dims_follow_astrasim_numbering():
    # rank = c0 + 4 * c1 on Ring(4) x Switch(2)
    assert differing_dims(1, 5, [4, 2]) == [1]
    assert differing_dims(1, 6, [4, 2]) == [0, 1]
    assert differing_dims(3, 3, [4, 2]) == []


def test_longest_path_by_hand():
    """One micro-batch at 100 GB/s per dimension, no latency, one chunk: 1 ms compute, the
    ring all-reduce over 4 NPUs moves 2 * 3/4 * 64 MiB at 100 GB/s, the message 32 MiB over
    dimension 1, then stage 1's compute and all-reduce."""
    bound = TraceBound(pipeline_set(), NET, TM)
    ar = 2 * 0.75 * 64 * 2**20 / 100.0
    msg = 32 * 2**20 / 100.0
    length, path = bound.longest_path(np.array([100.0, 100.0]))
    assert length == pytest.approx(1e6 + ar + msg + 1e6 + ar, rel=1e-12)
    assert path[0][0] < 4 and path[-1][0] >= 4  # from stage 0 into stage 1
    rows = bound.rows([path])
    assert bound.value_ns(rows, [100.0, 100.0]) == pytest.approx(length, rel=1e-12)
    # at another design the path's row is that path's length there
    other, _ = bound.longest_path(np.array([300.0, 50.0]))
    assert bound.value_ns(rows, [300.0, 50.0]) == pytest.approx(other, rel=1e-12)


def test_aware_messages_cross_every_differing_dimension_and_twice_a_switch():
    aware = TimingModel(model="pipelined", network_backend="aware")
    bound = TraceBound(pipeline_set(), NET, aware)
    length, _ = bound.longest_path(np.array([100.0, 100.0]))
    ar = 2 * 0.75 * 64 * 2**20 / 100.0
    assert length == pytest.approx(1e6 + ar + 2 * 32 * 2**20 / 100.0 + 1e6 + ar, rel=1e-12)


def test_the_model_needs_the_simulated_step_model():
    with pytest.raises(LibraInputError, match="model=pipelined"):
        TraceBound(pipeline_set(), NET, TimingModel())


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_bound_below_the_simulated_step_at_random_designs(backend):
    tm = TimingModel(model="pipelined", network_backend=backend, chunks=2,
                     latency_ns=[200.0, 500.0], endpoint_delay_ns=10.0)
    trace = pipeline_set(micro=3)
    bound = TraceBound(trace, NET, tm)
    rng = np.random.default_rng(5)
    for bw in rng.uniform(5.0, 500.0, size=(12, 2)):
        lower, _ = bound.longest_path(bw)
        cut, (path, extra) = bound.best_cut(bw)
        sim = step_trace.simulate_trace(trace, NET.block_codes, NET.npus, bw, tm).time_ns
        assert lower <= cut <= sim * (1 + 1e-9)
        assert bound.value_ns(bound.rows([(path, extra)]), bw) <= sim * (1 + 1e-9)


def test_compute_unit_cut_by_hand():
    """One rank: a 1 ms compute, then a 64 MiB all-reduce, then three 1 ms computes that
    each depend only on the all-reduce (no path holds more than one of them): the longest
    path is 1 ms + all-reduce + 1 ms, but the compute unit runs the three one after
    another, so the step is at least 1 ms + all-reduce + 3 ms."""
    groups = (CommGroup("dims:0", involved=(True,)),)
    nodes = [dict(id=0, name="F", kind=C, duration_ns=1e6),
             dict(id=1, name="AR", kind=COLL, collective=AR, size_bytes=64 * 2**20,
                  group=0, deps=[0])]
    nodes += [dict(id=2 + k, name=f"B{k}", kind=C, duration_ns=1e6, deps=[1])
              for k in range(3)]
    trace = TraceSet("one", tuple(build_rank_trace(r, nodes) for r in range(4)), groups, {})
    net = network_from_lists(["Ring"], [4])
    bound = TraceBound(trace, net, TM)
    ar = 2 * 0.75 * 64 * 2**20 / 100.0
    assert bound.longest_path(np.array([100.0]))[0] == pytest.approx(2e6 + ar, rel=1e-12)
    value, cut = bound.best_cut(np.array([100.0]))
    assert value == pytest.approx(4e6 + ar, rel=1e-12)
    sim = step_trace.simulate_trace(trace, net.block_codes, net.npus, [100.0], TM).time_ns
    assert value <= sim * (1 + 1e-12)
    rows = bound.rows([cut])
    assert bound.value_ns(rows, [50.0]) == pytest.approx(4e6 + 2 * ar, rel=1e-12)


def _train(trace, tm, spec, objective="perf", cost=None):
    bound = TraceBound(trace, NET, tm)
    paths = [bound.longest_path(np.array([100.0, 100.0]))[1]]
    for _ in range(30):
        rows = bound.rows(paths)
        p = problem_from_arrays(np.zeros((0, 2)), np.zeros(0), 0.0, cost, spec, rows=rows)
        res = solve(p, objective=objective)
        length, path = bound.longest_path(res.bandwidth_gbps)
        if length <= bound.value_ns(rows, res.bandwidth_gbps) * (1 + 1e-9):
            return res, len(paths)
        paths.append(path)
    raise AssertionError("the cutting plane did not converge")


@pytest.mark.parametrize("backend", ["unaware", "aware"])
def test_cutting_plane_certifies_against_a_grid_of_simulated_steps(backend):
    """The model's certified lower bound is below the best simulated step of a fine grid
    over the budget, and the simulated step at the optimum is within the certified gap."""
    tm = TimingModel(model="pipelined", network_backend=backend, chunks=2,
                     latency_ns=[100.0, 100.0])
    trace = pipeline_set(micro=2)
    spec = ConstraintSpec(total_bw_gbps=400.0)
    res, rounds = _train(trace, tm, spec)
    assert res.status == "ok" and rounds >= 1
    exact = step_trace.simulate_trace(trace, NET.block_codes, NET.npus, res.bandwidth_gbps,
                                      tm).time_ns
    grid = [step_trace.simulate_trace(trace, NET.block_codes, NET.npus,
                                      np.array([x, 400.0 - x]), tm).time_ns
            for x in np.linspace(4.0, 396.0, 99)]
    assert res.lower_bound <= min(grid) * (1 + 1e-9)
    assert res.lower_bound <= exact * (1 + 1e-9)
    # the simulated optimum is as good as the grid's best (a grid point 4 GB/s apart)
    assert exact <= min(grid) * 1.02
    assert abs(sum(res.bandwidth_gbps) - 400.0) < 1e-6


# ------------------------------------------------------------------ the commands


def _command(module: str, *args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = {"HYDRA_FULL_ERROR": "0", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
           "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


NET_ARGS = ("network.topology=[Ring,Switch]", "network.npus=[4,2]", "model=pipelined")


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    write_trace_set(pipeline_set(micro=3), d, name="pp")
    return d


def test_train_and_evaluate_a_trace_set(trace_dir, tmp_path):
    """libra-train on a two-stage pipeline: the optimum, its simulated step (equal to the
    simulation in process), the certified gap, the equal split, the classes, and the
    ASTRA-sim export of the trace set; then libra-evaluate of that design agrees."""
    run = tmp_path / "train"
    proc = _command("libra_jax.train", f"workload.chakra_et={trace_dir / 'pp'}", *NET_ARGS,
                    "constraints.total_bw_gbps=300", "system.chunks=2", "system.gb_is_gib=true",
                    "export_astrasim=true", f"hydra.run.dir={run}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "certified gap to the best simulated step" in proc.stdout
    data = json.loads((run / "result.json").read_text())
    assert data["status"] == "ok" and data["objective"] == "perf"
    bw = np.asarray(data["bandwidth_gbps"])
    assert abs(bw.sum() - 300.0) < 1e-6
    trace = read_chakra(trace_dir / "pp", num_dims=2)
    tm = TimingModel(model="pipelined", chunks=2, gb_is_gib=True)
    sim = step_trace.simulate_trace(trace, NET.block_codes, NET.npus, bw, tm)
    assert data["step_time_ns"] == pytest.approx(sim.time_ns, rel=1e-12)
    assert 0 <= data["exact_optimality_gap"] < 1e-6
    assert data["lower_bound"] <= data["step_time_ns"] * (1 + 1e-9)
    assert data["equal_split"]["step_time_ns"] >= data["step_time_ns"]
    assert data["speedup_vs_equal_split"] > 1.0
    assert data["workload"]["ranks"] == 8 and data["cutting_plane"]["converged"]
    assert sorted(c["ranks"] for c in data["classes"]) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    back = read_chakra(run / "astrasim" / "et" / "wl", num_dims=2)
    again = step_trace.simulate_trace(back, NET.block_codes, NET.npus, bw, tm)
    assert again.time_ns == pytest.approx(sim.time_ns, rel=1e-12)
    # the design is in ASTRA-sim's GB (2^30 bytes) already: written unchanged
    yml = (run / "astrasim" / "network.yml").read_text()
    line = next(x for x in yml.splitlines() if x.startswith("bandwidth:"))
    written = [float(v) for v in line.split("[")[1].split("]")[0].split(",")]
    np.testing.assert_allclose(written, bw, rtol=1e-12)
    script = (run / "astrasim" / "run.sh").read_text()
    assert "--comm-group-configuration=empty" in script

    ev = tmp_path / "eval"
    design = "bandwidth_gbps=[" + ",".join(repr(float(x)) for x in bw) + "]"
    proc = _command("libra_jax.evaluate", f"workload.chakra_et={trace_dir / 'pp'}", *NET_ARGS,
                    "constraints.total_bw_gbps=300", "system.chunks=2", "system.gb_is_gib=true",
                    design,
                    f"hydra.run.dir={ev}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((ev / "result.json").read_text())
    assert got["step_time_ns"] == pytest.approx(sim.time_ns, rel=1e-12)
    assert got["constraints"]["satisfied"]
    assert got["lower_bound_ns"] <= got["step_time_ns"] * (1 + 1e-9)
    assert len(got["rank_end_ns"]) == 8


@pytest.mark.parametrize("args, words", [
    (("network.topology=[Ring,Switch]", "network.npus=[4,4]", "model=pipelined",
      "bandwidth_gbps=[1,1]"),
     "8 ranks"),
    (("network.topology=[Ring,Switch]", "network.npus=[4,2]", "bandwidth_gbps=[1,1]"),
     "set model=pipelined"),
    ((*NET_ARGS, "bandwidth_gbps=[1,1]", "workload.file=workload/Turing_NLG.txt"),
     "are both set"),
    ((*NET_ARGS, "bandwidth_gbps=[1,1]", "training_loop=dp_overlap"),
     "own dependencies"),
    ((*NET_ARGS, "bandwidth_gbps=[0,1]"), "crosses dimension 0"),
    ((*NET_ARGS, "bandwidth_gbps=[1,1]", "workload.chakra_et=nowhere/wl"),
     "workload.chakra_et = 'nowhere/wl': no trace set there"),
])
def test_bad_trace_runs_are_refused(trace_dir, tmp_path, args, words):
    proc = _command("libra_jax.evaluate", f"workload.chakra_et={trace_dir / 'pp'}", *args,
                    f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode != 0
    assert words in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ the round trip


def _preset_inputs(preset):
    from hydra import compose, initialize_config_dir

    from libra_jax.cli import config
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"conf={preset}", "model=pipelined"])
    if cfg.workload.generator == "serving":  # the decode step, as a serving run exports it
        from libra_jax.inputs.generators import serving_phases
        from libra_jax.studies.job.inputs import design_inputs
        c = config._as_config(cfg)
        network, _, _ = design_inputs(c)
        w = c.workload
        workload = serving_phases(w.model, w.parallel, w.npu, network.npus).workloads[1]
    else:
        network, workload, _, _ = config.to_inputs(cfg)
    tm, _ = config.to_timing(cfg, network.num_dims, network)
    return network, workload, tm


def _presets():
    """The shipped single-workload presets (the co-search and multi-workload ones reuse
    other presets' workloads)."""
    from libra_jax.cli import config
    return [p for p in config.presets()
            if not any(line.startswith(("workloads:", "cosearch:"))
                       for line in (config.CONF_DIR / "conf" / f"{p}.yaml").read_text()
                       .splitlines())]


#: Presets whose exported trace set takes minutes to write, read back and simulate (gb200_nvl72
#: 9,261 nodes x 576 ranks, tpu_v4 3,397 x 4,096), and gpt3_4d_multi (gpt3_4d's step, which
#: the default suite runs): in the slow suite.
SLOW_ROUND_TRIPS = ("gb200_nvl72", "tpu_v4", "gpt3_4d_multi")


@pytest.mark.parametrize("preset", [pytest.param(p, marks=pytest.mark.slow)
                                    if p in SLOW_ROUND_TRIPS else p for p in _presets()])
def test_every_preset_round_trips_through_chakra_files(preset, tmp_path):
    """A shipped preset's step exported as ASTRA-sim files (``export_astrasim=true``:
    `chakra.write_traces`, or with a group over part of a dimension the ``pg_name`` trace
    set with its comm-group JSON; compute in whole µs) and imported again (`read_chakra`)
    simulates to the step libra_jax reports for the exported graph
    (`timing.step_time_ns`'s `step_partial.simulate_graph_ns`, the written durations) to
    1e-9, both backends."""
    import dataclasses

    from libra_jax.inputs import chakra
    from libra_jax.model import step, step_partial
    from libra_jax.studies.job.config import LibraConfig
    from libra_jax.studies.job.export import export_astrasim

    network, workload, tm0 = _preset_inputs(preset)
    tm0 = dataclasses.replace(tm0, training_loop="dp_overlap", chunks=2)
    bw = np.linspace(50.0, 200.0, network.num_dims)
    export_astrasim(LibraConfig(export_astrasim=True), tmp_path, network, bw, tm0, workload)
    et = tmp_path / "astrasim" / "et"
    groups = et / "wl.comm_groups.json"
    nodes = step.step_graph(workload, "dp_overlap")
    partial = step_partial.has_partial_groups(nodes, network.npus)
    assert groups.exists() == partial, preset
    written = [dataclasses.replace(nd, duration_ns=1000.0 * chakra.micros(nd.duration_ns))
               if nd.kind == "compute" else nd for nd in nodes]
    trace = read_chakra(et / "wl", groups if partial else None, num_dims=network.num_dims)
    for backend in ("unaware", "aware"):
        tm = dataclasses.replace(tm0, network_backend=backend)
        ref = step_partial.simulate_graph_ns(written, network.block_codes, network.npus, bw,
                                             tm)
        sim = step_trace.simulate_trace(trace, network.block_codes, network.npus, bw, tm)
        assert sim.time_ns == pytest.approx(ref, rel=1e-9), (preset, backend)
        if not partial:  # the hierarchical replay itself, unchanged
            assert ref == step.simulate_step(written, network.block_codes, network.npus, bw,
                                             tm).time_ns


def test_groups_over_part_of_a_dimension_as_pg_name_rings(tmp_path):
    """A collective over 2 of a Ring(4)'s NPUs (blocks {0,1}, {2,3} on each coordinate of
    dimension 1) has no involved_dim form: `trace_from_nodes(partial_as_pg=True)` gives one
    pg_name group per block, written with the JSON and read back equal; simulated as
    ASTRA-sim runs it, a flat ring of 2: S / bw for the all-reduce (2 (n - 1) / n = 1)."""
    from libra_jax.types import StepNode

    nodes = [StepNode(name="F", kind="compute", duration_ns=1000.0),
             StepNode(name="AR", kind="comm", deps=(0,), collective=AR, size_bytes=8e6,
                      involved=(True, False), group=(2, 1))]
    with pytest.raises(LibraInputError, match="part of a dimension"):
        step_trace.trace_from_nodes(nodes, [4, 2])
    trace = step_trace.trace_from_nodes(nodes, [4, 2], partial_as_pg=True)
    rings = [g.ranks for g in trace.groups if g.ranks is not None]
    assert sorted(rings) == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert all(r.rank in trace.groups[int(r.group[1])].ranks for r in trace.ranks)
    files = write_trace_set(trace, tmp_path, name="wl")
    back = read_chakra(tmp_path / "wl", files.comm_groups, num_dims=2)
    for t in (trace, back):
        got = step_trace.simulate_trace(t, NET.block_codes, NET.npus, [100.0, 100.0], TM)
        assert got.time_ns == pytest.approx(1000.0 + 8e6 / 100.0, rel=1e-12)
