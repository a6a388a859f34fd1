"""What a command checks on its command line before Hydra runs, and the composed config's
keys against the schema.

:func:`check_command_line` is what the ``cli()`` entry points run before Hydra, so that what
Hydra would report as a composition error (or a traceback) is one ``error:`` paragraph: a call
with no arguments is told how to pick a preset, an override Hydra's parser rejects or the shell
split gets a hint on quoting, a misspelt key the closest key, a value of the wrong type what the
key takes, a run directory that cannot be made why.

Hydra adds any key given with ``+`` (or ``++``) even in struct mode (it sets struct off for that
update, ``force_add``), so a misspelt ``+key=value`` cannot be refused at compose time;
:func:`reject_unknown_keys` compares the composed config with the schema instead, and every
DictConfig passes through it on its way in (`libra_jax.cli.config`).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import os
import pathlib
import re
import sys
import tempfile
import typing
from typing import Any, Dict, Iterator, List, Sequence

from hydra._internal.utils import get_args_parser  # Hydra's own command-line parser
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException, ValidationError

from libra_jax.studies.job.config import CONF_DIR, LibraConfig, preset_hint
from libra_jax.types import Choice, LibraInputError, clip, show, show_path


def _dataclass_in(tp: Any) -> Any:
    """The dataclass a field type holds (itself, Optional[...] or List[...] of it), or None."""
    while not dataclasses.is_dataclass(tp):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if typing.get_origin(tp) not in (typing.Union, list) or len(args) != 1:
            return None
        tp = args[0]
    return tp


def _schema_paths(schema: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key the schema defines (list items as ``workloads.file``)."""
    for name, tp in typing.get_type_hints(schema).items():
        yield prefix + name
        sub = _dataclass_in(tp)
        if sub is not None:
            yield from _schema_paths(sub, f"{prefix}{name}.")


def _unknown_keys(data: dict, schema: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """``(dotted key, value, schema of its parent)`` of each key of ``data`` not in the schema."""
    hints = typing.get_type_hints(schema)
    for key, value in data.items():
        if key not in hints:
            yield prefix + str(key), value, schema
            continue
        sub = _dataclass_in(hints[key])
        if sub is None or value is None:
            continue
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    yield from _unknown_keys(item, sub, f"{prefix}{key}[{i}].")
        elif isinstance(value, dict):
            yield from _unknown_keys(value, sub, f"{prefix}{key}.")


def _key_hint(path: str, parent: Any, schema: Any) -> str:
    """What to say about ``path`` (dotted, list indices as ``[i]``), a key that is not in
    ``parent`` (the schema of the node it was put in): the closest valid key (``difflib``;
    among its siblings first, then among every key of ``schema``), or the keys there."""
    head, _, key = path.rpartition(".")
    siblings = list(typing.get_type_hints(parent))
    close = difflib.get_close_matches(key, siblings, n=1)
    if close:
        guess = f"{head}.{close[0]}" if head else close[0]
    else:  # a key put under the wrong parent: compare with every key's own name
        flat = re.sub(r"\[\d+\]", "", path)
        paths = [p for p in _schema_paths(schema) if not flat.startswith(p + ".")]
        close = difflib.get_close_matches(key, [p.rpartition(".")[2] for p in paths], n=1)
        guess = next((p for p in paths if p.rpartition(".")[2] == close[0]), None) \
            if close else None
    return (f"did you mean {guess}?" if guess else
            f"the keys there are {', '.join(siblings)}")


def reject_unknown_keys(cfg: DictConfig, schema: Any = LibraConfig) -> None:
    """Raises unless every key of a composed config is defined by ``schema``.

    Hydra adds a key given as ``+key=value`` whatever the schema says, so a typo such as
    ``+constraints.total_bw_gpbs=400`` would otherwise be ignored silently.

    Raises:
      LibraInputError: names the first unknown key, its value and the closest valid key
        (``difflib``; among its siblings first, then among every key of the schema).
    """
    data = OmegaConf.to_container(cfg, resolve=False, enum_to_str=True)
    for path, value, parent in _unknown_keys(data, schema):
        raise LibraInputError(f"{path}={show(value)}: not a config key; "
                              f"{_key_hint(path, parent, schema)} (--help lists every key)")


#: How an override starts: ``key=``, ``+key=``, ``++key=`` or ``~key``; any other argument is
#: a piece the shell split off the one before (at the spaces of ``bw[0] >= bw[1]``).
_OVERRIDE_START = re.compile(r"^(\+\+|\+)?[\w./@\-]+=|^~")

#: The config groups of ``libra-train`` and ``libra-evaluate`` (``conf/<group>/*.yaml``:
#: ``conf``, ``constraints``, ``dnn``); the scan has none.
GROUPS = tuple(sorted(p.name for p in CONF_DIR.iterdir()
                      if p.is_dir() and p.name not in ("hydra", "__pycache__")))

#: Longest override quoted back whole in a suggestion (longer ones are described instead).
_QUOTE_CHARS = 1000


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (``bw[0] >= bw[1], x`` -> 2 items)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    return items + [text[start:]]


def quoted_override(override: str) -> str:
    """``override`` written so the shell and Hydra's grammar both keep its string intact:
    single quotes for the shell, double quotes around the value (around each item of a
    list) for Hydra, e.g. ``network.notation=RI(4)_FC(8)`` ->
    ``'network.notation="RI(4)_FC(8)"'``."""
    key, _, value = override.partition("=")
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        items = [i.strip().strip("\"'") for i in _split_top(value[1:-1])]
        value = "[" + ", ".join(f'"{i}"' for i in items if i) + "]"
    else:
        value = '"' + value.strip("\"'") + '"'
    return f"'{key}={value}'"


def _joined(overrides: Sequence[str]) -> list[tuple[str, int]]:
    """The overrides with the words the shell split off one (at the spaces of
    ``bw[0] >= bw[1]`` or ``[100, 200]``) joined back to it: ``(override, arguments)``."""
    joined: list[list] = []
    for arg in overrides:
        if joined and not _OVERRIDE_START.match(arg):
            joined[-1][0] += " " + arg
            joined[-1][1] += 1
        else:
            joined.append([arg, 1])
    return [(text, n) for text, n in joined]


def _parse(parser: OverridesParser, override: str) -> tuple[Any, str | None]:
    """``(Hydra's parsed override, None)``, or ``(None, the message)`` when Hydra cannot read
    it: its grammar refuses it (with how to quote it), or the value is more than Python reads
    (an integer of over 4,300 digits)."""
    try:
        parsed = parser.parse_overrides([override])[0]
        parsed.value()  # evaluates functions such as choice(...) too
        return parsed, None
    except HydraException as e:
        problem = " ".join(str(e).split())
        quoted = (f"quote the value: {quoted_override(override)}"
                  if len(override) <= _QUOTE_CHARS else
                  "quote the value (double quotes inside single quotes)")
        return None, (
            f"cannot parse the override {show(override)}: {clip(problem, 400)}. A string with "
            "characters Hydra's grammar reserves (parentheses, brackets, spaces, comparisons, "
            "commas) needs double quotes for Hydra inside single quotes for the shell; "
            + quoted)
    except Exception as e:  # noqa: BLE001 -- e.g. int() refusing 5,000 digits
        key = override.partition("=")[0]
        digits = re.search(r"value has (\d+) digits", str(e))
        if digits:
            return None, (
                f"{clip(key)}: the override {show(override)} holds an integer of "
                f"{int(digits.group(1)):,} digits, more than Python reads (4,300 digits at "
                "most); no input of libra_jax needs a number that large.")
        return None, (f"cannot read the override {show(override)}: "
                      f"{clip(' '.join(str(e).split()), 400)}.")


def _schema_walk(schema: Any, key: str) -> tuple[str, Any]:
    """Follows the dotted ``key`` through the schema's dataclasses:

    * ``("field", (parent dataclass, field name, field type))`` when every part is a field;
    * ``("unknown", (dotted path up to the first unknown part, its parent dataclass))``;
    * ``("free", None)`` when the key goes on into a list or a free-form dict (an index,
      ``workload.model.<key>``): not checked here.
    """
    parts = key.split(".")
    tp = schema
    for i, part in enumerate(parts):
        if not (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
            return "free", None
        hints = typing.get_type_hints(tp)
        if part not in hints:
            return "unknown", (".".join(parts[: i + 1]), tp)
        if i == len(parts) - 1:
            return "field", (tp, part, hints[part])
        tp = hints[part]
    return "free", None  # not reached


_WORDS = {float: ("a number", "numbers"), int: ("an integer", "integers"),
          bool: ("true or false", "true/false values"), str: ("a string", "strings")}


def _type_words(tp: Any) -> tuple[str, str]:
    """What a field of type ``tp`` takes, in words: (singular, plural)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    origin = typing.get_origin(tp)
    if origin is typing.Union and len(args) == 1:
        one, many = _type_words(args[0])
        return f"{one} or null", f"{many} or nulls"
    if origin in (list, List):
        one = _type_words(args[0])[1] if args else "values"
        return f"a list of {one}", f"lists of {one}"
    if origin in (dict, Dict) or tp is dict:
        return "a mapping {key: value, ...}", "mappings"
    if isinstance(tp, type) and issubclass(tp, Choice):
        names = ", ".join(m.value for m in tp)
        return f"one of {names}", f"values among {names}"
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        keys = ", ".join(typing.get_type_hints(tp))
        return f"a mapping with keys among {keys}", f"mappings with keys among {keys},"
    return _WORDS.get(tp, ("a value", "values"))


@functools.lru_cache(maxsize=None)
def _one_field(parent: Any, leaf: str, tp: Any) -> type:
    """A dataclass with field ``leaf`` of ``parent`` (its type and default) alone."""
    field = next(f for f in dataclasses.fields(parent) if f.name == leaf)
    default = ({"default_factory": field.default_factory}
               if field.default_factory is not dataclasses.MISSING
               else {"default": field.default})
    return dataclasses.make_dataclass(f"{parent.__name__}_{leaf}",
                                      [(leaf, tp, dataclasses.field(**default))])


def _type_problem(parent: Any, leaf: str, tp: Any, value: Any) -> str | None:
    """Why the schema refuses ``value`` for field ``leaf`` of dataclass ``parent`` (what
    Hydra would refuse when it composes), or None. Tried on a fresh node holding that field
    alone (with its default), ~50x cheaper than a whole config."""
    node = OmegaConf.structured(_one_field(parent, leaf, tp))
    try:
        OmegaConf.update(node, leaf, value, merge=True)
    except (OmegaConfBaseException, ValueError, TypeError, OverflowError) as e:
        detail = (getattr(e, "msg", None) or str(e)).splitlines()
        where = getattr(e, "full_key", None) or ""
        expected = f"expected {_type_words(tp)[0]}"
        if detail and "[" in where:  # an element of a list: say which one
            expected += f" ({where[len(leaf):]}: {clip(detail[0], 200)})"
        elif detail and not isinstance(e, ValidationError):  # e.g. a key, an overflow
            expected += f" ({clip(detail[0], 200)})"
        return expected
    return None


def _value_text(value: Any) -> str:
    """A parsed override value as a message shows it: ``null``, ``true`` / ``false`` as
    typed, anything else by ``show``."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return show(value)


def _label(parsed: Any, key: str) -> str:
    """``key=value`` as a message names an override (the value bounded by ``show``)."""
    if parsed.is_delete():
        return f"~{key}"
    if parsed.is_sweep_override():  # as typed, e.g. choice(1,2) or 1,2
        return f"{key}={clip(parsed.input_line.partition('=')[2])}"
    return f"{key}={_value_text(parsed.value())}"


def _run_dir_problem(key: str, value: Any) -> str | None:
    """Why Hydra could not make the run directory ``value`` (``hydra.run.dir`` /
    ``hydra.sweep.dir``), or None. The nearest existing ancestor must be a directory in
    which this process can make a directory: tried with a probe made and removed at once
    (permission bits are not enough: as root ``os.access`` allows ``/proc``, a read-only
    mount or a full disk, where ``mkdir`` then fails). Interpolations are left to Hydra."""
    if not isinstance(value, str) or "${" in value or not value:
        return None
    path = pathlib.Path(value).absolute()
    for ancestor in (path, *path.parents):
        if ancestor.exists():
            break
    if ancestor == path and path.is_dir():
        return None
    if not ancestor.is_dir():
        return (f"{key}={show_path(value)}: {show_path(ancestor)} is a file, so the run directory "
                "cannot be made there; give a directory path.")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".libra_probe_", dir=ancestor))
    except OSError as e:
        return (f"{key}={show_path(value)}: cannot make the run directory: making a directory "
                f"in {show_path(ancestor)} fails ({e.strerror or e}); give a directory this "
                "user can write.")
    return None


def _check_override(parsed: Any, command: str, schema: Any, groups: Sequence[str],
                    config_dir: str | None) -> str | None:
    """The message for an override the command cannot take (a key that is not in
    ``schema``, a value of the wrong type, a group of another command or an option a
    group does not have), or None. Hydra's own keys and the options of groups Hydra finds
    in another ``--config-dir`` are left to Hydra."""
    key = parsed.key_or_group
    if len(key) > 200:
        return f"{show(key)}: not a config key (--help lists every key)"
    if key in ("hydra.run.dir", "hydra.sweep.dir") and not parsed.is_sweep_override():
        return _run_dir_problem(key, parsed.value())
    if parsed.is_hydra_override() or key.split("/")[0].split(".")[0] == "hydra" \
            or parsed.package is not None:
        return None
    label = _label(parsed, key)
    if key in groups or config_dir is not None and (pathlib.Path(config_dir) / key).is_dir():
        if config_dir is None and not parsed.is_delete():
            options = sorted(p.stem for p in (CONF_DIR / key).glob("*.yaml"))
            value = parsed.value()
            values = value.list if parsed.is_choice_sweep() else (
                [] if parsed.is_sweep_override() else [value])
            for v in values:
                if v is not None and str(v) not in options:
                    return (f"{label}: {key} has no option {show(str(v))}; the options are "
                            f"{', '.join(options)} (conf/{key}/<option>.yaml).")
        return None
    if key in GROUPS:
        fields = ", ".join(typing.get_type_hints(schema))
        return (f"{label}: {command} has no config group {key} ({', '.join(GROUPS)} are "
                f"groups of libra_jax.train and libra_jax.evaluate); its keys are {fields} "
                "(--help lists them).")
    kind, info = _schema_walk(schema, key)
    if kind == "unknown" and not (parsed.is_add() or parsed.is_force_add()):
        # (a key added with + is Hydra's to add; reject_unknown_keys refuses it once composed)
        path, parent = info
        return f"{label}: not a config key; {_key_hint(path, parent, schema)} (--help lists " \
               "every key)"
    if kind != "field" or parsed.is_delete():
        return None
    value = parsed.value()
    if parsed.is_sweep_override():
        if not parsed.is_choice_sweep():
            return None  # range(...), interval(...): numbers Hydra makes
        values = list(value.list)
    else:
        values = [value]
    for v in values:
        if isinstance(v, str) and "${" in v:
            continue  # an interpolation: resolved against the whole config, later
        problem = _type_problem(*info, v)
        if problem is not None:
            return f"{key}={_value_text(v)}: {problem}."
    return None


def _override_error(overrides: Sequence[str], command: str = "libra_jax.train",
                    schema: Any = LibraConfig, groups: Sequence[str] = GROUPS,
                    config_dir: str | None = None) -> str | None:
    """The message for the first override the command cannot take, or None when every one
    is fine: one Hydra's parser rejects (with how to quote it), one the shell split at its
    spaces (with how to quote it whole), a key that is not in ``schema`` (with the closest
    key), a value of the wrong type, a group the command does not have or an option a group
    does not have."""
    parser = OverridesParser.create()
    for override, pieces in _joined(overrides):
        parsed, problem = _parse(parser, override)
        if problem is not None:
            if pieces > 1:
                problem = problem.replace(
                    "; quote the value:", " (the shell also split this one at its spaces); "
                    "quote the value:")
            return problem
        if pieces > 1:
            whole = (f"'{override}'" if len(override) <= _QUOTE_CHARS and "'" not in override
                     else "in single quotes")
            return (f"the shell split the override {show(override)} at its spaces into "
                    f"{pieces} arguments, which Hydra reads one by one; quote it whole: "
                    f"{whole}")
        problem = _check_override(parsed, command, schema, groups, config_dir)
        if problem is not None:
            return problem
    return None


def check_command_line(command: str, example: str | None,
                       argv: Sequence[str] | None = None, schema: Any = LibraConfig,
                       groups: Sequence[str] = GROUPS) -> None:
    """What a CLI's ``cli()`` runs before Hydra: exits with status 2 and an ``error:``
    paragraph on stderr when the call cannot mean anything sensible, instead of Hydra's
    composition error.

    * No argument at all: nothing to solve (every input is null); the message says how to
      pick a preset and lists them.
    * An override Hydra's parser rejects (e.g. ``network.notation=RI(4)_FC(8)``, whose
      ``_FC`` Hydra reads as a syntax error): Hydra's message plus how to quote it; one the
      shell split at its spaces (``bandwidth_gbps=[100, 200, 200]`` unquoted): how to quote
      it whole; a number Python refuses to read (an integer of over 4,300 digits).
    * A key that is not in ``schema``: the closest key, e.g. ``objectiv=perf_per_cost`` ->
      "did you mean objective?" (Hydra's own message only suggests ``+objectiv=``; a key
      added with ``+`` is refused by :func:`reject_unknown_keys` once composed).
    * ``hydra.run.dir`` / ``hydra.sweep.dir`` under a file or in a directory that cannot be
      written (checked without creating anything).
    * A value the schema refuses (``constraints.total_bw_gbps=abc``, ``network.npus=[4,"x"]``,
      ``objective=fastest``): what the key takes; a group option that does not exist; a
      group of another command (``libra-scan conf=gpt3``).

    Args:
      command: the module, e.g. ``"libra_jax.train"`` (for messages).
      example: a complete example call's arguments, e.g. ``"conf=turing_nlg"``; None for a
        command whose defaults already run (the scan), so no argument is fine.
      argv: the arguments (default ``sys.argv[1:]``).
      schema: the command's config dataclass (:class:`LibraConfig`, the scan's
        ``ScanConfig``).
      groups: the command's config groups (:data:`GROUPS`; the scan: none).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args, _ = get_args_parser().parse_known_args(argv)
    if not argv and example is not None:
        message = (
            f"no arguments: every input is null, so there is nothing to solve; "
            f"{preset_hint()}; e.g. python -m {command} {example}. Or give the network and "
            "workload yourself (network.*, workload.*); --help lists every key.")
    else:
        message = _override_error(args.overrides, command, schema, groups, args.config_dir)
    if message is not None:
        print(f"error: {message}", file=sys.stderr, flush=True)
        sys.exit(2)
