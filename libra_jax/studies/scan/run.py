"""The scan's run loop: validate, check the resume manifest, solve missing chunks, summarise."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import pathlib
import sys
import time
from collections.abc import Callable
from typing import Any

from tqdm.auto import tqdm

from libra_jax.studies.scan.config import Dtype, Format, RankBy, ScanConfig, choice
from libra_jax.studies.scan.files import (
    MANIFEST,
    check_format,
    chunk_path,
    remove_stale_temps,
    write_chunk,
    write_text,
)
from libra_jax.studies.scan.problems import ChunkBuilder, solve_designs
from libra_jax.studies.scan.space import (
    ScanSpace,
    chunked,
    count_designs,
    iter_designs,
    make_space,
)
from libra_jax.studies.scan.summary import summarise
from libra_jax.types import LibraInputError

log = logging.getLogger(__name__)


def _fingerprint(cfg: ScanConfig, space: ScanSpace, fmt: Format) -> dict:
    """What must not change between a run and its resume (enumeration, chunking, format)."""
    return {
        "space": dataclasses.asdict(cfg.space),
        "cost_model": space.cost_model.tiers,
        "workloads": [dataclasses.asdict(w) for w in cfg.workloads],
        "chunk_size": cfg.scan.chunk_size,
        "format": fmt.value,
    }


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def _check_manifest(path: pathlib.Path, fp: dict) -> None:
    """Refuses an output_dir that holds another scan, naming what differs."""
    if not path.exists():
        return
    old = json.loads(path.read_text(encoding="utf-8"))
    if old.get("fingerprint_sha256") == _sha(fp):
        return
    before = old.get("fingerprint", {})
    changed = [f"{k} ({before.get(k)!r} there, {fp[k]!r} now)" if k in ("chunk_size", "format")
               else k for k in fp if _sha(before.get(k)) != _sha(fp[k])]
    raise LibraInputError(
        f"{path.parent} holds chunks of a different scan (changed: "
        f"{', '.join(changed) or 'the fingerprint'}); use a new scan.output_dir, rerun with "
        "the settings of that scan, or delete that directory."
    )


@dataclasses.dataclass
class ScanResult:
    output_dir: pathlib.Path
    total_designs: int
    skipped: dict
    computed: int  # designs solved by this run
    resumed: int  # designs found in existing chunk files
    chunks: int
    complete: bool
    seconds: float
    timings: dict
    format: Format = Format.parquet
    top_k_markdown: str | None = None

    @property
    def designs_per_s(self) -> float:
        return self.computed / self.seconds if self.seconds > 0 else 0.0


def progress_bar(total: int, enabled: bool, stream=None) -> tqdm:
    """A tqdm bar of designs on ``stream`` (stderr), off unless it is a terminal."""
    stream = sys.stderr if stream is None else stream
    quiet = not enabled or not (hasattr(stream, "isatty") and stream.isatty())
    return tqdm(total=total, unit="design", desc="scan", file=stream,
                disable=quiet, dynamic_ncols=True, smoothing=0.1)


def run_scan(cfg: ScanConfig, output_dir: str | os.PathLike, *,
             solver: Callable | None = None) -> ScanResult:
    """Runs (or resumes) a scan into ``output_dir``; summarises when every chunk exists.

    Args:
      cfg: the scan config (`ScanConfig`).
      output_dir: where chunks and the summary go; reuse it to resume.
      solver: `batch.solve_stacked`-compatible function (default `batch.solve_stacked`).

    Raises:
      LibraInputError: bad config, or an output_dir holding a different scan.
    """
    start = time.perf_counter()
    r = cfg.scan
    if r.chunk_size < 1 or (r.solve_chunk is not None and r.solve_chunk < 1):
        raise LibraInputError(
            f"scan.chunk_size = {r.chunk_size}, scan.solve_chunk = {r.solve_chunk}: both must "
            "be >= 1 (solve_chunk may be null)."
        )
    dtype = choice(Dtype, r.dtype, "scan.dtype")
    fmt = choice(Format, r.format, "scan.format")
    choice(RankBy, cfg.report.rank_by, "report.rank_by")
    check_format(fmt)
    space = make_space(cfg)
    names = [w.name for w in space.workloads]
    if len(set(names)) != len(names):
        raise LibraInputError(f"workloads: names {names} repeat; give each a distinct name.")
    out = pathlib.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    fp = _fingerprint(cfg, space, fmt)
    _check_manifest(out / MANIFEST, fp)
    total, skipped = count_designs(space)
    n_chunks = -(-total // r.chunk_size)
    write_text(out / MANIFEST, json.dumps({
        "fingerprint_sha256": _sha(fp), "fingerprint": fp, "total_designs": total,
        "chunks": n_chunks, "skipped": skipped}, indent=1, default=str))
    stale = remove_stale_temps(out / "chunks")  # left by a killed run: recomputed below
    log.info("scan: %s designs in %d chunks into %s (%s%s)", f"{total:,}", n_chunks, out,
             fmt.value, f"; removed {stale} unfinished temp files" if stale else "")

    builder = ChunkBuilder(space)
    timings: dict = {}
    computed = resumed = done_now = 0
    t_loop = time.perf_counter()
    with progress_bar(total, r.progress) as bar:
        for ci, chunk in enumerate(chunked(iter_designs(space), r.chunk_size)):
            path = chunk_path(out, ci, fmt)
            if path.exists():
                resumed += len(chunk)
                bar.update(len(chunk))
                continue
            if r.max_chunks is not None and done_now >= r.max_chunks:
                break
            rows = solve_designs(chunk, space, dedup=r.dedup, solve_chunk=r.solve_chunk,
                                 dtype=dtype.value, solver=solver, builder=builder,
                                 timings=timings)
            t = time.perf_counter()
            write_chunk(rows, path, fmt)
            timings["write"] = timings.get("write", 0.0) + time.perf_counter() - t
            computed += len(chunk)
            done_now += 1
            bar.update(len(chunk))
            bar.set_postfix_str(f"{resumed:,} from files", refresh=False)
    loop_s = time.perf_counter() - t_loop
    files = [chunk_path(out, i, fmt) for i in range(n_chunks)]
    complete = all(f.exists() for f in files)
    md = None
    status_counts = None
    if complete:
        t = time.perf_counter()
        max_ties = len(space.blocks) ** max(space.dims)  # block choices of one shape
        summ, md = summarise(out, files, names, cfg.report, max_ties)
        status_counts = summ.status
        timings["summary"] = time.perf_counter() - t
    result = ScanResult(out, total, skipped, computed, resumed, n_chunks, complete,
                        loop_s, timings, fmt, md)
    write_text(out / "scan_summary.json", json.dumps({
        "total_designs": total, "skipped": skipped, "chunks": n_chunks,
        "computed_this_run": computed, "resumed_from_files": resumed, "complete": complete,
        "loop_seconds": loop_s, "designs_per_s": result.designs_per_s,
        "wall_seconds": time.perf_counter() - start, "timings_s": timings,
        "status_counts": status_counts}, indent=1))
    return result


def describe(result: ScanResult) -> str:
    """The run's status: counts, skips, timings (the CLI logs it)."""
    s = result.skipped
    shapes = ", ".join(f"{k}: {v}" for k, v in s["mapping_shapes"].items())
    t = result.timings
    lines = [
        f"designs: {result.total_designs:,} in {result.chunks} chunks "
        f"(computed now {result.computed:,}, found on disk {result.resumed:,})",
        f"skipped: {s['mapping_designs'] + s['switch_designs']:,} designs "
        f"({s['mapping_designs']:,} whose shape the TP/DP mapping cannot fit, shapes per "
        f"workload: {shapes}; {s['switch_designs']:,} with a Switch on a tier without a "
        "Switch price)",
        f"time: {result.seconds:.1f} s, {result.designs_per_s:,.0f} designs/s "
        f"(build {t.get('build', 0.0):.1f} s, solve {t.get('solve', 0.0):.1f} s, write "
        f"{t.get('write', 0.0):.1f} s, summary {t.get('summary', 0.0):.1f} s)",
    ]
    if not result.complete:
        lines.append(f"stopped early (scan.max_chunks); rerun with "
                     f"scan.output_dir={result.output_dir} to resume.")
    return "\n".join(lines)


def outputs_text(result: ScanResult) -> str:
    """The top-k table and where the outputs are (the CLI prints it on stdout)."""
    out = result.output_dir
    return "\n".join([result.top_k_markdown or "", f"table: {out / 'top_k.md'}",
                      f"plot: {out / 'pareto.png'}",
                      f"Pareto fronts: {out / 'pareto_front.csv'}",
                      f"all designs: pandas.read_parquet('{out / 'chunks'}')"
                      if result.format == Format.parquet
                      else f"all designs: {out / 'chunks'}/chunk_*.csv"])
