"""Shipped presets with collectives over part of a dimension: the step ``model=pipelined``
reports (`timing.step_time_ns`: such a group as its pg_name flat rings,
`model/step_partial.py`) against ASTRA-sim 2.x run on the files ``export_astrasim=true``
writes (``astrasim/run.sh``: network YAML, system JSON, Chakra ETs and
``wl.comm_groups.json``), and the hierarchical replay libra_jax used before
(`step.simulate_step`), at ``bw = linspace(50, 200, D)`` GB/s, dp_overlap, 2 chunks.

    python experiments/partial_groups_astrasim.py [--presets gpt3_4d ...] \\
        [--out experiments/results/partial_groups_astrasim.md]

ASTRA-sim's binaries: ``$ASTRA_SIM_DIR`` (default
``/work/astra_ws/astra-sim/build/astra_analytical/build/bin``); one run at a time.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.model import step, timing
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.export import export_astrasim

BIN = pathlib.Path(os.environ.get("ASTRA_SIM_DIR",
                                  "/work/astra_ws/astra-sim/build/astra_analytical/build/bin"))


def _inputs(preset: str):
    with initialize_config_dir(config_dir=str(config.CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"conf={preset}", "model=pipelined"])
    network, workload, _, _ = config.to_inputs(cfg)
    tm, _ = config.to_timing(cfg, network.num_dims, network)
    return network, workload, tm


def run(preset: str, backend: str, workdir: pathlib.Path, timeout_s: float) -> dict:
    network, workload, tm0 = _inputs(preset)
    tm = dataclasses.replace(tm0, training_loop="dp_overlap", chunks=2, network_backend=backend)
    bw = np.linspace(50.0, 200.0, network.num_dims)
    out = workdir / f"{preset}_{backend}"
    export_astrasim(LibraConfig(export_astrasim=True), out, network, bw, tm, workload)
    ours = timing.step_time_ns(workload, network, tm, bw)
    before = step.simulate_step(step.step_graph(workload, "dp_overlap"), network.block_codes,
                                network.npus, bw, tm).time_ns
    name = "Aware" if backend == "aware" else "Unaware"
    env = {"ASTRA_SIM_BIN": str(BIN / f"AstraSim_Analytical_Congestion_{name}"),
           "PATH": "/usr/bin:/bin"}
    t0 = time.perf_counter()
    proc = subprocess.run(["sh", str(out / "astrasim" / "run.sh")], capture_output=True,
                          text=True, env=env, timeout=timeout_s, cwd=out)  # its log/ there
    cycles = [int(x) for x in re.findall(r"finished, (\d+) cycles", proc.stdout + proc.stderr)]
    if not cycles:
        raise RuntimeError(f"{preset} {backend}: ASTRA-sim gave no step: "
                           f"{(proc.stdout + proc.stderr)[-400:]}")
    astra = float(max(cycles))
    return dict(preset=preset, backend=backend, astra_ns=astra, ours_ns=ours,
                before_ns=before, astra_s=time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="*",
                    default=["gpt3_4d", "gpt3_4d_multi", "gb200_nvl72", "tpu_v4"])
    ap.add_argument("--out", type=pathlib.Path, default=None)
    ap.add_argument("--timeout-s", type=float, default=1200.0)
    args = ap.parse_args(argv)
    lines = ["| preset | backend | ASTRA-sim ms | libra_jax now ms (rel) | before ms (rel) | "
             "ASTRA-sim s |", "|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for preset in args.presets:
            for backend in ("unaware", "aware"):
                r = run(preset, backend, pathlib.Path(tmp), args.timeout_s)
                a = r["astra_ns"]
                lines.append(
                    f"| {preset} | {backend} | {a / 1e6:,.3f} | {r['ours_ns'] / 1e6:,.3f} "
                    f"({r['ours_ns'] / a - 1:+.2%}) | {r['before_ns'] / 1e6:,.3f} "
                    f"({r['before_ns'] / a - 1:+.2%}) | {r['astra_s']:.0f} |")
                print(lines[-1], flush=True)
    if args.out:
        args.out.write_text(
            "# Groups over part of a dimension: libra_jax against ASTRA-sim on the exported "
            "files\n\n`python experiments/partial_groups_astrasim.py`: bw = linspace(50, 200, "
            "D) GB/s, dp_overlap, 2 chunks; 'now': `timing.step_time_ns` (pg_name flat "
            "rings), 'before': the hierarchical replay (`step.simulate_step`).\n\n"
            + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
