"""Mapping co-search: enumeration, reference placement, ranking against the shipped
communicators (GPT-3 and MSFT-1T on LIBRA's 4D network), drop accounting, CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.inputs.generators import (
    Npu,
    Parallel,
    Placement,
    Transformer,
    transformer_workload,
)
from libra_jax.inputs.workload import load_communicator
from libra_jax.model.problem import build_problem
from libra_jax.solvers.solve import solve
from libra_jax.studies.cosearch import (
    cosearch,
    enumerate_placements,
    placement_from_communicator,
)
from libra_jax.types import LibraInputError

REPO = pathlib.Path(__file__).resolve().parents[1]
INPUTS = REPO / "libra_jax" / "data" / "libra_inputs"


def _setup(preset: str):
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"conf={preset}"])
    network, workload, rates, spec = config.to_inputs(cfg)
    w = cfg.workload
    model = Transformer.parse(w.model)
    par = Parallel.parse(w.parallel, network.npus)
    npu = Npu.parse(w.npu)
    comm = load_communicator(config.resolve_path(cfg.cosearch.reference_communicator, "x"))
    ref = placement_from_communicator(comm, network.npus, "x")
    return network, build_problem(network, workload, rates, spec), model, par, npu, ref, rates, spec


def test_enumeration():
    npus = (4, 8, 4, 32)
    all_ = enumerate_placements(npus)
    # Ordered triples per dim of 2^k NPUs: C(k + 2, 2) -> 6 * 10 * 6 * 21.
    assert len(all_) == 6 * 10 * 6 * 21 == 7560 == len(set(all_))
    for p in all_[::97]:
        assert all(t * q * d == n for t, q, d, n in zip(p.tp, p.pp, p.dp, npus))
    fixed = enumerate_placements(npus, tp=16, pp=1)
    assert fixed and all(math.prod(p.tp) == 16 and math.prod(p.dp) == 256 for p in fixed)
    assert len(fixed) == sum(1 for p in all_ if math.prod(p.tp) == 16 and math.prod(p.pp) == 1)


def test_reference_placement_from_communicator():
    comm = load_communicator(INPUTS / "communicator" / "GPT_3_4d.yml")
    p = placement_from_communicator(comm, (4, 8, 4, 32), "x")
    assert p == Placement((4, 4, 1, 1), (1, 1, 1, 1), (1, 2, 4, 32))
    blocks = ("Ring", "FullyConnected", "Ring", "Switch")
    assert p.describe(blocks) == "TP16=RI4xFC4, PP1, DP256=FC2xRI4xSW32"


@pytest.mark.parametrize("preset,tp", [("gpt3_cosearch", 16), ("msft_1t_cosearch", 128)])
def test_cosearch_fixed_degrees_beats_shipped(preset, tp):
    """Degrees of the shipped communicator, every placement of them: the best is at least as
    fast as the shipped placement on the same generated model (same constraints)."""
    network, template, model, par, npu, ref, rates, spec = _setup(preset)
    res = cosearch(template, network, model, par, npu, tp=tp, pp=1, reference=ref)
    assert res.reference is not None and res.reference.placement == ref
    assert res.best.status == "ok" and res.reference.status == "ok"
    assert res.best.step_time_ns <= res.reference.step_time_ns * (1 + 1e-9)
    solved = len(res.ranked)
    assert res.enumerated == solved + sum(res.dropped.values()) + res.duplicates
    # The reference row equals a single solve of the shipped placement's generated workload.
    wl = transformer_workload(model, dataclasses.replace(par, placement=ref), npu,
                              network.num_dims)
    single = solve(build_problem(network, wl, rates, spec))
    assert res.reference.step_time_ns == pytest.approx(single.step_time_ns, rel=1e-9)
    steps = [r.step_time_ns for r in res.ranked]
    assert steps == sorted(steps)


def test_cosearch_drops_and_explains():
    network, template, model, par, npu, ref, _, _ = _setup("gpt3_cosearch")
    small = dataclasses.replace(npu, memory_gb=10.0)
    with pytest.raises(LibraInputError, match=r"does not fit in memory: \d+.*needs"):
        cosearch(template, network, model, par, small, tp=16, pp=1)


@pytest.mark.slow
@pytest.mark.parametrize("preset,best_ms,ref_ms", [
    ("gpt3_cosearch", 13091.510, 13316.801), ("msft_1t_cosearch", 125691.604, 138788.851)])
def test_full_cosearch_beats_shipped(preset, best_ms, ref_ms):
    """All 7,560 placements with free degrees (about 30-50 s each on 2 cores)."""
    network, template, model, par, npu, ref, _, _ = _setup(preset)
    res = cosearch(template, network, model, par, npu, reference=ref)
    assert res.enumerated == 7560
    assert res.best.step_time_ns / 1e6 == pytest.approx(best_ms, abs=1e-2)
    assert res.reference.step_time_ns / 1e6 == pytest.approx(ref_ms, abs=1e-2)
    assert res.best.step_time_ns < res.reference.step_time_ns


def test_cli_cosearch(tmp_path):
    run_dir = tmp_path / "run"
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "libra_jax.train", "conf=gpt3_cosearch", "cosearch.tp=16",
         "cosearch.pp=1", "cosearch.top_k=3", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "mapping co-search" in proc.stdout and " ref  TP16=RI4xFC4" in proc.stdout
    result = json.loads((run_dir / "result.json").read_text())
    cs = result["cosearch"]
    assert result["status"] == "ok" and len(cs["top_k"]) == 3
    assert cs["best"]["step_time_ns"] <= cs["reference"]["step_time_ns"]
    assert result["step_time_ns"] == pytest.approx(cs["best"]["step_time_ns"], rel=1e-9)
    assert cs["reference"]["mapping"] == "TP16=RI4xFC4, PP1, DP256=FC2xRI4xSW32"
    assert np.isclose(sum(cs["best"]["bandwidth_gbps"]), 500.0)
