"""A 3-shard scan through each launcher, side by side in one run: joblib (processes on this
machine), Ray (a head node on 127.0.0.1) and SLURM (the one-node cluster of
`slurm_local/setup.sh`), issue 21.

    python experiments/bench_launchers.py [--out FILE]

The scan is the tests' 27-design one (16 NPUs, 2 dims, GPT-3; `tests/test_scan._cli`): what
is measured is the engines' overhead, not the solver. Steps, each a whole process, timed
from outside: starting the cluster; one unsharded run (after a first one that fills the
compile cache, which every run then loads from, as the tests' workers do); for each engine the
3-shard multirun (3 tasks at once, 1 CPU each) and the merge (`scan.merge=true`), whose
top_k.md, pareto_front.csv and rows must equal the unsharded run's byte for byte. Writes a
markdown table to experiments/results/bench_launchers.md (or --out). SLURM is left out, with
the reason, where setup.sh cannot start a cluster (it needs root and the apt packages).

`ray_head` (a head node of this machine on free ports, stopped on exit) is also the Ray
test's (`tests/test_scan_ray.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pathlib
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from bench_coldstart import pythonpath

ROOT = pathlib.Path(__file__).resolve().parents[1]
SLURM_SETUP = ROOT / "experiments" / "slurm_local" / "setup.sh"


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


#: The environment of a head bound to 127.0.0.1 (docs/launchers.md, "Security"): Ray maps a
#: loopback --node-ip-address to the machine's network address unless multi-node clusters
#: are off (its switch for Windows and macOS, honoured on Linux too). `ray_head` also moves
#: the dashboard's and the autoscaler's metrics servers off their fixed ports (44227, 44217:
#: DASHBOARD_METRIC_PORT, AUTOSCALER_METRIC_PORT), so that two heads can run at once.
RAY_LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


@contextlib.contextmanager
def ray_head(cpus: int, env: dict | None = None):
    """A Ray head node of this machine bound to 127.0.0.1 (`ray start --head --block`,
    ``cpus`` logical CPUs, no GPU, no dashboard, free ports, a temp dir under /tmp), stopped
    on exit, even on an error. Yields (its address 127.0.0.1:PORT, the pid of `ray start`,
    whose process tree is the head's daemons and workers)."""
    # Short: Ray's unix sockets live under it (108-byte limit).
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    (gcs, client, dash, agent, agent_grpc, metrics, env_agent, dash_metrics,
     autoscaler_metrics) = free_ports(9)
    ray = pathlib.Path(sys.executable).with_name("ray")
    log_path = pathlib.Path(temp) / "head.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [str(ray), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         f"--port={gcs}", f"--num-cpus={cpus}", "--num-gpus=0",
         f"--ray-client-server-port={client}", "--include-dashboard=false",
         "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
         f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
         f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={env_agent}",
         f"--temp-dir={temp}", "--disable-usage-stats"],
        env=dict(os.environ if env is None else env, **RAY_LOOPBACK_ENV,
                 DASHBOARD_METRIC_PORT=str(dash_metrics),
                 AUTOSCALER_METRIC_PORT=str(autoscaler_metrics)),
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while "--block" not in log_path.read_text():
            if proc.poll() is not None:
                raise RuntimeError(f"ray start failed:\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                raise RuntimeError("the Ray head did not start in 120 s")
            time.sleep(0.1)
        yield f"127.0.0.1:{gcs}", proc.pid
    finally:
        # The head's daemons and workers are all in the process group of `ray start`, and
        # nothing of the cluster outlives it: SIGKILL at once (`ray start --block` on SIGTERM
        # took 4-10 s to stop them one by one).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def slurm_cluster(cpus: int):
    """The one-node SLURM cluster of setup.sh (``cpus`` CPUs), SLURM_CONF set in this
    process; yields None with the reason where it cannot start (exit 3), stopped on exit."""
    d = tempfile.mkdtemp(prefix="slurm", dir="/tmp")
    old = os.environ.get("SLURM_CONF")
    try:
        proc = subprocess.run(["bash", str(SLURM_SETUP), "start", d], capture_output=True,
                              text=True, env=dict(os.environ, SLURM_LOCAL_CPUS=str(cpus)))
        if proc.returncode == 3:
            yield proc.stderr.strip()
            return
        if proc.returncode != 0:
            raise RuntimeError(f"setup.sh start failed:\n{proc.stderr}")
        os.environ["SLURM_CONF"] = f"{d}/slurm.conf"
        yield None
    finally:
        subprocess.run(["bash", str(SLURM_SETUP), "stop", d], capture_output=True)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old
        shutil.rmtree(d, ignore_errors=True)


def _timed(cmd: list[str], cwd: pathlib.Path) -> float:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=pythonpath()))
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "experiments" / "results" /
                                         "bench_launchers.md"))
    args = ap.parse_args()
    work = pathlib.Path(tempfile.mkdtemp(prefix="bench_launchers"))
    cache = work / "jax_cache"

    sys.path.insert(0, str(ROOT / "tests"))
    from test_scan import TINY_SCAN, same_as_reference

    def scan(*overrides: str, multirun: bool = False) -> list[str]:
        return [sys.executable, "-m", "libra_jax.scan", *["-m"] * multirun, *TINY_SCAN,
                f"compilation_cache_dir={cache}", f"hydra.run.dir={work / 'hydra'}",
                *overrides]

    rows: dict[str, dict[str, float]] = {}
    notes = []
    try:
        _timed(scan(f"scan.output_dir={work / 'warm'}"), work)  # fills the compile cache
        unsharded = _timed(scan(f"scan.output_dir={work / 'one'}"), work)
        with contextlib.ExitStack() as clusters:
            t = time.perf_counter()
            # (its workers import this checkout, as the launching process does)
            address, _ = clusters.enter_context(
                ray_head(3, env=dict(os.environ, PYTHONPATH=pythonpath())))
            started = {"Ray": time.perf_counter() - t}
            t = time.perf_counter()
            slurm_missing = clusters.enter_context(slurm_cluster(3))
            started["SLURM"] = time.perf_counter() - t
            engines = {
                "joblib": ["hydra/launcher=libra_joblib"],
                "Ray": ["hydra/launcher=libra_ray",
                        f"hydra.launcher.ray.init.address={address}",
                        "hydra.launcher.ray.remote.num_cpus=1"],
                "SLURM": ["hydra/launcher=libra_slurm", "hydra.launcher.partition=local",
                          "hydra.launcher.cpus_per_task=1", "hydra.launcher.mem_gb=1"],
            }
            if slurm_missing:
                notes.append(f"SLURM not measured: {slurm_missing}")
                del engines["SLURM"]
            for name, launcher in engines.items():
                out = work / name
                shards = _timed(scan("scan.num_shards=3", "scan.shard_index=range(0,3)",
                                     f"scan.output_dir={out}",
                                     f"hydra.sweep.dir={work / ('sweep_' + name)}",
                                     *launcher, multirun=True), work)
                merge = _timed(scan("scan.merge=true", f"scan.output_dir={out}"), work)
                same_as_reference(out, work / "one")
                rows[name] = {"start the cluster": started.get(name, 0.0),
                              "3 shards": shards, "merge": merge}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    lines = [
        "# A 3-shard scan through each launcher (`experiments/bench_launchers.py`)",
        "",
        f"{platform.node()}, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')} UTC; "
        "the tests' 27-design scan, each step a whole process (imports and a warm compile "
        "cache included), 3 tasks at once with 1 CPU each; every merge equal byte for byte "
        "to the unsharded run, which took "
        f"{unsharded:.1f} s (one process, no launcher).",
        "",
        "| step | " + " | ".join(rows) + " |",
        "|---|" + "---:|" * len(rows),
        *(f"| {step} | " + " | ".join(f"{r[step]:.1f} s" if r[step] else "-"
                                     for r in rows.values()) + " |"
          for step in ("start the cluster", "3 shards", "merge")),
        *notes,
    ]
    text = "\n".join(lines) + "\n"
    pathlib.Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
