"""Shards: one scan split over processes or machines, and the check before their merge.

`Shard(index, count)` takes the designs ``[total * index // count, total * (index + 1) //
count)`` of the fixed enumeration order (`space.iter_designs`): contiguous ranges, so every
design is in exactly one shard, shard sizes differ by at most one design, and the split
depends only on the numbers of designs and shards, never on ``scan.chunk_size``. Contiguous
ranges also keep designs of one shape together, which ``scan.dedup`` relies on. A shard cuts
its range into chunks of ``chunk_size`` designs and writes, under the one
``scan.output_dir`` shared by all shards::

    chunks/chunk_s1of3_000000.parquet ...   its chunk files (no other shard has these names)
    shards/s1of3_manifest.json              its resume manifest (fingerprint, design range)
    shards/s1of3_done.json                  its completion record, once its last chunk exists

Each shard resumes on its own, and no shard summarises: `check_shard_set` refuses a set with
a missing or unfinished shard or shards of different scans, and the merge (`run.merge_scan`)
then streams every shard's chunk files, in design order, through the summary an unsharded
run writes itself. ``count == 1`` is the unsharded scan: ``scan_manifest.json`` and
``chunks/chunk_000000.parquet``, as before shards existed.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

from libra_jax.studies.scan.config import Format
from libra_jax.studies.scan.files import (
    MANIFEST,
    SHARDS,
    changed_keys,
    chunk_path,
    fingerprint_sha,
    read_json,
)
from libra_jax.types import LibraInputError, show


@dataclasses.dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (``Shard()`` is the whole, unsharded scan)."""

    index: int = 0
    count: int = 1

    @classmethod
    def create(cls, index, count) -> Shard:
        """The shard of ``scan.shard_index`` / ``scan.num_shards``.

        Raises:
          LibraInputError: naming the key and its value.
        """
        for key, value in (("scan.num_shards", count), ("scan.shard_index", index)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise LibraInputError(f"{key} = {show(value)}: expected an integer.")
        if count < 1:
            raise LibraInputError(f"scan.num_shards = {count}: must be >= 1.")
        if not 0 <= index < count:
            raise LibraInputError(
                f"scan.shard_index = {index}: must be in 0..{count - 1} "
                f"(scan.num_shards = {count})."
            )
        return cls(index, count)

    @property
    def tag(self) -> str:
        """``s1of3`` (index zero-padded to the width of ``count - 1``); ``""`` unsharded."""
        if self.count == 1:
            return ""
        return f"s{self.index:0{len(str(self.count - 1))}d}of{self.count}"

    def bounds(self, total: int) -> tuple[int, int]:
        """[first, stop) design ids of this shard among ``total`` designs."""
        return total * self.index // self.count, total * (self.index + 1) // self.count

    def manifest_path(self, output_dir: str | os.PathLike) -> pathlib.Path:
        out = pathlib.Path(output_dir)
        return out / MANIFEST if self.count == 1 else out / SHARDS / f"{self.tag}_manifest.json"

    def done_path(self, output_dir: str | os.PathLike) -> pathlib.Path:
        """The completion record (shards only; an unsharded run writes its summary)."""
        return pathlib.Path(output_dir) / SHARDS / f"{self.tag}_done.json"

    def chunk_path(self, output_dir: str | os.PathLike, index: int,
                   fmt: Format | str) -> pathlib.Path:
        return chunk_path(output_dir, index, fmt, self.tag)


def _count(manifest: dict) -> int:
    return manifest.get("shard", {}).get("count", 1)


def manifests(output_dir: str | os.PathLike) -> list[tuple[pathlib.Path, dict]]:
    """Every manifest in ``output_dir``: the unsharded one, then the shards' by name."""
    out = pathlib.Path(output_dir)
    paths = [out / MANIFEST] if (out / MANIFEST).exists() else []
    paths += sorted((out / SHARDS).glob("*_manifest.json"))
    return [(p, read_json(p)) for p in paths]


def check_same_scan(output_dir: str | os.PathLike, fp: dict, shard: Shard) -> None:
    """Refuses an output_dir holding another scan (naming what differs) or this scan split
    into another number of shards: one directory holds one scan, split one way."""
    out = pathlib.Path(output_dir)
    sha = fingerprint_sha(fp)
    for path, m in manifests(out):
        where = "" if path.name == MANIFEST else f", recorded in {path.relative_to(out)}"
        if m.get("fingerprint_sha256") != sha:
            raise LibraInputError(
                f"{out} holds chunks of a different scan (changed: "
                f"{changed_keys(m.get('fingerprint', {}), fp)}){where}; use a new "
                "scan.output_dir, rerun with the settings of that scan, or delete that "
                "directory."
            )
        if _count(m) != shard.count:
            raise LibraInputError(
                f"scan.num_shards = {shard.count}, but {out} holds this scan split into "
                f"{_count(m)} shard(s){where or ' (scan_manifest.json)'}; one directory holds "
                f"one split: use scan.num_shards={_count(m)} or a new scan.output_dir."
            )


@dataclasses.dataclass
class ShardSet:
    """The finished shards of one scan, checked (`check_shard_set`)."""

    manifest: dict  # shard 0's manifest (fingerprint, totals, workloads, max_ties)
    chunk_files: list[pathlib.Path]  # every shard's chunk files, in design order
    done: list[dict]  # the completion records, by shard index


def check_shard_set(output_dir: str | os.PathLike) -> ShardSet:
    """The shards of ``output_dir``, if they form one finished scan.

    Raises:
      LibraInputError: no shards; shards of different scans (naming the shards and what
        differs) or splits; shards missing or unfinished (naming each, with its chunk count
        and how to rerun it).
    """
    out = pathlib.Path(output_dir)
    found = [(p, m) for p, m in manifests(out) if p.name != MANIFEST]
    if not found:
        hint = (" (it holds an unsharded scan, whose run writes its own summary)"
                if (out / MANIFEST).exists() else "")
        raise LibraInputError(
            f"scan.output_dir = {out}: no shard manifests ({SHARDS}/*_manifest.json) to "
            f"merge{hint}; run the shards first (scan.num_shards=N, scan.shard_index=0..N-1, "
            f"scan.output_dir={out})."
        )
    ref_path, ref = found[0]
    odd = [f"{p.name} (changed: {changed_keys(ref.get('fingerprint', {}), m['fingerprint'])})"
           for p, m in found[1:] if m.get("fingerprint_sha256") != ref.get("fingerprint_sha256")]
    if odd:
        raise LibraInputError(
            f"cannot merge {out}: its shards belong to different scans: against "
            f"{ref_path.name}, {'; '.join(odd)}. Rerun those shards with the settings of the "
            "others (or delete them), then merge again."
        )
    counts = sorted({_count(m) for _, m in found})
    if len(counts) > 1:
        raise LibraInputError(
            f"cannot merge {out}: it holds this scan split into {counts} shards; keep one "
            "split (delete the other's shards/ and chunks/ files), then merge again."
        )
    count, total = counts[0], ref["total_designs"]
    by_index = {m["shard"]["index"]: m for _, m in found}
    fmt = ref["fingerprint"]["format"]
    problems, files, done = [], [], []
    for i in range(count):
        shard = Shard(i, count)
        m = by_index.get(i)
        if m is None:
            problems.append(f"{shard.tag} (never started: no manifest)")
            continue
        first, stop = m["shard"]["first_design"], m["shard"]["stop_design"]
        if (m["total_designs"], first, stop) != (total, *shard.bounds(total)):
            raise LibraInputError(
                f"cannot merge {out}: {shard.tag} holds designs [{first}, {stop}) of "
                f"{m['total_designs']:,}, but the split of {total:,} designs gives it "
                f"{list(shard.bounds(total))} (written by another version of the scan?); "
                "rerun that shard into a new scan.output_dir."
            )
        paths = [shard.chunk_path(out, c, fmt) for c in range(m["chunks"])]
        have = sum(p.exists() for p in paths)
        record = shard.done_path(out)
        if have < len(paths) or not record.exists():
            problems.append(f"{shard.tag} ({have} of {len(paths)} chunks"
                            f"{'' if record.exists() else ', no completion record'})")
            continue
        files += paths
        done.append(read_json(record))
    if problems:
        raise LibraInputError(
            f"cannot merge {out}: {len(problems)} of {count} shards are not complete: "
            f"{', '.join(problems)}. Run them (they resume) with the scan's settings and "
            f"scan.num_shards={count} scan.shard_index=I scan.output_dir={out}, then merge "
            "again."
        )
    return ShardSet(ref, files, done)
