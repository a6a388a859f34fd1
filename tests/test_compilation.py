"""The persistent compilation cache for Python users (`solvers/compilation.py`) and one clock
for compilation and solving in the API's results (issue 20, points 3 and 5)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from libra_jax.model.problem import ConstraintSpec, problem_from_arrays
from libra_jax.solvers import compilation
from libra_jax.solvers.batch import BatchItem, solve_batch
from libra_jax.solvers.solve import solve

REPO = pathlib.Path(__file__).resolve().parents[1]
SNIPPET = """
import json, numpy as np, jax
from libra_jax.model.problem import ConstraintSpec, problem_from_arrays
from libra_jax.solvers.batch import solve_batch
ps = [problem_from_arrays(np.array([[1.0, 2.0, 0.5]]) * (i + 1), np.ones(1), 0.01, None,
                          ConstraintSpec(total_bw_gbps=100.0)) for i in range(3)]
r = solve_batch(ps)
print(json.dumps(dict(dir=jax.config.jax_compilation_cache_dir, compile=r.compile_seconds,
                      solve=r.solve_seconds, status=list(r.status))))
"""


def _run(env_value):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop(compilation.CACHE_ENV, None)
    if env_value is not None:
        env[compilation.CACHE_ENV] = env_value
    p = subprocess.run([sys.executable, "-c", SNIPPET], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    import json
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_api_uses_and_honours_the_cache_folder(tmp_path):
    """LIBRA_JAX_CACHE_DIR=<dir>: the first solve_batch of a process keeps its programs
    there, and a second process loads them (less compile time); an empty value turns the
    cache off."""
    folder = tmp_path / "cache"
    first = _run(str(folder))
    assert first["dir"] == str(folder) and first["status"] == ["ok"] * 3
    kept = list(folder.iterdir())
    assert any("kernel" in f.name for f in kept), kept
    second = _run(str(folder))
    assert second["compile"] < first["compile"], (first, second)
    off = _run("")
    assert off["dir"] is None and off["status"] == ["ok"] * 3
    assert compilation.cache_dir_from_env() in (compilation.DEFAULT_CACHE_DIR,
                                                os.environ.get(compilation.CACHE_ENV) or None)


def test_a_users_own_cache_is_left_alone(tmp_path, monkeypatch):
    """default_cache changes nothing when the user already chose a cache folder."""
    import jax

    before = jax.config.jax_compilation_cache_dir
    mine = str(tmp_path / "mine")
    jax.config.update("jax_compilation_cache_dir", mine)
    try:
        monkeypatch.setattr(compilation, "_DECIDED", False)
        monkeypatch.setenv(compilation.CACHE_ENV, str(tmp_path / "theirs"))
        compilation.default_cache()
        assert jax.config.jax_compilation_cache_dir == mine
        assert compilation._DECIDED  # decided once: later calls do not look again
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_results_report_compile_and_solve_seconds_apart_and_batches_index():
    ps = [problem_from_arrays(np.array([[1.0, 2.0]]) * (i + 1), np.ones(1), 0.0, None,
                              ConstraintSpec(total_bw_gbps=10.0 + i)) for i in range(4)]
    r = solve(ps[0])
    assert r.compile_seconds is not None and r.compile_seconds >= 0
    assert r.solve_seconds >= 0
    many = solve_batch(ps)
    assert many.compile_seconds >= 0 and many.solve_seconds >= 0
    item = many[0]
    assert isinstance(item, BatchItem) and item.status == "ok"
    np.testing.assert_array_equal(item.bandwidth_gbps, many.bandwidth_gbps[0])
    assert item.step_time_ns == many.step_time_ns[0]
    assert many[-1].step_time_ns == many.step_time_ns[3]
    assert many[np.int64(2)].iterations == int(many.iterations[2])
    assert [x.step_time_ns for x in many] == list(many.step_time_ns)
    assert [x.status for x in many[1:3]] == many.status[1:3]
    assert len(many[[0, 3]]) == 2
    with pytest.raises(IndexError):
        many[4]
    with pytest.raises(TypeError):
        many[1.0]
    with pytest.raises(TypeError):
        many["0"]


def test_the_stacked_path_for_mixed_sizes_equals_the_list():
    """experiments/bench_list_api.py's recipe (one problems_from_stacked per (D, mode) group,
    phases zero-padded) gives the problems problem_from_arrays builds one by one: the same
    optima."""
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        from bench_coldstart import build_problems, random_problems
        from bench_list_api import stacked_groups
    finally:
        sys.path.pop(0)
    raw = random_problems(7, 60)
    one = build_problems(raw)
    stacks, order = stacked_groups(raw)
    a = solve_batch(one)
    from libra_jax.solvers.batch import solve_stacked

    b = solve_stacked(stacks)
    got = np.empty(len(raw))
    got[order] = b.step_time_ns
    np.testing.assert_allclose(got, a.step_time_ns, rtol=1e-12)
    assert set(b.status) == {"ok"}
