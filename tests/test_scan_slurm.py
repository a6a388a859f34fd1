"""Scans through a running SLURM cluster (`hydra/launcher=libra_slurm`, submitit): a one-node
cluster on this machine (`experiments/slurm_local/setup.sh`: slurmctld, slurmd, slurmdbd,
munged in a temp dir, stopped when the module's tests end, even when they fail); a 3-shard
scan whose shard 2 job is cancelled with `scancel` while it runs (the launcher fails, the
merge refuses naming the shard, the shard rerun alone completes the scan, which equals the
unsharded run byte for byte); the shipped launcher values (8 CPUs per task) refused on the
4-CPU node before any job is submitted. Skips, saying why, where the SLURM packages cannot be
installed (the script needs apt-get and root).

Kept short for the default suite: the tiny scan of `test_scan._cli`, its unsharded run shared
by the launcher tests (`test_scan.tiny_reference`), whose compile cache the jobs load the
kernel from; merges in this process; the rerun overlaps the launcher's wait for the cancelled
job (submitit polls `sacct`, then waits 15 s for a result file that never comes).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from test_scan import REPO, TINY_SCAN, same_as_reference, tiny_reference  # noqa: F401

from libra_jax.studies import scan
from libra_jax.types import LibraInputError

pytest.importorskip("hydra_plugins.hydra_submitit_launcher",
                    reason="hydra-submitit-launcher is not installed (pip install -e '.[slurm]')")

SETUP = REPO / "experiments" / "slurm_local" / "setup.sh"


@pytest.fixture(scope="module")
def slurm_conf():
    """A running one-node SLURM cluster of 4 CPUs (the 3 shards and a rerun at once); its
    slurm.conf path (set as SLURM_CONF)."""
    # Short: munge's and MariaDB's unix sockets live under it.
    d = tempfile.mkdtemp(prefix="slurm", dir="/tmp")
    old = os.environ.get("SLURM_CONF")
    try:
        t = time.perf_counter()
        proc = subprocess.run(["bash", str(SETUP), "start", d], capture_output=True,
                              text=True, timeout=600,
                              env=dict(os.environ, SLURM_LOCAL_CPUS="4"))
        if proc.returncode == 3:
            print(f"\nskipping the SLURM tests: {proc.stderr.strip()}")
            pytest.skip(f"no SLURM cluster: {proc.stderr.strip()}")
        assert proc.returncode == 0, proc.stderr
        print(f"\nSLURM cluster started in {time.perf_counter() - t:.1f} s")
        os.environ["SLURM_CONF"] = f"{d}/slurm.conf"
        yield f"{d}/slurm.conf"
    finally:
        subprocess.run(["bash", str(SETUP), "stop", d], capture_output=True, timeout=120)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        shutil.rmtree(d, ignore_errors=True)


SLURM = ["hydra/launcher=libra_slurm", "hydra.launcher.partition=local",
         "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1",
         "hydra.launcher.timeout_min=10"]


def _scan(tmp_path, cache, out, *overrides) -> subprocess.Popen:
    """The tiny scan's multirun through SLURM, started."""
    return subprocess.Popen(
        [sys.executable, "-m", "libra_jax.scan", "-m", *TINY_SCAN,
         f"compilation_cache_dir={cache}", "scan.num_shards=3", f"scan.output_dir={out}",
         *SLURM, *overrides],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO), HYDRA_FULL_ERROR="0"),
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _jobs() -> dict[str, str]:
    """SLURM's accounting: job id -> state (e.g. "1_2": "CANCELLED by 0")."""
    lines = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobID,State"],
                           capture_output=True, text=True, check=True).stdout.split("\n")
    return dict(line.split("|") for line in lines if line)


def _wait_for(what, condition, launcher, seconds=120):
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert launcher.poll() is None, (what, launcher.communicate())
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.05)
    return found


def test_three_shards_on_slurm_one_cancelled_then_rerun_merge_into_the_unsharded_bytes(
        tmp_path, slurm_conf, tiny_reference):
    one, cache = tiny_reference
    out = tmp_path / "sharded"
    seconds = {}
    t = time.perf_counter()
    with _scan(tmp_path, cache, out, "scan.shard_index=range(0,3)",
               f"hydra.sweep.dir={tmp_path / 'sweep'}") as launcher:
        try:
            def running_task_2():
                queue = subprocess.run(["squeue", "-h", "-o", "%i %T"], capture_output=True,
                                       text=True).stdout.split()
                jobs = dict(zip(queue[::2], queue[1::2]))
                return next((j for j, state in jobs.items()
                             if j.endswith("_2") and state == "RUNNING"), None)

            job = _wait_for("shard 2's job running", running_task_2, launcher)
            subprocess.run(["scancel", job], check=True)
            # The others finish; the merge then refuses the set and names the shard.
            _wait_for("shards 0 and 1 done", lambda: all(
                (out / "shards" / f"s{i}of3_done.json").exists() for i in (0, 1)), launcher)
            seconds["3 shards, shard 2 cancelled: 0 and 1 done"] = time.perf_counter() - t
            with pytest.raises(LibraInputError, match=r"1 of 3 shards are not complete: "
                                                      r"s2of3 \(never started: no manifest\)"):
                scan.merge_scan(out, scan.ReportConfig())
            assert not (out / "top_k.md").exists()

            t = time.perf_counter()
            with _scan(tmp_path, cache, out, "scan.shard_index=2",
                       f"hydra.sweep.dir={tmp_path / 'sweep_2'}") as rerun:
                stdout, stderr = rerun.communicate(timeout=240)
            seconds["shard 2 rerun"] = time.perf_counter() - t
            assert rerun.returncode == 0, stderr
            t = time.perf_counter()
            scan.merge_scan(out, scan.ReportConfig())
            seconds["merge"] = time.perf_counter() - t
            same_as_reference(out, one)

            t = time.perf_counter()
            stdout, stderr = launcher.communicate(timeout=240)
            seconds["the launcher's report after the rerun"] = time.perf_counter() - t
        finally:
            if launcher.poll() is None:
                launcher.kill()
    assert launcher.returncode == 1, stderr
    assert "Submitit 'slurm' sweep output dir" in stdout + stderr
    assert f"Job {job} (task: 0)" in stderr and "(state: CANCELLED" in stderr, stderr[-3000:]
    states = _jobs()
    assert states[job].startswith("CANCELLED"), states
    assert sorted(s for j, s in states.items() if j != job) == ["COMPLETED"] * 3, states
    print("slurm timings (s):", {k: round(v, 1) for k, v in seconds.items()})


def test_the_shipped_request_beyond_the_node_is_refused_before_any_job(tmp_path, slurm_conf):
    """The shipped libra_slurm values (8 CPUs per task) on the 4-CPU node: refused with the
    partition's nodes (`sinfo`) before submitit submits anything (cli/launchers.py)."""
    before = _jobs()
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "libra_jax.scan", "-m", *TINY_SCAN, "scan.num_shards=3",
         "scan.shard_index=range(0,3)", f"scan.output_dir={tmp_path / 'out'}",
         f"hydra.sweep.dir={tmp_path / 'sweep'}", "hydra/launcher=libra_slurm",
         "hydra.launcher.partition=local"],
        cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
        text=True, timeout=120)
    print(f"refused in {time.perf_counter() - t:.1f} s (the whole command)")
    assert proc.returncode == 2, proc.stderr
    assert re.fullmatch(
        r"error: hydra\.launcher\.cpus_per_task = 8( and mem_gb = 32)?: no node of partition "
        r"local has 8 CPUs(, nor 32 GB of memory)?; its nodes: 4 CPUs, [\d.]+ GB memory, "
        r"0 GPUs \(1 node\)\. Ask for what a node has\.\n", proc.stderr), proc.stderr
    assert _jobs() == before
    assert not (tmp_path / "sweep").exists()
