"""Scans and sweeps through a running Ray cluster (`hydra/launcher=libra_ray`): a head node of
one machine on 127.0.0.1 (free ports, a temp dir, stopped when the module's tests end, even
when they fail), a 3-shard scan merged into the bytes of an unsharded run, a shard whose
worker is killed (refused by the merge, then rerun alone), and a 4-job `libra_jax.train`
sweep with one failing job.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pandas as pd
import pytest
from test_scan import REPO, _cli

pytest.importorskip("hydra_plugins.hydra_ray_launcher",
                    reason="the ray extra is not installed (pip install -e '.[ray]')")

RAY = pathlib.Path(sys.executable).with_name("ray")


def free_ports(n: int) -> list[int]:
    """``n`` distinct free TCP ports on 127.0.0.1."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@pytest.fixture(scope="module")
def ray_address():
    """A Ray head node (`ray start --head --block`, 2 CPUs), its address 127.0.0.1:PORT."""
    # Short: Ray's unix sockets live under it (108-byte limit), so not pytest's tmp_path.
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    gcs, client, dash, agent, agent_grpc, metrics, env_agent = free_ports(7)
    env = dict(os.environ, PYTHONPATH=str(REPO), RAY_USAGE_STATS_ENABLED="0")
    log = open(pathlib.Path(temp) / "head.log", "w")
    proc = subprocess.Popen(
        [str(RAY), "start", "--head", "--block", f"--port={gcs}", "--num-cpus=2",
         "--num-gpus=0", f"--ray-client-server-port={client}", "--include-dashboard=false",
         f"--dashboard-port={dash}", f"--dashboard-agent-listen-port={agent}",
         f"--dashboard-agent-grpc-port={agent_grpc}", f"--metrics-export-port={metrics}",
         f"--runtime-env-agent-port={env_agent}", f"--temp-dir={temp}",
         "--disable-usage-stats"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "--block" not in (pathlib.Path(temp) / "head.log").read_text():
            assert proc.poll() is None, (pathlib.Path(temp) / "head.log").read_text()
            assert time.monotonic() < deadline, "the Ray head did not start in 120 s"
            time.sleep(0.2)
        yield f"127.0.0.1:{gcs}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # `ray start --block` stops what it started
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # workers left in the group, if any
        except ProcessLookupError:
            pass
        log.close()
        subprocess.run(["rm", "-rf", temp], check=False)


def _ray(address: str) -> list[str]:
    """The launcher overrides of this cluster: 1 CPU per task (2 shards at once)."""
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


def _same_as_unsharded(out: pathlib.Path, one: pathlib.Path) -> None:
    for name in ("top_k.md", "pareto_front.csv"):
        assert (out / name).read_bytes() == (one / name).read_bytes(), name
    a = pd.read_parquet(out / "chunks").sort_values("design_id", ignore_index=True)
    b = pd.read_parquet(one / "chunks").sort_values("design_id", ignore_index=True)
    assert len(a) == 27
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_three_shards_on_ray_merge_into_the_unsharded_bytes_and_a_killed_one_reruns(
        tmp_path, ray_address):
    one, out = tmp_path / "one", tmp_path / "sharded"
    t = time.perf_counter()
    proc = _cli(tmp_path, f"scan.output_dir={one}")  # also fills the compile cache
    assert proc.returncode == 0, proc.stderr
    seconds = {"unsharded": time.perf_counter() - t}

    t = time.perf_counter()
    proc = _cli(tmp_path, "scan.num_shards=3", "scan.shard_index=range(0,3)",
                f"scan.output_dir={out}", *_ray(ray_address), multirun=True)
    seconds["3 shards"] = time.perf_counter() - t
    assert proc.returncode == 0, proc.stderr
    assert "Connecting to existing Ray cluster at address: " in proc.stderr
    done = [json.loads((out / "shards" / f"s{i}of3_done.json").read_text()) for i in range(3)]
    assert [d["computed_this_run"] for d in done] == [9, 9, 9]
    pids = {d["pid"] for d in done}
    assert len(pids) == 3 and proc.pid not in pids  # a fresh Ray worker per shard
    t = time.perf_counter()
    proc = _cli(tmp_path, "scan.merge=true", f"scan.output_dir={out}")
    seconds["merge"] = time.perf_counter() - t
    assert proc.returncode == 0, proc.stderr
    _same_as_unsharded(out, one)
    print("ray timings (s):", {k: round(v, 1) for k, v in seconds.items()})

    # Shard 2's worker killed once it has started (the shards are collected in order, so
    # shards 0 and 1 finish): the launcher reports it, the merge refuses and names it.
    killed = tmp_path / "killed"
    sweep = tmp_path / "sweep2"
    with subprocess.Popen(
            [sys.executable, "-m", "libra_jax.scan", "-m", "space.npus=16", "space.max_dims=2",
             "space.budgets_gbps=[100]", "workloads=[{file: workload/GPT_3.txt, tp: 4}]",
             "scan.chunk_size=8", "scan.solve_chunk=8", f"hydra.sweep.dir={sweep}",
             f"compilation_cache_dir={tmp_path / 'jax_cache'}", "scan.num_shards=3",
             "scan.shard_index=range(0,3)", f"scan.output_dir={killed}", *_ray(ray_address)],
            cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE) as launcher:
        try:
            deadline = time.monotonic() + 240
            pid = None
            while pid is None or not (killed / "shards" / "s2of3_manifest.json").exists():
                assert launcher.poll() is None and time.monotonic() < deadline
                pid = _pid_with_open(sweep / "2" / "scan.log")
                time.sleep(0.05)
            os.kill(pid, signal.SIGKILL)
            _, stderr = launcher.communicate(timeout=240)
        finally:
            if launcher.poll() is None:
                launcher.kill()
    assert launcher.returncode != 0
    assert "Worker" in stderr or "worker" in stderr, stderr[-2000:]
    proc = _cli(tmp_path, "scan.merge=true", f"scan.output_dir={killed}")
    assert proc.returncode == 1
    assert re.search(r"1 of 3 shards are not complete: s2of3 \([01] of 2 chunks, no "
                     r"completion record\)", proc.stderr), proc.stderr
    assert not (killed / "top_k.md").exists()

    proc = _cli(tmp_path, "scan.num_shards=3", "scan.shard_index=2",
                f"scan.output_dir={killed}", *_ray(ray_address), multirun=True)
    assert proc.returncode == 0, proc.stderr
    proc = _cli(tmp_path, "scan.merge=true", f"scan.output_dir={killed}")
    assert proc.returncode == 0, proc.stderr
    _same_as_unsharded(killed, one)


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
