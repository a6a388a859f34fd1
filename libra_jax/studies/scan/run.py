"""The scan's run loop: validate, check the resume manifest, solve missing chunks, summarise
(an unsharded run) or record the shard as done (a shard, `shards.Shard`); `merge_scan`
summarises the finished shards of a sharded scan."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import resource
import socket
import sys
import time
from collections.abc import Callable

from tqdm.auto import tqdm

from libra_jax.studies.scan.config import (
    Dtype,
    Format,
    RankBy,
    ReportConfig,
    RunConfig,
    ScanConfig,
    choice,
)
from libra_jax.studies.scan.files import (
    check_format,
    chunk_prefix,
    fingerprint_sha,
    remove_stale_temps,
    write_chunk,
    write_text,
)
from libra_jax.studies.scan.problems import ChunkBuilder, solve_designs
from libra_jax.studies.scan.shards import Shard, check_same_scan, check_shard_set
from libra_jax.studies.scan.space import (
    ScanSpace,
    chunked,
    count_designs,
    iter_designs,
    make_space,
)
from libra_jax.studies.scan.summary import check_html, summarise
from libra_jax.inputs.limits import as_instance, as_int
from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)


#: Space keys added with the technology catalogue, left out of the fingerprint at their
#: defaults, so scans started before them keep their fingerprint (and resume).
_NEW_SPACE_DEFAULTS = {"npu_w": 0.0, "span_m_by_npus": None}


def _fingerprint(cfg: ScanConfig, space: ScanSpace, fmt: Format) -> dict:
    """What must not change between a run and its resume (enumeration, chunking, format,
    and the catalogue's figures that bound, skip or price designs)."""
    spc = dataclasses.asdict(cfg.space)
    for key, default in _NEW_SPACE_DEFAULTS.items():
        if key in spc and spc[key] == default:
            del spc[key]
    if space.span_m_by_npus is not None:  # checked and sorted: [[NPUs, m], ...]
        spc["span_m_by_npus"] = [list(x) for x in space.span_m_by_npus]
    else:
        spc.pop("span_m_by_npus", None)  # {} is no check too
    cm = space.cost_model
    fp = {
        "space": spc,
        "cost_model": cm.tiers,
        "workloads": [_workload_identity(w) for w in cfg.workloads],
        "chunk_size": cfg.scan.chunk_size,
        "format": fmt.value,
    }
    physical = {name: table for name, table in (("energy", cm.energy), ("reach_m", cm.reach_m),
                                                 ("max_gbps", cm.max_gbps)) if table}
    if physical:  # LIBRA's cost models have none: their fingerprint is unchanged
        fp["catalogue"] = physical
    return fp


def _workload_identity(w) -> dict:
    """A scan workload's entry of the fingerprint: its fields, without the trace keys when
    they are null (the identity of a scan of workload files is what it was before them)."""
    out = dataclasses.asdict(w)
    for key in ("chakra_et", "comm_groups"):
        if out.get(key) is None:
            out.pop(key, None)
    return out


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, MB (Linux: ru_maxrss is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _max_ties(space: ScanSpace) -> int:
    """The most designs of one top-k tie group: the block choices of one shape."""
    return len(space.blocks) ** max(space.dims)


@dataclasses.dataclass
class ScanResult:
    output_dir: pathlib.Path
    total_designs: int  # of the whole scan
    skipped: dict
    computed: int  # designs solved by this run
    resumed: int  # designs found in existing chunk files
    chunks: int  # of this run (a shard's own; a merge's: every shard's)
    complete: bool
    seconds: float
    timings: dict
    format: Format = Format.parquet
    top_k_markdown: str | None = None  # set when this run wrote the summary
    shard: Shard = dataclasses.field(default_factory=Shard)  # a merge: Shard(0, count)
    merged: bool = False  # a merge of finished shards (`merge_scan`)

    @property
    def designs_per_s(self) -> float:
        return self.computed / self.seconds if self.seconds > 0 else 0.0


def progress_bar(total: int, enabled: bool, stream=None) -> tqdm:
    """A tqdm bar of designs on ``stream`` (stderr), off unless it is a terminal."""
    stream = sys.stderr if stream is None else stream
    quiet = not enabled or not (hasattr(stream, "isatty") and stream.isatty())
    return tqdm(total=total, unit="design", desc="scan", file=stream,
                disable=quiet, dynamic_ncols=True, smoothing=0.1)


def check_report(report: ReportConfig) -> None:
    """The summary's settings, checked before any design is solved (a scan) or any chunk is
    read (a merge): ``rank_by`` a choice, ``top_k`` >= 1 row, the plot's counts >= 0.

    Raises:
      LibraInputError: naming the key and its value.
    """
    as_instance(report, ReportConfig, "cfg.report")
    choice(RankBy, report.rank_by, "report.rank_by")
    as_int(report.top_k, "report.top_k", 1, what=" (rows per workload in top_k.md)")
    for key in ("plot_labels", "plot_points", "html_points"):
        as_int(getattr(report, key), f"report.{key}", 0)


def run_scan(cfg: ScanConfig, output_dir: str | os.PathLike, *,
             solver: Callable | None = None) -> ScanResult:
    """Runs (or resumes) a scan, or its shard ``scan.shard_index`` of ``scan.num_shards``,
    into ``output_dir``. An unsharded run summarises when every chunk exists; a shard writes
    its completion record instead (`merge_scan` summarises the shards).

    Args:
      cfg: the scan config (`ScanConfig`).
      output_dir: where chunks and the summary go (all shards: the same one); reuse it to
        resume.
      solver: `batch.solve_stacked`-compatible function (default `batch.solve_stacked`).

    Raises:
      LibraInputError: bad config, or an output_dir holding a different scan or split.
    """
    start = time.perf_counter()
    as_instance(cfg, ScanConfig, "cfg")
    r = as_instance(cfg.scan, RunConfig, "cfg.scan")
    as_int(r.chunk_size, "scan.chunk_size", 1)
    if r.solve_chunk is not None:
        as_int(r.solve_chunk, "scan.solve_chunk", 1)
    if not isinstance(output_dir, (str, os.PathLike)):
        raise LibraInputError(f"output_dir = {show(output_dir)}: expected a path.")
    if r.chunk_size < 1 or (r.solve_chunk is not None and r.solve_chunk < 1):
        raise LibraInputError(
            f"scan.chunk_size = {r.chunk_size}, scan.solve_chunk = {r.solve_chunk}: both must "
            "be >= 1 (solve_chunk may be null)."
        )
    shard = Shard.create(r.shard_index, r.num_shards)
    dtype = choice(Dtype, r.dtype, "scan.dtype")
    fmt = choice(Format, r.format, "scan.format")
    check_report(cfg.report)
    check_format(fmt)
    check_html()
    space = make_space(cfg)
    names = [w.name for w in space.workloads]
    if len(set(names)) != len(names):
        raise LibraInputError(f"workloads: names {names} repeat; give each a distinct name.")
    out = pathlib.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    fp = _fingerprint(cfg, space, fmt)
    check_same_scan(out, fp, shard)
    total, skipped = count_designs(space)
    first, stop = shard.bounds(total)
    n_chunks = -(-(stop - first) // r.chunk_size)
    manifest = {"fingerprint_sha256": fingerprint_sha(fp), "fingerprint": fp,
                "total_designs": total, "chunks": n_chunks, "skipped": skipped}
    if shard.count > 1:  # what the merge needs without the config
        manifest.update(shard={"index": shard.index, "count": shard.count,
                               "first_design": first, "stop_design": stop},
                        workloads=names, max_ties=_max_ties(space))
        shard.done_path(out).unlink(missing_ok=True)  # rewritten once every chunk exists
    write_text(shard.manifest_path(out), json.dumps(manifest, indent=1, default=str))
    # Temp files left by a killed run (this shard's: others may be writing theirs).
    stale = remove_stale_temps(out / "chunks", chunk_prefix(shard.tag))
    log.info("scan%s: %s designs in %d chunks into %s (%s%s)",
             f" shard {shard.index} of {shard.count} (designs {first:,}..{stop - 1:,} of "
             f"{total:,})" if shard.count > 1 else "", f"{stop - first:,}", n_chunks, out,
             fmt.value, f"; removed {stale} unfinished temp files" if stale else "")

    builder = ChunkBuilder(space)
    timings: dict = {}
    computed = resumed = done_now = 0
    t_loop = time.perf_counter()
    designs = iter_designs(space, first, stop)  # jumps to first without building designs
    with progress_bar(stop - first, r.progress) as bar:
        for ci, chunk in enumerate(chunked(designs, r.chunk_size)):
            path = shard.chunk_path(out, ci, fmt)
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
    files = [shard.chunk_path(out, i, fmt) for i in range(n_chunks)]
    complete = all(f.exists() for f in files)
    md = None
    status_counts = None
    if complete and shard.count == 1:
        t = time.perf_counter()
        summ, md = summarise(out, files, names, cfg.report, _max_ties(space))
        status_counts = summ.status
        timings["summary"] = time.perf_counter() - t
    result = ScanResult(out, total, skipped, computed, resumed, n_chunks, complete,
                        loop_s, timings, fmt, md, shard)
    record = {"total_designs": total, "skipped": skipped, "chunks": n_chunks,
              "computed_this_run": computed, "resumed_from_files": resumed,
              "complete": complete, "loop_seconds": loop_s,
              "designs_per_s": result.designs_per_s,
              "wall_seconds": time.perf_counter() - start, "timings_s": timings,
              "peak_rss_mb": peak_rss_mb()}
    if shard.count == 1:
        write_text(out / "scan_summary.json",
                   json.dumps(dict(record, status_counts=status_counts), indent=1))
    elif complete:  # where and how the shard ran, for the merged summary
        write_text(shard.done_path(out), json.dumps(dict(
            record, shard=shard.tag, first_design=first, stop_design=stop,
            host=socket.gethostname(), pid=os.getpid()), indent=1))
    return result


def merge_scan(output_dir: str | os.PathLike, report: ReportConfig) -> ScanResult:
    """Summarises the finished shards of ``output_dir`` as one scan: ``top_k.md``,
    ``pareto_front.csv``, ``pareto.png``, ``pareto.html`` and ``scan_summary.json``, the files
    an unsharded run of the same scan writes (the same bytes but the PNG's), streaming the
    chunk files once (memory bounded as in `summarise`).

    The space, workloads and format come from the shards' manifests; ``report`` (top_k,
    rank_by, the plot) from the caller.

    Raises:
      LibraInputError: a missing or unfinished shard, shards of different scans
        (`shards.check_shard_set`), or a bad ``report`` (`check_report`).
    """
    start = time.perf_counter()
    check_report(report)
    check_html()
    out = pathlib.Path(output_dir)
    shards = check_shard_set(out)
    m = shards.manifest
    summ, md = summarise(out, shards.chunk_files, m["workloads"], report, m["max_ties"])
    seconds = time.perf_counter() - start
    result = ScanResult(out, m["total_designs"], m["skipped"], 0, m["total_designs"],
                        len(shards.chunk_files), True, seconds, {"summary": seconds},
                        Format(m["fingerprint"]["format"]), md,
                        Shard(0, m["shard"]["count"]), merged=True)
    write_text(out / "scan_summary.json", json.dumps({
        "total_designs": m["total_designs"], "skipped": m["skipped"],
        "chunks": len(shards.chunk_files), "complete": True,
        "merged_shards": len(shards.done), "wall_seconds": seconds,
        "peak_rss_mb": peak_rss_mb(),
        "timings_s": result.timings, "status_counts": summ.status,
        "shards": shards.done}, indent=1))
    return result


def describe(result: ScanResult) -> str:
    """The run's status: counts, skips, timings (the CLI logs it)."""
    s = result.skipped
    shapes = ", ".join(f"{k}: {v}" for k, v in s["mapping_shapes"].items())
    t = result.timings
    sh = result.shard
    counts = f"in {result.chunks} chunks (computed now {result.computed:,}, found on disk " \
             f"{result.resumed:,})"
    time_line = (f"time: {result.seconds:.1f} s, {result.designs_per_s:,.0f} designs/s "
                 f"(build {t.get('build', 0.0):.1f} s, solve {t.get('solve', 0.0):.1f} s, write "
                 f"{t.get('write', 0.0):.1f} s, summary {t.get('summary', 0.0):.1f} s)")
    if result.merged:
        head = (f"merged {sh.count} shards: {result.total_designs:,} designs in "
                f"{result.chunks} chunks")
        time_line = f"time: {result.seconds:.1f} s (the summary, streaming every chunk file)"
    elif sh.count > 1:
        first, stop = sh.bounds(result.total_designs)
        head = (f"shard {sh.index} of {sh.count}: designs {first:,}..{stop - 1:,} of "
                f"{result.total_designs:,} {counts}")
    else:
        head = f"designs: {result.total_designs:,} {counts}"
    reach, cap = s.get("reach_designs", 0), s.get("max_gbps_designs", 0)
    physical = "".join([
        f"; {reach:,} with a tier whose ReachM is below its dimension's span" if reach else "",
        f"; {cap:,} whose budget is above the sum of the tiers' MaxGbps" if cap else ""])
    lines = [
        head,
        f"skipped: {s['mapping_designs'] + s['switch_designs'] + reach + cap:,} designs "
        f"({s['mapping_designs']:,} whose shape the TP/DP mapping cannot fit, shapes per "
        f"workload: {shapes}; {s['switch_designs']:,} with a Switch on a tier without a "
        f"Switch price{physical})",
        time_line,
    ]
    if not result.complete:
        lines.append(f"stopped early (scan.max_chunks); rerun with "
                     f"scan.output_dir={result.output_dir} to resume.")
    elif sh.count > 1 and not result.merged:
        lines.append(f"shard {sh.tag} done; once every shard is: python -m libra_jax.scan "
                     f"scan.merge=true scan.output_dir={result.output_dir}")
    return "\n".join(lines)


def outputs_text(result: ScanResult) -> str:
    """The top-k table and where the outputs are (the CLI prints it on stdout)."""
    out = result.output_dir
    return "\n".join([result.top_k_markdown or "", f"table: {out / 'top_k.md'}",
                      f"plot: {out / 'pareto.png'}",
                      f"interactive plot (open in a browser): {out / 'pareto.html'}",
                      f"Pareto fronts: {out / 'pareto_front.csv'}",
                      f"all designs: pandas.read_parquet('{out / 'chunks'}')"
                      if result.format == Format.parquet
                      else f"all designs: {out / 'chunks'}/chunk_*.csv"])
