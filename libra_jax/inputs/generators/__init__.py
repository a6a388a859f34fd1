"""Workloads from a model and parallelism description (``workload.generator``).

Instead of hand-written ASTRA-sim files, a run can describe a model in the field's usual terms
and let the generator derive the layers, their compute times and their collectives. The result
is an ordinary :class:`~libra_jax.inputs.workload.Workload` ([L, 3] compute, collective codes, sizes and
[L, 3, D] communicators), exactly what the importers produce, so the solver, the CLI and the
co-search treat it like an imported one.

Generators (``workload.generator``):

* ``transformer`` -- a decoder-only transformer (GPT-3, Turing-NLG, MSFT-1T, ...), dense, or
  mixture-of-experts when ``model.num_experts > 0`` (``moe`` is the same generator, but requires
  experts);
* ``resnet50`` -- ResNet-50 (He et al. 2016), data parallel;
* ``dlrm`` -- DLRM (Naumov et al. 2019): model-parallel embedding tables, data-parallel MLPs;
* ``serving`` -- LLM inference (prefill, decode, disaggregated KV transfer): not one training
  step but three phases, built by :func:`serving_phases` (``serving`` module) and run by
  ``libra-train`` as a serving job (`libra_jax.studies.serving`).

Inputs come in three blocks (validated here; the message names ``workload.<block>.<key>``):
``workload.model`` (architecture and batch), ``workload.parallel`` (degrees, placement, ZeRO,
recomputation) and ``workload.npu`` (peak TFLOP/s, efficiency, memory). Every key a generator
reads must be given, except those documented as optional below (their default is stated).

What one generated workload stands for: **one training step on one NPU** of the first pipeline
stage. Everything that happens once per micro-batch (compute, tensor-parallel all-reduces,
expert all-to-alls, pipeline sends) is emitted once with its compute time and size multiplied
by the number of micro-batches per step ``M = global_batch / (micro_batch * dp)``: in LIBRA's
no-overlap model the time of M collectives of m bytes on the same communicator equals that of
one collective of M*m bytes (traffic is linear in the size), so this is exact and keeps L small.
With ``M = 1`` (the shipped LIBRA files' setting) sizes are per micro-batch.

Compute time of a line = FLOPs / (``npu.peak_tflops`` * 1e12 * ``npu.efficiency``) in ns.
The shipped LIBRA transformer files imply 60 * 2**40 FLOP/s = 65.97069766656 TFLOP/s at
efficiency 1 (e.g. GPT-3's Q line: 2*16*2048*12288**2/16 FLOP / 9375000 ns); their DLRM file
implies 60 TFLOP/s (decimal).

Modules: ``common`` (the NPU, the parallel degrees and their placement, the line builder and
the check of a generated workload, shared by every generator), ``transformer`` (dense and
mixture-of-experts), ``resnet``, ``dlrm``; :func:`generate` (here) picks one.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from libra_jax.inputs.generators.common import (
    MAX_INT,
    MAX_REAL,
    NONE3,
    RECOMPUTE,
    ZERO_STAGES,
    Npu,
    Parallel,
    Placement,
    check_generated,
    default_placement,
    group_comms,
    parallel_communicators,
    parse_placement,
)
from libra_jax.inputs.generators.dlrm import dlrm_workload
from libra_jax.inputs.generators.resnet import resnet50_layers, resnet50_workload
from libra_jax.inputs.generators.serving import (
    PHASE_NAMES,
    ServingModel,
    ServingParallel,
    ServingPhases,
    serving_phases,
)
from libra_jax.inputs.generators.transformer import (
    CONVENTIONS,
    Transformer,
    check_transformer_parallel,
    transformer_lines,
    transformer_stage_params,
    transformer_workload,
)
from libra_jax.inputs.limits import LIMITS, as_int, as_list
from libra_jax.inputs.workload import Workload
from libra_jax.types import LibraInputError, show

__all__ = [
    "CONVENTIONS", "GENERATORS", "MAX_INT", "MAX_REAL", "NONE3", "RECOMPUTE", "ZERO_STAGES",
    "Npu", "PHASE_NAMES", "Parallel", "Placement", "ServingModel", "ServingParallel",
    "ServingPhases", "serving_phases", "Transformer", "check_generated",
    "check_transformer_parallel", "default_placement", "dlrm_workload", "generate",
    "group_comms", "parallel_communicators", "parse_placement", "resnet50_layers",
    "resnet50_workload", "transformer_lines", "transformer_stage_params",
    "transformer_workload",
]

GENERATORS = ("transformer", "moe", "resnet50", "dlrm", "serving")


def generate(generator: str, model: Mapping[str, Any] | None, parallel: Mapping[str, Any] | None,
             npu: Mapping[str, Any] | None, npus: Sequence[int],
             prefix: str = "workload") -> Workload:
    """Builds the workload a config describes (``workload.generator`` and its blocks).

    Args:
      generator: one of :data:`GENERATORS`.
      model, parallel, npu: the ``workload.model`` / ``.parallel`` / ``.npu`` blocks.
      npus: [D] NPUs per network dimension (communicators are laid on them).
      prefix: config key prefix for messages.

    Raises:
      LibraInputError: unknown generator, missing / unknown / bad keys, degrees that do not
        multiply to the NPU count or do not divide the model.
    """
    npus = [as_int(n, f"npus[{i}]", 1, LIMITS.max_npus_per_dim)
            for i, n in enumerate(as_list(npus, "npus", what="a list of NPU counts"))]
    if not isinstance(generator, str) or generator not in GENERATORS:
        raise LibraInputError(
            f"{prefix}.generator = {show(generator)}: unknown generator; expected one of "
            f"{', '.join(GENERATORS)}."
        )
    if generator == "serving":
        raise LibraInputError(
            f"{prefix}.generator = serving describes an inference fleet (prefill, decode and "
            "KV-transfer phases), not one training step: libra-train runs it "
            "(objective=serving_throughput, perf_per_cost or perf_per_watt on tokens/s); "
            "this command takes a training workload.")
    chip = Npu.parse(npu, f"{prefix}.npu")
    par = Parallel.parse(parallel, npus, f"{prefix}.parallel")
    if generator in ("transformer", "moe"):
        m = Transformer.parse(model, f"{prefix}.model")
        if generator == "moe" and m.num_experts == 0:
            raise LibraInputError(
                f"{prefix}.generator = moe needs {prefix}.model.num_experts > 0 (got 0)."
            )
        check_transformer_parallel(m, par, prefix)
        wl = transformer_workload(m, par, chip, len(npus), f"generator {generator}")
    elif generator == "resnet50":
        wl = resnet50_workload(model, par, chip, len(npus), prefix)
    else:
        wl = dlrm_workload(model, par, chip, len(npus), prefix)
    check_generated(wl, prefix)
    return wl
