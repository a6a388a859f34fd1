"""The one way to read an input file: every YAML and text input (networks, cost models,
communicators, workloads, ASTRA-sim network YAML) comes through :func:`read_text`, and every
YAML one through :func:`read_yaml` / :func:`read_yaml_mapping`.

What a hostile or broken file meets here, each refused with a
:class:`~libra_jax.types.LibraInputError` that names the file (and line, byte or key):

* **size**: a file over ``LIMITS.max_file_mb`` (64 MB; ``LIBRA_JAX_MAX_FILE_MB`` changes it)
  is refused before it is read;
* **encoding**: bytes that are not UTF-8 are named with their byte offset and line;
* **YAML, safe only**: PyYAML's safe loader (libyaml's parser where PyYAML has it): tags such
  as ``!!python/object`` are refused;
* **nesting**: collections nested deeper than ``LIMITS.max_yaml_depth`` (a pre-pass over the
  parser's events, which needs no recursion, so a file nested 10**5 deep costs nothing);
* **aliases**: a document whose nodes, each alias counted at the size of what it repeats,
  exceed ``max_nodes`` ("billion laughs": nine aliases of nine aliases of ...) is refused in
  the same pre-pass, before anything could expand it;
* **duplicate keys**: a key given twice in one mapping (YAML says keys are unique; PyYAML
  keeps the last silently), naming the key and both lines;
* **huge integers**: an integer literal longer than Python converts (4,300 digits) is named
  with its line instead of a ``ValueError``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import yaml

from libra_jax.inputs.limits import LIMITS
from libra_jax.types import LibraInputError, clip, show

# libyaml's parser (C, ~10x faster) when PyYAML was built with it; the pure-Python one else.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: Longest integer literal read (characters); longer ones are refused with their line. Far
#: above any limit of `limits.LIMITS`, far below Python's 4,300-digit conversion limit.
_MAX_INT_CHARS = 200

#: Nodes a small input kind (network, cost model, communicator, ASTRA-sim network) may have:
#: ~10x the largest legitimate one (16 dimensions, a few tiers), so a multi-megabyte list in
#: such a file is refused at once instead of being parsed whole.
SMALL_FILE_NODES = 10_000


def read_text(path: str | os.PathLike, what: str) -> str:
    """The text of an input file, decoded as UTF-8 (a leading byte-order mark is dropped).

    Args:
      path: the file.
      what: what the file is, for messages (e.g. ``"network"``, ``"workload"``).

    Raises:
      LibraInputError: the file cannot be read, is larger than the file-size limit, or is
        not UTF-8 (the message gives the byte offset and line of the first bad byte).
    """
    path = os.fspath(path)
    limit = LIMITS.file_bytes()
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
        raise LibraInputError(
            f"{clip(path)}: cannot read the {what} file ({getattr(e, 'strerror', None) or e})."
        ) from None
    if len(data) > limit:
        raise LibraInputError(
            f"{path}: the {what} file is larger than the {limit / 1e6:g} MB limit for input "
            f"files; set LIBRA_JAX_MAX_FILE_MB to read larger ones.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise LibraInputError(
            f"{path}, line {line}: the {what} file is not UTF-8 text: byte "
            f"0x{data[e.start]:02x} at offset {e.start} ({e.reason}).") from None
    return text[1:] if text.startswith("\ufeff") else text


def _check_events(text: str, path: str, what: str, max_nodes: int) -> None:
    """Refuses nesting deeper than ``LIMITS.max_yaml_depth`` and documents of more than
    ``max_nodes`` nodes (aliases at the size of their anchor), from the parser's events
    alone: no recursion and no expansion. Syntax errors are left to the loader."""
    stack: list[list] = []  # per open collection: [anchor, nodes so far]
    sizes: dict[str, int] = {}  # anchor -> nodes it stands for
    total = 0
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= LIMITS.max_yaml_depth:
                    raise LibraInputError(
                        f"{path}, line {event.start_mark.line + 1}: the {what} file nests "
                        f"deeper than {LIMITS.max_yaml_depth} levels.")
                stack.append([event.anchor, 1])
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                anchor, size = stack.pop()
            elif isinstance(event, yaml.ScalarEvent):
                anchor, size = event.anchor, 1
            elif isinstance(event, yaml.AliasEvent):
                anchor, size = None, sizes.get(event.anchor, 1)
            else:
                continue
            if anchor is not None:
                sizes[anchor] = size
            if stack:
                stack[-1][1] += size
                count = stack[-1][1]
            else:
                total += size
                count = total
            if count > max_nodes:
                raise LibraInputError(
                    f"{path}, line {event.start_mark.line + 1}: the {what} file has more "
                    f"than {max_nodes:,} YAML nodes (aliases counted at the size of what "
                    "they repeat); it is not a plausible input.")
    except yaml.YAMLError:
        return  # the loader reports it, with its line


class _Loader(_SafeLoader):
    """The safe loader, refusing duplicate keys and over-long integers."""

    path = ""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable: PyYAML refuses it below
                    continue
                if first is not None:
                    raise LibraInputError(
                        f"{self.path}, line {key_node.start_mark.line + 1}: duplicate key "
                        f"{show(key)} (first given on line {first + 1}); each key may appear "
                        "once in a mapping.")
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node):
        if len(node.value) > _MAX_INT_CHARS:
            raise LibraInputError(
                f"{self.path}, line {node.start_mark.line + 1}: integer of "
                f"{len(node.value):,} characters ({show(node.value, 40)}); far beyond any "
                "limit.")
        return super().construct_yaml_int(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def read_yaml(path: str | os.PathLike, what: str, *,
              max_nodes: int | None = None) -> Any:
    """A YAML input file as Python data (:func:`read_text`, then the checks of the module
    docstring).

    Args:
      path: the file.
      what: what the file is, for messages.
      max_nodes: most YAML nodes the document may have (aliases at full size); default
        ``LIMITS.max_yaml_nodes``.

    Raises:
      LibraInputError: any of the module docstring's refusals, or invalid YAML (with its
        line and the parser's words).
    """
    path = os.fspath(path)
    text = read_text(path, what)
    _check_events(text, path, what, LIMITS.max_yaml_nodes if max_nodes is None else max_nodes)
    loader = _Loader(text)
    loader.path = path
    try:
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise LibraInputError(
            f"{path}{line}: the {what} file is not valid YAML ({clip(problem, 200)})."
        ) from None
    finally:
        loader.dispose()


def read_yaml_mapping(path: str | os.PathLike, what: str,
                      allowed: Sequence[str] | None = None, *,
                      max_nodes: int | None = None) -> dict:
    """:func:`read_yaml` of a file whose top level must be a mapping (of the ``allowed``
    keys, if given)."""
    data = read_yaml(path, what, max_nodes=max_nodes)
    path = os.fspath(path)
    if not isinstance(data, dict):
        raise LibraInputError(
            f"{path}: the {what} file must be a YAML mapping at the top level, "
            f"got {type(data).__name__} {show(data)}.")
    if allowed is not None:
        unknown = [k for k in data if k not in allowed]
        if unknown:
            raise LibraInputError(
                f"{path}: unknown key {show(unknown[0])} in the {what} file; allowed keys "
                f"are {', '.join(allowed)}.")
    return data
