"""Small linear programs on the host, solved by HiGHS: the constraint checks of
`problem.build_problem`, the tangent-plane certificate (`solvers/certificate.py`) and the
sensitivities' multiplier LPs (`studies/sensitivity.py`).

HiGHS is called through ``highspy``, its own Python binding: the same solver that
``scipy.optimize.linprog(method="highs")`` wraps, whose import (all of ``scipy.optimize``,
~0.5 s) was a fifth of a cached ``libra-train`` run; ``highspy`` imports in ~20 ms.
:func:`linprog` keeps SciPy's form of the problem and of the answer::

    minimise c @ x  subject to  a_ub @ x <= b_ub,  a_eq @ x == b_eq,  lo <= x <= hi

with ``bounds`` a list of ``(lo, hi)`` per variable (None: unbounded) and the status codes
0 optimal, 1 iteration or time limit, 2 infeasible, 3 unbounded, 4 anything else.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import NamedTuple, Sequence

import numpy as np

#: HiGHS model status name -> SciPy's status code (as `scipy.optimize.linprog` maps them).
_STATUS = {
    "kOptimal": 0,
    "kTimeLimit": 1,
    "kIterationLimit": 1,
    "kInfeasible": 2,
    "kModelError": 2,
    "kUnbounded": 3,
}

#: HiGHS's option values of SciPy's two methods: "highs" lets HiGHS choose (simplex, or the
#: interior point method for large LPs), "highs-ds" is its dual simplex.
METHODS = {"highs": {"solver": "choose"},
           "highs-ds": {"solver": "simplex", "simplex_strategy": 1}}


_FIRST = threading.Lock()  # held while the process's first HiGHS instance is made
_STARTED = False


def _highs():
    """A silent HiGHS instance. The process's first one is made with stdout (the file
    descriptor) sent to /dev/null: HiGHS's C++ constructor prints a two-line banner there
    before any option can turn output off, which would land in the commands' tables."""
    global _STARTED
    import highspy  # here, not at import: only the commands that solve an LP pay for it

    with _FIRST:
        if _STARTED:
            h = highspy.Highs()
        else:
            try:
                sys.stdout.flush()
                saved, devnull = os.dup(1), os.open(os.devnull, os.O_WRONLY)
            except (OSError, ValueError):  # no usable stdout: nothing to keep clean
                h = highspy.Highs()
            else:
                os.dup2(devnull, 1)
                try:
                    h = highspy.Highs()
                finally:
                    os.dup2(saved, 1)
                    os.close(saved)
                    os.close(devnull)
            _STARTED = True
    h.setOptionValue("output_flag", False)
    return h


class LpResult(NamedTuple):
    """What `linprog` found: ``status`` (SciPy's codes, module docstring), ``x`` [n] (NaN
    where HiGHS has no solution), ``fun`` (c @ x, NaN without a solution) and ``message``
    (HiGHS's status in words, for error messages)."""

    status: int
    x: np.ndarray
    fun: float
    message: str


def linprog(c, a_ub=None, b_ub=None, a_eq=None, b_eq=None,
            bounds: Sequence[tuple[float | None, float | None]] | None = None, *,
            method: str = "highs", tolerance: float | None = None) -> LpResult:
    """Solves the LP of the module docstring with HiGHS.

    Args:
      c: [n] costs. a_ub, b_ub / a_eq, b_eq: [m, n] rows and [m] right-hand sides, or None
        (or zero rows) for none. bounds: ``(lo, hi)`` per variable, None for no bound;
        default: every variable >= 0 (SciPy's default).
      method: "highs" or "highs-ds" (:data:`METHODS`).
      tolerance: primal and dual feasibility tolerance (HiGHS's default 1e-7 if None).
    """
    import highspy

    c = np.asarray(c, np.float64).reshape(-1)
    n = c.size
    blocks = [(a, b, False) for a, b in ((a_ub, b_ub),) if b is not None and len(b)]
    blocks += [(a, b, True) for a, b in ((a_eq, b_eq),) if b is not None and len(b)]
    rows = [np.asarray(a, np.float64).reshape(-1, n) for a, _, _ in blocks]
    rhs = [np.asarray(b, np.float64).reshape(-1) for _, b, _ in blocks]
    a = np.concatenate(rows) if rows else np.zeros((0, n))
    upper = np.concatenate(rhs) if rhs else np.zeros(0)
    lower = np.concatenate([r if eq else np.full(r.size, -np.inf)
                            for r, (_, _, eq) in zip(rhs, blocks)]) if rhs else np.zeros(0)
    if bounds is None:
        bounds = [(0.0, None)] * n
    col_lo = np.array([-np.inf if lo is None else float(lo) for lo, _ in bounds], np.float64)
    col_hi = np.array([np.inf if hi is None else float(hi) for _, hi in bounds], np.float64)

    lp = highspy.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = a.shape[0]
    lp.col_cost_ = c
    lp.col_lower_ = col_lo
    lp.col_upper_ = col_hi
    lp.row_lower_ = lower
    lp.row_upper_ = upper
    nz = a != 0  # column-wise sparse matrix
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.concatenate([[0], np.cumsum(nz.sum(axis=0))]).astype(np.int32)
    lp.a_matrix_.index_ = np.nonzero(nz.T)[1].astype(np.int32)
    lp.a_matrix_.value_ = a.T[nz.T]

    h = _highs()
    for key, value in METHODS[method].items():
        h.setOptionValue(key, value)
    if tolerance is not None:
        h.setOptionValue("primal_feasibility_tolerance", float(tolerance))
        h.setOptionValue("dual_feasibility_tolerance", float(tolerance))
    h.passModel(lp)
    h.run()
    model_status = h.getModelStatus()
    name = getattr(model_status, "name", str(model_status)).split(".")[-1]
    status = _STATUS.get(name, 4)
    if status == 0:
        x = np.array(h.getSolution().col_value, np.float64)
        fun = float(h.getInfo().objective_function_value)
    else:
        x = np.full(n, np.nan)
        fun = float("nan")
    return LpResult(status=status, x=x, fun=fun,
                    message=f"HiGHS: {h.modelStatusToString(model_status)}")
