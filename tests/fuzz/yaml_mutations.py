"""The fuzz suite's YAML mutation families: a value of the wrong type, deep nesting, a
duplicate key, YAML tags and directives, and "billion laughs" alias bombs.
"""

from __future__ import annotations

import re

import yaml

from .mutations import _NUMBER, NON_NUMBERS_TXT, NON_NUMBERS_YAML, Mutation, _as_bytes


def _yaml_leaves(node, path=()):
    """[(path, value)] of every scalar and container of a parsed YAML document."""
    out = [(path, node)] if path else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _yaml_leaves(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _yaml_leaves(v, (*path, i))
    return out


def _replace_at(node, path, value):
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {k: (_replace_at(v, rest, value) if k == head else v) for k, v in node.items()}
    return [(_replace_at(v, rest, value) if i == head else v) for i, v in enumerate(node)]


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class _Raw(str):
    """Text written into YAML as it is (a non-number in its YAML spelling)."""


def _dump_yaml(doc) -> bytes:
    """``doc`` as YAML text with each ``_Raw`` written verbatim (block style, flow leaves)."""
    def emit(node, indent):
        pad = "  " * indent
        if isinstance(node, dict):
            if not node:
                return " {}\n"
            lines = "\n"
            for k, v in node.items():
                key = yaml.safe_dump(k, default_flow_style=True).strip().removesuffix("...")
                key = key.strip()
                lines += f"{pad}{key}:{emit(v, indent + 1)}"
            return lines
        if isinstance(node, list):
            if all(not isinstance(v, (dict, list)) for v in node):
                return " [" + ", ".join(scalar(v) for v in node) + "]\n"
            if not node:
                return " []\n"
            lines = "\n"
            for v in node:
                body = emit(v, indent + 1)
                lines += f"{pad}-{body}"
            return lines
        return " " + scalar(node) + "\n"

    def scalar(v):
        if isinstance(v, _Raw):
            return str(v)
        return yaml.safe_dump(v, default_flow_style=True, width=10**9).strip().removesuffix(
            "...").strip()

    return emit(doc, 0).lstrip("\n").encode()


def mutate_wrong_yaml_type(data, rng, kind: str = "") -> Mutation:
    """Replaces one YAML value with a value of another type: a number by a non-number (a
    string, a numeric string, a bool, null, a list, a mapping: must be refused), or any
    value by another type. Text workloads: a numeric field by a non-number token."""
    b, _ = _as_bytes(data)
    if kind == "workload_txt":
        lines = b.split(b"\n")
        rows = [i for i, line in enumerate(lines) if len(line.split()) == 12]
        i = rng.choice(rows)
        fields = lines[i].split()
        f = rng.choice([2, 4, 5, 7, 8, 10])
        tok = rng.choice(NON_NUMBERS_TXT)
        fields[f] = tok.encode()
        lines[i] = b" ".join(fields)
        return Mutation(b"\n".join(lines), f"line {i + 1} field {f + 1} -> {tok!r}",
                        f"non-number {tok!r} in a numeric field")
    doc = yaml.safe_load(b)
    leaves = _yaml_leaves(doc)
    numeric = [(p, v) for p, v in leaves if _is_number(v)]
    if numeric and rng.random() < 0.75:
        path, old = rng.choice(numeric)
        new = rng.choice(NON_NUMBERS_YAML)
        numeric_text = new.strip("'\"")
        expect = f"number at {list(path)} replaced by {new}"
        if kind == "astrasim_network" and _looks_numeric(numeric_text) and new[0] in "'\"":
            expect = None  # documented: ASTRA-sim's numeric text (yaml-cpp) is read as numbers
        out = _dump_yaml(_replace_at(doc, path, _Raw(new)))
        return Mutation(out, f"{list(path)}: {old!r} -> {new}", expect)
    path, old = rng.choice(leaves)
    new = rng.choice(["abc", 7, 2.5, True, None, [1, 2], {"a": 1}, [], {}, "", [[["x"]]],
                      -1, "Ring", "ALLREDUCE"])
    out = _dump_yaml(_replace_at(doc, path, new))
    expect = None
    if _is_number(old) and not _is_number(new) and not (
            kind == "astrasim_network" and isinstance(new, str) and _looks_numeric(new)):
        expect = f"number at {list(path)} replaced by {new!r}"
    return Mutation(out, f"{list(path)}: {_short_repr(old)} -> {new!r}", expect)


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _short_repr(x) -> str:
    s = repr(x)
    return s if len(s) <= 40 else s[:37] + "..."


_KEY_LINE = re.compile(rb"^([ \t]*)(-[ \t]+)?([A-Za-z_][\w\-]*)[ \t]*:", re.M)


def _value_spans(b: bytes) -> list[tuple[int, int]]:
    """Byte spans of the values of ``key: value`` lines (to the end of the line, comments
    aside)."""
    spans = []
    for m in re.finditer(rb"^[ \t-]*[A-Za-z_][\w\-]*[ \t]*:[ \t]*([^#\n]*?)[ \t]*(?:#.*)?$",
                         b, re.M):
        if m.group(1):
            spans.append((m.start(1), m.end(1)))
    return spans


def _insert_value(b: bytes, rng, value: bytes) -> tuple[bytes, str]:
    """``value`` in place of one ``key: value`` value, or under a new top-level key."""
    spans = _value_spans(b)
    if spans and rng.random() < 0.7:
        a, c = rng.choice(spans)
        return b[:a] + value + b[c:], f"value {b[a:c][:30]!r}"
    key = rng.choice([b"Extra", b"x_bomb", b"layers", b"Topology", b"Forward", b"topology"])
    return b + b"\n" + key + b": " + value + b"\n", f"new key {key.decode()!r}"


def mutate_deep_nesting(data, rng, kind: str = "") -> Mutation:
    """Nests one value 20-10,000 levels deep (flow lists / mappings, or block mappings)."""
    b, _ = _as_bytes(data)
    depth = rng.choice([20, 63, 64, 65, 100, 300, 500, 1000, 3000, 10000])
    style = rng.choice(["flow_list", "flow_map", "block_map", "mixed"])
    if style == "flow_list":
        value = b"[" * depth + b"1" + b"]" * depth
    elif style == "flow_map":
        value = b"{a: " * depth + b"1" + b"}" * depth
    elif style == "mixed":
        value = b"[{a: " * (depth // 2) + b"1" + b"}]" * (depth // 2)
    else:
        depth = min(depth, 300)
        value = b"".join(b"\n" + b"  " * (i + 1) + b"a:" for i in range(depth)) + b" 1"
    out, where = _insert_value(b, rng, value)
    return Mutation(out, f"{style} nested {depth} deep at {where}")


def mutate_duplicate_key(data, rng, kind: str = "") -> Mutation:
    """Repeats a mapping key (same or another value; top level, nested, or inside a flow
    mapping): must be refused."""
    b, _ = _as_bytes(data)
    flows = list(re.finditer(rb"\{\s*([A-Za-z_]\w*)\s*:\s*([^,}]*)", b))
    keys = list(_KEY_LINE.finditer(b))
    if flows and (not keys or rng.random() < 0.4):
        m = rng.choice(flows)
        entry = b[m.start(1):m.end(2)]
        if rng.random() < 0.5:
            entry = m.group(1) + b": " + rng.choice([m.group(2), b"7", b"NONE", b"[1]"])
        out = b[:m.end(2)] + b", " + entry + b[m.end(2):]
        return Mutation(out, f"flow key {m.group(1).decode()!r} twice",
                        f"duplicate key {m.group(1).decode()!r}")
    if not keys:
        return Mutation(data, "no key")
    m = rng.choice(keys)
    indent = len(m.group(1)) + (len(m.group(2)) if m.group(2) else 0)
    # The key's block: its line and the following lines indented deeper.
    start = m.start()
    lines_after = b[m.end():].split(b"\n")
    block = [b[start:m.end()] + lines_after[0]]
    for line in lines_after[1:]:
        stripped = line.lstrip()
        if stripped and len(line) - len(stripped) <= indent and not stripped.startswith(b"#"):
            break
        block.append(line)
    block_text = b"\n".join(block).rstrip(b"\n")
    end = start + len(block_text)
    dup = block_text
    if m.group(2):  # "- name: x" starts a list item: repeat the key without the dash
        dup = b" " * indent + block_text[len(m.group(1)) + len(m.group(2)):]
    if rng.random() < 0.5:  # another value on the one-line form
        dup = re.sub(rb":[ \t]*[^#\n]+", b": " + rng.choice([b"[ 2, 2, 2 ]", b"7", b"x"]),
                     dup, count=1) if b"\n" not in dup else dup
    out = b[:end] + b"\n" + dup + b[end:]
    return Mutation(out, f"key {m.group(3).decode()!r} twice",
                    f"duplicate key {m.group(3).decode()!r}")


#: YAML tags and directives; "@SENTINEL@" is replaced by a path the worker checks.
YAML_TAGS = (
    ("!!python/object/apply:os.system [\"touch @SENTINEL@\"]", "python tag"),
    ("!!python/object/apply:subprocess.check_output [[\"touch\", \"@SENTINEL@\"]]",
     "python tag"),
    ("!!python/name:os.system", "python tag"),
    ("!!python/object/new:builtins.dict {}", "python tag"),
    ("!!python/tuple [1, 2]", "python tag"),
    ("!!python/str 16", "python tag"),
    ("!!python/module:os", "python tag"),
    ("!!binary aGVsbG8=", "non-number"),
    ("!!set {a, b}", "non-number"),
    ("!!omap [a: 1, b: 2]", "non-number"),
    ("!!pairs [a: 1]", "non-number"),
    ("!!timestamp 2001-12-14", "non-number"),
    ("!!str 16", "non-number"),
    ("!!bool yes", "non-number"),
    ("!!null ''", "non-number"),
    ("!!float \"16\"", None),
    ("!!int \"0x10\"", None),
    ("!!int \"16\"", None),
    ("!mytag 16", "unknown tag"),
    ("!<tag:example.com,2000:x> 16", "unknown tag"),
    ("!!map {a: 1}", "non-number"),
)


def mutate_yaml_tag(data, rng, kind: str = "") -> Mutation:
    """Puts a YAML tag on one value (python object tags, which must stay refused and must
    never run, binary, set, timestamp, str, unknown local tags, ...) or adds a ``%TAG``
    directive that maps ``!`` to python objects."""
    b, _ = _as_bytes(data)
    if rng.random() < 0.1:
        body, where = _insert_value(b, rng, b'!os.system ["touch @SENTINEL@"]')
        out = b"%TAG ! tag:yaml.org,2002:python/object/apply:\n---\n" + body
        return Mutation(out, f"%TAG directive to python objects, at {where}", "python tag")
    spans = _value_spans(b)
    numeric = []
    for s in spans:  # numbers, also inside flow lists and mappings
        numeric += [(m.start(), m.end()) for m in _NUMBER.finditer(b, s[0], s[1])]
    tag, why = rng.choice(YAML_TAGS)
    on_number = bool(numeric) and rng.random() < 0.6
    if on_number:
        a, c = rng.choice(numeric)
    elif spans:
        a, c = rng.choice(spans)
    else:
        return Mutation(data, "no value")
    expect = None
    if why in ("python tag", "unknown tag"):
        expect = f"{why}: {tag.split()[0]}"
    elif why == "non-number" and on_number:
        expect = f"{tag.split()[0]} (a non-number) in place of a number"
        if kind == "astrasim_network" and tag.startswith("!!str"):
            expect = None  # documented: ASTRA-sim's numeric text (yaml-cpp) reads as numbers
    out = b[:a] + tag.encode() + b[c:]
    return Mutation(out, f"{b[a:c][:20]!r} -> {tag[:40]}", expect)


def alias_bomb(depth: int = 9, width: int = 9, style: str = "list",
               leaf: str = "lol") -> bytes:
    """A "billion laughs" YAML value: ``depth`` levels of anchors, each ``width`` aliases of
    the one below (width**depth leaves from a few hundred bytes)."""
    if style == "map":
        keys = [f"k{i}" for i in range(width)]
        parts = ["&b0 {" + ", ".join(f"{k}: {leaf}" for k in keys) + "}"]
        for d in range(1, depth):
            parts.append(f"&b{d} {{" + ", ".join(f"{k}: *b{d - 1}" for k in keys) + "}")
    else:
        parts = ["&b0 [" + ", ".join([leaf] * width) + "]"]
        for d in range(1, depth):
            parts.append(f"&b{d} [" + ", ".join([f"*b{d - 1}"] * width) + "]")
    return ("[" + ", ".join(parts) + "]").encode()


def mutate_alias_bomb(data, rng, kind: str = "") -> Mutation:
    """Puts a "billion laughs" alias bomb (up to 9**9 leaves) in place of one value, under a
    new key, or as a merge key (``<<: *bomb``)."""
    b, _ = _as_bytes(data)
    depth = rng.choice([4, 6, 8, 9, 10])
    width = rng.choice([9, 10])
    style = rng.choice(["list", "list", "map"])
    leaf = rng.choice(["lol", "1", "Ring", "-1"])
    bomb = alias_bomb(depth, width, style, leaf)
    if style == "map" and rng.random() < 0.3:
        out = b"anchors: &top " + bomb + b"\n" + b
        return Mutation(out, f"{style} bomb {width}**{depth} under a new key 'anchors'")
    out, where = _insert_value(b, rng, bomb)
    return Mutation(out, f"{style} bomb {width}**{depth} ({leaf}) at {where}")
