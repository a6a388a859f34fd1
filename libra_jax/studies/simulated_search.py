"""A search on a simulated objective, for designs a convex model only bounds: the
objective of a design at its simulated step (`objective_value`) and a pattern search over
the feasible designs (`pattern_search`). The trace runs (`studies.job.trace`, the
multi-workload runs with trace sets, the scan of traces) and the runtime co-design
(`studies.runtime`) refine a model's optimum with it; the model's certified lower bound
does not depend on the design it returns, so a gap stays certified."""

from __future__ import annotations

import numpy as np

from libra_jax.solvers.solve import nearest_feasible


def objective_value(inputs, objective: str, power, bw, step_ns: float) -> float:
    """The objective of a design at its simulated step: ns (perf), ns x $ (perf_per_cost),
    J per step (perf_per_watt). ``inputs``: the run's inputs (their ``cost_rates`` [D] $ per
    GB/s, e.g. a `studies.job.trace.TraceInputs`); ``power``: (rates [D] W per GB/s, static
    W) for perf_per_watt."""
    if objective == "perf_per_cost":
        return step_ns * float(inputs.cost_rates @ bw)
    if objective == "perf_per_watt":
        rates, static = power
        return step_ns * 1e-9 * (float(static) + float(np.asarray(rates) @ bw))
    return step_ns


def pattern_search(value, problem, starts, used, limit: int):
    """A pattern search on a simulated objective over the feasible designs of ``problem``,
    from the best of ``starts``: move ``step`` GB/s from one dimension to another, or up or
    down on one (each move projected onto the constraints), take the first move that
    improves, halve the step when none does; at most ``limit`` evaluations.

    Args:
      value: design [D] -> (objective value, payload), e.g. the simulated step and its
        simulation; each design is evaluated once.
      problem: the `Problem` whose constraints the designs meet (`nearest_feasible`).
      starts: designs to start from (projected onto the constraints first).
      used: [D] bool, the dimensions some traffic crosses: designs that give one of them
        (almost) no bandwidth are not evaluated.
      limit: most evaluations.

    Returns (design, its payload, designs evaluated). A lower bound does not depend on it:
    a gap stays certified whatever design it returns."""
    d = problem.num_dims
    evaluated: dict = {}

    def cached(x):
        key = tuple(np.round(x, 12))
        if key not in evaluated:
            evaluated[key] = value(x)
        return evaluated[key]

    def usable(x):
        return bool(np.all(np.isfinite(x)) and np.all(x[used] > 1e-9 * max(x.sum(), 1e-300)))

    cands = [np.asarray(nearest_feasible(problem, np.asarray(x, np.float64))[0]) for x in starts]
    cands = [x for x in cands if usable(x)]
    best = min(cands, key=lambda x: cached(x)[0])
    best_val = cached(best)[0]
    moves = [np.eye(d)[i] - np.eye(d)[j] for i in range(d) for j in range(d) if i != j]
    moves += [sign * np.eye(d)[i] for i in range(d) for sign in (1.0, -1.0)]
    step = 0.25 * float(best.sum()) / d
    while step > 1e-4 * float(best.sum()) / d and len(evaluated) < limit:
        for v in moves:
            x, _ = nearest_feasible(problem, np.maximum(best + step * v, 0.0))
            x = np.asarray(x, np.float64)
            if not usable(x) or np.allclose(x, best, rtol=0, atol=1e-12 * best.sum()):
                continue
            val, _ = cached(x)
            if val < best_val * (1 - 1e-12):
                best, best_val = x, val
                break
            if len(evaluated) >= limit:
                break
        else:
            step /= 2
    return best, cached(best)[1], len(evaluated)
