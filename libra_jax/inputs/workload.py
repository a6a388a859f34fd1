"""Training workloads: per layer and phase, compute time and one collective.

Each of the L layers has P = 3 phases (``types.PHASES``: forward, input_grad,
weight_grad); each phase has a compute time (ns), a collective (``types.Collective``),
its size (bytes) and a communicator: for each of the D network dimensions, how many NPUs
of that dimension take part, or -1 when the dimension is not involved (LIBRA, Won et al.
ISPASS 2024, Sec. IV-A).

Two input formats, chosen by file suffix in :func:`load_workload`:

* ``.txt`` -- ASTRA-sim 1.0 layer lines, with or without the two header lines; the
  communicator comes from a LIBRA communicator YAML (:func:`load_communicator`), one row
  per phase kind, shared by all layers.
* ``.yaml`` / ``.yml`` -- the native format, one entry per layer with its own
  communicators.

All parsing and validation is host-side numpy; errors are
:class:`~libra_jax.types.LibraInputError` naming the file, line or field, and the value.

The file formats themselves are parsed in `workload_formats.py`; here the `Workload`, the
communicator file, the loader that picks the format, and the check against a network.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from libra_jax.inputs.limits import LIMITS, as_instance, as_int, as_path
from libra_jax.inputs.reading import SMALL_FILE_NODES, read_yaml_mapping
from libra_jax.inputs.topology import Network
from libra_jax.inputs.workload_formats import communicator_row, parse_txt, parse_yaml
from libra_jax.types import PHASES, LibraInputError, show

# Communicator YAML key of each phase, in types.PHASES order.
COMMUNICATOR_KEYS = ("Forward", "InputGrad", "WeightGrad")


@dataclasses.dataclass(frozen=True)
class Workload:
    """A workload: L layers x 3 phases.

    Attributes:
      name: workload name (file stem for text workloads).
      layer_names: [L] layer names (a layer repeated with ``count`` repeats its name).
      compute_ns: [L, 3] float64 compute time of each phase, ns, in ``types.PHASES``
        order.
      collective: [L, 3] int32 ``types.Collective`` code of each phase.
      size_bytes: [L, 3] float64 collective size, bytes (kept as given for NONE phases).
      communicator: [L, 3, D] int32 NPUs of each dimension taking part; -1 = not
        involved.
      source: the file the workload came from (and its communicator file), for
        messages.
      issues: [L, 3] int, how many times each phase's collective is issued per step, each
        time with size_bytes / issues bytes (e.g. once per micro-batch), or None for once.
        LIBRA's model depends only on the total (traffic is linear in size); latency-aware
        models pay the per-collective latency that many times (`timing.py`).
    """

    name: str
    layer_names: tuple[str, ...]
    compute_ns: np.ndarray
    collective: np.ndarray
    size_bytes: np.ndarray
    communicator: np.ndarray
    source: str
    issues: np.ndarray | None = None

    @property
    def num_layers(self) -> int:
        """L."""
        return self.compute_ns.shape[0]

    @property
    def num_dims(self) -> int:
        """D, the length of every communicator."""
        return self.communicator.shape[-1]


# ------------------------------------------------------------------- communicator


def load_communicator(path: str | os.PathLike) -> np.ndarray:
    """Loads a LIBRA communicator YAML.

    Example::

        Forward: [ 4, 4, -1, -1 ]
        InputGrad: [ 4, 4, -1, -1 ]
        WeightGrad: [ -1, 2, 4, 32 ]

    All three keys are required, with lists of the same length D; entries are -1 or
    >= 1.

    Args:
      path: the YAML file.

    Returns:
      [3, D] int32, rows in ``types.PHASES`` order.

    Raises:
      LibraInputError: unreadable or invalid file, missing or unknown keys, rows of
        different lengths, entries that are not integers, 0 or < -1.
    """
    path = as_path(path, "path")
    data = read_yaml_mapping(path, "communicator", allowed=COMMUNICATOR_KEYS,
                             max_nodes=SMALL_FILE_NODES)
    rows = []
    for key in COMMUNICATOR_KEYS:
        if key not in data:
            raise LibraInputError(
                f"{path}: missing key {show(key)} in the communicator file (needs "
                f"{', '.join(COMMUNICATOR_KEYS)})."
            )
        rows.append(communicator_row(data[key], path, key, None))
    lengths = [len(r) for r in rows]
    if len(set(lengths)) != 1:
        raise LibraInputError(
            f"{path}: the communicator rows have different lengths "
            + ", ".join(
                f"{k}: {n}" for k, n in zip(COMMUNICATOR_KEYS, lengths, strict=False)
            )
            + "; each needs one entry per network dimension."
        )
    return np.stack(rows)


def _communicator_for(
    communicator_file: str | os.PathLike | None, num_dims: int | None
) -> np.ndarray | None:
    if communicator_file is None:
        return None
    comm = load_communicator(communicator_file)
    if num_dims is not None and comm.shape[1] != num_dims:
        raise LibraInputError(
            f"{os.fspath(communicator_file)}: communicator rows have {comm.shape[1]} "
            "entries "
            f"but the network has {num_dims} dimensions."
        )
    return comm


# ------------------------------------------------------------------------- public


def load_workload(
    path: str | os.PathLike,
    communicator_file: str | os.PathLike | None = None,
    num_dims: int | None = None,
) -> Workload:
    """Loads a workload; the file suffix picks the format.

    ``.txt`` -- ASTRA-sim 1.0 text. Optional header: a parallelism line (e.g. ``DATA``,
    ``HYBRID_TRANSFORMER``) followed by a line holding only the layer count (which must
    match). Then one line per layer of 12 whitespace-separated fields::

        name reserved fwd_compute fwd_comm fwd_size ig_compute ig_comm ig_size
        wg_compute wg_comm wg_size update

    Collective names are case-insensitive; ``reserved`` and ``update`` are ignored, as
    in the reference. Blank lines are skipped. Needs ``communicator_file``, whose rows
    apply to every layer.

    ``.yaml`` / ``.yml`` -- native format::

        name: my_model            # optional, default: file stem
        layers:
          - name: attn
            count: 2              # optional, default 1: repeat the layer count times
            forward:     {compute_ns: 9375000, collective: ALLREDUCE,
                          size_bytes: 805306368, communicator: [4, 4, -1, -1]}
            input_grad:  {compute_ns: 9375000, collective: NONE}
            weight_grad: {compute_ns: 9375000, collective: ALLREDUCE,
                          size_bytes: 452984832, communicator: [-1, 2, 4, 32]}

    ``compute_ns`` and ``collective`` are required in every phase; ``size_bytes`` is
    required unless the collective is NONE (then it defaults to 0). A phase without its
    own ``communicator`` takes the ``communicator_file`` row of its phase kind; a NONE
    phase with neither gets all -1; any other phase with neither is an error.

    Args:
      path: the workload file.
      communicator_file: LIBRA communicator YAML (required for ``.txt``).
      num_dims: expected D (from the network), checked against every communicator.

    Returns:
      The workload.

    Raises:
      LibraInputError: unreadable file, unknown suffix, malformed lines (field count,
        non-numeric values), negative times or sizes, unknown collective names, missing
        keys, bad communicators or communicator lengths that disagree with ``num_dims``.
    """
    path = as_path(path, "path")
    suffix = os.path.splitext(path)[1].lower()
    if num_dims is not None:
        num_dims = as_int(num_dims, f"{path}: num_dims", 1, LIMITS.max_dims)
    comm_source = (
        as_path(communicator_file, "communicator_file")
        if communicator_file is not None else None
    )
    if suffix == ".txt":
        if communicator_file is None:
            raise LibraInputError(
                f"{path}: a text (ASTRA-sim) workload needs a communicator file "
                "giving, per "
                "phase kind, the NPUs of each dimension taking part; none was given."
            )
        if not os.path.isfile(path):
            raise LibraInputError(
                f"{path}: cannot read the workload file (no such file)."
            )
        names, compute, coll, size = parse_txt(path)
        comm_rows = _communicator_for(communicator_file, num_dims)
        comm = np.broadcast_to(comm_rows[None], (len(names), *comm_rows.shape)).copy()
        name = os.path.splitext(os.path.basename(path))[0]
    elif suffix in (".yaml", ".yml"):
        if not os.path.isfile(path):
            raise LibraInputError(
                f"{path}: cannot read the workload file (no such file)."
            )
        file_comm = _communicator_for(communicator_file, num_dims)
        name, names, compute, coll, size, comm = parse_yaml(path, file_comm, num_dims)
    else:
        raise LibraInputError(
            f"{path}: unknown workload file type {show(suffix or '(no suffix)')}; expected "
            ".txt "
            "(ASTRA-sim text) or .yaml / .yml (native)."
        )
    source = path if comm_source is None else f"{path} (communicator {comm_source})"
    return Workload(
        name=name,
        layer_names=tuple(names),
        compute_ns=compute,
        collective=coll,
        size_bytes=size,
        communicator=comm,
        source=source,
    )


def check_workload_network(workload: Workload, network: Network) -> None:
    """Checks that a workload's communicators fit a network.

    Every communicator must have one entry per network dimension, each -1 (not involved)
    or between 1 and ``network.npus[d]``.

    Args:
      workload: the workload.
      network: the network it runs on.

    Raises:
      LibraInputError: naming the layer, phase kind, dimension and value of the first
        bad entry, or both lengths when they differ.
    """
    as_instance(workload, Workload, "workload")
    as_instance(network, Network, "network")
    comm = np.asarray(workload.communicator)
    if comm.ndim != 3 or comm.shape[1] != len(PHASES):
        raise LibraInputError(
            f"{workload.source}: communicator has shape {comm.shape}; expected [L, 3, "
            "D]."
        )
    if comm.shape[-1] != network.num_dims:
        raise LibraInputError(
            f"{workload.source}: communicators have {comm.shape[-1]} entries but the "
            "network "
            f"{network.notation} ({network.source}) has {network.num_dims} dimensions."
        )
    npus = np.asarray(network.npus)
    bad = ~((comm == -1) | ((comm >= 1) & (comm <= npus)))
    if bad.any():
        layer, phase, d = (int(x) for x in np.argwhere(bad)[0])
        value = int(comm[layer, phase, d])
        raise LibraInputError(
            f"{workload.source}: layer {layer} ({workload.layer_names[layer]}), "
            f"{PHASES[phase]} ({COMMUNICATOR_KEYS[phase]}) communicator "
            f"{comm[layer, phase].tolist()}: "
            f"entry for dimension {d} is {value}, but it must be -1 or between 1 and "
            f"{int(npus[d])} (the NPUs of dimension {d} in {network.notation}, "
            f"{network.source})."
        )
