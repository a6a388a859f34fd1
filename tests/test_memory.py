"""Per-NPU memory: GPT-3 175B by hand, ZeRO stages, recomputation, 1F1B in-flight, errors."""

from __future__ import annotations

import dataclasses
import pathlib

import pytest
import yaml

from libra_jax.inputs.generators import Npu, Parallel, Transformer
from libra_jax.model.memory import check_fits, transformer_memory
from libra_jax.types import LibraInputError

REPO = pathlib.Path(__file__).resolve().parents[1]
GPT3 = yaml.safe_load((REPO / "conf" / "dnn" / "gpt3_175b.yaml").read_text())
NPUS = [4, 8, 4, 32]


def _gpt3(**parallel):
    m = Transformer.parse(GPT3["model"])
    par = Parallel.parse({**GPT3["parallel"], **parallel}, NPUS)
    return m, par, Npu.parse(GPT3["npu"])


def test_gpt3_hand_calculation():
    """GPT-3 175B, TP 16, PP 1, DP 256, ZeRO-1, selective recomputation, micro-batch 1."""
    m, par, npu = _gpt3()
    est = transformer_memory(m, par, npu)
    # Parameters on one NPU: (96 blocks * 12 h^2 + vocab * h) / TP
    #   = (96 * 12 * 150,994,944 + 51,200 * 12,288) / 16
    #   = (173,946,175,488 + 629,145,600) / 16 = 10,910,957,568
    params = 10_910_957_568
    assert (96 * 12 * 12288**2 + 51200 * 12288) // 16 == params
    assert est.weights_bytes == 2 * params == 21_821_915_136  # 21.82 GB (fp16)
    assert est.gradients_bytes == 2 * params  # 21.82 GB
    assert est.optimizer_bytes == 12 * params / 256 == 511_451_136  # Adam 12 B, ZeRO-1 / DP
    # Korthikanti, selective: s b h (10 + 24 / t) = 2048 * 1 * 12288 * (10 + 1.5) per block
    #   = 289,406,976 bytes x 96 blocks x min(PP=1, M=6) = 27,783,069,696
    assert est.activations_bytes == 2048 * 12288 * 11.5 * 96 == 27_783_069_696
    assert est.total_bytes == 71_938_351_104  # 71.94 GB <= 80 GB
    assert est.fits
    assert est.describe() == ("71.94 GB of 80 GB (weights 21.82, gradients 21.82, optimizer "
                              "0.51, activations 27.78)")


def test_gpt3_without_recomputation_does_not_fit():
    m, par, npu = _gpt3(recompute="none")
    est = transformer_memory(m, par, npu)
    # + 5 a s / (h t) = 5 * 96 * 2048 / (12288 * 16) = 5 -> s b h * 16.5 per block
    assert est.activations_bytes == 2048 * 12288 * 16.5 * 96 == 39_862_665_216
    assert not est.fits and est.total_bytes / 1e9 == pytest.approx(84.018, abs=1e-3)
    with pytest.raises(LibraInputError, match=r"does not fit.*84\.02 GB of 80 GB \(weights "
                       r"21\.82, gradients 21\.82, optimizer 0\.51, activations 39\.86\)"):
        check_fits(est, "workload")


def test_full_recompute_zero_stages_and_in_flight():
    m, par, npu = _gpt3(recompute="full")
    assert transformer_memory(m, par, npu).activations_bytes == 2 * 2048 * 12288 * 96
    params = 10_910_957_568
    for stage, (w, g, o) in {0: (2, 2, 12), 1: (2, 2, 12 / 256), 2: (2, 2 / 256, 12 / 256),
                             3: (2 / 256, 2 / 256, 12 / 256)}.items():
        est = transformer_memory(m, dataclasses.replace(par, zero_stage=stage), npu)
        assert est.weights_bytes == pytest.approx(w * params, rel=1e-15)
        assert est.gradients_bytes == pytest.approx(g * params, rel=1e-15)
        assert est.optimizer_bytes == pytest.approx(o * params, rel=1e-15)
    # 1F1B: the first of 8 stages holds min(PP, M) = min(8, 1536 / 64) = 8 micro-batches of
    # its 12 blocks (full recomputation keeps 2 s b h per block).
    m, par8, npu = _gpt3(tp=8, pp=8, dp=64, recompute="full")
    assert transformer_memory(m, par8, npu).activations_bytes == 2 * 2048 * 12288 * 12 * 8


def test_moe_experts_shard_over_ep():
    moe = yaml.safe_load((REPO / "conf" / "dnn" / "moe_gpt_64e.yaml").read_text())
    m = Transformer.parse(moe["model"])
    par = Parallel.parse({**moe["parallel"], "zero_stage": 0}, NPUS)
    est = transformer_memory(m, par, Npu.parse(moe["npu"]))
    h, f = 2048, 8192
    dense = (24 * 4 * h * h + 12 * 2 * h * f + 51200 * h) / 4
    expert = 12 * (64 // 64) * 2 * h * f / 4
    assert est.weights_bytes == pytest.approx(2 * (dense + expert), rel=1e-15)


def test_memory_not_checked_without_capacity():
    m, par, _ = _gpt3(recompute="none")
    est = transformer_memory(m, par, Npu(peak_tflops=100, efficiency=0.5, memory_gb=None))
    assert est.fits and est.capacity_bytes is None
    check_fits(est, "workload")
