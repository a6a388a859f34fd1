"""The one way to read an input file: every YAML and text input (networks, cost models,
communicators, workloads, ASTRA-sim network YAML) comes through :func:`read_text`, and every
YAML one through :func:`read_yaml` / :func:`read_yaml_mapping`.

What a hostile or broken file meets here, each refused with a
:class:`~libra_jax.types.LibraInputError` that names the file (and line, byte or key):

* **size**: a file over ``LIMITS.max_file_mb`` (64 MB; ``LIBRA_JAX_MAX_FILE_MB`` changes it)
  is refused before it is read;
* **encoding**: bytes that are not UTF-8 are named with their byte offset and line;
* **YAML, plain data only**: the document is built from the parser's events (libyaml's
  parser where PyYAML has it) in one pass without recursion; scalars resolve as PyYAML's safe
  loader resolves them (null, bool, int, float, str, timestamp) and every other tag, such as
  ``!!python/object/apply:...``, ``!!binary`` or a custom ``!tag``, is refused, as are
  recursive aliases and more than one document;
* **nesting**: collections nested deeper than ``LIMITS.max_yaml_depth``;
* **aliases**: a document whose nodes, each alias counted at the size of what it repeats,
  exceed ``max_nodes`` ("billion laughs": nine aliases of nine aliases of ...) is refused as
  it grows, before anything could expand it;
* **duplicate keys**: a key given twice in one mapping (YAML says keys are unique; PyYAML
  keeps the last silently), naming the key and both lines; a merge key (``<<``) is kept,
  once per mapping (several merges: one ``<<`` with a list of mappings);
* **huge integers**: an integer literal longer than Python converts (4,300 digits) is named
  with its line instead of a ``ValueError``.

Loading is ~6x faster than ``yaml.safe_load`` (whose composer calls the resolver and the
constructor per node in Python): the shipped inputs in ~0.3 ms each, a 3 MB workload in
~1.4 s of CPU.
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


_TAG = "tag:yaml.org,2002:"
#: The scalar types an input may hold (what plain YAML resolves to); any other tag, such as
#: ``!!python/object/apply:...``, ``!!binary`` or a custom ``!tag``, is refused.
_SCALAR_TAGS = frozenset(_TAG + t for t in ("null", "bool", "int", "float", "str", "timestamp"))
_COLLECTION_TAGS = frozenset((None, "!", _TAG + "seq", _TAG + "map"))
_MERGE = object()  # a ``<<`` key: merge the mapping (or list of mappings) it holds
_RESOLVER = yaml.resolver.Resolver()
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


class _Builder:
    """Builds a YAML document's Python data from the parser's events in one pass, without
    recursion, with the checks of the module docstring (PyYAML's composer recurses, calls
    its resolver once per scalar, and knows nothing of depth, size or duplicate keys)."""

    def __init__(self, path: str, what: str, max_nodes: int):
        self.path, self.what, self.max_nodes = path, what, max_nodes
        self.scalars: dict[str, Any] = {}  # plain scalar text -> its value (immutable)

    def fail(self, event, message: str):
        raise LibraInputError(f"{self.path}, line {event.start_mark.line + 1}: {message}")

    def scalar(self, event) -> Any:
        tag, value = event.tag, event.value
        if tag is None or tag == "!":
            if not event.implicit[0]:  # quoted, or a non-specific "!" tag: a string
                return value
            if value in self.scalars:
                return self.scalars[value]
            tag = _RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
            cache = True
        else:
            cache = False
        if tag == _TAG + "merge":
            return _MERGE
        if tag not in _SCALAR_TAGS:
            self.fail(event, f"the {self.what} file uses the YAML tag {show(tag)}, which "
                      "inputs may not (plain mappings, lists, strings, numbers, booleans and "
                      "null only; tags that construct objects are never run).")
        if tag == _TAG + "int" and len(value) > _MAX_INT_CHARS:
            self.fail(event, f"integer of {len(value):,} characters ({show(value, 40)}); far "
                      "beyond any limit.")
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
        try:
            result = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, node)
        except (ValueError, yaml.YAMLError) as e:  # e.g. a timestamp that is no date
            self.fail(event, f"cannot read {show(value, 40)} as {tag[len(_TAG):]} ({e}).")
        if cache:
            self.scalars[value] = result
        return result

    def build(self, text: str) -> Any:
        stack: list[list] = []  # open collections: [container, anchor, size, key, key event,
        #                         first line of each key, merged mappings]
        anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, nodes it stands for)
        root, documents, no_key = None, 0, object()
        for event in yaml.parse(text, Loader=_SafeLoader):
            kind = type(event)
            if kind is yaml.ScalarEvent:
                value, anchor, size = self.scalar(event), event.anchor, 1
            elif kind is yaml.AliasEvent:
                if event.anchor not in anchors:
                    open_ = any(frame[1] == event.anchor for frame in stack)
                    self.fail(event, f"alias *{clip(event.anchor, 40)} "
                              + ("refers to the collection it is in (a recursive structure)."
                                 if open_ else "has no anchor before it."))
                (value, size), anchor = anchors[event.anchor], None
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                if len(stack) >= LIMITS.max_yaml_depth:
                    self.fail(event, f"the {self.what} file nests deeper than "
                              f"{LIMITS.max_yaml_depth} levels.")
                if event.tag not in _COLLECTION_TAGS:
                    self.fail(event, f"the {self.what} file uses the YAML tag "
                              f"{show(event.tag)}, which inputs may not (plain mappings and "
                              "lists only).")
                container = {} if kind is yaml.MappingStartEvent else []
                stack.append([container, event.anchor, 1, no_key, None, {}, []])
                continue
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                value, anchor, size, _, _, _, merges = stack.pop()
                for merged in merges:  # explicit keys win, then earlier merges
                    for k, v in merged.items():
                        value.setdefault(k, v)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    self.fail(event, f"the {self.what} file holds more than one YAML "
                              "document (a '---' line); give one.")
                continue
            else:
                continue
            if anchor is not None:
                anchors[anchor] = (value, size)
            if not stack:
                root = value
                continue
            frame = stack[-1]
            frame[2] += size
            if frame[2] > self.max_nodes:
                self.fail(event, f"the {self.what} file has more than {self.max_nodes:,} YAML "
                          "nodes (aliases counted at the size of what they repeat); it is not "
                          "a plausible input.")
            container = frame[0]
            if type(container) is list:
                container.append(value)
            elif frame[3] is no_key:  # a key (the merge key '<<' too: once per mapping)
                try:
                    first = frame[5].get(value)
                except TypeError:
                    self.fail(event, f"a mapping key is a {type(value).__name__} "
                              f"({show(value)}); keys must be strings or numbers.")
                if first is not None:
                    several = (" (to merge several mappings, give one '<<' with a list: "
                               "<<: [*a, *b])" if value is _MERGE else "")
                    self.fail(event, f"duplicate key {show('<<' if value is _MERGE else value)} "
                              f"(first given on line {first}); each key may appear once in a "
                              f"mapping{several}.")
                frame[5][value] = event.start_mark.line + 1
                frame[3], frame[4] = value, event
            else:
                key, frame[3] = frame[3], no_key
                if key is _MERGE:
                    merged = value if isinstance(value, list) else [value]
                    if not all(isinstance(m, dict) for m in merged):
                        self.fail(frame[4], "a merge key '<<' needs a mapping or a list of "
                                  "mappings.")
                    frame[6].extend(merged)
                else:
                    container[key] = value
        return root


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
    limit = LIMITS.max_yaml_nodes if max_nodes is None else max_nodes
    try:
        return _Builder(path, what, limit).build(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f", line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise LibraInputError(
            f"{path}{line}: the {what} file is not valid YAML ({clip(problem, 200)})."
        ) from None


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
