"""Size, enumeration cost and solve rate of a scan config, without running the scan.

    python experiments/scan_16k/measure.py count CONFIG [key=value ...]
    python experiments/scan_16k/measure.py enumerate CONFIG N [key=value ...]
    python experiments/scan_16k/measure.py solve CONFIG CHUNKS [key=value ...]

CONFIG is a Hydra config name in this folder (``scan_16k``, ``enumerate_64k``); overrides as
for ``python -m libra_jax.scan``.

* ``count``: designs and skips (`count_designs`, arithmetic per shape), per D too, and how
  long counting and jumping to the last design (``iter_designs(space, total - 1)``) take.
* ``enumerate``: the run loop's enumeration (``chunked(iter_designs(space, 0, N),
  chunk_size)``) without solving: designs/s and the process's peak RSS before and after, so
  runs with N = 10^6, 10^7, 10^8 (one process each) show whether memory grows with N.
* ``solve``: per D, CHUNKS chunks taken at the start of that D's designs (jumped to with
  ``iter_designs(space, start, stop)``), solved and written as the run loop does
  (`solve_designs` with the config's dedup, `write_chunk` to a temp dir); the first chunk of
  each D is untimed (compilation). Prints designs/s per D and the estimated time of the whole
  space on this machine, sum over D of designs_D / rate_D.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys
import tempfile
import time

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

import libra_jax.cli.scan  # noqa: F401  (registers the base_scan schema)
from libra_jax.studies import scan
from libra_jax.studies.scan.run import peak_rss_mb
from libra_jax.studies.scan.space import chunked
from libra_jax.types import float64

HERE = pathlib.Path(__file__).resolve().parent


def load(name: str, overrides: list[str]) -> scan.ScanConfig:
    with initialize_config_dir(str(HERE), version_base="1.3"):
        return OmegaConf.to_object(compose(name, overrides=overrides))


def per_dim(space: scan.ScanSpace) -> dict[int, int]:
    return {d: scan.count_designs(dataclasses.replace(space, dims=(d,)))[0]
            for d in space.dims}


def count(cfg: scan.ScanConfig) -> None:
    space = scan.make_space(cfg)
    t = time.perf_counter()
    total, skipped = scan.count_designs(space)
    t_count = time.perf_counter() - t
    t = time.perf_counter()
    last = next(scan.iter_designs(space, total - 1))
    t_jump = time.perf_counter() - t
    print(f"designs: {total:,} (skipped: {skipped})")
    print("per D: " + ", ".join(f"{d}: {n:,}" for d, n in per_dim(space).items()))
    print(f"count_designs: {t_count:.3f} s; iter_designs(space, {total - 1:,}) first design: "
          f"{t_jump:.3f} s -> {last}")


def enumerate_designs(cfg: scan.ScanConfig, n: int) -> None:
    space = scan.make_space(cfg)
    before = peak_rss_mb()
    t = time.perf_counter()
    seen = 0
    for chunk in chunked(scan.iter_designs(space, 0, n), cfg.scan.chunk_size):
        seen += len(chunk)
    s = time.perf_counter() - t
    print(f"enumerated {seen:,} designs in {s:.1f} s: {seen / s:,.0f} designs/s; peak RSS "
          f"{before:.0f} MB before, {peak_rss_mb():.0f} MB after")


@float64
def solve(cfg: scan.ScanConfig, chunks: int) -> None:
    space = scan.make_space(cfg)
    r = cfg.scan
    builder = scan.ChunkBuilder(space)
    start, est = 0, 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for d, n_d in per_dim(space).items():
            stop = min(start + chunks * r.chunk_size, start + n_d)
            timed = done = 0
            t_first = time.perf_counter()
            for i, chunk in enumerate(chunked(scan.iter_designs(space, start, stop),
                                              r.chunk_size)):
                if i == 1:
                    t0 = time.perf_counter()
                rows = scan.solve_designs(chunk, space, dedup=r.dedup, solve_chunk=r.solve_chunk,
                                          dtype=r.dtype.value, builder=builder)
                scan.write_chunk(rows, scan.chunk_path(tmp, i, r.format), r.format)
                done += len(chunk)
                timed += len(chunk) if i else 0
                if i == 0:
                    first_s = time.perf_counter() - t_first
            if timed:
                rate = timed / (time.perf_counter() - t0)
                what = f"then {timed:,} designs at {rate:,.0f} designs/s"
            else:  # every design of this D fits in chunk 0
                rate = done / first_s
                what = "all of them in chunk 0"
            est += n_d / rate
            print(f"D={d}: {n_d:,} designs; chunk 0 {first_s:.1f} s (with compilation), "
                  f"{what} -> {n_d / rate / 3600:.3f} h", flush=True)
            start += n_d
    print(f"estimate for the whole space on this machine: {est / 3600:.2f} h "
          f"(one process; peak RSS {peak_rss_mb():.0f} MB)")


def main(argv: list[str]) -> None:
    mode, name, *rest = argv
    if mode == "count":
        count(load(name, rest))
    elif mode == "enumerate":
        enumerate_designs(load(name, rest[1:]), int(rest[0]))
    elif mode == "solve":
        solve(load(name, rest[1:]), int(rest[0]))
    else:
        raise SystemExit(f"mode = {mode!r}: expected count, enumerate or solve")


if __name__ == "__main__":
    main(sys.argv[1:])
