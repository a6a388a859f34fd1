"""Sharded scans (`libra_jax.studies.scan.shards`): the split, each shard's files and resume,
the merge and its refusals, and 3 shards run by Hydra's joblib launcher merging into the
bytes of one unsharded run.

The machinery tests use test_scan's fake solver (milliseconds); the launcher test runs the
real solver in subprocesses (`python -m libra_jax.scan -m ... hydra/launcher=libra_joblib`).
"""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from test_scan import (  # noqa: F401  (tiny_reference: a fixture)
    FakeSolver,
    _cfg,
    _cli,
    same_as_reference,
    tiny_reference,
)

from libra_jax.solvers import batch_plan
from libra_jax.studies import scan
from libra_jax.studies.scan.files import read_json
from libra_jax.studies.scan.summary import Summary
from libra_jax.types import LibraInputError

# --------------------------------------------------------------------------- the split


@pytest.mark.parametrize("total", [0, 1, 2, 7, 54, 1000, 10**9 + 7])
@pytest.mark.parametrize("count", [1, 2, 3, 8, 13])
def test_every_design_in_exactly_one_shard_balanced(total, count):
    bounds = [scan.Shard(i, count).bounds(total) for i in range(count)]
    assert bounds[0][0] == 0 and bounds[-1][1] == total
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous, no overlap
    sizes = [stop - first for first, stop in bounds]
    assert min(sizes) >= 0 and max(sizes) - min(sizes) <= 1  # within one design


def test_shard_names_are_distinct_and_sort_by_index():
    tags = [scan.Shard(i, 12).tag for i in range(12)]
    assert tags[:2] == ["s00of12", "s01of12"] and sorted(tags) == tags
    assert scan.Shard().tag == "" and scan.Shard(2, 3).tag == "s2of3"
    names = [scan.Shard(i, 12).chunk_path("d", 0, "csv").name for i in range(12)]
    assert len(set(names)) == 12 and names[3] == "chunk_s03of12_000000.csv"
    assert scan.Shard().chunk_path("d", 5, "parquet").name == "chunk_000005.parquet"


@pytest.mark.parametrize("index, count, message", [
    (3, 3, "scan.shard_index = 3: must be in 0..2 (scan.num_shards = 3)"),
    (-1, 3, "scan.shard_index = -1: must be in 0..2"),
    (0, 0, "scan.num_shards = 0: must be >= 1"),
    (True, 2, "scan.shard_index = True: expected an integer"),
    (0, "2", "scan.num_shards = '2': expected an integer"),
])
def test_bad_shard_keys_name_key_and_value(tmp_path, index, count, message):
    cfg = _cfg()
    cfg.scan.shard_index, cfg.scan.num_shards = index, count
    with pytest.raises(LibraInputError, match=message.replace("(", "\\(").replace(")", "\\)")):
        scan.run_scan(cfg, tmp_path, solver=FakeSolver())
    assert not any(tmp_path.iterdir())  # refused before writing


def _run(out, index=0, count=1, chunk_size=8, solver=None, **run):
    """A shard of test_scan's tiny space (54 designs) with the fake solver."""
    cfg = _cfg()
    cfg.scan.shard_index, cfg.scan.num_shards, cfg.scan.chunk_size = index, count, chunk_size
    for k, v in run.items():
        setattr(cfg.scan, k, v)
    return scan.run_scan(cfg, out, solver=solver or FakeSolver())


def _ids(files) -> list[int]:
    return [r["design_id"] for f in files for r in scan.read_chunk(f)]


def _shard_files(out, tag):
    return sorted((out / "chunks").glob(f"chunk_{tag}_*.parquet"))


def test_split_does_not_depend_on_chunk_size(tmp_path):
    per_size = {}
    for cs in (5, 8, 100):
        out = tmp_path / f"cs{cs}"
        per_size[cs] = [_ids(_shard_files(out, _run(out, i, 4, cs).shard.tag))
                        for i in range(4)]
        assert sorted(sum(per_size[cs], [])) == list(range(54))  # each design once
        for i, ids in enumerate(per_size[cs]):  # chunks: at most one short one, at the end
            sizes = [len(scan.read_chunk(f)) for f in _shard_files(out, f"s{i}of4")]
            assert all(s == cs for s in sizes[:-1]) and 0 < sizes[-1] <= cs
    assert per_size[5] == per_size[8] == per_size[100]
    assert [len(ids) for ids in per_size[8]] == [13, 14, 13, 14]


def test_summary_does_not_depend_on_chunking():
    """Top-k, fronts and the plot's reservoir samples of two interleaved workloads are the
    same whether their rows come in one chunk or in chunks of 7 (the shards' cut)."""
    rng = np.random.default_rng(1)
    rows = [{"design_id": i, "workload": "AB"[i % 3 == 0], "status": "ok", "dims": "4x4",
             "tiers": "t", "mapping": "m", "budget_gbps": 100.0, "step_time_ns": float(rng.integers(1, 40)),
             "network_cost_usd": float(rng.integers(1, 40))} for i in range(300)]
    for r in rows:
        r["time_x_cost"] = r["step_time_ns"] * r["network_cost_usd"]
    whole, cut = (Summary("time_x_cost", top_k=3, sample=5) for _ in range(2))
    whole.add(rows)
    for i in range(0, len(rows), 7):
        cut.add(rows[i:i + 7])
    assert whole.points == cut.points and len(whole.points["A"]) == 5
    assert whole.fronts == cut.fronts and whole.top("A") == cut.top("A")


# ------------------------------------------------------------- resume, merge, refusals


def _stat(files) -> dict:
    return {f.name: (f.stat().st_ino, f.stat().st_mtime_ns) for f in files}


def test_killed_shard_reruns_only_its_missing_chunks_then_merges(tmp_path):
    out = tmp_path / "out"
    _run(out, 0, 3)
    killed = _run(out, 1, 3, max_chunks=1)  # stopped after 1 of its 3 chunks
    assert not killed.complete and not (out / "shards" / "s1of3_done.json").exists()
    _run(out, 2, 3)
    # The other shards' temp files survive a shard's start (they may be writing them).
    other_tmp = out / "chunks" / ".chunk_s0of3_000009.parquet.tmp99"
    other_tmp.write_text("another shard writing")
    (out / "chunks" / ".chunk_s1of3_000001.parquet.tmp98").write_text("killed")
    with pytest.raises(LibraInputError, match=r"cannot merge .*: 1 of 3 shards are not "
                       r"complete: s1of3 \(1 of 3 chunks, no completion record\)\. Run them "
                       r"\(they resume\) .* scan.num_shards=3 scan.shard_index=I"):
        scan.merge_scan(out, _cfg().report)
    others = _stat(_shard_files(out, "s0of3") + _shard_files(out, "s2of3"))
    first = _stat(_shard_files(out, "s1of3"))

    solver = FakeSolver()
    rerun = _run(out, 1, 3, solver=solver)
    assert rerun.complete and (rerun.computed, rerun.resumed) == (10, 8)
    assert solver.calls == 2 and solver.problems <= 10  # only the 2 missing chunks
    assert _stat(_shard_files(out, "s0of3") + _shard_files(out, "s2of3")) == others
    assert {k: v for k, v in _stat(_shard_files(out, "s1of3")).items() if k in first} == first
    assert other_tmp.exists() and not list((out / "chunks").glob(".chunk_s1of3_*"))
    other_tmp.unlink()

    # A lost chunk file of a finished shard: refused, then recomputed alone.
    lost = _shard_files(out, "s2of3")[1]
    lost.unlink()
    with pytest.raises(LibraInputError, match=r"s2of3 \(2 of 3 chunks\)\. Run them"):
        scan.merge_scan(out, _cfg().report)
    others = _stat(_shard_files(out, "s0of3") + _shard_files(out, "s1of3"))
    solver = FakeSolver()
    assert _run(out, 2, 3, solver=solver).computed == 8 and solver.calls == 1
    assert _stat(_shard_files(out, "s0of3") + _shard_files(out, "s1of3")) == others

    merged = scan.merge_scan(out, _cfg().report)
    one = tmp_path / "one"
    _run(one)
    assert merged.complete and merged.total_designs == 54 and merged.chunks == 9
    for name in ("top_k.md", "pareto_front.csv"):
        assert (out / name).read_bytes() == (one / name).read_bytes(), name
    a = pd.read_parquet(out / "chunks").sort_values("design_id", ignore_index=True)
    b = pd.read_parquet(one / "chunks").sort_values("design_id", ignore_index=True)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    summary = read_json(out / "scan_summary.json")
    assert summary["merged_shards"] == 3 and summary["status_counts"] == {"ok": 54}
    assert [s["shard"] for s in summary["shards"]] == ["s0of3", "s1of3", "s2of3"]
    assert "merged 3 shards: 54 designs in 9 chunks" in scan.describe(merged)


def test_merge_refuses_missing_shards_and_other_scans(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(LibraInputError, match="no shard manifests"):
        scan.merge_scan(out, _cfg().report)
    _run(tmp_path / "plain")
    with pytest.raises(LibraInputError, match="it holds an unsharded scan"):
        scan.merge_scan(tmp_path / "plain", _cfg().report)

    _run(out, 0, 3)
    _run(out, 1, 3)
    with pytest.raises(LibraInputError, match=r"1 of 3 shards are not complete: s2of3 "
                                              r"\(never started: no manifest\)"):
        scan.merge_scan(out, _cfg().report)

    # Shard 2 of another scan (another budget): refused at its start in this directory ...
    cfg = _cfg(budgets_gbps=[100.0, 300.0])
    cfg.scan.shard_index, cfg.scan.num_shards = 2, 3
    with pytest.raises(LibraInputError, match=r"holds chunks of a different scan \(changed: "
                       r"space\), recorded in shards/s0of3_manifest.json"):
        scan.run_scan(cfg, out, solver=FakeSolver())
    # ... and, run elsewhere and copied in (shards gathered from machines), at the merge.
    scan.run_scan(cfg, tmp_path / "elsewhere", solver=FakeSolver())
    for sub in ("chunks", "shards"):
        shutil.copytree(tmp_path / "elsewhere" / sub, out / sub, dirs_exist_ok=True)
    with pytest.raises(LibraInputError, match=r"cannot merge .*: its shards belong to "
                       r"different scans: against s0of3_manifest.json, s2of3_manifest.json "
                       r"\(changed: space\)"):
        scan.merge_scan(out, _cfg().report)
    assert not (out / "top_k.md").exists()

    # One directory holds one split.
    with pytest.raises(LibraInputError, match=r"scan.num_shards = 2, but .* split into 3 "
                                              r"shard\(s\), recorded in shards/s0of3"):
        _run(out, 0, 2)
    with pytest.raises(LibraInputError, match=r"scan.num_shards = 1, but .* split into 3"):
        _run(out)


# ------------------------------------------ the real solver: results do not depend on the split


def _real(monkeypatch, out, count=1, chunk_size=2048, **run):
    """MSFT-1T (tp 128) on the 165 4-dim Ring shapes of 4,096 NPUs at 1,000 GB/s (512x2x2x2
    among them: its bandwidths came out in other last digits from a call of 16 problems than
    from one of 256 or 1024), solved by the real engine, every shard in turn as if in a fresh
    process (the engine's record of the programs it ran, which its planner reads, emptied),
    then merged."""
    cfg = _cfg(npus=4096, min_dims=4, max_dims=4, blocks=["Ring"], budgets_gbps=[1000.0])
    cfg.workloads = [scan.ScanWorkloadConfig(file="workload/MSFT_1T.txt", tp=128)]
    cfg.scan.chunk_size, cfg.scan.solve_chunk = chunk_size, None
    for k, v in run.items():
        setattr(cfg.scan, k, v)
    cfg.scan.num_shards = count
    for i in range(count):
        cfg.scan.shard_index = i
        monkeypatch.setattr(batch_plan, "COMPILED", set())  # (each shard as a fresh process,
        monkeypatch.setattr(batch_plan.STORE, "notes", lambda: ())  # with an empty store)
        scan.run_scan(cfg, out)
    if count > 1:
        scan.merge_scan(out, cfg.report)
    return pd.read_parquet(out / "chunks").sort_values("design_id", ignore_index=True)


@pytest.mark.parametrize("dedup, splits", [
    (True, ((1, 7), (3, 7), (8, 7))),
    (False, ((3, 50), (8, 7))),
])
def test_results_do_not_depend_on_shard_count_or_chunk_size(tmp_path, monkeypatch, dedup,
                                                            splits):
    """Unsharded in one chunk of 165 designs, then 1, 3 and 8 shards in chunks of 7 (and 3
    in chunks of 50): the same rows, pareto_front.csv and top_k.md byte for byte. A scan
    solves with fixed programs (`problems.program_size`: calls of 16 with dedup, of 256
    without; no bucket merging), so no design goes through another compiled program when its
    chunk holds fewer problems or the process compiled others first (the engine's own plan
    ran the chunks of 7 in calls of 16 and the whole scan in calls of 256: 512x2x2x2 and
    other designs differed in their last digits)."""
    one = _real(monkeypatch, tmp_path / "one", dedup=dedup)
    assert len(one) == 165 and (one.status == "ok").all()
    assert "512x2x2x2" in set(one.dims)
    for count, chunk_size in splits:
        out = tmp_path / f"s{count}c{chunk_size}"
        rows = _real(monkeypatch, out, count, chunk_size, dedup=dedup)
        pd.testing.assert_frame_equal(rows, one, check_exact=True)
        for name in ("pareto_front.csv", "top_k.md"):
            assert (out / name).read_bytes() == (tmp_path / "one" / name).read_bytes(), (
                count, chunk_size, name)


def test_program_size_follows_the_ladder():
    from libra_jax.studies.scan.problems import program_size

    assert program_size(None, True) == 16 and program_size(None, False) == 256  # CPU
    assert [program_size(n, True) for n in (1, 16, 255, 256, 1000, 1024, 70000)] == [
        16, 16, 16, 256, 256, 1024, 65536]


def test_a_scan_asks_the_engine_for_fixed_programs(tmp_path):
    solver = FakeSolver()
    _run(tmp_path, solve_chunk=300, dedup=False, solver=solver)
    assert solver.kwargs == [{"chunk": 256, "dtype": np.dtype("float64"), "tier": "full",
                              "fixed_programs": True, "iteration_limit": False}] * len(
                                  solver.kwargs)
    assert solver.kwargs


# ------------------------------------------------------- Hydra launchers, the command


def test_three_shards_by_joblib_merge_into_the_unsharded_bytes(tmp_path, tiny_reference):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    one, cache = tiny_reference
    out = tmp_path / "sharded"
    proc = _cli(tmp_path, "scan.num_shards=3", "scan.shard_index=range(0,3)",
                f"scan.output_dir={out}", "hydra/launcher=libra_joblib", multirun=True,
                cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert "Joblib.Parallel(n_jobs=3,backend=loky" in proc.stdout + proc.stderr
    assert not (out / "top_k.md").exists()  # no shard summarises
    done = [read_json(out / "shards" / f"s{i}of3_done.json") for i in range(3)]
    assert [d["computed_this_run"] for d in done] == [9, 9, 9]
    assert proc.pid not in {d["pid"] for d in done}  # in joblib's workers, not the launcher
    log = (tmp_path / "sweep" / "1" / "scan.log").read_text()
    assert "shard 1 of 3: designs 9..17 of 27 in 2 chunks" in log

    proc = _cli(tmp_path, "scan.merge=true", f"scan.output_dir={out}", cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert "| 1 | GPT_3 |" in proc.stdout
    assert (out / "pareto.png").exists()
    same_as_reference(out, one)


@pytest.mark.slow
def test_eight_shards_by_joblib_equal_the_unsharded_run(tmp_path):
    """`_real`'s 165 MSFT-1T designs as 8 shards in chunks of 7, each in a loky worker, merged
    equal byte for byte to one unsharded chunk. Slow (8 processes that each import JAX): the
    default suite's version is test_results_do_not_depend_on_shard_count_or_chunk_size (the
    shards in this process, each with the engine's compile record emptied)."""
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher")
    space = ["space.npus=4096", "space.min_dims=4", "space.max_dims=4", "space.blocks=[Ring]",
             "space.budgets_gbps=[1000]", "workloads=[{file: workload/MSFT_1T.txt, tp: 128}]",
             "scan.solve_chunk=null"]
    one, out = tmp_path / "one", tmp_path / "sharded"
    proc = _cli(tmp_path, *space, "scan.chunk_size=2048", f"scan.output_dir={one}")
    assert proc.returncode == 0, proc.stderr
    proc = _cli(tmp_path, *space, "scan.chunk_size=7", "scan.num_shards=8",
                "scan.shard_index=range(0,8)", f"scan.output_dir={out}",
                "hydra/launcher=libra_joblib", multirun=True)
    assert proc.returncode == 0, proc.stderr
    assert len({read_json(out / "shards" / f"s{i}of8_done.json")["pid"]
                for i in range(8)}) == 8
    proc = _cli(tmp_path, *space, "scan.merge=true", f"scan.output_dir={out}")
    assert proc.returncode == 0, proc.stderr
    same_as_reference(out, one, rows=165)


def test_shards_and_merge_need_one_output_dir(tmp_path):
    for key in ("scan.num_shards=2", "scan.merge=true"):
        proc = _cli(tmp_path, key)
        assert proc.returncode == 1
        assert f"error: {key.replace('=', ' = ')} needs scan.output_dir" in proc.stderr


@pytest.mark.parametrize("launcher, plugin, key, value", [
    ("libra_joblib", "hydra_joblib_launcher", "backend", "loky"),
    ("libra_slurm", "hydra_submitit_launcher", "gpus_per_node", 0),
    ("libra_ray", "hydra_ray_launcher", "ray", {
        "init": {"address": "auto", "object_store_memory": None},
        "remote": {"num_gpus": 0, "num_cpus": "auto", "max_calls": 1, "max_retries": 0}}),
])
def test_launcher_configs_compose(launcher, plugin, key, value):
    """The shipped launcher configs extend their plugin's schema (composed, not launched:
    SLURM and Ray need their plugins and a cluster)."""
    pytest.importorskip(f"hydra_plugins.{plugin}")
    import libra_jax.cli.scan  # noqa: F401  (registers the scan schema)

    with initialize_config_module("libra_jax.conf", version_base="1.3"):
        cfg = compose("scan", overrides=[f"hydra/launcher={launcher}", "scan.num_shards=5"],
                      return_hydra_config=True)
    launcher_cfg = OmegaConf.to_container(cfg.hydra.launcher)
    assert launcher_cfg[key] == value
    parallel = {"libra_joblib": "n_jobs", "libra_slurm": "array_parallelism"}.get(launcher)
    if parallel:
        assert cfg.hydra.launcher[parallel] == 5  # every shard at once
