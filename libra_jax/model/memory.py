"""Memory capacity per NPU of a generated transformer mapping (host-side arithmetic).

For one NPU of the first pipeline stage (the one holding the most activations in 1F1B), with
P parameters on the NPU (``generators.transformer_stage_params``: weights only, split by TP
and PP; experts also by EP), e bytes per element, DP data-parallel degree:

* weights    P * e                      (/ DP with ZeRO stage 3)
* gradients  P * e                      (/ DP with ZeRO stage >= 2)
* optimizer  P * optimizer_bytes        (/ DP with ZeRO stage >= 1); mixed-precision Adam keeps
  an fp32 master copy, momentum and variance: 4 + 4 + 4 = 12 bytes per parameter (Rajbhandari
  et al. 2020, ZeRO, Sec. 3.1: 2 + 2 + 12 = 16 bytes per parameter in all). Expert parameters
  are replicated over DP / EP only, so ZeRO divides them by DP / EP.
* activations per block and micro-batch (Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", Sec. 4, 16-bit activations, tensor parallel
  without sequence parallelism; s sequence, b micro-batch, h hidden, a heads, t = TP):

      none:       s b h (10 + 24 / t + 5 a s / (h t))   bytes   (their Eq. 2)
      selective:  s b h (10 + 24 / t)                     (attention scores recomputed)
      full:       2 s b h                                 (only each block's input is kept)

  times the blocks of the stage (layers / PP) times the micro-batches in flight on the first
  stage of a 1F1B schedule, min(PP, M) (Narayanan et al. 2021). Embedding / LM-head
  activations, the MoE router's buffers and framework workspace are not counted.

A mapping whose total exceeds ``npu.memory_gb`` does not fit: :func:`check_fits` raises
:class:`~libra_jax.types.LibraInputError` with every component in GB (1 GB = 1e9 bytes); the
co-search drops such mappings and counts them.
"""

from __future__ import annotations

import dataclasses

from libra_jax.inputs.generators import (
    Npu,
    Parallel,
    Transformer,
    transformer_stage_params,
)
from libra_jax.types import LibraInputError


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per NPU of each component (see the module docstring)."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float | None  # npu.memory_gb * 1e9, None when not given

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
                + self.activations_bytes)

    @property
    def fits(self) -> bool:
        return self.capacity_bytes is None or self.total_bytes <= self.capacity_bytes

    def describe(self) -> str:
        """E.g. ``71.97 GB of 80 GB (weights 21.82, gradients 21.82, optimizer 0.51,
        activations 27.78)``."""
        cap = "" if self.capacity_bytes is None else f" of {self.capacity_bytes / 1e9:g} GB"
        return (f"{self.total_bytes / 1e9:.2f} GB{cap} (weights {self.weights_bytes / 1e9:.2f}, "
                f"gradients {self.gradients_bytes / 1e9:.2f}, optimizer "
                f"{self.optimizer_bytes / 1e9:.2f}, activations "
                f"{self.activations_bytes / 1e9:.2f})")


def activation_bytes_per_block(m: Transformer, tp: int, recompute: str) -> float:
    """Korthikanti et al. 2022 activation memory of one block and one micro-batch (bytes)."""
    s, b, h, a = m.seq_len, m.micro_batch, m.hidden, m.heads
    if recompute == "full":
        return 2.0 * s * b * h
    per = 10.0 + 24.0 / tp
    if recompute == "none":
        per += 5.0 * a * s / (h * tp)
    return s * b * h * per


def transformer_memory(m: Transformer, par: Parallel, npu: Npu) -> MemoryEstimate:
    """Per-NPU memory of a transformer mapping (first pipeline stage)."""
    params = transformer_stage_params(m, par)
    edp = par.dp // par.ep
    e = m.bytes_per_element
    # ZeRO divides a state by the number of replicas of that state.
    dense, expert = params["dense"], params["expert"]

    def sharded(bytes_per_param: float, stage: int) -> float:
        if par.zero_stage >= stage:
            return bytes_per_param * (dense / par.dp + expert / edp)
        return bytes_per_param * (dense + expert)

    micro_batches = m.global_batch // (m.micro_batch * par.dp)
    in_flight = min(par.pp, micro_batches)
    act = activation_bytes_per_block(m, par.tp, par.recompute) * (m.layers // par.pp) * in_flight
    return MemoryEstimate(
        weights_bytes=sharded(e, 3),
        gradients_bytes=sharded(e, 2),
        optimizer_bytes=sharded(m.optimizer_bytes_per_param, 1),
        activations_bytes=act,
        capacity_bytes=None if npu.memory_gb is None else npu.memory_gb * 1e9,
    )


def check_fits(est: MemoryEstimate, where: str) -> None:
    """Raises when the mapping does not fit in the NPU's memory, with every component."""
    if not est.fits:
        raise LibraInputError(
            f"{where}: the mapping does not fit in NPU memory: needs {est.describe()}. "
            "Raise workload.npu.memory_gb, use ZeRO (workload.parallel.zero_stage), "
            "recomputation (workload.parallel.recompute), a smaller micro-batch, or more "
            "tensor / pipeline parallelism."
        )
