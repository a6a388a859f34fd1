"""The ``transformer`` and ``moe`` generators: a decoder-only transformer (Megatron-LM
layout; GPT-3, Turing-NLG, MSFT-1T, ...), dense, or mixture-of-experts when
``model.num_experts > 0``. One training step of one NPU of the first pipeline stage (the
package docstring says what that stands for).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from libra_jax.inputs.generators.common import (
    NONE3,
    Block,
    Lines,
    Npu,
    Parallel,
    group_comms,
    micro_batches,
    read_int,
    read_pos,
)
from libra_jax.inputs.limits import LIMITS
from libra_jax.inputs.workload import Workload
from libra_jax.types import Collective, LibraInputError, show

CONVENTIONS = ("libra", "megatron")
_N, _AR, _RS, _AG, _A2A, _P2P = (
    int(Collective.NONE), int(Collective.ALLREDUCE), int(Collective.REDUCESCATTER),
    int(Collective.ALLGATHER), int(Collective.ALLTOALL), int(Collective.SENDRECV),
)


@dataclasses.dataclass(frozen=True)
class Transformer:
    """A decoder-only transformer (Megatron-LM layout). ``ffn_hidden`` is usually 4*hidden;
    ``vocab_size`` 0 leaves out the embedding and LM head (as the LIBRA files do);
    ``convention``: ``libra`` reproduces the shipped LIBRA files (the QK and softmax lines
    count b*s^2*h/TP FLOPs each, and the concat line's input gradient all-gathers b*s*h/TP
    elements), ``megatron`` counts 2*b*s^2*h/TP for each (Narayanan et al. 2021, Eq. 2: the
    forward pass has 24bsh^2 + 4bs^2h FLOPs per layer) and has only Megatron's two backward
    all-reduces. MoE (optional, default dense): ``num_experts`` experts of ``ffn_hidden``,
    ``top_k`` routed per token, every ``moe_every``-th block."""

    name: str
    layers: int
    hidden: int
    heads: int
    ffn_hidden: int
    seq_len: int
    vocab_size: int
    micro_batch: int
    global_batch: int
    bytes_per_element: int
    convention: str
    optimizer_bytes_per_param: float
    num_experts: int = 0
    top_k: int = 1
    moe_every: int = 1

    _KEYS = ("name", "layers", "hidden", "heads", "ffn_hidden", "seq_len", "vocab_size",
             "micro_batch", "global_batch", "bytes_per_element", "convention",
             "optimizer_bytes_per_param", "num_experts", "top_k", "moe_every")

    @staticmethod
    def parse(data: Mapping[str, Any] | None, prefix: str = "workload.model") -> "Transformer":
        b = Block(data, prefix, Transformer._KEYS)
        name = b.get("name")
        if not isinstance(name, str) or not name:
            raise LibraInputError(f"{b.key('name')} = {show(name)}: expected a non-empty string.")
        conv = b.get("convention")
        if not isinstance(conv, str) or conv not in CONVENTIONS:
            raise LibraInputError(
                f"{b.key('convention')} = {show(conv)}: expected one of {', '.join(CONVENTIONS)}."
            )
        ints = {"layers": read_int(b.get("layers"), b.key("layers"), maximum=LIMITS.max_layers)}
        ints.update({k: read_int(b.get(k), b.key(k)) for k in (
            "hidden", "heads", "ffn_hidden", "seq_len", "micro_batch",
            "global_batch", "bytes_per_element")})
        vocab = read_int(b.get("vocab_size"), b.key("vocab_size"), 0)
        experts = read_int(b.get("num_experts", 0), b.key("num_experts"), 0)
        top_k = read_int(b.get("top_k", 1), b.key("top_k"))
        every = read_int(b.get("moe_every", 1), b.key("moe_every"))
        if experts and top_k > experts:
            raise LibraInputError(
                f"{b.key('top_k')} = {top_k} exceeds {b.key('num_experts')} = {experts}."
            )
        if ints["hidden"] % ints["heads"]:
            raise LibraInputError(
                f"{b.key('hidden')} = {ints['hidden']} is not a multiple of "
                f"{b.key('heads')} = {ints['heads']}."
            )
        opt = read_pos(b.get("optimizer_bytes_per_param"), b.key("optimizer_bytes_per_param"),
                   allow_zero=True)
        return Transformer(name=name, vocab_size=vocab, convention=conv,
                           optimizer_bytes_per_param=opt, num_experts=experts, top_k=top_k,
                           moe_every=every, **ints)

    def is_moe_block(self, i: int) -> bool:
        """Block i (0-based) is a mixture-of-experts block."""
        return self.num_experts > 0 and (i + 1) % self.moe_every == 0

    # Parameters (weights only: biases and layer norms are left out, as in the LIBRA files).
    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections: 4 h^2."""
        return 4 * self.hidden * self.hidden

    @property
    def ffn_params(self) -> int:
        """Two FFN matrices: 2 h f (8 h^2 for f = 4h)."""
        return 2 * self.hidden * self.ffn_hidden


def check_transformer_parallel(m: Transformer, par: Parallel, prefix: str = "workload") -> int:
    """Checks the degrees against the model; returns the micro-batches per step M."""
    if m.heads % par.tp:
        raise LibraInputError(
            f"{prefix}.parallel.tp = {par.tp} does not divide {prefix}.model.heads = {m.heads} "
            "(Megatron splits attention heads over the TP group)."
        )
    if m.ffn_hidden % par.tp:
        raise LibraInputError(
            f"{prefix}.parallel.tp = {par.tp} does not divide {prefix}.model.ffn_hidden = "
            f"{m.ffn_hidden}."
        )
    if m.layers % par.pp:
        raise LibraInputError(
            f"{prefix}.parallel.pp = {par.pp} does not divide {prefix}.model.layers = "
            f"{m.layers} (every pipeline stage holds the same number of blocks)."
        )
    if m.num_experts and m.num_experts % par.ep:
        raise LibraInputError(
            f"{prefix}.parallel.ep = {par.ep} does not divide {prefix}.model.num_experts = "
            f"{m.num_experts}."
        )
    return micro_batches(m.global_batch, m.micro_batch, par.dp, prefix)


def transformer_stage_params(m: Transformer, par: Parallel) -> dict[str, float]:
    """Parameters held by one NPU of the first pipeline stage: ``dense`` (attention, dense
    FFNs, embedding if any; replicated over DP) and ``expert`` (the NPU's experts; replicated
    over DP / EP). Weights only (no biases or norms)."""
    blocks = m.layers // par.pp
    dense = expert = 0.0
    for i in range(blocks):
        dense += m.attention_params / par.tp
        if m.is_moe_block(i):
            expert += (m.num_experts // par.ep) * m.ffn_params / par.tp
        else:
            dense += m.ffn_params / par.tp
    if m.vocab_size:
        dense += m.vocab_size * m.hidden / par.tp  # vocab-parallel embedding (tied LM head)
    return {"dense": dense, "expert": expert}


def transformer_workload(m: Transformer, par: Parallel, npu: Npu, num_dims: int,
                         source: str = "generator transformer") -> Workload:
    """The workload of :func:`transformer_lines` with the communicators of ``par.placement``."""
    if par.placement is None:
        raise ValueError("the parallel placement is needed to build communicators")
    lines = transformer_lines(m, par, npu)
    return lines.workload(m.name, source, group_comms(par.placement, par.ep), num_dims)


def transformer_lines(m: Transformer, par: Parallel, npu: Npu) -> Lines:
    """One training step of one NPU of the first pipeline stage (see the module docstring).

    Per block i (names as the LIBRA files: Q, K, V, QK, softmax, concat, X W1 b1, X W2 b2,
    layerNorm), with b micro-batch, s sequence, h hidden, f FFN size, t = TP, e bytes/element:

    * FLOPs (forward; input-grad and weight-grad phases take as long each, i.e. backward =
      2 x forward, Narayanan et al. 2021): Q, K, V, concat 2bsh^2/t each; the FFN lines
      2bshf/t each; QK and softmax bs^2h/t each (``libra``) or 2bs^2h/t (``megatron``);
      layerNorm 2bsh (not split over TP).
    * Tensor parallel (Megatron, Shoeybi et al. 2019, Sec. 3): all-reduce of bshe bytes after
      attention (concat forward) and after the FFN (X W2 forward), and the conjugate
      all-reduces of the input gradients (Q and X W1 input-grad); ``libra`` adds the shipped
      files' all-gather of bshe/t bytes on concat's input gradient.
    * MoE block: the FFN runs on top_k experts per token (FLOPs x top_k), with an all-to-all
      of bshe*top_k bytes over the EP group to dispatch (``router`` line: forward, and its
      input-grad for the combine's backward) and one to combine (``combine`` line).
    * Recomputation ``full``: a ``recompute`` line per block repeats the block's forward
      FLOPs in the backward pass, and its two forward all-reduces (one AR of 2bshe).
    * Data parallel: one collective of all the stage's gradients (e bytes per parameter) on
      the first line's weight-grad phase (equal in this model to per-layer buckets): an
      all-reduce (ZeRO 0/1), or a reduce-scatter plus an all-gather of the updated shard
      (ZeRO 2), plus all-gathers of the parameters for forward and backward (ZeRO 3 / FSDP,
      line ``zero3_param_allgather``). Expert gradients: over the expert-DP group (DP / EP).
    * Pipeline (PP > 1): ``pipeline_p2p`` sends the activations (bshe per micro-batch) to the
      next stage and the gradients back (SENDRECV over the PP group), and ``pipeline_bubble``
      adds (PP - 1) / M of the stage's compute (1F1B / GPipe bubble, Narayanan et al. 2021).
    * Vocabulary (vocab_size > 0): ``embedding`` (TP all-reduce of bshe forward) and
      ``lm_head`` (2bshV/t FLOPs), both charged to this stage.

    Returns:
      The lines with group roles; per-micro-batch quantities are multiplied by M (module
      docstring). The placement is not used.
    """
    mb = check_transformer_parallel(m, par)
    blocks = m.layers // par.pp
    per_block = 9 + (2 if m.num_experts else 0) + (1 if par.recompute == "full" else 0)
    if blocks * per_block > LIMITS.max_layers:
        raise LibraInputError(
            f"workload.model.layers = {m.layers:,}: the generated workload would have "
            f"{blocks * per_block:,} lines ({per_block} per block, {blocks:,} blocks on the "
            f"first pipeline stage); at most {LIMITS.max_layers:,} are supported "
            "(LIMITS.max_layers).")
    b, s, h, f, t, e = (m.micro_batch, m.seq_len, m.hidden, m.ffn_hidden, par.tp,
                        m.bytes_per_element)
    ns = 1.0 / npu.flops_per_ns
    tp_c, pp_c, dp_c, ep_c, edp_c = "tp", "pp", "dp", "ep", "edp"
    act = b * s * h * e * mb  # bytes of one activation tensor, all micro-batches of the step
    proj = 2 * b * s * h * h / t * mb * ns
    ffn = 2 * b * s * h * f / t * mb * ns
    attn = (1 if m.convention == "libra" else 2) * b * s * s * h / t * mb * ns
    norm = 2 * b * s * h * mb * ns
    lines = Lines(mb)
    fwd_total = ig_total = wg_total = 0.0

    def add(name, c, colls=NONE3):
        nonlocal fwd_total, ig_total, wg_total
        lines.add(name, c, colls)
        fwd_total, ig_total, wg_total = fwd_total + c[0], ig_total + c[1], wg_total + c[2]

    if m.vocab_size:
        add("embedding", (0.0, 0.0, 0.0), ((_AR, act, tp_c), (_N, 0.0, None), (_N, 0.0, None)))
    for i in range(m.layers // par.pp):
        k = i + 1
        moe = m.is_moe_block(i)
        add(f"Q{k}", (proj,) * 3, ((_N, 0, None), (_AR, act, tp_c), (_N, 0, None)))
        for nm in ("K", "V"):
            add(f"{nm}{k}", (proj,) * 3)
        add(f"QK{k}", (attn,) * 3)
        add(f"softmax{k}", (attn,) * 3)
        concat_ig = (_AG, act / t, tp_c) if m.convention == "libra" else (_N, 0, None)
        add(f"concat{k}", (proj,) * 3, ((_AR, act, tp_c), concat_ig, (_N, 0, None)))
        if moe:
            a2a = act * m.top_k
            add(f"router{k}", (2 * b * s * h * m.num_experts * mb * ns,) * 3,
                ((_A2A, a2a, ep_c), (_A2A, a2a, ep_c), (_N, 0, None)))
        fx = ffn * (m.top_k if moe else 1)
        add(f"X{k}W1b1", (fx,) * 3, ((_N, 0, None), (_AR, act, tp_c), (_N, 0, None)))
        add(f"X{k}W2b2", (fx,) * 3, ((_AR, act, tp_c), (_N, 0, None), (_N, 0, None)))
        if moe:
            add(f"combine{k}", (0.0,) * 3,
                ((_A2A, a2a, ep_c), (_A2A, a2a, ep_c), (_N, 0, None)))
        add(f"layerNorm{k}", (norm,) * 3)
        if par.recompute == "full":
            block_fwd = 4 * proj + 2 * attn + 2 * fx + norm
            add(f"recompute{k}", (0.0, block_fwd, 0.0),
                ((_N, 0, None), (_AR, 2 * act, tp_c), (_N, 0, None)))
    if m.vocab_size:
        head = 2 * b * s * h * m.vocab_size / t * mb * ns
        add("lm_head", (head,) * 3)

    params = transformer_stage_params(m, par)
    grad_dense = params["dense"] * e
    if par.zero_stage <= 1:
        lines.set_phase(0, 2, _AR, grad_dense, dp_c)
    else:
        lines.set_phase(0, 2, _RS, grad_dense, dp_c)
        shard = grad_dense / par.dp
        if par.zero_stage == 2:
            lines.add("zero2_param_allgather", (0, 0, 0),
                      ((_N, 0, None), (_N, 0, None), (_AG, shard, dp_c)), once=True)
        else:
            lines.add("zero3_param_allgather", (0, 0, 0),
                      ((_AG, shard, dp_c), (_AG, shard, dp_c), (_N, 0, None)), once=True)
    if params["expert"]:
        first_combine = next(j for j, n in enumerate(lines.names) if n.startswith("combine"))
        lines.set_phase(first_combine, 2, _AR, params["expert"] * e, edp_c)
    if par.pp > 1:
        lines.add("pipeline_p2p", (0, 0, 0),
                  ((_P2P, act, pp_c), (_P2P, act, pp_c), (_N, 0, None)))
        r = (par.pp - 1) / mb
        lines.add("pipeline_bubble", (r * fwd_total, r * ig_total, r * wg_total))
    return lines
