"""Fuzzer of libra_jax's inputs (issue 17, "Hostile and malformed input").

Seeded mutations of the shipped inputs and of the public API's arguments are fed to the
public loaders (in long-lived worker processes, each case bounded in time and memory) and,
kept apart, to the ``libra-train`` command. The contract checked: every input is either
accepted (and then solves to finite results or a non-ok status) or refused with
``libra_jax.LibraInputError``, within 10 s and 1 GB; a duplicate YAML key or a number
replaced by a non-number is never accepted; the command never prints a traceback for bad
input.

    python experiments/fuzz_inputs.py --seed 7 --cases 5000 --cli-cases 40 --out /tmp/fuzz

prints one table per run (in-process cases, then CLI cases) of outcomes by mutation family,
the distinct failure causes with one example each, and writes ``report.json`` plus one
reproducer per failing case (``repro/<id>.json`` and its input file) into ``--out``.

Pieces (all importable; ``tests/test_fuzz.py`` drives them with hypothesis):

* ``mutate_<family>(data, rng, kind=...) -> Mutation``: the mutation families over the
  shipped inputs (bytes of a file, or a notation / constraint string) and over API
  arguments (``mutate_wrong_arg_type``, ``mutate_extreme_number`` and ``mutate_huge_int`` on
  argument dicts).
* :func:`make_case` (one seeded case), :func:`make_cli_case` (one command-line case).
* :func:`run_case`: runs one case in this process and classifies the outcome;
  :class:`Runner`: a pool of worker processes that import libra_jax once and run cases with
  the time and memory bounds enforced (a worker that dies, times out or grows past the
  memory bound is killed and replaced).
* :func:`run_cli_case`: one ``python -m libra_jax.train conf=turing_nlg ...`` run.

Outcomes: ``accepted`` and ``rejected`` (LibraInputError) are the contract; every other
outcome is a failure: ``crash:<ExceptionType>`` (a RuntimeWarning counts: the suite runs
with warnings as errors), ``timeout`` (over 10 s of CPU time or 30 s of wall time, XLA compilation excluded), ``memory``
(peak RSS over 1 GB above the worker's RSS before the case, or MemoryError),
``silent-accept`` (a duplicate key or a non-number accepted), ``bad-result`` (status ok
with a non-finite or negative number), ``code-exec`` (a YAML python tag ran),
``long-message`` (an error message over 10,000 characters), ``worker-died``. CLI cases add
``traceback``, ``no-error-line`` (non-zero exit without an ``error:`` line).

Argument values are carried as JSON with a few tags (``{"$float": "inf"}``,
``{"$int_digits": ["7", 5000]}``, ``{"$ref": "net3d"}``, ...; see :func:`decode`), so a
reproducer is a small JSON file whatever it expands to.
"""

from __future__ import annotations

import argparse
import base64
import collections
import contextlib
import dataclasses
import json
import math
import multiprocessing as mp
import multiprocessing.connection as mpc
import os
import pathlib
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
INPUTS = ROOT / "libra_jax" / "data" / "libra_inputs"
FIXTURES = ROOT / "tests" / "fixtures"

#: Per-case bounds of the contract: CPU seconds (net of XLA compilation), and MB of peak
#: RSS growth. On a shared machine wall time also counts what other processes take, so
#: wall time is bounded at ``WALL_SLACK`` x the limit; on an idle machine the two agree
#: (the loaders are single-threaded host code).
TIME_LIMIT_S = 10.0
WALL_SLACK = 3.0
MEM_LIMIT_MB = 1024.0
#: Hard kill of a case in its solve stage (its XLA compilations, excluded from the time
#: bound, may take tens of seconds on a loaded machine); the bound itself is checked on the
#: solve's wall time net of compilation.
SOLVE_HARD_S = 120.0
#: Longest acceptable LibraInputError message (characters).
MAX_MESSAGE_CHARS = 10_000
#: A CLI run (process start, imports, compile-cache loads included).
CLI_TIME_LIMIT_S = 90.0

OK_OUTCOMES = ("accepted", "rejected")

# ------------------------------------------------------------------------------ inputs

#: kind -> (loader name shown in reports, file suffix or None for argument kinds)
KINDS: dict[str, tuple[str, str | None]] = {
    "network": ("load_network_file", ".yml"),
    "cost_model": ("load_cost_model", ".yml"),
    "communicator": ("load_communicator", ".yml"),
    "workload_txt": ("load_workload(.txt)", ".txt"),
    "workload_yaml": ("load_workload(.yaml)", ".yaml"),
    "astrasim_network": ("import_network_yaml", ".yml"),
    "notation": ("parse_notation", None),
    "lists": ("network_from_lists", None),
    "linear": ("parse_linear_constraints", None),
    "spec": ("ConstraintSpec+build_problem+solve", None),
    "build_args": ("build_problem", None),
    "solve_args": ("solve", None),
    "num_dims": ("load_workload(num_dims)", None),
    "path_args": ("loader(path)", None),
}
FILE_KINDS = tuple(k for k, (_, s) in KINDS.items() if s is not None)
YAML_KINDS = tuple(k for k in FILE_KINDS if k != "workload_txt")
STR_KINDS = ("notation", "linear")
ARG_KINDS = ("notation", "lists", "linear", "spec", "build_args", "solve_args", "num_dims",
             "path_args")

#: The ASTRA-sim network seed: what `astrasim.export_design` writes for RI(16)_FC(8)_SW(32)
#: at [100, 200, 50] GB/s and latencies [50, 500, 2000] ns.
ASTRASIM_SEED = """\
# ASTRA-sim 2.x analytical network input, written by libra_jax.
# Network: RI(16)_FC(8)_SW(32) (4096 NPUs), dimension 0 first.
# latency: ns per link (a Switch step is two hops).

topology: [ Ring, FullyConnected, Switch ]
npus_count: [ 16, 8, 32 ]
bandwidth: [ 93.13225746154785, 186.2645149230957, 46.566128730773926 ]  # GB/s
latency: [ 50.0, 500.0, 2000.0 ]  # ns
"""

NOTATION_SEEDS = ("RI(16)_FC(8)_SW(32)", "RI(4)_FC(8)_RI(4)_SW(32)", "Ring(2)_Switch(4)",
                  "fc(8)_sw(16)")
#: Constraint strings: the multiple_constraints group and the README's examples (4D).
LINEAR_SEEDS = (
    ("bw[0] == 500", "bw[0] >= bw[1]", "bw[1] >= bw[2]", "bw[2] + bw[3] == 200"),
    ("2*bw[0] - bw[1] <= 100 + bw[3]",),
    ("bw[0] >= bw[1]", "0.5 bw[1] => bw[3]", "bw[2] =< 300"),
)
SPEC_SEEDS = (
    ("3d", {"total_bw_gbps": 500.0}),
    ("3d", {"total_bw_gbps": 800.0, "total_bw_mode": "le", "max_cost_usd": 2e7}),
    ("3d", {"total_bw_gbps": 500.0, "lower_gbps": [10.0, 10.0, 10.0],
            "upper_gbps": [400.0, None, 300.0]}),
    ("4d", {"total_bw_gbps": 1000.0, "linear": list(LINEAR_SEEDS[0])}),
)


def seed_files() -> dict[str, list[tuple[str, bytes]]]:
    """kind -> [(name, bytes)]: the shipped inputs each file kind is mutated from."""
    def read(*parts):
        return pathlib.Path(*parts).read_bytes()

    txt = [(p.name, p.read_bytes()) for p in sorted((INPUTS / "workload").glob("*.txt"))]
    tnlg = read(INPUTS, "workload", "Turing_NLG.txt")
    layers = sum(1 for line in tnlg.decode().splitlines() if line.strip())
    txt.append(("Turing_NLG_header.txt", f"DATA\n{layers}\n".encode() + tnlg))
    return {
        "network": [(p.name, p.read_bytes())
                    for p in sorted((INPUTS / "network").glob("*.yml"))],
        "cost_model": [(p.name, p.read_bytes())
                       for p in sorted((INPUTS / "cost_model").glob("*.yml"))],
        "communicator": [(p.name, p.read_bytes())
                         for p in sorted((INPUTS / "communicator").glob("*.yml"))],
        "workload_txt": txt,
        "workload_yaml": [("tiny_workload.yaml", read(FIXTURES, "tiny_workload.yaml"))],
        "astrasim_network": [("astrasim_network.yml", ASTRASIM_SEED.encode())],
    }


_SEEDS: dict | None = None


def seeds() -> dict[str, list[tuple[str, bytes]]]:
    global _SEEDS
    if _SEEDS is None:
        _SEEDS = seed_files()
    return _SEEDS


def base_args(kind: str, rng: random.Random) -> dict:
    """A valid argument dict of an argument kind (tagged JSON, see :func:`decode`)."""
    if kind == "notation":
        return {"notation": rng.choice(NOTATION_SEEDS), "cost_tiers": None}
    if kind == "lists":
        return rng.choice([
            {"topology": ["Ring", "FullyConnected", "Switch"], "npus": [16, 8, 32],
             "cost_tiers": ["InterPackage", "InterNode", "InterPod"]},
            {"topology": ["RI", "fc", "ring", "SW"], "npus": [4, 8, 4, 32],
             "cost_tiers": None},
        ])
    if kind == "linear":
        return {"strings": list(rng.choice(LINEAR_SEEDS)), "num_dims": 4}
    if kind == "spec":
        net, spec = rng.choice(SPEC_SEEDS)
        return {"net": net, "spec": json.loads(json.dumps(spec)),
                "objective": rng.choice(["perf", "perf_per_cost"])}
    if kind == "build_args":
        return {"network": {"$ref": "net3d"}, "workload": {"$ref": "wl3d"},
                "cost_rates": {"$ref": "rates3d"}, "spec": {"$spec": {"total_bw_gbps": 500.0}}}
    if kind == "solve_args":
        return {"p": {"$ref": "problem3d"}, "objective": "perf", "method": "ipm",
                "max_rounds": 40, "batch": 16}
    if kind == "num_dims":
        return {"path": "workload/Turing_NLG.txt",
                "communicator": "communicator/Turing_NLG_3D.yml", "num_dims": 3}
    if kind == "path_args":
        return {"loader": rng.choice(["load_network_file", "load_cost_model",
                                      "load_communicator", "load_workload",
                                      "import_network_yaml"]),
                "path": {"$path": "network/3d_network.yml"}}
    raise KeyError(kind)


# ------------------------------------------------------------------- tagged values


class _Opaque:
    """An object of a type no loader knows (``{"$object": ...}``)."""

    def __repr__(self) -> str:
        return "<opaque>"


def decode(value: Any, refs: dict | None = None) -> Any:
    """The Python value of a tagged JSON value.

    Tags (a dict with one ``$`` key): ``$float`` (``"inf"``, ``"nan"``, a repr),
    ``$int_digits`` ``[digit, n]`` (an int of n digits), ``$str_repeat`` ``[s, n]``,
    ``$concat`` ``[part, ...]`` (strings or bytes joined),
    ``$list_repeat`` ``[item, n]``, ``$bytes`` (base64), ``$tuple``, ``$set``, ``$complex``
    ``[re, im]``, ``$ndarray`` ``[values, dtype]``, ``$np`` ``[value, dtype]`` (a numpy
    scalar), ``$object`` (an opaque object), ``$ref`` (a prepared object: ``net3d``,
    ``wl3d``, ``rates3d``, ``problem3d``, ... from ``refs``), ``$path`` (a shipped input as
    a ``pathlib.Path``), ``$spec`` (a ``ConstraintSpec`` of the decoded fields), ``$dict``
    ``[[k, v], ...]`` (keys of any type).
    """
    if isinstance(value, list):
        return [decode(v, refs) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (tag, arg), = value.items()
        if isinstance(tag, str) and tag.startswith("$"):
            return _decode_tag(tag, arg, refs)
    return {k: decode(v, refs) for k, v in value.items()}


def _decode_tag(tag: str, arg: Any, refs: dict | None) -> Any:
    import numpy as np  # noqa: PLC0415

    if tag == "$float":
        return float(arg)
    if tag == "$int_digits":
        digit, n = arg  # built by arithmetic: int("9" * 5000) is over Python's limit
        sign = -1 if digit.startswith("-") else 1
        return sign * int(digit.lstrip("-")) * ((10 ** int(n) - 1) // 9)
    if tag == "$str_repeat":
        return arg[0] * int(arg[1])
    if tag == "$concat":
        parts = [decode(x, refs) for x in arg]
        return (b"" if parts and isinstance(parts[0], bytes) else "").join(parts)
    if tag == "$list_repeat":
        return [decode(arg[0], refs)] * int(arg[1])
    if tag == "$bytes":
        return base64.b64decode(arg)
    if tag == "$tuple":
        return tuple(decode(arg, refs))
    if tag == "$set":
        return set(decode(arg, refs))
    if tag == "$complex":
        return complex(*arg)
    if tag == "$ndarray":
        return np.array(decode(arg[0], refs), dtype=arg[1])
    if tag == "$np":
        return np.dtype(arg[1]).type(decode(arg[0], refs))
    if tag == "$object":
        return _Opaque()
    if tag == "$path":
        return INPUTS / arg
    if tag == "$dict":
        return {_hashable(decode(k, refs)): decode(v, refs) for k, v in arg}
    if tag == "$ref":
        if refs is None or arg not in refs:
            raise KeyError(f"unknown reference {arg!r}")
        ref = refs[arg]
        return ref() if callable(ref) else ref
    if tag == "$spec":
        import libra_jax as lj  # noqa: PLC0415

        return lj.ConstraintSpec(**decode(arg, refs))
    raise KeyError(f"unknown tag {tag!r}")


def _hashable(x):
    return tuple(x) if isinstance(x, list) else x


# -------------------------------------------------------------------------- mutations


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


def _dup_key_check(before: bytes, after: bytes) -> str | None:
    """``"duplicate key"`` when ``after`` parses as YAML with a duplicate mapping key and
    ``before`` did not (the oracle of the generic text mutations); None otherwise."""
    if len(after) > 65536:
        return None
    dup_after = yaml_duplicate_keys(after)
    if dup_after and not yaml_duplicate_keys(before):
        return f"duplicate key {dup_after[0]!r}"
    return None


class _MergeKey:
    def __repr__(self) -> str:
        return "'<<'"


#: The merge key in `yaml_duplicate_keys`' result.
MERGE_KEY = _MergeKey()


def yaml_duplicate_keys(data: bytes | str) -> list:
    """The keys that occur twice in one mapping of a YAML document, the merge key ``<<``
    included (once per mapping; several merges are one ``<<`` with a list); [] if there are
    none or the text is not YAML."""
    found = []

    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                key = MERGE_KEY  # not the string '<<' (a quoted '<<' is an ordinary key)
            else:
                try:
                    key = loader.construct_object(key_node, deep=True)
                    hash(key)
                except Exception:  # noqa: BLE001 -- an unhashable key is not our question
                    continue
            if key in seen:
                found.append(key)
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.add_constructor("tag:yaml.org,2002:map", construct_mapping)
    try:
        yaml.load(data, Loader=Loader)  # noqa: S506 -- a SafeLoader subclass
    except Exception:  # noqa: BLE001
        return []
    return found


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


_NOTATION_BLOCKS = ("RI", "FC", "SW", "Ring", "ring", "FULLYCONNECTED", "fully_connected",
                    "Fully-Connected", "Torus", "Mesh", "", "R I", "\uff32\uff29", "R\u0406",
                    "r" * 1000, "Switch ", " SW", "sw_", "_")
_NOTATION_COUNTS = ("0", "1", "-1", "+4", "2", "\u0664", "\uff14", "1e3", "4.0", "0x10",
                    "1" + "0" * 40, "7" * 4301, "", " 4 ", "(4)", "4)(4", "1048577",
                    "1073741825", "65536", "-0", "00004")
_NOTATION_SEPS = ("", "__", "-", " ", "_ _", "x", ",", "\n", "\x00", "_\u200b", ")(")


def _grammar_notation(s: str, rng) -> tuple[str, str]:
    parts = re.findall(r"([^_()]*)\(([^()]*)\)", s) or [("RI", "4")]
    op = rng.choice(["block", "count", "sep", "dup", "drop", "bracket", "junk", "many"])
    if op == "block":
        i = rng.randrange(len(parts))
        parts[i] = (rng.choice(_NOTATION_BLOCKS), parts[i][1])
    elif op == "count":
        i = rng.randrange(len(parts))
        parts[i] = (parts[i][0], rng.choice(_NOTATION_COUNTS))
    elif op == "dup":
        parts = parts * rng.choice([2, 5, 6, 17])
    elif op == "drop":
        parts = parts[:1] if rng.random() < 0.5 else []
    elif op == "many":
        parts = [("RI", "2")] * rng.choice([16, 17, 31, 64, 1000])
    joined = "_".join(f"{b}({n})" for b, n in parts)
    if op == "sep":
        joined = rng.choice(_NOTATION_SEPS).join(f"{b}({n})" for b, n in parts)
    elif op == "bracket":
        joined = rng.choice([joined.replace("(", "", 1), joined.replace(")", "", 1),
                             joined.replace("(", "((").replace(")", "))"),
                             joined.replace("(", "[").replace(")", "]"), joined + ")",
                             "(" + joined])
    elif op == "junk":
        j = rng.choice(["_", " ", "\t", "\x00", "\u202e", "\ufeff", "()", "RI", "(4)"])
        joined = joined + j if rng.random() < 0.5 else j + joined
    return joined, op


_LIN_OPS = ("==", "<=", ">=", "=<", "=>", "<", ">", "=", "!=", "<>", "\u2264", "===", " ",
            "<= <=", "==")
_LIN_INDEX = ("0", "3", "4", "-1", "", "1.5", "99999", "9" * 5000, "0x1", "\u0660", "0 1",
              "00", "1e0", "9999999", "[0]")
_LIN_NUMBERS = ("1e200*1e200", "1e308*3", "1e-400", "1e400", "0", "nan", "inf", "-0",
                "1e308", "1e-308", "1e12", "1e13", "1e-12", "1e-13", "0.0000000001",
                "1" * 400, ".", "1.", ".5", "1e", "1e+", "5e-324")


def _grammar_linear(strings: list, rng) -> tuple[list, str]:
    s = list(strings)
    i = rng.randrange(len(s))
    c = s[i]
    op = rng.choice(["op", "index", "number", "product", "repeat", "unicode", "chain", "empty",
                     "brackets", "case"])
    if op == "op":
        c = re.sub(r"==|<=|>=|=<|=>", lambda m: rng.choice(_LIN_OPS), c, count=1)
    elif op == "index":
        c = re.sub(r"bw\[\d+\]", lambda m: f"bw[{rng.choice(_LIN_INDEX)}]", c, count=1)
    elif op == "number":
        c = rng.choice([f"{rng.choice(_LIN_NUMBERS)}*bw[0] <= 1",
                        f"bw[0] <= {rng.choice(_LIN_NUMBERS)}",
                        f"{rng.choice(_LIN_NUMBERS)} bw[1] >= {rng.choice(_LIN_NUMBERS)}",
                        c + " + " + rng.choice(_LIN_NUMBERS)])
    elif op == "product":
        c = rng.choice(["bw[0]*bw[1] <= 5", "2 2 bw[0] <= 5", "2bw[0] <= 5", "bw[0] 2 <= 5",
                        "bw[0] * * 2 <= 5", "* bw[0] <= 5", "bw[0] - - bw[1] <= 5",
                        "0*bw[0] <= 5", "bw[0] - bw[0] <= 5", "-bw[0] >= -5"])
    elif op == "repeat":
        n = rng.choice([100, 1000, 10000, 100000])
        c = rng.choice(["bw[0] + " * n + "bw[1] <= 5", "2*" * n + "bw[0] <= 5",
                        "bw[0] <= " + "1" * n, "-" * n + "bw[0] <= 5"])
    elif op == "unicode":
        j = rng.randrange(len(c) + 1)
        c = c[:j] + rng.choice(ODD_CHARS + ("\uff3b", "\uff10")) + c[j:]
    elif op == "chain":
        c = rng.choice(["bw[0] <= bw[1] <= 5", "5 >= bw[0] >= 1", "bw[0] == bw[1] == bw[2]"])
    elif op == "empty":
        c = rng.choice(["", " ", "<=", "bw", "bw[", "]", "bw[0]", "5 <= 6", "== 5"])
    elif op == "brackets":
        c = rng.choice(["bw[0 <= 5", "bw 0 <= 5", "BW[0] <= 5", "bw[[0]] <= 5",
                        "bw[0][1] <= 5", "(bw[0]) <= 5", "bw(0) <= 5", "bw[0]] <= 5"])
    else:
        c = c.upper() if rng.random() < 0.5 else c.replace("bw", "Bw")
    s[i] = c
    return s, op


def mutate_grammar(data, rng, kind: str = "") -> Mutation:
    """Grammar mutations of a notation (blocks, counts, separators, brackets, parts) or of a
    list of constraint strings (operators, indices, numbers, products, chains, repeats,
    look-alike characters)."""
    if kind == "notation" or isinstance(data, str):
        out, op = data, "none"
        for _ in range(rng.randint(1, 2)):
            out, op = _grammar_notation(out, rng)
        return Mutation(out, f"notation grammar: {op}")
    out, op = _grammar_linear(list(data), rng)
    return Mutation(out, f"constraint grammar: {op}")


#: Argument values by category, for wrong-type mutations.
_NON_NUMBER_ARGS = ["500", "abc", "", True, False, [500], {"a": 1}, {"$bytes": "NTAw"},
                    {"$complex": [500, 0]}, {"$object": 1}, {"$set": [1]}, "1e3", "inf"]
_ODD_ARGS = [None, 0, -1, 1.5, {"$float": "nan"}, {"$tuple": []}, [], {"$ndarray": [[1, 2],
             "float64"]}, {"$np": [3, "int64"]}, {"$np": [500.0, "float32"]}]


def mutate_wrong_arg_type(args: dict, rng, kind: str = "") -> Mutation:
    """Replaces one argument (or one entry of a list argument) of a public function by a
    value of another type: a number by a non-number ('500', True, [500], a dict, bytes,
    complex: must be refused), a list by a scalar or a mapping, a string by a number, an
    object by None or a string."""
    a = json.loads(json.dumps(args))
    if kind == "spec":
        field = rng.choice(["total_bw_gbps", "total_bw_mode", "lower_gbps", "upper_gbps",
                            "linear", "max_cost_usd", "objective"])
        if field == "objective":
            v = rng.choice(["PERF", "perf_per_cost", "speed", "", None, 5, ["perf"]])
            a["objective"] = v
            return Mutation(a, f"objective -> {_short(v)}")
        spec = a["spec"]
        if field in ("total_bw_gbps", "max_cost_usd"):
            v = rng.choice(_NON_NUMBER_ARGS + _ODD_ARGS)
            spec[field] = v
            expect = f"{field} = {_short(v)} is not a number" if _non_number(v) else None
            return Mutation(a, f"{field} -> {_short(v)}", expect)
        if field == "total_bw_mode":
            v = rng.choice(["EQ", "ge", "", None, 5, ["eq"], "le ", "equal"])
            spec[field] = v
            return Mutation(a, f"total_bw_mode -> {_short(v)}")
        if field == "linear":
            v = rng.choice([5, {"bw[0] <= 400": 1}, "bw[0] <= 400", [5], [None],
                            [{"$bytes": "YndbMF0gPD0gNDAw"}], {"$tuple": ["bw[0] <= 400"]},
                            [["bw[0] <= 400"]], True, {"$set": ["bw[0] <= 400"]}])
            spec[field] = v
            ok = isinstance(v, dict) and "$tuple" in v
            return Mutation(a, f"linear -> {_short(v)}",
                            None if ok else f"linear = {_short(v)} is not a list of strings")
        d = 3 if a["net"] == "3d" else 4
        cur = spec.get(field) or [10.0] * d
        r = rng.random()
        if r < 0.5:
            v = rng.choice(_NON_NUMBER_ARGS)
            cur = list(cur)
            cur[rng.randrange(len(cur))] = v
            spec[field] = cur
            expect = (f"{field} entry {_short(v)} is not a number" if _non_number(v)
                      else None)
            return Mutation(a, f"{field} entry -> {_short(v)}", expect)
        v = rng.choice([5, 500.0, "500", {"a": 1}, [[1, 2, 3]], [1.0] * (d + 1), [1.0],
                        {"$ndarray": [[[1.0] * d], "float64"]}, True])
        spec[field] = v
        expect = (f"{field} = {_short(v)} is not a list of numbers"
                  if (not isinstance(v, list) or (v and isinstance(v[0], list)))
                  and not (isinstance(v, dict) and "$ndarray" in v) else None)
        return Mutation(a, f"{field} -> {_short(v)}", expect)
    if kind == "build_args":
        field = rng.choice(["network", "workload", "cost_rates", "spec"])
        pool = {
            "network": [None, "RI(16)_FC(8)_SW(32)", {"$ref": "net4d"}, 5, {"a": 1},
                        {"$ref": "wl3d"}],
            "workload": [None, "workload/Turing_NLG.txt", {"$ref": "wl4d"}, 5,
                         {"$ref": "net3d"}],
            "cost_rates": [None, "abc", [1.0, 2.0], [[1.0, 2.0, 3.0]], [True, True, True],
                           ["1", "2", "3"], 5.0, {"a": 1}, [{"$float": "nan"}, 1.0, 1.0],
                           [-1.0, 1.0, 1.0], [1e308, 1e308, 1e308], {"$ref": "rates4d"},
                           [{"$complex": [1, 1]}, 1.0, 1.0]],
            "spec": [None, {}, "total_bw_gbps=500", 5, {"total_bw_gbps": 500},
                     {"$ref": "net3d"}],
        }
        v = rng.choice(pool[field])
        a[field] = v
        expect = None
        if v in ({"$ref": "net4d"}, {"$ref": "wl4d"}, {"$ref": "rates4d"}):
            expect = f"{field} does not match the other arguments' dimensions"
        elif field == "cost_rates" and (v in ("abc", 5.0, {"a": 1})
                                        or (isinstance(v, list) and v
                                            and _non_number(v[0]))):
            expect = f"cost_rates = {_short(v)} is not a list of D numbers"
        elif field in ("network", "workload", "spec") and v is not None:
            expect = f"{field} = {_short(v)} has the wrong type"
        elif field in ("network", "workload", "spec"):
            expect = f"{field} = None"
        return Mutation(a, f"{field} -> {_short(v)}", expect)
    if kind == "solve_args":
        field = rng.choice(["p", "objective", "method", "max_rounds", "batch"])
        pool = {
            "p": [None, "problem", 5, {"$ref": "net3d"}, {"a": 1}],
            "objective": ["perf_per_cost", "PERF", "", None, 5, ["perf"], "time"],
            "method": ["optax", "IPM", "newton", None, 5, ""],
            "max_rounds": [0, -1, 1, "40", True, 1.5, 10**40, None, [40]],
            "batch": [0, -1, 1, "16", True, 10**9, None, 2.5, [16]],
        }
        v = rng.choice(pool[field])
        a[field] = v
        expect = None
        if field == "p":
            expect = f"p = {_short(v)} is not a Problem"
        elif field in ("max_rounds", "batch") and (_non_number(v) or v is None):
            expect = f"{field} = {_short(v)} is not a number"
        return Mutation(a, f"{field} -> {_short(v)}", expect)
    if kind == "lists":
        field = rng.choice(["topology", "npus", "cost_tiers"])
        r = rng.random()
        if field == "npus" and r < 0.6:
            v = rng.choice(_NON_NUMBER_ARGS + [16.0, 16.5, {"$np": [16, "int64"]}])
            cur = list(a["npus"])
            cur[rng.randrange(len(cur))] = v
            a["npus"] = cur
            expect = f"npus entry {_short(v)} is not a number" if _non_number(v) else None
            return Mutation(a, f"npus entry -> {_short(v)}", expect)
        if r < 0.6:
            v = rng.choice([5, None, "", "Ring ", "rIng", "Torus", ["Ring"], {"a": 1},
                            {"$bytes": "UmluZw=="}, True])
            cur = list(a[field] or ["InterNode"] * len(a["npus"]))
            cur[rng.randrange(len(cur))] = v
            a[field] = cur
            return Mutation(a, f"{field} entry -> {_short(v)}")
        v = rng.choice([5, "RI(4)", {"a": 1}, {"Ring": 4}, None, [], {"$tuple": ["Ring"]},
                        {"$ndarray": [[4, 8], "int64"]}, {"$set": ["Ring"]}, "Ring"])
        a[field] = v
        expect = None
        if field == "npus" and (isinstance(v, (int, str)) or v is None
                                or (isinstance(v, dict) and not {"$tuple", "$ndarray"} & set(v))):
            expect = f"npus = {_short(v)} is not a list of numbers"
        return Mutation(a, f"{field} -> {_short(v)}", expect)
    if kind == "linear":
        if rng.random() < 0.6:
            v = rng.choice([5, {"bw[0] <= 5": 1}, "bw[0] <= 5", [5], [None],
                            [{"$bytes": "YndbMF0gPD0gNQ=="}], {"$tuple": ["bw[0] <= 5"]},
                            [["bw[0] <= 5"]], {"$set": ["bw[0] <= 5"]}, None, True])
            a["strings"] = v
            ok = v is None or (isinstance(v, dict) and "$tuple" in v)
            return Mutation(a, f"strings -> {_short(v)}",
                            None if ok else f"strings = {_short(v)} is not a list of strings")
        v = rng.choice([True, "4", 0, -1, 4.0, 10**40, {"$np": [4, "int64"]}, [4], None])
        a["num_dims"] = v
        return Mutation(a, f"num_dims -> {_short(v)}",
                        f"num_dims = {_short(v)} is not a number" if _non_number(v) else None)
    if kind == "num_dims":
        v = rng.choice([True, "3", 3.0, 0, -1, 10**40, None, [3], 4, {"$np": [3, "int64"]},
                        {"$float": "nan"}, {"$object": 1}])
        a["num_dims"] = v
        return Mutation(a, f"num_dims -> {_short(v)}",
                        f"num_dims = {_short(v)} is not a number" if _non_number(v) else None)
    if kind == "notation":
        v = rng.choice([None, 5, {"$bytes": "UkkoNClfRkMoOCk="}, ["RI(4)"], {"a": 1}, "",
                        "   ", {"$object": 1}])
        if rng.random() < 0.3:
            a["cost_tiers"] = rng.choice(["InterNode", 5, {"a": 1}, ["InterNode"], [5, 6, 7]])
            return Mutation(a, f"cost_tiers -> {_short(a['cost_tiers'])}")
        a["notation"] = v
        return Mutation(a, f"notation -> {_short(v)}")
    if kind == "path_args":
        v = rng.choice([None, 123, 3.5, {"$bytes": base64.b64encode(
            str(INPUTS / "network/3d_network.yml").encode()).decode()}, "", ".", "/",
            "\x00", {"$str_repeat": ["a", 5000]}, {"$path": "network"}, ["x.yml"],
            "/nonexistent/x.yml", {"$path": "network/../network/3d_network.yml"},
            "/dev/null", "/proc/self/status", {"$object": 1}])
        a["path"] = v
        return Mutation(a, f"path -> {_short(v)}")
    raise KeyError(kind)


def _non_number(v) -> bool:
    """True for a tagged JSON value that is not a real number (strings, bools, lists,
    mappings, bytes, complex, sets, opaque objects)."""
    if isinstance(v, bool) or isinstance(v, (str, list)):
        return True
    if isinstance(v, dict):
        tags = set(v)
        return not tags & {"$float", "$int_digits", "$np"}
    return False


BIG_FILE_VARIANTS = {
    "network": ("npus_flow", "topology_flow"),
    "cost_model": ("tiers",),
    "communicator": ("row_flow",),
    "workload_txt": ("lines",),
    "workload_yaml": ("layers",),
    "astrasim_network": ("npus_flow",),
    "notation": ("parts",),
    "linear": ("terms", "strings"),
}


def big_input(kind: str, variant: str, mb: float):
    """A multi-MB input of ``kind`` (generated, never stored): a flow list of ~``mb`` MB, a
    text workload of that many MB of lines, a notation of that many MB of parts, ..."""
    n_bytes = int(mb * 1e6)
    if kind in ("network", "astrasim_network"):
        n = n_bytes // 3
        if variant == "topology_flow":
            n = n_bytes // 6
            return ("Topology: [ " + "Ring, " * n + "Ring ]\nNpusCount: [ " + "2, " * n
                    + "2 ]\n").encode()
        key_t, key_n = (("topology", "npus_count") if kind == "astrasim_network"
                        else ("Topology", "NpusCount"))
        return (f"{key_t}: [ Ring, FullyConnected, Switch ]\n{key_n}: [ " + "2, " * n
                + "2 ]\n").encode()
    if kind == "cost_model":
        n = n_bytes // 24
        return "".join(f"T{i}: {{Link: 1.5}}\n" for i in range(n)).encode()
    if kind == "communicator":
        n = n_bytes // 4
        row = "[ " + "-1, " * n + "-1 ]"
        return f"Forward: {row}\nInputGrad: {row}\nWeightGrad: {row}\n".encode()
    if kind == "workload_txt":
        line = "L -1 1000 ALLREDUCE 1000 1000 NONE 0 1000 ALLREDUCE 1000 10\n"
        return line.encode() * (n_bytes // len(line))
    if kind == "workload_yaml":
        layer = ("  - {name: l, forward: {compute_ns: 1, collective: NONE}, input_grad: "
                 "{compute_ns: 1, collective: NONE}, weight_grad: {compute_ns: 1, "
                 "collective: NONE}}\n")
        return ("layers:\n" + layer * (n_bytes // len(layer))).encode()
    if kind == "notation":
        return "_".join(["RI(2)"] * (n_bytes // 6))
    if kind == "linear":
        if variant == "terms":
            return ["bw[0] + " * (n_bytes // 8) + "bw[1] <= 5"]
        return ["bw[0] <= 5"] * (n_bytes // 10)
    raise KeyError(kind)


def mutate_big_file(data, rng, kind: str = "") -> Mutation:
    """A generated input of 2-6 MB (a long flow list, many lines, many parts); the case
    carries only its recipe (``generate``)."""
    variant = rng.choice(BIG_FILE_VARIANTS[kind])
    mb = rng.choice([2, 4, 6])
    return Mutation({"kind": kind, "variant": variant, "mb": mb},
                    f"generated {variant} of {mb} MB")


#: family -> (mutation function, kinds it applies to, relative weight)
FAMILIES: dict[str, tuple[Any, tuple[str, ...], float]] = {
    "byte_flip": (mutate_byte_flip, FILE_KINDS + STR_KINDS, 1.0),
    "token_delete": (mutate_token_delete, FILE_KINDS + STR_KINDS, 0.6),
    "token_duplicate": (mutate_token_duplicate, FILE_KINDS + STR_KINDS, 0.6),
    "token_swap": (mutate_token_swap, FILE_KINDS + STR_KINDS, 0.6),
    "line_delete": (mutate_line_delete, FILE_KINDS + ("linear",), 0.6),
    "line_duplicate": (mutate_line_duplicate, FILE_KINDS + ("linear",), 0.8),
    "line_swap": (mutate_line_swap, FILE_KINDS + ("linear",), 0.6),
    "extreme_number": (mutate_extreme_number, FILE_KINDS + ARG_KINDS[:-1], 1.5),
    "huge_int": (mutate_huge_int, FILE_KINDS + ("notation", "linear", "lists", "spec",
                                                "num_dims", "solve_args"), 1.0),
    "non_utf8": (mutate_non_utf8, FILE_KINDS + STR_KINDS, 1.0),
    "wrong_yaml_type": (mutate_wrong_yaml_type, FILE_KINDS, 1.5),
    "deep_nesting": (mutate_deep_nesting, YAML_KINDS, 0.8),
    "duplicate_key": (mutate_duplicate_key, YAML_KINDS, 1.0),
    "yaml_tag": (mutate_yaml_tag, YAML_KINDS, 1.0),
    "alias_bomb": (mutate_alias_bomb, YAML_KINDS, 0.6),
    "grammar": (mutate_grammar, STR_KINDS, 2.0),
    "wrong_arg_type": (mutate_wrong_arg_type, ARG_KINDS, 2.5),
    "big_file": (mutate_big_file, FILE_KINDS + STR_KINDS, 0.03),
}


def families_for(kind: str) -> list[str]:
    return [f for f, (_, kinds, _) in FAMILIES.items() if kind in kinds]


_STRING_FAMILIES = ("byte_flip", "token_delete", "token_duplicate", "token_swap", "non_utf8")


def make_case(seed: int | str, index: int, *, family: str | None = None,
              kind: str | None = None) -> dict:
    """Case ``index`` of run ``seed``: a family (by weight) and a kind it applies to, then
    the mutation of a shipped input of that kind; deterministic in (seed, index)."""
    rng = random.Random(f"{seed}:{index}")
    if family is None:
        fams = [f for f in FAMILIES if kind is None or kind in FAMILIES[f][1]]
        family = rng.choices(fams, weights=[FAMILIES[f][2] for f in fams])[0]
    fn, kinds, _ = FAMILIES[family]
    if kind is None:
        kind = rng.choice(kinds)
    case = {"id": f"s{seed}-{index:05d}", "seed": seed, "index": index, "kind": kind,
            "family": family, "loader": KINDS[kind][0]}
    suffix = KINDS[kind][1]
    if family == "big_file":
        m = fn(None, rng, kind=kind)
        case.update(generate=m.data, detail=m.detail, expect=None)
        if suffix is None:
            case["args"] = base_args(kind, rng)
        else:
            case["suffix"] = suffix
        return case
    if suffix is not None:
        name, data = rng.choice(seeds()[kind])
        m = fn(data, rng, kind=kind)
        case.update(seed_input=name, suffix=pathlib.Path(name).suffix if kind.startswith(
            "workload") else suffix, data=m.data)
    else:
        args = base_args(kind, rng)
        if family in ("wrong_arg_type", "extreme_number", "huge_int") or kind not in STR_KINDS:
            m = fn(args, rng, kind=kind)
            args = m.data
        elif kind == "linear" and family in _STRING_FAMILIES:
            strings = list(args["strings"])
            j = rng.randrange(len(strings))
            m = fn(strings[j], rng, kind="notation_like")
            strings[j] = m.data
            args["strings"] = strings
        else:
            key = "notation" if kind == "notation" else "strings"
            m = fn(args[key], rng, kind=kind)
            args[key] = m.data
        case["args"] = args
    case.update(detail=m.detail, expect=m.expect)
    return case


# ------------------------------------------------------------------ running one case


def _rss_kb(pid: int | str = "self", field: str = "VmRSS") -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system, all threads) process ``pid`` has used."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _reset_peak() -> bool:
    """Resets this process's peak RSS (VmHWM), Linux >= 4.0; False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class _Context:
    """What a worker prepares once: the shipped networks, workloads, cost models, rates
    and a problem, for the solve stage and the ``$ref`` arguments."""

    def __init__(self):
        import libra_jax as lj  # noqa: PLC0415

        self.lj = lj
        i = INPUTS
        self.net3d = lj.load_network_file(i / "network/3d_network.yml")
        self.net4d = lj.load_network_file(i / "network/4d_network.yml")
        self.cm3d = lj.load_cost_model(i / "cost_model/3d_cost_model.yml")
        self.cm4d = lj.load_cost_model(i / "cost_model/4d_cost_model.yml")
        self.wl3d = lj.load_workload(i / "workload/Turing_NLG.txt",
                                     i / "communicator/Turing_NLG_3D.yml", 3)
        self.wl4d = lj.load_workload(i / "workload/GPT_3.txt",
                                     i / "communicator/GPT_3_4d.yml", 4)
        self.rates3d = lj.cost_rates_usd_per_gbps(self.net3d, self.cm3d)
        self.rates4d = lj.cost_rates_usd_per_gbps(self.net4d, self.cm4d)
        self._problem3d = None

    def problem3d(self):
        if self._problem3d is None:
            self._problem3d = self.lj.build_problem(
                self.net3d, self.wl3d, self.rates3d, self.lj.ConstraintSpec(total_bw_gbps=500.0))
        return self._problem3d

    def refs(self) -> dict:
        return {"net3d": self.net3d, "net4d": self.net4d, "wl3d": self.wl3d,
                "wl4d": self.wl4d, "rates3d": self.rates3d, "rates4d": self.rates4d,
                "cm3d": self.cm3d, "cm4d": self.cm4d, "problem3d": self.problem3d}

    def rates_for(self, net):
        if net.cost_tiers is None:
            return None
        for cm in (self.cm3d, self.cm4d):
            if all(t in cm.tiers for t in net.cost_tiers):
                return self.lj.cost_rates_usd_per_gbps(net, cm)
        return None

    def dp_workload(self, net, tmp: pathlib.Path):
        """Turing-NLG's layers, data parallel over every dimension of ``net``."""
        comm = tmp / "dp_communicator.yml"
        d = net.num_dims
        comm.write_text(f"Forward: {[-1] * d}\nInputGrad: {[-1] * d}\n"
                        f"WeightGrad: {list(net.npus)}\n")
        return self.lj.load_workload(INPUTS / "workload/Turing_NLG.txt", comm, d)


_CTX: _Context | None = None


def context() -> _Context:
    global _CTX
    if _CTX is None:
        _CTX = _Context()
    return _CTX


def _compile_clock():
    try:
        from libra_jax.cli.runtime import CompileClock  # noqa: PLC0415

        return CompileClock()
    except Exception:  # noqa: BLE001 -- a clock that measures nothing
        return _NullClock()


class _NullClock:
    seconds = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _check_result(r) -> str | None:
    """Why a solve result breaks the contract (status ok with a number that is not
    finite, or negative), or None."""
    import numpy as np  # noqa: PLC0415

    if r.status != "ok":
        return None
    bw = np.asarray(r.bandwidth_gbps, np.float64)
    if not np.all(np.isfinite(bw)) or np.any(bw < -1e-9 * max(1.0, float(np.abs(bw).max()))):
        return f"status ok with bandwidth {bw.tolist()}"
    for name in ("step_time_ns", "comm_time_ns", "network_cost_usd", "time_x_cost"):
        v = getattr(r, name)
        if v is None:
            continue
        if not math.isfinite(v) or v < 0:
            return f"status ok with {name} = {v!r}"
    if r.step_time_ns <= 0:
        return f"status ok with step_time_ns = {r.step_time_ns!r}"
    gap = r.optimality_gap
    if gap is not None and not math.isfinite(gap):
        return f"status ok with optimality_gap = {gap!r}"
    return None


def _materialize(case: dict, tmp: pathlib.Path) -> pathlib.Path | None:
    """Writes a file case's input (``@SENTINEL@`` -> a path in ``tmp``); its path."""
    if "suffix" not in case:
        return None
    if "generate" in case:
        g = case["generate"]
        data = big_input(g["kind"], g["variant"], g["mb"])
    else:
        data = case["data"]
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    data = data.replace(b"@SENTINEL@", str(tmp / "PWNED").encode())
    path = tmp / f"input{case['suffix']}"
    path.write_bytes(data)
    return path


class _NeverRaised(Exception):
    pass


def _args(case: dict, ctx: _Context | None) -> dict:
    args = decode(case.get("args", {}), ctx.refs() if ctx is not None else None)
    if "generate" in case and "suffix" not in case:
        g = case["generate"]
        args["notation" if g["kind"] == "notation" else "strings"] = big_input(
            g["kind"], g["variant"], g["mb"])
    return args


def _load(case: dict, ctx: _Context, path: pathlib.Path | None, tmp: pathlib.Path, stage):
    """Stage 1: the loader. Returns what the solve stage needs (or None: nothing to
    solve), raising what the loader raises."""
    kind = case["kind"]
    if kind == "selftest":
        return _selftest(case["_decoded"])
    lj = ctx.lj
    from libra_jax.inputs.astrasim import import_network_yaml  # noqa: PLC0415
    from libra_jax.model.linear import parse_linear_constraints  # noqa: PLC0415

    spec500 = lj.ConstraintSpec(total_bw_gbps=500.0)
    objective = "perf"
    if kind == "network":
        net = lj.load_network_file(path)
        stage(2)
        return net, ctx.dp_workload(net, tmp), ctx.rates_for(net), spec500, objective
    if kind == "astrasim_network":
        net, _, _ = import_network_yaml(path)
        stage(2)
        return net, ctx.dp_workload(net, tmp), None, spec500, objective
    if kind == "cost_model":
        cm = lj.load_cost_model(path)
        stage(2)
        for net, wl in ((ctx.net3d, ctx.wl3d), (ctx.net4d, ctx.wl4d)):
            if all(t in cm.tiers for t in net.cost_tiers):
                rates = lj.cost_rates_usd_per_gbps(net, cm)
                return net, wl, rates, spec500, "perf_per_cost"
        return None
    if kind == "communicator":
        comm = lj.load_communicator(path)
        stage(2)
        d = comm.shape[1]
        npus = [max(2, int(comm[:, j].max())) for j in range(d)]
        net = lj.network_from_lists(["Ring"] * d, npus)
        wl = lj.load_workload(INPUTS / "workload/Turing_NLG.txt", path, d)
        return net, wl, None, spec500, objective
    if kind == "workload_txt":
        wl = lj.load_workload(path, INPUTS / "communicator/Turing_NLG_3D.yml", 3)
        stage(2)
        return ctx.net3d, wl, ctx.rates3d, spec500, objective
    if kind == "workload_yaml":
        wl = lj.load_workload(path, FIXTURES / "tiny_communicator_4d.yml", 4)
        stage(2)
        return ctx.net4d, wl, ctx.rates4d, spec500, objective
    args = case["_decoded"]
    if kind == "notation":
        net = lj.parse_notation(args["notation"], args.get("cost_tiers"))
        stage(2)
        return net, ctx.dp_workload(net, tmp), ctx.rates_for(net), spec500, objective
    if kind == "lists":
        net = lj.network_from_lists(args["topology"], args["npus"], args.get("cost_tiers"))
        stage(2)
        return net, ctx.dp_workload(net, tmp), ctx.rates_for(net), spec500, objective
    if kind == "linear":
        parse_linear_constraints(args["strings"], args["num_dims"])
        stage(2)
        if args["num_dims"] != 4 or isinstance(args["num_dims"], bool):
            return None
        return (ctx.net4d, ctx.wl4d, ctx.rates4d,
                lj.ConstraintSpec(total_bw_gbps=1000.0, linear=args["strings"]), objective)
    if kind == "spec":
        spec = lj.ConstraintSpec(**args["spec"])
        net, wl, rates = ((ctx.net3d, ctx.wl3d, ctx.rates3d) if args["net"] == "3d"
                          else (ctx.net4d, ctx.wl4d, ctx.rates4d))
        stage(2)
        return net, wl, rates, spec, args["objective"]
    if kind == "build_args":
        p = lj.build_problem(args["network"], args["workload"], args["cost_rates"],
                             args["spec"])
        return "problem", p, "perf"
    if kind == "solve_args":
        return "solve", args
    if kind == "num_dims":
        lj.load_workload(INPUTS / args["path"], INPUTS / args["communicator"],
                         args["num_dims"])
        return None
    if kind == "path_args":
        loader = args["loader"]
        fn = (import_network_yaml if loader == "import_network_yaml"
              else getattr(lj, loader))
        if loader == "load_workload":
            fn(args["path"], INPUTS / "communicator/Turing_NLG_3D.yml", 3)
        else:
            fn(args["path"])
        return None
    raise KeyError(kind)


def _selftest(args: dict) -> None:
    """The runner's own check (kind ``selftest``, never generated): burn ``cpu_s`` of CPU,
    touch ``alloc_mb`` of memory, or ``die`` (SIGKILL itself)."""
    if args.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    t = time.process_time()
    while time.process_time() - t < args.get("cpu_s", 0.0):
        pass
    if args.get("alloc_mb"):
        block = bytearray(int(args["alloc_mb"] * 2**20))
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(0.5)
    return None


def run_case(case: dict, *, solve: bool = True, stage=None) -> dict:
    """Runs one case in this process: the loader, then ``build_problem`` of the problem
    the accepted input makes (with the shipped inputs it lacks), then (``solve``) ``solve``. Returns ``{"outcome", "stage", "exc_type", "message", "seconds",
    "compile_s", "peak_mb", ...}``; ``outcome`` is ``accepted``, ``rejected`` or a failure
    (module docstring). Warnings are errors, as in the test suite. ``stage(n)`` is called
    at each stage (1 load, 2 build, 3 solve), for a watcher's time limits."""
    stage = stage or (lambda n: None)
    if case["kind"] == "selftest":  # the runner's own check: no library involved
        LibraInputError, ctx, clock = _NeverRaised, None, _NullClock()  # noqa: N806
    else:
        from libra_jax.types import LibraInputError  # noqa: PLC0415

        ctx, clock = context(), _compile_clock()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="fuzzcase-"))
    out = {"id": case.get("id"), "kind": case["kind"], "family": case["family"],
           "loader": case.get("loader") or KINDS[case["kind"]][0], "stage": "load",
           "exc_type": None, "message": None, "compile_s": 0.0, "solved": None}
    had_peak = _reset_peak()
    rss0 = _rss_kb()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    try:
        path = _materialize(case, tmp)
        case = dict(case, _decoded=_args(case, ctx))
    except Exception as e:  # noqa: BLE001 -- the fuzzer's own bug, not the library's
        shutil.rmtree(tmp, ignore_errors=True)
        out.update(outcome="harness-error", exc_type=type(e).__name__, message=str(e)[:300],
                   seconds=0.0, traceback=_tb_tail(e))
        return out
    try:
        stage(1)
        with warnings.catch_warnings(), clock:
            warnings.simplefilter("error")
            loaded = _load(case, ctx, path, tmp, stage)
            out["stage"] = "build"
            if loaded is not None:
                _solve_stage(ctx, loaded, out, stage, solve)
        out["outcome"] = "accepted"
        if case.get("expect"):
            out["outcome"] = "silent-accept"
            out["message"] = f"accepted, but: {case['expect']}"
        elif out.get("bad_result"):
            out["outcome"] = "bad-result"
            out["message"] = out["bad_result"]
    except LibraInputError as e:
        msg = str(e)
        out.update(outcome="rejected", exc_type=type(e).__name__, message=msg[:500],
                   message_chars=len(msg))
        if len(msg) > MAX_MESSAGE_CHARS or not msg.strip():
            out["outcome"] = "long-message" if msg.strip() else "empty-message"
    except MemoryError as e:
        out.update(outcome="memory", exc_type="MemoryError", message=str(e)[:500])
    except BaseException as e:  # noqa: BLE001 -- every other exception is the finding
        if isinstance(e, KeyboardInterrupt):
            raise
        try:
            msg = str(e)
        except Exception:  # noqa: BLE001
            msg = f"<str of {type(e).__name__} failed>"
        out.update(outcome=f"crash:{type(e).__name__}", exc_type=type(e).__name__,
                   message=msg[:500], traceback=_tb_tail(e))
    finally:
        out["seconds"] = time.perf_counter() - t0
        out["cpu_s"] = time.process_time() - cpu0
        out["compile_s"] = getattr(clock, "seconds", 0.0)
        if (tmp / "PWNED").exists():
            out.update(outcome="code-exec", message="a YAML python tag ran a command")
        shutil.rmtree(tmp, ignore_errors=True)
        stage(0)
    net_s = out["seconds"] - out["compile_s"]
    net_cpu = out["cpu_s"] - out["compile_s"]
    if out["outcome"] in OK_OUTCOMES and (net_cpu > TIME_LIMIT_S
                                          or net_s > TIME_LIMIT_S * WALL_SLACK):
        out.update(outcome="timeout", message=f"{net_cpu:.1f} s CPU, {net_s:.1f} s wall, "
                   f"net of compilation (was {out['outcome']}: {str(out['message'])[:200]})")
    if had_peak:
        out["peak_mb"] = max(0, _rss_kb(field="VmHWM") - rss0) / 1024
        if out["outcome"] in OK_OUTCOMES and out["peak_mb"] > MEM_LIMIT_MB:
            out.update(outcome="memory", message=f"peak RSS +{out['peak_mb']:.0f} MB")
    return out


def _tb_tail(e: BaseException, frames: int = 4) -> str:
    tb = traceback.extract_tb(e.__traceback__)[-frames:]
    return " | ".join(f"{pathlib.Path(f.filename).name}:{f.lineno} {f.name}" for f in tb)


def _solve_stage(ctx: _Context, loaded, out: dict, stage, solve: bool) -> None:
    """Builds the problem of an accepted input (always) and solves it (``solve``)."""
    lj = ctx.lj
    from libra_jax.inputs.workload import check_workload_network  # noqa: PLC0415

    if loaded[0] == "solve":  # solve's own arguments: solve is the function under test
        args = loaded[1]
        stage(3)
        out["stage"] = "solve"
        r = lj.solve(args["p"], args["objective"], method=args["method"],
                     max_rounds=args["max_rounds"], batch=args["batch"])
    elif loaded[0] == "problem":
        _, p, objective = loaded
        if not solve:
            return
        stage(3)
        out["stage"] = "solve"
        r = lj.solve(p, objective)
    else:
        net, wl, rates, spec, objective = loaded
        check_workload_network(wl, net)
        p = lj.build_problem(net, wl, rates, spec)
        if not solve:
            return
        stage(3)
        out["stage"] = "solve"
        if objective == "perf_per_cost" and rates is None:
            objective = "perf"
        r = lj.solve(p, objective)
    out["solved"] = r.status
    bad = _check_result(r)
    if bad:
        out["bad_result"] = bad


# ------------------------------------------------------------------------- the pool


def _worker_main(conn, stage_id, stage_t, cache_dir: str | None, warm: bool,
                 as_margin_mb: float, preload: bool = True) -> None:
    """A worker: imports libra_jax once (``preload``: before its first case), warms JAX's
    compiled programs up (``warm``), then runs cases from ``conn`` until it receives
    None."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    try:
        if preload or warm:
            import jax  # noqa: PLC0415

            jax.config.update("jax_enable_x64", True)  # as the CLIs and the test suite do
            if cache_dir:
                from libra_jax.cli.runtime import enable_compilation_cache  # noqa: PLC0415

                enable_compilation_cache(cache_dir)
            ctx = context()
            if warm:
                _warm_up(ctx)
        if as_margin_mb > 0:
            vm = _rss_kb(field="VmSize") * 1024
            limit = int(vm + as_margin_mb * 2**20)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except BaseException as e:  # noqa: BLE001
        conn.send(("failed", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        return
    conn.send(("ready", _rss_kb()))

    def stage(n):
        stage_t.value = time.time()
        stage_id.value = n

    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        case, solve = msg
        res = run_case(case, solve=solve, stage=stage)
        conn.send(("done", res))


def _warm_up(ctx: _Context) -> None:
    """Compiles (or loads from the persistent cache) the programs most cases use."""
    lj = ctx.lj
    for net, wl, rates, spec in (
        (ctx.net3d, ctx.wl3d, ctx.rates3d, lj.ConstraintSpec(total_bw_gbps=500.0)),
        (ctx.net4d, ctx.wl4d, ctx.rates4d,
         lj.ConstraintSpec(total_bw_gbps=1000.0, linear=list(LINEAR_SEEDS[0]))),
        (ctx.net3d, ctx.wl3d, ctx.rates3d,
         lj.ConstraintSpec(total_bw_gbps=800.0, total_bw_mode="le", max_cost_usd=2e7)),
    ):
        with contextlib.suppress(Exception):
            p = lj.build_problem(net, wl, rates, spec)
            lj.solve(p)
            lj.solve(p, "perf_per_cost")


class _Worker:
    def __init__(self, mp_ctx, cache_dir, warm, as_margin_mb, preload=True):
        self.stage_id = mp_ctx.Value("i", 0, lock=False)
        self.stage_t = mp_ctx.Value("d", 0.0, lock=False)
        self.conn, child = mp_ctx.Pipe()
        self.proc = mp_ctx.Process(
            target=_worker_main, daemon=True,
            args=(child, self.stage_id, self.stage_t, cache_dir, warm, as_margin_mb,
                  preload))
        self.proc.start()
        child.close()
        self.started = time.time()
        self.ready = False
        self.case: int | None = None
        self.t0 = 0.0
        self.rss0 = 0
        self.peak_kb = 0
        self.cpu0 = 0.0

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join(5)
        with contextlib.suppress(Exception):
            self.conn.close()


class Runner:
    """A pool of worker processes (``spawn``: JAX must not be forked) that each import
    libra_jax once and run cases with :func:`run_case`, enforcing the bounds: a case whose
    load / build stage passes ``time_limit_s`` of CPU time (or ``WALL_SLACK`` times that
    of wall time), whose solve stage passes ``solve_hard_s``
    (its time net of compilation is checked against ``time_limit_s`` by the worker), or
    whose worker's RSS grows ``mem_limit_mb`` over its RSS before the case, is killed
    (``timeout`` / ``memory``) and its worker replaced; a worker that dies gives
    ``worker-died``. The RSS is watched every ``poll_s``; the worker's address space is
    also capped at its size after warm-up + ``as_margin_mb`` (a backstop against an
    allocation faster than the watcher)."""

    def __init__(self, workers: int = 2, *, time_limit_s: float = TIME_LIMIT_S,
                 mem_limit_mb: float = MEM_LIMIT_MB, solve_hard_s: float = SOLVE_HARD_S,
                 cache_dir: str | None = "~/.cache/libra_jax/jax", warm: bool = True,
                 as_margin_mb: float = 6144, poll_s: float = 0.02,
                 ready_timeout_s: float = 600.0, preload: bool = True):
        self.n = workers
        self.time_limit_s = time_limit_s
        self.mem_limit_kb = mem_limit_mb * 1024
        self.solve_hard_s = solve_hard_s
        self.cache_dir = cache_dir
        self.warm = warm
        self.as_margin_mb = as_margin_mb
        self.poll_s = poll_s
        self.ready_timeout_s = ready_timeout_s
        self.preload = preload
        self.restarts = 0
        self._ctx = mp.get_context("spawn")
        self._workers = [self._start() for _ in range(workers)]

    def _start(self) -> _Worker:
        here = str(pathlib.Path(__file__).resolve().parent)
        if here not in sys.path:  # the spawned child imports this module by name
            sys.path.insert(0, here)
        return _Worker(self._ctx, self.cache_dir, self.warm, self.as_margin_mb,
                       self.preload)

    def close(self) -> None:
        for w in self._workers:
            with contextlib.suppress(Exception):
                w.conn.send(None)
        for w in self._workers:
            w.proc.join(5)
            if w.proc.is_alive():
                w.kill()
            with contextlib.suppress(Exception):
                w.conn.close()
        self._workers = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, case: dict, solve: bool = True) -> dict:
        """One case (blocking)."""
        return self.run_many([case], solve=solve)[0]

    def _replace(self, k: int) -> None:
        self._workers[k].kill()
        self.restarts += 1
        self._workers[k] = self._start()

    def run_many(self, cases: list[dict], solve: bool = True, progress=None) -> list[dict]:
        """Runs ``cases`` on the pool; results in input order. ``progress(done, total)``
        is called after each case."""
        results: list[dict | None] = [None] * len(cases)
        todo = collections.deque(range(len(cases)))
        done = 0
        while todo or any(w.case is not None for w in self._workers):
            for w in self._workers:  # dispatch to the idle, started workers
                if w.ready and w.case is None and todo and w.proc.is_alive():
                    i = todo.popleft()
                    w.case, w.t0 = i, time.time()
                    w.stage_id.value, w.stage_t.value = 1, w.t0
                    w.rss0 = w.peak_kb = _rss_kb(w.proc.pid)
                    w.cpu0 = _cpu_s(w.proc.pid)
                    try:
                        w.conn.send((cases[i], solve))
                    except (BrokenPipeError, OSError):
                        pass  # seen below as a dead worker
            watch = [w for w in self._workers if w.case is not None or not w.ready]
            ready = mpc.wait([w.conn for w in watch] + [w.proc.sentinel for w in watch],
                             timeout=self.poll_s)
            now = time.time()
            for k, w in enumerate(list(self._workers)):
                if not w.ready:  # starting: "ready", "failed", or still warming up
                    if w.conn in ready:
                        try:
                            kind, info = w.conn.recv()
                        except (EOFError, OSError):
                            kind, info = "failed", "worker exited while starting"
                        if kind != "ready":
                            self.close()
                            raise RuntimeError(f"fuzz worker failed to start: {info}")
                        w.ready = True
                    elif now - w.started > self.ready_timeout_s or not w.proc.is_alive():
                        self.close()
                        raise RuntimeError("fuzz worker did not start")
                    continue
                if w.case is None:
                    if not w.proc.is_alive():
                        self._replace(k)
                    continue
                i = w.case
                res = None
                if w.conn in ready:
                    try:
                        _, res = w.conn.recv()
                    except (EOFError, OSError):
                        res = None
                if res is None:
                    rss = _rss_kb(w.proc.pid)
                    w.peak_kb = max(w.peak_kb, rss)
                    stage = w.stage_id.value
                    in_stage = now - w.stage_t.value
                    why = None
                    if rss - w.rss0 > self.mem_limit_kb:
                        why = ("memory", f"RSS grew {(rss - w.rss0) / 1024:.0f} MB "
                                         f"(stage {_STAGES.get(stage, stage)})")
                    elif stage in (1, 2) and (
                            in_stage > self.time_limit_s * WALL_SLACK
                            or _cpu_s(w.proc.pid) - w.cpu0 > self.time_limit_s):
                        why = ("timeout", f"killed in stage {_STAGES[stage]} after "
                                          f"{_cpu_s(w.proc.pid) - w.cpu0:.1f} s CPU, "
                                          f"{now - w.t0:.1f} s wall")
                    elif stage == 3 and in_stage > self.solve_hard_s:
                        why = ("timeout", f"solve over {self.solve_hard_s:.0f} s")
                    elif not w.proc.is_alive():
                        code = w.proc.exitcode
                        why = ("worker-died", f"worker exit code {code}"
                               + (f" ({signal.Signals(-code).name})"
                                  if code is not None and code < 0 else ""))
                    if why is None:
                        continue
                    res = _killed_result(cases[i], why, now - w.t0, stage,
                                         (w.peak_kb - w.rss0) / 1024)
                    self._replace(k)
                else:
                    w.case = None
                res["wall_s"] = now - w.t0
                results[i] = res
                done += 1
                if progress:
                    progress(done, len(cases))
        return results  # type: ignore[return-value]


_STAGES = {0: "idle", 1: "load", 2: "build", 3: "solve"}


def _killed_result(case, why, seconds, stage, peak_mb) -> dict:
    outcome, message = why
    return {"id": case.get("id"), "kind": case["kind"], "family": case["family"],
            "loader": case.get("loader") or KINDS[case["kind"]][0],
            "stage": _STAGES.get(stage, str(stage)), "outcome": outcome, "exc_type": None,
            "message": message, "seconds": seconds, "compile_s": None, "peak_mb": peak_mb}


# ----------------------------------------------------------------------- CLI cases

#: The inputs of conf=turing_nlg, by kind, and the overrides that replace each.
CLI_FILES = {
    "network": ("network/3d_network.yml", "network.file"),
    "cost_model": ("cost_model/3d_cost_model.yml", "cost_model.file"),
    "communicator": ("communicator/Turing_NLG_3D.yml", "workload.communicator_file"),
    "workload_txt": ("workload/Turing_NLG.txt", "workload.file"),
}
CLI_FAMILIES = ("byte_flip", "token_delete", "token_duplicate", "token_swap", "line_delete",
                "line_duplicate", "line_swap", "extreme_number", "huge_int", "non_utf8",
                "wrong_yaml_type", "deep_nesting", "duplicate_key", "yaml_tag", "alias_bomb",
                "override")

#: Command-line overrides (each a list of arguments after conf=turing_nlg) and whether
#: they must be refused (why) or may go either way (None).
CLI_OVERRIDES = (
    (["constraints.total_bw_gbps=abc"], "non-number"),
    (["constraints.total_bw_gbps='500'"], None),
    (["constraints.total_bw_gbps=true"], "non-number"),
    (["constraints.total_bw_gbps=[500]"], "non-number"),
    (["constraints.total_bw_gbps={a: 1}"], "non-number"),
    (["constraints.total_bw_gbps=1e400"], None),
    (["constraints.total_bw_gbps=inf"], None),
    (["constraints.total_bw_gbps=nan"], None),
    (["constraints.total_bw_gbps=-5"], None),
    (["constraints.total_bw_gbps=1e308"], None),
    (["constraints.max_cost_usd=inf"], None),
    (["constraints.max_cost_usd=1e308"], None),
    (["constraints.max_cost_usd=abc"], "non-number"),
    (["network.file=null", 'network.notation="RI(' + "7" * 4301 + ')_FC(8)_SW(32)"',
      "network.cost_tiers=[InterPackage,InterNode,InterPod]"], None),
    (["network.file=null", 'network.notation="RI(16)_FC(8)__SW(32)"'], None),
    (["network.file=null", "network.topology=[Ring,Ring,Ring]",
      "network.npus=[" + "1" + "0" * 40 + ",8,32]"], None),
    (["network.file=null", "network.topology=[Ring,Ring,Ring]", "network.npus=[16,abc,32]"],
     "non-number"),
    (["network.file=null", "network.topology=[Ring,Ring,Ring]", "network.npus=[16,true,32]"],
     "non-number"),
    (['constraints.linear=["bw[' + "9" * 5000 + '] <= 5"]'], None),
    (['constraints.linear=["1e200*1e200*bw[0] <= 1"]'], None),
    (['constraints.linear=["bw[0] <= 1e308*3"]'], None),
    (['constraints.linear=["bw[0] << 5"]'], None),
    (["constraints.linear=5"], "non-number"),
    (["constraints.lower_gbps=[abc,1,1]"], "non-number"),
    (["constraints.upper_gbps=[1e400,null,null]"], None),
    (["constraints.lower_gbps=[1,1,1,1,1]"], None),
    (["objective=speed"], None),
    (["constraints.total_bw_mode=ge"], None),
    (["workload.file=workload/Turing_NLG.yml"], None),
    (["workload.file=/dev/null"], None),
    (["network.file=/proc/self/status"], None),
    (["+constraints.bogus=1"], None),
)


def make_cli_case(seed: int | str, index: int) -> dict:
    """CLI case ``index`` of run ``seed``: one input of ``conf=turing_nlg`` mutated (or the
    native YAML workload on the 4D network), or one override from :data:`CLI_OVERRIDES`."""
    rng = random.Random(f"cli:{seed}:{index}")
    family = CLI_FAMILIES[index % len(CLI_FAMILIES)] if index < len(CLI_FAMILIES) else \
        rng.choice(CLI_FAMILIES + ("override",) * 4)
    case = {"id": f"cli{seed}-{index:03d}", "family": family, "files": {},
            "overrides": [], "expect": None}
    if family == "override":
        ov, expect = rng.choice(CLI_OVERRIDES)
        case.update(kind="override", overrides=list(ov), expect=expect,
                    detail=" ".join(ov)[:80])
        return case
    kinds = [k for k in ("network", "cost_model", "communicator", "workload_txt",
                         "workload_yaml") if k in FAMILIES[family][1]]
    kind = rng.choice(kinds)
    if kind == "workload_yaml":
        data = (FIXTURES / "tiny_workload.yaml").read_bytes()
        base = ["network.file=network/4d_network.yml",
                "cost_model.file=cost_model/4d_cost_model.yml",
                f"workload.communicator_file={FIXTURES / 'tiny_communicator_4d.yml'}"]
        name, key = "workload.yaml", "workload.file"
    else:
        rel, key = CLI_FILES[kind]
        data = (INPUTS / rel).read_bytes()
        base = []
        name = "input" + pathlib.Path(rel).suffix
    m = FAMILIES[family][0](data, rng, kind=kind)
    case.update(kind=kind, files={name: m.data}, overrides=[*base, f"{key}=@DIR@/{name}"],
                expect=m.expect, detail=m.detail)
    return case


def run_cli_case(case: dict, *, python: str = sys.executable,
                 time_limit_s: float = CLI_TIME_LIMIT_S, mem_limit_mb: float | None = None,
                 base_rss_mb: float = 0.0) -> dict:
    """Runs ``python -m libra_jax.train conf=turing_nlg <overrides>`` in a temporary
    directory and classifies it: ``accepted`` (exit 0), ``rejected`` (exit != 0, an
    ``error:`` line, no traceback), ``traceback`` (``Traceback`` or ``internal error`` on
    stderr), ``no-error-line``, ``silent-accept``, ``timeout``, ``memory`` (peak RSS over
    ``base_rss_mb`` + ``mem_limit_mb``)."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="fuzzcli-"))
    try:
        for name, data in case["files"].items():
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogatepass")
            (tmp / name).write_bytes(data.replace(b"@SENTINEL@", str(tmp / "PWNED").encode()))
        ov = [o.replace("@DIR@", str(tmp)) for o in case["overrides"]]
        cmd = [python, "-m", "libra_jax.train", "conf=turing_nlg",
               f"hydra.run.dir={tmp / 'run'}", *ov]
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        env.pop("PYTHONWARNINGS", None)
        env.pop("HYDRA_FULL_ERROR", None)
        t0 = time.time()
        with open(tmp / "stdout", "wb") as so, open(tmp / "stderr", "wb") as se:
            proc = subprocess.Popen(cmd, cwd=tmp, stdout=so, stderr=se, env=env,
                                    start_new_session=True)
            peak = 0
            outcome = None
            while proc.poll() is None:
                peak = max(peak, _rss_kb(proc.pid))
                if time.time() - t0 > time_limit_s:
                    outcome = "timeout"
                elif mem_limit_mb and peak / 1024 > base_rss_mb + mem_limit_mb:
                    outcome = "memory"
                if outcome:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    break
                time.sleep(0.05)
        wall = time.time() - t0
        stderr = (tmp / "stderr").read_text("utf-8", "replace")
        stdout = (tmp / "stdout").read_text("utf-8", "replace")
        code = proc.returncode
        error_lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
        tb = "Traceback" in stderr or "internal error" in stderr
        if outcome is None:
            if tb:
                outcome = "traceback"
            elif code == 0:
                outcome = "silent-accept" if case.get("expect") else "accepted"
            elif error_lines:
                outcome = "rejected"
            else:
                outcome = "no-error-line"
        if (tmp / "PWNED").exists():
            outcome = "code-exec"
        return {"id": case["id"], "kind": case["kind"], "family": case["family"],
                "detail": case.get("detail"), "outcome": outcome, "exit_code": code,
                "error_line": error_lines[0][:300] if error_lines else None,
                "traceback": tb, "stderr_tail": stderr[-1500:], "stdout_tail": stdout[-300:],
                "seconds": wall, "peak_mb": peak / 1024, "loader": "libra-train",
                "exc_type": None,
                "message": (error_lines[0][:300] if error_lines else stderr.strip()[-300:])}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run_cli_cases(cases: list[dict], jobs: int = 2, progress=None, **kw) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    results = [None] * len(cases)
    with ThreadPoolExecutor(jobs) as ex:
        futs = {ex.submit(run_cli_case, c, **kw): i for i, c in enumerate(cases)}
        done = 0
        for f in futs:
            results[futs[f]] = f.result()
            done += 1
            if progress:
                progress(done, len(cases))
    return results  # type: ignore[return-value]


# ----------------------------------------------------------------------- reporting


def signature(res: dict) -> str:
    """A failure's cause: outcome, exception type, loader and stage, and the message's head
    with paths, numbers and quoted values blurred."""
    msg = str(res.get("message") or "")
    msg = re.sub(r"/[^\s:,'\"]+", "<path>", msg)
    msg = re.sub(r"'[^']{0,200}'|\"[^\"]{0,200}\"", "<v>", msg)
    msg = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", msg)
    msg = re.sub(r"\s+", " ", msg)[:70]
    return f"{res['outcome']} | {res.get('loader')} | {res.get('stage', '-')} | {msg}"


def summarize(results: list[dict], title: str) -> str:
    """A table of outcome counts by family (rows) and outcome (columns), then the distinct
    failure causes with a count and one example each."""
    outcomes = sorted({r["outcome"] for r in results},
                      key=lambda o: (o not in OK_OUTCOMES, o != "accepted", o))
    fams = sorted({r["family"] for r in results})
    count = collections.Counter((r["family"], r["outcome"]) for r in results)
    w = max([len(f) for f in fams] + [6])
    cols = [max(len(o), 5) for o in outcomes]
    lines = [title, f"{'family':<{w}} " + " ".join(f"{o:>{c}}" for o, c in zip(outcomes, cols))
             + "  total"]
    for f in fams:
        row = [count[(f, o)] for o in outcomes]
        lines.append(f"{f:<{w}} " + " ".join(f"{n or '.':>{c}}" for n, c in zip(row, cols))
                     + f"  {sum(row):>5}")
    tot = [sum(count[(f, o)] for f in fams) for o in outcomes]
    lines.append(f"{'total':<{w}} " + " ".join(f"{n:>{c}}" for n, c in zip(tot, cols))
                 + f"  {sum(tot):>5}")
    causes = failure_causes(results)
    lines.append(f"\n{len(causes)} distinct failure causes "
                 f"({sum(c['count'] for c in causes)} failing cases):")
    for c in causes:
        ex = c["example"]
        lines.append(f"  [{c['count']:>4}] {c['signature']}")
        lines.append(f"         e.g. {ex['id']} {ex['kind']}/{ex['family']}: "
                     f"{ex.get('detail', '')[:60]} -> {ex.get('exc_type') or ''} "
                     f"{str(ex.get('message'))[:110]!r}")
    return "\n".join(lines)


def failure_causes(results: list[dict]) -> list[dict]:
    groups: dict[str, list[dict]] = collections.defaultdict(list)
    for r in results:
        if r["outcome"] not in OK_OUTCOMES:
            groups[signature(r)].append(r)
    return sorted(({"signature": s, "count": len(rs), "example": rs[0]}
                   for s, rs in groups.items()), key=lambda c: -c["count"])


def write_reproducer(case: dict, result: dict, out_dir: pathlib.Path) -> pathlib.Path:
    """``out_dir/<id>.json`` (the case's kind, loader, family, arguments, expectation and
    outcome) and, for a file case, ``out_dir/<id><suffix>`` (the input itself; a generated
    multi-MB input keeps only its recipe, ``generate``)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {k: case[k] for k in ("id", "kind", "family", "loader", "detail", "expect",
                                 "seed", "index", "seed_input") if k in case}
    for k in ("args", "generate", "overrides"):
        if k in case:
            meta[k] = case[k]
    if "suffix" in case and "generate" not in case:
        name = f"{case['id']}{case['suffix']}"
        data = case["data"]
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        (out_dir / name).write_bytes(data)
        meta["file"] = name
        meta["suffix"] = case["suffix"]
    elif "suffix" in case:
        meta["suffix"] = case["suffix"]
    for name, data in case.get("files", {}).items():
        fname = f"{case['id']}-{name}"
        (out_dir / fname).write_bytes(data if isinstance(data, bytes)
                                      else data.encode("utf-8", "surrogatepass"))
        meta.setdefault("cli_files", {})[name] = fname
    meta["outcome"] = {k: result.get(k) for k in ("outcome", "stage", "exc_type", "message",
                                                  "seconds", "peak_mb", "exit_code",
                                                  "error_line")}
    path = out_dir / f"{case['id']}.json"
    path.write_text(json.dumps(meta, indent=1, default=repr) + "\n")
    return path


def load_reproducer(path: str | os.PathLike) -> dict:
    """The case of a reproducer JSON (its input file read from next to it)."""
    path = pathlib.Path(path)
    meta = json.loads(path.read_text())
    case = {k: v for k, v in meta.items() if k not in ("outcome", "file", "cli_files")}
    case.setdefault("loader", KINDS[case["kind"]][0] if case["kind"] in KINDS else "")
    case.setdefault("expect", None)
    case.setdefault("detail", "")
    if "file" in meta:
        case["data"] = (path.parent / meta["file"]).read_bytes()
        case["suffix"] = meta.get("suffix") or pathlib.Path(meta["file"]).suffix
    if "cli_files" in meta:
        case["files"] = {n: (path.parent / f).read_bytes()
                         for n, f in meta["cli_files"].items()}
    return case


def load_corpus(directory: str | os.PathLike) -> list[dict]:
    """The cases of a reproducer corpus: the entries of ``corpus.json`` (each ``name``,
    ``kind``, ``family``, ``cause``, optional ``expect``, and ``file`` (an input next to
    it), ``args`` (tagged JSON) or ``generate`` (a :func:`big_input` recipe)), then every
    other ``*.json`` there (a reproducer written by :func:`write_reproducer`)."""
    directory = pathlib.Path(directory)
    cases = []
    manifest = directory / "corpus.json"
    if manifest.exists():
        for e in json.loads(manifest.read_text())["reproducers"]:
            case = {"id": e["name"], "kind": e["kind"], "family": e.get("family", "corpus"),
                    "loader": KINDS[e["kind"]][0], "detail": e.get("cause", ""),
                    "expect": e.get("expect")}
            if "file" in e:
                case["data"] = (directory / e["file"]).read_bytes()
                case["suffix"] = pathlib.Path(e["file"]).suffix
            if "args" in e:
                case["args"] = e["args"]
            if "generate" in e:
                case["generate"] = e["generate"]
                if KINDS[e["kind"]][1] is not None:
                    case["suffix"] = KINDS[e["kind"]][1]
                else:
                    case.setdefault("args", base_args(e["kind"], random.Random(0)))
            cases.append(case)
    for path in sorted(directory.glob("*.json")):
        if path.name != "corpus.json":
            cases.append(load_reproducer(path))
    return cases


# ----------------------------------------------------------------------------- main


def _progress(label: str, every: int):
    t0 = time.time()

    def report(done, total):
        if done % every == 0 or done == total:
            el = time.time() - t0
            print(f"  {label}: {done}/{total} cases, {el:.0f} s", file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=1, help="run seed (cases are deterministic "
                    "in seed and index)")
    ap.add_argument("--cases", type=int, default=5000, help="in-process cases")
    ap.add_argument("--cli-cases", type=int, default=40, help="libra-train cases")
    ap.add_argument("--out", type=pathlib.Path,
                    default=pathlib.Path(tempfile.gettempdir()) / "libra_jax_fuzz",
                    help="report.json, summary.txt and repro/ go here")
    ap.add_argument("--workers", type=int, default=2, help="worker processes")
    ap.add_argument("--cli-jobs", type=int, default=2, help="CLI runs at once")
    ap.add_argument("--no-solve", action="store_true",
                    help="load and build_problem only (no solve of accepted inputs)")
    ap.add_argument("--family", action="append", help="only these families")
    ap.add_argument("--kind", action="append", help="only these kinds")
    ap.add_argument("--cache-dir", default="~/.cache/libra_jax/jax",
                    help="JAX's persistent compilation cache ('' for none)")
    args = ap.parse_args(argv)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    cases = []
    i = 0
    while len(cases) < args.cases:
        fam = None if not args.family else args.family[i % len(args.family)]
        kind = None if not args.kind else args.kind[i % len(args.kind)]
        if fam and kind and kind not in FAMILIES[fam][1]:
            i += 1
            continue
        cases.append(make_case(args.seed, i, family=fam, kind=kind))
        i += 1
    print(f"{len(cases)} in-process cases (seed {args.seed}) on {args.workers} workers",
          file=sys.stderr)
    results: list[dict] = []
    if cases:
        with Runner(args.workers, cache_dir=args.cache_dir or None) as runner:
            t0 = time.time()
            results = runner.run_many(cases, solve=not args.no_solve,
                                      progress=_progress("in-process", 250))
            restarts = runner.restarts
        t_cases = time.time() - t0
    else:
        t_cases, restarts = 0.0, 0
    for c, r in zip(cases, results):
        r["detail"] = c.get("detail", "")
        r["expect"] = c.get("expect")
    cli_cases = [make_cli_case(args.seed, k) for k in range(args.cli_cases)]
    cli_results: list[dict] = []
    base_rss = 0.0
    t_cli = 0.0
    if cli_cases:
        print(f"{len(cli_cases)} CLI cases, {args.cli_jobs} at once", file=sys.stderr)
        t0 = time.time()
        ref = run_cli_case({"id": "cli-reference", "kind": "none", "family": "none",
                            "files": {}, "overrides": []})
        base_rss = ref["peak_mb"]
        if ref["outcome"] != "accepted":
            print(f"warning: the unmutated CLI run gave {ref['outcome']}: "
                  f"{ref['stderr_tail'][-500:]}", file=sys.stderr)
        cli_results = run_cli_cases(cli_cases, jobs=args.cli_jobs,
                                    progress=_progress("CLI", 10), mem_limit_mb=MEM_LIMIT_MB,
                                    base_rss_mb=base_rss)
        t_cli = time.time() - t0

    repro = out / "repro"
    if repro.exists():
        shutil.rmtree(repro)
    n_repro = 0
    for c, r in list(zip(cases, results)) + list(zip(cli_cases, cli_results)):
        if r["outcome"] not in OK_OUTCOMES:
            write_reproducer(c, r, repro)
            n_repro += 1

    table = summarize(results, f"In-process: {len(results)} cases, seed {args.seed}, "
                               f"{t_cases:.0f} s, {restarts} worker restarts")
    cli_table = summarize(cli_results, f"CLI (libra-train conf=turing_nlg): {len(cli_results)} "
                                       f"cases, {t_cli:.0f} s, reference run "
                                       f"{base_rss:.0f} MB peak")
    if results:
        print(table)
        print()
    if cli_results:
        print(cli_table)
    slow = sorted(results, key=lambda r: -(r.get("seconds") or 0))[:5]
    print("\nslowest in-process cases: " + ", ".join(
        f"{r['id']} {r['kind']}/{r['family']} {r.get('seconds') or 0:.2f} s "
        f"({r['outcome']})" for r in slow))
    big = sorted(results, key=lambda r: -(r.get("peak_mb") or 0))[:3]
    print("largest peak RSS growth: " + ", ".join(
        f"{r['id']} {r['kind']}/{r['family']} +{r.get('peak_mb') or 0:.0f} MB" for r in big))
    report = {
        "seed": args.seed, "cases": len(results), "cli_cases": len(cli_results),
        "limits": {"time_s": TIME_LIMIT_S, "mem_mb": MEM_LIMIT_MB,
                   "solve_hard_s": SOLVE_HARD_S, "cli_time_s": CLI_TIME_LIMIT_S},
        "seconds": {"in_process": t_cases, "cli": t_cli, "total": time.time() - t_start},
        "worker_restarts": restarts, "cli_reference_peak_mb": base_rss,
        "table": collections.Counter(f"{r['family']}/{r['outcome']}" for r in results),
        "cli_table": collections.Counter(f"{r['family']}/{r['outcome']}" for r in cli_results),
        "causes": [{"signature": c["signature"], "count": c["count"], "example": c["example"]}
                   for c in failure_causes(results)],
        "cli_causes": [{"signature": c["signature"], "count": c["count"],
                        "example": c["example"]} for c in failure_causes(cli_results)],
        "results": results, "cli_results": cli_results,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1, default=repr) + "\n")
    (out / "summary.txt").write_text(table + "\n\n" + cli_table + "\n")
    print(f"\nwrote {out / 'report.json'}, {n_repro} reproducers in {repro}", file=sys.stderr)
    failures = sum(r["outcome"] not in OK_OUTCOMES for r in results + cli_results)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
