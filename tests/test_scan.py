"""Design-space scan (`libra_jax.scan`): enumeration, TP/DP mapping, fast problems, chunks,
resume, Pareto front, summary files, and one `python -m libra_jax.scan` subprocess.

Most scans here use a fake solver (equal split, no JAX) so that they test the machinery in
milliseconds; one test runs the real batched solver (dedup == no dedup == single solves).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from libra_jax.cli import scan
from libra_jax.inputs import LIBRA_INPUTS_DIR
from libra_jax.inputs.cost import cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_communicator, load_workload
from libra_jax.model.problem import ConstraintSpec, build_problem, problem_from_arrays
from libra_jax.solvers.batch import BatchResult
from libra_jax.types import LibraInputError

REPO = pathlib.Path(__file__).resolve().parents[1]


def _cfg(tmp_path=None, **space) -> scan.ScanConfig:
    """A tiny scan: 16 NPUs, 2 dims, GPT-3 with tp 4 (dp 4)."""
    s = dict(npus=16, min_dims=2, max_dims=2, blocks=["Ring", "FullyConnected", "Switch"],
             budgets_gbps=[100.0, 200.0])
    s.update(space)
    return scan.ScanConfig(
        space=scan.SpaceConfig(**s),
        workloads=[scan.ScanWorkloadConfig(file="workload/GPT_3.txt", tp=4)],
        scan=scan.RunConfig(chunk_size=8, solve_chunk=8, progress=False),
        report=scan.ReportConfig(top_k=3, plot_points=100),
    )


class FakeSolver:
    """`solve_batch` stand-in: equal split, model step time in numpy; counts what it solves."""

    def __init__(self):
        self.calls = 0
        self.problems = 0

    def __call__(self, problems, chunk=None, dtype=None):
        self.calls += 1
        self.problems += len(problems)
        bws, steps = [], []
        for p in problems:
            bw = np.asarray(p.interior, np.float64)
            t = np.asarray(p.traffic_gb) / bw[None, :]
            steps.append((float(p.compute_s) + float(np.asarray(p.weight) @ t.max(axis=1))) * 1e9)
            bws.append(bw)
        n = len(problems)
        return BatchResult(bws, np.array(steps), np.array(steps), np.zeros(n), np.zeros(n),
                           ["ok"] * n, np.zeros(n, int))


# ------------------------------------------------------------------------- enumeration


def test_enumerate_shapes_by_hand():
    assert list(scan.enumerate_shapes(16, 2, 2)) == [(2, 8), (4, 4), (8, 2)]
    assert list(scan.enumerate_shapes(16, 2, 2, 4)) == [(4, 4)]
    assert list(scan.enumerate_shapes(16, 2, 4)) == [(4, 4)]
    assert list(scan.enumerate_shapes(16, 1)) == [(16,)]
    assert list(scan.enumerate_shapes(16, 5)) == []
    assert list(scan.enumerate_shapes(12, 2)) == [(2, 6), (3, 4), (4, 3), (6, 2)]
    # 4096 = 2^12 into D dims of >= 2: compositions of 12 into D parts, C(11, D - 1).
    assert [sum(1 for _ in scan.enumerate_shapes(4096, d)) for d in (2, 3, 4)] == [11, 55, 165]


@pytest.mark.parametrize("shape, tp, comm_file", [
    ((4, 8, 4, 32), 16, "GPT_3_4d.yml"),
    ((4, 8, 4, 32), 128, "MSFT_1T_4d.yml"),
    ((4, 8, 4, 32), 1, "Turing_NLG_4D.yml"),
    ((16, 8, 32), 16, "GPT_3_3d.yml"),
])
def test_parallel_communicators_reproduce_shipped(shape, tp, comm_file):
    tp_comm, dp_comm = scan.parallel_communicators(shape, tp)
    shipped = load_communicator(LIBRA_INPUTS_DIR / "communicator" / comm_file)
    np.testing.assert_array_equal(shipped, [tp_comm, tp_comm, dp_comm])


def test_parallel_communicators_by_hand():
    assert scan.parallel_communicators((4, 8, 4, 32), 16) == ((4, 4, -1, -1), (-1, 2, 4, 32))
    assert scan.parallel_communicators((2, 12), 4) == ((2, 2), (-1, 6))
    assert scan.parallel_communicators((8, 3), 4) == ((4, -1), (2, 3))
    assert scan.parallel_communicators((3, 8), 4) is None  # 4 neither divides nor fills 3
    assert scan.parallel_communicators((6, 4), 4) is None
    assert scan.parallel_communicators((2, 2), 8) is None  # tp larger than the network


def test_skip_counts():
    # 24 NPUs in 2 dims: (2,12) (3,8) (4,6) (6,4) (8,3) (12,2); tp 4 cannot fit (3,8), (6,4).
    cfg = _cfg(npus=24, budgets_gbps=[100.0])
    space = scan.make_space(cfg)
    total, skipped = scan.count_designs(space)
    assert total == 4 * 9
    assert skipped["mapping_designs"] == 2 * 9
    assert skipped["mapping_shapes"] == {"GPT_3": 2}
    assert skipped["switch_designs"] == 0
    ids = [d.design_id for d in scan.iter_designs(space)]
    assert ids == list(range(total))
    # InterChiplet has no Switch price: a Switch on dim 0 is skipped (3 of 9 per shape).
    cfg = _cfg(npus=24, budgets_gbps=[100.0], tier_options=[["InterChiplet", "InterPod"]])
    total, skipped = scan.count_designs(scan.make_space(cfg))
    assert (total, skipped["switch_designs"]) == (4 * 6, 4 * 3)


def test_config_errors():
    with pytest.raises(LibraInputError, match="tp \\* dp"):
        bad = _cfg()
        bad.workloads[0].dp = 8
        scan.make_space(bad)
    with pytest.raises(LibraInputError, match="NoSuchTier"):
        scan.make_space(_cfg(tier_order=["NoSuchTier", "InterPod"]))
    with pytest.raises(LibraInputError, match="unknown building block"):
        scan.make_space(_cfg(blocks=["Torus"]))


# ------------------------------------------------------------------------------ problems


def test_fast_problem_equals_build_problem():
    net = load_network_file(LIBRA_INPUTS_DIR / "network" / "4d_network.yml")
    wl = load_workload(LIBRA_INPUTS_DIR / "workload" / "GPT_3.txt",
                       LIBRA_INPUTS_DIR / "communicator" / "GPT_3_4d.yml", 4)
    rates = cost_rates_usd_per_gbps(net, load_cost_model(LIBRA_INPUTS_DIR / "cost_model" /
                                                         "4d_cost_model.yml"))
    spec = ConstraintSpec(total_bw_gbps=500.0)
    space = scan.make_space(_cfg(npus=4096))
    sw = dataclasses.replace(space.workloads[0], tp=16)
    traffic, weight = scan.design_traffic(sw, net.npus)
    for r in (rates, None):
        ref = build_problem(net, wl, r, spec)
        fast = scan.fast_problem(traffic, weight, sw.compute_s, r, 500.0)
        for f in dataclasses.fields(ref):
            a, b = getattr(ref, f.name), getattr(fast, f.name)
            if f.metadata.get("static"):
                assert a == b, f.name
            else:
                np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-12,
                                           atol=1e-12, err_msg=f.name)
                assert np.asarray(a).shape == np.asarray(b).shape, f.name
    # And a 2D problem with the cheapest dim last (min-cost point on it).
    t = np.array([[1.0, 2.0], [0.5, 0.0]])
    ref = problem_from_arrays(t, np.ones(2), 1.0, np.array([3.0, 1.0]), ConstraintSpec(100.0))
    fast = scan.fast_problem(t, np.ones(2), 1.0, np.array([3.0, 1.0]), 100.0)
    for name in ("upper", "interior", "min_cost_bw", "a_eq", "b_eq", "lo_tight", "hi_tight"):
        np.testing.assert_allclose(np.asarray(getattr(fast, name)),
                                   np.asarray(getattr(ref, name)), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------- pareto front


def test_pareto_front_hand_points():
    t = [1, 2, 2, 3, 4, 5, 1, 6]
    c = [5, 3, 4, 3, 1, 2, 5, 1]
    # (2,4) dominated by (2,3); (3,3) weakly by (2,3); (5,2) by (4,1); (6,1) weakly by (4,1);
    # the second (1,5) duplicates the first.
    assert scan.pareto_front(t, c).tolist() == [0, 1, 4]
    assert scan.pareto_front([], []).tolist() == []
    assert scan.pareto_front([3.0], [7.0]).tolist() == [0]


# --------------------------------------------------------------------- scans (fake solver)


def _chunk_files(out: pathlib.Path):
    return sorted((out / "chunks").glob("chunk_*.csv"))


def test_scan_resume_recomputes_nothing(tmp_path):
    out = tmp_path / "scan"
    cfg = _cfg(max_dims=3)  # 16 NPUs: 3 shapes of 2 dims (x9 blocks), 3 of 3 dims (x27)
    total = 2 * (3 * 9 + 3 * 27)
    cfg.scan.max_chunks = 3
    first = FakeSolver()
    res = scan.run_scan(cfg, out, solver=first)
    assert (res.total_designs, res.computed, res.complete) == (total, 24, False)
    files = _chunk_files(out)
    assert [f.name for f in files] == [f"chunk_{i:06d}.csv" for i in range(3)]
    mtimes = {f: f.stat().st_mtime_ns for f in files}
    assert not (out / "top_k.md").exists()
    # A killed writer leaves a temp file; it is removed and its chunk recomputed.
    (out / "chunks" / "chunk_000003.csv.tmp123").write_text("partial")

    cfg.scan.max_chunks = None
    second = FakeSolver()
    res = scan.run_scan(cfg, out, solver=second)
    assert res.complete and res.resumed == 24 and res.computed == total - 24
    assert second.calls == res.chunks - 3
    assert {f: f.stat().st_mtime_ns for f in files} == mtimes
    assert not list((out / "chunks").glob("*.tmp*"))

    rows = [r for f in _chunk_files(out) for r in scan.read_chunk(f)]
    assert [r["design_id"] for r in rows] == list(range(total))
    assert len(_chunk_files(out)) == res.chunks == -(-total // 8)

    # Everything on disk: a third run solves nothing and rewrites the summary.
    third = FakeSolver()
    res = scan.run_scan(cfg, out, solver=third)
    assert third.calls == 0 and res.computed == 0 and res.complete

    # Same dir, different scan: refused.
    cfg.space.budgets_gbps = [300.0]
    with pytest.raises(LibraInputError, match="different scan"):
        scan.run_scan(cfg, out, solver=FakeSolver())


def test_scan_outputs(tmp_path):
    out = tmp_path / "scan"
    res = scan.run_scan(_cfg(), out, solver=FakeSolver())
    assert res.complete
    with open(_chunk_files(out)[0], newline="") as f:
        header = next(csv.reader(f))
    assert tuple(header) == scan.COLUMNS
    row = scan.read_chunk(_chunk_files(out)[0])[0]
    assert row["notation"] == "RI(2)_RI(8)" and row["dims"] == "2x8"
    assert row["blocks"] == "Ring-Ring" and row["tiers"] == "InterNode-InterPod"
    assert row["npus"] == 16 and row["budget_gbps"] == 100.0 and row["status"] == "ok"
    np.testing.assert_allclose(eval(row["bandwidth_gbps"]), [50.0, 50.0])  # equal split
    np.testing.assert_allclose(row["time_x_cost"], row["step_time_ns"] * row["network_cost_usd"])
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "top_k.md").read_text()
    assert "| 1 | GPT_3 | `" in md and "ties" in md
    with open(out / "pareto_front.csv", newline="") as f:
        front = list(csv.DictReader(f))
    t = [float(r["step_time_ns"]) for r in front]
    c = [float(r["network_cost_usd"]) for r in front]
    assert t == sorted(t) and c == sorted(c, reverse=True)
    # Every design is dominated by (or on) the front.
    all_rows = [r for f in _chunk_files(out) for r in scan.read_chunk(f)]
    for r in all_rows:
        assert any(ft <= r["step_time_ns"] and fc <= r["network_cost_usd"]
                   for ft, fc in zip(t, c))


def test_progress_line():
    import io

    buf = io.StringIO()
    p = scan.Progress(100, enabled=True, stream=buf)
    p.update(resumed=40)
    p.update(computed=10)
    p.close()
    text = buf.getvalue()
    assert text.startswith("\rscan: 40/100") and "designs/s" in text and "ETA" in text
    assert text.endswith("\n")


# ------------------------------------------------------------------- real solver, CLI


def test_scan_real_solver_dedup_matches_full(tmp_path):
    cfg = _cfg(budgets_gbps=[100.0])
    a = scan.run_scan(cfg, tmp_path / "dedup")
    cfg.scan.dedup = False
    b = scan.run_scan(cfg, tmp_path / "full")
    ra = [r for f in _chunk_files(tmp_path / "dedup") for r in scan.read_chunk(f)]
    rb = [r for f in _chunk_files(tmp_path / "full") for r in scan.read_chunk(f)]
    assert a.total_designs == b.total_designs == len(ra) == len(rb) == 27
    for x, y in zip(ra, rb):
        assert x["status"] == y["status"] == "ok"
        np.testing.assert_allclose(x["step_time_ns"], y["step_time_ns"], rtol=1e-9)
        np.testing.assert_allclose(x["network_cost_usd"], y["network_cost_usd"], rtol=1e-6)
    # Against a single solve of the same design built the long way.
    from libra_jax.solvers.solve import solve

    space = scan.make_space(cfg)
    d = next(scan.iter_designs(space))
    traffic, weight = scan.design_traffic(space.workloads[0], d.shape)
    p = problem_from_arrays(traffic, weight, space.workloads[0].compute_s, None,
                            ConstraintSpec(total_bw_gbps=d.budget_gbps))
    np.testing.assert_allclose(ra[0]["step_time_ns"], solve(p).step_time_ns, rtol=1e-9)


def test_cli_tiny_scan(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "libra_jax.scan", "space.npus=16", "space.max_dims=2",
         "space.budgets_gbps=[100]", "workloads=[{file: workload/GPT_3.txt, tp: 4}]",
         "scan.chunk_size=8", "scan.solve_chunk=8", f"scan.output_dir={out}",
         f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "designs: 27 in 4 chunks" in proc.stdout
    assert "designs/s" in proc.stderr and "ETA" in proc.stderr
    for name in ("top_k.md", "pareto.png", "pareto_front.csv", "scan_manifest.json",
                 "scan_summary.json"):
        assert (out / name).exists(), name
    assert len(_chunk_files(out)) == 4
