"""Chunk files, the resume manifest, and atomic writes.

Every file the scan writes goes through `atomic_write`: it is written under a hidden name
(``.NAME.tmpPID``) in the same directory, fsynced, renamed over ``NAME``, and the directory is
fsynced, so a reader (or a resume) never sees a partial file and a finished file survives a
crash. Readers that skip hidden files (pyarrow datasets skip names starting with ``.`` or
``_``) see only finished chunks while a scan runs.

Formats (``scan.format``): ``parquet`` (default; pyarrow is a dependency) with
``bandwidth_gbps`` as ``list<double>``, or ``csv`` with every float written by ``repr`` (full
precision, round-trips exactly) and ``bandwidth_gbps`` as a JSON list. The format is an
explicit setting recorded in the manifest, never inferred from installed packages, so a
resume means the same thing on any machine.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import pathlib
from collections.abc import Callable
from typing import Any

from libra_jax.studies.scan.config import Format
from libra_jax.types import LibraInputError

COLUMNS = (
    "design_id", "workload", "notation", "dims", "blocks", "tiers", "mapping", "npus",
    "budget_gbps",
    "bandwidth_gbps", "step_time_ns", "network_cost_usd", "time_x_cost", "optimality_gap",
    "max_violation", "status",
)
#: Added after ``time_x_cost`` when the cost model gives the tiers ``Energy`` (a scan's
#: chunks all have them or none does; LIBRA's cost models: none).
POWER_COLUMNS = ("network_power_w", "energy_per_step_j")
_INT_COLUMNS = ("design_id", "npus")
_FLOAT_COLUMNS = (
    "budget_gbps", "step_time_ns", "network_cost_usd", "time_x_cost", "optimality_gap",
    "max_violation", *POWER_COLUMNS,
)
_LIST_COLUMNS = ("bandwidth_gbps",)
MANIFEST = "scan_manifest.json"  # an unsharded scan's manifest; shards: `shards.Shard`
SHARDS = "shards"  # the shards' manifests and completion records (`shards.Shard`)


def columns(power: bool) -> tuple[str, ...]:
    """The columns of a row: `COLUMNS`, with `POWER_COLUMNS` after ``time_x_cost`` if
    ``power``."""
    if not power:
        return COLUMNS
    at = COLUMNS.index("time_x_cost") + 1
    return COLUMNS[:at] + POWER_COLUMNS + COLUMNS[at:]


def row_columns(rows: list[dict]) -> tuple[str, ...]:
    """The columns of these rows (with the power columns if the first row has them)."""
    return columns(bool(rows) and rows[0].get(POWER_COLUMNS[0]) is not None)


def arrow_schema(cols: tuple[str, ...] = COLUMNS):
    """The Parquet schema of a chunk (int64 ids, float64 numbers, list<double> bandwidths)."""
    import pyarrow as pa  # noqa: PLC0415  (imported only when Parquet is written or read)

    types = {c: pa.int64() for c in _INT_COLUMNS}
    types.update({c: pa.float64() for c in _FLOAT_COLUMNS})
    types.update({c: pa.list_(pa.float64()) for c in _LIST_COLUMNS})
    return pa.schema([(c, types.get(c, pa.string())) for c in cols])


def _fsync(path: pathlib.Path) -> None:
    """fsync of a file or a directory."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike, write: Callable[[pathlib.Path], None]) -> None:
    """Calls ``write(tmp)`` for a hidden temp file next to ``path``, fsyncs it, renames it to
    ``path`` and fsyncs the directory."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        write(tmp)
        _fsync(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync(path.parent)


def write_text(path: str | os.PathLike, text: str) -> None:
    """`atomic_write` of a UTF-8 text file."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def remove_stale_temps(directory: pathlib.Path, prefix: str = "") -> int:
    """Deletes the temp files of ``prefix*`` files left by a killed run in ``directory``
    (a shard's own only: other shards may be writing theirs); returns how many."""
    stale = list(directory.glob(f".{prefix}*.tmp*")) if directory.is_dir() else []
    for f in stale:
        f.unlink()
    return len(stale)


def csv_text(rows: list[dict], columns=COLUMNS) -> str:
    """CSV of ``rows`` at full precision: floats by repr, lists as JSON."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([json.dumps(r[c]) if c in _LIST_COLUMNS
                    else repr(r[c]) if isinstance(r[c], float) else r[c] for c in columns])
    return buf.getvalue()


def chunk_path(output_dir: str | os.PathLike, index: int, fmt: Format | str,
               shard: str = "") -> pathlib.Path:
    """``chunks/chunk_000042.parquet``; a shard's (``shard`` = its tag, e.g. ``s1of3``) chunk
    files are ``chunks/chunk_s1of3_000042.parquet``, so shards never share a file name and
    ``chunks/`` still reads as one dataset."""
    name = f"{chunk_prefix(shard)}{index:06d}.{Format(fmt).value}"
    return pathlib.Path(output_dir) / "chunks" / name


def chunk_prefix(shard: str = "") -> str:
    """What the chunk file names of a shard (tag ``shard``; ``""``: unsharded) start with."""
    return f"chunk_{shard}_" if shard else "chunk_"


def fingerprint_sha(obj: Any) -> str:
    """SHA-256 of a fingerprint (canonical JSON)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def changed_keys(before: dict, now: dict) -> str:
    """The fingerprint keys that differ (chunk size and format with both values)."""
    changed = [f"{k} ({before.get(k)!r} there, {now[k]!r} now)" if k in ("chunk_size", "format")
               else k for k in now if fingerprint_sha(before.get(k)) != fingerprint_sha(now[k])]
    return ", ".join(changed) or "the fingerprint"


def read_json(path: str | os.PathLike) -> dict:
    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"))


def check_format(fmt: Format) -> None:
    """Raises if ``fmt`` cannot be written here (Parquet without pyarrow)."""
    if fmt == Format.parquet:
        try:
            import pyarrow  # noqa: F401, PLC0415
        except ImportError:
            raise LibraInputError(
                "scan.format = parquet needs pyarrow (pip install pyarrow); or set "
                "scan.format=csv for a new scan."
            ) from None


def write_chunk(rows: list[dict], path: str | os.PathLike, fmt: Format | str) -> None:
    """Writes a chunk atomically (`atomic_write`) in ``fmt``."""
    cols = row_columns(rows)
    if Format(fmt) == Format.parquet:
        import pyarrow as pa  # noqa: PLC0415
        import pyarrow.parquet as pq  # noqa: PLC0415

        table = pa.Table.from_pylist([{c: r[c] for c in cols} for r in rows],
                                     schema=arrow_schema(cols))
        atomic_write(path, lambda tmp: pq.write_table(table, tmp))
    else:
        write_text(path, csv_text(rows, cols))


def read_chunk(path: str | os.PathLike) -> list[dict]:
    """Rows of a chunk file (either format), numbers as int / float, bandwidths as lists."""
    path = pathlib.Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # noqa: PLC0415

        return pq.read_table(path).to_pylist()
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        for c in _INT_COLUMNS:
            r[c] = int(r[c])
        for c in _FLOAT_COLUMNS:
            if c in r:
                r[c] = float(r[c])
        for c in _LIST_COLUMNS:
            r[c] = [float(x) for x in json.loads(r[c])]
    return rows
