"""What the fuzz suite's modules share: the contract's bounds, the input kinds and the
shipped inputs each is mutated from, the valid arguments of the argument kinds, the
generated multi-MB inputs, the tagged JSON values arguments are carried as (:func:`decode`),
and the process measurements (RSS, CPU time) the bounds are checked with.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import random
from typing import Any


ROOT = pathlib.Path(__file__).resolve().parents[2]
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


# ----------------------------------------------------------------------------- inputs

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
    "chakra_et": ("read_chakra", None),  # a Chakra trace set (tests/fuzz/traces.py)
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
    if kind == "chakra_et":
        from .traces import base_trace_args  # noqa: PLC0415

        return base_trace_args(rng)
    raise KeyError(kind)


# --------------------------------------------------------------- generated big inputs

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


# ---------------------------------------------------------------------- tagged values

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


# --------------------------------------------------------------- process measurements

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
