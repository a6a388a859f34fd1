"""The ``serving`` generator: LLM inference on a replica of ``tp x pp x ep`` NPUs, as three
workloads (phases) on the same network: **prefill** (``prefill_batch`` prompts of
``prompt_len`` tokens through the whole model), one **decode** step (one new token for each of
``batch`` concurrent sequences) and, with ``parallel.disaggregated``, the **KV transfer** of the
prefilled requests' KV cache from a prefill replica to a decode replica over one dimension.

Each phase is an ordinary :class:`~libra_jax.inputs.workload.Workload` (its lines in the
forward phase, one collective each), so every timing model times it: ``model=pipelined``
pays the per-hop latency and endpoint delays that dominate decode. The serving metrics and
objectives built from the three phase times live in :mod:`libra_jax.studies.serving`.

Layout of a replica (``parallel``): attention is tensor parallel over ``tp`` (Megatron: heads
split; the KV heads split over ``min(tp, kv_heads)``, replicated beyond), and data parallel
over ``ep`` groups (each holds ``batch / ep`` sequences: DeepSeek-V3's "DP attention"); a
mixture-of-experts layer's experts are spread over the ``ep`` groups (``num_experts / ep`` each,
every expert TP-split), tokens dispatched to them and combined by all-to-alls over the EP group;
``pp`` stages run one after another (a token crosses every stage: the phase covers all layers,
with a point-to-point send at each of the ``pp - 1`` stage boundaries). The network holds
``replicas`` such replicas (``tp * pp * ep * replicas`` NPUs; TP innermost, then PP, then the
EP groups, then the replicas: :func:`~libra_jax.inputs.generators.common.default_placement`).

Per NPU and per layer (b tokens on the NPU, h hidden, e_a bytes per activation element):

* compute time = max(FLOPs / (peak_tflops * efficiency), bytes read / memory_bw_gbps): decode
  reads every weight and the KV cache for a handful of FLOPs per byte, so it is bound by memory;
  prefill is bound by FLOPs. FLOPs: 2 per weight per token, plus attention's QK^T and AV,
  4 * heads/tp * head_dim per token per context position (prefill: causal, P^2/2 positions per
  prompt; decode: ``prompt_len + output_len / 2``, the mean context over the generation).
  Weights read: attention (``attention_params``, default the GQA projections
  hidden * head_dim * (2 heads + 2 kv_heads)) / tp, the dense FFN (``ffn_matrices`` * hidden
  * ffn_hidden, 3 for SwiGLU) / tp, a MoE layer's experts touched on the NPU
  (min(num_experts / ep, b * top_k) of ``ffn_matrices`` * hidden * expert_ffn_hidden / tp each)
  and its shared experts; KV read per sequence: context * ``kv_elements_per_token`` (default
  2 * kv_heads * head_dim; MLA's compressed latent is given explicitly) / min(tp, kv_heads).
* communication: a TP all-reduce of b * h * e_a bytes after attention and after the FFN (or
  the MoE combine); an all-to-all of b * top_k * h * e_a bytes over the EP group to dispatch
  and one to combine; a send of b * h * e_a bytes at each stage boundary (``pp > 1``).
* the LM head (``vocab_size > 0``): 2 * b * hidden * vocab / tp FLOPs, its weights read.
* KV transfer: each NPU of a prefill replica sends its share of the prefilled KV cache,
  prefill_batch / ep * prompt_len * layers / pp * kv_elements_per_token * bytes_per_kv /
  min(tp, kv_heads) bytes, to the NPU in the same place of a decode replica (a send over
  ``parallel.kv_dim``).

Memory per NPU (checked here, before any solve): the replica's weights / (tp * pp) (experts /
(tp * pp * ep)) plus the KV cache of its sequences at their longest (prompt + output tokens);
a decode replica whose cache does not fit is an error that says how many sequences would.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from libra_jax.inputs.generators.common import (
    NONE3,
    Block,
    Lines,
    Npu,
    Parallel,
    group_comms,
    parse_placement,
    read_int,
    read_pos,
)
from libra_jax.inputs.limits import LIMITS, as_bool
from libra_jax.inputs.workload import Workload
from libra_jax.types import Collective, LibraInputError, show

_N, _AR, _A2A, _P2P = (int(Collective.NONE), int(Collective.ALLREDUCE),
                       int(Collective.ALLTOALL), int(Collective.SENDRECV))
PHASE_NAMES = ("prefill", "decode", "kv_transfer")


@dataclasses.dataclass(frozen=True)
class ServingModel:
    """Architecture, number formats and request mix of a served model (``workload.model``)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn_hidden: int
    ffn_matrices: int
    vocab_size: int
    num_experts: int
    top_k: int
    expert_ffn_hidden: int
    shared_experts: int
    first_dense_layers: int
    attention_params: int
    kv_elements_per_token: int
    bytes_per_weight: float
    bytes_per_activation: float
    bytes_per_kv: float
    prompt_len: int
    output_len: int
    batch: int
    prefill_batch: int

    KEYS = ("name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden",
            "ffn_matrices", "vocab_size", "num_experts", "top_k", "expert_ffn_hidden",
            "shared_experts", "first_dense_layers", "attention_params",
            "kv_elements_per_token", "bytes_per_weight", "bytes_per_activation",
            "bytes_per_kv", "prompt_len", "output_len", "batch", "prefill_batch")

    @staticmethod
    def parse(data: Mapping[str, Any] | None, prefix: str = "workload.model") -> "ServingModel":
        b = Block(data, prefix, ServingModel.KEYS)
        name = b.get("name")
        if not isinstance(name, str) or not name:
            raise LibraInputError(f"{b.key('name')} = {show(name)}: expected a non-empty string.")
        v: dict[str, Any] = {"layers": read_int(b.get("layers"), b.key("layers"),
                                                maximum=LIMITS.max_layers // 8)}
        for k in ("hidden", "heads", "kv_heads", "ffn_hidden", "prompt_len", "batch"):
            v[k] = read_int(b.get(k), b.key(k))
        out = b.get("output_len")
        if isinstance(out, (int, float)) and not isinstance(out, bool) and out == 0:
            raise LibraInputError(
                f"{b.key('output_len')} = 0: a request must generate at least one token "
                "(the first token comes from prefill, the rest from decode steps).")
        v["output_len"] = read_int(out, b.key("output_len"))
        if v["heads"] % v["kv_heads"]:
            raise LibraInputError(
                f"{b.key('kv_heads')} = {v['kv_heads']} does not divide {b.key('heads')} = "
                f"{v['heads']} (grouped-query attention shares each KV head among "
                "heads / kv_heads query heads).")
        if b.get("head_dim", None) is None and v["hidden"] % v["heads"]:
            raise LibraInputError(
                f"{b.key('hidden')} = {v['hidden']} is not a multiple of {b.key('heads')} = "
                f"{v['heads']}; give {b.key('head_dim')} explicitly.")
        v["head_dim"] = read_int(b.get("head_dim", v["hidden"] // v["heads"]), b.key("head_dim"))
        v["ffn_matrices"] = read_int(b.get("ffn_matrices", 3), b.key("ffn_matrices"), 2, 3)
        v["vocab_size"] = read_int(b.get("vocab_size", 0), b.key("vocab_size"), 0)
        v["num_experts"] = read_int(b.get("num_experts", 0), b.key("num_experts"), 0)
        v["top_k"] = read_int(b.get("top_k", 1), b.key("top_k"))
        if v["num_experts"] and v["top_k"] > v["num_experts"]:
            raise LibraInputError(f"{b.key('top_k')} = {v['top_k']} exceeds "
                                  f"{b.key('num_experts')} = {v['num_experts']}.")
        v["expert_ffn_hidden"] = read_int(b.get("expert_ffn_hidden", v["ffn_hidden"]),
                                          b.key("expert_ffn_hidden"))
        v["shared_experts"] = read_int(b.get("shared_experts", 0), b.key("shared_experts"), 0)
        v["first_dense_layers"] = read_int(b.get("first_dense_layers", 0),
                                           b.key("first_dense_layers"), 0, v["layers"])
        gqa = v["hidden"] * v["head_dim"] * (2 * v["heads"] + 2 * v["kv_heads"])
        v["attention_params"] = read_int(b.get("attention_params", gqa),
                                         b.key("attention_params"))
        v["kv_elements_per_token"] = read_int(
            b.get("kv_elements_per_token", 2 * v["kv_heads"] * v["head_dim"]),
            b.key("kv_elements_per_token"))
        for k in ("bytes_per_weight", "bytes_per_activation", "bytes_per_kv"):
            v[k] = read_pos(b.get(k), b.key(k), maximum=64)
        v["prefill_batch"] = read_int(b.get("prefill_batch", 1), b.key("prefill_batch"))
        return ServingModel(name=name, **v)

    def is_moe(self, layer: int) -> bool:
        """Layer ``layer`` (0-based) is a mixture-of-experts layer."""
        return self.num_experts > 0 and layer >= self.first_dense_layers

    @property
    def expert_params(self) -> int:
        """Weights of one expert (``ffn_matrices`` matrices of hidden x expert_ffn_hidden)."""
        return self.ffn_matrices * self.hidden * self.expert_ffn_hidden

    @property
    def dense_ffn_params(self) -> int:
        return self.ffn_matrices * self.hidden * self.ffn_hidden

    def params(self) -> dict[str, float]:
        """Weights of the whole model: ``total``, ``active`` per token (routed experts:
        top_k; the embedding counted too), and ``experts`` (the routed experts only)."""
        moe = self.layers - self.first_dense_layers if self.num_experts else 0
        dense = self.layers - moe
        base = self.layers * self.attention_params + dense * self.dense_ffn_params
        # The embedding and the LM head, untied (both shipped models keep two matrices).
        base += moe * self.shared_experts * self.expert_params + 2 * self.vocab_size * self.hidden
        experts = moe * self.num_experts * self.expert_params
        active = base + moe * self.top_k * self.expert_params
        return {"total": float(base + experts), "active": float(active),
                "experts": float(experts)}


@dataclasses.dataclass(frozen=True)
class ServingParallel:
    """A replica's degrees (``tp``, ``pp``, ``ep``), the number of ``replicas``, and
    disaggregation: ``prefill_replicas`` of them prefill, the rest decode, and each request's
    KV cache crosses dimension ``kv_dim``."""

    tp: int
    pp: int
    ep: int
    replicas: int
    disaggregated: bool
    prefill_replicas: int
    kv_dim: int | None
    parallel: Parallel  # the placement (dp = ep * replicas)

    KEYS = ("tp", "pp", "ep", "replicas", "disaggregated", "prefill_replicas", "kv_dim",
            "placement")

    @property
    def replica_npus(self) -> int:
        return self.tp * self.pp * self.ep

    @property
    def decode_replicas(self) -> int:
        return self.replicas - self.prefill_replicas if self.disaggregated else self.replicas

    @staticmethod
    def parse(data: Mapping[str, Any] | None, npus: Sequence[int],
              prefix: str = "workload.parallel") -> "ServingParallel":
        b = Block(data, prefix, ServingParallel.KEYS)
        tp, pp, ep, reps = (read_int(b.get(k, 1 if k == "ep" else ...), b.key(k),
                                     maximum=LIMITS.max_npus)
                            for k in ("tp", "pp", "ep", "replicas"))
        total = math.prod(int(n) for n in npus)
        if tp * pp * ep * reps != total:
            raise LibraInputError(
                f"{prefix}: tp * pp * ep * replicas = {tp} * {pp} * {ep} * {reps} = "
                f"{tp * pp * ep * reps}, but the network has {total} NPUs ({list(npus)}).")
        dis = as_bool(b.get("disaggregated", False), b.key("disaggregated"))
        if dis:
            pre = read_int(b.get("prefill_replicas"), b.key("prefill_replicas"))
            if pre >= reps:
                raise LibraInputError(
                    f"{b.key('prefill_replicas')} = {pre}: disaggregated serving needs at "
                    f"least one decode replica; it must be below {b.key('replicas')} = {reps}.")
        elif b.get("prefill_replicas", None) is not None or b.get("kv_dim", None) is not None:
            raise LibraInputError(
                f"{b.key('prefill_replicas')} / {b.key('kv_dim')} are set but "
                f"{b.key('disaggregated')} is false: they describe disaggregated serving; "
                f"set {b.key('disaggregated')}=true or remove them.")
        else:
            pre = 0
        placement = b.get("placement", None)
        raw = {"tp": tp, "pp": pp, "dp": ep * reps, "ep": ep, "zero_stage": 0,
               "recompute": "none"}
        if placement is not None:
            parse_placement(placement, npus, b.key("placement"))
            raw["placement"] = placement
        par = Parallel.parse(raw, npus, prefix)
        spans = [d for d, f in enumerate(par.placement.pp) if f > 1]
        if len(spans) > 1:
            # A token crosses every stage boundary: some on one dimension, some on the
            # other, and a send between NPUs that differ in two coordinates; the phase's
            # one stage send per boundary does not say which (docs/serving.md).
            raise LibraInputError(
                f"{b.key('pp')} = {pp} spans dimensions {spans} (factors "
                f"{[par.placement.pp[d] for d in spans]}): the pipeline stages must sit on "
                f"one dimension; change {b.key('placement')} or the degrees.")
        kv_dim = None
        if dis:
            reps_f = group_comms(par.placement, ep)["edp"]
            spans = [d for d, f in enumerate(reps_f) if f > 1]
            kv = b.get("kv_dim", None)
            if kv is None:
                kv_dim = spans[-1]
            else:
                kv_dim = read_int(kv, b.key("kv_dim"), 0, len(npus) - 1)
                if kv_dim not in spans:
                    raise LibraInputError(
                        f"{b.key('kv_dim')} = {kv_dim}: the replicas do not span that "
                        f"dimension (they span {spans}); the KV cache moves between replicas.")
        return ServingParallel(tp, pp, ep, reps, dis, pre, kv_dim, par)


@dataclasses.dataclass(frozen=True)
class ServingPhases:
    """What the ``serving`` generator emits (see the module docstring).

    Attributes:
      model, parallel, npu: the validated inputs.
      prefill, decode: the two phases' workloads (one replica's critical path, every layer).
      kv_transfer: the KV transfer's workload (disaggregated), else None.
      weights_bytes, kv_bytes: memory per NPU of a decode replica (bytes): weights and the
        KV cache at its longest.
      capacity_bytes: npu.memory_gb * 1e9.
    """

    model: ServingModel
    parallel: ServingParallel
    npu: Npu
    prefill: Workload
    decode: Workload
    kv_transfer: Workload | None
    weights_bytes: float
    kv_bytes: float
    capacity_bytes: float

    @property
    def workloads(self) -> list[Workload]:
        """The phases present, in `PHASE_NAMES` order."""
        return [w for w in (self.prefill, self.decode, self.kv_transfer) if w is not None]


def _kv_split(m: ServingModel, par: ServingParallel) -> int:
    """NPUs of a TP group the KV heads are split over (replicated beyond kv_heads)."""
    return min(par.tp, m.kv_heads)


def _per_npu_weights(m: ServingModel, par: ServingParallel) -> float:
    """Weight bytes on one NPU: dense parts / (tp * pp), routed experts / (tp * pp * ep)."""
    p = m.params()
    return (((p["total"] - p["experts"]) / (par.tp * par.pp)
             + p["experts"] / (par.tp * par.pp * par.ep)) * m.bytes_per_weight)


def _kv_bytes_per_token(m: ServingModel, par: ServingParallel) -> float:
    """KV bytes one token adds on one NPU (its pp stage's layers, its KV heads)."""
    return (m.layers / par.pp * m.kv_elements_per_token * m.bytes_per_kv / _kv_split(m, par))


def _phase_lines(m: ServingModel, par: ServingParallel, npu: Npu, tokens: float,
                 sequences: float, context: float, causal: bool) -> Lines:
    """Every layer of one pass of ``tokens`` tokens (``sequences`` sequences, each attending
    to ``context`` positions per token, or causally over its own ``context`` tokens) on one
    NPU of each stage, in order (module docstring)."""
    t, h, ea, ew = par.tp, m.hidden, m.bytes_per_activation, m.bytes_per_weight
    flops_ns, mem_ns = npu.flops_per_ns, npu.memory_bw_gbps  # bytes per ns = GB/s
    act = tokens * h * ea
    heads_t = m.heads / t
    # Attention core: QK^T and AV, 4 * heads/t * head_dim FLOPs per token per position.
    positions = (sequences * context * context / 2) if causal else tokens * context
    attn_flops = 4 * heads_t * m.head_dim * positions
    # Decode reads the whole KV cache per token; prefill writes it (attention runs on chip).
    kv_read = 0.0 if causal else (sequences * context * m.kv_elements_per_token
                                  * m.bytes_per_kv / _kv_split(m, par))

    def line_ns(flops: float, read: float) -> float:
        return max(flops / flops_ns, read / mem_ns)

    lines = Lines(1)
    tp_ar = (_AR, act, "tp") if t > 1 else (_N, 0.0, None)
    per_stage = m.layers // par.pp
    for i in range(m.layers):
        k = i + 1
        attn_w = m.attention_params / t
        lines.add(f"attention{k}", (line_ns(2 * tokens * attn_w + attn_flops,
                                            attn_w * ew + kv_read), 0.0, 0.0),
                  (tp_ar, (_N, 0, None), (_N, 0, None)))
        if m.is_moe(i):
            a2a = (_A2A, act * m.top_k, "ep") if par.ep > 1 else (_N, 0.0, None)
            lines.add(f"dispatch{k}", (line_ns(2 * tokens * h * m.num_experts, 0.0), 0.0, 0.0),
                      (a2a, (_N, 0, None), (_N, 0, None)))
            routed = tokens * m.top_k  # token-expert pairs per EP group, balanced
            touched = min(m.num_experts / par.ep, routed)
            w = (touched + m.shared_experts) * m.expert_params / t
            fl = 2 * (routed + tokens * m.shared_experts) * m.expert_params / t
            lines.add(f"experts{k}", (line_ns(fl, w * ew), 0.0, 0.0),
                      (a2a, (_N, 0, None), (_N, 0, None)))
            lines.add(f"combine{k}", (0.0, 0.0, 0.0), (tp_ar, (_N, 0, None), (_N, 0, None)))
        else:
            w = m.dense_ffn_params / t
            lines.add(f"ffn{k}", (line_ns(2 * tokens * w, w * ew), 0.0, 0.0),
                      (tp_ar, (_N, 0, None), (_N, 0, None)))
        if par.pp > 1 and k % per_stage == 0 and k < m.layers:
            lines.add(f"stage_send{k // per_stage}", (0.0, 0.0, 0.0),
                      ((_P2P, act, "pp"), (_N, 0, None), (_N, 0, None)))
    if m.vocab_size:
        w = m.vocab_size * h / t
        lines.add("lm_head", (line_ns(2 * sequences * w, w * ew), 0.0, 0.0))
    return lines


def serving_phases(model: Mapping[str, Any] | None, parallel: Mapping[str, Any] | None,
                   npu: Mapping[str, Any] | None, npus: Sequence[int],
                   prefix: str = "workload") -> ServingPhases:
    """The serving phases a config describes (module docstring), every input checked.

    Raises:
      LibraInputError: a missing / unknown / bad key, degrees that do not divide the model or
        multiply to the NPU count, or a KV cache that does not fit in memory.
    """
    m = ServingModel.parse(model, f"{prefix}.model")
    chip = Npu.parse(npu, f"{prefix}.npu")
    for k in ("memory_gb", "memory_bw_gbps"):
        if getattr(chip, k) is None:
            raise LibraInputError(
                f"{prefix}.npu.{k} is missing (or null); serving needs it (decode is bound by "
                "reading the weights and the KV cache from memory).")
    par = ServingParallel.parse(parallel, npus, f"{prefix}.parallel")
    _check_divisions(m, par, prefix)
    names = f"TP{par.tp} x PP{par.pp} x EP{par.ep}"
    comms = group_comms(par.parallel.placement, par.ep)
    d = len(npus)
    b_loc, pb_loc = m.batch / par.ep, m.prefill_batch / par.ep
    decode = _phase_lines(m, par, chip, b_loc, b_loc, m.prompt_len + m.output_len / 2,
                          causal=False).workload(f"{m.name}_decode", "generator serving",
                                                 comms, d)
    prefill = _phase_lines(m, par, chip, pb_loc * m.prompt_len, pb_loc, m.prompt_len,
                           causal=True).workload(f"{m.name}_prefill", "generator serving",
                                                 comms, d)
    kv = None
    if par.disaggregated:
        row = [-1] * d
        row[par.kv_dim] = int(npus[par.kv_dim])
        lines = Lines(1)
        size = pb_loc * m.prompt_len * _kv_bytes_per_token(m, par)
        lines.add("kv_transfer", (0.0, 0.0, 0.0), ((_P2P, size, "kv"), (_N, 0, None),
                                                    (_N, 0, None)))
        kv = lines.workload(f"{m.name}_kv_transfer", "generator serving",
                            {**comms, "kv": np.array(row, np.int32)}, d)
    weights = _per_npu_weights(m, par)
    kv_bytes = b_loc * (m.prompt_len + m.output_len) * _kv_bytes_per_token(m, par)
    cap = chip.memory_gb * 1e9
    if weights + kv_bytes > cap:
        room = math.floor((cap - weights) / ((m.prompt_len + m.output_len)
                                            * _kv_bytes_per_token(m, par)) * par.ep)
        raise LibraInputError(
            f"{prefix}: the KV cache does not fit in memory: weights {weights / 1e9:.3f} GB + "
            f"KV cache {kv_bytes / 1e9:.3f} GB ({m.batch} sequences of {m.prompt_len} + "
            f"{m.output_len} tokens, {names}) = {(weights + kv_bytes) / 1e9:.3f} GB per NPU > "
            f"{prefix}.npu.memory_gb = {chip.memory_gb:g}. "
            + (f"At most {room} sequences fit ({prefix}.model.batch)."
               if room >= par.ep else "The weights alone leave no room: raise tp or pp."))
    return ServingPhases(m, par, chip, prefill, decode, kv, weights, kv_bytes, cap)


def _check_divisions(m: ServingModel, par: ServingParallel, prefix: str) -> None:
    for what, n, k in ((f"{prefix}.model.heads", m.heads, "tp"),
                       (f"{prefix}.model.ffn_hidden", m.ffn_hidden, "tp"),
                       (f"{prefix}.model.expert_ffn_hidden", m.expert_ffn_hidden, "tp"),
                       (f"{prefix}.model.layers", m.layers, "pp"),
                       (f"{prefix}.model.batch", m.batch, "ep"),
                       (f"{prefix}.model.prefill_batch", m.prefill_batch, "ep")):
        deg = getattr(par, k)
        if n % deg:
            raise LibraInputError(
                f"{prefix}.parallel.{k} = {deg} does not divide {what} = {n}.")
    if m.kv_heads > par.tp and m.kv_heads % par.tp:
        raise LibraInputError(
            f"{prefix}.parallel.tp = {par.tp} does not divide {prefix}.model.kv_heads = "
            f"{m.kv_heads} (each NPU holds whole KV heads).")
    if m.num_experts and m.num_experts % par.ep:
        raise LibraInputError(f"{prefix}.parallel.ep = {par.ep} does not divide "
                              f"{prefix}.model.num_experts = {m.num_experts}.")
    if not m.num_experts and par.ep > 1:
        raise LibraInputError(f"{prefix}.parallel.ep = {par.ep}: a dense model "
                              f"({prefix}.model.num_experts = 0) has no expert parallelism.")
