"""The fuzz suite's mutation families of the public API's arguments: the grammar of a
network notation and of constraint strings, and an argument of the wrong type.
"""

from __future__ import annotations

import base64
import json
import re

from .common import INPUTS
from .mutations import ODD_CHARS, Mutation, _short
from .oracle import _non_number


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


# --------------------------------------------------------------------- argument types

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
