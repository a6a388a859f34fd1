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
* ``dlrm`` -- DLRM (Naumov et al. 2019): model-parallel embedding tables, data-parallel MLPs.

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
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_int, as_list, as_real, as_str
from libra_jax.inputs.workload import Workload
from libra_jax.types import BLOCK_ABBREV, PHASES, Collective, LibraInputError, show

GENERATORS = ("transformer", "moe", "resnet50", "dlrm")
CONVENTIONS = ("libra", "megatron")
RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
_N, _AR, _RS, _AG, _A2A, _P2P = (
    int(Collective.NONE), int(Collective.ALLREDUCE), int(Collective.REDUCESCATTER),
    int(Collective.ALLGATHER), int(Collective.ALLTOALL), int(Collective.SENDRECV),
)


def parallel_communicators(
    shape: tuple[int, ...], tp: int
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """TP and DP communicators of a shape; TP fills dimensions from the innermost outward.

    A dimension fully inside the TP group gets its full size in TP; a dimension split between
    TP and DP (only if its size is a multiple of the remaining TP degree) gets the TP share in
    TP and the rest in DP; later dimensions go to DP. -1 marks dimensions a group does not use.
    E.g. shape (4, 8, 4, 32) with tp 16 -> TP (4, 4, -1, -1), DP (-1, 2, 4, 32).

    Args:
      shape: [D] NPUs per dimension.
      tp: tensor-parallel degree (>= 1); DP is prod(shape) / tp.

    Returns:
      (tp_comm, dp_comm), or None when the TP group cannot be laid on the shape.
    """
    left = tp
    tp_comm, dp_comm = [], []
    for n in shape:
        if left == 1:
            tp_comm.append(-1)
            dp_comm.append(n)
        elif left % n == 0:
            tp_comm.append(n)
            dp_comm.append(-1)
            left //= n
        elif n % left == 0:
            tp_comm.append(left)
            dp_comm.append(n // left)
            left = 1
        else:
            return None
    if left != 1:
        return None
    return tuple(tp_comm), tuple(dp_comm)


# --------------------------------------------------------------------------------------------
# Validated inputs
# --------------------------------------------------------------------------------------------


#: Largest integer a model or parallel key may be (a hidden size, a sequence length, a batch,
#: a vocabulary, a degree...), unless a tighter limit applies (``layers``: LIMITS.max_layers;
#: degrees: LIMITS.max_npus). Products of a handful of them stay far below float64's range;
#: the workload generated is then checked against LIMITS (`_check_generated`).
MAX_INT = 2**31
#: Largest real a model or NPU key may be (peak TFLOP/s, memory GB, bytes per parameter);
#: ``memory_bw_gbps`` has LIMITS.max_gbps.
MAX_REAL = 1e12


def _int(value: Any, key: str, minimum: int = 1, maximum: int = MAX_INT) -> int:
    """An integer in [minimum, maximum] (bools, strings and fractions are not; an integral
    float such as 8.0 is, and 1e300 is out of range)."""
    return as_int(value, key, minimum, maximum)


def _pos(value: Any, key: str, allow_zero: bool = False, maximum: float = MAX_REAL) -> float:
    """A finite number in (0, maximum] ([0, maximum] with ``allow_zero``)."""
    return as_real(value, key, 0.0, maximum, lo_open=not allow_zero)


def _int_list(value: Any, key: str, minimum: int = 1) -> list[int]:
    if isinstance(value, (list, tuple)) and len(value) > LIMITS.max_layers:
        raise LibraInputError(
            f"{key}: {len(value):,} entries; at most {LIMITS.max_layers:,} are supported "
            "(LIMITS.max_layers).")
    if not isinstance(value, (list, tuple)) or not value:
        raise LibraInputError(f"{key} = {show(value)}: expected a non-empty list of integers.")
    return [_int(v, f"{key}[{i}]", minimum) for i, v in enumerate(value)]


class _Block:
    """Reads keys of one config block, reporting missing / unknown ones by full key name."""

    def __init__(self, data: Mapping[str, Any] | None, prefix: str, allowed: Sequence[str]):
        if data is not None and not isinstance(data, Mapping):
            raise LibraInputError(
                f"{prefix} = {show(data)}: expected a mapping of keys ({', '.join(allowed)}).")
        self.data = dict(data or {})
        self.prefix = prefix
        unknown = sorted((k for k in self.data if k not in allowed), key=str)
        if unknown:
            raise LibraInputError(
                f"{prefix}.{unknown[0]}: unknown key for this generator; allowed keys are "
                f"{', '.join(allowed)}."
            )

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}"

    def get(self, name: str, default: Any = ...) -> Any:
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        if default is ...:
            raise LibraInputError(f"{self.key(name)} is missing (or null); it is required.")
        return default


@dataclasses.dataclass(frozen=True)
class Npu:
    """One NPU: ``peak_tflops`` (TFLOP/s) x ``efficiency`` (0..1] is the sustained rate;
    ``memory_gb`` (1e9 bytes) is checked by :mod:`libra_jax.model.memory` (null: not checked);
    ``memory_bw_gbps`` (GB/s) times embedding lookups (DLRM only)."""

    peak_tflops: float
    efficiency: float
    memory_gb: float | None = None
    memory_bw_gbps: float | None = None

    @property
    def flops_per_ns(self) -> float:
        return self.peak_tflops * 1e3 * self.efficiency

    @staticmethod
    def parse(data: Mapping[str, Any] | None, prefix: str = "workload.npu") -> "Npu":
        b = _Block(data, prefix, ("peak_tflops", "efficiency", "memory_gb", "memory_bw_gbps"))
        eff = _pos(b.get("efficiency"), b.key("efficiency"))
        if eff > 1:
            raise LibraInputError(f"{b.key('efficiency')} = {eff}: must be in (0, 1].")
        mem = b.get("memory_gb", None)
        mbw = b.get("memory_bw_gbps", None)
        return Npu(_pos(b.get("peak_tflops"), b.key("peak_tflops")), eff,
                   None if mem is None else _pos(mem, b.key("memory_gb")),
                   None if mbw is None else _pos(mbw, b.key("memory_bw_gbps"),
                                                 maximum=LIMITS.max_gbps))


@dataclasses.dataclass(frozen=True)
class Placement:
    """How the TP, PP and DP groups sit on the network: per dimension d, the factors
    ``tp[d] * pp[d] * dp[d] == npus[d]`` (1 = the group does not use that dimension). A group
    may span whole dimensions or share one with another group. Orderings inside a dimension
    are equivalent in LIBRA's model (only the number of NPUs per dimension matters)."""

    tp: tuple[int, ...]
    pp: tuple[int, ...]
    dp: tuple[int, ...]

    @staticmethod
    def comm(factors: Sequence[int]) -> np.ndarray:
        """Communicator row: the factor, or -1 where the group does not use the dimension."""
        return np.array([f if f > 1 else -1 for f in factors], np.int32)

    def describe(self, blocks: Sequence[str] | None = None) -> str:
        """E.g. ``TP16=RI4xFC4, PP1, DP256=FC2xRI4xSW32`` (the dims each group uses, with
        their blocks); without ``blocks``, the factor on every dim: ``TP=4x4x1x1, PP=1x1x1x1,
        DP=1x2x4x32`` (what the scan's rows hold: it does not depend on the blocks, so designs
        that differ only in equally priced blocks stay ties)."""
        parts = []
        for name, f in (("TP", self.tp), ("PP", self.pp), ("DP", self.dp)):
            if blocks is None:
                parts.append(f"{name}=" + "x".join(str(x) for x in f))
                continue
            on = [f"{BLOCK_ABBREV.get(b, b)}{x}" for b, x in zip(blocks, f) if x > 1]
            total = math.prod(f)
            parts.append(f"{name}{total}" + ("=" + "x".join(on) if on else ""))
        return ", ".join(parts)


def default_placement(npus: Sequence[int], tp: int, pp: int, dp: int, where: str) -> Placement:
    """TP fills the dimensions from the innermost outward, then PP, then DP (the LIBRA
    communicators' layout: GPT-3 TP16 on (4, 8, 4, 32) -> TP (4, 4, 1, 1), DP (1, 2, 4, 32))."""
    npus = tuple(int(n) for n in npus)
    if tp * pp * dp != math.prod(npus):
        raise LibraInputError(
            f"{where}: tp * pp * dp = {tp} * {pp} * {dp} = {tp * pp * dp}, but the network has "
            f"{math.prod(npus)} NPUs ({list(npus)}); the product must equal the NPU count."
        )
    first = parallel_communicators(npus, tp)
    rest = None if first is None else tuple(max(g, 1) for g in first[1])
    second = None if rest is None else parallel_communicators(rest, pp)
    if first is None or second is None:
        raise LibraInputError(
            f"{where}: tp = {tp}, pp = {pp} cannot be laid innermost-first on dimensions "
            f"{list(npus)} (a group must fill whole dimensions and may split only where the "
            "remaining degree divides, or is a multiple of, the dimension); give "
            "workload.parallel.placement explicitly."
        )
    t = tuple(max(g, 1) for g in first[0])
    p = tuple(max(g, 1) for g in second[0])
    d = tuple(max(g, 1) for g in second[1])
    return Placement(t, p, d)


def parse_placement(value: Any, npus: Sequence[int], key: str) -> Placement:
    """``{tp: [..], pp: [..], dp: [..]}`` per-dimension factors, checked against ``npus``."""
    if not isinstance(value, Mapping) or set(value) != {"tp", "pp", "dp"}:
        raise LibraInputError(
            f"{key} = {show(value)}: expected a mapping with keys tp, pp, dp, each a list of "
            "per-dimension factors (1 = not used)."
        )
    f = {g: _int_list(value[g], f"{key}.{g}") for g in ("tp", "pp", "dp")}
    for g, row in f.items():
        if len(row) != len(npus):
            raise LibraInputError(
                f"{key}.{g} = {row}: has {len(row)} entries but the network has "
                f"{len(npus)} dimensions."
            )
    for d, n in enumerate(npus):
        if f["tp"][d] * f["pp"][d] * f["dp"][d] != n:
            raise LibraInputError(
                f"{key}: dimension {d} has {n} NPUs but tp * pp * dp there is "
                f"{f['tp'][d]} * {f['pp'][d]} * {f['dp'][d]}."
            )
    return Placement(tuple(f["tp"]), tuple(f["pp"]), tuple(f["dp"]))


@dataclasses.dataclass(frozen=True)
class Parallel:
    """Parallelisation: degrees, ZeRO stage (0-3), recomputation (none | selective | full),
    expert-parallel degree ``ep`` (MoE; the EP group is the innermost ``ep`` NPUs of the DP
    group), and the placement on the network (null: :func:`default_placement`)."""

    tp: int
    pp: int
    dp: int
    zero_stage: int
    recompute: str
    ep: int = 1
    placement: Placement | None = None

    _KEYS = ("tp", "pp", "dp", "ep", "zero_stage", "recompute", "placement")

    @staticmethod
    def parse(data: Mapping[str, Any] | None, npus: Sequence[int] | None,
              prefix: str = "workload.parallel") -> "Parallel":
        b = _Block(data, prefix, Parallel._KEYS)
        tp, pp, dp = (_int(b.get(k), b.key(k), maximum=LIMITS.max_npus)
                      for k in ("tp", "pp", "dp"))
        ep = _int(b.get("ep", 1), b.key("ep"), maximum=LIMITS.max_npus)
        zero = as_int(b.get("zero_stage"), b.key("zero_stage"), ZERO_STAGES[0], ZERO_STAGES[-1],
                      what=" (ZeRO stage)")
        rec = b.get("recompute")
        if not isinstance(rec, str) or rec not in RECOMPUTE:
            raise LibraInputError(
                f"{b.key('recompute')} = {show(rec)}: expected one of {', '.join(RECOMPUTE)}."
            )
        if dp % ep:
            raise LibraInputError(
                f"{b.key('ep')} = {ep}: the expert-parallel group lies inside the DP group, "
                f"so ep must divide {b.key('dp')} = {dp}."
            )
        placement = None
        if npus is not None:
            if b.get("placement", None) is not None:
                placement = parse_placement(b.get("placement"), npus, b.key("placement"))
                got = tuple(math.prod(x) for x in (placement.tp, placement.pp, placement.dp))
                if got != (tp, pp, dp):
                    raise LibraInputError(
                        f"{b.key('placement')} gives degrees tp, pp, dp = {got} but "
                        f"{prefix}.tp/pp/dp = {(tp, pp, dp)}."
                    )
            else:
                placement = default_placement(npus, tp, pp, dp, prefix)
        return Parallel(tp, pp, dp, int(zero), rec, ep, placement)


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
        b = _Block(data, prefix, Transformer._KEYS)
        name = b.get("name")
        if not isinstance(name, str) or not name:
            raise LibraInputError(f"{b.key('name')} = {show(name)}: expected a non-empty string.")
        conv = b.get("convention")
        if not isinstance(conv, str) or conv not in CONVENTIONS:
            raise LibraInputError(
                f"{b.key('convention')} = {show(conv)}: expected one of {', '.join(CONVENTIONS)}."
            )
        ints = {"layers": _int(b.get("layers"), b.key("layers"), maximum=LIMITS.max_layers)}
        ints.update({k: _int(b.get(k), b.key(k)) for k in (
            "hidden", "heads", "ffn_hidden", "seq_len", "micro_batch",
            "global_batch", "bytes_per_element")})
        vocab = _int(b.get("vocab_size"), b.key("vocab_size"), 0)
        experts = _int(b.get("num_experts", 0), b.key("num_experts"), 0)
        top_k = _int(b.get("top_k", 1), b.key("top_k"))
        every = _int(b.get("moe_every", 1), b.key("moe_every"))
        if experts and top_k > experts:
            raise LibraInputError(
                f"{b.key('top_k')} = {top_k} exceeds {b.key('num_experts')} = {experts}."
            )
        if ints["hidden"] % ints["heads"]:
            raise LibraInputError(
                f"{b.key('hidden')} = {ints['hidden']} is not a multiple of "
                f"{b.key('heads')} = {ints['heads']}."
            )
        opt = _pos(b.get("optimizer_bytes_per_param"), b.key("optimizer_bytes_per_param"),
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
    return _micro_batches(m.global_batch, m.micro_batch, par.dp, prefix)


def _micro_batches(global_batch: int, micro_batch: int, dp: int, prefix: str) -> int:
    """M = global_batch / (micro_batch * dp), micro-batches per step on one NPU."""
    per_step = micro_batch * dp
    if global_batch % per_step:
        raise LibraInputError(
            f"{prefix}.model.global_batch = {global_batch} is not a multiple of "
            f"micro_batch * dp = {micro_batch} * {dp} = {per_step}, so the number of "
            "micro-batches per step is not an integer."
        )
    return global_batch // per_step


# --------------------------------------------------------------------------------------------
# Workload assembly
# --------------------------------------------------------------------------------------------


class _Lines:
    """Accumulates workload lines: name, [3] compute ns, [3] collective, [3] size, and [3]
    group *roles* (``tp``, ``pp``, ``dp``, ``ep``, ``edp`` or None). Communicators are made
    from the roles and a placement at the end (:meth:`workload`), so the co-search can reuse
    one set of lines for every placement of the same degrees."""

    def __init__(self, micro_batches: int = 1):
        self.micro_batches = micro_batches  # M: per-micro-batch collectives are issued M times
        self.names: list[str] = []
        self.compute: list[list[float]] = []
        self.coll: list[list[int]] = []
        self.size: list[list[float]] = []
        self.role: list[list[str | None]] = []
        self.once: list[list[bool]] = []  # issued once per step (else once per micro-batch)

    def add(self, name: str, compute_ns: Sequence[float],
            colls: Sequence[tuple[int, float, str | None]] = ((_N, 0.0, None),) * 3,
            once: bool = False):
        """A line; its collectives are per micro-batch (sizes: all M of them) unless
        ``once`` (e.g. ZeRO's parameter all-gathers)."""
        self.names.append(name)
        self.compute.append([float(c) for c in compute_ns])
        self.coll.append([c for c, _, _ in colls])
        self.size.append([float(x) for _, x, _ in colls])
        self.role.append([r for _, _, r in colls])
        self.once.append([once] * 3)

    def set_phase(self, line: int, phase: int, coll: int, size: float, role: str):
        """Adds a collective issued once per step (the gradients') to a line's phase."""
        if self.coll[line][phase] != _N:
            raise ValueError(f"line {self.names[line]} phase {phase} already communicates")
        self.coll[line][phase] = coll
        self.size[line][phase] = float(size)
        self.role[line][phase] = role
        self.once[line][phase] = True

    def workload(self, name: str, source: str, comms: Mapping[str, np.ndarray],
                 num_dims: int) -> Workload:
        """The workload with communicators ``comms[role]`` ([D] rows; -1 where no role)."""
        none = np.full(num_dims, -1, np.int32)
        comm = np.array([[none if r is None else comms[r] for r in row] for row in self.role],
                        np.int32).reshape(-1, 3, num_dims)
        return Workload(
            name=name, layer_names=tuple(self.names),
            compute_ns=np.array(self.compute, np.float64).reshape(-1, 3),
            collective=np.array(self.coll, np.int32).reshape(-1, 3),
            size_bytes=np.array(self.size, np.float64).reshape(-1, 3),
            communicator=comm,
            source=source,
            issues=np.where(np.array(self.once, bool).reshape(-1, 3), 1,
                            self.micro_batches).astype(np.int64),
        )


def group_comms(placement: Placement, ep: int = 1) -> dict[str, np.ndarray]:
    """Communicator row of each group role under a placement (EP: the innermost ``ep`` NPUs of
    the DP group; EDP: the rest of it, which all-reduces the expert gradients)."""
    ep_f, edp_f = _split_inner(placement.dp, ep)
    return {"tp": Placement.comm(placement.tp), "pp": Placement.comm(placement.pp),
            "dp": Placement.comm(placement.dp), "ep": Placement.comm(ep_f),
            "edp": Placement.comm(edp_f)}


NONE3 = ((_N, 0.0, None),) * 3


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


def transformer_lines(m: Transformer, par: Parallel, npu: Npu) -> _Lines:
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
    lines = _Lines(mb)
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


def _split_inner(factors: Sequence[int], degree: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Splits a group's per-dim factors into an inner sub-group of ``degree`` NPUs (innermost
    first) and the rest."""
    got = parallel_communicators(tuple(int(x) for x in factors), degree)
    if got is None:
        raise LibraInputError(
            f"workload.parallel.ep = {degree} cannot be laid innermost-first on the DP group's "
            f"per-dimension sizes {list(factors)}."
        )
    return tuple(max(g, 1) for g in got[0]), tuple(max(g, 1) for g in got[1])


# --------------------------------------------------------------------------------------------
# ResNet-50
# --------------------------------------------------------------------------------------------


def resnet50_layers(image: int = 224) -> list[tuple[str, int, int, int, int, int]]:
    """ResNet-50 (He et al. 2016, Table 1) convolutions and the classifier:
    (name, in channels, out channels, kernel, output height/width, groups=1), in the shipped
    file's order (a stage's first block lists its projection shortcut ``conv4`` first)."""
    out = [("conv1", 3, 64, 7, image // 2)]
    size = image // 4  # after the stride-2 conv1 and the stride-2 max pool
    cin = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for j in range(1, blocks + 1):
            stride = 2 if (j == 1 and width != 64) else 1
            osize = size // stride
            if j == 1:
                out.append((f"layer_{width}_{j}_conv4", cin, 4 * width, 1, osize))
            out.append((f"layer_{width}_{j}_conv1", cin, width, 1, size if stride == 1 else osize))
            out.append((f"layer_{width}_{j}_conv2", width, width, 3, osize))
            out.append((f"layer_{width}_{j}_conv3", width, 4 * width, 1, osize))
            cin, size = 4 * width, osize
    out.append(("fc1000", 2048, 1000, 1, 1))
    return [(n, ci, co, k, o, 1) for n, ci, co, k, o in out]


def resnet50_workload(model: Mapping[str, Any] | None, par: Parallel, npu: Npu, num_dims: int,
                      prefix: str = "workload") -> Workload:
    """ResNet-50, pure data parallel: per layer 2 * b * H * W * Cin * Cout * k^2 FLOPs forward,
    the same for each backward phase; one all-reduce of every weight (e bytes each; 25,502,912
    conv + fc weights, no biases or batch-norm) on conv1's weight gradient."""
    b = _Block(model, f"{prefix}.model", ("name", "micro_batch", "global_batch",
                                          "bytes_per_element", "image_size"))
    name = as_str(b.get("name"), b.key("name"))
    mbatch = _int(b.get("micro_batch"), b.key("micro_batch"))
    gbatch = _int(b.get("global_batch"), b.key("global_batch"))
    e = _int(b.get("bytes_per_element"), b.key("bytes_per_element"))
    image = _int(b.get("image_size"), b.key("image_size"), 32)
    if par.tp != 1 or par.pp != 1 or par.ep != 1 or par.zero_stage > 1:
        raise LibraInputError(
            f"{prefix}.parallel: the resnet50 generator is data parallel only; got tp = "
            f"{par.tp}, pp = {par.pp}, ep = {par.ep}, zero_stage = {par.zero_stage} (use 1, 1, "
            "1, 0 or 1)."
        )
    mb = _micro_batches(gbatch, mbatch, par.dp, prefix)
    ns = 1.0 / npu.flops_per_ns
    lines = _Lines()
    params = 0
    for lname, ci, co, k, o, _ in resnet50_layers(image):
        fl = 2 * mbatch * o * o * ci * co * k * k * mb * ns
        lines.add(lname, (fl,) * 3)
        params += ci * co * k * k
    lines.set_phase(0, 2, _AR, params * e, "dp")
    return lines.workload(str(name), "generator resnet50", group_comms(par.placement), num_dims)


# --------------------------------------------------------------------------------------------
# DLRM
# --------------------------------------------------------------------------------------------


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
    b = _Block(model, f"{prefix}.model", ("name", "micro_batch", "global_batch",
                                          "bytes_per_element", "num_tables", "embedding_dim",
                                          "bottom_mlp", "top_mlp"))
    name = as_str(b.get("name"), b.key("name"))
    mbatch = _int(b.get("micro_batch"), b.key("micro_batch"))
    gbatch = _int(b.get("global_batch"), b.key("global_batch"))
    e = _int(b.get("bytes_per_element"), b.key("bytes_per_element"))
    tables = _int(b.get("num_tables"), b.key("num_tables"))
    dim = _int(b.get("embedding_dim"), b.key("embedding_dim"))
    bottom = _int_list(b.get("bottom_mlp"), b.key("bottom_mlp"))
    top = _int_list(b.get("top_mlp"), b.key("top_mlp"))
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
    mb = _micro_batches(gbatch, mbatch, par.dp, prefix)
    ns = 1.0 / npu.flops_per_ns
    dp_c = "dp"
    lookup = mbatch * tables * dim * e * mb
    lines = _Lines(mb)
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


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


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


def check_generated(wl: Workload, prefix: str = "workload") -> None:
    """Raises unless a generated workload is within LIMITS: at most ``max_layers`` lines,
    every compute time a finite number of ns <= ``max_ns`` and every collective size a finite
    number of bytes <= ``max_bytes`` (the model keys are each within range, but their
    products, e.g. the gradients of hidden**2 parameters, need not be). The message names the
    line, the phase, the value and the limit."""
    if wl.num_layers > LIMITS.max_layers:
        raise LibraInputError(
            f"{prefix}: the generated workload has {wl.num_layers:,} lines; at most "
            f"{LIMITS.max_layers:,} are supported (LIMITS.max_layers).")
    for values, limit, what, name, keys in (
            (wl.compute_ns, LIMITS.max_ns, "computes for", "ns, LIMITS.max_ns",
             "model sizes and batch, npu.peak_tflops, npu.efficiency, npu.memory_bw_gbps"),
            (wl.size_bytes, LIMITS.max_bytes, "has a collective of", "bytes, LIMITS.max_bytes",
             "model sizes and batch, bytes_per_element")):
        bad = ~((values >= 0) & (values <= limit))
        if bad.any():
            line, phase = (int(i) for i in np.argwhere(bad)[0])
            raise LibraInputError(
                f"{prefix}: the generated line {show(wl.layer_names[line])} "
                f"({PHASES[phase]}) {what} {float(values[line, phase]):g}; at most "
                f"{limit:g} is supported ({name}). Check {prefix}.model / {prefix}.npu "
                f"({keys}).")
