"""MkDocs hook (mkdocs.yml ``hooks:``): adds the generated pages of :mod:`generate` to the build.

* ``reference/api.md``, generated from ``libra_jax.__all__`` at every build;
* a check that the committed ``reference/configuration.md`` is what the schemas give now (a
  warning otherwise, which the strict build turns into a failure);
* ``benchmarks/index.md`` and one page per results file of ``experiments/`` (with its plots
  under ``benchmarks/img/``), each also added to the nav's "Benchmarks" section, so a new
  results file shows up without an edit here.

Nothing is written into docs/; a generator that fails (a schema key without a unit and meaning
in config_keys.py, say) fails the build.
"""

from __future__ import annotations

import logging
import pathlib
import sys

from mkdocs.structure.files import File, Files

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import generate  # noqa: E402

BENCHMARKS = "Benchmarks"
log = logging.getLogger("mkdocs.hooks.libra_jax")


def on_config(config):
    """The nav's "Benchmarks" section gets one entry per generated benchmark page."""
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and BENCHMARKS in entry:
            section = entry[BENCHMARKS]
            listed = {next(iter(e.values())) if isinstance(e, dict) else e for e in section}
            for name, source in generate.benchmark_sources():
                page = f"benchmarks/{name}.md"
                if page not in listed:
                    section.append({generate.nav_title(name, source): page})
    return config


def on_files(files: Files, config) -> Files:
    def add(path: str, content: str | None = None, source: pathlib.Path | None = None) -> None:
        if files.get_file_from_path(path) is not None:
            raise ValueError(f"docs/{path} exists by hand and is generated too: remove one")
        files.append(File.generated(config, path, content=content,
                                    abs_src_path=str(source) if source else None))

    stale = generate.stale_configuration_page()
    if stale:
        log.warning(stale)
    add("reference/api.md", generate.api_page())
    add("benchmarks/index.md", generate.benchmark_index())
    images = {}
    for name, text, pngs in generate.benchmark_pages():
        add(f"benchmarks/{name}.md", text)
        images.update({p.name: p for p in pngs})
    for png_name, png in sorted(images.items()):
        add(f"benchmarks/img/{png_name}", source=png)
    return files
