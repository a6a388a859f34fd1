"""The inputs of a problem beyond its workload, and their checks: `ConstraintSpec` (the
user's constraints on the bandwidth vector) with `check_spec`, the power cap's row
(`power_row`), the bound vectors (`float_vector`), and `ModelRows` (a communication model
beyond LIBRA's as general rows). Checked on the host; the builders (`problem_build.py`) check
the lengths against the network's dimensions, and feasibility."""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Sequence

import numpy as np

from libra_jax.inputs.limits import (
    LIMITS,
    as_instance,
    as_list,
    as_numbers,
    as_real,
    as_str,
)
from libra_jax.model import quick_checks
from libra_jax.types import LibraInputError, show


@dataclasses.dataclass(frozen=True)
class ModelRows:
    """A communication-time model as general rows (host-side numpy input).

    comm_time(bw) = const0_s + sum_j weight_j * time_j,
    time_j = max_{r: piece_r == j} (const_s_r + sum_d coef_gb_rd / bw_d + sum_i nest_ri time_i)

    ``nest`` lets a piece's rows add the times of earlier pieces (i < j): critical paths of a
    dependency graph, e.g. gradient collectives queued behind the backward pass. With
    coef_gb >= 0, nest >= 0 and weight >= 0 every time_j is convex in bw (sums and maxima of
    convex functions), and so is the total. LIBRA's model is the special case of one row per
    (phase, dimension) and no nesting.

    Attributes:
      weight: [J] weight of each piece (>= 0), e.g. how many times a collective occurs.
      piece: [R] int, the piece of each row (0 <= piece < J).
      const_s: [R] constant term of each row (s), e.g. latency.
      coef_gb: [R, D] coefficient of 1 / bw_d (GB, so GB / (GB/s) = s), >= 0.
      const0_s: communication time no bandwidth changes (s).
      nest: [R, J] coefficient of piece i's time in row r (>= 0, only for i < piece_r), or
        None for none.
    """

    weight: np.ndarray
    piece: np.ndarray
    const_s: np.ndarray
    coef_gb: np.ndarray
    const0_s: float = 0.0
    nest: np.ndarray | None = None


@dataclasses.dataclass
class ConstraintSpec:
    """User constraints on the bandwidth vector (GB/s per NPU per dimension).

    Attributes:
      total_bw_gbps: sum of per-dimension bandwidths, or None for no such constraint.
      total_bw_mode: "eq" (sum == total) or "le" (sum <= total).
      lower_gbps: per-dimension lower bounds [D] or None (0 everywhere).
      upper_gbps: per-dimension upper bounds [D] or None (none); entries may be None.
      linear: linear constraint strings, e.g. "bw[0] >= bw[1]" (see `linear.py`).
      max_cost_usd: network cost budget ($) or None.
      max_power_w: network power cap (W) or None: ``power_rates_w_per_gbps @ bw <= cap``.
      power_rates_w_per_gbps: [D] W of network power per GB/s of each dimension (from the
        tiers' ``Energy``, `cost.power_rates_w_per_gbps`); needed by ``max_power_w``.
    """

    total_bw_gbps: float | None = None
    total_bw_mode: str = "eq"
    lower_gbps: Sequence[float] | None = None
    upper_gbps: Sequence[float | None] | None = None
    linear: Sequence[str] = ()
    max_cost_usd: float | None = None
    max_power_w: float | None = None
    power_rates_w_per_gbps: Sequence[float] | None = None

    def __post_init__(self):
        check_spec(self)


def check_spec(spec: ConstraintSpec, field_prefix: str = "constraints") -> None:
    """Checks the types and magnitudes of a `ConstraintSpec` that do not depend on the
    network (the builders check the lengths against its dimensions, and feasibility):

      * ``total_bw_gbps``: None or a number in (0, ``LIMITS.max_gbps``];
      * ``total_bw_mode``: "eq" or "le";
      * ``lower_gbps``: None or a list of None / numbers in [0, ``LIMITS.max_gbps``];
      * ``upper_gbps``: None or a list of None / +inf (no bound) / numbers in
        (0, ``LIMITS.max_gbps``];
      * ``linear``: a list of strings (their syntax is `linear.py`'s);
      * ``max_cost_usd``: None or a number in (0, ``LIMITS.max_usd``].

    Bools, strings and mappings are not numbers, and a mapping or a string is not a list.

    Raises:
      LibraInputError: naming the field (``field_prefix``.name[index]), the value and the
        rule.
    """
    if type(spec) is ConstraintSpec and quick_checks.spec_ok(spec, field_prefix):
        return  # (plain values within range: what the checks below accept)
    as_instance(spec, ConstraintSpec, "spec")
    f = as_str(field_prefix, "field_prefix")
    if spec.total_bw_gbps is not None:
        as_real(spec.total_bw_gbps, f"{f}.total_bw_gbps", 0.0, LIMITS.max_gbps, lo_open=True,
                unit=" (GB/s per NPU, LIMITS.max_gbps)")
    check_mode(spec.total_bw_mode, f)
    if spec.lower_gbps is not None:
        vector(spec.lower_gbps, None, f"{f}.lower_gbps", 0.0)
    if spec.upper_gbps is not None:
        vector(spec.upper_gbps, None, f"{f}.upper_gbps", math.inf)
    if spec.linear is not None:
        items = as_list(spec.linear, f"{f}.linear", what="a list of constraint strings")
        for i, text in enumerate(items):
            as_str(text, f"{f}.linear[{i}]")
    if spec.max_cost_usd is not None:
        as_real(spec.max_cost_usd, f"{f}.max_cost_usd", 0.0, LIMITS.max_usd, lo_open=True,
                unit=" ($, LIMITS.max_usd)")
    if spec.power_rates_w_per_gbps is not None:
        rates = as_list(spec.power_rates_w_per_gbps, "power_rates_w_per_gbps",
                        what="a list of W per GB/s, one per dimension")
        for i, r in enumerate(rates):
            as_real(r, f"power_rates_w_per_gbps[{i}]", 0.0, LIMITS.max_w_per_gbps,
                    unit=" (W per GB/s)")
    if spec.max_power_w is not None:
        as_real(spec.max_power_w, f"{f}.max_power_w", 0.0, LIMITS.max_w, lo_open=True,
                unit=" (W, LIMITS.max_w)")
        if spec.power_rates_w_per_gbps is None:
            raise LibraInputError(
                f"{f}.max_power_w = {show(spec.max_power_w)}: a power cap needs the network's "
                "power rates: a cost model whose tiers give Energy (e.g. "
                "cost_model.file=technologies.yaml).")


def power_row(spec: ConstraintSpec, d: int) -> np.ndarray | None:
    """[d] the power cap's row (W per GB/s), or None without a cap."""
    if spec.max_power_w is None:
        return None
    a = np.asarray(as_numbers(spec.power_rates_w_per_gbps, "power_rates_w_per_gbps"),
                   np.float64)
    if a.shape != (d,):
        raise LibraInputError(
            f"power_rates_w_per_gbps has {a.size} entries: expected {d} (one per dimension).")
    return a


def check_mode(mode, f: str) -> str:
    if not isinstance(mode, str) or mode not in ("eq", "le"):
        raise LibraInputError(f"{f}.total_bw_mode = {show(mode)}: must be 'eq' or 'le'.")
    return str(mode)


def float_vector(values, n: int | None, field: str, default: float, expected: str, *,
                 lo: float | None = None, hi: float | None = None, lo_open: bool = False,
                 unit: str = "", inf_ok: bool = False) -> np.ndarray:
    """[n] float64 from a list of numbers: None gives ``default`` everywhere, a None entry
    ``default`` there.

    Args:
      values: None or a list (tuple, 1-D array, Hydra ListConfig) of numbers or None.
      n: the length required (None: any).
      field: the name in messages (entries are named ``field[i]``).
      default: the value of None.
      expected: what a wrong length should say, e.g. "the network has 4 dimensions (...)".
      lo, hi, lo_open, unit: the range of an entry (`limits.as_real`).
      inf_ok: +inf is allowed (e.g. "no upper bound").

    Raises:
      LibraInputError: not a list, a length other than n, or an entry that is not a number
        (a bool or a string is not) or is out of range (the message names its index).
    """
    if values is None:
        return np.full(0 if n is None else n, default, np.float64)
    values = as_list(values, field, what="a list of numbers")
    if n is not None and len(values) != n:
        raise LibraInputError(
            f"{field} = {show(values)}: has {len(values)} entries but {expected}."
        )
    out = np.empty(len(values), np.float64)
    for i, v in enumerate(values):
        v = v
        if v is None:
            out[i] = default
        elif (inf_ok and isinstance(v, numbers.Real) and not isinstance(v, bool)
              and v == math.inf):
            out[i] = math.inf
        else:
            out[i] = as_real(v, f"{field}[{i}]", lo, hi, lo_open=lo_open, unit=unit)
    return out


def vector(values, num_dims: int | None, field: str, default: float) -> np.ndarray:
    """A bound vector of a `ConstraintSpec` (``default`` 0: lower bounds in
    [0, max_gbps]; ``default`` inf: upper bounds in (0, max_gbps] or inf)."""
    upper = default == math.inf
    return float_vector(values, num_dims, field, default,
                        f"the network has {num_dims} dimensions (give one value per "
                        "dimension, or null)", lo=0.0, hi=LIMITS.max_gbps, lo_open=upper,
                        unit=" (GB/s per NPU, LIMITS.max_gbps)", inf_ok=upper)
