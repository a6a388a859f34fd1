"""Scans and sweeps through a running Ray cluster (`hydra/launcher=libra_ray`): a head node of
one machine bound to 127.0.0.1 that declares 2 CPUs (free ports, a temp dir, stopped when the
module's tests end, even when they fail); with the shipped launcher config (`num_cpus: auto`,
2 CPUs per task here, so one task at a time), a 3-shard scan whose shard 2 worker is killed
partway (the launcher fails, the merge refuses naming the shard, the shard rerun alone
completes the scan, which equals the unsharded run byte for byte; next to the rerun, a job with
bad input is reported at the end and the exit status is 1), every port of the head, its
workers and the launching process on loopback; a request no node can hold refused before any
task is submitted; a 4-job `libra_jax.train` sweep (1 CPU per task) with one failing job.

Kept short for the default suite: the tiny scan of `test_scan._cli`, its unsharded run shared
by the launcher tests (`test_scan.tiny_reference`), whose compile cache the workers load the
kernel from; merges in this process.
"""

from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from test_scan import REPO, TINY_SCAN, same_as_reference, tiny_reference  # noqa: F401

from libra_jax.studies import scan
from libra_jax.types import LibraInputError

pytest.importorskip("hydra_plugins.hydra_ray_launcher",
                    reason="the ray extra is not installed (pip install -e '.[ray]')")

RAY = pathlib.Path(sys.executable).with_name("ray")
#: Ray's logical CPUs on the head: a small node (`ray start --head --num-cpus=2`), on which
#: the shipped `num_cpus: auto` asks for 2 CPUs per task.
HEAD_CPUS = 2


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head node of this machine bound to 127.0.0.1 (`bench_launchers.ray_head`: free
    ports, a temp dir, stopped when the module's tests end, even when they fail): (its address
    127.0.0.1:PORT, the pid of `ray start`, the root of the head's process tree)."""
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        from bench_launchers import ray_head
    finally:
        sys.path.pop(0)
    t = time.perf_counter()
    with ray_head(HEAD_CPUS, env=dict(os.environ, PYTHONPATH=str(REPO))) as head:
        print(f"\nRay head started in {time.perf_counter() - t:.1f} s")
        yield head


@pytest.fixture
def ray_address(ray_head):
    return ray_head[0]


def _ray(address: str) -> list[str]:
    """The launcher overrides of this cluster: its address (the shipped config otherwise)."""
    return ["hydra/launcher=libra_ray", f"hydra.launcher.ray.init.address={address}"]


def _proc_net() -> dict[str, tuple[str, str, int]]:
    """Listening sockets of this machine: inode -> (protocol, address, port), from
    /proc/net/{tcp,tcp6,udp,udp6} (TCP in LISTEN, UDP unconnected)."""
    found = {}
    for proto, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):
        for line in pathlib.Path(f"/proc/net/{proto}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != state:
                continue
            ip, port = fields[1].split(":")
            raw = struct.pack("<4I", *struct.unpack(">4I", bytes.fromhex(ip))) \
                if len(ip) == 32 else struct.pack("<I", int(ip, 16))
            family = socket.AF_INET6 if len(raw) == 16 else socket.AF_INET
            found[fields[9]] = (proto, socket.inet_ntop(family, raw), int(port, 16))
    return found


def _tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def listening(*roots: int) -> set[tuple[str, str, str, int]]:
    """The listening sockets of the process trees of ``roots``: (process name, protocol,
    address, port)."""
    sockets, found = _proc_net(), set()
    for pid in {p for root in roots for p in _tree(root)}:
        try:
            name = _name(pid)
            links = [os.readlink(fd) for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:  # ended meanwhile
            continue
        for link in links:
            if link.startswith("socket:[") and link[8:-1] in sockets:
                found.add((name, *sockets[link[8:-1]]))
    return found


def _name(pid: int) -> str:
    """A process's name: its program (a Python script's or module's name, or the title Ray
    gives its workers and agents, e.g. "ray::_run_job")."""
    argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    argv = [a.strip() for a in argv.split("\0") if a.strip()] or [""]
    name = argv[0].split("/")[-1]
    if name.startswith("python"):
        rest = [a for a in argv[1:] if not a.startswith("-")]
        name = "-m " + argv[argv.index("-m") + 1] if "-m" in argv else (
            rest[0].split("/")[-1] if rest else name)
    return name.split()[0] if name.startswith("ray::") else name


def beyond_loopback(sockets) -> list:
    """The sockets of ``sockets`` (`listening`) on an address other than loopback (127.0.0.0/8,
    ::1, or 127.x mapped into IPv6). No port is exempt: Ray 2.60 binds every server of a node
    whose address is 127.0.0.1 to 127.0.0.1 (docs/launchers.md, "Security")."""
    def loopback(ip: str) -> bool:
        a = ipaddress.ip_address(ip)
        return a.is_loopback or bool(getattr(a, "ipv4_mapped", None)
                                     and a.ipv4_mapped.is_loopback)
    return sorted(s for s in sockets if not loopback(s[2]))


class Sampler(threading.Thread):
    """Collects `listening` of each of some process trees every 0.2 s until stopped (Ray's
    workers and the launching process listen only while a multirun runs): ``seen[root]``."""

    def __init__(self, *roots: int):
        super().__init__(daemon=True)
        self.seen = {root: set() for root in roots}
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.2):
            for root, seen in self.seen.items():
                seen |= listening(root)


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


def test_three_shards_on_a_two_cpu_head_shipped_config_one_killed_then_rerun_merge(
        tmp_path, ray_head, ray_address, tiny_reference):
    one, cache = tiny_reference
    out, sweep = tmp_path / "sharded", tmp_path / "sweep"
    seconds = {}
    t = time.perf_counter()
    # Shard 2's worker is killed with SIGKILL once it has written a chunk (partway).
    with _scan(tmp_path, cache, out, "scan.shard_index=range(0,3)",
               f"hydra.sweep.dir={sweep}", *_ray(ray_address)) as launcher:
        sampler = Sampler(ray_head[1], launcher.pid)
        sampler.start()
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
            sampler.done.set()
            if launcher.poll() is None:
                launcher.kill()
    seconds["3 shards, one killed"] = time.perf_counter() - t
    assert launcher.returncode == 1, stderr
    assert f"Connecting to existing Ray cluster at address: {ray_address}" in stderr
    assert "Ray Launcher is launching 3 jobs" in stdout + stderr
    # The shipped num_cpus: auto fits the 2-CPU node (8 would never be scheduled).
    assert "hydra.launcher.ray.remote.num_cpus = auto: 2 CPUs per task" in stdout + stderr
    # Every listening port of the head's daemons, the shards' workers and the launching
    # process (a Ray driver: its own gRPC port) is on loopback.
    sampler.join()
    head, driver = sampler.seen[ray_head[1]], sampler.seen[launcher.pid]
    names = {s[0] for s in head}
    assert {"gcs_server", "raylet"} <= names, head
    assert any(n.startswith("ray::_run_job") for n in names), names  # a worker, running
    assert driver, "the launching process's gRPC port was not seen"
    assert beyond_loopback(head | driver) == []
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
         f"compilation_cache_dir={tmp_path / 'jax_cache'}", *_ray(ray_address),
         "hydra.launcher.ray.remote.num_cpus=1"],  # a number that fits: asked for as is
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


def test_the_head_listens_on_loopback_only(ray_head):
    """Every port of the idle head's daemons (GCS, raylet, agents, client server, metrics)
    listens on 127.0.0.1 (the workers' and the driver's: the scan test above)."""
    address, root = ray_head
    sockets = listening(root)
    gcs_port = int(address.rsplit(":", 1)[1])
    assert any(s[0] == "gcs_server" and s[3] == gcs_port for s in sockets), sockets
    names = {s[0] for s in sockets}
    assert {"gcs_server", "raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent",
            "-m ray.util.client.server", "monitor.py", "dashboard.py"} <= names, names
    assert beyond_loopback(sockets) == []
    print("listening:", sorted(sockets))


def test_a_request_no_node_can_hold_is_refused_before_any_task(tmp_path, ray_address):
    sweep = tmp_path / "sweep"
    t = time.perf_counter()
    with _scan(tmp_path, tmp_path / "jax_cache", tmp_path / "out",
               "scan.shard_index=range(0,3)", f"hydra.sweep.dir={sweep}", *_ray(ray_address),
               "hydra.launcher.ray.remote.num_cpus=64",
               "hydra.launcher.ray.remote.num_gpus=1") as proc:
        stdout, stderr = proc.communicate(timeout=120)
    seconds = time.perf_counter() - t
    print(f"refused in {seconds:.1f} s (the whole command)")
    assert proc.returncode == 2, stderr
    assert stderr.splitlines()[-1] == (
        "error: hydra.launcher.ray.remote.num_cpus = 64 and num_gpus = 1: no node of the Ray "
        f"cluster at {ray_address} has 64 CPUs, nor 1 GPU; its live nodes: 2 CPUs, 0 GPUs "
        "(1 node). Ask for what a node has (num_cpus=auto: the largest node's CPUs, up to 8).")
    assert "Traceback" not in stdout + stderr
    assert "Ray Launcher is launching" not in stdout + stderr  # no task submitted
    assert not sweep.exists() or not any(sweep.iterdir())
    assert seconds < 30
