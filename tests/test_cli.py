"""`python -m libra_jax.train` end to end (subprocesses: each pays for a JAX import, so few),
and the commands' runtime (`libra_jax.cli.runtime`: compilation cache and clock) in process."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
import yaml

from libra_jax.cli import runtime
from libra_jax.cli.report import RESULT_KEYS
from libra_jax.solvers.compilation import CompileClock

REPO = pathlib.Path(__file__).resolve().parents[1]
OPTIMA = json.loads((REPO / "tests" / "fixtures" / "libra_optima.json").read_text())
BASELINE_KEYS = {"bandwidth_gbps", "step_time_ns", "network_cost_usd", "time_x_cost", "projected",
                 "network_power_w", "total_power_w", "energy_per_step_j"}


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
    cache = tmp_path / "jax-cache"
    proc = _train("conf=turing_nlg", f"hydra.run.dir={run_dir}",
                  f"compilation_cache_dir={cache}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for words in ("RI(16)_FC(8)_SW(32)", "Turing_NLG", "step time", "speed-up", "status",
                  "solve time", "compile time"):
        assert words in proc.stdout
    # Status and result summary are logged (stderr and train.log); the table is not.
    log = (run_dir / "train.log").read_text()
    for text in (log, proc.stderr):
        assert "status ok, step_time_ns 3306256" in text and f"result: {run_dir}" in text
        assert "speed-up" not in text
    assert any(cache.iterdir())  # the compilation cache was written

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
    # The design at full precision, ready to paste into libra-evaluate (issue 17).
    line = next(x for x in proc.stdout.splitlines() if x.startswith("design at full precision"))
    pasted = line.split("'bandwidth_gbps=[")[1].rstrip("]'")
    assert [float(x) for x in pasted.split(",")] == result["bandwidth_gbps"]
    assert result["speedup"] == pytest.approx(
        result["baseline"]["step_time_ns"] / result["step_time_ns"], rel=1e-12
    )
    assert result["perf_per_cost_gain"] == pytest.approx(
        result["baseline"]["time_x_cost"] / result["time_x_cost"], rel=1e-12
    )
    assert result["status"] == "ok"
    assert _relative(result["step_time_ns"], case["step_time_ns"]) < 1e-6
    # The first run compiles (nothing is cached yet); solve_seconds leaves that out.
    assert result["compile_seconds"] > 0.1 and 0 <= result["solve_seconds"]


def test_optuna_sweep_minimises_what_main_returns(tmp_path):
    """hydra-optuna-sweeper over a discrete choice: main returns the step time (ns), so the
    best trial is the largest budget; a failed job returns +inf and the sweep goes on."""
    sweep_dir = tmp_path / "sweep"
    proc = _train("-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=grid",
                  "hydra.sweeper.n_trials=3", "conf=turing_nlg",
                  "constraints.total_bw_gbps=choice(400,600,-5)",
                  f"hydra.sweep.dir={sweep_dir}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # one job failed: reported at the end
    assert "1 of 3 jobs failed" in proc.stderr and "Traceback" not in proc.stderr
    results = {}
    for job in sweep_dir.iterdir():
        if job.is_dir():
            overrides = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text())
            budget = next(o.split("=")[1] for o in overrides if "total_bw_gbps" in o)
            results[budget] = json.loads((job / "result.json").read_text())
    assert sorted(results) == ["-5", "400", "600"]
    assert results["-5"]["status"] == "error"
    assert results["600"]["step_time_ns"] < results["400"]["step_time_ns"]
    best = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    assert best["best_params"] == {"constraints.total_bw_gbps": 600}
    assert best["best_value"] == results["600"]["step_time_ns"]


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
    assert lines[0] in (run_dir / "train.log").read_text()
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "error" and "no_such_workload.txt" in result["error"]


@pytest.fixture
def restore_cache_config():
    """enable_compilation_cache changes process-wide JAX settings: put them back."""
    names = ("jax_enable_compilation_cache", "jax_compilation_cache_dir",
             "jax_persistent_cache_min_compile_time_secs",
             "jax_persistent_cache_min_entry_size_bytes")
    saved = {n: getattr(jax.config, n) for n in names}
    yield
    for n, v in saved.items():
        jax.config.update(n, v)
    jax.experimental.compilation_cache.compilation_cache.reset_cache()


def test_compilation_cache_stores_and_reloads_small_programs(tmp_path, restore_cache_config):
    events = []

    def listen(event, **kwargs):
        events.append(event)

    def tiny(x):  # compiles in milliseconds: JAX's default threshold would not cache it
        return jnp.sin(x) * 3.0 + 1.0

    runtime.enable_compilation_cache(str(tmp_path / "cache"))
    jax.monitoring.register_event_listener(listen)
    try:
        with CompileClock() as first:
            jax.jit(tiny)(jnp.arange(3.0))
        assert any((tmp_path / "cache").iterdir())
        jax.clear_caches()  # forget the in-memory executable: the next call reads the disk
        with CompileClock() as second:
            jax.jit(tiny)(jnp.arange(3.0))
        assert events.count("/jax/compilation_cache/cache_hits") >= 1
        assert first.seconds > 0 and second.seconds > 0
        with CompileClock() as none:
            jax.jit(tiny)(jnp.arange(3.0))  # in memory: nothing traced or compiled
        assert none.seconds == 0.0
        runtime.enable_compilation_cache(None)
        hits = events.count("/jax/compilation_cache/cache_hits")
        jax.clear_caches()
        jax.jit(tiny)(jnp.arange(3.0))
        assert events.count("/jax/compilation_cache/cache_hits") == hits  # off: compiled
    finally:
        jax.monitoring.unregister_event_listener(listen)


def test_compile_clock_nets_compilation_out_of_solve_seconds():
    import dataclasses

    @dataclasses.dataclass
    class Result:
        solve_seconds: float

    clock = CompileClock()
    clock.seconds = 0.75
    assert clock.net(Result(2.0)).solve_seconds == 2.0 - 0.75
    assert clock.net(Result(0.5)).solve_seconds == 0.0  # never negative


def test_perf_per_cost_with_the_optax_method(tmp_path):
    """solver.method=optax objective=perf_per_cost runs (price continuation; formerly
    refused) and gives the pinned optimum, certified."""
    run_dir = tmp_path / "run"
    proc = _train("conf=dlrm", "objective=perf_per_cost", "solver.method=optax",
                  f"hydra.run.dir={run_dir}", "compilation_cache_dir=null", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((run_dir / "result.json").read_text())
    case = _case("DLRM", "3d", "total_bw_500gbps", "perf_per_cost")
    assert result["status"] == "ok" and result["optimality_gap"] <= 1e-6
    assert _relative(result["time_x_cost"], case["time_x_cost"]) < 1e-6


def test_hydra_composes_once_unless_the_command_line_may_set_the_mode():
    """`runtime.compose_once` skips Hydra's first composition (which only reads hydra.mode)
    where the mode is certainly unset; any override that may set it, or a primary config of
    the user's, keeps Hydra's own path. The shipped configs never set it."""
    ok = runtime.mode_is_default
    assert ok(["conf=turing_nlg"]) and ok(["-m", "conf=gpt3,turing_nlg"])
    assert ok(["conf=turing_nlg", "hydra.run.dir=/tmp/x", "hydra.job.chdir=false"])
    for argv in (["hydra.mode=MULTIRUN"], ["+hydra.mode=RUN"], ["hydra/launcher=libra_joblib"],
                 ["-m", "hydra/sweeper=optuna"], ["--config-dir", "/tmp", "conf=x"],
                 ["--config-name", "other"], ["-cp", "/tmp"]):
        assert not ok(argv), argv
    for path in (REPO / "libra_jax" / "conf").rglob("*.yaml"):
        data = yaml.safe_load(path.read_text()) or {}
        hydra_node = data.get("hydra") if isinstance(data, dict) else None
        assert not (isinstance(hydra_node, dict) and "mode" in hydra_node), path
        assert not (isinstance(data, dict) and "mode" in data
                    and path.parent.name in ("hydra", "launcher", "sweeper")), path


def test_hydra_mode_from_the_command_line_is_still_honoured(tmp_path):
    """hydra.mode=MULTIRUN without -m runs a sweep (Hydra's first composition reads it)."""
    proc = _train("conf=turing_nlg", "hydra.mode=MULTIRUN", f"hydra.sweep.dir={tmp_path / 's'}",
                  cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "s" / "0" / "result.json").read_text())["status"] == "ok"


def test_a_checked_config_is_not_converted_again_until_it_changes():
    """`config._as_config` hands back an object that went through the schema (the command's
    one conversion marks it); once changed it goes through the schema again, so a bad value
    set after the check is still refused."""
    import dataclasses

    from omegaconf import OmegaConf

    from libra_jax.cli import config
    from libra_jax.types import LibraInputError

    c = config._as_config(OmegaConf.structured(config.LibraConfig))
    assert config._as_config(c) is c
    c.objective = "fastest"
    with pytest.raises(LibraInputError, match="objective"):
        config._as_config(c)
    fresh = dataclasses.replace(config._as_config(OmegaConf.structured(config.LibraConfig)))
    assert config._as_config(fresh) is not fresh  # (not checked: converted)
