"""The pages of the documentation site that are generated, never written by hand.

* ``docs/reference/configuration.md``: every key of the train / evaluate schema (``LibraConfig``)
  and of the scan's (``ScanConfig``), its type, unit, default and meaning. Keys, types and
  defaults come from the dataclasses and the commands' YAML files; units and meanings from
  :mod:`config_keys` beside this file, whose keys must be exactly the schema's. The page is
  committed (so it reads on any Markdown viewer) and written by ``python
  docs/hooks/generate.py``; the site's build and tests/test_docs.py fail when it differs from
  what the schema gives now, and a key added to a schema without a line in config_keys.py (or a
  line left for a key that is gone) stops the generator.
* ``reference/api.md``: one mkdocstrings block per name of ``libra_jax.__all__``, grouped by the
  layer the name comes from (read from ``libra_jax/__init__.py`` without importing it);
  generated at each build.
* ``benchmarks/<name>.md``: every ``experiments/results/*.md`` (and the studies' own READMEs)
  as a page, with the PNG plots written next to it; generated at each build.

``site.py`` (the MkDocs hook) adds the build-time pages and checks the committed one;
tests/test_docs.py calls the same functions.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import importlib
import pathlib
import re
import sys
import typing
from typing import Any, Iterator

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "libra_jax"
RESULTS = ROOT / "experiments" / "results"
CONFIGURATION_PAGE = ROOT / "docs" / "reference" / "configuration.md"
REGENERATE = "python docs/hooks/generate.py"

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import config_keys  # noqa: E402  (the table beside this file)

# Where each schema lives (the first module that defines the class wins: modules are being
# split, and an older layout keeps working).
SCHEMAS = {
    "train": ("LibraConfig", ["libra_jax.studies.job.config", "libra_jax.cli.config"],
              "config.yaml"),
    "scan": ("ScanConfig", ["libra_jax.studies.scan.config"], "scan.yaml"),
}


# ----------------------------------------------------------------- configuration reference


def schema_class(kind: str) -> type:
    """The schema dataclass of ``kind`` ("train" or "scan")."""
    name, modules, _ = SCHEMAS[kind]
    for module in modules:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ModuleNotFoundError:
            continue
        if found is not None:
            return found
    raise ImportError(f"{name} is in none of {', '.join(modules)}: update docs/hooks/generate.py")


@dataclasses.dataclass(frozen=True)
class Key:
    """One configuration key."""

    path: str  # dotted, list entries as [i]: "workloads[i].file"
    type: str  # as the reference shows it
    default: Any  # the command's default (its YAML file, else the dataclass's)
    schema_default: Any  # the dataclass's own default (a config built in Python)
    group: str  # the top-level block it belongs to ("" for top-level keys)


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) is typing.Union and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]), True
    return tp, False


def _dataclass_in(tp: Any) -> tuple[type | None, bool]:
    """(the dataclass ``tp`` holds, whether as a list's entries), or (None, False)."""
    tp, _ = _strip_optional(tp)
    if dataclasses.is_dataclass(tp):
        return tp, False
    if typing.get_origin(tp) in (list, typing.List):
        (inner,) = typing.get_args(tp) or (Any,)
        inner, _ = _strip_optional(inner)
        if dataclasses.is_dataclass(inner):
            return inner, True
    return None, False


def type_text(tp: Any) -> str:
    """A field type as the reference shows it: ``float or null``, ``list of int``, a choice."""
    tp, optional = _strip_optional(tp)
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        text = " \\| ".join(f"`{m.value}`" for m in tp)
    elif origin in (list, typing.List):
        (inner,) = typing.get_args(tp) or (Any,)
        sub = _dataclass_in(tp)[0]
        inner_text = type_text(inner)
        if " or null" in inner_text:  # List[Optional[float]]: entries may be null
            inner_text = f"({inner_text})"
        text = "list of entries" if sub else f"list of {inner_text}"
    elif origin in (dict, typing.Dict):
        text = "mapping"
    elif tp is Any:
        text = "any"
    elif isinstance(tp, type):
        text = {"str": "string", "int": "int", "float": "float", "bool": "bool"}.get(
            tp.__name__, tp.__name__)
    else:
        text = str(tp).replace("typing.", "")
    return f"{text} or null" if optional else text


def _field_default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return dataclasses.MISSING


def _plain(value: Any) -> Any:
    """A default as plain data (enums by value, dataclasses as dicts)."""
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


_NO_VALUE = object()


def _yaml_value(data: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(data, dict) or part not in data:
            return _NO_VALUE
        data = data[part]
    return data


def schema_keys(kind: str) -> list[Key]:
    """Every key of the schema of ``kind``, in the schema's order."""
    cls = schema_class(kind)
    conf = yaml.safe_load((PACKAGE / "conf" / SCHEMAS[kind][2]).read_text())
    keys: list[Key] = []

    def walk(dc: type, prefix: list[str], yaml_node: Any, in_list: bool) -> None:
        hints = typing.get_type_hints(dc)
        for field in dataclasses.fields(dc):
            tp = hints[field.name]
            path = prefix + [field.name]
            dotted = ".".join(path).replace(".[i]", "[i]")
            sub, as_list = _dataclass_in(tp)
            own = _plain(_field_default(field))
            from_yaml = _NO_VALUE if in_list else _yaml_value(yaml_node, [field.name])
            if sub is not None and not as_list:
                walk(sub, path, from_yaml if from_yaml is not _NO_VALUE else {}, in_list)
                continue
            default = own if from_yaml is _NO_VALUE else _plain(from_yaml)
            group = path[0] if len(path) > 1 or as_list else ""
            keys.append(Key(dotted, type_text(tp), default, own, group))
            if as_list:
                walk(sub, path + ["[i]"], None, True)

    walk(cls, [], conf, False)
    return keys


def check_keys(kind: str) -> None:
    """Every key of the schema has a unit and a meaning in config_keys, and no other key does.

    Raises:
      KeyError: naming the keys missing from config_keys and those it has beyond the schema.
    """
    table = config_keys.KEYS[kind]
    have = [k.path for k in schema_keys(kind)]
    missing = [k for k in have if k not in table]
    extra = [k for k in table if k not in have]
    empty = [k for k in have if k in table and not (table[k][0] and table[k][1])]
    if missing or extra or empty:
        raise KeyError(
            f"docs/hooks/config_keys.py and the {kind} schema ({SCHEMAS[kind][0]}) disagree: "
            f"keys without a unit and meaning there: {missing}; keys there that the schema "
            f"lacks: {extra}; keys with an empty unit or meaning: {empty}"
        )


def _show(value: Any) -> str:
    if value is dataclasses.MISSING:
        return "(required)"
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip()
    if text.endswith("\n..."):
        text = text[: -len("\n...")]
    text = text.removesuffix("...").strip()
    return f"`{text}`".replace("|", "\\|")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


GROUP_TITLES = {
    "train": {
        "": "Top-level keys",
        "network": "`network`: the network",
        "cost_model": "`cost_model`: prices (and the technology catalogue)",
        "workload": "`workload`: one workload",
        "constraints": "`constraints`: on the bandwidth vector",
        "power": "`power`: power apart from the network",
        "solver": "`solver`: which optimiser",
        "workloads": "`workloads`: several workloads on one network",
        "cosearch": "`cosearch`: mapping co-search",
        "system": "`system`: collective execution (`model=pipelined`)",
    },
    "scan": {
        "": "Top-level keys",
        "space": "`space`: the design space",
        "workloads": "`workloads`: the scanned workloads",
        "scan": "`scan`: how the scan runs",
        "report": "`report`: the summary",
    },
}

INTRO = {
    "train": (
        "`libra-train` and `libra-evaluate` (`python -m libra_jax.train` / `.evaluate`). Schema: "
        "`{module}.LibraConfig`; the commands' defaults: `libra_jax/conf/config.yaml` (a preset, "
        "`conf=<name>`, and the `constraints=` / `dnn=` groups then override them)."
    ),
    "scan": (
        "`libra-scan` (`python -m libra_jax.scan`). Schema: `{module}.ScanConfig`; the "
        "command's defaults: `libra_jax/conf/scan.yaml`."
    ),
}


def configuration_page() -> str:
    """The configuration reference, as Markdown."""
    out = [
        "# Configuration reference",
        "",
        "<!-- Generated by `python docs/hooks/generate.py` from the config schemas: do not "
        "edit. Units and meanings: docs/hooks/config_keys.py. -->",
        "",
        "Every key of the commands' configs, generated from the schemas, so it cannot drift "
        "from the code (the site's build and the tests fail when this page differs from what "
        "the schemas give, or a schema key has no unit and meaning). Set any key on the command line as `key=value`; `null` means not "
        "set. Units: bandwidth **GB/s per NPU per dimension**, cost **$**, time **ns**, power "
        "**W** (1 GB = 1e9 bytes, so bytes / (GB/s) = ns). *default* is the command's default "
        "(its YAML file); where a config built in Python (the dataclass) starts from another "
        "value, the meaning says so. How the checks treat a bad key or value: "
        "[Optimise a network](../guide/train.md#the-configuration).",
        "",
    ]
    for kind, title in (("train", "Train and evaluate"), ("scan", "Scan")):
        check_keys(kind)
        cls = schema_class(kind)
        table = config_keys.KEYS[kind]
        out += [f"## {title}", "", INTRO[kind].format(module=cls.__module__), ""]
        groups: dict[str, list[Key]] = {}
        for key in schema_keys(kind):
            groups.setdefault(key.group, []).append(key)
        for group, keys in groups.items():
            heading = GROUP_TITLES[kind].get(group, f"`{group}`")
            out += [f"### {heading}", ""]
            out += ["| key | type | unit | default | meaning |", "|---|---|---|---|---|"]
            for key in keys:
                unit, meaning = table[key.path]
                if _plain(key.schema_default) != _plain(key.default) and \
                        key.schema_default is not dataclasses.MISSING:
                    meaning += f" (Python default: {_show(key.schema_default)})"
                out.append(f"| `{key.path}` | {key.type} | {_cell(unit)} | "
                           f"{_show(key.default)} | {_cell(meaning)} |")
            out.append("")
    return "\n".join(out)


# ----------------------------------------------------------------------- API reference

LAYER_TITLES = [
    ("inputs", "Inputs: networks, workloads, cost models"),
    ("model", "Model: problems and the step-time functions"),
    ("solvers", "Solvers"),
    ("studies", "Studies"),
    ("types", "Types and errors"),
]


def public_names() -> dict[str, str]:
    """``libra_jax.__all__`` -> the module each name is imported from (read by ast)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    origin: dict[str, str] = {}
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                origin[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[attr-defined]
    missing = [n for n in names if n not in origin]
    if missing:
        raise KeyError(f"libra_jax.__all__ names not imported in __init__.py: {missing}")
    return {n: origin[n] for n in names}


def api_page() -> str:
    """The Python API reference: an mkdocstrings block per public name, by layer."""
    names = public_names()
    out = [
        "# Python API reference",
        "",
        "<!-- Generated by docs/hooks/generate.py from libra_jax.__all__: do not edit. -->",
        "",
        "Every name of `libra_jax.__all__` (`import libra_jax as lj`), from its docstring, "
        "grouped by the layer it comes from. How to use them together: "
        "[Python API](../guide/python-api.md). Inner modules (e.g. "
        "`libra_jax.inputs.astrasim`, `libra_jax.studies.sensitivity`) are documented in "
        "their own docstrings and on the pages of their capability.",
        "",
    ]
    by_layer: dict[str, list[str]] = {}
    for name, module in names.items():
        parts = module.split(".")
        layer = parts[1] if len(parts) > 1 else "types"
        by_layer.setdefault(layer, []).append(name)
    titles = dict(LAYER_TITLES)
    for layer in [k for k, _ in LAYER_TITLES] + sorted(set(by_layer) - set(titles)):
        if layer not in by_layer:
            continue
        out += [f"## {titles.get(layer, layer)}", ""]
        for name in sorted(by_layer[layer], key=str.lower):
            out += [f"::: libra_jax.{name}", "    options:", "      heading_level: 3", ""]
    return "\n".join(out)


# -------------------------------------------------------------------------- benchmarks

# Pages beyond experiments/results/*.md: (page name, source file, title if it has none).
EXTRA_RESULTS = [
    ("experiments", ROOT / "experiments" / "README.md"),
    ("scan_4096", ROOT / "experiments" / "scan_4096" / "README.md"),
    ("scan_16k", ROOT / "experiments" / "scan_16k" / "README.md"),
    ("physical_study", RESULTS / "physical_study" / "table.md"),
]


# Short titles for the nav, in its order; a results file not named here comes after them, under
# its own first heading.
NAV_TITLES = {
    "experiments": "Experiments: scripts and how to rerun them",
    "speedup": "1. Speed-up over the equal split",
    "perf_per_cost": "2. Perf-per-cost",
    "pareto": "3. Pareto front: time vs cost",
    "multi_workload": "4. One design for three models",
    "dims_3d_vs_4d": "5. 3D vs 4D at equal cost",
    "claims": "6. The paper's claims",
    "latency_aware": "7. LIBRA's optimum, latency-aware",
    "physical_study": "Physical study: link technologies",
    "scan_4096": "Scan: 4,096 NPUs",
    "scan_16k": "Scans of 10^7-10^9 designs",
    "bench_solvers": "Bench: solvers",
    "bench_batch": "Bench: batch engine (CPU)",
    "bench_batch_gpu_h200": "Bench: batch engine (H200)",
    "bench_coldstart": "Bench: cold start",
    "bench_coldstart_gpu_h200": "Bench: cold start (H200)",
    "bench_coldstart_calibration": "Bench: cold-start cost model",
    "bench_launchers": "Bench: launchers",
}


def benchmark_sources() -> list[tuple[str, pathlib.Path]]:
    """(page name, Markdown source) of every benchmark page, in the order of the nav."""
    pages = [(p.stem, p) for p in sorted(RESULTS.glob("*.md"))]
    found = dict([(n, p) for n, p in EXTRA_RESULTS if p.exists()] + pages)
    known = [n for n in NAV_TITLES if n in found]
    return [(n, found[n]) for n in known] + [(n, p) for n, p in found.items() if n not in known]


def nav_title(name: str, source: pathlib.Path) -> str:
    """The page's title in the nav: a short one, or its first heading without code."""
    if name in NAV_TITLES:
        return NAV_TITLES[name]
    title = re.sub(r"\s*\([^)]*`[^)]*\)", "", title_of(source.read_text(), name))
    return title.replace("`", "")


def _images(name: str, source: pathlib.Path) -> list[pathlib.Path]:
    """The PNG plots that belong to a results page: ``<name>.png``, ``<name>_*.png``, or the
    PNGs in the page's own folder."""
    if source.parent != RESULTS:
        return sorted(source.parent.glob("*.png"))
    return sorted(p for p in RESULTS.glob("*.png")
                  if p.stem == name or p.stem.startswith(name + "_"))


def title_of(text: str, name: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return name.replace("_", " ")


def benchmark_pages() -> Iterator[tuple[str, str, list[pathlib.Path]]]:
    """(page name, Markdown, images) of every benchmark page."""
    for name, source in benchmark_sources():
        text = source.read_text()
        rel = source.relative_to(ROOT)
        images = _images(name, source)
        head = f"<!-- Generated from {rel} at build time: edit that file. -->\n\n"
        if not text.lstrip().startswith("# "):
            head += f"# {title_of(text, name)}\n\n"
        tail = f"\n\n*Source: `{rel}`.*\n"
        if images:
            tail += "\n## Plots\n\n" + "\n\n".join(
                f"![{p.name}](img/{p.name})" for p in images) + "\n"
        yield name, head + text + tail, images


def benchmark_index() -> str:
    """The list of benchmark pages (the nav lists them too)."""
    out = [
        "# Results of the studies and benchmarks",
        "",
        "<!-- Generated by docs/hooks/generate.py: do not edit. -->",
        "",
        "Each page below is a file of `experiments/` as its script last wrote it, with its "
        "measurements and their dates (the scripts and how to rerun them: "
        "[Experiments](experiments.md)); the figures the guide quotes are collected, with "
        "their dates, in [Performance](../performance.md).",
        "",
    ]
    for name, source in benchmark_sources():
        out.append(f"- [{nav_title(name, source)}]({name}.md): "
                   f"{title_of(source.read_text(), name)} (`{source.relative_to(ROOT)}`)")
    return "\n".join(out) + "\n"


def stale_configuration_page() -> str | None:
    """Why the committed configuration page is not what the schemas give now, or None."""
    want = configuration_page()
    have = CONFIGURATION_PAGE.read_text() if CONFIGURATION_PAGE.exists() else None
    if have == want:
        return None
    where = "is missing" if have is None else "differs from the schemas"
    return (f"docs/reference/configuration.md {where}: run `{REGENERATE}` (and give every new "
            "key its unit and meaning in docs/hooks/config_keys.py)")


def main() -> None:
    """Writes docs/reference/configuration.md from the schemas."""
    CONFIGURATION_PAGE.parent.mkdir(parents=True, exist_ok=True)
    CONFIGURATION_PAGE.write_text(configuration_page())
    print(f"wrote {CONFIGURATION_PAGE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
