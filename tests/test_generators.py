"""Generated workloads: the cross-check against the shipped LIBRA files, Megatron / pipeline /
ZeRO / MoE structure, SENDRECV, input errors, and a CLI round trip."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir

from libra_jax.cli import config
from libra_jax.inputs.generators import generate, resnet50_layers
from libra_jax.inputs.topology import load_network_file
from libra_jax.inputs.workload import load_workload
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.problem import ConstraintSpec, build_problem
from libra_jax.types import Collective as C
from libra_jax.types import LibraInputError

REPO = pathlib.Path(__file__).resolve().parents[1]
INPUTS = REPO / "libra_jax" / "data" / "libra_inputs"
MODELS = REPO / "conf" / "dnn"
NET4 = load_network_file(INPUTS / "network" / "4d_network.yml")
OPTIMA = json.loads((REPO / "tests" / "fixtures" / "libra_optima.json").read_text())
#: The shipped files round compute to whole ns; generated lines are within half of that.
COMPUTE_TOL_NS = 0.5


def _model(name: str) -> dict:
    return yaml.safe_load((MODELS / f"{name}.yaml").read_text())


def _generate(name: str, npus=(4, 8, 4, 32), **overrides) -> object:
    m = _model(name)
    for block, values in overrides.items():
        m[block] = {**m[block], **values}
    return generate(m["generator"], m["model"], m["parallel"], m["npu"], list(npus))


CROSS = [  # model preset, shipped file, its 4D communicator
    ("gpt3_libra", "GPT_3", "GPT_3_4d"),
    ("msft_1t_libra", "MSFT_1T", "MSFT_1T_4d"),
    ("turing_nlg_libra", "Turing_NLG", "Turing_NLG_4D"),
]


def test_libra_rate_is_what_the_files_imply():
    # GPT-3's Q line: 2 b s h^2 / TP FLOPs at 60 * 2^40 FLOP/s (= 65.97069766656 TFLOP/s).
    flops = 2 * 16 * 2048 * 12288**2 / 16
    assert flops / (60 * 2**40) * 1e9 == 9375000.0
    assert 60 * 2**40 == 65.97069766656e12
    # QK : Q = s / (2 h) (the files count b s^2 h / TP for QK and for softmax).
    assert 9375000 / 781250 == 2 * 12288 / 2048


@pytest.mark.parametrize("preset,file,comm", CROSS)
def test_cross_check_shipped_transformers(preset, file, comm):
    gen = _generate(preset)
    ref = load_workload(INPUTS / "workload" / f"{file}.txt",
                        INPUTS / "communicator" / f"{comm}.yml")
    assert gen.layer_names == ref.layer_names
    np.testing.assert_array_equal(gen.collective, ref.collective)
    np.testing.assert_array_equal(gen.size_bytes, ref.size_bytes)  # exactly
    assert np.abs(gen.compute_ns - ref.compute_ns).max() <= COMPUTE_TOL_NS
    # Communicators agree wherever something is communicated (the file's rows also fill the
    # NONE phases, which move nothing).
    talk = ref.collective != C.NONE
    np.testing.assert_array_equal(gen.communicator[talk], ref.communicator[talk])
    # Hence the same problem: identical traffic, compute within the rounding.
    spec = ConstraintSpec(total_bw_gbps=500.0)
    pg, pr = build_problem(NET4, gen, None, spec), build_problem(NET4, ref, None, spec)
    np.testing.assert_array_equal(pg.traffic_gb, pr.traffic_gb)
    np.testing.assert_array_equal(pg.weight, pr.weight)
    assert abs(float(pg.compute_s) - float(pr.compute_s)) * 1e9 <= COMPUTE_TOL_NS * ref.compute_ns.size


def test_cross_check_gpt3_hand_numbers():
    w = _generate("gpt3_libra")
    b, s, h, tp = 16, 2048, 12288, 16
    assert w.size_bytes[5, 0] == b * s * h * 2 == 805306368  # concat forward all-reduce
    assert w.size_bytes[5, 1] == b * s * h * 2 / tp == 50331648  # concat input-grad all-gather
    assert w.size_bytes[0, 2] == 2 * 12 * h * h / tp * 2 == 452984832  # all weights, 2 blocks


def test_cross_check_dlrm():
    gen = _generate("dlrm")
    ref = load_workload(INPUTS / "workload" / "DLRM.txt",
                        INPUTS / "communicator" / "ResNet_50_4d.yml")
    assert gen.layer_names == ref.layer_names
    np.testing.assert_array_equal(gen.collective, ref.collective)
    np.testing.assert_array_equal(gen.size_bytes, ref.size_bytes)
    np.testing.assert_allclose(gen.compute_ns[1:], ref.compute_ns[1:], atol=COMPUTE_TOL_NS)
    assert abs(gen.compute_ns[0, 0] - ref.compute_ns[0, 0]) <= 0.6  # 4194304 B / 10 GB/s
    # Not derivable: the file's embedding backward times (300 ns, 10 ns); 0 here.
    np.testing.assert_array_equal(ref.compute_ns[0, 1:], [300, 10])
    np.testing.assert_array_equal(gen.compute_ns[0, 1:], [0, 0])


def test_cross_check_resnet50_collective():
    gen = _generate("resnet50")
    ref = load_workload(INPUTS / "workload" / "ResNet_50.txt",
                        INPUTS / "communicator" / "ResNet_50_4d.yml")
    assert gen.layer_names == ref.layer_names
    np.testing.assert_array_equal(gen.collective, ref.collective)
    np.testing.assert_array_equal(gen.size_bytes, ref.size_bytes)
    assert sum(ci * co * k * k for _, ci, co, k, _, _ in resnet50_layers()) == 25502912
    np.testing.assert_array_equal(gen.communicator[0, 2], [4, 8, 4, 32])


def _lines(w, prefix):
    return [i for i, n in enumerate(w.layer_names) if n.startswith(prefix)]


def test_megatron_block_collectives():
    w = _generate("gpt3_175b", model={"layers": 4, "vocab_size": 0},
                  parallel={"recompute": "none"})
    fwd_ar = (w.collective[:, 0] == C.ALLREDUCE).sum()
    ig_ar = (w.collective[:, 1] == C.ALLREDUCE).sum()
    assert fwd_ar == 2 * 4 and ig_ar == 2 * 4  # two forward, two backward per block
    assert not (w.collective == C.ALLGATHER).any()  # megatron convention: no extra gather
    # Micro-batches per step M = 1536 / (1 * 256) = 6: sizes and compute are per step.
    assert w.size_bytes[_lines(w, "concat")[0], 0] == 6 * 1 * 2048 * 12288 * 2
    np.testing.assert_array_equal(w.communicator[_lines(w, "concat")[0], 0], [4, 4, -1, -1])
    np.testing.assert_array_equal(w.communicator[0, 2], [-1, 2, 4, 32])


def test_pipeline_p2p_and_bubble():
    w = _generate("gpt3_175b", model={"vocab_size": 0},
                  parallel={"tp": 8, "pp": 8, "dp": 64, "recompute": "none"})
    m = 1536 // 64
    p2p = w.layer_names.index("pipeline_p2p")
    np.testing.assert_array_equal(w.collective[p2p, :2], [C.SENDRECV, C.SENDRECV])
    assert w.size_bytes[p2p, 0] == m * 2048 * 12288 * 2
    # TP 8 fills RI4 x FC2, PP 8 takes FC4 x RI2, DP the rest.
    np.testing.assert_array_equal(w.communicator[p2p, 0], [-1, 4, 2, -1])
    bubble = w.layer_names.index("pipeline_bubble")
    stage = w.compute_ns[:bubble].sum(axis=0)
    np.testing.assert_allclose(w.compute_ns[bubble], (8 - 1) / m * stage, rtol=1e-12)
    assert sum(n[:1] == "Q" and n[1:].isdigit() for n in w.layer_names) == 96 // 8


def test_zero_and_recompute_lines():
    w2 = _generate("gpt3_175b", parallel={"zero_stage": 2})
    assert w2.collective[0, 2] == C.REDUCESCATTER
    ag = w2.layer_names.index("zero2_param_allgather")
    assert w2.size_bytes[ag, 2] * 256 == w2.size_bytes[0, 2]  # the shard gathers back
    w3 = _generate("gpt3_175b", parallel={"zero_stage": 3})
    ag3 = w3.layer_names.index("zero3_param_allgather")
    np.testing.assert_array_equal(w3.collective[ag3, :2], [C.ALLGATHER, C.ALLGATHER])
    wf = _generate("gpt3_175b", model={"layers": 2}, parallel={"recompute": "full"})
    r = wf.layer_names.index("recompute1")
    block = slice(wf.layer_names.index("Q1"), wf.layer_names.index("layerNorm1") + 1)
    assert wf.compute_ns[r, 1] == pytest.approx(wf.compute_ns[block, 0].sum(), rel=1e-12)
    assert wf.size_bytes[r, 1] == 2 * wf.size_bytes[wf.layer_names.index("concat1"), 0]


def test_moe_all_to_all_over_ep_group():
    w = _generate("moe_gpt_64e")
    routers = _lines(w, "router")
    assert len(routers) == 24 // 2  # every second block
    r = routers[0]
    np.testing.assert_array_equal(w.collective[r, :2], [C.ALLTOALL, C.ALLTOALL])
    # TP 4 = RI4; DP 1024 = FC8 x RI4 x SW32, of which EP 64 = FC8 x RI4 x SW2.
    np.testing.assert_array_equal(w.communicator[r, 0], [-1, 8, 4, 2])
    c = _lines(w, "combine")[0]
    assert w.collective[c, 2] == C.ALLREDUCE  # expert gradients over DP / EP = SW16
    np.testing.assert_array_equal(w.communicator[c, 2], [-1, -1, -1, 16])
    m = _model("moe_gpt_64e")
    with pytest.raises(LibraInputError, match="moe needs workload.model.num_experts > 0"):
        generate("moe", {**m["model"], "num_experts": 0}, m["parallel"], m["npu"], [4, 8, 4, 32])
    dense = generate("transformer", {**m["model"], "num_experts": 0}, {**m["parallel"], "ep": 1},
                     m["npu"], [4, 8, 4, 32])
    assert not (dense.collective == C.ALLTOALL).any()


def test_sendrecv_traffic_and_formats(tmp_path):
    t = np.asarray(traffic_bytes(np.array([C.SENDRECV]), np.array([100.0]),
                                 np.array([[2, -1, 4]])))
    np.testing.assert_array_equal(t, [[100.0, 0.0, 100.0]])
    txt = tmp_path / "w.txt"
    txt.write_text("L -1 1 SENDRECV 10 1 NONE 0 1 NONE 0 10\n")
    comm = INPUTS / "communicator" / "GPT_3_4d.yml"
    with pytest.raises(LibraInputError, match="SENDRECV"):
        load_workload(txt, comm)
    yml = tmp_path / "w.yaml"
    yml.write_text("layers:\n  - name: L\n    forward: {compute_ns: 1, collective: SENDRECV, "
                   "size_bytes: 10, communicator: [2, -1, -1, -1]}\n"
                   "    input_grad: {compute_ns: 1, collective: NONE}\n"
                   "    weight_grad: {compute_ns: 1, collective: NONE}\n")
    assert load_workload(yml).collective[0, 0] == C.SENDRECV


@pytest.mark.parametrize("block,change,match", [
    ("model", {"layers": None}, r"workload\.model\.layers is missing"),
    ("model", {"typo": 1}, r"workload\.model\.typo: unknown key"),
    ("model", {"convention": "x"}, r"workload\.model\.convention = 'x'"),
    ("parallel", {"tp": 32, "dp": 256}, r"tp \* pp \* dp = 32 \* 1 \* 256"),
    ("parallel", {"tp": 64, "dp": 64}, r"workload\.parallel\.tp = 64 does not divide"),
    ("parallel", {"zero_stage": 4}, r"workload\.parallel\.zero_stage = 4"),
    ("model", {"global_batch": 1000}, r"workload\.model\.global_batch = 1000"),
    ("npu", {"efficiency": 1.5}, r"workload\.npu\.efficiency = 1\.5"),
    ("parallel", {"placement": {"tp": [4, 4, 1, 1], "pp": [1, 1, 1, 1],
                                "dp": [1, 2, 4, 16]}}, r"dimension 3 has 32 NPUs"),
])
def test_bad_inputs_name_the_key(block, change, match):
    m = _model("gpt3_175b")
    m[block] = {**m[block], **change}
    with pytest.raises(LibraInputError, match=match):
        generate(m["generator"], m["model"], m["parallel"], m["npu"], [4, 8, 4, 32])


def test_unknown_generator_and_file_conflict():
    with pytest.raises(LibraInputError, match="workload.generator = 'bert'"):
        generate("bert", {}, {}, {}, [4])
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["conf=gpt3_4d", "dnn=gpt3_libra"])
    with pytest.raises(LibraInputError, match="workload.file=null"):
        config.to_inputs(cfg)


def test_cli_generated_workload_round_trip(tmp_path):
    """The CLI with a generated GPT-3 gives the shipped file's exact optimum (4D, 500 GB/s)."""
    run_dir = tmp_path / "run"
    env = dict(os.environ, HYDRA_FULL_ERROR="0", PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "libra_jax.train", "conf=gpt3_4d", "workload.file=null",
         "workload.communicator_file=null", "dnn=gpt3_libra", "workload.generator=transformer",
         f"hydra.run.dir={run_dir}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "ok" and result["workload"]["name"] == "GPT_3"
    assert result["workload"]["file"] is None
    case = next(c for c in OPTIMA["cases"] if (c["workload"], c["network"], c["constraints"],
                                               c["objective"]) == ("GPT_3", "4d",
                                                                   "total_bw_500gbps", "perf"))
    # Compute differs from the file by the rounding of 18 lines (< 9 ns of 7.2e8 ns).
    assert result["step_time_ns"] == pytest.approx(case["step_time_ns"], rel=1e-7)
    np.testing.assert_allclose(result["bandwidth_gbps"], case["bandwidth_gbps"], rtol=1e-5)
