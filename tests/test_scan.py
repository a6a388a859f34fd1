"""Design-space scan (`libra_jax.studies.scan`, command `libra_jax.cli.scan`): enumeration,
TP/DP mapping, a chunk's problems, chunk files (formats, precision, atomic and hidden temp
files, fsync), resume, Pareto front, the plot, progress, and `python -m libra_jax.scan`
subprocesses.

Most scans here use a fake solver (a fixed split, no JAX) so that they test the machinery in
milliseconds; one test runs the real batched solver (dedup == no dedup == single solves).
"""

from __future__ import annotations

import dataclasses
import fcntl
import io
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from libra_jax.inputs import LIBRA_INPUTS_DIR
from libra_jax.inputs.cost import cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.generators import parallel_communicators
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_communicator, load_workload
from libra_jax.model.problem import ConstraintSpec, build_problem, problem_from_arrays
from libra_jax.solvers.batch import BatchResult, unstack
from libra_jax.studies import scan
from libra_jax.studies.scan import files
from libra_jax.studies.scan.run import progress_bar
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
    """`solve_stacked` stand-in: the budget split 1 : 2 : ... : D over the dims (numbers that
    need full precision, e.g. 100/3), model step time in numpy; counts what it solves and
    keeps each call's options."""

    def __init__(self):
        self.calls = 0
        self.problems = 0
        self.kwargs: list[dict] = []

    def __call__(self, batches, chunk=None, dtype=None, tier=None, fixed_programs=False,
                 iteration_limit=True):
        self.calls += 1
        self.kwargs.append(dict(chunk=chunk, dtype=dtype, tier=tier,
                                fixed_programs=fixed_programs,
                                iteration_limit=iteration_limit))
        bws, steps = [], []
        for stacked in batches:
            for i in range(len(stacked.compute_s)):
                p = unstack(stacked, i)
                share = np.arange(1.0, p.num_dims + 1)
                bw = float(p.total_bw_gbps) * share / share.sum()
                t = np.asarray(p.traffic_gb) / bw[None, :]
                steps.append((float(p.compute_s) + float(np.asarray(p.weight) @ t.max(axis=1)))
                             * 1e9)
                bws.append(bw)
        n = len(bws)
        self.problems += n
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
    tp_comm, dp_comm = parallel_communicators(shape, tp)
    shipped = load_communicator(LIBRA_INPUTS_DIR / "communicator" / comm_file)
    np.testing.assert_array_equal(shipped, [tp_comm, tp_comm, dp_comm])


def test_parallel_communicators_by_hand():
    assert parallel_communicators((4, 8, 4, 32), 16) == ((4, 4, -1, -1), (-1, 2, 4, 32))
    assert parallel_communicators((2, 12), 4) == ((2, 2), (-1, 6))
    assert parallel_communicators((8, 3), 4) == ((4, -1), (2, 3))
    assert parallel_communicators((3, 8), 4) is None  # 4 neither divides nor fills 3
    assert parallel_communicators((6, 4), 4) is None
    assert parallel_communicators((2, 2), 8) is None  # tp larger than the network


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


def test_bad_block_names_the_list_entry_and_the_closest_block():
    with pytest.raises(LibraInputError) as e:
        scan.make_space(_cfg(blocks=["Ring", "Swtich"]))
    msg = str(e.value)
    assert msg.startswith("space.blocks[1] = 'Swtich': unknown building block.")
    assert "Did you mean 'Switch'?" in msg and "dimension" not in msg
    with pytest.raises(LibraInputError, match=r"space.blocks\[0\] = 'FullyConected'.*"
                                              r"Did you mean 'FullyConnected'\?"):
        scan.make_space(_cfg(blocks=["FullyConected"]))
    # Abbreviations and other spellings still work.
    assert scan.make_space(_cfg(blocks=["ri", "FC", "sw"])).blocks == (
        "Ring", "FullyConnected", "Switch")


def test_choice_fields_are_enums_equal_to_their_strings_and_checked():
    assert scan.Format.parquet == "parquet" and scan.Dtype.float32 == "float32"
    assert scan.RankBy.time_x_cost == "time_x_cost"
    assert scan.RunConfig().format == "parquet"  # the default
    cfg = _cfg()
    cfg.scan.format = "auto"  # a config built in Python, which Hydra did not check
    with pytest.raises(LibraInputError, match="scan.format = 'auto': expected one of "
                                              "parquet, csv"):
        scan.run_scan(cfg, "unused", solver=FakeSolver())


@pytest.mark.parametrize("key, value, expected", [
    ("top_k", -1, "report.top_k = -1: expected an integer >= 1 (rows per workload in top_k.md)"),
    ("top_k", 0, "report.top_k = 0: expected an integer >= 1"),
    ("top_k", 2.5, "report.top_k = 2.5: expected an integer >= 1"),
    ("plot_points", -3, "report.plot_points = -3: expected an integer >= 0"),
    ("html_points", None, "report.html_points = None: expected an integer >= 0"),
])
def test_bad_report_settings_are_refused_before_any_solving(tmp_path, key, value, expected):
    """Was: ``report.top_k=-1`` solved the whole scan, then died in the top-k heap."""
    cfg = _cfg()
    setattr(cfg.report, key, value)
    solver = FakeSolver()
    with pytest.raises(LibraInputError, match=re.escape(expected)):
        scan.run_scan(cfg, tmp_path / "out", solver=solver)
    assert solver.calls == 0 and not (tmp_path / "out").exists()
    with pytest.raises(LibraInputError, match=re.escape(expected)):  # before reading shards
        scan.merge_scan(tmp_path / "nowhere", cfg.report)


@pytest.mark.parametrize("override, key", [
    ("scan.format=auto", "format"), ("scan.dtype=float16", "dtype"),
    ("report.rank_by=cost", "rank_by"),
])
def test_hydra_rejects_bad_choices_at_compose_time(override, key):
    from hydra import compose, initialize_config_module
    from hydra.errors import ConfigCompositionException

    import libra_jax.cli.scan  # noqa: F401  (registers the schema)

    with initialize_config_module("libra_jax.conf", version_base="1.3"):
        good = compose("scan")
        assert good.scan.format == scan.Format.parquet
        with pytest.raises(ConfigCompositionException) as e:
            compose("scan", overrides=[override])
    text = f"{e.value} {e.value.__cause__}"
    assert key in text and "Invalid value" in text


# ------------------------------------------------------------------------------ problems


def test_chunk_problems_equal_build_problem():
    """The chunk's stacked problems (built by `problems_from_stacked`) equal the long way."""
    net = load_network_file(LIBRA_INPUTS_DIR / "network" / "4d_network.yml")
    wl = load_workload(LIBRA_INPUTS_DIR / "workload" / "GPT_3.txt",
                       LIBRA_INPUTS_DIR / "communicator" / "GPT_3_4d.yml", 4)
    rates = cost_rates_usd_per_gbps(net, load_cost_model(LIBRA_INPUTS_DIR / "cost_model" /
                                                         "4d_cost_model.yml"))
    space = scan.make_space(_cfg(npus=4096, max_dims=4))
    space = dataclasses.replace(space, workloads=(
        dataclasses.replace(space.workloads[0], tp=16),))
    design = scan.Design(0, net.npus, net.blocks, net.cost_tiers, 500.0, 0)
    builder = scan.ChunkBuilder(space)
    np.testing.assert_array_equal(builder.network(design)[1], rates)
    for r in (rates, None):
        ref = build_problem(net, wl, r, ConstraintSpec(total_bw_gbps=500.0))
        batches, position = builder.problems([design], None if r is None else [r])
        got = unstack(batches[0], int(position[0]))
        assert got.has_cost == ref.has_cost
        for f in dataclasses.fields(ref):
            if f.metadata.get("static"):
                continue
            a, b = np.asarray(getattr(ref, f.name)), np.asarray(getattr(got, f.name))
            assert a.shape == b.shape, f.name
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=f.name)


def test_chunk_problems_group_by_size_and_keep_design_order():
    space = scan.make_space(_cfg(max_dims=3))
    designs = list(scan.iter_designs(space))[::7]  # 2- and 3-dim shapes mixed
    builder = scan.ChunkBuilder(space)
    batches, position = builder.problems(designs, None)
    assert len({b.traffic_gb.shape[1:] for b in batches}) == len(batches) >= 2
    flat = [unstack(b, i) for b in batches for i in range(len(b.compute_s))]
    assert sorted(position.tolist()) == list(range(len(designs)))
    for x, j in zip(designs, position):
        t, w = scan.design_traffic(space.workloads[0], x.shape)
        ref = problem_from_arrays(t, w, space.workloads[0].compute_s, None,
                                  ConstraintSpec(total_bw_gbps=x.budget_gbps))
        for name in ("traffic_gb", "weight", "upper", "interior", "a_eq", "b_eq"):
            np.testing.assert_allclose(np.asarray(getattr(flat[j], name)),
                                       np.asarray(getattr(ref, name)), rtol=1e-12)


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


def _chunk_files(out: pathlib.Path, fmt: str = "parquet"):
    return sorted((out / "chunks").glob(f"chunk_*.{fmt}"))


def test_scan_resume_recomputes_nothing(tmp_path):
    out = tmp_path / "scan"
    cfg = _cfg(max_dims=3)  # 16 NPUs: 3 shapes of 2 dims (x9 blocks), 3 of 3 dims (x27)
    total = 2 * (3 * 9 + 3 * 27)
    cfg.scan.max_chunks = 3
    first = FakeSolver()
    res = scan.run_scan(cfg, out, solver=first)
    assert (res.total_designs, res.computed, res.complete) == (total, 24, False)
    files_ = _chunk_files(out)
    assert [f.name for f in files_] == [f"chunk_{i:06d}.parquet" for i in range(3)]
    mtimes = {f: f.stat().st_mtime_ns for f in files_}
    assert not (out / "top_k.md").exists()
    # A killed writer leaves a hidden temp file: readers skip it, the rerun removes it and
    # recomputes its chunk.
    (out / "chunks" / ".chunk_000003.parquet.tmp123").write_text("partial")
    assert len(pd.read_parquet(out / "chunks")) == 24

    cfg.scan.max_chunks = None
    second = FakeSolver()
    res = scan.run_scan(cfg, out, solver=second)
    assert res.complete and res.resumed == 24 and res.computed == total - 24
    assert second.calls == res.chunks - 3
    assert {f: f.stat().st_mtime_ns for f in files_} == mtimes
    assert not list((out / "chunks").glob("*.tmp*"))

    rows = [r for f in _chunk_files(out) for r in scan.read_chunk(f)]
    assert [r["design_id"] for r in rows] == list(range(total))
    assert len(_chunk_files(out)) == res.chunks == -(-total // 8)

    # Everything on disk: a third run solves nothing and rewrites the summary.
    third = FakeSolver()
    res = scan.run_scan(cfg, out, solver=third)
    assert third.calls == 0 and res.computed == 0 and res.complete

    # Same dir, different scan: refused, naming what differs.
    cfg.scan.format = "csv"
    with pytest.raises(LibraInputError, match="different scan \\(changed: format "
                                              "\\('parquet' there, 'csv' now\\)\\)"):
        scan.run_scan(cfg, out, solver=FakeSolver())
    cfg.scan.format = "parquet"
    cfg.space.budgets_gbps = [300.0]
    with pytest.raises(LibraInputError, match="different scan \\(changed: space\\)"):
        scan.run_scan(cfg, out, solver=FakeSolver())


def test_resume_does_not_depend_on_installed_packages(tmp_path, monkeypatch):
    """The format is a setting in the manifest, not inferred: a CSV scan started without
    pyarrow resumes with pyarrow installed (and the other way round, nothing to infer)."""
    cfg = _cfg()
    cfg.scan.format = "csv"
    cfg.scan.max_chunks = 1
    with monkeypatch.context() as m:
        m.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
        assert not scan.run_scan(cfg, tmp_path / "a", solver=FakeSolver()).complete
        cfg.scan.format = "parquet"
        with pytest.raises(LibraInputError, match="scan.format = parquet needs pyarrow"):
            scan.run_scan(cfg, tmp_path / "b", solver=FakeSolver())
    cfg.scan.format = "csv"
    cfg.scan.max_chunks = None
    res = scan.run_scan(cfg, tmp_path / "a", solver=FakeSolver())  # pyarrow importable now
    assert res.complete and res.resumed == 8 and len(_chunk_files(tmp_path / "a", "csv")) == 7


def test_scan_outputs(tmp_path):
    out = tmp_path / "scan"
    res = scan.run_scan(_cfg(), out, solver=FakeSolver())
    assert res.complete
    schema = pq.read_schema(_chunk_files(out)[0])
    assert tuple(schema.names) == scan.COLUMNS
    assert schema.field("bandwidth_gbps").type == pa.list_(pa.float64())
    assert schema.field("design_id").type == pa.int64()
    row = scan.read_chunk(_chunk_files(out)[0])[0]
    assert row["notation"] == "RI(2)_RI(8)" and row["dims"] == "2x8"
    assert row["blocks"] == "Ring-Ring" and row["tiers"] == "InterNode-InterPod"
    assert row["npus"] == 16 and row["budget_gbps"] == 100.0 and row["status"] == "ok"
    assert row["bandwidth_gbps"] == [100.0 / 3.0, 200.0 / 3.0]  # full precision, exactly
    np.testing.assert_allclose(row["time_x_cost"], row["step_time_ns"] * row["network_cost_usd"])
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "top_k.md").read_text()
    assert "| 1 | GPT_3 | `" in md and "ties" in md and "[33.3333, 66.6667]" in md
    # Ring and FullyConnected cost the same per GB/s: designs differing only in them are one
    # row (the mapping column names per-dim factors, not blocks, so it does not split them).
    ties = [int(line.split(" | ")[3]) for line in md.splitlines() if line.startswith("| 1 |")]
    assert ties and min(ties) >= 2, md
    front = pd.read_csv(out / "pareto_front.csv")
    t, c = front["step_time_ns"].tolist(), front["network_cost_usd"].tolist()
    assert t == sorted(t) and c == sorted(c, reverse=True)
    # One call loads the whole scan; every design is dominated by (or on) the front.
    designs = pd.read_parquet(out / "chunks")
    assert designs["design_id"].tolist() == list(range(res.total_designs))
    assert list(designs.columns) == list(scan.COLUMNS)
    for rt, rc in zip(designs["step_time_ns"], designs["network_cost_usd"]):
        assert any(ft <= rt and fc <= rc for ft, fc in zip(t, c))
    # Every output file was written through a hidden temp file: none is left over.
    assert not [f for f in out.rglob(".*") if f.is_file()]


def test_csv_chunks_hold_the_same_numbers_as_parquet(tmp_path):
    cfg = _cfg()
    scan.run_scan(cfg, tmp_path / "pq", solver=FakeSolver())
    cfg.scan.format = "csv"
    scan.run_scan(cfg, tmp_path / "csv", solver=FakeSolver())
    a = [r for f in _chunk_files(tmp_path / "pq") for r in scan.read_chunk(f)]
    b = [r for f in _chunk_files(tmp_path / "csv", "csv") for r in scan.read_chunk(f)]
    assert a == b  # exact equality, floats included
    frame = pd.read_csv(_chunk_files(tmp_path / "csv", "csv")[0])
    assert frame["bandwidth_gbps"].map(json.loads)[0] == [100.0 / 3.0, 200.0 / 3.0]
    assert frame["step_time_ns"][0] == a[0]["step_time_ns"]


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_chunk_writes_are_hidden_until_complete_and_fsynced(tmp_path, monkeypatch, fmt):
    rows = scan.read_chunk(_chunk_files(_small_scan(tmp_path), "parquet")[0])
    out = tmp_path / "w"
    scan.write_chunk(rows, scan.chunk_path(out, 0, fmt), fmt)
    opened: dict = {}
    synced: list = []
    real_open, real_fsync = os.open, os.fsync

    def spy_open(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        opened[fd] = pathlib.Path(path)
        return fd

    def spy_fsync(fd):
        synced.append(opened.get(fd, fd))
        real_fsync(fd)

    monkeypatch.setattr(os, "open", spy_open)
    monkeypatch.setattr(os, "fsync", spy_fsync)
    seen_while_writing = []
    write = files.atomic_write

    def watched(path, fn):
        def fn_then_look(tmp):
            fn(tmp)
            assert tmp.name.startswith(".") and tmp.parent == path.parent
            names = sorted(p.name for p in path.parent.iterdir() if not p.name.startswith("."))
            seen_while_writing.append(names)
            if fmt == "parquet":  # a reader of the directory sees the finished chunk only
                assert len(pd.read_parquet(path.parent)) == len(rows)
        write(path, fn_then_look)

    monkeypatch.setattr(files, "atomic_write", watched)
    target = scan.chunk_path(out, 1, fmt)
    scan.write_chunk(rows, target, fmt)
    assert seen_while_writing == [[f"chunk_000000.{fmt}"]]
    assert synced[-1] == target.parent  # the directory, after the rename
    assert synced[-2].name.startswith(f".chunk_000001.{fmt}.tmp")  # the file, before it
    assert scan.read_chunk(target) == rows


def _small_scan(tmp_path) -> pathlib.Path:
    out = tmp_path / "small"
    if not (out / "pareto.png").exists():
        scan.run_scan(_cfg(), out, solver=FakeSolver())
    return out


@pytest.mark.parametrize("space", [
    dict(npus=64, max_dims=3, budgets_gbps=[100.0, 400.0]),  # two decades of cost
    dict(budgets_gbps=[100.0]),  # less than one decade: the default log axis labels minors
])
def test_pareto_plot_is_readable(tmp_path, space):
    """Figure API (no pyplot); x tick labels do not overlap; legends sit outside the axes."""
    had_pyplot = "matplotlib.pyplot" in sys.modules
    cfg = _cfg(**space)
    res = scan.run_scan(cfg, tmp_path / "s", solver=FakeSolver())
    chunks = _chunk_files(tmp_path / "s")
    summary, _ = scan.summarise(tmp_path / "s", chunks, ["GPT_3"], cfg.report)
    fig = scan.pareto_figure(summary, ["GPT_3", "GPT_3"], "time_x_cost", 4)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        legend = ax.get_legend().get_window_extent(renderer)
        assert not legend.overlaps(box), (legend, box)
        labels = [b for t in ax.get_xticklabels(which="both")
                  if t.get_visible() and t.get_text()
                  for b in [t.get_window_extent(renderer)]
                  if box.x0 <= (b.x0 + b.x1) / 2 <= box.x1]  # ticks inside the view
        assert len(labels) >= 2
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                assert not a.overlaps(b), (a, b)
    assert res.complete and (tmp_path / "s" / "pareto.png").stat().st_size > 0
    if not had_pyplot:
        assert "matplotlib.pyplot" not in sys.modules


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_only_on_a_terminal():
    log = io.StringIO()
    with progress_bar(100, True, log) as bar:
        bar.update(60)
    assert log.getvalue() == ""  # a log file gets no bar, no \r
    term = _Terminal()
    with progress_bar(100, True, term) as bar:
        bar.update(60)
    assert "60/100" in term.getvalue() and "\r" in term.getvalue()
    term = _Terminal()
    with progress_bar(100, False, term) as bar:  # scan.progress=false
        bar.update(60)
    assert term.getvalue() == ""


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


#: `_cli`'s 27-design space.
TINY_SCAN = ["space.npus=16", "space.max_dims=2", "space.budgets_gbps=[100]",
             "workloads=[{file: workload/GPT_3.txt, tp: 4}]", "scan.chunk_size=8",
             "scan.solve_chunk=8"]


def _cli(tmp_path, *overrides, multirun=False, cache=None) -> subprocess.CompletedProcess:
    """`python -m libra_jax.scan [-m]` on a 27-design space (run dir ``hydra/``, sweep dir
    ``sweep/``, compile cache ``cache`` or ``jax_cache/``); ``.pid``: the process's id
    (test_scan_shards uses it too)."""
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    cache = tmp_path / "jax_cache" if cache is None else cache
    with subprocess.Popen(
        [sys.executable, "-m", "libra_jax.scan", *["-m"] * multirun, *TINY_SCAN,
         f"hydra.run.dir={tmp_path / 'hydra'}", f"hydra.sweep.dir={tmp_path / 'sweep'}",
         f"compilation_cache_dir={cache}", *overrides],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    done.pid = proc.pid
    return done


@pytest.fixture(scope="session")
def tiny_reference(tmp_path_factory):
    """`_cli`'s scan run once, unsharded, for every test worker of the session (the launcher
    tests compare their merged shards with it): (its output dir, the compile cache it filled).
    The launchers' workers get that cache, so they load the kernel program, not compile it.
    xdist's workers share their base temp dir's parent; a lock lets the first one run it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # (this session's, shared by its workers)
    base = root / "tiny_reference"
    with open(root / "tiny_reference.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (base / "one" / "scan_summary.json").exists():
            base.mkdir(exist_ok=True)
            proc = _cli(base, f"scan.output_dir={base / 'one'}")
            assert proc.returncode == 0, proc.stderr
    return base / "one", base / "jax_cache"


def same_as_reference(out: pathlib.Path, one: pathlib.Path, rows: int = 27) -> None:
    """``out``'s merged scan equals the unsharded ``one`` byte for byte: top_k.md,
    pareto_front.csv and every row."""
    for name in ("top_k.md", "pareto_front.csv"):
        assert (out / name).read_bytes() == (one / name).read_bytes(), name
    a = pd.read_parquet(out / "chunks").sort_values("design_id", ignore_index=True)
    b = pd.read_parquet(one / "chunks").sort_values("design_id", ignore_index=True)
    assert len(a) == rows
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_cli_tiny_scan(tmp_path):
    out = tmp_path / "out"
    proc = _cli(tmp_path, f"scan.output_dir={out}")
    assert proc.returncode == 0, proc.stderr
    assert "| 1 | GPT_3 |" in proc.stdout  # the table on stdout
    assert "\r" not in proc.stderr and "\r" not in proc.stdout  # no bar: not a terminal
    log = (tmp_path / "hydra" / "scan.log").read_text()
    assert "designs: 27 in 4 chunks" in log and "designs/s" in log  # status in the job log
    for name in ("top_k.md", "pareto.png", "pareto_front.csv", "scan_manifest.json",
                 "scan_summary.json"):
        assert (out / name).exists(), name
    assert len(pd.read_parquet(out / "chunks")) == 27
    assert any((tmp_path / "jax_cache").iterdir())  # the compilation cache is on


def test_cli_bad_block_is_one_logged_error(tmp_path):
    proc = _cli(tmp_path, "space.blocks=[Ring,Swtich]", f"scan.output_dir={tmp_path / 'o'}")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    line = "error: space.blocks[1] = 'Swtich': unknown building block. Did you mean 'Switch'?"
    assert line in proc.stdout + proc.stderr
    assert line in (tmp_path / "hydra" / "scan.log").read_text()


def test_cli_typo_key_and_unquoted_override_are_errors(tmp_path):
    """A key the scan schema lacks is refused even with `+`, naming the closest key; an
    override Hydra cannot parse gets the quoting hint before Hydra runs."""
    proc = _cli(tmp_path, "+scan.chunk_sise=3", f"scan.output_dir={tmp_path / 'o'}")
    assert proc.returncode == 1
    assert "scan.chunk_sise=3: not a config key; did you mean scan.chunk_size?" in proc.stderr
    assert not (tmp_path / "o").exists()  # nothing ran
    proc = _cli(tmp_path, "workloads=[{file: workload/GPT_3.txt, tp: 4}", "scan.max_chunks=1")
    assert proc.returncode == 2
    assert "cannot parse the override" in proc.stderr and "quote the value" in proc.stderr
