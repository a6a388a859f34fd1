"""Tests for libra_jax.inputs.workload: shipped inputs, header form, native YAML, errors."""

from pathlib import Path

import numpy as np
import pytest

from libra_jax.inputs.topology import load_network_file, parse_notation
from libra_jax.inputs.workload import (
    Workload,
    check_workload_network,
    load_communicator,
    load_workload,
)
from libra_jax.types import Collective, LibraInputError

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "libra_jax" / "data" / "libra_inputs"
FIXTURES = ROOT / "tests" / "fixtures"
WORKLOADS = ("DLRM", "GPT_3", "MSFT_1T", "ResNet_50", "Turing_NLG")
# The reference ships no DLRM communicator; use the pure data-parallel one (as libra_optima).
COMM = {
    "DLRM": "ResNet_50",
    "GPT_3": "GPT_3",
    "MSFT_1T": "MSFT_1T",
    "ResNet_50": "ResNet_50",
    "Turing_NLG": "Turing_NLG",
}
COMM_SUFFIX = {("Turing_NLG", "3d"): "3D", ("Turing_NLG", "4d"): "4D"}
LAYERS = {"DLRM": 20, "GPT_3": 18, "MSFT_1T": 18, "ResNet_50": 54, "Turing_NLG": 18}


def _comm_path(workload, d):
    base = COMM[workload]
    return INPUTS / "communicator" / f"{base}_{COMM_SUFFIX.get((base, d), d)}.yml"


def test_load_all_communicators():
    files = sorted((INPUTS / "communicator").glob("*.yml"))
    assert len(files) == 8
    for f in files:
        comm = load_communicator(f)
        assert comm.shape in ((3, 3), (3, 4)) and comm.dtype == np.int32
    np.testing.assert_array_equal(
        load_communicator(INPUTS / "communicator" / "GPT_3_4d.yml"),
        [[4, 4, -1, -1], [4, 4, -1, -1], [-1, 2, 4, 32]],
    )


@pytest.mark.parametrize("name", WORKLOADS)
@pytest.mark.parametrize("d", ["3d", "4d"])
def test_load_shipped_workloads(name, d):
    net = load_network_file(INPUTS / "network" / f"{d}_network.yml")
    w = load_workload(
        INPUTS / "workload" / f"{name}.txt", _comm_path(name, d), net.num_dims
    )
    check_workload_network(w, net)
    n = LAYERS[name]
    assert w.name == name
    assert len(w.layer_names) == n
    assert w.compute_ns.shape == (n, 3) and w.compute_ns.dtype == np.float64
    assert w.collective.shape == (n, 3)
    assert w.size_bytes.shape == (n, 3) and w.size_bytes.dtype == np.float64
    assert w.communicator.shape == (n, 3, net.num_dims)
    assert w.num_layers == n and w.num_dims == net.num_dims
    assert np.all(w.compute_ns >= 0) and np.all(w.size_bytes >= 0)


def test_gpt3_first_line_values():
    w = load_workload(INPUTS / "workload" / "GPT_3.txt", _comm_path("GPT_3", "4d"))
    assert w.layer_names[0] == "Q1"
    np.testing.assert_array_equal(w.compute_ns[0], [9375000, 9375000, 9375000])
    np.testing.assert_array_equal(
        w.collective[0], [Collective.NONE, Collective.ALLREDUCE, Collective.ALLREDUCE]
    )
    np.testing.assert_array_equal(w.size_bytes[0], [0, 805306368, 452984832])
    np.testing.assert_array_equal(w.communicator[0, 2], [-1, 2, 4, 32])
    assert "GPT_3.txt" in w.source and "GPT_3_4d.yml" in w.source


def test_dlrm_alltoall():
    w = load_workload(INPUTS / "workload" / "DLRM.txt", _comm_path("DLRM", "3d"))
    np.testing.assert_array_equal(
        w.collective[0],
        [Collective.ALLTOALL, Collective.ALLTOALL, Collective.ALLREDUCE],
    )


@pytest.mark.parametrize(
    "header",
    [
        "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 16\n18\n",
        "DATA\n18\n",
    ],
)
def test_header_form_identical(tmp_path, header):
    src = INPUTS / "workload" / "GPT_3.txt"
    p = tmp_path / "GPT_3.txt"
    p.write_text(header + src.read_text())
    comm = _comm_path("GPT_3", "4d")
    a = load_workload(src, comm, 4)
    b = load_workload(p, comm, 4)
    assert a.name == b.name and a.layer_names == b.layer_names
    for field in ("compute_ns", "collective", "size_bytes", "communicator"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_header_count_mismatch(tmp_path):
    src = INPUTS / "workload" / "GPT_3.txt"
    p = tmp_path / "w.txt"
    p.write_text("DATA\n17\n" + src.read_text())
    with pytest.raises(
        LibraInputError, match=r"header says 17 layers.*18 layer lines"
    ) as e:
        load_workload(p, _comm_path("GPT_3", "4d"))
    assert str(p) in str(e.value)


def test_case_insensitive_and_blank_lines(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text("\nL1 -1 10 none 0 20 AllReduce 100 30 alltoall 50 0\n\n")
    comm = tmp_path / "c.yml"
    comm.write_text("Forward: [-1, -1]\nInputGrad: [2, 2]\nWeightGrad: [2, -1]\n")
    w = load_workload(p, comm)
    np.testing.assert_array_equal(w.collective, [[0, 1, 4]])
    np.testing.assert_array_equal(w.compute_ns, [[10, 20, 30]])


GOOD = "L1 -1 10 NONE 0 20 ALLREDUCE 100 30 ALLGATHER 50 0\n"


@pytest.mark.parametrize(
    "text, needles",
    [
        (
            GOOD + "L2 -1 10 NONE 0 20 ALLREDUCE 100 30 NONE 0\n",
            ["line 2", "expected 12", "got 11"],
        ),
        (
            GOOD + "L2 -1 10 NONE 0 20 ALLREDUCE 100 30 NONE 0 0 7\n",
            ["line 2", "got 13"],
        ),
        (
            GOOD + "L2 -1 ten NONE 0 20 ALLREDUCE 100 30 NONE 0 0\n",
            ["line 2", "'ten'", "not a number"],
        ),
        (
            GOOD + "L2 -1 10 NONE 0 20 ALLREDUCE 1e9x 30 NONE 0 0\n",
            ["line 2", "'1e9x'"],
        ),
        (
            GOOD + "L2 -1 -5 NONE 0 20 ALLREDUCE 100 30 NONE 0 0\n",
            ["line 2", "'-5'", "negative"],
        ),
        (
            GOOD + "L2 -1 5 NONE 0 20 ALLREDUCE -100 30 NONE 0 0\n",
            ["line 2", "'-100'", "negative"],
        ),
        (
            GOOD + "L2 -1 5 NONE 0 20 BROADCAST 100 30 NONE 0 0\n",
            ["line 2", "'BROADCAST'", "ALLREDUCE"],
        ),
        (
            GOOD + "L2 -1 nan NONE 0 20 NONE 0 30 NONE 0 0\n",
            ["line 2", "'nan'", "finite"],
        ),
        ("DATA\nx\n" + GOOD, ["line 2", "number of layers", "'x'"]),
        ("DATA\n" + GOOD, ["line 1", "got 1", "header"]),
        ("\n\n", ["no layer lines"]),
        ("DATA\n0\n", ["no layer lines"]),
    ],
)
def test_text_workload_errors(tmp_path, text, needles):
    p = tmp_path / "w.txt"
    p.write_text(text)
    comm = tmp_path / "c.yml"
    comm.write_text("Forward: [2, 2]\nInputGrad: [2, 2]\nWeightGrad: [2, 2]\n")
    with pytest.raises(LibraInputError) as e:
        load_workload(p, comm)
    msg = str(e.value)
    assert str(p) in msg
    for n in needles:
        assert n in msg


def test_text_needs_communicator(tmp_path):
    p = tmp_path / "w.txt"
    p.write_text(GOOD)
    with pytest.raises(LibraInputError, match="communicator file") as e:
        load_workload(p)
    assert str(p) in str(e.value)


def test_missing_files(tmp_path):
    comm = INPUTS / "communicator" / "GPT_3_3d.yml"
    for name in ("nope.txt", "nope.yaml"):
        p = tmp_path / name
        with pytest.raises(LibraInputError, match="cannot read") as e:
            load_workload(p, comm)
        assert str(p) in str(e.value)
    p = tmp_path / "nope.yml"
    with pytest.raises(LibraInputError, match="cannot read") as e:
        load_communicator(p)
    assert str(p) in str(e.value)
    w = tmp_path / "w.txt"
    w.write_text(GOOD)
    with pytest.raises(LibraInputError, match="cannot read") as e:
        load_workload(w, p)
    assert str(p) in str(e.value)


def test_unknown_suffix(tmp_path):
    p = tmp_path / "w.csv"
    p.write_text(GOOD)
    with pytest.raises(LibraInputError, match=r"'\.csv'"):
        load_workload(p, INPUTS / "communicator" / "GPT_3_3d.yml")


@pytest.mark.parametrize(
    "text, needles",
    [
        ("Forward: [2, 2]\nInputGrad: [2, 2]\n", ["WeightGrad", "missing"]),
        (
            "Forward: [2, 2]\nInputGrad: [2, 2]\nWeightGrad: [2]\n",
            ["different lengths", "WeightGrad: 1"],
        ),
        (
            "Forward: [2, 0]\nInputGrad: [2, 2]\nWeightGrad: [2, 2]\n",
            ["Forward[1]", "= 0"],
        ),
        (
            "Forward: [2, -2]\nInputGrad: [2, 2]\nWeightGrad: [2, 2]\n",
            ["Forward[1]", "-2"],
        ),
        (
            "Forward: [2, 1.5]\nInputGrad: [2, 2]\nWeightGrad: [2, 2]\n",
            ["Forward[1]", "1.5"],
        ),
        (
            "Forward: [2, 2]\nInputGrad: [2, 2]\nWeightGrad: [2, 2]\nBackward: [1]\n",
            ["Backward"],
        ),
        ("Forward: 4\nInputGrad: [2, 2]\nWeightGrad: [2, 2]\n", ["Forward", "4"]),
        ("[1, 2]\n", ["mapping"]),
    ],
)
def test_communicator_errors(tmp_path, text, needles):
    p = tmp_path / "c.yml"
    p.write_text(text)
    with pytest.raises(LibraInputError) as e:
        load_communicator(p)
    msg = str(e.value)
    assert str(p) in msg
    for n in needles:
        assert n in msg


def test_communicator_length_vs_num_dims():
    with pytest.raises(LibraInputError, match=r"3 entries.*4 dimensions") as e:
        load_workload(
            INPUTS / "workload" / "GPT_3.txt",
            INPUTS / "communicator" / "GPT_3_3d.yml",
            4,
        )
    assert "GPT_3_3d.yml" in str(e.value)


def test_check_workload_network_errors():
    w = load_workload(
        INPUTS / "workload" / "GPT_3.txt", INPUTS / "communicator" / "GPT_3_4d.yml"
    )
    net3 = load_network_file(INPUTS / "network" / "3d_network.yml")
    with pytest.raises(LibraInputError, match=r"4 entries.*3 dimensions"):
        check_workload_network(w, net3)
    # 4D network whose dim 3 has only 16 NPUs: WeightGrad asks for 32.
    small = parse_notation("RI(4)_FC(8)_RI(4)_SW(16)")
    with pytest.raises(LibraInputError) as e:
        check_workload_network(w, small)
    msg = str(e.value)
    for n in ("layer 0 (Q1)", "weight_grad", "dimension 3", "32", "16"):
        assert n in msg
    # Entry 0 (built directly, the loaders already refuse it).
    comm = w.communicator.copy()
    comm[2, 0, 1] = 0
    bad = Workload(
        w.name, w.layer_names, w.compute_ns, w.collective, w.size_bytes, comm, "x.txt"
    )
    net4 = load_network_file(INPUTS / "network" / "4d_network.yml")
    with pytest.raises(LibraInputError) as e:
        check_workload_network(bad, net4)
    msg = str(e.value)
    for n in ("x.txt", "layer 2 (V1)", "forward", "dimension 1", "is 0"):
        assert n in msg


# ----------------------------------------------------------------------------- native YAML


def test_native_yaml_fixture_needs_file_for_mlp_forward():
    # mlp.forward (ALLGATHER) has no communicator of its own: without a file it is an error.
    with pytest.raises(LibraInputError) as e:
        load_workload(FIXTURES / "tiny_workload.yaml", num_dims=4)
    msg = str(e.value)
    assert (
        "tiny_workload.yaml" in msg
        and "layers[1] (mlp).forward" in msg
        and "ALLGATHER" in msg
    )


def test_native_yaml_with_communicator_file():
    w = load_workload(
        FIXTURES / "tiny_workload.yaml",
        FIXTURES / "tiny_communicator_4d.yml",
        num_dims=4,
    )
    assert w.name == "tiny_transformer"
    assert w.layer_names == ("attn", "attn", "mlp")  # count: 2 repeats the layer
    np.testing.assert_array_equal(w.compute_ns[:, 0], [9375000, 9375000, 1000])
    np.testing.assert_array_equal(w.collective[0], [1, 0, 1])  # "allreduce" accepted
    np.testing.assert_array_equal(w.collective[2], [3, 2, 4])
    np.testing.assert_array_equal(w.size_bytes[1], [805306368, 0, 452984832])
    np.testing.assert_array_equal(w.communicator[1, 2], [-1, 2, 4, 32])
    np.testing.assert_array_equal(w.communicator[2, 1], [4, -1, 3, -1])
    # Phases with their own communicator keep it; the others take the file's row.
    np.testing.assert_array_equal(w.communicator[0, 0], [4, 4, -1, -1])
    np.testing.assert_array_equal(
        w.communicator[0, 1], [4, 4, -1, -1]
    )  # file InputGrad
    np.testing.assert_array_equal(w.communicator[2, 0], [2, -1, 3, -1])  # file Forward
    check_workload_network(w, load_network_file(INPUTS / "network" / "4d_network.yml"))


def _yaml(tmp_path, text):
    p = tmp_path / "w.yaml"
    p.write_text(text)
    return p


PHASE_NONE = "{compute_ns: 1, collective: NONE}"


def _layer(fwd=PHASE_NONE, ig=PHASE_NONE, wg=PHASE_NONE, extra=""):
    return (
        f"layers:\n  - name: L\n{extra}    forward: {fwd}\n    input_grad: {ig}\n"
        f"    weight_grad: {wg}\n"
    )


@pytest.mark.parametrize(
    "text, needles",
    [
        ("name: x\n", ["'layers'", "missing"]),
        ("layers: []\n", ["layers", "non-empty"]),
        (
            "layers:\n  - name: L\n    forward: {compute_ns: 1, collective: NONE}\n",
            ["'input_grad'", "layers[0] (L)"],
        ),
        (_layer(fwd="{collective: NONE}"), ["layers[0] (L).forward", "'compute_ns'"]),
        (_layer(fwd="{compute_ns: 1}"), ["forward", "'collective'"]),
        (
            _layer(fwd="{compute_ns: 1, collective: ALLREDUCE, communicator: [2, 2]}"),
            ["'size_bytes'", "ALLREDUCE"],
        ),
        (
            _layer(fwd="{compute_ns: 1, collective: ALLREDUCE, size_bytes: 8}"),
            ["forward", "no communicator"],
        ),
        (_layer(fwd="{compute_ns: 1, collective: GATHER}"), ["forward", "'GATHER'"]),
        (
            _layer(fwd="{compute_ns: -1, collective: NONE}"),
            ["forward", "compute_ns", "-1", "negative"],
        ),
        (
            _layer(
                ig="{compute_ns: 1, collective: ALLREDUCE, size_bytes: -8, communicator: [2, 2]}"
            ),
            ["input_grad", "size_bytes", "-8"],
        ),
        (
            _layer(
                wg="{compute_ns: 1, collective: ALLREDUCE, size_bytes: 8, communicator: [2, 0]}"
            ),
            ["weight_grad", "communicator[1]", "0"],
        ),
        (
            _layer(
                wg="{compute_ns: 1, collective: ALLREDUCE, size_bytes: 8, communicator: [2, 2, 2]}"
            ),
            ["weight_grad", "3 entries", "2 dimensions"],
        ),
        (
            _layer(wg="{compute_ns: 1, collective: NONE, sizes: 8}"),
            ["weight_grad", "'sizes'"],
        ),
        (_layer(extra="    count: 0\n"), ["count", "0"]),
        (_layer(extra="    repeat: 2\n"), ["'repeat'"]),
        (
            "layers:\n  - forward: {compute_ns: 1, collective: NONE}\n",
            ["layers[0]", "'name'"],
        ),
        ("model: x\nlayers: []\n", ["'model'"]),
        ("layers:\n  - [1, 2]\n", ["layers[0]", "mapping"]),
    ],
)
def test_native_yaml_errors(tmp_path, text, needles):
    p = _yaml(tmp_path, text)
    with pytest.raises(LibraInputError) as e:
        load_workload(p, num_dims=2)
    msg = str(e.value)
    assert str(p) in msg
    for n in needles:
        assert n in msg


def test_native_yaml_inconsistent_lengths_without_num_dims(tmp_path):
    text = _layer(
        fwd="{compute_ns: 1, collective: ALLREDUCE, size_bytes: 8, communicator: [2, 2]}",
        wg="{compute_ns: 1, collective: ALLREDUCE, size_bytes: 8, communicator: [2, 2, 2]}",
    )
    with pytest.raises(LibraInputError, match=r"weight_grad.*3 entries.*2 dimensions"):
        load_workload(_yaml(tmp_path, text))


def test_native_yaml_all_none_needs_dims(tmp_path):
    p = _yaml(tmp_path, _layer())
    with pytest.raises(LibraInputError, match="communicator length is unknown"):
        load_workload(p)
    w = load_workload(p, num_dims=3)
    np.testing.assert_array_equal(w.communicator, -np.ones((1, 3, 3)))
    assert w.name == "w"
