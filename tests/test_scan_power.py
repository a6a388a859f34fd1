"""The scan with a technology catalogue (issue 19): network power and energy per step in the
rows, ``MaxGbps`` bounds and ``ReachM`` / ``space.span_m_by_npus`` skips counted by hand, the
3-objective Pareto front (against a brute-force filter), ``pareto.png``'s power panel, and
``pareto.html`` (self-contained; drawn by headless Chromium).

The catalogue is written here (not libra_jax/data/technologies.yaml), so the numbers below
are hand-checkable. Scans use a fake solver that honours the problems' upper bounds (no JAX,
milliseconds); one test runs the real solver on a few designs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pathlib
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from test_scan import _cfg

from libra_jax.solvers.batch import BatchResult, unstack
from libra_jax.studies import scan
from libra_jax.studies.scan import files, summary
from libra_jax.studies.scan import space as space_mod
from libra_jax.studies.scan.run import _fingerprint
from libra_jax.studies.scan.summary import Summary
from libra_jax.types import LibraInputError

# Copper: no Switch price, reaches 2 m, 400 GB/s; Optics: everything, 1 km, 150 GB/s;
# Board: dearer than Copper but uses less energy (so cost and power trade off), no Nic
# energy (counts 0), no ReachM, no MaxGbps (no limits).
CATALOGUE = {
    "Copper": {"Link": 2.0, "Energy": {"Link": 1.0}, "ReachM": 2, "MaxGbps": 400},
    "Optics": {"Link": 10.0, "Switch": 5.0, "Nic": 3.0,
               "Energy": {"Link": 5.0, "Switch": 3.0, "Nic": 2.0}, "ReachM": 1000,
               "MaxGbps": 150},
    "Board": {"Link": 3.0, "Switch": 2.0, "Energy": {"Link": 0.5, "Switch": 1.0}},
}
TIERS = [["Copper", "Optics"], ["Optics", "Optics"], ["Copper", "Copper"], ["Board", "Optics"]]
SPANS = {4: 1.0, 8: 3.0, 16: 10.0}  # NPUs enclosed -> m
BUDGETS = [100.0, 300.0, 500.0]
NPU_W = 700.0


def _write_catalogue(folder: pathlib.Path, table=None) -> str:
    import yaml

    path = folder / "catalogue.yaml"
    path.write_text(yaml.safe_dump(table or CATALOGUE))
    return str(path)


def _power_cfg(folder: pathlib.Path, **space) -> scan.ScanConfig:
    """16 NPUs in 2 dims (2x8, 4x4, 8x2), 3 blocks, the 4 tier options, 3 budgets."""
    s = dict(tier_options=TIERS, span_m_by_npus=SPANS, npu_w=NPU_W, budgets_gbps=BUDGETS)
    s.update(space)
    if "cost_model" not in s:
        s["cost_model"] = _write_catalogue(folder)
    return _cfg(**s)


def _waterfill(budget: float, share: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """bw = min(upper, lam * share) with sum(bw) == budget (budget <= sum(upper))."""
    free = np.ones(share.size, bool)
    while True:
        if not free.any():
            return upper.copy()
        lam = (budget - upper[~free].sum()) / share[free].sum()
        x = np.where(free, lam * share, upper)
        over = free & (x > upper)
        if not over.any():
            return x
        free &= ~over


class BoundedFakeSolver:
    """`solve_stacked` stand-in: the budget split 1 : 2 : ... : D, water-filled under each
    problem's upper bounds (so MaxGbps binds), step time in numpy. Records the bounds seen."""

    def __init__(self):
        self.calls = 0
        self.uppers: list = []

    def __call__(self, batches, chunk=None, dtype=None, tier=None, fixed_programs=False,
                 iteration_limit=True):
        self.calls += 1
        bws, steps = [], []
        for stacked in batches:
            for i in range(len(stacked.compute_s)):
                p = unstack(stacked, i)
                upper = np.asarray(p.upper, np.float64)
                self.uppers.append(upper)
                bw = _waterfill(float(p.total_bw_gbps), np.arange(1.0, p.num_dims + 1), upper)
                t = np.asarray(p.traffic_gb) / bw[None, :]
                steps.append((float(p.compute_s) + float(np.asarray(p.weight) @ t.max(axis=1)))
                             * 1e9)
                bws.append(bw)
        n = len(bws)
        return BatchResult(bws, np.array(steps), np.array(steps), np.zeros(n), np.zeros(n),
                           ["ok"] * n, np.zeros(n, int))


@pytest.fixture(scope="module")
def power_scan(tmp_path_factory):
    """The power scan, run once: (config, result, output dir, rows)."""
    folder = tmp_path_factory.mktemp("power")
    cfg = _power_cfg(folder)
    out = folder / "scan"
    res = scan.run_scan(cfg, out, solver=BoundedFakeSolver())
    rows = [r for f in sorted((out / "chunks").glob("chunk_*.parquet"))
            for r in scan.read_chunk(f)]
    return cfg, res, out, rows


# ------------------------------------------------------------------------- the rows


def _rate_by_hand(block: str, tier: str, npus: int) -> float:
    """W per GB/s of one dimension: N x 0.008 x pJ/bit (Switch dims: + Switch + Nic)."""
    e = CATALOGUE[tier]["Energy"]
    pj = e["Link"] + (e["Switch"] + e.get("Nic", 0.0) if block == "Switch" else 0.0)
    return npus * 8e9 * 1e-12 * pj


def test_power_columns_equal_the_formula_by_hand(power_scan):
    _, res, out, rows = power_scan
    assert res.complete and len(rows) == res.total_designs == 171
    cols = files.columns(True)
    assert tuple(pd.read_parquet(out / "chunks").columns) == cols
    assert cols[cols.index("time_x_cost") + 1:][:2] == ("network_power_w", "energy_per_step_j")
    for r in rows:
        bw = r["bandwidth_gbps"]
        rates = [_rate_by_hand(b, t, 16)
                 for b, t in zip(r["blocks"].split("-"), r["tiers"].split("-"))]
        power = sum(x * y for x, y in zip(rates, bw))
        assert r["network_power_w"] == pytest.approx(power, rel=1e-12)
        assert r["energy_per_step_j"] == pytest.approx(
            r["step_time_ns"] * 1e-9 * (16 * NPU_W + power), rel=1e-12)
    # One by hand in full: Ring-Switch on Copper-Optics, 2x8.
    r = next(r for r in rows if r["blocks"] == "Ring-Switch" and r["tiers"] == "Copper-Optics"
             and r["dims"] == "2x8" and r["budget_gbps"] == 100.0)
    b0, b1 = r["bandwidth_gbps"]
    assert r["network_power_w"] == pytest.approx(16 * 0.008 * (1.0 * b0 + (5 + 3 + 2) * b1))


def test_max_gbps_bounds_every_dimension_and_dedup_keeps_the_bounds(power_scan, tmp_path):
    cfg, _, _, rows = power_scan
    caps = {t: CATALOGUE[t].get("MaxGbps", np.inf) for t in CATALOGUE}
    bound = 0
    for r in rows:
        bw = np.array(r["bandwidth_gbps"])
        cap = np.array([caps[t] for t in r["tiers"].split("-")])
        assert np.all(bw <= cap * (1 + 1e-12)), r
        assert bw.sum() == pytest.approx(r["budget_gbps"], rel=1e-12)
        bound += bool(np.any(np.isclose(bw, cap)))
    assert bound > 0  # the bounds bind somewhere (e.g. Optics-Optics at 300: [150, 150])
    oo = [r for r in rows if r["tiers"] == "Optics-Optics" and r["budget_gbps"] == 300.0]
    assert oo and all(r["bandwidth_gbps"] == [150.0, 150.0] for r in oo)
    # Dedup solves each (shape, workload, mapping, budget, bounds) once: the same rows as
    # solving every design.
    cfg = dataclasses.replace(cfg, scan=dataclasses.replace(cfg.scan, dedup=False))
    scan.run_scan(cfg, tmp_path / "full", solver=BoundedFakeSolver())
    full = [r for f in sorted((tmp_path / "full" / "chunks").glob("*.parquet"))
            for r in scan.read_chunk(f)]
    assert full == rows


def test_the_solver_gets_the_tiers_max_gbps_as_upper_bounds(tmp_path):
    solver = BoundedFakeSolver()
    cfg = _power_cfg(tmp_path, budgets_gbps=[100.0], tier_options=[["Board", "Optics"]],
                     span_m_by_npus=None)
    cfg.scan.dedup = False
    scan.run_scan(cfg, tmp_path / "s", solver=solver)
    # Board has no MaxGbps (the total bounds it), Optics 150.
    assert solver.uppers and all(u.tolist() == [100.0, 100.0] for u in solver.uppers)
    cfg = _power_cfg(tmp_path, budgets_gbps=[200.0], tier_options=[["Board", "Optics"]],
                     span_m_by_npus=None)
    solver = BoundedFakeSolver()
    scan.run_scan(cfg, tmp_path / "t", solver=solver)
    assert all(u.tolist() == [200.0, 150.0] for u in solver.uppers)


def test_real_solver_honours_max_gbps(tmp_path):
    """The batched solver on 9 designs: every dimension within its tier's MaxGbps, the
    budget met; Optics-Optics at 300 GB/s can only be [150, 150] (the bounds' sum), and on
    2x8 Copper-Optics at 500 GB/s holds the Optics dimension at its 150 GB/s (at 300 GB/s
    the bound does not bind: the same split as without it)."""
    cfg = _power_cfg(tmp_path, blocks=["Ring"], budgets_gbps=[300.0, 500.0],
                     tier_options=[["Copper", "Optics"], ["Optics", "Optics"]],
                     span_m_by_npus=None)
    res = scan.run_scan(cfg, tmp_path / "s")
    rows = [r for f in sorted((tmp_path / "s" / "chunks").glob("*.parquet"))
            for r in scan.read_chunk(f)]
    assert res.total_designs == len(rows) == 9 and res.skipped["max_gbps_designs"] == 3
    caps = {"Copper": 400.0, "Optics": 150.0}
    for r in rows:
        assert r["status"] == "ok"
        assert sum(r["bandwidth_gbps"]) == pytest.approx(r["budget_gbps"], rel=1e-9)
        for bw, tier in zip(r["bandwidth_gbps"], r["tiers"].split("-")):
            assert bw <= caps[tier] * (1 + 1e-9)
    by = {(r["dims"], r["tiers"], r["budget_gbps"]): r["bandwidth_gbps"] for r in rows}
    for dims in ("2x8", "4x4", "8x2"):
        np.testing.assert_allclose(by[dims, "Optics-Optics", 300.0], [150, 150], rtol=1e-9)
    assert by["2x8", "Copper-Optics", 500.0][1] == pytest.approx(150.0, rel=1e-9)
    assert by["2x8", "Copper-Optics", 300.0][1] < 149.0


def _nested_loops(space):
    """Every design by plain loops, filtered in the counters' order (mapping, Switch price,
    reach, MaxGbps), with the skip counts."""
    cm = space.cost_model
    designs, skipped = [], space_mod.new_skip_counts(space)
    for d in space.dims:
        for shape in scan.enumerate_shapes(space.npus, d, space.min_dim_size):
            spans = [next(m for k, m in sorted(SPANS.items()) if k >= int(np.prod(shape[:i + 1])))
                     for i in range(d)]
            for wi, w in enumerate(space.workloads):
                for m, b, tiers, blocks in itertools.product(
                        space_mod.workload_placements(w, shape), space.budgets_gbps,
                        space.tier_options[d], itertools.product(space.blocks, repeat=d)):
                    if any(x == "Switch" and "Switch" not in cm.tiers[t]
                           for x, t in zip(blocks, tiers)):
                        skipped["switch_designs"] += 1
                    elif any(cm.reach_m.get(t, np.inf) < s for t, s in zip(tiers, spans)):
                        skipped["reach_designs"] += 1
                    elif sum(cm.max_gbps.get(t, np.inf) for t in tiers) < b:
                        skipped["max_gbps_designs"] += 1
                    else:
                        designs.append(scan.Design(len(designs), shape, blocks, tiers, b, wi,
                                                   m))
    return designs, skipped


def test_reach_and_max_gbps_skips_equal_a_hand_count(power_scan):
    cfg, res, out, _ = power_scan
    # Per budget and shape, the 4 tier options x 9 block pairs: Copper has no Switch price
    # (Copper-Optics keeps 6, Copper-Copper 4). Spans: 2x8 and 4x4 -> [1 m, 10 m]: Copper
    # (2 m) cannot be dim 1 -> Copper-Copper out; 8x2 -> [3 m, 10 m]: no Copper at all.
    # MaxGbps: Optics-Optics carries 300 GB/s, so not the 500 budget.
    switch = 3 * 3 * (3 + 5)  # shapes x budgets x (Copper-Optics, Copper-Copper)
    reach = 2 * 3 * 4 + 3 * (6 + 4)  # 2x8, 4x4: Copper-Copper; 8x2: both Copper options
    max_gbps = 3 * 9  # Optics-Optics at 500 GB/s on each shape
    designs = 3 * 3 * 4 * 9 - switch - reach - max_gbps
    assert (switch, reach, max_gbps, designs) == (72, 54, 27, 171)
    space = scan.make_space(cfg)
    total, skipped = scan.count_designs(space)
    assert total == designs == res.total_designs
    assert skipped == dict(space_mod.new_skip_counts(space), switch_designs=switch,
                           reach_designs=reach, max_gbps_designs=max_gbps)
    ref, ref_skipped = _nested_loops(space)
    assert list(scan.iter_designs(space)) == ref and ref_skipped == skipped
    for start, stop in ((0, 7), (40, 90), (100, None), (170, 171)):
        assert list(scan.iter_designs(space, start, stop)) == ref[start:stop]
    # Where the other skip counts are: the result, the manifest, scan_summary.json, the log.
    assert res.skipped == skipped
    for name in ("scan_manifest.json", "scan_summary.json"):
        assert json.loads((out / name).read_text())["skipped"] == skipped
    text = scan.describe(res)
    assert "skipped: 153 designs" in text
    assert "54 with a tier whose ReachM is below its dimension's span" in text
    assert "27 whose budget is above the sum of the tiers' MaxGbps" in text


def test_dim_spans_by_hand(tmp_path):
    space = scan.make_space(_power_cfg(tmp_path, span_m_by_npus={8: 0.05, 72: 2, 1024: 30,
                                                                   65536: 500}, npus=4096,
                                       max_dims=3, tier_options=None,
                                       tier_order=["Board", "Optics", "Optics"]))
    assert space_mod.dim_spans_m(space, (8, 8, 64)) == [0.05, 2, 500]  # 8, 64, 4096 NPUs
    assert space_mod.dim_spans_m(space, (4, 256, 4)) == [0.05, 30, 500]  # 4, 1024, 4096
    assert space_mod.dim_spans_m(dataclasses.replace(space, span_m_by_npus=None), (8, 512)) \
        is None


@pytest.mark.parametrize("value, message", [
    ({"8": 1.0, 16: 2.0}, r"space.span_m_by_npus: key '8' \(-> 1.0\): expected an NPU count"),
    ({0: 1.0, 16: 2.0}, r"space.span_m_by_npus: key 0 \(-> 1.0\): expected an NPU count"),
    ({True: 1.0, 16: 2.0}, r"space.span_m_by_npus: key True"),
    ({8: -1.0, 16: 2.0}, r"space.span_m_by_npus\[8\] = -1.0: expected a finite number > 0"),
    ({8: float("nan"), 16: 2.0}, r"space.span_m_by_npus\[8\] = nan"),
    ({8: "far", 16: 2.0}, r"space.span_m_by_npus\[8\] = 'far': expected a number"),
    ({8: 5.0, 16: 2.0}, r"16 NPUs span 2 m but 8 NPUs span 5 m"),
    ({4: 1.0, 8: 2.0}, r"the largest key is 8 NPUs, below space.npus = 16"),
    ([1.0, 2.0], r"space.span_m_by_npus = \[1.0, 2.0\]: expected a mapping"),
])
def test_bad_span_table_names_the_key_and_value(tmp_path, value, message):
    with pytest.raises(LibraInputError, match=message):
        scan.make_space(_power_cfg(tmp_path, span_m_by_npus=value))


def test_other_config_errors(tmp_path):
    with pytest.raises(LibraInputError, match=r"space.npu_w = -1.0: expected a finite number "
                                              r">= 0"):
        scan.make_space(_power_cfg(tmp_path, npu_w=-1.0))
    table = json.loads(json.dumps(CATALOGUE))
    del table["Board"]["Energy"]  # Board is scanned, others have Energy
    with pytest.raises(LibraInputError, match=r"tier 'Board' .* has no Energy.Link/Switch, but "
                                              r"other tiers give Energy"):
        scan.make_space(_power_cfg(tmp_path, cost_model=_write_catalogue(tmp_path, table)))
    table = json.loads(json.dumps(CATALOGUE))
    del table["Optics"]["Energy"]["Switch"]  # only a Switch design would need it
    with pytest.raises(LibraInputError, match=r"tier 'Optics' .* has no Energy.Switch"):
        scan.make_space(_power_cfg(tmp_path, cost_model=_write_catalogue(tmp_path, table)))
    scan.make_space(_power_cfg(tmp_path, cost_model=_write_catalogue(tmp_path, table),
                               blocks=["Ring", "FullyConnected"]))  # no Switch: fine


def test_hydra_takes_the_span_table_on_the_command_line():
    from hydra import compose, initialize_config_module

    import libra_jax.cli.scan  # noqa: F401  (registers the schema)
    from libra_jax.cli.runtime import typed_config

    with initialize_config_module("libra_jax.conf", version_base="1.3"):
        default = typed_config(compose("scan"), scan.ScanConfig)
        cfg = typed_config(compose("scan", overrides=[
            "space.span_m_by_npus={8: 0.05, 72: 2, 1024: 30, 65536: 500}",
            "space.npu_w=700", "report.html_points=10"]), scan.ScanConfig)
    assert (default.space.span_m_by_npus, default.space.npu_w) == (None, 0.0)
    assert cfg.space.span_m_by_npus == {8: 0.05, 72: 2, 1024: 30, 65536: 500}
    assert (cfg.space.npu_w, cfg.report.html_points) == (700.0, 10)


def test_libra_fingerprint_unchanged_catalogue_in_it(tmp_path):
    """A LIBRA cost model with the new keys at their defaults: the fingerprint is the one of
    scans started before them (no new keys), so they resume. With the catalogue, its figures
    and the new keys are part of it: a different npu_w or Energy is a different scan."""
    cfg = _cfg()
    fp = _fingerprint(cfg, scan.make_space(cfg), scan.Format.parquet)
    old = {f.name for f in dataclasses.fields(scan.SpaceConfig)} - {"npu_w", "span_m_by_npus"}
    assert set(fp["space"]) == old and "catalogue" not in fp
    pcfg = _power_cfg(tmp_path)
    fp = _fingerprint(pcfg, scan.make_space(pcfg), scan.Format.parquet)
    assert fp["space"]["span_m_by_npus"] == [[4, 1.0], [8, 3.0], [16, 10.0]]
    assert set(fp["catalogue"]) == {"energy", "reach_m", "max_gbps"}
    out = tmp_path / "scan"
    pcfg.scan.max_chunks = 1
    scan.run_scan(pcfg, out, solver=BoundedFakeSolver())
    with pytest.raises(LibraInputError, match=r"different scan \(changed: space\)"):
        scan.run_scan(_power_cfg(tmp_path, npu_w=100.0, cost_model=pcfg.space.cost_model),
                      out, solver=BoundedFakeSolver())
    table = json.loads(json.dumps(CATALOGUE))
    table["Optics"]["Energy"]["Link"] = 6.0
    _write_catalogue(tmp_path, table)  # the same file, other energies
    with pytest.raises(LibraInputError, match=r"different scan \(changed: catalogue\)"):
        scan.run_scan(pcfg, out, solver=BoundedFakeSolver())
    _write_catalogue(tmp_path)
    pcfg.scan.max_chunks = None
    res = scan.run_scan(pcfg, out, solver=BoundedFakeSolver())  # the same scan resumes
    assert res.complete and res.resumed == pcfg.scan.chunk_size


def test_csv_chunks_hold_the_power_columns(power_scan, tmp_path):
    cfg, _, _, rows = power_scan
    cfg = dataclasses.replace(cfg, scan=dataclasses.replace(cfg.scan, format="csv"))
    scan.run_scan(cfg, tmp_path / "csv", solver=BoundedFakeSolver())
    got = [r for f in sorted((tmp_path / "csv" / "chunks").glob("*.csv"))
           for r in scan.read_chunk(f)]
    assert got == rows  # exact, floats included
    head = (tmp_path / "csv" / "pareto_front.csv").read_text().splitlines()[0].split(",")
    assert tuple(head) == files.columns(True)


# ------------------------------------------------------------------------- the front


def _brute_front(t, c, p) -> list[int]:
    """O(n^2): i is dropped when some j is <= on all three and < on one, or equal on all
    three and earlier."""
    t, c, p = (np.asarray(x, np.float64) for x in (t, c, p))
    keep = []
    for i in range(t.size):
        le = (t <= t[i]) & (c <= c[i]) & (p <= p[i])
        eq = (t == t[i]) & (c == c[i]) & (p == p[i])
        beats = le & (~eq | (np.arange(t.size) < i))
        beats[i] = False
        if not beats.any():
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", range(6))
def test_pareto_front_3d_equals_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(0, 120))
        levels = int(rng.integers(1, 8))  # few levels: many ties and duplicates
        t, c, p = (rng.integers(0, levels, n).astype(float) for _ in range(3))
        got = scan.pareto_front_3d(t, c, p)
        assert sorted(got.tolist()) == _brute_front(t, c, p)
        # In increasing (time, cost, power).
        assert [(t[i], c[i], p[i]) for i in got] == sorted((t[i], c[i], p[i]) for i in got)
    x = rng.random((3, 500))  # continuous: no ties
    assert sorted(scan.pareto_front_3d(*x).tolist()) == _brute_front(*x)


def test_pareto_front_3d_edge_cases():
    assert scan.pareto_front_3d([], [], []).tolist() == []
    assert scan.pareto_front_3d([1.0], [2.0], [3.0]).tolist() == [0]
    assert scan.pareto_front_3d([1.0] * 5, [2.0] * 5, [3.0] * 5).tolist() == [0]  # first kept
    # Best on one objective each: all three kept; a fourth equal to one on two and worse on
    # the third is dropped.
    assert sorted(scan.pareto_front_3d([1, 2, 3, 1], [3, 1, 2, 3], [2, 3, 1, 2.5]).tolist()) \
        == [0, 1, 2]
    with pytest.raises(LibraInputError, match="3 times, 2 costs"):
        scan.pareto_front_3d([1, 2, 3], [1, 2], [1, 2, 3])


def test_pareto_front_3d_large_against_a_sweep():
    """200,000 points (a million take about a second): equal to a plain sweep in (time,
    cost, power) order that tests each point against the points kept so far."""
    rng = np.random.default_rng(7)
    n = 200_000
    t = rng.random(n)
    c = np.round(rng.random(n), 3)  # ties in cost
    p = np.round(0.5 * c + rng.random(n), 2)  # correlated, ties in power
    got = scan.pareto_front_3d(t, c, p)
    order = np.lexsort((p, c, t))
    kc, kp, ref = np.zeros(0), np.zeros(0), []
    for i in order:
        if not np.any((kc <= c[i]) & (kp <= p[i])):
            ref.append(i)
            kc, kp = np.append(kc, c[i]), np.append(kp, p[i])
    assert got.tolist() == ref


def test_front_csv_equals_a_brute_force_filter_of_the_rows(power_scan):
    _, _, out, rows = power_scan
    front = pd.read_csv(out / "pareto_front.csv")
    assert tuple(front.columns) == files.columns(True)
    t = [r["step_time_ns"] for r in rows]
    c = [r["network_cost_usd"] for r in rows]
    p = [r["network_power_w"] for r in rows]
    ids = sorted(rows[i]["design_id"] for i in _brute_front(t, c, p))
    assert sorted(front["design_id"]) == ids and len(ids) > 3
    # In increasing time (then cost, power); more designs than the 2-objective front.
    assert front["step_time_ns"].is_monotonic_increasing
    assert len(ids) > len(scan.pareto_front(t, c))


def test_summary_3d_fronts_do_not_depend_on_chunking(monkeypatch):
    """Fronts (per workload and per budget) and samples are the same in one call or in
    chunks of 7, with the refilter buffer small enough to flush many times."""
    monkeypatch.setattr(summary, "_FLUSH_ROWS", 5)
    rng = np.random.default_rng(2)
    rows = [{"design_id": i, "workload": "AB"[i % 3 == 0], "status": "ok", "dims": "4x4",
             "tiers": "t", "mapping": "m", "budget_gbps": [100.0, 200.0][i % 2],
             "step_time_ns": float(rng.integers(1, 12)),
             "network_cost_usd": float(rng.integers(1, 12)),
             "network_power_w": float(rng.integers(1, 12))} for i in range(400)]
    for r in rows:
        r["time_x_cost"] = r["step_time_ns"] * r["network_cost_usd"]
    whole, cut = (Summary("time_x_cost", top_k=3, sample=5) for _ in range(2))
    whole.add(rows)
    for i in range(0, len(rows), 7):
        cut.add(rows[i:i + 7])
    assert whole.power and cut.power
    assert whole.fronts == cut.fronts and whole.budget_fronts == cut.budget_fronts
    assert whole.points == cut.points and whole.top("A") == cut.top("A")
    for wl in "AB":
        mine = [r for r in rows if r["workload"] == wl]
        ref = [mine[i]["design_id"] for i in _brute_front(
            *([r[k] for r in mine] for k in ("step_time_ns", "network_cost_usd",
                                             "network_power_w")))]
        assert sorted(r["design_id"] for r in cut.fronts[wl]) == sorted(ref)
        assert cut.budgets(wl) == [100.0, 200.0]


# ------------------------------------------------------------------------- the plots


def test_png_has_a_power_row_and_stays_readable(power_scan):
    cfg, _, out, _ = power_scan
    chunks = sorted((out / "chunks").glob("*.parquet"))
    s = Summary("time_x_cost", 3, 100)
    for f in chunks:
        s.add(scan.read_chunk(f))
    fig = scan.pareto_figure(s, ["GPT_3", "GPT_3"], "time_x_cost", 4)
    assert len(fig.axes) == 4
    assert [ax.get_xlabel() for ax in fig.axes] == (
        ["network cost (million $, log scale)"] * 2 + ["network power (kW, log scale)"] * 2)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        assert not ax.get_legend().get_window_extent(renderer).overlaps(
            ax.get_window_extent(renderer))
    assert (out / "pareto.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_html_is_self_contained_with_a_menu_and_the_designs(power_scan):
    cfg, _, out, rows = power_scan
    html = (out / "pareto.html").read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\bsrc\s*=\s*[\"']?(https?:)?//", html, re.I)
    assert not re.search(r"<link[^>]*\bhref\s*=\s*[\"']?(https?:)?//", html, re.I)
    assert "Plotly.newPlot" in html
    assert len(html) > 1_000_000  # plotly.js itself is inlined
    html = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), html)  # JSON
    for label in ("GPT_3: all budgets", "GPT_3: 100 GB/s", "GPT_3: 300 GB/s",
                  "GPT_3: 500 GB/s"):
        assert f'"label":"{label}"' in html, label
    front = pd.read_csv(out / "pareto_front.csv")
    r = next(x for x in rows if x["design_id"] == int(front["design_id"][0]))
    for part in (f"design {r['design_id']}: {r['notation']}", f"shape {r['dims']}",
                 f"blocks {r['blocks']}", f"tiers {r['tiers']}", "GB/s", " ms", " M$", " kW"):
        assert part in html, part
    # Same scan, same bytes (fixed div id, seeded sample): here, against a rerun's summary.
    again = Summary("time_x_cost", 3, cfg.report.plot_points)
    for f in sorted((out / "chunks").glob("*.parquet")):
        again.add(scan.read_chunk(f))
    assert scan.pareto_html(again, ["GPT_3"], cfg.report.html_points) == (
        out / "pareto.html").read_text(encoding="utf-8")


def test_html_without_power_and_its_sample_cap(tmp_path):
    from test_scan import FakeSolver

    cfg = _cfg()
    cfg.report.html_points = 10
    scan.run_scan(cfg, tmp_path / "s", solver=FakeSolver())
    html = (tmp_path / "s" / "pareto.html").read_text(encoding="utf-8")
    assert "network power" not in html and "step time vs network cost" in html
    assert html.count("(sample)") >= 1 and "54 designs, 10 drawn" in html
    assert tuple(pd.read_csv(tmp_path / "s" / "pareto_front.csv").columns) == scan.COLUMNS


def test_shards_merge_into_the_unsharded_front_and_page(power_scan, tmp_path):
    cfg, _, out, _ = power_scan
    for i in range(3):
        c = dataclasses.replace(cfg, scan=dataclasses.replace(
            cfg.scan, shard_index=i, num_shards=3))
        scan.run_scan(c, tmp_path / "sh", solver=BoundedFakeSolver())
    merged = scan.merge_scan(tmp_path / "sh", cfg.report)
    assert merged.skipped["reach_designs"] == 54
    for name in ("top_k.md", "pareto_front.csv", "pareto.html"):
        assert (tmp_path / "sh" / name).read_bytes() == (out / name).read_bytes(), name


def _browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_headless_chromium_draws_the_page(power_scan, tmp_path):
    """The page renders offline: plotly's SVG with one marker per point of the first view
    (every sampled design and the all-budget front, in both panels)."""
    browser = _browser()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run tries "
                    "to): cannot check that pareto.html draws")
    cfg, _, out, rows = power_scan
    try:
        proc = subprocess.run(
            [browser, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000",
             "--dump-dom", (out / "pareto.html").as_uri()],
            capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish within 180 s")
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'class="main-svg"' in dom and "scatterlayer" in dom
    assert "updatemenu" in dom  # the workload / budget menu
    front = len(pd.read_csv(out / "pareto_front.csv"))
    sample = min(len(rows), cfg.report.plot_points, cfg.report.html_points)
    assert dom.count('class="point"') == 2 * (sample + front)
