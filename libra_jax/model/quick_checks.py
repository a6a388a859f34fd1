"""Fast paths of the argument checks, for the plain inputs of the common case, and the
test that a problem surely builds.

`problem.check_spec` and `problem_from_arrays` check every argument through the typed checks
of `inputs.limits` (a bool is not a number, a string is not a number, ranges named in the
message). Done entry by entry, that costs more than the rest of building a problem
lazily (`bulk.py`). Each function here returns the checked value when the input is of the
plain kind (Python or numpy floats, lists of them, arrays of numbers) and within every
range, else None: the caller then runs the full check, which accepts the input or raises
the one message for it. A fast path never accepts what the full check refuses, and gives
the same values (the same float64 arrays).

`surely_builds` tells, in a few microseconds, that building a problem cannot raise, so that
`problem_from_arrays` may leave it unbuilt (`bulk.py`) and still raise every error itself.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from libra_jax.inputs.limits import LIMITS

#: Relative margin of `surely_builds`: a constraint holds with at least this slack (relative
#: to the largest bandwidth the constraints allow, at least 1 GB/s), a thousand times the
#: tolerance under which the builders call a constraint tight (`problem_lp._tight_tol`).
MARGIN = 1e-6
#: The step time (ns) and cost bounds `surely_builds` accepts: far below the largest float
#: (1.8e308), so that no rounding of the bound can hide an overflow.
FINITE_BOUND = 1e300

#: Scalar types whose check is a comparison (ints, bools, 0-d arrays: the full check).
_REALS = (float, np.float64)
_BOOLS = {bool, np.bool_}
_SEQS = frozenset((list, tuple))
_FLOAT = frozenset((float,))


def real(value, lo: float, hi: float, lo_open: bool = False) -> float | None:
    """``value`` as a float if it is a float in [lo, hi] ((lo, hi] with ``lo_open``)."""
    if type(value) not in _REALS:
        return None
    x = float(value)
    if (x > lo if lo_open else x >= lo) and x <= hi:  # (False for NaN)
        return x
    return None


def numbers(value) -> np.ndarray | None:
    """`limits.as_numbers` of an array of numbers, or of a list (or list of lists) of
    numbers without bools, as a float64 array of its own (a copy of an array given); None
    for anything else (ragged, bools, strings, deeper)."""
    if type(value) is np.ndarray:
        return value.astype(np.float64) if value.dtype.kind in "iuf" else None
    if type(value) not in (list, tuple):
        return None
    try:
        x = np.asarray(value)
    except (TypeError, ValueError):
        return None
    if x.dtype.kind not in "iuf" or x.ndim > 2:
        return None
    items = value if x.ndim == 1 else itertools.chain.from_iterable(value)
    if not _BOOLS.isdisjoint(map(type, items)):
        return None
    return x if x.dtype == np.float64 else x.astype(np.float64)


def finite_range(x: np.ndarray, hi: float | None) -> bool:
    """Whether every entry of ``x`` is in [0, hi] (finite below +inf without ``hi``);
    False for NaN (and for an empty array: the full check decides)."""
    if x.size == 0:
        return False
    top = x.max()
    return bool(x.min() >= 0) and bool(top <= hi if hi is not None else top < math.inf)


def in_range(value, hi: float | None) -> np.ndarray | None:
    """`numbers` of ``value`` if every entry is in [0, hi] (finite without ``hi``), else
    None (`checked`)."""
    got = checked(value, hi)
    return None if got is None else got[0]


def checked(value, hi: float | None) -> tuple[np.ndarray, float, float] | None:
    """(`numbers` of ``value``, its largest entry, the sum of its entries) if every entry
    is in [0, hi] (finite without ``hi``), else None. A list of Python floats, or a list
    of equally long lists of them, is checked in Python, faster than numpy for a few dozen
    entries (a NaN makes the sum NaN; a sum that overflows declines), and made an array in
    one call; anything else goes through `numbers` (an array's sum may be +inf)."""
    if type(value) in _SEQS and value:
        flat = shape = None
        first = type(value[0])
        if first is float:
            flat = value
        elif first in _SEQS and _SEQS.issuperset(map(type, value)):
            lengths = set(map(len, value))
            if len(lengths) != 1:
                return None  # (ragged)
            flat, shape = list(itertools.chain.from_iterable(value)), (len(value), *lengths)
        if flat and _FLOAT.issuperset(map(type, flat)):
            total, top = sum(flat), max(flat)
            if not (min(flat) >= 0.0 and total == total and total < math.inf
                    and (hi is None or top <= hi)):
                return None
            x = np.array(flat, np.float64)
            return (x if shape is None else x.reshape(shape)), top, total
    x = numbers(value)
    if x is None or not finite_range(x, hi):
        return None
    with np.errstate(over="ignore"):
        return x, float(x.max()), float(x.sum())


def bound_list(values, n: int | None, upper: bool) -> list | None:
    """`problem_spec.vector` of a spec's lower (``upper`` False: each in [0, max_gbps]) or upper
    bounds (each in (0, max_gbps] or +inf), as a tuple of floats: None gives 0 / +inf
    everywhere (for ``n`` dims); a list, tuple or 1-D float64 array of floats of length
    ``n`` (any length for None). None for anything else (None entries, ints, another
    length: the full check)."""
    if values is None:
        return None if n is None else (math.inf if upper else 0.0,) * n
    if type(values) is np.ndarray:
        if values.ndim != 1 or values.dtype != np.float64:
            return None
        values = values.tolist()
    elif type(values) not in (list, tuple):
        return None
    if n is not None and len(values) != n:
        return None
    top = LIMITS.max_gbps
    for v in values:
        if type(v) not in _REALS or not ((0.0 < v <= top or v == math.inf) if upper
                                         else 0.0 <= v <= top):
            return None
    return tuple(values)


def spec_ok(spec, field_prefix, bounds: bool = True) -> bool:
    """Whether `problem.check_spec` accepts ``spec`` (a `ConstraintSpec`) for certain, by
    the fast paths: a non-empty prefix, a float total, an "eq" / "le" mode, lists or arrays
    of float bounds, no linear rows, a float budget, no power cap. False: run the full
    check. ``bounds=False`` leaves the bounds out, for a caller that checks them next
    (`bound_list` with the number of dims, which accepts less)."""
    if type(field_prefix) is not str or not field_prefix:
        return False
    total = spec.total_bw_gbps
    if total is not None and real(total, 0.0, LIMITS.max_gbps, lo_open=True) is None:
        return False
    if type(spec.total_bw_mode) is not str or spec.total_bw_mode not in ("eq", "le"):
        return False
    if bounds:
        for values, upper in ((spec.lower_gbps, False), (spec.upper_gbps, True)):
            if values is not None and bound_list(values, None, upper) is None:
                return False
    if type(spec.linear) not in (list, tuple) or spec.linear:
        return False
    budget = spec.max_cost_usd
    if budget is not None and real(budget, 0.0, LIMITS.max_usd, lo_open=True) is None:
        return False
    return spec.max_power_w is None and spec.power_rates_w_per_gbps is None


def surely_builds(x, load: float | None = None) -> bool:
    """Whether building the problem of checked inputs ``x`` (`problem.Inputs` of
    `problem_build._quick_inputs`: no linear rows, no power cap; bounds and rates as
    tuples) raises nothing, for certain (``load``: a bound of sum_k w_k max_d T_kd, e.g.
    the weights' sum times the largest traffic; None: that sum itself): True only where
    the constraints hold strictly, with a `MARGIN`, at an explicit point, the bandwidth is
    bounded, and the step time (with ``load``) and cost are bounded far below overflow.
    (False says nothing: the problem is built at once.)

    The builders raise (`problem_lp.lp_fields`, `problem_tree.check_finite_result`) for an empty
    set, an unbounded dim, a set with no strictly interior point, a used dim forced to 0, a
    budget row of zero rates, and a step time or cost that is not finite. A point q strictly
    inside every constraint with slack r_q (in the builders' unit-norm rows) rules out the first
    four and makes no bound or row tight (their tolerance is below the margin), so the interior
    point maximising the least slack has bw >= lo + r_q on every dim and the step time is at
    most compute + sum_k w_k max_d T_kd / min_d (lo_d + r_q / 2). The point: lo + t (t below
    half of every width, of the total's and of the budget's slack per dim) without a total
    equality; with one, lo plus the total's excess spread in proportion to the widths (capped at
    the excess), moved towards the least-cost point (the cheapest dims filled first) as far as
    the budget needs."""
    lo, hi, rates = x.lo, x.hi, x.rates  # (tuples: `_quick_inputs`)
    d = len(lo)
    total, budget = x.total, x.budget
    width = [b - a for a, b in zip(lo, hi)]
    min_width, sum_lo = min(width), sum(lo)
    priced = budget is not None
    if priced and not any(rates):
        return False  # (a budget of zero rates: the builders refuse its row)
    least = sum([r * a for r, a in zip(rates, lo)]) if x.has_cost else 0.0
    # A bound of every dim's largest feasible bandwidth, the scale of the tolerances.
    if total is not None:
        top = total
    else:
        top = 0.0
        for a, b, r in zip(lo, hi, rates):
            if b == math.inf:
                if not priced or r <= 0.0:
                    return False  # unbounded
                b = a + (budget - least) / r
            top = max(top, b)
    margin = MARGIN * max(1.0, top)
    if min_width <= 2.0 * margin:
        return False
    s0 = 0.0 if total is None else total - sum_lo
    if total is not None and s0 <= 2.0 * margin * d:
        return False
    eq = total is not None and x.mode == "eq"
    if eq and sum(width) - s0 <= 2.0 * margin * d:
        return False
    c0 = norm_r = 0.0
    if priced:
        norm_r = math.sqrt(sum([r * r for r in rates]))
        if eq:  # the cheapest way to carry the excess
            left = s0
            for i in sorted(range(d), key=rates.__getitem__):
                put = min(width[i], left)
                least += rates[i] * put
                left -= put
        c0 = budget - least
        if c0 <= 2.0 * margin * d * norm_r:
            return False
    if not eq:
        slack = min_width / 2.0  # (of the point lo + t, t this or less)
        if total is not None:
            slack = min(slack, s0 / (2.0 * d), s0 / (2.0 * math.sqrt(d)))
        if priced:
            slack = min(slack, c0 / (2.0 * sum(rates)), c0 / (2.0 * norm_r))
    else:
        capped = [min(w, s0) for w in width]
        spread = sum(capped)
        room = spread - s0
        if room <= 0.0:
            return False
        slack = min(capped) * min(s0, room) / spread  # (of lo + s0 * capped / spread)
        if priced:
            cost_p = sum([r * (a + s0 * c / spread) for r, a, c in zip(rates, lo, capped)])
            over = cost_p - least
            theta = 1.0 if over <= c0 / 2.0 else c0 / (2.0 * over)
            slack = min(theta * slack, c0 / (2.0 * norm_r))
    slack = min(slack, 1.0)  # (the builders cap the interior's slack at max(1, max upper))
    if slack <= margin or x.traffic.shape[0] == 0:
        return False
    # The step time at the interior point, and the cost at the largest bandwidths.
    if load is None:
        load = float(x.weight @ x.traffic.max(axis=1))
    step = (x.compute + load / (min(lo) + slack / 2.0)) * 1e9
    cost = sum(rates) * top if x.has_cost else 1.0
    return step < FINITE_BOUND and cost < FINITE_BOUND and step * cost < FINITE_BOUND
