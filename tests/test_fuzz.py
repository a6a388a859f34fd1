"""Fuzzing suite (issue 17): mutated and arbitrary inputs of every kind keep the contract.

The contract, for every public loader and argument (the package `tests/fuzz/`): an input
is either accepted -- and the problem it makes builds, and solves to finite results or a
non-ok status -- or refused with `LibraInputError` (a short, non-empty message), within 10 s
of CPU time (XLA compilation excluded) and 1 GB of peak RSS growth; a duplicate YAML key or
a number replaced by a non-number is never accepted; a YAML python tag never runs.

Every case runs in a worker process of `fuzz.Runner` (one per test module): it
imports libra_jax once, and the runner enforces the time and memory bounds (a bomb or a
hang is killed and reported, never stalls the suite). Hypothesis drives the cases:

* the fuzzer's seeded mutation families of the shipped inputs (byte flips, token / line
  edits, extreme and 4,300+-digit numbers, non-UTF-8 bytes, wrong YAML types, deep nesting,
  duplicate keys, YAML tags, alias bombs, notation / constraint grammar, wrong argument
  types), per input kind;
* hypothesis's own strategies: arbitrary YAML documents over each file's keys, arbitrary
  bytes spliced into the shipped files, arbitrary notations, constraint strings,
  `ConstraintSpec` fields and network lists;
* the reproducer corpus in `tests/fixtures/fuzz/` (`corpus.json` and any `*.json` the
  fuzzer wrote), one test each, and a generated several-MB flow list.

The default profile runs a bounded number of examples (deterministic); the `slow` tests run
the long profile (`-m slow`), and a few CLI cases (`libra-train`: no traceback, an `error:`
line, a non-zero exit for bad input).
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
import fuzz as fz  # tests/fuzz: the fuzz suite's generators, oracle and runner
from fuzz.oracle import _dup_key_check
from fuzz.yaml_mutations import _KEY_LINE

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "fixtures" / "fuzz"


_COMMON = dict(deadline=None, database=None,
               suppress_health_check=list(HealthCheck))
#: Default profile: few examples per property, the same ones every run, no shrinking (a
#: failing case is reported as generated; the fuzzer's cases are seeds, not structures).
DEFAULT = settings(max_examples=12, derandomize=True, phases=(Phase.explicit, Phase.generate),
                   **_COMMON)
#: Long profile (`-m slow`): many random examples, shrunk when one fails.
LONG = settings(max_examples=300, phases=(Phase.explicit, Phase.generate, Phase.shrink),
                **_COMMON)
#: Every property runs under both: ``[default-...]`` in the default suite, ``[long-...]``
#: with ``-m slow``.
PROFILES = [pytest.param(DEFAULT, id="default"),
            pytest.param(LONG, id="long", marks=pytest.mark.slow)]


def _long(profile) -> bool:
    return profile is LONG


@pytest.fixture(scope="module")
def runner():
    """One worker process for this module's cases (bounds enforced by the runner). No
    warm-up: compilation is excluded from the time bound."""
    r = fz.Runner(workers=1, warm=False)
    yield r
    r.close()


def _check(res: dict, case: dict) -> None:
    """The contract: accepted or LibraInputError, nothing else (a silent acceptance, a
    timeout, a memory blow-up, a crash, a bad result are all failures)."""
    assert res["outcome"] in fz.OK_OUTCOMES, (
        f"{case['kind']} ({res.get('loader')}) / {case['family']}: {case.get('detail', '')} "
        f"-> {res['outcome']} at stage {res.get('stage')}: {res.get('exc_type')} "
        f"{str(res.get('message'))[:400]!r} [{res.get('traceback', '')}] "
        f"({res.get('seconds') or 0:.2f} s, peak +{res.get('peak_mb') or 0:.0f} MB)\n"
        f"case: {_show_case(case)}")
    if case.get("expect"):
        assert res["outcome"] == "rejected"


def _show_case(case: dict) -> str:
    shown = {k: v for k, v in case.items() if k not in ("data",)}
    text = repr(shown)
    if "data" in case:
        data = case["data"]
        text += f" data[{len(data)}]={data[:300]!r}"
    return text[:1500]


# ----------------------------------------------------------- the fuzzer's mutations


def _families(kind):
    return st.sampled_from([f for f in fz.families_for(kind) if f != "big_file"])


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("kind", sorted(fz.KINDS))
def test_mutations_load_or_refuse(runner, kind, profile):
    """Seeded mutations of every input kind (the fuzzer's families): each loads and its
    problem builds (long profile: and solves), or is refused with LibraInputError, in
    bounded time and memory."""

    @profile
    @given(family=_families(kind), seed=st.integers(0, 2**32 - 1))
    def prop(family, seed):
        case = fz.make_case(f"hyp{seed}", 0, family=family, kind=kind)
        _check(runner.run(case, solve=_long(profile)), case)

    prop()


_SOLVE_KINDS = ("network", "cost_model", "communicator", "workload_txt", "workload_yaml",
                "notation", "lists", "linear", "spec")


def test_accepted_mutations_solve(runner):
    """An accepted mutated input solves to finite results or a non-ok status."""

    @settings(DEFAULT, max_examples=6)
    @given(kind=st.sampled_from(_SOLVE_KINDS), data=st.data(), seed=st.integers(0, 2**32 - 1))
    def prop(kind, data, seed):
        family = data.draw(_families(kind), label="family")
        case = fz.make_case(f"hyp{seed}", 0, family=family, kind=kind)
        _check(runner.run(case, solve=True), case)

    prop()


# ------------------------------------------------------- hypothesis's own strategies

_WORDS = ("Ring", "FullyConnected", "Switch", "RI", "fc", "ALLREDUCE", "NONE", "allgather",
          "InterNode", "InterPod", "Link", "Nic", "-1", "16", "")
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.integers(-(10**45), 10**45),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(_WORDS))
_VALUES = st.recursive(_SCALARS, lambda c: st.lists(c, max_size=5)
                       | st.dictionaries(st.text(max_size=6) | st.sampled_from(_WORDS), c,
                                         max_size=4), max_leaves=16)

#: Keys of each YAML kind (plus a stranger), for documents close to the real ones.
_KEYS = {
    "network": ["Topology", "NpusCount", "CostDimension"],
    "cost_model": ["InterNode", "InterPod", "InterPackage", "InterChiplet"],
    "communicator": ["Forward", "InputGrad", "WeightGrad"],
    "workload_yaml": ["name", "layers"],
    "astrasim_network": ["topology", "npus_count", "bandwidth", "latency"],
}
_PHASE = st.dictionaries(st.sampled_from(["compute_ns", "collective", "size_bytes",
                                          "communicator", "x"]), _VALUES, max_size=5)
_LAYER = st.dictionaries(st.sampled_from(["name", "count", "forward", "input_grad",
                                          "weight_grad", "x"]),
                         _PHASE | _VALUES, max_size=6)


def _document(kind):
    keys = st.sampled_from(_KEYS[kind] + ["Extra"])
    if kind == "workload_yaml":
        value = st.one_of(st.lists(_LAYER, max_size=3), _VALUES)
    elif kind == "cost_model":
        value = st.one_of(st.dictionaries(st.sampled_from(["Link", "Switch", "Nic", "x"]),
                                          _SCALARS, max_size=4), _VALUES)
    else:
        value = st.one_of(st.lists(_SCALARS, max_size=6), _VALUES)
    return st.one_of(st.dictionaries(keys, value, max_size=5), _VALUES)


def _file_case(kind, data: bytes, family: str, detail: str = "") -> dict:
    return {"id": f"hyp-{kind}", "kind": kind, "family": family, "loader": fz.KINDS[kind][0],
            "suffix": fz.KINDS[kind][1], "data": data, "detail": detail, "expect": None}


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("kind", sorted(_KEYS))
def test_arbitrary_yaml_documents(runner, kind, profile):
    """Arbitrary YAML documents over each file's keys (any types, huge integers, NaN,
    nesting) load and solve, or are refused."""

    @profile
    @given(doc=_document(kind))
    def prop(doc):
        text = yaml.safe_dump(doc, allow_unicode=True).encode()
        case = _file_case(kind, text, "hypothesis_yaml", repr(text[:300]))
        _check(runner.run(case, solve=True), case)

    prop()


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("kind", fz.FILE_KINDS)
def test_arbitrary_bytes_spliced(runner, kind, profile):
    """Arbitrary bytes spliced into (or replacing a stretch of) a shipped input."""

    @profile
    @given(data=st.data(), junk=st.binary(min_size=1, max_size=12))
    def prop(data, junk):
        name, seed = data.draw(st.sampled_from(fz.seeds()[kind]), label="seed file")
        i = data.draw(st.integers(0, len(seed)), label="at")
        n = data.draw(st.integers(0, 8), label="replaced")
        mutated = seed[:i] + junk + seed[i + n:]
        case = _file_case(kind, mutated, "hypothesis_bytes", f"{name}: {junk!r} at {i}")
        case["expect"] = _dup_key_check(seed, mutated) if kind in fz.YAML_KINDS else None
        _check(runner.run(case, solve=_long(profile)), case)

    prop()


_BLOCK_TEXT = st.sampled_from(["RI", "FC", "SW", "Ring", "switch", "Fully_Connected", "",
                               "Torus", "R I", "\uff32\uff29"])
_COUNT_TEXT = st.one_of(st.integers(-5, 40).map(str), st.integers(0, 10**60).map(str),
                        st.sampled_from(["", "1e3", "4.0", "\u0664", "7" * 4301, " 8 "]))
_NOTATIONS = st.one_of(
    st.lists(st.tuples(_BLOCK_TEXT, _COUNT_TEXT), max_size=20).map(
        lambda parts: "_".join(f"{b}({n})" for b, n in parts)),
    st.text(alphabet=st.sampled_from(list("RIFCSWring_()0123456789 -+x\x00\u202e")),
            max_size=40),
    st.text(max_size=30))


def _arg_case(kind, args, family="hypothesis", expect=None):
    return {"id": f"hyp-{kind}", "kind": kind, "family": family,
            "loader": fz.KINDS[kind][0], "args": args, "detail": repr(args)[:300],
            "expect": expect}


@pytest.mark.parametrize("profile", PROFILES)
def test_arbitrary_notations(runner, profile):
    """Arbitrary notations (structured and free text) parse, build (long profile: and
    solve), or are refused."""

    @profile
    @given(notation=_NOTATIONS)
    def prop(notation):
        case = _arg_case("notation", {"notation": notation, "cost_tiers": None})
        _check(runner.run(case, solve=_long(profile)), case)

    prop()


_NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(0, 10**400).map(str),
    st.sampled_from(["1e200*1e200", "1e308*3", "0", "1e-400", "1e400", "5e-324", ".5",
                     "9" * 5000]))
_TERM = st.one_of(
    st.tuples(_NUMBER_TEXT, st.integers(-1, 6)).map(lambda t: f"{t[0]}*bw[{t[1]}]"),
    st.integers(0, 6).map(lambda i: f"bw[{i}]"),
    _NUMBER_TEXT)
_CONSTRAINT = st.one_of(
    st.tuples(st.lists(_TERM, min_size=1, max_size=6),
              st.sampled_from(["==", "<=", ">=", "=<", "=>", "<", ">", "=", "!="]),
              st.lists(_TERM, min_size=1, max_size=3)).map(
        lambda t: " + ".join(t[0]) + f" {t[1]} " + " - ".join(t[2])),
    st.text(alphabet=st.sampled_from(list("bw[]0123456789.e+-*<=> \t")), max_size=40))


@pytest.mark.parametrize("profile", PROFILES)
def test_arbitrary_constraint_strings(runner, profile):
    """Arbitrary linear-constraint strings parse (and, on the 4D network, solve) or are
    refused."""

    @profile
    @given(strings=st.lists(_CONSTRAINT, max_size=4), num_dims=st.integers(1, 6))
    def prop(strings, num_dims):
        case = _arg_case("linear", {"strings": strings, "num_dims": num_dims})
        _check(runner.run(case, solve=True), case)

    prop()


_ANY_ARG = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**45), 10**45), st.sampled_from(["500", "abc", "", "eq", "le"]),
    st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.none(), max_size=5),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


def _is_non_number(v) -> bool:
    return isinstance(v, (bool, str, list, dict))


@pytest.mark.parametrize("profile", PROFILES)
def test_arbitrary_constraint_specs(runner, profile):
    """Arbitrary `ConstraintSpec` fields build and solve (finite results or a non-ok
    status) or are refused; a non-number total or cost cap is never accepted."""

    @profile
    @given(total=_ANY_ARG, cap=_ANY_ARG, mode=_ANY_ARG, lower=_ANY_ARG, upper=_ANY_ARG,
           objective=st.sampled_from(["perf", "perf_per_cost"]))
    def prop(total, cap, mode, lower, upper, objective):
        spec = {"total_bw_gbps": total, "max_cost_usd": cap, "lower_gbps": lower,
                "upper_gbps": upper}
        if mode is not None:
            spec["total_bw_mode"] = mode
        expect = None
        for name, v in (("total_bw_gbps", total), ("max_cost_usd", cap)):
            if _is_non_number(v):
                expect = f"{name} = {v!r} is not a number"
        case = _arg_case("spec", {"net": "3d", "spec": spec, "objective": objective},
                         expect=expect)
        _check(runner.run(case, solve=True), case)

    prop()


@pytest.mark.parametrize("profile", PROFILES)
def test_arbitrary_network_lists(runner, profile):
    """Arbitrary `network_from_lists` arguments; a string or bool NPU count is never
    accepted."""

    @profile
    @given(topology=st.lists(_BLOCK_TEXT | _SCALARS, max_size=5),
           npus=st.lists(st.integers(-3, 2**21) | st.integers(-(10**45), 10**45) | _SCALARS,
                         max_size=5))
    def prop(topology, npus):
        expect = None
        if any(isinstance(n, (bool, str)) for n in npus):
            expect = "an NPU count is not a number"
        case = _arg_case("lists", {"topology": topology, "npus": npus, "cost_tiers": None},
                         expect=expect)
        _check(runner.run(case, solve=_long(profile)), case)

    prop()


# ------------------------------------------------- targeted: keys, tags, large input


@pytest.mark.parametrize("kind", fz.YAML_KINDS)
def test_every_duplicate_key_is_refused(runner, kind):
    """Every top-level key of every shipped YAML input, given twice, is refused."""
    cases = []
    for name, data in fz.seeds()[kind]:
        for m in _KEY_LINE.finditer(data):
            if m.group(1) or m.group(2):
                continue
            line_end = data.index(b"\n", m.end()) if b"\n" in data[m.end():] else len(data)
            line = data[m.start():line_end]
            mutated = data + b"\n" + line + b"\n"
            if not fz.yaml_duplicate_keys(mutated):
                continue
            case = _file_case(kind, mutated, "duplicate_key", f"{name}: {line[:40]!r} twice")
            case["expect"] = f"duplicate key {m.group(3).decode()!r}"
            cases.append(case)
    assert cases
    for case, res in zip(cases, runner.run_many(cases, solve=False)):
        _check(res, case)


@pytest.mark.parametrize("tag", [t for t, why in fz.YAML_TAGS if why == "python tag"])
def test_python_tags_are_refused_and_never_run(runner, tag):
    """`!!python/...` tags stay refused and nothing they name runs."""
    data = (fz.INPUTS / "network/3d_network.yml").read_bytes().replace(
        b"[ 16, 8, 32 ]", tag.encode(), 1)
    case = _file_case("network", data, "yaml_tag", tag)
    case["expect"] = "python tag"
    res = runner.run(case, solve=False)
    assert res["outcome"] != "code-exec"
    _check(res, case)


def test_large_flow_list_is_handled_in_bounded_time(runner):
    """A several-MB flow list (generated, never stored) loads or is refused within the
    bounds (it took ~55 s to be refused)."""
    case = {"id": "big", "kind": "network", "family": "big_file", "loader": "load_network_file",
            "suffix": ".yml", "generate": {"kind": "network", "variant": "npus_flow", "mb": 4},
            "detail": "4 MB NpusCount flow list", "expect": None}
    _check(runner.run(case, solve=False), case)


# ------------------------------------------------------------ the trace section


def test_trace_seed_sets_are_valid(tmp_path):
    """The trace section's seeds (valid Chakra trace sets) read as they are."""
    for k, (name, *_) in enumerate(fz.traces.seed_sets()):
        args = fz.decode(fz.traces.base_trace_args(None, name))
        folder = tmp_path / str(k)
        folder.mkdir()
        ts = fz.traces.load_trace_case(args, folder)
        assert ts.num_ranks == 4, name
        assert sum(t.num_nodes for t in ts.ranks) > 0


@pytest.mark.parametrize("family", sorted(fz.traces.TRACE_FAMILIES))
def test_trace_mutations(runner, family):
    """The trace section: seeded mutations of valid trace sets through read_chakra are
    accepted or refused, in bounded time and memory; those that must be refused (a cut
    inside a message, a gap, a dangling dependency, a cycle, an unmatched send, a broken
    group JSON) are, with a message naming the file."""
    for i in range(3):
        case = fz.make_case("traces", i, family=family, kind="chakra_et")
        res = runner.run(case, solve=False)
        _check(res, case)
        if case["expect"]:
            assert "wl." in res["message"] or "comm_groups.json" in res["message"], res


# ----------------------------------------------------------------------- the corpus


def _corpus():
    if not CORPUS.exists():
        return []
    return fz.load_corpus(CORPUS)


_CASES = _corpus()


@pytest.mark.parametrize("case", _CASES, ids=[c["id"] for c in _CASES])
def test_reproducer_corpus(runner, case):
    """Every reproducer of `tests/fixtures/fuzz/` loads (and solves) or is refused with
    LibraInputError; one that must be refused is."""
    _check(runner.run(case, solve=True), case)


def test_corpus_is_small():
    """The corpus stays small: at most ~40 files of a few KB (generated inputs are
    recipes)."""
    files = [p for p in CORPUS.iterdir() if p.is_file()] if CORPUS.exists() else []
    assert len(files) <= 45
    big = [(p.name, p.stat().st_size) for p in files
           if p.stat().st_size > (16384 if p.name == "corpus.json" else 8192)]
    assert not big
    names = [c["id"] for c in _CASES]
    assert len(names) == len(set(names))


# --------------------------------------------------------------------- the fuzzer


def test_fuzzer_cases_are_deterministic_and_varied():
    """Cases depend only on (seed, index); a run covers every family and kind."""
    a = [fz.make_case(5, i) for i in range(400)]
    b = [fz.make_case(5, i) for i in range(400)]
    assert [json.dumps(x, default=repr) for x in a] == [json.dumps(x, default=repr) for x in b]
    assert {c["kind"] for c in a} == set(fz.KINDS)
    assert {c["family"] for c in a} >= set(fz.FAMILIES) - {"big_file"}
    for fam, (fn, kinds, _) in fz.FAMILIES.items():
        for kind in kinds:
            case = fz.make_case(6, 0, family=fam, kind=kind)
            assert case["kind"] == kind and case["family"] == fam


def test_duplicate_key_oracle():
    assert fz.yaml_duplicate_keys(b"a: 1\nb: 2\na: 3\n") == ["a"]
    assert fz.yaml_duplicate_keys(b"x: {k: 1, k: 2}\n") == ["k"]
    assert fz.yaml_duplicate_keys(b"a: &m {k: 1}\nb: {<<: *m, j: 2}\n") == []
    assert fz.yaml_duplicate_keys(b"[: not yaml") == []


def _selftest(**args):
    return {"id": "selftest", "kind": "selftest", "family": "selftest", "loader": "selftest",
            "args": args, "expect": None}


def test_runner_enforces_the_bounds():
    """The pool kills a case past the CPU-time or memory bound, reports it, and goes on with
    a fresh worker."""
    with fz.Runner(workers=1, warm=False, preload=False, time_limit_s=1.0, mem_limit_mb=150,
                   cache_dir=None) as r:
        burn, alloc, ok = r.run_many([_selftest(cpu_s=30.0), _selftest(alloc_mb=1500),
                                      _selftest(cpu_s=0.01)], solve=False)
        assert burn["outcome"] == "timeout" and burn["seconds"] < 10, burn
        assert alloc["outcome"] == "memory", alloc
        assert ok["outcome"] == "accepted", ok
        assert r.restarts == 2


@pytest.mark.slow
def test_runner_survives_a_dying_worker():
    with fz.Runner(workers=1, warm=False, preload=False, cache_dir=None) as r:
        died, ok = r.run_many([_selftest(die=True), _selftest()], solve=False)
    assert died["outcome"] == "worker-died" and ok["outcome"] == "accepted", (died, ok)


# --------------------------------------------------------------------------- CLI


def test_cli_bad_input_reports_an_error_line(tmp_path):
    """A non-UTF-8 byte in the network file: `libra-train` exits non-zero with an
    `error:` line and no traceback."""
    data = (fz.INPUTS / "network/3d_network.yml").read_bytes().replace(b"Ring", b"R\xffng")
    case = {"id": "cli-non-utf8", "kind": "network", "family": "non_utf8",
            "files": {"input.yml": data}, "overrides": ["network.file=@DIR@/input.yml"],
            "expect": "not UTF-8"}
    res = fz.run_cli_case(case)
    assert res["outcome"] == "rejected", res
    assert res["exit_code"] != 0 and res["error_line"] and not res["traceback"]


@pytest.mark.slow
@pytest.mark.parametrize("index", range(12))
def test_cli_cases(index):
    """Mutated inputs and overrides through `libra-train conf=turing_nlg`: bad input exits
    non-zero with an `error:` line and no traceback; a must-refuse input is refused."""
    case = fz.make_cli_case("pytest", index)
    res = fz.run_cli_case(case, mem_limit_mb=fz.MEM_LIMIT_MB, base_rss_mb=700)
    assert res["outcome"] in fz.OK_OUTCOMES, (case["family"], case.get("detail"), res)
