"""The fuzz suite's mutation families of text and numbers: byte flips, token and line
edits, extreme and 4,300+-digit numbers (in a file, a string, or an argument dict), and
bytes that are not UTF-8; :class:`Mutation` is what every family returns. The YAML families
are in ``yaml_mutations``, the grammar and argument-type families in ``arg_mutations``.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from typing import Any

from .common import YAML_KINDS
from .oracle import _dup_key_check


@dataclasses.dataclass
class Mutation:
    """A mutated input: ``data`` (bytes of a file, a string, or an argument dict),
    ``detail`` (what was done, for reports) and ``expect``: why the result must be refused
    (a duplicate key, a non-number), or None when either outcome is fine."""

    data: Any
    detail: str
    expect: str | None = None


_NUMBER = re.compile(rb"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")
_TOKEN = re.compile(rb"\S+")

#: Extreme numbers (text); each is written in place of one number of the input.
EXTREMES = (
    "0", "-0", "1", "-1", "2", "-2", "0.5", "1.5", "-0.0", "1e308", "-1e308", "1.0e308",
    "1.7976931348623157e308", "1e309", "1.0e400", "-1.0e400", "inf", "-inf", ".inf",
    "-.inf", ".nan", "nan", "NaN", "1e-320", "4.9e-324", "1.0e-400", "2147483648",
    "9223372036854775808", "18446744073709551617", "1" + "0" * 40, "9" * 100, "1.0e40",
    "1e40", "0x10", "0o17", "0b101", "1_000", "+5", "010", "1:20", "12:30:00", "1e2",
    "4096.0", "1048577", "1073741825",
)
#: Non-numbers written in place of a number.
NON_NUMBERS_YAML = ('"16"', "'1e3'", "abc", '""', "true", "false", "yes", "off", "null", "~",
                    "[16]", "[]", "{a: 1}", "{}", "[[1]]", "16 GB", "!!binary aGVsbG8=")
NON_NUMBERS_TXT = ("abc", "NONE", "-", "1e", "0x10", "1,000", "True", "[1]", "{}", "''",
                   "nan", "inf", "-inf", "1e400", "--1", "1..0", "١٢", "ALLREDUCE")
HUGE_DIGITS = (4299, 4300, 4301, 5000, 10000)
#: Code points that are not plain ASCII: lookalike digits and letters, controls, marks.
ODD_CHARS = ("\x00", "\x7f", "\u00a0", "\u200b", "\u202e", "\ufeff", "\udcff", "\u0660",
             "\uff11", "\u0406", "\u2264", "\u2212", "\U0001f600", "\r", "\t", "\x0b")


def _numbers(data: bytes) -> list[re.Match]:
    return list(_NUMBER.finditer(data))


def _splice(data: bytes, m: re.Match | tuple[int, int], new: bytes) -> bytes:
    a, b = (m.start(), m.end()) if isinstance(m, re.Match) else m
    return data[:a] + new + data[b:]


def _as_bytes(data) -> tuple[bytes, bool]:
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass"), True
    return data, False


def _back(data: bytes, was_str: bool):
    return data.decode("utf-8", "surrogateescape") if was_str else data


# --------------------------------------------------------- text: bytes, tokens, lines

def mutate_byte_flip(data, rng: random.Random, kind: str = "") -> Mutation:
    """Flips bits of (or overwrites) 1-4 bytes; strings get odd characters instead."""
    b, was_str = _as_bytes(data)
    n = rng.randint(1, 4)
    if was_str:
        s = list(data)
        for _ in range(n):
            i = rng.randrange(len(s) + 1)
            s.insert(i, rng.choice(ODD_CHARS + tuple("()[]_*+-=<>.e0123456789 ")))
        return Mutation("".join(s), f"inserted {n} characters")
    out = bytearray(b)
    for _ in range(n):
        i = rng.randrange(len(out))
        out[i] = out[i] ^ (1 << rng.randrange(8)) if rng.random() < 0.7 else rng.randrange(256)
    out = bytes(out)
    return Mutation(out, f"flipped {n} bytes", _dup_key_check(b, out) if kind in YAML_KINDS
                    else None)


def _token_mutation(data, rng, kind, op: str) -> Mutation:
    b, was_str = _as_bytes(data)
    toks = list(_TOKEN.finditer(b))
    if not toks:
        return Mutation(data, "no token")
    i = rng.randrange(len(toks))
    t = toks[i]
    if op == "delete":
        out = _splice(b, t, b"")
        detail = f"deleted token {t.group()[:30]!r}"
    elif op == "duplicate":
        out = b[:t.end()] + rng.choice([b" ", b"", b"\n"]) + t.group() + b[t.end():]
        detail = f"duplicated token {t.group()[:30]!r}"
    else:
        u = toks[rng.randrange(len(toks))]
        a, c = sorted([t, u], key=lambda m: m.start())
        if a.start() == c.start():
            return Mutation(data, "swap with itself")
        out = b[:a.start()] + c.group() + b[a.end():c.start()] + a.group() + b[c.end():]
        detail = f"swapped tokens {a.group()[:20]!r} and {c.group()[:20]!r}"
    expect = _dup_key_check(b, out) if kind in YAML_KINDS else None
    return Mutation(_back(out, was_str), detail, expect)


def mutate_token_delete(data, rng, kind: str = "") -> Mutation:
    """Deletes one whitespace-separated token."""
    return _token_mutation(data, rng, kind, "delete")


def mutate_token_duplicate(data, rng, kind: str = "") -> Mutation:
    """Duplicates one token."""
    return _token_mutation(data, rng, kind, "duplicate")


def mutate_token_swap(data, rng, kind: str = "") -> Mutation:
    """Swaps two tokens."""
    return _token_mutation(data, rng, kind, "swap")


def _line_mutation(data, rng, kind, op: str) -> Mutation:
    if isinstance(data, list):  # a list of constraint strings
        items = list(data)
        if not items:
            return Mutation(items, "empty list")
        i = rng.randrange(len(items))
        if op == "delete":
            del items[i]
        elif op == "duplicate":
            items.insert(i, items[i])
        else:
            j = rng.randrange(len(items))
            items[i], items[j] = items[j], items[i]
        return Mutation(items, f"{op} list entry {i}")
    b, was_str = _as_bytes(data)
    lines = b.split(b"\n")
    i = rng.randrange(len(lines))
    if op == "delete":
        detail = f"deleted line {i + 1} {lines[i][:30]!r}"
        del lines[i]
    elif op == "duplicate":
        detail = f"duplicated line {i + 1} {lines[i][:30]!r}"
        lines.insert(i, lines[i])
    else:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        detail = f"swapped lines {i + 1} and {j + 1}"
    out = b"\n".join(lines)
    expect = _dup_key_check(b, out) if kind in YAML_KINDS else None
    return Mutation(_back(out, was_str), detail, expect)


def mutate_line_delete(data, rng, kind: str = "") -> Mutation:
    """Deletes one line (one list entry of a constraint list)."""
    return _line_mutation(data, rng, kind, "delete")


def mutate_line_duplicate(data, rng, kind: str = "") -> Mutation:
    """Duplicates one line: in YAML usually a duplicate key, which must be refused."""
    return _line_mutation(data, rng, kind, "duplicate")


def mutate_line_swap(data, rng, kind: str = "") -> Mutation:
    """Swaps two lines."""
    return _line_mutation(data, rng, kind, "swap")


# ---------------------------------------------------------------------------- numbers

# Fields of an argument dict that hold a number / a list of numbers, per kind.
_NUMERIC_FIELDS = {
    "lists": ("npus",),
    "linear": ("num_dims",),
    "spec": ("spec.total_bw_gbps", "spec.max_cost_usd", "spec.lower_gbps", "spec.upper_gbps"),
    "solve_args": ("max_rounds", "batch"),
    "num_dims": ("num_dims",),
    "build_args": ("cost_rates",),
    "notation": (),
    "path_args": (),
}


def _get(d: dict, path: str):
    for part in path.split("."):
        d = d[part]
    return d


def _set(d: dict, path: str, value) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        d = d[part]
    d[parts[-1]] = value


def _args_number_mutation(args: dict, rng, kind: str, values: list, what: str) -> Mutation:
    """One number (or list entry) of an argument dict replaced by one of ``values``."""
    args = json.loads(json.dumps(args))
    fields = _NUMERIC_FIELDS.get(kind, ())
    if kind == "notation":
        text = args["notation"]
        m = list(re.finditer(r"\d+", text))
        t = rng.choice(m)
        v = rng.choice(values)
        args["notation"] = text[:t.start()] + _number_text(v) + text[t.end():]
        return Mutation(args, f"notation count -> {_short(v)} ({what})")
    if kind == "linear" and rng.random() < 0.7:
        s = list(args["strings"])
        i = rng.randrange(len(s))
        v = rng.choice(values)
        s[i] = rng.choice([f"bw[0] <= {_number_text(v)}", f"{_number_text(v)}*bw[1] >= 1",
                           f"bw[{_number_text(v, integer=True)}] <= 5",
                           f"{_number_text(v)}*{_number_text(v)}*bw[0] <= 1"])
        args["strings"] = s
        return Mutation(args, f"constraint number -> {_short(v)} ({what})")
    if kind == "build_args":
        v = rng.choice(values)
        args["cost_rates"] = [v, 100.0, 200.0] if rng.random() < 0.5 else [v, v, v]
        return Mutation(args, f"cost_rates -> {_short(v)} ({what})")
    if not fields:
        return Mutation(args, "no number")
    f = rng.choice(fields)
    v = rng.choice(values)
    cur = _get_or_none(args, f)
    if cur is None and f in ("spec.lower_gbps", "spec.upper_gbps"):
        cur = [10.0] * (3 if args.get("net") == "3d" else 4)
    if isinstance(cur, list) and cur:
        cur = list(cur)
        cur[rng.randrange(len(cur))] = v
        _set(args, f, cur)
    else:
        _set(args, f, v)
    return Mutation(args, f"{f} -> {_short(v)} ({what})")


def _get_or_none(d, path):
    try:
        return _get(d, path)
    except (KeyError, TypeError):
        return None


def _number_text(v, integer: bool = False) -> str:
    if isinstance(v, dict) and "$int_digits" in v:
        digit, n = v["$int_digits"]
        return digit * int(n)
    if isinstance(v, dict) and "$float" in v:
        return str(v["$float"])
    if integer and isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _short(v) -> str:
    s = json.dumps(v) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


_EXTREME_ARGS = [0, -1, 1, 2, -0.0, 1e-320, 0.5, 1e308, -1e308, {"$float": "inf"},
                 {"$float": "-inf"}, {"$float": "nan"}, 10**40, -(10**40), 2**63, 2**64 + 1,
                 1e40, 4096.0, 1048577, 1073741825, 1e18, 1e19, 1e12, 1e13]


def mutate_extreme_number(data, rng, kind: str = "") -> Mutation:
    """Replaces one number with an extreme one (0, -1, 1e308, inf, nan, 10**40, ...)."""
    if isinstance(data, dict):
        return _args_number_mutation(data, rng, kind, _EXTREME_ARGS, "extreme")
    if isinstance(data, list):  # constraint strings
        s = list(data)
        i = rng.randrange(len(s))
        nums = list(re.finditer(r"\d+(?:\.\d*)?", s[i]))
        if nums:
            m = rng.choice(nums)
            s[i] = s[i][:m.start()] + rng.choice(EXTREMES) + s[i][m.end():]
        return Mutation(s, f"extreme number in constraint {i}")
    b, was_str = _as_bytes(data)
    nums = _numbers(b)
    if not nums:
        return Mutation(data, "no number")
    m = rng.choice(nums)
    new = rng.choice(EXTREMES).encode()
    out = _splice(b, m, new)
    return Mutation(_back(out, was_str), f"{m.group()[:20]!r} -> {new[:24]!r}")


def mutate_huge_int(data, rng, kind: str = "") -> Mutation:
    """Replaces one number with an integer of 4,299-10,000 digits (Python refuses to turn
    over 4,300 digits into an int); text workloads may get a header whose layer count is
    one."""
    n = rng.choice(HUGE_DIGITS)
    digit = rng.choice("79")
    if isinstance(data, dict):
        return _args_number_mutation(data, rng, kind, [{"$int_digits": [digit, n]}],
                                     f"{n} digits")
    if isinstance(data, list):
        s = list(data)
        i = rng.randrange(len(s))
        s[i] = rng.choice([f"bw[{digit * n}] <= 5", f"bw[0] <= {digit * n}",
                           f"{digit * n}*bw[1] >= 1", f"bw[0] <= 0.{digit * n}"])
        return Mutation(s, f"{n}-digit number in constraint {i}")
    b, was_str = _as_bytes(data)
    if kind == "workload_txt" and rng.random() < 0.4:
        out = b"DATA\n" + digit.encode() * n + b"\n" + b
        return Mutation(out, f"header with a {n}-digit layer count")
    nums = _numbers(b)
    if not nums:
        return Mutation(data, "no number")
    m = rng.choice(nums)
    out = _splice(b, m, digit.encode() * n)
    return Mutation(_back(out, was_str), f"{m.group()[:20]!r} -> {n} digits")


# -------------------------------------------------------------------------- encodings

_BAD_BYTES = (b"\xff", b"\xfe", b"\x80", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80",
              b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\xe9", b"\x00", b"\x1b[31m", b"\r",
              b"\xef\xbb\xbf")


def mutate_non_utf8(data, rng, kind: str = "") -> Mutation:
    """Inserts bytes that are not UTF-8 (or controls, a BOM), or re-encodes the file
    (UTF-16, Latin-1 with an accented comment)."""
    b, was_str = _as_bytes(data)
    if was_str:
        i = rng.randrange(len(data) + 1)
        return Mutation(data[:i] + rng.choice(ODD_CHARS) + data[i:],
                        "inserted an odd code point")
    r = rng.random()
    if r < 0.1:
        return Mutation(b.decode("utf-8").encode("utf-16"), "re-encoded as UTF-16")
    if r < 0.2:
        return Mutation("# café\n".encode("latin-1") + b, "Latin-1 comment")
    bad = rng.choice(_BAD_BYTES)
    i = rng.randrange(len(b) + 1)
    return Mutation(b[:i] + bad + b[i:], f"inserted {bad!r} at byte {i}")
