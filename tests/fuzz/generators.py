"""The fuzz suite's case generators: the mutation families by name (:data:`FAMILIES`:
function, input kinds, weight), :func:`make_case` (one seeded in-process case) and
:func:`make_cli_case` (one ``libra-train`` case: a mutated input of ``conf=turing_nlg`` or an
override); both are deterministic in (seed, index).
"""

from __future__ import annotations

import pathlib
import random
from typing import Any

from .arg_mutations import mutate_grammar, mutate_wrong_arg_type
from .common import (
    ARG_KINDS,
    BIG_FILE_VARIANTS,
    FILE_KINDS,
    FIXTURES,
    INPUTS,
    KINDS,
    STR_KINDS,
    YAML_KINDS,
    base_args,
    seeds,
)
from .mutations import (
    Mutation,
    mutate_byte_flip,
    mutate_extreme_number,
    mutate_huge_int,
    mutate_line_delete,
    mutate_line_duplicate,
    mutate_line_swap,
    mutate_non_utf8,
    mutate_token_delete,
    mutate_token_duplicate,
    mutate_token_swap,
)
from .traces import KIND as TRACE_KIND, TRACE_FAMILIES
from .yaml_mutations import (
    mutate_alias_bomb,
    mutate_deep_nesting,
    mutate_duplicate_key,
    mutate_wrong_yaml_type,
    mutate_yaml_tag,
)


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
    # The trace section (kind chakra_et: a Chakra trace set through read_chakra).
    **{family: (fn, (TRACE_KIND,), weight)
       for family, (fn, weight) in TRACE_FAMILIES.items()},
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


# ----------------------------------------------------------------- command-line cases

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
