"""A workload file's two formats parsed into arrays, every field checked: ASTRA-sim 1.0 text
(`parse_txt`) and the native YAML (`parse_yaml`), with the checks of a number, a collective
name and a communicator row they share (`workload.py`'s module docstring describes both).

Split from `workload.py`, which picks the format (`load_workload`) and builds the `Workload`.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from typing import Any

import numpy as np

from libra_jax.inputs.limits import LIMITS, real_or_none
from libra_jax.inputs.reading import read_text, read_yaml_mapping
from libra_jax.types import (
    COLLECTIVES,
    PHASES,
    TXT_COLLECTIVES,
    Collective,
    LibraInputError,
    show,
)

_NUM_TXT_FIELDS = 12
_TXT_LAYOUT = (
    "name reserved fwd_compute fwd_comm fwd_size ig_compute ig_comm ig_size "
    "wg_compute wg_comm wg_size update"
)
_PHASE_KEYS = ("compute_ns", "collective", "size_bytes", "communicator")
_LAYER_KEYS = ("name", "count", *PHASES)
_WORKLOAD_KEYS = ("name", "layers")


# ------------------------------------------------------------------------ helpers


def _limit_of(what: str) -> tuple[float, str]:
    """The magnitude limit of a workload number: times (``compute``) in ns, sizes in bytes."""
    if "compute" in what:
        return LIMITS.max_ns, "ns"
    return LIMITS.max_bytes, "bytes"


def _in_range(value: float, shown: str, where: str, what: str) -> float:
    """``value`` if finite, >= 0 and within its limit (:func:`_limit_of`)."""
    if not math.isfinite(value):
        raise LibraInputError(f"{where}: {what} = {shown} is not a finite number.")
    if value < 0:
        raise LibraInputError(f"{where}: {what} = {shown} is negative; it must be >= 0.")
    limit, unit = _limit_of(what)
    if value > limit:
        raise LibraInputError(
            f"{where}: {what} = {shown} is beyond the limit of {limit:g} {unit}.")
    return value


def _number(value: Any, where: str, what: str) -> float:
    """A finite number >= 0, within its limit, as float (YAML value)."""
    x = real_or_none(value)
    if x is None:
        raise LibraInputError(f"{where}: {what} = {show(value)} is not a finite number.")
    return _in_range(x, show(value), where, what)


def _text_number(token: str, where: str, what: str) -> float:
    """A finite number >= 0, within its limit, parsed from a text token."""
    try:
        if not token.isascii():  # float() reads other scripts' digits; ASTRA-sim does not
            raise ValueError(token)
        value = float(token)
    except ValueError:
        raise LibraInputError(
            f"{where}: {what} = {show(token)} is not a number.") from None
    return _in_range(value, show(token), where, what)


def _collective_code(
    name: Any, where: str, what: str, known: tuple[str, ...] = COLLECTIVES
) -> int:
    """The ``Collective`` code of a name among ``known`` (text files: ``TXT_COLLECTIVES``)."""
    if isinstance(name, str) and name.strip().upper() in known:
        return int(Collective[name.strip().upper()])
    raise LibraInputError(
        f"{where}: {what} = {show(name)} is not a known collective; expected one of "
        f"{', '.join(known)} (case-insensitive)."
    )


def communicator_row(
    value: Any, where: str, what: str, num_dims: int | None
) -> np.ndarray:
    """One communicator [D]: ints, each -1 or >= 1.

    Upper bounds are checked against a network in :func:`check_workload_network`.
    """
    if not isinstance(value, (list, tuple)) or not value:
        raise LibraInputError(
            f"{where}: {what} = {show(value)}; expected a non-empty list with one entry "
            "per "
            "network dimension (NPUs taking part, or -1)."
        )
    if len(value) > LIMITS.max_dims:
        raise LibraInputError(
            f"{where}: {what} has {len(value):,} entries; networks have at most "
            f"{LIMITS.max_dims} dimensions.")
    row = []
    for d, g in enumerate(value):
        if isinstance(g, bool) or not isinstance(g, numbers.Integral):
            raise LibraInputError(
                f"{where}: {what}[{d}] = {show(g)} is not an integer; use the number of "
                "NPUs of "
                "that dimension taking part, or -1 when the dimension is not involved."
            )
        if g > LIMITS.max_npus_per_dim:
            raise LibraInputError(
                f"{where}: {what}[{d}] = {show(g)}; a dimension has at most "
                f"{LIMITS.max_npus_per_dim:,} NPUs."
            )
        if g == 0 or g < -1:
            raise LibraInputError(
                f"{where}: {what}[{d}] = {g}; an entry must be -1 (dimension not "
                "involved) or "
                "a number of NPUs >= 1."
            )
        row.append(int(g))
    if num_dims is not None and len(row) != num_dims:
        raise LibraInputError(
            f"{where}: {what} = {list(value)} has {len(row)} entries but the network "
            "has "
            f"{num_dims} dimensions."
        )
    return np.array(row, dtype=np.int32)


# -------------------------------------------------------------------- text format


def parse_txt(path: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """An ASTRA-sim 1.0 text workload (its optional header checked against its lines):
    (layer names, compute_ns [L, 3], collective [L, 3], size_bytes [L, 3])."""
    raw = read_text(path, "workload").splitlines()
    lines = [(i + 1, line.split()) for i, line in enumerate(raw) if line.strip()]
    if not lines:
        raise LibraInputError(f"{path}: the workload file has no layer lines.")

    # Header: a parallelism line (e.g. "DATA", "HYBRID_TRANSFORMER_FWD_IN_BCKWD
    # model_parallel_NPU_group: 16") then a line holding only the layer count.
    expected_layers = None
    if (
        len(lines) >= 2
        and len(lines[1][1]) == 1
        and len(lines[0][1]) != _NUM_TXT_FIELDS
    ):
        (l1, head), (l2, count) = lines[0], lines[1]
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", head[0]):
            raise LibraInputError(
                f"{path}, line {l1}: expected a parallelism line such as 'DATA' or "
                f"'HYBRID_TRANSFORMER', got {show(' '.join(head))}."
            )
        if not re.fullmatch(r"[0-9]+", count[0]):
            raise LibraInputError(
                f"{path}, line {l2}: expected the number of layers (an integer) after "
                "the "
                f"parallelism line, got {show(count[0])}."
            )
        if len(count[0]) > 12 or int(count[0]) > LIMITS.max_layers:
            raise LibraInputError(
                f"{path}, line {l2}: the header says {show(count[0], 40)} layers; at most "
                f"{LIMITS.max_layers:,} are supported.")
        expected_layers = int(count[0])
        lines = lines[2:]
        if not lines:
            raise LibraInputError(f"{path}: the workload file has no layer lines.")

    if len(lines) > LIMITS.max_layers:
        raise LibraInputError(
            f"{path}: {len(lines):,} layer lines; at most {LIMITS.max_layers:,} layers are "
            "supported.")
    names, compute, coll, size = [], [], [], []
    for lineno, fields in lines:
        where = f"{path}, line {lineno}"
        if len(fields) != _NUM_TXT_FIELDS:
            hint = ""
            if lineno == 1 or (expected_layers is None and len(fields) == 1):
                hint = (
                    " (a header needs both a parallelism line and a layer-count line)"
                )
            raise LibraInputError(
                f"{where}: expected {_NUM_TXT_FIELDS} whitespace-separated fields "
                f"({_TXT_LAYOUT}), got {len(fields)}: {show(' '.join(fields))}{hint}."
            )
        names.append(fields[0])
        c_row, k_row, s_row = [], [], []
        for p, phase in enumerate(PHASES):
            base = 2 + 3 * p
            c_row.append(
                _text_number(
                    fields[base], where, f"{phase} compute time (field {base + 1})"
                )
            )
            k_row.append(
                _collective_code(
                    fields[base + 1], where, f"{phase} collective (field {base + 2})",
                    TXT_COLLECTIVES,
                )
            )
            s_row.append(
                _text_number(
                    fields[base + 2], where, f"{phase} size (field {base + 3})"
                )
            )
        compute.append(c_row)
        coll.append(k_row)
        size.append(s_row)
    if expected_layers is not None and expected_layers != len(names):
        raise LibraInputError(
            f"{path}: the header says {expected_layers} layers but the file has "
            f"{len(names)} layer lines."
        )
    return (
        names,
        np.array(compute, dtype=np.float64),
        np.array(coll, dtype=np.int32),
        np.array(size, dtype=np.float64),
    )


# -------------------------------------------------------------------- YAML format


def parse_yaml(
    path: str, file_comm: np.ndarray | None, num_dims: int | None
) -> tuple[str, list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A native YAML workload, ``count`` repeats expanded: (name, layer names, compute_ns,
    collective, size_bytes [L, 3], communicator [L, 3, D]); a phase without its own
    communicator takes ``file_comm``'s row of its kind."""
    data = read_yaml_mapping(path, "workload", allowed=_WORKLOAD_KEYS)
    name = data.get("name", os.path.splitext(os.path.basename(path))[0])
    if not isinstance(name, str) or not name:
        raise LibraInputError(f"{path}: name = {show(name)}; expected a non-empty string.")
    if "layers" not in data:
        raise LibraInputError(f"{path}: missing key 'layers' (the list of layers).")
    layers = data["layers"]
    if not isinstance(layers, list) or not layers:
        raise LibraInputError(
            f"{path}: layers = {show(layers)}; expected a non-empty list."
        )

    dims = (
        num_dims
        if num_dims is not None
        else (file_comm.shape[1] if file_comm is not None else None)
    )
    names: list[str] = []
    compute, coll, size = [], [], []
    comms: list[list[np.ndarray | None]] = []
    counts = []
    total_layers = 0
    for i, layer in enumerate(layers):
        where = f"{path}: layers[{i}]"
        if not isinstance(layer, dict):
            raise LibraInputError(f"{where} = {show(layer)}; expected a mapping.")
        unknown = [k for k in layer if k not in _LAYER_KEYS]
        if unknown:
            raise LibraInputError(
                f"{where}: unknown key {show(unknown[0])}; allowed keys are "
                f"{', '.join(_LAYER_KEYS)}."
            )
        if "name" not in layer:
            raise LibraInputError(f"{where}: missing key 'name'.")
        lname = layer["name"]
        if (not isinstance(lname, (str, int)) or isinstance(lname, bool) or lname == ""
                or (isinstance(lname, int) and abs(lname) >= 10**18)):
            raise LibraInputError(
                f"{where}: name = {show(lname)}; expected a non-empty string."
            )
        lname = str(lname)
        where = f"{path}: layers[{i}] ({lname if len(lname) <= 40 else lname[:37] + '...'})"
        count = layer.get("count", 1)
        if (
            isinstance(count, bool)
            or not isinstance(count, numbers.Integral)
            or count < 1
        ):
            raise LibraInputError(
                f"{where}: count = {show(count)}; expected an integer >= 1."
            )
        total_layers += count
        if total_layers > LIMITS.max_layers:
            so_far = f" makes {total_layers:,} layers" if count < total_layers else ""
            raise LibraInputError(
                f"{where}: count = {show(count)}{so_far}; a workload has at most "
                f"{LIMITS.max_layers:,} layers.")
        c_row, k_row, s_row, g_row = [], [], [], []
        for phase in PHASES:
            if phase not in layer:
                raise LibraInputError(
                    f"{where}: missing key {show(phase)} (every layer needs "
                    f"{', '.join(PHASES)})."
                )
            ph = layer[phase]
            pwhere = f"{where}.{phase}"
            if not isinstance(ph, dict):
                raise LibraInputError(
                    f"{pwhere} = {show(ph)}; expected a mapping with compute_ns, "
                    "collective, "
                    "size_bytes, communicator."
                )
            unknown = [k for k in ph if k not in _PHASE_KEYS]
            if unknown:
                raise LibraInputError(
                    f"{pwhere}: unknown key {show(unknown[0])}; allowed keys are "
                    f"{', '.join(_PHASE_KEYS)}."
                )
            for key in ("compute_ns", "collective"):
                if key not in ph:
                    raise LibraInputError(f"{pwhere}: missing key {show(key)}.")
            c_row.append(_number(ph["compute_ns"], pwhere, "compute_ns"))
            code = _collective_code(ph["collective"], pwhere, "collective")
            k_row.append(code)
            if "size_bytes" in ph:
                s_row.append(_number(ph["size_bytes"], pwhere, "size_bytes"))
            elif code == Collective.NONE:
                s_row.append(0.0)
            else:
                raise LibraInputError(
                    f"{pwhere}: missing key 'size_bytes' for collective "
                    f"{COLLECTIVES[code]}."
                )
            if "communicator" in ph:
                row = communicator_row(
                    ph["communicator"], pwhere, "communicator", dims
                )
                if dims is None:
                    dims = len(row)
                g_row.append(row)
            else:
                g_row.append(None)
        names.append(lname)
        compute.append(c_row)
        coll.append(k_row)
        size.append(s_row)
        comms.append(g_row)
        counts.append(int(count))

    if dims is None:
        raise LibraInputError(
            f"{path}: no phase has a communicator and neither a communicator file nor "
            "the "
            "number of network dimensions was given, so the communicator length is "
            "unknown."
        )
    comm = np.full((len(names), len(PHASES), dims), -1, dtype=np.int32)
    for i, g_row in enumerate(comms):
        for p, g in enumerate(g_row):
            if g is not None:
                comm[i, p] = g
            elif file_comm is not None:
                comm[i, p] = file_comm[p]
            elif coll[i][p] != Collective.NONE:
                raise LibraInputError(
                    f"{path}: layers[{i}] ({names[i]}).{PHASES[p]}: collective "
                    f"{COLLECTIVES[coll[i][p]]} has no communicator (give "
                    "'communicator' or a "
                    "communicator file)."
                )
    reps = np.array(counts)
    return (
        name,
        [n for n, c in zip(names, counts, strict=False) for _ in range(c)],
        np.repeat(np.array(compute, dtype=np.float64), reps, axis=0),
        np.repeat(np.array(coll, dtype=np.int32), reps, axis=0),
        np.repeat(np.array(size, dtype=np.float64), reps, axis=0),
        np.repeat(comm, reps, axis=0),
    )
