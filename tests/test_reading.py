"""Issue 17: the one reader of input files (`inputs/reading.py`), the physical limits
(`inputs/limits.py`) and the bounded renderings of values in messages (`types.show`).

Every hostile input here must raise `LibraInputError` naming the file (and line, byte or
key) quickly; the fuzzing suite (test_fuzz.py) checks the same contract on random mutations.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import yaml

import libra_jax as lj
from libra_jax.inputs import LIBRA_INPUTS_DIR
from libra_jax.inputs.astrasim import import_network_yaml
from libra_jax.inputs.limits import LIMITS, MAX_FILE_MB_ENV, as_int, as_list, as_real
from libra_jax.inputs.reading import read_text, read_yaml
from libra_jax.model.linear import parse_linear_constraints
from libra_jax.types import LibraInputError, clip, show

NETWORK = "Topology: [Ring, Switch]\nNpusCount: [4, 8]\n"
COST = "InterNode:\n  Link: 2.0\nInterPod:\n  Link: 7.8\n  Switch: 18.0\n  Nic: 31.6\n"
COMM = "Forward: [4, -1]\nInputGrad: [4, -1]\nWeightGrad: [-1, 8]\n"
WORKLOAD = """name: tiny
layers:
  - name: attn
    forward: {compute_ns: 100, collective: ALLREDUCE, size_bytes: 1000, communicator: [4, -1]}
    input_grad: {compute_ns: 100, collective: NONE}
    weight_grad: {compute_ns: 100, collective: ALLREDUCE, size_bytes: 500, communicator: [-1, 8]}
"""
ASTRA = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 8 ]\nbandwidth: [ 50.0, 25.0 ]\n"
TXT = "DATA\n1\nl0 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1000 10\n"

#: Each YAML input kind: (file name, valid text, loader).
KINDS = {
    "network": ("net.yml", NETWORK, lj.load_network_file),
    "cost": ("cost.yml", COST, lj.load_cost_model),
    "communicator": ("comm.yml", COMM, lj.load_communicator),
    "workload": ("wl.yaml", WORKLOAD, lambda p: lj.load_workload(p, None, 2)),
    "astrasim": ("astra.yml", ASTRA, import_network_yaml),
}


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(p)


def _refused(loader, *args, match=None, seconds=5.0):
    """The LibraInputError message of ``loader(*args)``, which must come within ``seconds``
    and be short."""
    start = time.perf_counter()
    with pytest.raises(LibraInputError) as info:
        loader(*args)
    assert time.perf_counter() - start < seconds
    message = str(info.value)
    assert len(message) < 600, message
    if match is not None:
        assert match in message, message
    return message


@pytest.mark.parametrize("kind", list(KINDS))
def test_valid_files_of_every_kind_load(tmp_path, kind):
    name, text, loader = KINDS[kind]
    loader(_write(tmp_path, name, text))


@pytest.mark.parametrize("kind", list(KINDS))
def test_duplicate_keys_are_refused_in_every_kind(tmp_path, kind):
    name, text, loader = KINDS[kind]
    first = text.splitlines()[0] if kind != "workload" else "name: tiny"
    key = first.split(":")[0]
    p = _write(tmp_path, name, text + first + "\n")
    message = _refused(loader, p, match=f"duplicate key {key!r}")
    assert p in message and "first given on line 1" in message
    assert f"line {len(text.splitlines()) + 1}" in message


def test_duplicate_keys_in_a_flow_mapping_and_a_nested_phase(tmp_path):
    p = _write(tmp_path, "net.yml", "{Topology: [Ring], NpusCount: [4], Topology: [Ring]}\n")
    _refused(lj.load_network_file, p, match="duplicate key 'Topology'")
    nested = WORKLOAD.replace("compute_ns: 100, collective: NONE}",
                              "compute_ns: 100, collective: NONE, compute_ns: 5}")
    p = _write(tmp_path, "wl.yaml", nested)
    _refused(lambda q: lj.load_workload(q, None, 2), p, match="duplicate key 'compute_ns'")


def test_merge_keys_are_not_duplicates(tmp_path):
    text = "base: &b {Link: 1.0}\nInterNode:\n  <<: *b\n  Link: 2.0\n"
    cost = lj.load_cost_model(_write(tmp_path, "cost.yml", text.replace("base", "Other")))
    assert cost.tiers["InterNode"] == {"Link": 2.0}


def test_two_merge_keys_in_one_mapping_are_duplicates(tmp_path):
    """Was accepted with one of the merges lost (found by a held-out fuzz run): a second
    '<<' is refused like any duplicate key, naming the file and both lines; one '<<' with a
    list of mappings still merges both."""
    text = ("base: &b {Link: 1.0}\nother: &o {Switch: 3.0}\nInterNode:\n  <<: *b\n"
            "  Nic: 2.0\n  <<: *o\n")
    p = _write(tmp_path, "cost.yml", text)
    message = _refused(lj.load_cost_model, p,
                       match="duplicate key '<<' (first given on line 4)")
    assert message.startswith(f"{p}, line 6: ") and "<<: [*a, *b]" in message
    one = _write(tmp_path, "one.yml", text.replace("  <<: *o\n", "").replace("*b", "[*b, *o]"))
    assert lj.load_cost_model(one).tiers["InterNode"] == {"Link": 1.0, "Switch": 3.0,
                                                          "Nic": 2.0}


@pytest.mark.parametrize("kind", list(KINDS) + ["text workload"])
def test_non_utf8_bytes_name_the_offset_and_line(tmp_path, kind):
    if kind == "text workload":
        data = TXT.encode()
        p = _write(tmp_path, "wl.txt", data[:8] + b"\xff" + data[8:])
        comm = _write(tmp_path, "comm.yml", COMM)
        message = _refused(lj.load_workload, p, comm, 2)
        assert "byte 0xff at offset 8" in message and "line 3" in message
        return
    name, text, loader = KINDS[kind]
    data = text.encode()
    cut = data.index(b"\n") + 3
    p = _write(tmp_path, name, data[:cut] + b"\xfe" + data[cut:])
    message = _refused(loader, p, match=f"byte 0xfe at offset {cut}")
    assert "line 2" in message and "not UTF-8" in message


def test_a_byte_order_mark_is_fine(tmp_path):
    net = lj.load_network_file(_write(tmp_path, "net.yml", b"\xef\xbb\xbf" + NETWORK.encode()))
    assert net.npus == (4, 8)


@pytest.mark.parametrize("flow", [True, False])
def test_deep_nesting_is_refused_without_recursion(tmp_path, flow):
    if flow:
        text = "Topology: " + "[" * 100_000 + "]" * 100_000 + "\nNpusCount: [4]\n"
    else:
        text = "".join("  " * i + "a:\n" for i in range(1000)) + "  " * 1000 + "b: 1\n"
    _refused(lj.load_network_file, _write(tmp_path, "net.yml", text), match="nest")
    depth = LIMITS.max_yaml_depth
    ok = "[" * (depth - 1) + "1" + "]" * (depth - 1)
    assert read_yaml(_write(tmp_path, "ok.yml", f"a: {ok}\n"), "test") is not None


def _bomb(levels: int, leaf: str = "lol") -> str:
    lines = [f"a0: &a0 [{', '.join([leaf] * 9)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("kind", list(KINDS))
def test_alias_bombs_are_refused_before_anything_expands_them(tmp_path, kind):
    name, text, loader = KINDS[kind]
    p = _write(tmp_path, name, _bomb(9) + text)  # 9**9 = 387 million leaves
    message = _refused(loader, p, seconds=2.0, match="YAML nodes")
    assert "aliases counted at the size of what they repeat" in message


def test_aliases_within_the_bound_are_fine_and_a_bomb_in_a_value_is_quoted_short(tmp_path):
    assert len(read_yaml(_write(tmp_path, "a.yml", _bomb(3)), "test")["a2"]) == 9
    # Within the node bound of a workload but printed in a message: the message stays short.
    text = _bomb(5) + "layers: *a4\n"
    message = _refused(lambda q: lj.load_workload(q, None, 2), _write(tmp_path, "w.yaml", text))
    assert "unknown key" in message or "expected" in message


def test_yaml_tags_that_run_code_stay_refused(tmp_path):
    text = "Topology: !!python/object/apply:os.system ['echo owned']\nNpusCount: [4]\n"
    _refused(lj.load_network_file, _write(tmp_path, "net.yml", text),
             match="uses the YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'")
    for text in ("a: !!binary aGVsbG8=\n", "a: !custom 5\n", "a: !!set {b: null}\n"):
        _refused(read_yaml, _write(tmp_path, "t.yml", text), "test", match="YAML tag")


def test_recursive_and_missing_aliases_several_documents_and_list_keys(tmp_path):
    for text, needle in [("a: &a [1, *a]\n", "recursive"), ("a: *zz\n", "no anchor"),
                         ("a: 1\n---\nb: 2\n", "more than one YAML document"),
                         ("? [1, 2]\n: 3\n", "keys must be strings or numbers")]:
        _refused(read_yaml, _write(tmp_path, "t.yml", text), "test", match=needle)


def test_plain_yaml_reads_as_pyyaml_safe_load_reads_it(tmp_path):
    text = ("base: &b {Link: 1.0, Switch: 2}\nother: &o {Nic: 3}\nT:\n  <<: [*b, *o]\n"
            "  Link: 5\nx: [0x1F, 1_000, .inf, ~, yes, 'yes', 2001-12-14, -1.5e3]\n")
    assert read_yaml(_write(tmp_path, "t.yml", text), "test") == yaml.safe_load(text)
    for path in LIBRA_INPUTS_DIR.rglob("*.yml"):
        assert read_yaml(path, "test") == yaml.safe_load(path.read_text())


def test_file_size_limit_and_its_environment_variable(tmp_path, monkeypatch):
    p = _write(tmp_path, "net.yml", NETWORK + "#" * 5000 + "\n")
    assert lj.load_network_file(p).npus == (4, 8)
    monkeypatch.setenv(MAX_FILE_MB_ENV, "0.001")
    message = _refused(lj.load_network_file, p, match="larger than the 0.001 MB limit")
    assert MAX_FILE_MB_ENV in message
    monkeypatch.setenv(MAX_FILE_MB_ENV, "lots")
    _refused(read_text, p, "network", match=f"{MAX_FILE_MB_ENV} = 'lots'")
    monkeypatch.delenv(MAX_FILE_MB_ENV)
    assert LIMITS.file_bytes() == 64_000_000


def test_a_multi_megabyte_list_in_a_small_file_is_refused_at_once(tmp_path):
    text = "Topology: [" + ", ".join(["Ring"] * 1_000_000) + "]\nNpusCount: [4]\n"
    _refused(lj.load_network_file, _write(tmp_path, "net.yml", text), seconds=2.0,
             match="more than 10,000 YAML nodes")


def test_unreadable_paths_and_paths_that_are_not_paths(tmp_path):
    _refused(lj.load_network_file, str(tmp_path / "a\0b.yml"), match="expected a file path")
    _refused(lj.load_network_file, str(tmp_path), match="cannot read")
    for value in (5, None, ["a.yml"], b"a.yml"):
        _refused(lj.load_cost_model, value, match="path = ")
    _refused(lj.load_workload, str(tmp_path / "w.txt"), 5, match="communicator_file = 5")
    _refused(lj.cost_rates_usd_per_gbps, "RI(4)", None, match="network: expected a Network")


# ------------------------------------------------------------------ integers and limits


def test_integers_past_pythons_digit_limit(tmp_path):
    big = "7" * 5000
    _refused(lj.load_network_file,
             _write(tmp_path, "net.yml", f"Topology: [Ring]\nNpusCount: [{big}]\n"),
             match="integer of 5,000 characters")
    comm = _write(tmp_path, "comm.yml", COMM)
    _refused(lj.load_workload, _write(tmp_path, "wl.txt", TXT.replace("\n1\n", f"\n{big}\n")),
             comm, 2, match="line 2: the header says")
    _refused(lj.parse_notation, f"RI({big})_SW(4)", match="far beyond the limit")
    _refused(parse_linear_constraints, [f"bw[{'9' * 5000}] <= 5"], 2, match="out of range")


@pytest.mark.parametrize(
    "call, needles",
    [
        (lambda: lj.parse_notation("RI(2000000)"), ["dimension 0", "1,048,576"]),
        (lambda: lj.network_from_lists(["Ring"], [10**40]), ["about 41 digits", "1,048,576"]),
        (lambda: lj.network_from_lists(["RI"] * 4, [1024] * 4), ["1,099,511,627,776 NPUs",
                                                                 "1.07374e+09"]),
        (lambda: lj.network_from_lists(["RI"] * 17, [2] * 17), ["17 dimensions", "16"]),
    ],
    ids=["npus-per-dim", "npus-10e40", "npus-total", "dims"],
)
def test_network_limits(call, needles):
    message = _refused(call)
    for needle in needles:
        assert needle in message


@pytest.mark.parametrize(
    "edit, needles",
    [
        (("communicator: [4, -1]", f"communicator: [{10**40}, -1]"),
         ["communicator[0]", "about 41 digits", "1,048,576"]),
        (("compute_ns: 100, collective: NONE", "compute_ns: 1.0e+300, collective: NONE"),
         ["compute_ns = 1e+300", "1e+18 ns"]),
        (("size_bytes: 1000", "size_bytes: 1.0e+300"), ["size_bytes = 1e+300", "1e+18 bytes"]),
        (("- name: attn\n", f"- name: attn\n    count: {10**40}\n"),
         ["count = <an integer of about 41 digits>", "100,000 layers"]),
        (("size_bytes: 1000", "size_bytes: '1000'"), ["size_bytes = '1000'", "not a finite"]),
        (("compute_ns: 100, collective: NONE", "compute_ns: true, collective: NONE"),
         ["compute_ns = True"]),
    ],
    ids=["communicator", "compute", "size", "count", "string", "bool"],
)
def test_workload_limits_and_types(tmp_path, edit, needles):
    text = WORKLOAD.replace(*edit)
    assert text != WORKLOAD
    message = _refused(lambda p: lj.load_workload(p, None, 2), _write(tmp_path, "w.yaml", text))
    for needle in needles:
        assert needle in message, message


def test_text_workload_limits(tmp_path):
    comm = _write(tmp_path, "comm.yml", COMM)
    huge = TXT.replace("ALLREDUCE 1000", "ALLREDUCE 1e300")
    _refused(lj.load_workload, _write(tmp_path, "w.txt", huge), comm, 2,
             match="beyond the limit of 1e+18 bytes")
    many = TXT.replace("\n1\n", "\n200000\n")
    _refused(lj.load_workload, _write(tmp_path, "w2.txt", many), comm, 2,
             match="at most 100,000 are supported")


def test_cost_model_limits(tmp_path):
    message = _refused(lj.load_cost_model,
                       _write(tmp_path, "c.yml", "InterNode:\n  Link: 1.0e+308\n"))
    assert "InterNode.Link = 1e+308" in message and "1e+09" in message
    _refused(lj.load_cost_model, _write(tmp_path, "c.yml", "InterNode:\n  Link: '2'\n"),
             match="InterNode.Link = '2'")


@pytest.mark.parametrize(
    "constraint, needle",
    [
        ("1e200*1e200*bw[0] <= 1", "number '1e200'"),
        ("1e10*1e10*bw[0] <= 1", "a product = 1e+20"),
        ("bw[0] <= 1e308*3", "number '1e308'"),
        ("1e-320*bw[0] <= 1", "number '1e-320'"),
        ("bw[0] - 0.9999999999999*bw[0] + 0*bw[1] <= 1", "nearly cancel"),
    ],
)
def test_constraint_magnitudes(constraint, needle):
    message = _refused(parse_linear_constraints, [constraint], 2)
    assert needle in message and "constraints.linear[0]" in message


def test_constraint_lists_are_lists():
    _refused(parse_linear_constraints, {"bw[0] <= 1": 1}, 2, match="expected a list")
    _refused(parse_linear_constraints, 5, 2, match="expected a list")
    _refused(parse_linear_constraints, ["bw[0] <= 1"] * (LIMITS.max_constraints + 1), 2,
             match="at most 10,000")
    _refused(parse_linear_constraints, ["bw[0] <= 1" + " " * LIMITS.max_constraint_chars], 2,
             match="characters")


def test_astrasim_limits(tmp_path):
    text = ASTRA.replace("50.0", "1.0e+300")
    _refused(import_network_yaml, _write(tmp_path, "a.yml", text),
             match="beyond the limit of 1e+09 GB/s")
    text = ASTRA.replace("[ 4, 8 ]", "[ '" + "4" * 5000 + "', 8 ]")
    _refused(import_network_yaml, _write(tmp_path, "b.yml", text), match="npus_count[0]")


def test_messages_quote_huge_values_briefly(tmp_path):
    text = "Topology: [" + "x" * 1_000_000 + "]\nNpusCount: [4]\n"
    message = _refused(lj.load_network_file, _write(tmp_path, "net.yml", text))
    assert "unknown building block 'xxxx" in message and "..." in message


# ------------------------------------------------------------------ show and the checks


def test_show_is_bounded_and_exact_for_small_values():
    assert show([1, 2.5, "a"]) == "[1, 2.5, 'a']"
    assert show({"b": 1, "a": 2}) == "{'b': 1, 'a': 2}"  # insertion order, like repr
    assert show(10**5000) == "<an integer of about 5001 digits>"
    assert show(-(10**60)) == "-<an integer of about 61 digits>"
    assert len(show("x" * 10**6)) <= 80
    bomb = ["lol"] * 9
    for _ in range(9):
        bomb = [bomb] * 9
    start = time.perf_counter()
    assert len(show(bomb)) <= 80
    assert time.perf_counter() - start < 0.1
    assert show(np.arange(3)) == "array([0, 1, 2])"
    assert clip("x" * 100, 10) == "xxxxxxx..." and clip(10**5000).startswith("<an integer")


@pytest.mark.parametrize("value", [True, "500", [500], None, float("nan"), float("inf"),
                                   {"a": 1}, 10**400],
                         ids=["bool", "str", "list", "none", "nan", "inf", "dict", "10e400"])
def test_as_real_refuses_what_is_not_a_finite_number(value):
    with pytest.raises(LibraInputError, match=r"^total = .*expected a"):
        as_real(value, "total", 0, 1e9)


def test_as_int_and_as_list():
    assert as_int(8.0, "n", 2, 10) == 8 and as_int(np.int64(3), "n") == 3
    for value in (True, 2.5, "8", 11, float("inf")):
        with pytest.raises(LibraInputError, match="^n = "):
            as_int(value, "n", 2, 10)
    assert as_list((1, 2), "x") == [1, 2] and as_list(np.array([1.0]), "x") == [1.0]
    for value in ("ab", {"a": 1}, 5, b"ab", np.zeros((2, 2))):
        with pytest.raises(LibraInputError, match="^x = .*expected a list"):
            as_list(value, "x")


def test_num_dims_beyond_the_limit_and_digits_of_other_scripts(tmp_path):
    wl = _write(tmp_path, "wl.yaml", WORKLOAD)
    _refused(lj.load_workload, wl, None, 10**5000, match="num_dims = <an integer of about")
    _refused(parse_linear_constraints, ["bw[0] <= 1"], 10**5000, match="num_dims")
    _refused(parse_linear_constraints, ["bw[0] <= 1"], 17, match="num_dims = 17")
    # float() and int() read Arabic-Indic digits; ASTRA-sim and LIBRA do not: not numbers.
    comm = _write(tmp_path, "comm.yml", COMM)
    _refused(lj.load_workload, _write(tmp_path, "w.txt", TXT.replace("1000", "\u0661\u0662")),
             comm, 2, match="is not a number")
    _refused(lj.load_workload, _write(tmp_path, "w2.txt", TXT.replace("\n1\n", "\n\u0661\n")),
             comm, 2, match="expected the number of layers")
    _refused(lj.parse_notation, "RI(\u0661\u0666)", match="cannot parse at character 0")
    _refused(parse_linear_constraints, ["bw[0] <= \u0661"], 2, match="unknown token")


def test_a_notation_that_does_not_parse_is_quoted_short():
    # The unparsed rest of the string was quoted whole (found by test_fuzz's slow profile).
    _refused(lj.parse_notation, "RI()_RI(" + "7" * 50_000 + ")", match="cannot parse at")
