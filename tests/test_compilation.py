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
from libra_jax.solvers.compilation import STORE
ps = [problem_from_arrays(np.array([[1.0, 2.0, 0.5]]) * (i + 1), np.ones(1), 0.01, None,
                          ConstraintSpec(total_bw_gbps=100.0)) for i in range(3)]
r = solve_batch(ps)
print(json.dumps(dict(dir=jax.config.jax_compilation_cache_dir, compile=r.compile_seconds,
                      solve=r.solve_seconds, status=list(r.status), loaded=STORE.loaded,
                      compiled=STORE.compiled, step=[float(x) for x in r.step_time_ns])))
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
    """LIBRA_JAX_CACHE_DIR=<dir>: the first solve_batch of a process keeps its kernel's
    executable there (the store, `<dir>/executables`), and a second process loads it
    (compiling nothing, the same results to the last bit); an empty value turns the cache
    off (nothing written, nothing loaded)."""
    folder = tmp_path / "cache"
    first = _run(str(folder))
    assert first["dir"] == str(folder) and first["status"] == ["ok"] * 3
    assert (first["loaded"], first["compiled"]) == (0, 1)
    kept = sorted((folder / "executables").iterdir(), key=lambda f: f.suffix != ".xla")
    assert [f.suffix for f in kept] == [".xla", ".txt"], kept
    # (the notes: which bucket program the executable is, for later processes' planners)
    note = kept[1].read_text().splitlines()
    assert len(note) == 1 and "IpmConfig(" in note[0] and "|((4, 4, " in note[0], note
    second = _run(str(folder))
    assert (second["loaded"], second["compiled"]) == (1, 0)
    assert second["compile"] < first["compile"], (first, second)
    assert second["step"] == first["step"]
    kept[0].write_bytes(b"damaged")  # a file that does not load is compiled again
    third = _run(str(folder))
    assert (third["loaded"], third["compiled"]) == (0, 1) and third["step"] == first["step"]
    off = _run("")
    assert off["dir"] is None and off["status"] == ["ok"] * 3
    assert (off["loaded"], off["compiled"]) == (0, 1)
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
    """The documented stacked path (experiments/bench_coldstart.stacked_groups: one
    problems_from_stacked per (D, mode) group,
    phases zero-padded) gives the problems problem_from_arrays builds one by one: the same
    optima."""
    sys.path.insert(0, str(REPO / "experiments"))
    try:
        from bench_coldstart import build_problems, random_problems, stacked_groups
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


PROGRAMS_SNIPPET = """
import json, sys
sys.path.insert(0, {exp!r})
from bench_coldstart import build_problems, random_problems
from libra_jax.solvers import batch
first = batch.solve_batch(build_problems(random_problems(1, 200)))
after_first = batch.compiled_programs()
second = batch.solve_batch(build_problems(random_problems(2, 10000, 3.0)))
print(json.dumps(dict(first=after_first, second=batch.compiled_programs() - after_first,
                      ok=[first.status.count("ok"), second.status.count("ok")])))
"""


def test_a_first_call_compiles_few_programs_and_a_larger_one_few_more():
    """Issue 20's program count, in a fresh process without a cache: a first solve_batch of
    200 mixed random problems (D 2-5, K 1-8, = and <= totals: 8 buckets) compiles at most 3
    programs (it compiles 1: `plan_buckets` merges the buckets), a second call of 10,000
    others at most 1 more (it compiles none: the compiled chunk size is reused)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), **{compilation.CACHE_ENV: ""})
    code = PROGRAMS_SNIPPET.format(exp=str(REPO / "experiments"))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    import json
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["ok"] == [200, 10000]
    assert got["first"] <= 3 and got["second"] <= 1, got


def test_plan_buckets_merges_while_compiling_costs_more_than_padding():
    """The cost model of the bucket merge, by hand: 8 small buckets of a first call go into
    their elementwise maximum (one quick program instead of 8); buckets of 100,000 problems
    each stay apart (padding D 4 -> 8 would cost more than a program) and get full
    programs; a compiled bucket that holds everything is used rather than compiling a
    smaller one, up to the point where a new program pays for itself."""
    from libra_jax.solvers import batch as B

    shapes = [(d, k, i, 1 - i, 0, 0) for d in (4, 8) for k in (4, 8) for i in (0, 1)]
    plan = B.plan_buckets({s: 25 for s in shapes}, 1024)
    assert set(plan.values()) == {(8, 8, 1, 1, 0, 0)}
    assert B.program_plan((8, 8, 1, 1, 0, 0), 200, 1024)[1:] == ("quick", [256])
    # padding 100,000 D-4 problems to D 8: 100,000 x 10.5 us x (8^1.2 - 4^1.2) x 1.4 ~ 10 s
    a, b = (4, 4, 1, 0, 0, 0), (8, 4, 1, 0, 0, 0)
    assert B.plan_buckets({a: 100000, b: 100000}, 1024) == {a: a, b: b}
    assert B.program_plan(a, 100000, 1024)[1] == "full"
    seen = frozenset({((8, 8, 1, 1, 0, 0), 256, "quick")})
    assert B.plan_buckets({a: 1000}, 1024, seen) == {a: (8, 8, 1, 1, 0, 0)}  # 1.1 s < 2.4 s
    assert B.plan_buckets({a: 3000}, 1024, seen) == {a: a}  # a quick program of its own
    # 10,000 after the first call: one full program of 1024 pays for itself
    assert B.program_plan((8, 8, 1, 1, 0, 0), 10000, 1024, seen)[1:] == ("full", [1024] * 10)
    # the chunk plans: a compiled size is reused; without one, full chunks and one more
    assert B.chunk_plan(10000, 1024, {256}, 2e-4) == [256] * 40
    assert B.chunk_plan(10000, 1024, (), 2e-4) == [1024] * 10
    assert B.chunk_plan(200, 1024) == [256]


def test_on_an_accelerator_the_plan_pays_chunks_more_than_padding(monkeypatch):
    """On the H200 a chunk costs ~5 ms whatever it holds: the CPU's model planned 10^6
    gpt3_4d problems as 977 chunks of 1024, which ran at half the rate of 16 chunks of
    65536. On an accelerator the plan is the 16; a single call still reuses a compiled
    program when a new one costs more than it saves; the CPU's plans are unchanged."""
    from libra_jax.solvers import batch_plan as P

    shape = (4, 12, 0, 1, 0, 0)
    cpu = [P.program_plan(shape, n, 256)[1:] for n in (10000, 1000000)]
    assert cpu == [("full", [256] * 40), ("full", [256] * 3907)]
    monkeypatch.setattr(P, "on_accelerator", lambda: True)
    assert P.program_plan(shape, 1000000, 65536)[1:] == ("full", [65536] * 16)
    done = frozenset({(shape, 1024, "full")})
    assert P.program_plan(shape, 1000000, 65536, done)[1:] == ("full", [1024] * 977)
    assert P.program_plan(shape, 10**7, 65536, done)[1:] == ("full", [65536] * 153)
    # (the plans of a process are kept by what decides them, the backend too)
    counts = {shape: 1000000}
    assert P.plan_call(counts, 65536, frozenset(), None)[1][shape] == ("full", [65536] * 16)
    # (the quick tier, not measured on an accelerator, only when asked for)
    assert P.plan_call({shape: 200}, 65536, frozenset(), None)[1][shape][0] == "full"
    assert P.plan_call({shape: 200}, 65536, frozenset(), "quick")[1][shape][0] == "quick"
    monkeypatch.setattr(P, "on_accelerator", lambda: False)
    assert P.plan_call(counts, 65536, frozenset(), None)[1][shape] != ("full", [65536] * 16)


STORED_SNIPPET = """
import json, numpy as np, jax, jax.numpy as jnp
from libra_jax.solvers.compilation import STORE, stored

@stored(static_argnames="power")
def pinv_power(a, power=1):  # calls LAPACK (an SVD)
    return jnp.linalg.pinv(a) ** power

with jax.enable_x64(True):
    a = np.array([[2.0, 1.0], [1.0, 3.0], [0.0, 1.0]])
    one, two = pinv_power(a), pinv_power(a, power=2)
    try:
        pinv_power(a, 2)
    except TypeError as e:
        message = str(e)
print(json.dumps(dict(one=np.asarray(one).tolist(), two=np.asarray(two).tolist(),
                      loaded=STORE.loaded, compiled=STORE.compiled, message=message)))
"""


def test_a_stored_program_that_calls_lapack_loads_and_runs_in_a_fresh_process(tmp_path):
    """`compilation.stored`: a static keyword makes a program of its own; the second process
    loads both without compiling and runs them (a program that calls LAPACK needs jaxlib's
    LAPACK kernels set up first: without that, the loaded pinv crashed the process)."""
    import json

    env = dict(os.environ, PYTHONPATH=str(REPO), **{compilation.CACHE_ENV: str(tmp_path)})
    runs = []
    for _ in range(2):
        p = subprocess.run([sys.executable, "-c", STORED_SNIPPET], env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    first, second = runs
    want = np.linalg.pinv(np.array([[2.0, 1.0], [1.0, 3.0], [0.0, 1.0]]))
    np.testing.assert_allclose(first["one"], want, rtol=1e-12)
    np.testing.assert_allclose(first["two"], want**2, rtol=1e-12)
    assert (first["compiled"], first["loaded"]) == (2, 0)
    assert (second["compiled"], second["loaded"]) == (0, 2)
    assert second["one"] == first["one"] and second["two"] == first["two"]
    assert "['power'] by keyword" in first["message"], first  # (not a third program)


def test_a_cached_command_traces_and_compiles_nothing(tmp_path):
    """A second ``libra-train conf=turing_nlg`` with the same cache folder loads every
    program from the store: JAX traces, lowers and compiles nothing (each would cost tens
    of ms to seconds of a ~3 s process), and the table is the same."""
    env = dict(os.environ, PYTHONPATH=str(REPO), JAX_LOG_COMPILES="1")
    outs = []
    for i in range(2):
        p = subprocess.run([sys.executable, "-m", "libra_jax.train", "conf=turing_nlg",
                            f"compilation_cache_dir={tmp_path / 'cache'}",
                            f"hydra.run.dir={tmp_path / str(i)}"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        outs.append(p)
    assert "Finished tracing" in outs[0].stderr  # (the log is on: the first run compiles)
    for word in ("Finished tracing", "Finished jaxpr to MLIR", "Finished XLA compilation"):
        assert word not in outs[1].stderr, outs[1].stderr[-3000:]
    table = [ln for ln in outs[0].stdout.splitlines() if "time" not in ln]
    assert table == [ln for ln in outs[1].stdout.splitlines() if "time" not in ln]
    assert "HiGHS" not in outs[0].stdout + outs[1].stdout  # (its banner kept out of the table)


def test_kernels_compile_where_xla_rejects_the_packages_compile_option(tmp_path):
    """The CUDA plugin of jax 0.11.2 rejects ``xla_cpu_use_fusion_emitters`` ("No such
    compile option") and every kernel failed to compile on an H200. An option this XLA does
    not know reproduces that here: the option is dropped and the solve is the same."""
    snippet = ("from libra_jax import types\n"
               "types.COMPILER_OPTIONS['xla_no_such_option_for_this_test'] = True\n"
               + SNIPPET + "print(json.dumps(types.compiler_options()))\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), **{compilation.CACHE_ENV: str(tmp_path)})
    p = subprocess.run([sys.executable, "-c", snippet], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    import json
    *_, solved, kept = p.stdout.strip().splitlines()
    assert json.loads(kept) == {}
    ref = _run("")
    assert json.loads(solved)["status"] == ref["status"]
    np.testing.assert_allclose(json.loads(solved)["step"], ref["step"], rtol=1e-9)


def test_the_package_jit_keeps_its_option_where_accepted_and_pickles_by_reference():
    import pickle

    from libra_jax import types
    from libra_jax.solvers import batch_run

    assert types.compiler_options() == types.COMPILER_OPTIONS  # (this jaxlib's CPU XLA)
    assert pickle.loads(pickle.dumps(batch_run._kernel)) is batch_run._kernel
    double = types.jit(lambda x: 2 * x)
    assert float(double(np.float64(1.5))) == 3.0 and double.__name__ == "<lambda>"
