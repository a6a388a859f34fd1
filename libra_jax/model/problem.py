"""The optimisation problem as a pytree of arrays, and its host-side construction.

A LIBRA problem over the per-NPU bandwidth vector ``bw`` [D] (GB/s) is

    minimise   step_time(bw) = compute + sum_k weight_k * max_d traffic_kd / bw_d
    subject to lo <= bw <= hi,  a_eq @ bw == b_eq,  a_in @ bw <= b_in

(``perf``), or step_time(bw) * cost_rate @ bw (``perf_per_cost``). Models beyond LIBRA's
(latency and chunking, other schedules, overlap of compute and communication) add general
rows (`ModelRows`): step_time gains sum_j w_j max_{r in j} (c_r + sum_d a_rd / bw_d) + c0,
still convex in bw, so the same solver and certificates apply. ``traffic_kd`` is what the
k-th distinct communicating phase puts on dimension d (GB, so GB / (GB/s) = s); identical phases
are merged and counted by ``weight``. The total-bandwidth constraint, the user's linear
constraints and the cost budget are all rows of (a_eq, b_eq) or (a_in, b_in), each scaled to
unit norm so that violations are comparable.

`build_problem` validates everything on the host and raises `LibraInputError`; nothing inside
jit raises. Feasibility, boundedness, the implicit equalities and the interior and least-cost
points come in closed form (numpy, `closed_form.closed_form`) for the constraints of a total,
bounds and a cost budget, and from LPs (HiGHS, `lp.linprog`, `problem_lp.lp_fields`) with user
linear rows; the LPs also name the constraints that conflict. `problems_from_stacked` builds a
whole batch of problems of one constraint form at once, vectorised over the batch. Fields are
numpy arrays.

The module is split by job (this one re-exports every name): `problem_spec.py` the
`ConstraintSpec` and `ModelRows` with their checks, `problem_tree.py` the `Problem` pytree and
how checked inputs become one (`assemble`, the lazy build), `problem_build.py` the one-by-one
builders (`build_problem`, `problem_from_arrays`, `with_workload`, `with_cost_rates`) and
their argument checks, `problem_stacked.py` the stacked builder (`problems_from_stacked`),
`problem_lp.py` the LP path of the constraint fields.
"""

from __future__ import annotations

from libra_jax.model.problem_build import (
    MAX_COMPUTE_S,
    MAX_RATE_USD_PER_GBPS,
    MAX_TRAFFIC_GB,
    build_problem,
    problem_from_arrays,
    with_cost_rates,
    with_workload,
)
from libra_jax.model.problem_spec import (
    ConstraintSpec,
    ModelRows,
    check_spec,
    float_vector,
    power_row,
)
from libra_jax.model.problem_stacked import problems_from_stacked
from libra_jax.model.problem_tree import (
    ARRAY_FIELDS,
    SIZE_AXES,
    Inputs,
    Problem,
    assemble,
    block_row,
    materialise,
    merge_phases,
    merge_weighted_phases,
    no_rows,
    place,
    problem_sizes,
    unbuilt,
    with_arrays,
)

__all__ = [
    "ARRAY_FIELDS",
    "MAX_COMPUTE_S",
    "MAX_RATE_USD_PER_GBPS",
    "MAX_TRAFFIC_GB",
    "SIZE_AXES",
    "ConstraintSpec",
    "Inputs",
    "ModelRows",
    "Problem",
    "assemble",
    "block_row",
    "build_problem",
    "check_spec",
    "float_vector",
    "materialise",
    "merge_phases",
    "merge_weighted_phases",
    "no_rows",
    "place",
    "power_row",
    "problem_from_arrays",
    "problem_sizes",
    "problems_from_stacked",
    "unbuilt",
    "with_arrays",
    "with_cost_rates",
    "with_workload",
]
