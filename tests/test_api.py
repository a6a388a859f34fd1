"""The public API (`libra_jax/__init__.py`) and the layering of the package.

The import graph is read from the source (ast), so the checks see every import, including
those inside functions: no cycles between modules, no module importing another module's
private (underscore) names, and every import pointing down the layers
types -> inputs -> model -> solvers -> studies -> cli -> entry points.
"""

from __future__ import annotations

import ast
import pathlib
import re
import textwrap

import numpy as np
import pytest

import libra_jax

PKG = pathlib.Path(libra_jax.__file__).resolve().parent
LAYERS = ["types", "inputs", "model", "solvers", "studies", "cli", "entry"]


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:  # the package itself: the public API sits on top
        return len(LAYERS)
    if parts[1] in ("train", "evaluate", "scan") and len(parts) == 2:
        return LAYERS.index("entry")
    if parts[1] == "conf":
        return 0
    return LAYERS.index(parts[1])


def _imports() -> dict[str, list[tuple[str, list[str]]]]:
    """module -> [(imported module, names imported from it)]."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for mod, path in modules.items():
        edges = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not node.module.startswith("libra_jax"):
                    continue
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    if sub in modules:  # `from libra_jax.model import timing`
                        edges.append((sub, []))
                    else:
                        edges.append((node.module, [alias.name]))
            elif isinstance(node, ast.Import):
                edges += [(a.name, []) for a in node.names if a.name.startswith("libra_jax.")]
        graph[mod] = edges
    return graph


def test_no_private_cross_module_imports():
    bad = [(mod, target, name) for mod, edges in _imports().items() for target, names in edges
           for name in names if name.startswith("_") and target != mod]
    assert bad == []


def test_no_import_cycles():
    graph = {m: {t for t, _ in e if t != m and t != "libra_jax"} for m, e in _imports().items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(m, stack):
        state[m] = 1
        for t in graph.get(m, ()):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [m])
    assert cycles == []


def test_imports_point_down_the_layers():
    up = [(mod, target) for mod, edges in _imports().items() for target, _ in edges
          if target != "libra_jax" and _layer(target) > _layer(mod)]
    assert up == []


def test_the_command_layer_only_parses_and_prints():
    """`libra_jax.cli` turns configs into the studies' inputs, calls them, and prints and
    writes what they return: it imports the studies, the input readers, the types and the
    public package, never the model or the solvers."""
    allowed = ("libra_jax.studies", "libra_jax.inputs", "libra_jax.types", "libra_jax.cli")
    bad = [(mod, target) for mod, edges in _imports().items() if mod.startswith("libra_jax.cli")
           for target, _ in edges
           if target != "libra_jax" and not target.startswith(allowed)]
    assert bad == []


def test_importing_the_package_leaves_the_dtype_alone():
    """float64 is switched on by the entry points and the solvers, not by an import."""
    import subprocess
    import sys
    code = ("import jax, libra_jax, libra_jax.cli.train, libra_jax.cli.scan; "
            "print(jax.config.jax_enable_x64)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_public_api_names_exist_and_are_listed():
    assert sorted(libra_jax.__all__) == sorted(set(libra_jax.__all__))
    for name in libra_jax.__all__:
        assert hasattr(libra_jax, name), name
    exported = {n for n in dir(libra_jax) if not n.startswith("_")}
    subpackages = {"inputs", "model", "solvers", "studies", "cli", "conf", "types",
                   "train", "evaluate", "scan"}
    assert exported - subpackages == set(libra_jax.__all__)


def test_docstring_example_runs_and_solves_turing_nlg():
    """The package docstring's example, run as written; the answer is the pinned optimum's
    step time (test_optima pins it to the reference; here: certified, budget met)."""
    example = re.search(r"::\n\n(.*?)\n\nLayers", libra_jax.__doc__, re.S).group(1)
    namespace: dict = {}
    exec(textwrap.dedent(example), namespace)
    result, many, step_s = namespace["result"], namespace["many"], namespace["step_s"]
    assert result.status == "ok" and result.optimality_gap <= 1e-6
    assert np.isclose(np.sum(result.bandwidth_gbps), 500.0, rtol=1e-9)
    assert len(many.status) == 1000 and all(s == "ok" for s in many.status)
    np.testing.assert_allclose(many.bandwidth_gbps[17], result.bandwidth_gbps, rtol=1e-9)
    assert np.isclose(float(step_s) * 1e9, result.step_time_ns, rtol=1e-9)


def test_public_api_is_float64_without_the_callers_x64_switch():
    """A Python user who never turns on jax_enable_x64 still gets float64 results from the
    solvers (the test process has x64 on, so this runs in a fresh interpreter)."""
    import json
    import subprocess
    import sys

    code = textwrap.dedent("""
        import json, jax, numpy as np, libra_jax as lj
        inputs = lj.LIBRA_INPUTS_DIR
        net = lj.parse_notation("RI(16)_FC(8)_SW(32)")
        wl = lj.load_workload(inputs / "workload/Turing_NLG.txt",
                              inputs / "communicator/Turing_NLG_3D.yml", net.num_dims)
        p = lj.build_problem(net, wl, None, lj.ConstraintSpec(total_bw_gbps=500.0))
        r = lj.solve(p)
        many = lj.solve_batch([p] * 3)
        print(json.dumps({"x64": bool(jax.config.jax_enable_x64), "status": r.status,
                          "step": r.step_time_ns, "gap": r.optimality_gap,
                          "bw": np.asarray(r.bandwidth_gbps).tolist(),
                          "batch_step": float(many.step_time_ns[2]),
                          "dtype": str(np.asarray(many.bandwidth_gbps[0]).dtype)}))
    """)
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                    text=True, check=True).stdout.strip().splitlines()[-1])
    here = libra_jax.solve(libra_jax.build_problem(
        libra_jax.parse_notation("RI(16)_FC(8)_SW(32)"),
        libra_jax.load_workload(libra_jax.LIBRA_INPUTS_DIR / "workload/Turing_NLG.txt",
                                libra_jax.LIBRA_INPUTS_DIR / "communicator/Turing_NLG_3D.yml",
                                3),
        None, libra_jax.ConstraintSpec(total_bw_gbps=500.0)))
    assert out["x64"] is False  # the caller's default is untouched
    assert out["status"] == "ok" and out["gap"] <= 1e-6 and out["dtype"] == "float64"
    # The same numbers to the last bits: the two processes may run the problem in different
    # programs (the engine merges buckets and picks chunk sizes and a compile tier from what
    # each process compiled before, docs/solver.md "Shapes and compilations"), which round the
    # last bit differently (measured 1.2e-16); float32 would differ at 1e-7.
    assert out["step"] == pytest.approx(here.step_time_ns, rel=1e-12)
    assert out["batch_step"] == pytest.approx(here.step_time_ns, rel=1e-12)
    np.testing.assert_allclose(out["bw"], here.bandwidth_gbps, rtol=1e-12)
