"""Shared vocabulary: shape letters, status codes, enumerations and the input error.

Shape letters used in docstrings and comments throughout the package:
  L  layers of a workload
  P  phases per layer (3: forward, input_grad, weight_grad)
  D  network dimensions
  K  distinct communicating phases of a problem (identical phases merged, with a weight)
  I  linear inequality rows, E  linear equality rows
  B  batch of problems

Units live in names: ``_ns`` / ``_s`` nanoseconds / seconds, ``_bytes`` / ``_gb`` bytes /
1e9 bytes, ``_gbps`` GB/s per NPU (1 GB = 1e9 bytes, so bytes / GB/s = ns), ``_usd`` dollars.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import reprlib

import jax
import numpy as np

PHASES = ("forward", "input_grad", "weight_grad")
COLLECTIVES = ("NONE", "ALLREDUCE", "REDUCESCATTER", "ALLGATHER", "ALLTOALL", "SENDRECV")
#: The collectives ASTRA-sim 1.0 text workloads know (SENDRECV is native-YAML / generator only).
TXT_COLLECTIVES = COLLECTIVES[:5]
BLOCKS = ("Ring", "FullyConnected", "Switch")
BLOCK_ABBREV = {"Ring": "RI", "FullyConnected": "FC", "Switch": "SW"}


class Collective(enum.IntEnum):
    NONE = 0
    ALLREDUCE = 1
    REDUCESCATTER = 2
    ALLGATHER = 3
    ALLTOALL = 4
    SENDRECV = 5  # point-to-point to a neighbour (pipeline stages); m bytes per involved dim


@dataclasses.dataclass(frozen=True)
class StepNode:
    """One node of a training step's dependency graph, as every NPU runs it (all NPUs run
    the same graph; `model/step.py` builds it, `inputs/chakra.py` writes it as Chakra ETs).

    Attributes:
      name: e.g. ``F3`` (forward compute of layer 3), ``TPb3`` / ``C3.input_grad``.
      kind: ``"compute"`` or ``"comm"``.
      deps: indices (into the graph's node list) of the nodes this one waits for.
      duration_ns: compute time (compute nodes), ns.
      collective: `Collective` code (comm nodes; SENDRECV = a shift to the next NPU of
        each involved dimension's group).
      size_bytes: the collective's per-NPU buffer as ASTRA-sim's ET ``comm_size`` counts
        it (all-gather: the per-NPU input shard), bytes.
      involved: [D] whether each network dimension takes part (comm nodes).
      group: [D] NPUs of each dimension in the group (1 where not involved).
    """

    name: str
    kind: str
    deps: tuple[int, ...] = ()
    duration_ns: float = 0.0
    collective: int = 0
    size_bytes: float = 0.0
    involved: tuple[bool, ...] = ()
    group: tuple[int, ...] = ()


class TraceNode(enum.IntEnum):
    """Kinds of an imported trace's nodes (`RankTrace.kind`)."""

    COMPUTE = 0
    COLLECTIVE = 1
    SEND = 2
    RECV = 3


@dataclasses.dataclass(frozen=True)
class CommGroup:
    """The group of NPUs an imported collective runs over. Exactly one of:

    * ``involved``: [D] whole network dimensions (Chakra's ``involved_dim``): the group of an
      NPU is the NPUs that share its coordinates on the dimensions not involved, and the
      collective runs ASTRA-sim's hierarchical algorithm over the involved dimensions;
    * ``ranks``: the NPUs listed for a ``pg_name`` communicator group (ASTRA-sim's
      ``--comm-group-configuration``), in the listed order: a flat ring over them on
      dimension 0's queue. ``name`` is the ``pg_name``.
    """

    name: str
    involved: tuple[bool, ...] | None = None
    ranks: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class RankTrace:
    """One rank's step graph as read from its Chakra ET (``<prefix>.<rank>.et``), as
    parallel arrays over its N kept nodes in ascending ET node id order.

    Attributes:
      rank: the NPU id. path: the file it came from.
      node_id: int64 [N] the ET node ids (errors and logs name them).
      name: the nodes' names (a tuple of N strings).
      kind: int8 [N] `TraceNode` codes.
      duration_ns: float64 [N] compute time (COMPUTE nodes; 0 elsewhere), ns.
      collective: int8 [N] `Collective` code of COLLECTIVE nodes (0 elsewhere).
      size_bytes: float64 [N] ``comm_size`` (COLLECTIVE, SEND, RECV), bytes.
      group: int32 [N] index into `TraceSet.groups` (COLLECTIVE nodes; -1 elsewhere).
      peer: int32 [N] destination NPU (SEND) or source NPU (RECV); -1 elsewhere.
      tag: int64 [N] ``comm_tag`` (SEND / RECV; -1 elsewhere).
      dep_ptr: int64 [N + 1], deps: int32 [E]: node i waits for
        ``deps[dep_ptr[i]:dep_ptr[i + 1]]`` (indices into these arrays; acyclic).
    """

    rank: int
    path: str
    node_id: np.ndarray
    name: tuple
    kind: np.ndarray
    duration_ns: np.ndarray
    collective: np.ndarray
    size_bytes: np.ndarray
    group: np.ndarray
    peer: np.ndarray
    tag: np.ndarray
    dep_ptr: np.ndarray
    deps: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.node_id.shape[0])


@dataclasses.dataclass(frozen=True, eq=False)
class TraceSet:
    """A whole step as a set of per-rank Chakra traces (`inputs.chakra_import.read_chakra`).

    Attributes:
      prefix: the ``<prefix>`` of ``<prefix>.<rank>.et``.
      ranks: one `RankTrace` per NPU, rank order (``ranks[r].rank == r``).
      groups: the collectives' groups (`CommGroup`), referenced by `RankTrace.group`.
      skipped: what was read but not kept, reason -> count (CPU ops, invalid nodes, ...).
      notes: the rules applied while reading, one sentence each, for the log.
    """

    prefix: str
    ranks: tuple
    groups: tuple
    skipped: dict
    notes: tuple = ()

    @property
    def num_ranks(self) -> int:
        return len(self.ranks)


class Block(enum.IntEnum):
    RING = 0
    FULLYCONNECTED = 1
    SWITCH = 2


class Status(enum.IntEnum):
    """Solver outcome codes. Inside jit results carry these ints; nothing raises."""

    OK = 0
    NOT_CONVERGED = 1
    INFEASIBLE = 2
    NONFINITE = 3


STATUS_NAMES = {
    Status.OK: "ok",
    Status.NOT_CONVERGED: "not converged",
    Status.INFEASIBLE: "infeasible",
    Status.NONFINITE: "non-finite",
}


class Choice(str, enum.Enum):
    """A choice field of a config schema (`cli.config`, the scan's `studies.scan.config`):
    Hydra rejects any other value when it composes.

    Members are named by their value, compare equal to it and hash like it
    (``cfg.objective == "perf"``), and print as it (``str``, f-strings, ``repr``, JSON), so
    code past the config sees the plain strings the model modules check against.
    """

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)


class LibraInputError(ValueError):
    """Bad user input. The message names the file or field, the line where there is one,
    and the offending value (rendered by :func:`show`), in one paragraph (the CLI prints it
    without a traceback)."""


#: Longest rendering of a value that a message quotes (characters).
SHOW_CHARS = 80


class _ShortRepr(reprlib.Repr):
    """``repr`` with bounded work and length: at most a few levels and items of a container,
    so a value shared many times over (a YAML alias bomb) or a 60 MB string costs nothing to
    quote; integers too long for ``repr`` (Python refuses over 4,300 digits) are described."""

    def __init__(self):
        super().__init__()
        self.maxlevel, self.maxlist, self.maxtuple, self.maxdict = 3, 8, 8, 6
        self.maxset = self.maxfrozenset = self.maxdeque = self.maxarray = 8
        self.maxstring, self.maxother, self.maxlong = SHOW_CHARS, SHOW_CHARS, 40

    def repr1(self, x, level):
        if isinstance(x, np.generic):  # np.float64(5.0) -> 5.0, as the user wrote it
            x = x.item()
        return super().repr1(x, level)

    def repr_int(self, x, level):
        if x.bit_length() > 128:  # ~39 digits: say how long instead of printing it
            digits = int(x.bit_length() * math.log10(2)) + 1
            return f"{'-' if x < 0 else ''}<an integer of about {digits} digits>"
        return super().repr_int(x, level)

    def repr_dict(self, x, level):  # insertion order, like repr (reprlib sorts the keys)
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        items = [f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
                 for k, v in list(x.items())[:self.maxdict]]
        return "{" + ", ".join(items) + (", ..." if len(x) > self.maxdict else "") + "}"


_SHORT_REPR = _ShortRepr()


def clip(text: str, limit: int = SHOW_CHARS) -> str:
    """A name (a file's key, a tier) to quote without quotes: at most ``limit`` characters."""
    if not isinstance(text, str):
        return show(text, limit)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def show(value, limit: int = SHOW_CHARS) -> str:
    """The ``repr`` of ``value`` for a message: at most ``limit`` characters (cut with
    ``...``), computed in bounded time and memory whatever the value is."""
    try:
        text = _SHORT_REPR.repr(value)
    except Exception:  # noqa: BLE001 -- a value whose repr fails is named by its type
        text = f"<{type(value).__name__}>"
    if "\n" in text:  # numpy arrays print over lines: one paragraph
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


PATH_CHARS = 4096  # PATH_MAX on Linux: a path in a message is quoted whole up to this


def show_path(path) -> str:
    """A file or folder path quoted for a message: whole (the user must find it), unlike
    ``show``, which elides long strings; only a path longer than ``PATH_CHARS`` is cut."""
    text = str(path)
    return repr(text) if len(text) <= PATH_CHARS else repr(text[:PATH_CHARS - 3] + "...")


#: XLA options of the package's compiled functions. XLA's CPU "fusion emitters" (MLIR
#: code generation of fused loops, XLA's default since 2025) take twice the compile time of
#: the classic emitters on the solvers' many small fusions, for no faster code: the batch
#: kernel of bucket (8, 8, 1, 1, 0, 0) at 256 problems compiled in 14.6-15.5 CPU-s with
#: them and 7.5-8.4 CPU-s without, and ran 0.037-0.041 s vs 0.041-0.047 s (same run, 2
#: cores; results equal to the last bit or two). Only where the backend's XLA knows them:
#: see :func:`compiler_options`.
COMPILER_OPTIONS = {"xla_cpu_use_fusion_emitters": False}


@functools.cache
def compiler_options() -> dict:
    """:data:`COMPILER_OPTIONS` if the default backend's XLA accepts them, else ``{}``.

    The options only speed up compilation on the CPU; they never change a result. XLA
    rejects an option it does not know ("No such compile option"), and which it knows
    depends on the backend and the jaxlib: the CUDA plugin of jax 0.11.2 rejects
    ``xla_cpu_use_fusion_emitters``, and every kernel failed to compile on an H200. So the
    first compiled call of the process compiles an identity with them once (a few ms) and
    keeps them only if that compiles."""
    try:
        jax.jit(lambda x: x, compiler_options=COMPILER_OPTIONS).lower(
            np.float32(0)).compile()
    except jax.errors.JaxRuntimeError:
        return {}
    return dict(COMPILER_OPTIONS)


class _Jit:
    """``jax.jit(fun, compiler_options=compiler_options(), **kwargs)``, built at the first
    call or attribute (``trace``, ``lower``, ...), when the backend can be asked."""

    def __init__(self, fun, kwargs):
        functools.update_wrapper(self, fun)
        self._fun, self._kwargs, self._jitted = fun, kwargs, None

    def _get(self):
        if self._jitted is None:
            self._jitted = jax.jit(self._fun, compiler_options=compiler_options() or None,
                                   **self._kwargs)
        return self._jitted

    def __call__(self, *args, **kwargs):
        return self._get()(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_fun", "_kwargs", "_jitted"):
            raise AttributeError(name)
        return getattr(self._get(), name)

    def __reduce__(self):  # pickled by reference, as a module-level function is
        return _module_attr, (self.__module__, self.__qualname__)


def _module_attr(module: str, qualname: str):
    import importlib  # noqa: PLC0415
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def jit(fun=None, **kwargs):
    """``jax.jit(fun, **kwargs)`` with :func:`compiler_options` (a decorator, alone or as
    ``jit(static_argnames=...)``), for the package's top-level compiled functions (the
    solver kernels; JAX accepts compile options on the outermost jit only, so functions
    also called inside another jit keep ``jax.jit``). JAX's global settings are left
    alone."""
    if fun is None:
        return functools.partial(jit, **kwargs)
    return _Jit(fun, kwargs)


def float64(fn):
    """Runs ``fn`` with JAX's float64 switched on, for that call only.

    The solvers certify gaps of 1e-6 and violations of 1e-9, which need float64. Rather than
    flip JAX's global default when a module is imported (which would change every user's
    dtype), each public solver entry point carries this decorator, and so does each
    command's Hydra ``main`` (`libra_jax.cli.train`, `.evaluate`, `.scan`).
    Kernels asked for ``dtype=float32`` still run in float32 inside.
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with jax.enable_x64(True):
            return fn(*args, **kwargs)

    return wrapper
