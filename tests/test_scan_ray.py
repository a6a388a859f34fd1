"""Scans and sweeps through a running Ray cluster (`hydra/launcher=libra_ray`): a head node of
one machine on 127.0.0.1 (free ports, a temp dir, stopped when the module's tests end, even
when they fail); a 3-shard scan whose shard 2 worker is killed partway (the launcher fails,
the merge refuses naming the shard, the shard rerun alone completes the scan, which equals the
unsharded run byte for byte; next to the rerun, a job with bad input is reported at the end
and the exit status is 1); a 4-job `libra_jax.train` sweep with one failing job.

Kept short for the default suite: the tiny scan of `test_scan._cli`, its unsharded run shared
by the launcher tests (`test_scan.tiny_reference`), whose compile cache the workers load the
kernel from; merges in this process.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
from test_scan import REPO, TINY_SCAN, same_as_reference, tiny_reference  # noqa: F401

from libra_jax.studies import scan
from libra_jax.types import LibraInputError

pytest.importorskip("hydra_plugins.hydra_ray_launcher",
                    reason="the ray extra is not installed (pip install -e '.[ray]')")

RAY = pathlib.Path(sys.executable).with_name("ray")
#: Ray's logical CPUs on the head: the 3 shards of a scan, or the 4 jobs of the sweep, run at
#: once (1 CPU per task; the machine may have fewer cores).
HEAD_CPUS = 4


@pytest.fixture(scope="module")
def ray_address():
    """A Ray head node of this machine (`bench_launchers.ray_head`: free ports, a temp dir,
    stopped when the module's tests end, even when they fail), its address 127.0.0.1:PORT."""
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        from bench_launchers import ray_head
    finally:
        sys.path.pop(0)
    t = time.perf_counter()
    with ray_head(HEAD_CPUS, env=dict(os.environ, PYTHONPATH=str(REPO))) as address:
        print(f"\nRay head started in {time.perf_counter() - t:.1f} s")
        yield address


def _ray(address: str) -> list[str]:
    """The launcher overrides of this cluster: 1 CPU per task."""
    return ["hydra/launcher=libra_ray", f"hydra.launcher.ray.init.address={address}",
            "hydra.launcher.ray.remote.num_cpus=1"]


def _pid_with_open(path: pathlib.Path) -> int | None:
    """The process that has ``path`` open (a Hydra job's log: the worker running it)."""
    for fd_dir in pathlib.Path("/proc").glob("[0-9]*/fd"):
        try:
            if any(os.readlink(fd) == str(path) for fd in fd_dir.iterdir()):
                return int(fd_dir.parent.name)
        except OSError:
            continue
    return None


def _scan(tmp_path, cache, out, *overrides) -> subprocess.Popen:
    """The tiny scan's multirun through Ray, started (chunks of 1 design: a shard writes 9
    chunk files, so one can be killed between two; the rows do not depend on it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "libra_jax.scan", "-m", *TINY_SCAN, "scan.chunk_size=1",
         f"compilation_cache_dir={cache}", "scan.num_shards=3", f"scan.output_dir={out}",
         *overrides],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO), HYDRA_FULL_ERROR="0"),
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_three_shards_on_ray_one_killed_then_rerun_merge_into_the_unsharded_bytes(
        tmp_path, ray_address, tiny_reference):
    one, cache = tiny_reference
    out, sweep = tmp_path / "sharded", tmp_path / "sweep"
    seconds = {}
    t = time.perf_counter()
    # Shard 2's worker is killed with SIGKILL once it has written a chunk (partway).
    with _scan(tmp_path, cache, out, "scan.shard_index=range(0,3)",
               f"hydra.sweep.dir={sweep}", *_ray(ray_address)) as launcher:
        try:
            deadline = time.monotonic() + 240
            pid = None
            while pid is None or not list((out / "chunks").glob("chunk_s2of3_*.parquet")):
                assert launcher.poll() is None, launcher.communicate()
                assert time.monotonic() < deadline
                pid = pid or _pid_with_open(sweep / "2" / "scan.log")
                time.sleep(0.01)
            os.kill(pid, signal.SIGKILL)
            stdout, stderr = launcher.communicate(timeout=240)
        finally:
            if launcher.poll() is None:
                launcher.kill()
    seconds["3 shards, one killed"] = time.perf_counter() - t
    assert launcher.returncode == 1, stderr
    assert "Connecting to existing Ray cluster at address: " in stdout + stderr
    assert "Ray Launcher is launching 3 jobs" in stdout + stderr
    assert re.search(r"worker (died|crashed)|WorkerCrashedError", stderr, re.I), stderr[-3000:]
    done = [json.loads((out / "shards" / f"s{i}of3_done.json").read_text()) for i in (0, 1)]
    assert [d["computed_this_run"] for d in done] == [9, 9]
    assert launcher.pid not in {d["pid"] for d in done} and pid not in {d["pid"] for d in done}
    assert len({d["pid"] for d in done}) == 2  # a fresh Ray worker per shard

    with pytest.raises(LibraInputError, match=r"1 of 3 shards are not complete: s2of3 "
                                              r"\([1-8] of 9 chunks, no completion record\)"):
        scan.merge_scan(out, scan.ReportConfig())
    assert not (out / "top_k.md").exists()

    # Shard 2 rerun alone, next to a job with a bad shard index: that one fails in its
    # worker (bad input: a message, not an exception Ray sees), the other is not stopped,
    # and the launching process reports the failure from the job records and exits 1.
    t = time.perf_counter()
    with _scan(tmp_path, cache, out, "scan.shard_index=2,5", f"hydra.sweep.dir={sweep}_2",
               *_ray(ray_address)) as rerun:
        stdout, stderr = rerun.communicate(timeout=240)
    seconds["shard 2 rerun (and a bad job)"] = time.perf_counter() - t
    assert rerun.returncode == 1, stderr
    assert "error: 1 of 2 jobs failed:" in stderr, stderr[-3000:]
    assert (f"{tmp_path / 'sweep_2' / '1'}: scan.shard_index = 5: must be in 0..2"
            in stderr), stderr[-3000:]
    record = json.loads((out / "shards" / "s2of3_done.json").read_text())
    assert 1 <= record["resumed_from_files"] <= 8  # the killed worker's chunks are kept
    assert record["resumed_from_files"] + record["computed_this_run"] == 9
    t = time.perf_counter()
    scan.merge_scan(out, scan.ReportConfig())
    seconds["merge"] = time.perf_counter() - t
    same_as_reference(out, one)
    print("ray timings (s):", {k: round(v, 1) for k, v in seconds.items()})


def test_train_sweep_on_ray_reports_each_job_and_a_failed_one(tmp_path, ray_address):
    sweep = tmp_path / "sweep"
    proc = subprocess.run(
        [sys.executable, "-m", "libra_jax.train", "-m", "conf=turing_nlg",
         "constraints.total_bw_gbps=400,500,-5,600", f"hydra.sweep.dir={sweep}",
         f"compilation_cache_dir={tmp_path / 'jax_cache'}", *_ray(ray_address)],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
        text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # one job failed: reported at the end
    assert "Ray Launcher is launching 4 jobs" in proc.stdout + proc.stderr
    assert "error: 1 of 4 jobs failed:" in proc.stderr
    assert f"{sweep / '2'}: constraints.total_bw_gbps = -5.0" in proc.stderr
    results = [json.loads((sweep / str(i) / "result.json").read_text()) for i in range(4)]
    assert [r["status"] for r in results] == ["ok", "ok", "error", "ok"]
    steps = [results[i]["step_time_ns"] for i in (0, 1, 3)]
    assert steps[0] > steps[1] > steps[2] > 0  # more bandwidth, a shorter step
    assert re.search(r"\(_run_job pid=\d+\)", proc.stderr)  # the jobs ran in Ray's workers
