"""Trace sets as entries of ``workloads`` (issue 32 point 1, `studies.trace_multi`,
`cli.trace_multi_report`): the weighted objective of simulated steps, the cutting plane over
the sum of the workloads' convex bounds and its certified gap, the refusals, the commands."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from libra_jax.inputs.chakra_export import build_rank_trace, write_trace_set
from libra_jax.inputs.topology import network_from_lists
from libra_jax.model import step_trace, timing
from libra_jax.model.objective import step_time_s
from libra_jax.model.problem import ConstraintSpec, ModelRows, problem_from_arrays
from libra_jax.model.timing_spec import TimingModel
from libra_jax.studies import trace_multi
from libra_jax.studies.job.config import (
    ConstraintsConfig,
    CostModelConfig,
    LibraConfig,
    MultiObjective,
    NetworkConfig,
    TimeModel,
    WorkloadEntryConfig,
)
from libra_jax.studies.job.inputs import to_multi_inputs
from libra_jax.studies.job.trace import merge_rows
from libra_jax.types import Collective, CommGroup, LibraInputError, TraceNode, TraceSet

ROOT = pathlib.Path(__file__).resolve().parents[1]
C, COLL, SEND, RECV = (int(TraceNode.COMPUTE), int(TraceNode.COLLECTIVE), int(TraceNode.SEND),
                       int(TraceNode.RECV))
AR = int(Collective.ALLREDUCE)
MIB = 2**20
NET = network_from_lists(["Ring", "Switch"], [4, 2])


def two_stage(tp_mib: float, act_mib: float) -> TraceSet:
    """8 NPUs on Ring(4) x Switch(2): ranks 0-3 compute 1 ms, all-reduce ``tp_mib`` MiB
    over dimension 0 and send ``act_mib`` MiB to rank r + 4, which receives, computes 1 ms
    and all-reduces over dimension 0."""
    groups = (CommGroup("dims:0", involved=(True, False)),)
    ranks = []
    for r in range(8):
        if r < 4:
            nodes = [dict(id=0, name="F", kind=C, duration_ns=1e6),
                     dict(id=1, name="TP", kind=COLL, collective=AR, size_bytes=tp_mib * MIB,
                          group=0, deps=[0]),
                     dict(id=2, name="S", kind=SEND, peer=r + 4, tag=0,
                          size_bytes=act_mib * MIB, deps=[1])]
        else:
            nodes = [dict(id=0, name="R", kind=RECV, peer=r - 4, tag=0,
                          size_bytes=act_mib * MIB),
                     dict(id=1, name="F", kind=C, duration_ns=1e6, deps=[0]),
                     dict(id=2, name="TP", kind=COLL, collective=AR, size_bytes=tp_mib * MIB,
                          group=0, deps=[1])]
        ranks.append(build_rank_trace(r, nodes, path=f"mem.{r}.et"))
    return TraceSet("mem", tuple(ranks), groups, {})


def hand_step_ns(tp_mib: float, act_mib: float, bw) -> float:
    """`two_stage`'s step by hand (no latency, one chunk, unaware backend): 1 ms, the ring
    all-reduce's 2 x 3/4 x size over dimension 0, the message over dimension 1 (ranks r and
    r + 4 differ there only), 1 ms, the all-reduce again."""
    ar = 2 * 0.75 * tp_mib * MIB / bw[0]
    return 2e6 + 2 * ar + act_mib * MIB / bw[1]


WORKLOAD_YAML = """name: small
layers:
  - name: L
    forward: {compute_ns: 1000000, collective: ALLREDUCE, size_bytes: 67108864,
              communicator: [4, -1]}
    input_grad: {compute_ns: 500000, collective: NONE}
    weight_grad: {compute_ns: 500000, collective: ALLREDUCE, size_bytes: 33554432,
                  communicator: [-1, 2]}
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("traces")
    write_trace_set(two_stage(64, 32), d, name="a")
    write_trace_set(two_stage(8, 128), d, name="b")
    (d / "small.yaml").write_text(WORKLOAD_YAML)
    return d


def config(files, entries, weights=None, **kw) -> LibraConfig:
    kw = {"model": TimeModel.pipelined, **kw}
    return LibraConfig(
        network=NetworkConfig(topology=["Ring", "Switch"], npus=[4, 2]),
        constraints=ConstraintsConfig(total_bw_gbps=300.0),
        workloads=[WorkloadEntryConfig(**e) for e in entries], weights=weights, **kw)


def test_merged_rows_are_the_weighted_sum_by_hand():
    """Part A: one piece, row 1 s + 2 GB / bw0. Part B: piece 0 (weight 0) 0.5 s + 4 GB /
    bw1, piece 1 = 2 x piece 0. At bw = (2, 4) GB/s: A = 2 s, B = 2 x 1.5 = 3 s; weights
    (1, 2): 2 + 6 = 8 s."""
    a = ModelRows(weight=np.array([1.0]), piece=np.array([0]), const_s=np.array([1.0]),
                  coef_gb=np.array([[2.0, 0.0]]))
    b = ModelRows(weight=np.array([0.0, 1.0]), piece=np.array([0, 1]),
                  const_s=np.array([0.5, 0.0]), coef_gb=np.array([[0.0, 4.0], [0.0, 0.0]]),
                  nest=np.array([[0.0, 0.0], [2.0, 0.0]]))
    merged = merge_rows([(1.0, a), (2.0, b)])
    p = problem_from_arrays(np.zeros((0, 2)), np.zeros(0), 0.0, None,
                            ConstraintSpec(total_bw_gbps=6.0), rows=merged)
    assert float(step_time_s(jnp.asarray([2.0, 4.0]), p)) == pytest.approx(8.0, rel=1e-12)
    alone = merge_rows([(1.0, b)])
    for name in ("weight", "piece", "const_s", "coef_gb", "nest"):
        np.testing.assert_array_equal(getattr(alone, name), getattr(b, name))


def test_evaluate_is_the_weighted_sum_of_simulated_steps(files):
    """Two traces and a workload file at (120, 180) GB/s, weights (1, 2, 0.5): each step is
    its own simulation (the traces' by hand too) and the objective their weighted sum."""
    bw = [120.0, 180.0]
    c = config(files, [dict(chakra_et=str(files / "a")), dict(chakra_et=str(files / "b"),
                                                              name="B"),
                       dict(file=str(files / "small.yaml"))],
               weights=[1.0, 2.0, 0.5], bandwidth_gbps=bw)
    ev = trace_multi.evaluate_timed_multi(c)
    assert [w.name for w in ev.inputs.workloads] == ["a", "B", "small"]
    tm = TimingModel(model="pipelined")
    for i, (tp, act) in enumerate(((64, 32), (8, 128))):
        sim = step_trace.simulate_trace(two_stage(tp, act), NET.block_codes, NET.npus,
                                        np.asarray(bw), tm)
        assert ev.steps_ns[i] == sim.time_ns
        assert ev.steps_ns[i] == pytest.approx(hand_step_ns(tp, act, bw), rel=1e-9)
    wl = ev.inputs.workloads[2].workload
    assert ev.steps_ns[2] == timing.step_time_ns(wl, NET, tm, np.asarray(bw))
    assert ev.objective_value == pytest.approx(
        ev.steps_ns[0] + 2 * ev.steps_ns[1] + 0.5 * ev.steps_ns[2], rel=1e-15)
    assert ev.constraints["satisfied"]


@pytest.mark.parametrize("weights", [None, [1.0, 3.0]])
def test_train_certifies_the_weighted_sum(files, weights):
    """libra-train on two traces: the design meets the budget, its objective is the weighted
    sum of the simulated steps there, the certified lower bound is below it and below the
    simulated objective of every design of a grid (so below the best simulated one), and
    the design is no worse than the equal split. These steps have no contention: the bound
    is exact (gap ~ 0) and the design is the grid's best up to its spacing."""
    c = config(files, [dict(chakra_et=str(files / "a")), dict(chakra_et=str(files / "b"))],
               weights=weights)
    run = trace_multi.train_timed_multi(c)
    w = np.ones(2) if weights is None else np.asarray(weights)
    bw = run.bandwidth_gbps
    assert bw.sum() == pytest.approx(300.0, rel=1e-9)
    steps = [hand_step_ns(64, 32, bw), hand_step_ns(8, 128, bw)]
    np.testing.assert_allclose(run.steps_ns, steps, rtol=1e-9)
    assert run.objective_value == pytest.approx(float(w @ run.steps_ns), rel=1e-15)
    lb = float(run.result.lower_bound)
    assert lb <= run.objective_value * (1 + 1e-12)
    assert 0 <= run.gap < 1e-6 and run.converged
    grid = [min(float(w @ [hand_step_ns(64, 32, x), hand_step_ns(8, 128, x)]) for x in
                [np.array([b0, 300.0 - b0])]) for b0 in np.linspace(5, 295, 59)]
    assert lb <= min(grid) * (1 + 1e-12)
    assert run.objective_value <= min(grid) * (1 + 1e-9)
    assert run.objective_value <= run.baseline_objective_value


def test_train_with_a_file_and_the_shipped_trace_bounds_the_simulated_objective(files):
    """The shipped llm8 trace (pg_name groups, pipeline stages: contention makes the bound
    loose) with a workload file on Switch(4) x FullyConnected(2): the bound stays below the
    simulated objective and the reported steps are the simulations at the design."""
    groups = str(ROOT / "libra_jax/data/traces/llm8/comm_groups.json")
    c = LibraConfig(
        network=NetworkConfig(topology=["Switch", "FullyConnected"], npus=[4, 2]),
        constraints=ConstraintsConfig(total_bw_gbps=300.0), model=TimeModel.pipelined,
        workloads=[WorkloadEntryConfig(chakra_et="traces/llm8/wl", comm_groups=groups),
                   WorkloadEntryConfig(file=str(files / "small.yaml"))],
        weights=[1.0, 0.5])
    run = trace_multi.train_timed_multi(c)
    again = [w.simulate_ns(run.inputs.network, run.bandwidth_gbps) for w in run.inputs.workloads]
    np.testing.assert_array_equal(run.steps_ns, again)
    assert run.objective_value == pytest.approx(again[0] + 0.5 * again[1], rel=1e-15)
    assert run.result.lower_bound <= run.objective_value
    assert run.gap is not None and run.gap >= 0
    assert run.objective_value <= run.baseline_objective_value


def test_sum_time_x_cost(files):
    """sum_time_x_cost: the objective is the network cost at the design times the weighted
    sum, and the bound (ns x $) is below it."""
    c = config(files, [dict(chakra_et=str(files / "a")), dict(chakra_et=str(files / "b"))],
               cost_model=CostModelConfig(file="cost_model/3d_cost_model.yml"),
               multi_objective=MultiObjective.sum_time_x_cost)
    c = dataclasses.replace(c, network=NetworkConfig(
        topology=["Ring", "Switch"], npus=[4, 2], cost_tiers=["InterPackage", "InterNode"]))
    run = trace_multi.train_timed_multi(c)
    cost = float(run.inputs.cost_rates @ run.bandwidth_gbps)
    assert run.objective_value == pytest.approx(cost * run.steps_ns.sum(), rel=1e-12)
    assert run.result.lower_bound <= run.objective_value * (1 + 1e-12)


@pytest.mark.parametrize("entries, kw, words", [
    ([dict(chakra_et="A", file="x.yaml")], {}, "workloads[0]: set exactly one of "
     "workloads[0].file"),
    ([dict(chakra_et="A"), dict(name="n")], {}, "workloads[1]: set exactly one of"),
    ([dict(chakra_et="A"), dict(file="x.yaml", comm_groups="g.json")], {},
     "workloads[1].comm_groups='g.json' is the communicator groups of a trace set"),
    ([dict(chakra_et="A", communicator_file="c.yml")], {},
     "workloads[0].communicator_file='c.yml' belongs to a workload file"),
    ([dict(chakra_et="A")], dict(model=TimeModel.libra), "set model=pipelined"),
    ([dict(chakra_et="A")], dict(multi_objective=MultiObjective.worst_slowdown),
     "multi_objective=worst_slowdown with workloads[0].chakra_et='A': not available"),
    ([dict(chakra_et="A"), dict(chakra_et="nowhere/wl")], {},
     "workloads[1].chakra_et = 'nowhere/wl': no trace set there"),
])
def test_bad_entries_are_refused(files, entries, kw, words):
    entries = [{k: (str(files / "a") if v == "A" else v) for k, v in e.items()}
               for e in entries]
    words = words.replace("'A'", repr(str(files / "a")))
    with pytest.raises(LibraInputError) as e:
        trace_multi.evaluate_timed_multi(config(files, entries, bandwidth_gbps=[1.0, 1.0],
                                                **kw))
    assert words in str(e.value)


def test_rank_count_and_zero_bandwidth_name_the_entry(files):
    c = config(files, [dict(chakra_et=str(files / "a"))], bandwidth_gbps=[1.0, 1.0])
    c = dataclasses.replace(c, network=NetworkConfig(topology=["Ring", "Switch"], npus=[4, 4]))
    with pytest.raises(LibraInputError, match=r"workloads\[0\].chakra_et=.*8 ranks"):
        trace_multi.evaluate_timed_multi(c)
    c = config(files, [dict(file=str(files / "small.yaml")), dict(chakra_et=str(files / "b"))],
               bandwidth_gbps=[0.0, 1.0])
    with pytest.raises(LibraInputError, match=r"traffic of workloads\[0\] \(small\) crosses "
                                              "dimension 0"):
        trace_multi.evaluate_timed_multi(c)


def test_libra_model_multi_runs_point_to_the_trace_path(files):
    c = config(files, [dict(file=str(files / "small.yaml")), dict(chakra_et=str(files / "a"))],
               model=TimeModel.libra)
    with pytest.raises(LibraInputError, match=r"workloads\[1\].chakra_et=.*timed by simulated"):
        to_multi_inputs(c)


def _command(module: str, *args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = {"HYDRA_FULL_ERROR": "0", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin",
           "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


NET_ARGS = ("network.topology=[Ring,Switch]", "network.npus=[4,2]", "model=pipelined",
            "constraints.total_bw_gbps=300")


def test_commands(files, tmp_path):
    """libra-train with a trace and a workload file: the table, result.json (each workload's
    simulated step, the bound, the gap); libra-evaluate of that design gives the same
    steps; bad input exits non-zero with the message and no traceback."""
    wl = f"workloads=[{{chakra_et:{files / 'a'},name:A}},{{file:{files / 'small.yaml'}}}]"
    run = tmp_path / "train"
    proc = _command("libra_jax.train", wl, "weights=[2,1]", *NET_ARGS,
                    f"hydra.run.dir={run}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "certified gap to the best simulated objective" in proc.stdout
    data = json.loads((run / "result.json").read_text())
    assert data["status"] == "ok" and data["objective"] == "sum_time"
    steps = [w["step_time_ns"] for w in data["workloads"]]
    assert [w["name"] for w in data["workloads"]] == ["A", "small"]
    assert data["workloads"][0]["chakra_et"] == str(files / "a")
    assert data["objective_value"] == pytest.approx(2 * steps[0] + steps[1], rel=1e-12)
    assert data["lower_bound"] <= data["objective_value"] * (1 + 1e-12)
    assert data["exact_optimality_gap"] >= 0
    design = "bandwidth_gbps=[" + ",".join(repr(x) for x in data["bandwidth_gbps"]) + "]"
    ev = tmp_path / "eval"
    proc = _command("libra_jax.evaluate", wl, "weights=[2,1]", *NET_ARGS, design,
                    f"hydra.run.dir={ev}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((ev / "result.json").read_text())
    assert [w["step_time_ns"] for w in got["workloads"]] == steps
    assert got["objective_value"] == data["objective_value"]
    bad = f"workloads=[{{chakra_et:{files / 'a'},file:{files / 'small.yaml'}}}]"
    proc = _command("libra_jax.train", bad, *NET_ARGS, f"hydra.run.dir={tmp_path / 'bad'}",
                    cwd=tmp_path)
    assert proc.returncode != 0
    assert "set exactly one of workloads[0].file" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ libra-scan


def scan_config(workloads, *, npus=8, min_dims=2, max_dims=2, budgets=(300.0,)):
    from libra_jax.studies import scan
    return scan.ScanConfig(
        space=scan.SpaceConfig(npus=npus, min_dims=min_dims, max_dims=max_dims,
                               blocks=["Ring", "Switch"], budgets_gbps=list(budgets),
                               cost_model="cost_model/3d_cost_model.yml",
                               tier_order=["InterPackage", "InterNode", "InterPod"]),
        workloads=[scan.ScanWorkloadConfig(**w) for w in workloads])


def test_scan_rows_of_a_trace_are_libra_train_on_that_design(files):
    """A scan of the two-stage trace and a workload file: every trace row is what
    libra-train on a trace (`train_trace`) finds on that network and budget (same design,
    same simulated step), its gap is certified, its mapping reads ``trace``; the file's
    rows are solved as before."""
    from libra_jax.studies import scan
    from libra_jax.studies.job.trace import train_trace
    from libra_jax.studies.job.config import WorkloadConfig
    space = scan.make_space(scan_config([dict(chakra_et=str(files / "a"), name="A"),
                                         dict(file="workload/GPT_3.txt", tp=2)]))
    designs = list(scan.iter_designs(space))
    rows = scan.solve_designs(designs, space)
    traced = [r for r in rows if r["workload"] == "A"]
    assert {r["dims"] for r in traced} == {"2x4", "4x2"} and len(traced) == 8
    assert all(r["mapping"] == "trace" for r in traced)
    assert all(r["mapping"] != "trace" for r in rows if r["workload"] != "A")
    for r in traced[:3]:
        npus = [int(n) for n in r["dims"].split("x")]
        blocks = ["Ring" if b == "Ring" else "Switch" for b in r["blocks"].split("-")]
        c = LibraConfig(network=NetworkConfig(topology=blocks, npus=npus),
                        constraints=ConstraintsConfig(total_bw_gbps=300.0),
                        model=TimeModel.pipelined,
                        workload=WorkloadConfig(chakra_et=str(files / "a")))
        run = train_trace(c)
        np.testing.assert_array_equal(r["bandwidth_gbps"], run.bandwidth_gbps)
        assert r["step_time_ns"] == run.exact_step_ns
        lb = run.result.lower_bound
        assert r["optimality_gap"] == pytest.approx((run.exact_step_ns - lb) / lb, abs=1e-15)
        assert 0 <= r["optimality_gap"] < 1e-6  # no contention in this step: the bound is exact
        assert r["time_x_cost"] == r["step_time_ns"] * r["network_cost_usd"]


def test_scan_of_a_pg_name_trace_reads_every_dimension_count():
    """The shipped llm8 trace has only pg_name groups: it fits every shape of 8 NPUs, read
    once per dimension count (1 to 3)."""
    from libra_jax.studies import scan
    groups = str(ROOT / "libra_jax/data/traces/llm8/comm_groups.json")
    space = scan.make_space(scan_config([dict(chakra_et="traces/llm8/wl", comm_groups=groups)],
                                        min_dims=1, max_dims=3))
    assert sorted(space.workloads[0].trace.sets) == [1, 2, 3]
    assert space.workloads[0].name == "wl"


@pytest.mark.parametrize("workloads, kw, words", [
    ([dict(chakra_et="A")], dict(max_dims=3),
     "workloads[0].chakra_et='A' does not fit the shapes of 3 dimensions the scan covers"),
    ([dict(chakra_et="A")], dict(npus=16), "8 ranks but space.npus = 16"),
    ([dict(chakra_et="A", file="workload/GPT_3.txt")], {},
     "workloads[0]: set exactly one of workloads[0].file"),
    ([dict(name="x")], {}, "workloads[0]: set exactly one of"),
    ([dict(chakra_et="A", tp=2)], {}, "a trace set's mapping is in the trace"),
    ([dict(file="workload/GPT_3.txt", comm_groups="g.json")], {},
     "workloads[0].comm_groups='g.json' is the communicator groups of a trace set"),
    ([dict(chakra_et="nowhere/wl")], {}, "workloads[0].chakra_et = 'nowhere/wl': no trace"),
])
def test_scan_refuses_traces_that_do_not_fit(files, workloads, kw, words):
    from libra_jax.studies import scan
    workloads = [{k: (str(files / "a") if v == "A" else v) for k, v in w.items()}
                 for w in workloads]
    words = words.replace("'A'", repr(str(files / "a")))
    with pytest.raises(LibraInputError) as e:
        scan.make_space(scan_config(workloads, **kw))
    assert words in str(e.value)


def test_scan_command(files, tmp_path):
    """libra-scan with a trace entry writes its rows (mapping ``trace``, the simulated step,
    a certified gap); a trace that does not fit the space exits non-zero with the reason and
    no traceback."""
    import pandas as pd
    common = ("space.npus=8", "space.min_dims=2", "space.max_dims=2",
              "space.budgets_gbps=[300]", "space.blocks=[Ring,Switch]",
              "space.cost_model=cost_model/3d_cost_model.yml",
              "space.tier_order=[InterPackage,InterNode]", "scan.format=csv")
    wl = f"workloads=[{{chakra_et: {files / 'a'}, name: A}}]"
    out = tmp_path / "scan"
    proc = _command("libra_jax.scan", *common, wl, f"scan.output_dir={out}",
                    f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = pd.concat(map(pd.read_csv, sorted((out / "chunks").glob("chunk_*.csv"))))
    assert len(rows) == 8 and set(rows["mapping"]) == {"trace"}
    assert set(rows["workload"]) == {"A"} and (rows["optimality_gap"] < 1e-6).all()
    bw = [json.loads(b) for b in rows["bandwidth_gbps"]]
    checked = 0
    for (_, r), x in zip(rows.iterrows(), bw):
        n = [int(v) for v in r["dims"].split("x")]
        if n == [4, 2]:  # ranks r and r + 4 differ on dimension 1 only: the hand step
            assert r["step_time_ns"] == pytest.approx(hand_step_ns(64, 32, x), rel=1e-9)
            checked += 1
    assert checked == 4
    proc = _command("libra_jax.scan", *common[:2], "space.max_dims=3", *common[3:], wl,
                    "space.tier_order=[InterPackage,InterNode,InterPod]",
                    f"scan.output_dir={tmp_path / 'bad'}", f"hydra.run.dir={tmp_path / 'r2'}",
                    cwd=tmp_path)
    assert proc.returncode != 0
    assert "does not fit the shapes of 3 dimensions" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_workloads_and_a_single_workload_are_refused_together(files):
    from libra_jax.studies.job.config import WorkloadConfig
    c = config(files, [dict(chakra_et=str(files / "a"))], bandwidth_gbps=[1.0, 1.0],
               workload=WorkloadConfig(file="workload/GPT_3.txt"))
    with pytest.raises(LibraInputError, match="workloads and workload.file='workload/GPT_3.txt'"
                                              " are both set"):
        trace_multi.evaluate_timed_multi(c)
