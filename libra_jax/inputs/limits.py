"""What an input may be: the physical limits every loader checks, and the typed checks of
the public API's arguments.

Every number that reaches the model is checked against a limit that says what is physical
(:data:`LIMITS`) *before* any arithmetic is done with it, so nothing overflows later: a
network of 10**40 NPUs, a collective of 1e300 bytes or a price of 1e308 $ per GB/s is refused
with a message naming the field, the value (short, :func:`~libra_jax.types.show`) and the
limit, instead of a cost or a step time that is not finite. The limits are far above any
machine built or planned (the largest training clusters have ~10**5 accelerators, ~10**3 GB/s
per accelerator and dimension), and far below where float64 arithmetic loses its way (every
product the model forms stays below ~1e60).

The ``as_*`` functions are the one way to check an argument's type: a bool is not a number,
a string is not a number, a mapping is not a list, and each raises
:class:`~libra_jax.types.LibraInputError` naming the argument.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from libra_jax.types import LibraInputError, show

#: Environment variable that raises (or lowers) the file-size limit, in MB (1e6 bytes).
MAX_FILE_MB_ENV = "LIBRA_JAX_MAX_FILE_MB"


@dataclasses.dataclass(frozen=True)
class Limits:
    """The limits of :data:`LIMITS` (README, "Input limits").

    Attributes:
      max_file_mb: largest input file read (MB, 1e6 bytes); ``LIBRA_JAX_MAX_FILE_MB``
        overrides it.
      max_yaml_depth: deepest nesting of YAML collections (LIBRA's files nest 2-4 deep).
      max_yaml_nodes: most YAML nodes in a document, aliases counted at the size of what
        they repeat (a "billion laughs" bomb is refused before anything expands it).
      max_dims: most network dimensions.
      max_npus_per_dim: most NPUs in one dimension.
      max_npus: most NPUs in a network (product over the dimensions).
      max_layers: most layers of a workload (after each layer's ``count``).
      max_bytes: largest collective size, bytes (1 EB).
      max_ns: longest time (compute, latency, delay), ns (~31.7 years).
      max_usd_per_gbps: highest component price, $ per GB/s.
      max_usd: largest cost budget, $.
      max_w: largest power (a cap, an NPU's power), W.
      max_w_per_gbps: largest network power rate, W per GB/s of per-NPU bandwidth.
      max_gbps: largest bandwidth (a total, a bound), GB/s per NPU.
      max_coefficient: largest magnitude of a number in a linear constraint string (a
        coefficient, a product of them, or a constant); a non-zero one must also be at
        least its inverse, so that scaling a row to unit norm stays finite.
      max_constraints: most linear constraint strings.
      max_constraint_chars: longest linear constraint string.
    """

    max_file_mb: float = 64.0
    max_yaml_depth: int = 64
    max_yaml_nodes: int = 1_000_000
    max_dims: int = 16
    max_npus_per_dim: int = 2**20
    max_npus: int = 2**30
    max_layers: int = 100_000
    max_bytes: float = 1e18
    max_ns: float = 1e18
    max_usd_per_gbps: float = 1e9
    max_usd: float = 1e18
    max_w: float = 1e18
    max_w_per_gbps: float = 1e15
    max_gbps: float = 1e9
    max_coefficient: float = 1e12
    max_constraints: int = 10_000
    max_constraint_chars: int = 10_000

    def file_bytes(self) -> int:
        """The file-size limit in bytes (``LIBRA_JAX_MAX_FILE_MB`` if set, else
        ``max_file_mb``)."""
        raw = os.environ.get(MAX_FILE_MB_ENV)
        if raw is None:
            return int(self.max_file_mb * 1e6)
        try:
            mb = float(raw)
        except ValueError:
            mb = math.nan
        if not (math.isfinite(mb) and mb > 0):
            raise LibraInputError(
                f"{MAX_FILE_MB_ENV} = {show(raw)}: expected a number of MB > 0.")
        return int(mb * 1e6)


#: The limits in force.
LIMITS = Limits()


def as_bool(value: Any, field: str) -> bool:
    """``value`` if it is a bool (numpy's too); anything else raises."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise LibraInputError(f"{field} = {show(value)}: expected True or False.")


def as_str(value: Any, field: str, *, empty: bool = False) -> str:
    """``value`` if it is a string (non-empty unless ``empty``); anything else raises."""
    if isinstance(value, str) and (empty or value):
        return value
    raise LibraInputError(f"{field} = {show(value)}: expected a non-empty string.")


def as_int(value: Any, field: str, lo: int | None = None, hi: int | None = None, *,
           what: str = "") -> int:
    """An integer in ``[lo, hi]`` as a Python int.

    Integral floats (``8.0``) are accepted; bools, strings, fractions, NaN and infinities are
    not. The bound is checked on the number itself, so a 10**40 never reaches arithmetic.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    ok = not isinstance(value, (bool, np.bool_))
    if ok and isinstance(value, numbers.Integral):
        n = int(value)
    elif ok and isinstance(value, numbers.Real) and math.isfinite(float(value)) \
            and float(value).is_integer():
        n = int(value)
    else:
        raise LibraInputError(
            f"{field} = {show(value)}: expected an integer{_range(lo, hi)}{what}.")
    if (lo is not None and n < lo) or (hi is not None and n > hi):
        raise LibraInputError(
            f"{field} = {show(n)}: expected an integer{_range(lo, hi)}{what}.")
    return n


def real_or_none(value: Any) -> float | None:
    """``value`` as a float if it is a real number (an integer beyond float64 becomes inf,
    for the caller's range check to refuse); None for a bool, a string or anything else."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return None
    try:
        return float(value)
    except OverflowError:  # an int beyond float64
        return math.inf


def as_real(value: Any, field: str, lo: float | None = None, hi: float | None = None, *,
            lo_open: bool = False, unit: str = "") -> float:
    """A finite real number in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``) as a float.

    Bools and strings (``'500'``) are not numbers; NaN and infinities are refused.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-d array holds one number
        value = value.item()
    x = real_or_none(value)
    if x is None:
        raise LibraInputError(
            f"{field} = {show(value)}: expected a number{_range(lo, hi, lo_open)}{unit}.")
    bad = (not math.isfinite(x) or (lo is not None and (x <= lo if lo_open else x < lo))
           or (hi is not None and x > hi))
    if bad:
        raise LibraInputError(
            f"{field} = {show(value)}: expected a finite number{_range(lo, hi, lo_open)}"
            f"{unit}.")
    return x


def as_list(value: Any, field: str, *, what: str = "a list") -> list:
    """``value`` as a list if it is a sequence (list, tuple, 1-D array, Hydra ListConfig);
    a string, bytes or a mapping is not a list."""
    if isinstance(value, np.ndarray):
        if value.ndim == 1:
            return value.tolist()
    elif isinstance(value, Sequence) and not isinstance(value, (str, bytes, bytearray)):
        return list(value)
    elif not isinstance(value, (str, bytes, Mapping)):
        try:
            from omegaconf import ListConfig  # noqa: PLC0415  (Hydra's list type)
        except ImportError:  # pragma: no cover
            ListConfig = ()  # noqa: N806
        if isinstance(value, ListConfig):
            return list(value)
    raise LibraInputError(f"{field} = {show(value)}: expected {what}.")


def _range(lo, hi, lo_open: bool = False) -> str:
    if lo is not None and hi is not None:
        return f" {'>' if lo_open else '>='} {_num(lo)} and <= {_num(hi)}"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {_num(lo)}"
    if hi is not None:
        return f" <= {_num(hi)}"
    return ""


def _num(x) -> str:
    """A limit as text: integers in full up to 10**7, else in powers of ten."""
    if isinstance(x, int) and abs(x) <= 10**7:
        return f"{x:,}"
    return f"{float(x):g}"


def check_npus(npus: Sequence[int], where: str) -> None:
    """Raises unless the network's size is within :data:`LIMITS` (dimensions, NPUs per
    dimension, NPUs in all); ``npus`` are ints >= 2 already."""
    if len(npus) > LIMITS.max_dims:
        raise LibraInputError(
            f"{where}: {len(npus)} dimensions; at most {LIMITS.max_dims} are supported.")
    for d, n in enumerate(npus):
        if n > LIMITS.max_npus_per_dim:
            raise LibraInputError(
                f"{where}: NPU count of dimension {d} is {show(n)}; at most "
                f"{_num(LIMITS.max_npus_per_dim)} NPUs per dimension are supported.")
    total = math.prod(npus)
    if total > LIMITS.max_npus:
        raise LibraInputError(
            f"{where}: {' x '.join(map(str, npus))} = {total:,} NPUs; at most "
            f"{_num(LIMITS.max_npus)} NPUs in all are supported.")


def as_path(value: Any, field: str) -> str:
    """A file path (``str`` or ``os.PathLike``) as a string; anything else, or a path with a
    NUL byte, raises."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str) or not path or "\0" in path:
        raise LibraInputError(f"{field} = {show(value)}: expected a file path.")
    return path


def as_instance(value: Any, cls: type, field: str) -> Any:
    """``value`` if it is a ``cls`` (e.g. a ``Network``); anything else raises, naming the
    type expected and the type given."""
    if isinstance(value, cls):
        return value
    raise LibraInputError(
        f"{field}: expected a {cls.__name__}, got {type(value).__name__} {show(value)}.")


def as_numbers(value: Any, field: str) -> np.ndarray:
    """``value`` as a numpy array of ints or floats (an array, a number, or nested lists of
    numbers); the caller casts it and checks its shape and range.

    Bools, strings, None, mappings and other objects are not numbers (numpy would read
    ``True`` as 1 and ``'500'`` as 500), in a list or alone; complex numbers are not either.
    """
    x = None
    if isinstance(value, np.ndarray):
        x = value
    elif not isinstance(value, (str, bytes, Mapping)):
        try:
            x = np.asarray(value)
        except (TypeError, ValueError):  # ragged lists
            x = None
        # A list may mix bools with numbers, which numpy turns into numbers.
        if (x is not None and isinstance(value, (list, tuple)) and x.dtype.kind in "iuf"
                and any(isinstance(v, (bool, np.bool_))
                        for v in np.asarray(value, dtype=object).ravel())):
            x = None
    if x is None or x.dtype.kind not in "iuf":
        raise LibraInputError(
            f"{field} = {show(value)}: expected numbers (an array or a list of numbers; "
            "bools and strings are not numbers).")
    return x
