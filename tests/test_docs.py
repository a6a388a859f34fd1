"""The documentation site and the README: built strict, their examples run, their lists complete.

* The site (mkdocs.yml, docs/) builds with warnings as errors: a broken link or anchor, a page
  the nav names that is missing, a schema key without its unit and meaning, or a docstring
  mkdocstrings cannot read fails the suite, as CI runs it.
* The getting-started page's commands and Python examples, the Python API page's examples and
  the README's Python example are executed, and their output compared with what the page shows
  (`...` stands for what changes from run to run), so the pages cannot drift from the code.
* docs/architecture.md lists every module under libra_jax/ (and none that is gone).
* The README stays a front door: under 300 lines, the two quick-start commands as CI and a new
  user run them, its examples importing from ``libra_jax`` (its ``__all__``).
"""

from __future__ import annotations

import doctest
import functools
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.S | re.M)


@functools.lru_cache(maxsize=1)
def _generate():
    """docs/hooks/generate.py, the generators of the site's reference pages."""
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "hooks" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def _blocks(path: pathlib.Path, lang: str) -> list[tuple[int, str]]:
    """(line number, body) of every fenced block of ``lang`` in ``path``."""
    text = path.read_text()
    return [(text.count("\n", 0, m.start()) + 2, m.group(2))
            for m in FENCE.finditer(text) if m.group(1) == lang]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["NO_MKDOCS_2_WARNING"] = "1"  # Material's banner about MkDocs 2 (stderr, not a warning)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


# ------------------------------------------------------------------------ the site's build


def test_site_builds_strict(tmp_path):
    """`mkdocs build --strict`: every link, anchor, nav page and generated page is sound."""
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    # the generated pages are there, the configuration reference with every key of both schemas
    page = (site / "reference" / "configuration" / "index.html").read_text()
    generate = _generate()
    for kind in ("train", "scan"):
        for key in generate.schema_keys(kind):
            assert f"<code>{key.path}</code>" in page, (kind, key.path)
    api = (site / "reference" / "api" / "index.html").read_text()
    for name in generate.public_names():
        assert f'id="libra_jax.{name}"' in api, name
    for name, _ in generate.benchmark_sources():
        assert (site / "benchmarks" / name / "index.html").exists(), name


def test_strict_build_refuses_a_broken_link(tmp_path):
    """The validation settings of mkdocs.yml make a broken link and a missing anchor warnings,
    which --strict turns into a failed build (a one-page site with those settings)."""
    import yaml

    settings = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(
        "# Home\n\n[gone](missing.md), [no anchor](other.md#nowhere)\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n")
    config = {"site_name": "t", "docs_dir": "docs", "validation": settings["validation"]}
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "'missing.md', but the target is not found" in proc.stderr
    assert "does not contain an anchor '#nowhere'" in proc.stderr


def test_configuration_reference_is_current():
    """docs/reference/configuration.md is what the schemas give now (else: regenerate it)."""
    assert _generate().stale_configuration_page() is None


def test_every_schema_key_has_a_unit_and_meaning():
    """docs/hooks/config_keys.py covers exactly the keys of LibraConfig and ScanConfig."""
    generate = _generate()
    for kind in ("train", "scan"):
        generate.check_keys(kind)
        keys = generate.schema_keys(kind)
        assert len(keys) > 30
        assert all(k.type for k in keys)


def test_every_page_is_in_the_nav():
    """Each hand-written page of docs/ is reachable from the nav (mkdocs only says so at INFO)."""
    import yaml

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]

    def pages(entry):
        if isinstance(entry, str):
            yield entry
        elif isinstance(entry, list):
            for e in entry:
                yield from pages(e)
        elif isinstance(entry, dict):
            for v in entry.values():
                yield from pages(v)

    listed = set(pages(nav))
    written = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
               if "hooks" not in p.relative_to(DOCS).parts}
    assert written - listed == set()


# ---------------------------------------------------------------- executed examples


def _run_pycon(path: pathlib.Path) -> None:
    """Every ```pycon block of ``path`` as one doctest session, in the page's order."""
    blocks = _blocks(path, "pycon")
    assert blocks, f"{path.name} has no pycon example"
    parser, globs = doctest.DocTestParser(), {"__name__": path.stem}
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    out: list[str] = []
    for line, body in blocks:
        test = parser.get_doctest(body, globs, f"{path.name}:{line}", str(path), line - 1)
        runner.run(test, out=out.append, clear_globs=False)
        globs = test.globs  # DocTest copies its globals: carry them to the next block
    assert runner.failures == 0, "".join(out)


def _console_commands(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """(line, command, shown stdout) of every ```console block of ``path``."""
    runs = []
    for line, body in _blocks(path, "console"):
        lines = body.splitlines()
        assert lines and lines[0].startswith("$ "), f"{path.name}:{line}: starts with '$ '"
        command = lines[0][2:]
        i = 1
        while command.endswith("\\"):
            command = command[:-1] + " " + lines[i].strip()
            i += 1
        runs.append((line, command, "\n".join(lines[i:]) + "\n"))
    return runs


@pytest.mark.parametrize("page", ["getting-started.md"])
def test_console_examples_print_what_the_page_shows(page, tmp_path):
    """The page's commands, run in an empty directory: their stdout is what the page shows."""
    checker = doctest.OutputChecker()
    env = _env()
    env["PATH"] = os.pathsep.join([str(pathlib.Path(sys.executable).parent), env["PATH"]])
    commands = _console_commands(DOCS / page)
    assert commands
    for line, command, shown in commands:
        proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, f"{page}:{line}: {command}\n{proc.stderr}"
        assert checker.check_output(shown, proc.stdout, FLAGS), (
            f"{page}:{line}: {command}\n"
            + checker.output_difference(doctest.Example(command, shown), proc.stdout, FLAGS))


@pytest.mark.parametrize("path", [DOCS / "getting-started.md", DOCS / "guide" / "python-api.md",
                                  README], ids=lambda p: p.name)
def test_python_examples_print_what_the_page_shows(path):
    _run_pycon(path)


# ------------------------------------------------------------------------ architecture


def test_architecture_lists_every_module():
    """docs/architecture.md names every module under libra_jax/ as `libra_jax/....py`, and no
    module that is not there."""
    package = ROOT / "libra_jax"
    modules = {p.relative_to(ROOT).as_posix() for p in package.rglob("*.py")}
    text = (DOCS / "architecture.md").read_text()
    listed = set(re.findall(r"`(libra_jax/[\w/]+\.py)`", text))
    missing, gone = sorted(modules - listed), sorted(listed - modules)
    assert not missing, f"modules missing from docs/architecture.md: {missing}"
    assert not gone, f"docs/architecture.md lists modules that are gone: {gone}"


# ------------------------------------------------------------------------------ README


def test_readme_is_a_front_door():
    text = README.read_text()
    assert len(text.splitlines()) < 300
    # the two quick-start commands, exactly as a new user and CI (.ci/run) run them
    assert "pip install . && python -m libra_jax.train conf=turing_nlg" in text
    assert "pip install -e '.[test]' && python -m pytest -q" in text
    assert "python -m pytest -q" in (ROOT / ".ci" / "run").read_text()
    # every relative link leads to a file of the repository (the site's build checks docs/)
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), f"README.md links to {target}, which is not there"


def test_examples_import_the_public_api():
    """The README's and the guide's Python examples import from ``libra_jax`` (its __all__),
    not from inner modules."""
    import libra_jax

    pages = [README, DOCS / "getting-started.md", *sorted((DOCS / "guide").glob("*.md"))]
    for path in pages:
        for lang in ("python", "pycon"):
            for line, body in _blocks(path, lang):
                inner = re.findall(r"from libra_jax\.[\w.]+ import|import libra_jax\.", body)
                assert not inner, f"{path.name}:{line}: imports an inner module"
                for name in re.findall(r"\blj\.(\w+)", body):
                    assert name in libra_jax.__all__, f"{path.name}:{line}: lj.{name}"


def test_docs_tools_are_installed():
    """The test extra pulls the docs extra: CI has MkDocs, Material and mkdocstrings."""
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        assert importlib.util.find_spec(module) is not None, module
    assert shutil.which("bash")
