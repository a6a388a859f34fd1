"""What every workload generator shares: the validated ``workload.npu`` and
``workload.parallel`` blocks (the NPU, the degrees and their placement on the network), the
key readers that name ``workload.<block>.<key>`` in their messages, the line builder
(:class:`Lines`: lines with group roles, communicators laid from a placement at the end) and
the check of a generated workload against LIMITS.

The generators (``transformer``, ``resnet``, ``dlrm``) and the entry point
:func:`libra_jax.inputs.generators.generate` build on it; the package docstring says what a
generated workload stands for.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_int, as_real
from libra_jax.inputs.workload import Workload
from libra_jax.types import BLOCK_ABBREV, PHASES, Collective, LibraInputError, show

RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
_N = int(Collective.NONE)


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
#: the workload generated is then checked against LIMITS (`check_generated`).
MAX_INT = 2**31
#: Largest real a model or NPU key may be (peak TFLOP/s, memory GB, bytes per parameter);
#: ``memory_bw_gbps`` has LIMITS.max_gbps.
MAX_REAL = 1e12


def read_int(value: Any, key: str, minimum: int = 1, maximum: int = MAX_INT) -> int:
    """An integer in [minimum, maximum] (bools, strings and fractions are not; an integral
    float such as 8.0 is, and 1e300 is out of range)."""
    return as_int(value, key, minimum, maximum)


def read_pos(value: Any, key: str, allow_zero: bool = False, maximum: float = MAX_REAL) -> float:
    """A finite number in (0, maximum] ([0, maximum] with ``allow_zero``)."""
    return as_real(value, key, 0.0, maximum, lo_open=not allow_zero)


def read_int_list(value: Any, key: str, minimum: int = 1) -> list[int]:
    if isinstance(value, (list, tuple)) and len(value) > LIMITS.max_layers:
        raise LibraInputError(
            f"{key}: {len(value):,} entries; at most {LIMITS.max_layers:,} are supported "
            "(LIMITS.max_layers).")
    if not isinstance(value, (list, tuple)) or not value:
        raise LibraInputError(f"{key} = {show(value)}: expected a non-empty list of integers.")
    return [read_int(v, f"{key}[{i}]", minimum) for i, v in enumerate(value)]


class Block:
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
        b = Block(data, prefix, ("peak_tflops", "efficiency", "memory_gb", "memory_bw_gbps"))
        eff = read_pos(b.get("efficiency"), b.key("efficiency"))
        if eff > 1:
            raise LibraInputError(f"{b.key('efficiency')} = {eff}: must be in (0, 1].")
        mem = b.get("memory_gb", None)
        mbw = b.get("memory_bw_gbps", None)
        return Npu(read_pos(b.get("peak_tflops"), b.key("peak_tflops")), eff,
                   None if mem is None else read_pos(mem, b.key("memory_gb")),
                   None if mbw is None else read_pos(mbw, b.key("memory_bw_gbps"),
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
    f = {g: read_int_list(value[g], f"{key}.{g}") for g in ("tp", "pp", "dp")}
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
        b = Block(data, prefix, Parallel._KEYS)
        tp, pp, dp = (read_int(b.get(k), b.key(k), maximum=LIMITS.max_npus)
                      for k in ("tp", "pp", "dp"))
        ep = read_int(b.get("ep", 1), b.key("ep"), maximum=LIMITS.max_npus)
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


def micro_batches(global_batch: int, micro_batch: int, dp: int, prefix: str) -> int:
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


class Lines:
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


NONE3 = ((_N, 0.0, None),) * 3


def group_comms(placement: Placement, ep: int = 1) -> dict[str, np.ndarray]:
    """Communicator row of each group role under a placement (EP: the innermost ``ep`` NPUs of
    the DP group; EDP: the rest of it, which all-reduces the expert gradients)."""
    ep_f, edp_f = _split_inner(placement.dp, ep)
    return {"tp": Placement.comm(placement.tp), "pp": Placement.comm(placement.pp),
            "dp": Placement.comm(placement.dp), "ep": Placement.comm(ep_f),
            "edp": Placement.comm(edp_f)}


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
