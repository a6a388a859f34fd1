"""The package installs anywhere: the configs and the LIBRA inputs travel inside it, Hydra finds
the configs from any directory, and the console scripts exist.

The fast tests check the config search path from outside the repo and the contents of a
built wheel; the slow one installs the package (not editable) into a fresh venv and runs
``libra-train`` and ``libra-evaluate`` from another directory.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
PKG = REPO / "libra_jax"
SCRIPTS = {"libra-train": "libra_jax.cli.train:cli",
           "libra-evaluate": "libra_jax.cli.evaluate:cli",
           "libra-scan": "libra_jax.cli.scan:cli"}


def _source_copy(dest: pathlib.Path) -> pathlib.Path:
    """What `pip install .` reads (package, pyproject, README), copied so that building leaves
    no ``build/`` or ``*.egg-info`` in the working tree."""
    src = dest / "src"
    shutil.copytree(PKG, src / "libra_jax",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    return src


def _package_files(patterns: tuple[str, ...]) -> set[str]:
    """Files of the source package matching ``patterns``, as wheel paths."""
    return {p.relative_to(REPO).as_posix() for pattern in patterns for p in PKG.glob(pattern)
            if p.is_file() and "__pycache__" not in p.parts}


def test_configs_are_found_from_another_directory(tmp_path):
    """`--cfg job` composes the preset without running it: the primary config and the
    `conf` group come from the package (pkg://libra_jax/conf), not from the working dir."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "libra_jax.train", "conf=turing_nlg", "--cfg", "job"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["network"]["file"] == "network/3d_network.yml"
    assert cfg["workload"]["communicator_file"] == "communicator/Turing_NLG_3D.yml"
    assert cfg["constraints"]["total_bw_gbps"] == 500.0
    assert cfg["compilation_cache_dir"] == "~/.cache/libra_jax/jax"
    assert list(tmp_path.iterdir()) == []  # composing wrote nothing here


def test_wheel_holds_the_configs_the_inputs_and_the_scripts(tmp_path):
    src = _source_copy(tmp_path)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                    "-q", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("libra_jax-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = zf.read(entry_points).decode()
    yaml_files = _package_files(("conf/*.yaml", "conf/**/*.yaml"))
    data_files = _package_files(("data/**/*",))
    assert "libra_jax/conf/config.yaml" in yaml_files and "libra_jax/conf/scan.yaml" in yaml_files
    assert "libra_jax/conf/conf/turing_nlg.yaml" in yaml_files
    assert len(data_files) > 10
    assert yaml_files - names == set()
    assert data_files - names == set()
    for script, target in SCRIPTS.items():
        assert f"{script} = {target}" in scripts


@pytest.mark.slow
def test_fresh_venv_install_runs_from_another_directory(tmp_path):
    """`pip install .` (not editable) into a new venv, then the console scripts from a
    directory that is neither the repo nor the venv (about 20-60 s: pip installs JAX etc.
    from its cache)."""
    src = _source_copy(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    bin_dir = venv / "bin"
    subprocess.run([str(bin_dir / "pip"), "install", "-q", str(src)], check=True,
                   capture_output=True, text=True, timeout=1500)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    where = subprocess.run([str(bin_dir / "python"), "-c",
                            "import libra_jax; print(libra_jax.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert pathlib.Path(where.stdout.strip()).is_relative_to(venv)  # not the repo's copy

    train = subprocess.run(
        ["libra-train", "conf=turing_nlg", f"compilation_cache_dir={tmp_path / 'cache'}"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stderr
    (run_dir,) = (work / "outputs").glob("*/*")  # Hydra's default run dir, under cwd
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "ok" and abs(sum(result["bandwidth_gbps"]) - 500.0) < 1e-6
    assert "status ok" in (run_dir / "train.log").read_text()

    bw = ",".join(repr(x) for x in result["bandwidth_gbps"])
    evaluate = subprocess.run(
        ["libra-evaluate", "conf=turing_nlg", f"bandwidth_gbps=[{bw}]",
         f"hydra.run.dir={work / 'ev'}", "compilation_cache_dir=null"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert evaluate.returncode == 0, evaluate.stderr
    ev = json.loads((work / "ev" / "result.json").read_text())
    assert abs(ev["step_time_ns"] / result["step_time_ns"] - 1) < 1e-9
