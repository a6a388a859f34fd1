"""The ``dlrm`` generator: DLRM (Naumov et al. 2019), model-parallel embedding tables and
data-parallel MLPs."""

from __future__ import annotations

from typing import Any, Mapping

from libra_jax.inputs.generators.common import (
    Block,
    Lines,
    Npu,
    Parallel,
    group_comms,
    micro_batches,
    read_int,
    read_int_list,
)
from libra_jax.inputs.limits import as_str
from libra_jax.inputs.workload import Workload
from libra_jax.types import Collective, LibraInputError

_N, _AR, _A2A = int(Collective.NONE), int(Collective.ALLREDUCE), int(Collective.ALLTOALL)


def dlrm_workload(model: Mapping[str, Any] | None, par: Parallel, npu: Npu, num_dims: int,
                  prefix: str = "workload") -> Workload:
    """DLRM (Naumov et al. 2019): embedding tables spread over all NPUs (model parallel),
    MLPs data parallel. Per NPU with local batch b, T tables of dimension d, e bytes:

    * ``Embedding``: all-to-all of b*T*d*e bytes forward (pooled lookups to their samples'
      NPUs) and on the input gradient (back to the tables); forward compute = the looked-up
      bytes / ``npu.memory_bw_gbps``; the backward phases have no compute of their own here
      (the shipped file's 300 ns and 10 ns cannot be derived from the model and are tiny).
    * ``MLP_Bottom_i`` / ``MLP_Top_i``: 2*b*in*out FLOPs per phase; the top MLP's input is
      the concatenation of the bottom output and the T pooled embeddings ((T + 1) * d, as in
      the shipped file) -- ``bottom_mlp[-1]`` must equal d.
    * One all-reduce of every MLP weight (e bytes each, no biases) over the DP group on the
      embedding line's weight gradient.
    """
    b = Block(model, f"{prefix}.model", ("name", "micro_batch", "global_batch",
                                          "bytes_per_element", "num_tables", "embedding_dim",
                                          "bottom_mlp", "top_mlp"))
    name = as_str(b.get("name"), b.key("name"))
    mbatch = read_int(b.get("micro_batch"), b.key("micro_batch"))
    gbatch = read_int(b.get("global_batch"), b.key("global_batch"))
    e = read_int(b.get("bytes_per_element"), b.key("bytes_per_element"))
    tables = read_int(b.get("num_tables"), b.key("num_tables"))
    dim = read_int(b.get("embedding_dim"), b.key("embedding_dim"))
    bottom = read_int_list(b.get("bottom_mlp"), b.key("bottom_mlp"))
    top = read_int_list(b.get("top_mlp"), b.key("top_mlp"))
    if len(bottom) < 2 or len(top) < 1:
        raise LibraInputError(
            f"{b.key('bottom_mlp')} needs the input width and at least one layer width; "
            f"{b.key('top_mlp')} at least one layer width (its input is (num_tables + 1) * "
            "embedding_dim)."
        )
    if bottom[-1] != dim:
        raise LibraInputError(
            f"{b.key('bottom_mlp')}[-1] = {bottom[-1]} must equal {b.key('embedding_dim')} = "
            f"{dim} (the bottom MLP's output joins the embeddings)."
        )
    if par.tp != 1 or par.pp != 1 or par.ep != 1 or par.zero_stage > 1:
        raise LibraInputError(
            f"{prefix}.parallel: the dlrm generator has tables spread over all NPUs and data-"
            f"parallel MLPs; got tp = {par.tp}, pp = {par.pp}, ep = {par.ep}, zero_stage = "
            f"{par.zero_stage} (use 1, 1, 1, 0 or 1)."
        )
    if npu.memory_bw_gbps is None:
        raise LibraInputError(
            f"{prefix}.npu.memory_bw_gbps is missing (or null); the dlrm generator times the "
            "embedding lookups with it."
        )
    mb = micro_batches(gbatch, mbatch, par.dp, prefix)
    ns = 1.0 / npu.flops_per_ns
    dp_c = "dp"
    lookup = mbatch * tables * dim * e * mb
    lines = Lines(mb)
    t_lookup = lookup / npu.memory_bw_gbps
    lines.add("Embedding", (t_lookup, 0.0, 0.0),
              ((_A2A, lookup, dp_c), (_A2A, lookup, dp_c), (_N, 0, None)))
    params = 0
    widths = {"MLP_Bottom": bottom, "MLP_Top": [(tables + 1) * dim, *top]}
    for stem, w in widths.items():
        for i, (a, c) in enumerate(zip(w[:-1], w[1:])):
            lines.add(f"{stem}_{i}", (2 * mbatch * a * c * mb * ns,) * 3)
            params += a * c
    lines.set_phase(0, 2, _AR, params * e, dp_c)
    return lines.workload(str(name), "generator dlrm", group_comms(par.placement), num_dims)
