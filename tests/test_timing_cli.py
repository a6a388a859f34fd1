"""The step-time models, sensitivities and ASTRA-sim export through the command lines
(`python -m libra_jax.train`, `python -m libra_jax.evaluate`); subprocesses, so few."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np

from libra_jax.cli.evaluate import EVALUATE_KEYS
from libra_jax.cli.report import RESULT_KEYS
from libra_jax.inputs.astrasim import import_network_yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
OPTIMA = json.loads((REPO / "tests" / "fixtures" / "libra_optima.json").read_text())


def _run(module: str, *args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def _optimum(workload, network, constraints):
    for c in OPTIMA["cases"]:
        if (c["workload"], c["network"], c["constraints"], c["objective"]) == (
                workload, network, constraints, "perf"):
            return c
    raise KeyError(workload)


def test_train_pipelined_chunk_search_exports_astrasim(tmp_path):
    run_dir = tmp_path / "run"
    proc = _run("libra_jax.train", "conf=gpt3_4d", "model=pipelined",
                "network.latency_ns=[500,500,500,500]", "system.chunks=[1,4,16]",
                "system.endpoint_delay_ns=10", "export_astrasim=true",
                f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for words in ("chunk-count search", "simulated step at the optimum", "marginal value"):
        assert words in proc.stdout
    res = json.loads((run_dir / "result.json").read_text())
    assert tuple(res) == RESULT_KEYS and res["status"] == "ok"
    assert res["timing_model"]["model"] == "pipelined"
    search = res["chunk_search"]
    assert [s["chunks"] for s in search] == [1, 4, 16]
    best = min(search, key=lambda s: s["step_time_ns"])
    assert best["best"] and res["timing_model"]["chunks"] == best["chunks"]
    np.testing.assert_allclose(res["step_time_ns"], best["step_time_ns"], rtol=1e-12)
    # Every collective of gpt3_4d spans part of a dimension (tensor parallel over 4 x 4 of
    # 4 x 8 NPUs, data parallel over 2 x 4 x 32 of 8 x 4 x 32): pg_name flat rings, as
    # ASTRA-sim runs their Chakra form, one chunk after another on dimension 0's queue. Each
    # hop is one hop of latency on its first differing dimension, each message pays it and
    # the endpoint delay, and each ring stage one endpoint delay more (steps + 1, Ring.cc),
    # so each chunk more adds (8 all-reduces x 30 messages + 2 all-gathers x 15 + the
    # 256-NPU all-reduce's 510) x (500 + 10) ns + 11 stages x 10 ns = 397,910 ns.
    by_k = {s["chunks"]: s["step_time_ns"] for s in search}
    assert best["chunks"] == 1
    np.testing.assert_allclose(by_k[4] - by_k[1], 3 * 397_910.0, rtol=1e-6)
    np.testing.assert_allclose(by_k[16] - by_k[4], 12 * 397_910.0, rtol=1e-6)
    # The simulated schedule is never below the convex model the solver minimises.
    assert res["step_time_exact_ns"] >= res["step_time_ns"] * (1 - 1e-12)
    sens = res["sensitivities"]
    assert sens["status"] in ("ok", "kink") and len(sens["d_step_ns_d_gift_gbps"]) == 4
    assert sens["d_step_ns_d_total_bw_gbps"] < 0
    net, bw, lat = import_network_yaml(run_dir / "astrasim" / "network.yml")
    assert net.npus == (4, 8, 4, 32) or list(net.npus) == [4, 8, 4, 32]
    np.testing.assert_allclose(bw, res["bandwidth_gbps"], rtol=1e-9)
    np.testing.assert_allclose(lat, [500.0] * 4)
    assert f"ASTRA-sim design: {run_dir / 'astrasim'}" in (run_dir / "train.log").read_text()
    system = json.loads((run_dir / "astrasim" / "system.json").read_text())
    assert system["preferred-dataset-splits"] == best["chunks"]
    assert system["endpoint-delay"] == 10


def test_evaluate_reproduces_the_pinned_optimum_and_reports_violations(tmp_path):
    case = _optimum("GPT_3", "4d", "multiple_constraints")
    bw = ",".join(repr(float(x)) for x in case["bandwidth_gbps"])
    run_dir = tmp_path / "ev"
    proc = _run("libra_jax.evaluate", "conf=gpt3_4d", "constraints=multiple_constraints",
                f"bandwidth_gbps=[{bw}]", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((run_dir / "result.json").read_text())
    assert tuple(res) == EVALUATE_KEYS
    np.testing.assert_allclose(res["step_time_ns"], case["step_time_ns"], rtol=1e-9)
    assert res["constraints"] == {"satisfied": True, "violated": []}
    log = (run_dir / "evaluate.log").read_text()  # the status is logged
    assert "step_time_ns" in log and "constraints met" in log and "result: " in log
    assert res["step_time_libra_ns"] is None  # the run's model is LIBRA's
    # Per-collective breakdown: every communicating layer-phase, busy times per dimension.
    assert len(res["breakdown"]) == 11 and len(res["breakdown"][0]["busy_ns"]) == 4
    np.testing.assert_allclose(
        res["comm_time_ns"], sum(b["time_ns"] for b in res["breakdown"]), rtol=1e-12)
    # A design that breaks bw[0] == 500 and the total, with the pipelined model.
    run_dir = tmp_path / "ev2"
    proc = _run("libra_jax.evaluate", "conf=gpt3_4d", "constraints=multiple_constraints",
                "bandwidth_gbps=[400,300,150,50]", "model=pipelined", "system.chunks=4",
                f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((run_dir / "result.json").read_text())
    assert not res["constraints"]["satisfied"]
    assert any("bw[0] == 500" in v for v in res["constraints"]["violated"])
    assert any("total_bw_gbps" in v for v in res["constraints"]["violated"])
    assert res["step_time_ns"] >= res["step_time_libra_ns"]  # latency-free, 4 chunks
    assert "VIOLATED" in proc.stdout
    assert "constraints VIOLATED" in (run_dir / "evaluate.log").read_text()


def test_bad_design_and_options_name_the_key(tmp_path):
    for args, words in [
        (["bandwidth_gbps=[1,2]"], "bandwidth_gbps"),
        ([], "bandwidth_gbps is null"),
        (["bandwidth_gbps=[1,2,3,4]", "model=pipelined", "schedule=themis"], "schedule"),
    ]:
        proc = _run("libra_jax.evaluate", "conf=gpt3_4d", *args,
                    f"hydra.run.dir={tmp_path / 'bad'}", cwd=tmp_path)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        # A bad choice (schedule) is refused by Hydra when it composes: "Error merging override".
        assert ("error:" in proc.stderr or "Error merging override" in proc.stderr) \
            and words in proc.stderr, proc.stderr
    proc = _run("libra_jax.train", "conf=gpt3_4d", "training_loop=async",
                f"hydra.run.dir={tmp_path / 'bad2'}", cwd=tmp_path)
    assert proc.returncode != 0 and "training_loop" in proc.stderr
