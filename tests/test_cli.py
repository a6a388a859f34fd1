"""`python -m libra_jax.train` end to end (subprocesses: each pays for a JAX import, so few)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from libra_jax.cli.report import RESULT_KEYS

REPO = pathlib.Path(__file__).resolve().parents[1]
OPTIMA = json.loads((REPO / "tests" / "fixtures" / "libra_optima.json").read_text())
BASELINE_KEYS = {"bandwidth_gbps", "step_time_ns", "network_cost_usd", "time_x_cost", "projected"}


def _case(workload, network, constraints, objective):
    for c in OPTIMA["cases"]:
        if (c["workload"], c["network"], c["constraints"], c["objective"]) == (
            workload,
            network,
            constraints,
            objective,
        ):
            return c
    raise KeyError((workload, network, constraints, objective))


def _train(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """Run the CLI from ``cwd`` (not the repo: presets must find the shipped inputs anyway)."""
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "libra_jax.train", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _relative(a, b):
    return abs(a - b) / abs(b)


def test_turing_nlg_run(tmp_path):
    run_dir = tmp_path / "run"
    proc = _train("conf=turing_nlg", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for words in ("RI(16)_FC(8)_SW(32)", "Turing_NLG", "step time", "speed-up", "status"):
        assert words in proc.stdout

    result = json.loads((run_dir / "result.json").read_text())
    assert tuple(result) == RESULT_KEYS
    assert set(result["baseline"]) == BASELINE_KEYS
    assert set(result["network"]) == {"notation", "blocks", "npus", "cost_tiers"}
    assert result["network"]["notation"] == "RI(16)_FC(8)_SW(32)"
    assert result["workload"]["name"] == "Turing_NLG"
    assert result["objective"] == "perf"

    case = _case("Turing_NLG", "3d", "total_bw_500gbps", "perf")
    base = case["equal_split"]
    assert result["baseline"]["projected"] is False
    assert result["baseline"]["bandwidth_gbps"] == pytest.approx(base["bandwidth_gbps"], rel=1e-12)
    assert _relative(result["baseline"]["step_time_ns"], base["step_time_ns"]) < 1e-9
    assert _relative(result["baseline"]["network_cost_usd"], base["network_cost_usd"]) < 1e-9

    assert sum(result["bandwidth_gbps"]) == pytest.approx(500.0, rel=1e-6)
    assert result["speedup"] == pytest.approx(
        result["baseline"]["step_time_ns"] / result["step_time_ns"], rel=1e-12
    )
    assert result["perf_per_cost_gain"] == pytest.approx(
        result["baseline"]["time_x_cost"] / result["time_x_cost"], rel=1e-12
    )
    assert result["status"] == "ok"
    assert _relative(result["step_time_ns"], case["step_time_ns"]) < 1e-6


def test_multirun_continues_after_a_bad_job(tmp_path):
    # Job 0 is fine; job 1 names the network twice (file from the preset, and npus) -> bad input.
    sweep_dir = tmp_path / "sweep"
    proc = _train(
        "-m",
        "conf=turing_nlg",
        "objective=perf_per_cost",
        "network.npus=null,[16,8,32]",
        f"hydra.sweep.dir={sweep_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "error: network.npus" in proc.stderr
    assert "1 of 2 jobs failed" in proc.stderr

    good = json.loads((sweep_dir / "0" / "result.json").read_text())
    bad = json.loads((sweep_dir / "1" / "result.json").read_text())
    assert tuple(good) == RESULT_KEYS
    assert good["objective"] == "perf_per_cost"
    assert good["status"] == "ok"
    case = _case("Turing_NLG", "3d", "total_bw_500gbps", "perf_per_cost")
    assert _relative(good["time_x_cost"], case["time_x_cost"]) < 1e-6
    assert bad["status"] == "error"
    assert "network.npus" in bad["error"]
    assert set(bad) == set(RESULT_KEYS) | {"error"}


def test_bad_input_exits_nonzero_without_traceback(tmp_path):
    run_dir = tmp_path / "run"
    proc = _train(
        "conf=turing_nlg", "workload.file=no_such_workload.txt", f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1
    assert "workload.file" in lines[0] and "no_such_workload.txt" in lines[0]
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "error" and "no_such_workload.txt" in result["error"]
