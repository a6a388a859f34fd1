"""Step-time models beyond LIBRA's, written as general model rows (`problem.ModelRows`).

Two independent choices (README "Beyond LIBRA's model"):

* the **collective model** (``model``): ``libra`` -- a collective takes its slowest
  dimension's traffic / bandwidth (Won et al. 2024); ``pipelined`` -- latency- and
  chunk-aware, validated against ASTRA-sim (`pipelined.py`), with a ``schedule`` across
  dimensions (``pipelined`` | ``sequential`` | ``balanced``) and ``chunks`` per collective;
* the **training loop** (``training_loop``):

  - ``no_overlap`` (LIBRA's): step = all compute + all collectives, one after another;
  - ``dp_overlap``: the weight-gradient collective of a layer starts when that layer's
    weight-gradient compute ends and runs while the backward pass goes on; those
    collectives queue on the network one at a time, in the order they are issued.
    Forward and input-gradient collectives stay on the critical path (the next layer
    needs their result). The step is the critical path:
    ``F + max(B, E)`` with ``F`` the forward pass, ``B`` the backward compute and
    input-gradient collectives, and ``E`` when the last queued collective finishes
    (``E_q = max(ready_q, E_{q-1}) + T_q`` for the layers in backward order);
  - ``full_overlap``: as ``dp_overlap``, and every forward and input-gradient collective
    is also hidden behind its own layer's compute (``max(compute, comm)`` per layer and
    phase), as with micro-batch interleaving or chunked overlap of tensor-parallel
    collectives; the weight-gradient queue is unchanged.

Every piece is a sum or maximum of terms c + a / bw (a >= 0), so the step time stays
convex in the bandwidths: the solver, its certificate and the sensitivities apply
unchanged. With ``model=libra`` and ``training_loop=no_overlap`` no rows are built (the
LIBRA epigraph path is used, bit for bit the reference model).

Units: collective sizes in bytes, times in ns on input; rows are in s and GB (GB / (GB/s)
= s) as `problem.ModelRows` wants them.

The module is split by job (this one re-exports every name): `timing_spec.py` the
`TimingModel` and its checks, `timing_rows.py` the builders of timed problems (pieces, model
rows, `build_timed_problem`, the size gradient), `timing_exact.py` the exact step time and the
collective breakdown.
"""

from __future__ import annotations

from libra_jax.model.timing_exact import collective_times_ns, loop_step_time_ns, step_time_ns
from libra_jax.model.timing_rows import (
    WORK_ROW,
    build_timed_problem,
    collective_pieces,
    dimension_work,
    model_rows,
    size_gradient_ns_per_byte,
    unique_collectives,
)
from libra_jax.model.timing_spec import HOPS, MODELS, TRAINING_LOOPS, TimingModel, check_timing

__all__ = [
    "HOPS",
    "MODELS",
    "TRAINING_LOOPS",
    "WORK_ROW",
    "TimingModel",
    "build_timed_problem",
    "check_timing",
    "collective_pieces",
    "collective_times_ns",
    "dimension_work",
    "loop_step_time_ns",
    "model_rows",
    "size_gradient_ns_per_byte",
    "step_time_ns",
    "unique_collectives",
]
