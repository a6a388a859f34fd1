"""The batch engine: many `perf` problems through one vmapped interior-point kernel.

Every batched solve in the package (scans, the mapping co-search, the chunk-count search, the
perf_per_cost cost levels, multi-workload solves) goes through `solve_batch` (a list of
problems of any sizes) or `solve_stacked` (one `Problem` whose leaves carry a leading batch
axis, e.g. from `problem.problems_from_stacked`). The kernel is `ipm.solve_perf` under
``jax.vmap``: it has no LAPACK call (its Cholesky factorisations are jnp operations), so the
batch is elementwise work across problems, SIMD on a CPU and coalesced on a GPU.

Shapes and compilations. Problems are padded on the host with neutral values to a bucket
(D, K, I, E, J, R) (jraph's pad-to-fixed-size idea):

  * a padded dimension has no traffic, cost rate 0, and is fixed at 1 GB/s (its lower bound
    is marked tight), so it moves nothing and costs nothing;
  * a padded phase or piece has no traffic and no rows (its time variable is pinned at 0);
  * a padded inequality row is 0 <= 1 and a padded equality 0 == 0; neither takes part.

D and K are rounded up to 4, 6, 8, 12, 16, 24, ... (`_ladder`: at most half of a size is
padding) and the other sizes to powers of two: few, coarse buckets, since padding costs
little and each program costs seconds to compile. The batch axis is padded too: a bucket's
problems run in chunks whose sizes come from a fixed ladder (16, 256, 1024, 65536, ... up to
``max_chunk``, 256 on a CPU), so a call with another number of problems reuses compiled
code. A chunk runs for its slowest problem's iterations; chunks after the first may run
under an iteration limit, the few problems it stops being solved again (`run_buckets`).
A call's buckets are then merged up into larger ones present
in it (`plan_buckets`) while a program costs more to compile than the padding costs to run,
by a measured cost model that knows which programs this process has compiled and which
earlier processes stored (`batch_plan.compiled_for`); chunk sizes are chosen by the same model
(`chunk_plan`). A first call of a few hundred mixed problems compiles one program; a later
call of ten thousand reuses it. Across calls the padding paid is rent (`batch_plan.Paid`):
what a finer program would have saved is taken off its compilation, so a mix solved again
and again gets finer buckets; `warm_up(..., calls=N)` plans for N calls at once. A call's
buckets run side by side (`run_buckets`). `compiled_programs` counts the programs; `warm_up`
compiles them ahead of a call. The programs go through the executable store
(`compilation.STORE`): a later process loads them without tracing.

Certification. The kernel stops when its Lagrangian bound (`ipm.lagrangian_bound`) certifies
the gap; where it does not (rare: degenerate problems on which the closed-form bound is weak,
or an end game that stalls near several bounds), the host finishes those problems, counted in
`BatchResult.host_certified`: first the exact step on the active set of the kernel's point
(`active_set.exact_step`, float64 kernels and problems without a cost cap; it replaces the
point when it is feasible and no slower, and its bound when higher), then the tangent-plane LP
of `certificate.py` at the resulting point, as single solves do.

float32. ``dtype=np.float32`` runs the kernel in float32 (TPUs have no float64; GPUs run
float32 at twice the rate or more); the step time, the violation and the bound (from the
multipliers of the kernel's best bound, valid for any multipliers) are then evaluated in
float64, and a result is ``ok`` at a certified gap <= 1e-4 and a relative violation <= 1e-6
(float32 rounding). The kernel's linear algebra and stopping rules are built for float32 too
(see `ipm`), so float32 certifies the benchmark families and the scan on its own; what it
would leave uncertified is solved again in float64 (``float64_fallback``, counted), a safety
net.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import numpy as np

from libra_jax.model import bulk
from libra_jax.model.problem import (
    Problem,
    block_row,
    problem_sizes,  # noqa: F401 (re-exported)
    unbuilt,
)
from libra_jax.solvers import first_order, ipm
from libra_jax.solvers.compilation import STORE, timed  # noqa: F401 (STORE: re-exported)
from libra_jax.inputs.limits import (
    as_bool,
    as_instance,
    as_int,
    as_list,
    as_numbers,
    as_real,
    as_str,
)
from libra_jax.types import STATUS_NAMES, LibraInputError, Status, float64, show

# The planner and the runner re-exported: `batch.<name>` keeps working for every importer.
from libra_jax.solvers.batch_plan import (  # noqa: F401
    CHUNK_LADDER,
    CHUNK_SECONDS,
    COMPILE_SECONDS,
    PAID,
    SINGLE_COMPILE_SHARE,
    SLOWDOWN,
    TIERS,
    bucket_shape,
    chunk_plan,
    compiled_for,
    default_max_chunk,
    ladder_sizes,
    pad_concat,
    pad_stacked,
    plan_buckets,
    plan_call,
    problem_seconds,
    program_plan,
    remember,
    stack,
    take,
    unstack,
)
from libra_jax.solvers.batch_run import (  # noqa: F401
    LIMIT_MIN_CHUNKS,
    LIMIT_SAMPLE_EVERY,
    compiled_programs,
    finish,
    pad_one,
    run_bucket,
    run_buckets,
)

# The engine's certificates are float64 (a float32 kernel is an explicit dtype choice): its
# entry points, like solve.py's, carry `types.float64`.


def _plan_call(counts: dict[tuple, int], max_chunk: int, kind, tier,
               fixed: bool = False, calls: int = 1) -> tuple[dict, dict]:
    """`batch_plan.plan_call` of one call (`solve_batch`, `solve_stacked`, `warm_up`) with
    ``counts`` problems per bucket, given what this process compiled for ``kind`` (or
    finds stored) and the padding its calls paid."""
    compiled, stored = (frozenset(), frozenset()) if fixed else compiled_for(kind)
    return plan_call(counts, max_chunk, compiled, tier, fixed, PAID.key(kind), calls, stored)


def _kind(config, dtype, devices) -> tuple:
    """What, besides bucket, chunk size and tier, tells kernel programs apart."""
    return (type(config).__name__, config, np.dtype(dtype).name, len(devices))


@dataclasses.dataclass
class BatchResult:
    """Per-problem results in input order (numpy)."""

    bandwidth_gbps: list | np.ndarray  # [B] arrays of each problem's own D (or [B, D])
    step_time_ns: np.ndarray  # [B]
    lower_bound_ns: np.ndarray  # [B] certified lower bound of the optimal step time
    optimality_gap: np.ndarray  # [B]
    max_violation: np.ndarray  # [B] relative to the sum of the dims' largest bandwidths
    status: list  # [B] status names
    iterations: np.ndarray  # [B] interior-point iterations
    host_certified: int = 0  # problems whose certificate needed the host LP
    float64_fallback: int = 0  # float32 runs: problems solved again in float64
    solve_seconds: float = float("nan")  # wall time of the call without JAX compilation
    compile_seconds: float = float("nan")  # JAX compilation during the call (or cache loads)

    def __len__(self):
        return len(self.status)

    def __getitem__(self, i):
        """Problem ``i``'s result as a `BatchItem` (a slice or a list of indices: a list)."""
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if isinstance(i, (list, tuple, np.ndarray)):
            return [self[int(j)] for j in i]
        j = int(i)  # numpy integers too; a float or a string raises TypeError
        if isinstance(i, (bool, float)) or j != i:
            raise TypeError(f"BatchResult indices must be integers or slices, not "
                            f"{type(i).__name__}")
        n = len(self)
        if not -n <= j < n:
            raise IndexError(f"BatchResult index {j} out of range for {n} problems")
        j %= n
        return BatchItem(np.asarray(self.bandwidth_gbps[j]), float(self.step_time_ns[j]),
                         float(self.lower_bound_ns[j]), float(self.optimality_gap[j]),
                         float(self.max_violation[j]), self.status[j],
                         int(self.iterations[j]))

    def __iter__(self):
        return (self[j] for j in range(len(self)))


class BatchItem(NamedTuple):
    """One problem's result in a `BatchResult` (units of the names)."""

    bandwidth_gbps: np.ndarray  # [D]
    step_time_ns: float
    lower_bound_ns: float
    optimality_gap: float
    max_violation: float
    status: str
    iterations: int


def _solve_groups(groups: list[Problem], caps, *, dtype, chunk, devices, certify_on_host,
                  config, float64_fallback=True, tier=None, fixed_programs=False,
                  iteration_limit=True):
    """Solves stacked groups (each one shape); groups of one bucket share device calls.
    Returns (bw list of [B_g, D_g] arrays, then per-problem columns in group order)."""
    devices = jax.local_devices() if devices is None else list(devices)
    sizes = [g.lo.shape[0] for g in groups]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    n = int(offsets[-1])
    caps = np.full(n, np.nan) if caps is None else np.asarray(caps, np.float64).reshape(n)
    max_chunk = chunk or default_max_chunk()
    shapes = [bucket_shape(g) for g in groups]
    counts: dict[tuple, int] = {}
    for shape, size in zip(shapes, sizes):
        counts[shape] = counts.get(shape, 0) + size
    kind = _kind(config, dtype, devices)
    target, plans = _plan_call(counts, max_chunk, kind, tier, fixed_programs)
    if not fixed_programs:
        for shape, count in counts.items():
            PAID.add(kind, shape, target[shape], count)
    by_bucket: dict[tuple, list[int]] = {}
    for gi, shape in enumerate(shapes):
        by_bucket.setdefault(target[shape], []).append(gi)
    cols = [np.empty(n) for _ in range(3)]
    iters = np.zeros(n, np.int64)
    finite = np.zeros(n, bool)
    inside = np.zeros(n, bool)
    bws: list = [None] * len(groups)
    orders, work = [], []
    for shape, gis in by_bucket.items():
        order = np.concatenate([np.arange(offsets[g], offsets[g + 1]) for g in gis])
        c = caps[order]
        chosen, plan = plans[shape]
        orders.append(order)
        work.append((pad_concat([groups[g] for g in gis], shape),
                     np.where(np.isfinite(c), c, 0.0), np.isfinite(c), plan, chosen))
    outs = run_buckets(work, dtype=dtype, devices=devices, config=config,
                       iteration_limit=iteration_limit)
    for (shape, gis), order, out in zip(by_bucket.items(), orders, outs):
        chosen, plan = plans[shape]
        for size in set(plan):
            remember(kind, shape, size, chosen)
        start = 0
        for g in gis:
            bws[g] = out[0][start:start + sizes[g], : groups[g].lo.shape[-1]]
            start += sizes[g]
        for col, vals in zip(cols, out[1:4]):
            col[order] = vals
        iters[order], finite[order], inside[order] = out[4], out[5], out[6]
    scale = np.concatenate([np.maximum(np.sum(np.asarray(g.upper, np.float64), axis=-1),
                                       1e-300) for g in groups]) if groups else np.ones(0)
    group_of = np.repeat(np.arange(len(groups)), sizes)

    def host_problem(i):
        g = int(group_of[i])
        return unstack(groups[g], i - int(offsets[g]))

    bw_rows = [row for b in bws for row in b]
    fallback = (np.dtype(dtype) != np.float64 and float64_fallback
                and isinstance(config, ipm.IpmConfig))
    # (With the float64 fallback, a host certificate of a float32 point would be wasted.)
    step, lb, gap, rel_viol, status, host = finish(
        host_problem, caps, bw_rows, cols[0], cols[1], cols[2], finite, inside, scale, dtype,
        certify_on_host and not fallback)
    res = BatchResult(bw_rows, step, lb, gap, rel_viol, status, iters, host)
    if fallback:
        # What float32 could not certify is solved again in float64 and counted: the results
        # are then float64 results.
        redo = np.nonzero(np.asarray(status) == STATUS_NAMES[Status.NOT_CONVERGED])[0]
        if redo.size:
            sub = solve_batch([host_problem(i) for i in redo],
                              caps=None if caps is None else caps[redo], chunk=chunk,
                              devices=devices, certify_on_host=certify_on_host,
                              config=config, tier=tier, fixed_programs=fixed_programs)
            for j, i in enumerate(redo):
                bw_rows[i][:] = sub.bandwidth_gbps[j]
                res.step_time_ns[i] = sub.step_time_ns[j]
                res.lower_bound_ns[i] = sub.lower_bound_ns[j]
                res.optimality_gap[i] = sub.optimality_gap[j]
                res.max_violation[i] = sub.max_violation[j]
                res.status[i] = sub.status[j]
                res.iterations[i] = sub.iterations[j]
            res.host_certified += sub.host_certified
            res.float64_fallback = int(redo.size)
    return bws, res


def _method_config(method: str, config, caps):
    """The kernel settings of ``method`` ("ipm" or "optax"; ``config`` None = defaults)."""
    if isinstance(method, str) and method == "ipm":
        return ipm.IpmConfig() if config is None else check_config(config, ipm.IpmConfig)
    if isinstance(method, str) and method == "optax":
        if caps is not None:
            raise LibraInputError(
                "solver.method = 'optax' takes no cost caps: its first-order phase cannot "
                "follow a tight cap (perf_per_cost with optax prices the cost instead, "
                "`solve.solve`)."
            )
        return (first_order.FirstOrderConfig() if config is None
                else check_config(config, first_order.FirstOrderConfig))
    raise LibraInputError(f"solver.method = {show(method)}: choose 'ipm' or 'optax'.")


#: Largest integer setting of a solver config (iterations, steps, line-search trials).
MAX_CONFIG_INT = 10**6


#: Largest real setting of a solver config (tolerances, fractions, factors).
MAX_CONFIG_REAL = 1e6


def check_config(config, kind: type, field: str = "config"):
    """``config`` if it is a ``kind`` (`ipm.IpmConfig`, `first_order.FirstOrderConfig`,
    `barrier.BarrierConfig`) whose fields have their defaults' types: integers in
    [1, `MAX_CONFIG_INT`], reals in (0, `MAX_CONFIG_REAL`], bools and strings, as a config of
    plain Python values (a static argument). Raises `LibraInputError` naming
    ``field.name`` otherwise."""
    as_instance(config, kind, field)
    values = {}
    for name, default in kind._field_defaults.items():
        value, key = getattr(config, name), f"{field}.{name}"
        if isinstance(default, bool):
            values[name] = as_bool(value, key)
        elif isinstance(default, int):
            values[name] = as_int(value, key, 1, MAX_CONFIG_INT)
        elif isinstance(default, float):
            values[name] = as_real(value, key, 0.0, MAX_CONFIG_REAL, lo_open=True)
        elif isinstance(default, str):
            values[name] = as_str(value, key)
    return config._replace(**values)  # (8.0 iterations become 8)


def check_problem(p, field: str = "problem", *, stacked: bool = False) -> Problem:
    """``p`` if it is a `Problem`: one problem (leaves without a batch axis), or with
    ``stacked`` a batch (a leading batch axis, `problem.problems_from_stacked`)."""
    as_instance(p, Problem, field)
    ndim = np.ndim(p.lo)
    if ndim != (2 if stacked else 1):
        raise LibraInputError(
            f"{field}: a {'stacked batch of problems' if ndim == 2 else 'Problem'} whose "
            f"lower bounds have {ndim} axes; expected "
            + ("a stacked batch (problems_from_stacked; a list of single problems goes to "
               "solve_batch)." if stacked else
               "one problem (build_problem, problem_from_arrays; a stacked batch goes to "
               "solve_stacked)."))
    return p


def _check_tier(tier):
    """``tier``: None (chosen per program by the cost model) or a key of `TIERS`."""
    if tier is not None and not (isinstance(tier, str) and tier in TIERS):
        raise LibraInputError(f"tier = {show(tier)}: expected None (the cost model "
                              f"chooses) or one of {sorted(TIERS)}.")
    return tier


def _check_options(caps, n: int, dtype, chunk, devices, certify_on_host, float64_fallback):
    """The engine's options, checked (`solve_stacked`); returns (caps [n] float64 or None,
    dtype, chunk, devices)."""
    if caps is not None:
        caps = as_numbers(caps, "caps").astype(np.float64)
        if caps.shape != (n,):
            raise LibraInputError(
                f"caps has shape {caps.shape}: expected [{n}] (one cost cap per problem).")
        bad = ~(np.isnan(caps) | (caps >= 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise LibraInputError(
                f"caps[{i}] = {caps[i]:g}: a cost cap must be a number >= 0 ($), or NaN for "
                "no cap.")
    kind = None
    if dtype is not None and not isinstance(dtype, (bool, np.bool_)):
        try:
            kind = np.dtype(dtype)
        except TypeError:
            kind = None
    if kind is None or kind not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise LibraInputError(
            f"dtype = {show(dtype)}: expected np.float64 or np.float32 (the kernel's "
            "precision).")
    if chunk is not None:
        chunk = as_int(chunk, "chunk", 1)
    if devices is not None:
        devices = as_list(devices, "devices", what="a list of jax devices")
        for i, dev in enumerate(devices):
            as_instance(dev, jax.Device, f"devices[{i}]")
        if not devices:
            raise LibraInputError("devices = []: give at least one device (or None for all).")
    as_bool(certify_on_host, "certify_on_host")
    as_bool(float64_fallback, "float64_fallback")
    return caps, kind, chunk, devices


@dataclasses.dataclass
class WarmUp:
    """What `warm_up` prepared: the kernel programs (bucket, chunk size) a later call will
    run, and how long compiling (or loading them from the cache) took."""

    programs: list  # [(bucket (D, K, I, E, J, R), chunk size, tier)]
    solve_seconds: float = float("nan")  # the run of each program on a dummy chunk
    compile_seconds: float = float("nan")


@float64
@timed
def warm_up(problems: list[Problem], *, count: int | None = None, caps=None,
            dtype=np.float64, chunk: int | None = None, devices=None, method: str = "ipm",
            config=None, tier: str | None = None, calls: int = 1) -> WarmUp:
    """Compiles (or loads from the cache) the kernel programs that `solve_batch` will need
    for problems like ``problems``, so that a later call pays no compilation.

    Args:
      problems: a sample of the problems to come (their sizes decide the buckets); they are
        not solved.
      count: how many problems the later call will have (default ``len(problems)``), in
        the proportions of the sample: it decides the chunk sizes.
      caps: as `solve_batch` (checked: ``method="optax"`` takes none; caps change no
        program); dtype, chunk, devices, method, config, tier: as `solve_batch` (pass
        ``tier="full"`` to prepare the fast-running programs of a long run).
      calls: how many calls of ``count`` such problems the programs will serve (default
        1): the planner weighs a program's compilation against the padding it saves over
        that many calls, so a long run gets finer buckets (fewer padded dimensions and
        phases) from its first call. Without it, `solve_batch` gets them by itself once
        its calls have paid as much padding as compiling them costs (`batch_plan.Paid`),
        and later processes find them stored.

    Returns:
      `WarmUp`: the programs and ``compile_seconds``. Programs already compiled in this
      process are not compiled again, and the bucket plan takes them into account, as the
      later call's plan will.
    """
    config = _method_config(method, config, caps)
    problems = as_list(problems, "problems", what="a list of problems (Problem)")
    for i, q in enumerate(problems):
        as_instance(q, Problem, f"problems[{i}]")
    bulk.build_all(problems)  # (the unbuilt ones together, not one by one)
    problems = [check_problem(q, f"problems[{i}]") for i, q in enumerate(problems)]
    if not problems:
        raise LibraInputError("problems = []: give at least one problem to warm up for.")
    n = len(problems)
    count = n if count is None else as_int(count, "count", 1)
    caps, dtype, chunk, devices = _check_options(caps, n, dtype, chunk, devices, True, True)
    devices = jax.local_devices() if devices is None else list(devices)
    max_chunk = chunk or default_max_chunk()
    first: dict[tuple, Problem] = {}
    counts: dict[tuple, int] = {}
    for q in problems:
        shape = bucket_shape(q)
        first.setdefault(shape, q)
        counts[shape] = counts.get(shape, 0) + 1
    counts = {shape: max(1, round(c * count / n)) for shape, c in counts.items()}
    kind = _kind(config, dtype, devices)
    calls = as_int(calls, "calls", 1, 10**9)
    target, plans = _plan_call(counts, max_chunk, kind, _check_tier(tier), calls=calls)
    programs = []
    for shape, (chosen, plan) in plans.items():
        sample = next(first[s] for s in counts if target[s] == shape)
        bucket = pad_concat([stack([sample])], shape)
        for size in sorted(set(plan)):  # (a cap changes no program: cap_on is an input)
            run_bucket(bucket, np.zeros(1), np.zeros(1, bool), dtype=dtype,
                        plan=[size], devices=devices, config=config, tier=chosen)
            remember(kind, shape, size, chosen)
            programs.append((shape, size, chosen))
    return WarmUp(programs)


@float64
@timed
def solve_stacked(p: Problem | list[Problem], *, caps=None, dtype=np.float64,
                  chunk: int | None = None, devices=None, certify_on_host: bool = True,
                  method: str = "ipm", config=None,
                  float64_fallback: bool = True, tier: str | None = None,
                  fixed_programs: bool = False, iteration_limit: bool = True) -> BatchResult:
    """Solves stacked problems (leaves [B, ...]; e.g. `problem.problems_from_stacked`).

    Args:
      p: one stacked batch (one shape), or a list of them (each of one shape; results in
        list order, the batches of one bucket sharing device calls).
      caps: optional [B] network cost caps ($); NaN = no cap.
      dtype: np.float64 (default) or np.float32 for the kernel (see module docstring).
      chunk: most problems per device call (default `default_max_chunk`).
      devices: devices to shard each chunk over (default: all local devices).
      certify_on_host: certify on the host what the in-kernel bound could not.
      method: "ipm" (the interior-point kernel) or "optax" (the first-order method of
        `first_order.py` and its exact step on the active set, vmapped the same way; its
        in-kernel bound certifies what it can, the host's tangent-plane LP the rest).
      config: the kernel's settings (`ipm.IpmConfig` / `first_order.FirstOrderConfig`;
        static; None: defaults).
      float64_fallback: with float32, solve again in float64 what float32 could not certify
        (counted in ``BatchResult.float64_fallback``); False keeps the float32 results.
      tier: the programs' compile tier (`TIERS`: "quick" compiles in ~2 s and runs ~4.5x
        slower, "full" the other way round); None: chosen per program by the cost model
        from the call's size and what this process has compiled. Long runs of many calls
        (a scan) pass "full": each call alone would pick "quick" and keep it.
      fixed_programs: run each bucket in its own program (no merging into a larger bucket)
        in chunks of exactly ``chunk`` (rounded down to `CHUNK_LADDER`), at ``tier`` (None:
        "full"). XLA's programs for two chunk sizes or buckets round the last digits
        differently, so only then is a problem's result independent of what else is in the
        call and of what the process ran before (a scan's shards: `studies.scan.problems`).
      iteration_limit: False runs every chunk without the iteration limit (`run_bucket`);
        only the time depends on it, not the results. A scan passes False: its designs come
        in order, so a bucket's first chunk is no sample of the rest and the limit stopped
        whole chunks, solved again (the default scan's solve 2.2 -> 2.4 s).

    Returns:
      `BatchResult`; ``bandwidth_gbps`` is [B, D] for one stacked batch, else a list of
      each problem's [D] vector.
    """
    config = _method_config(method, config, caps)
    if isinstance(p, Problem):
        groups = [check_problem(p, "p", stacked=True)]
    else:
        groups = [check_problem(q, f"p[{i}]", stacked=True)
                  for i, q in enumerate(as_list(p, "p", what="a stacked Problem or a list "
                                                               "of them"))]
    n = sum(int(np.shape(g.lo)[0]) for g in groups)
    caps, dtype, chunk, devices = _check_options(caps, n, dtype, chunk, devices,
                                                 certify_on_host, float64_fallback)
    bws, res = _solve_groups(groups, caps, dtype=dtype, chunk=chunk, devices=devices,
                             certify_on_host=certify_on_host, config=config,
                             float64_fallback=float64_fallback, tier=_check_tier(tier),
                             fixed_programs=as_bool(fixed_programs, "fixed_programs"),
                             iteration_limit=as_bool(iteration_limit, "iteration_limit"))
    if isinstance(p, Problem):
        res.bandwidth_gbps = bws[0]
    return res


def _groups(problems: list[Problem]) -> tuple[list[Problem], np.ndarray]:
    """The stacked groups of one size each that `solve_batch` solves, and the input index
    of each of their rows in order. Problems that `problem_from_arrays` left unbuilt are
    built together (`bulk.build_all`) and the blocks it makes taken as they are; those of
    blocks made by an earlier call are taken from their blocks (the rows of each block in
    the list, in order); the others are stacked by size (`problem_sizes`)."""
    made = bulk.build_all(problems)
    covered = np.zeros(len(problems), bool)
    for _, idxs in made:
        covered[idxs] = True
    blocks: dict[int, tuple] = {}
    by_size: dict[tuple, list[int]] = {}
    for idx in np.flatnonzero(~covered).tolist():
        q = problems[idx]
        placed = block_row(q)
        if placed is not None:
            block, row = placed
            entry = blocks.setdefault(id(block), (block, [], []))
            entry[1].append(row)
            entry[2].append(idx)
        else:
            by_size.setdefault(problem_sizes(q), []).append(idx)
    groups = [block for block, _ in made]
    order = [i for _, idxs in made for i in idxs]
    for block, rows, idxs in blocks.values():
        whole = rows == list(range(block.lo.shape[0]))
        groups.append(block if whole else take(block, np.asarray(rows)))
        order += idxs
    for idxs in by_size.values():
        groups.append(stack([problems[i] for i in idxs]))
        order += idxs
    return groups, np.asarray(order, dtype=np.int64)


@float64
@timed
def solve_batch(problems: list[Problem], *, caps=None, dtype=np.float64,
                chunk: int | None = None, devices=None, certify_on_host: bool = True,
                method: str = "ipm", config=None,
                float64_fallback: bool = True, tier: str | None = None,
                fixed_programs: bool = False) -> BatchResult:
    """Solves many `perf` problems of any sizes; results in input order.

    Problems of equal sizes are stacked, and the stacks of one bucket (`bucket_shape`) run
    through the same chunked kernel calls; the problems `problem_from_arrays` left unbuilt
    are built together first (`bulk.build_all`: vectorised, the same arrays as one by one),
    and a problem that one call built is taken from its block by the next. Arguments as
    for `solve_stacked`;
    ``bandwidth_gbps`` is a list of each problem's own [D] vector. The result can be
    indexed and iterated (`BatchItem` per problem); ``solve_seconds`` excludes JAX
    compilation, ``compile_seconds`` is it (the first call of a process switches the
    persistent cache on: `compilation.default_cache`).
    """
    config = _method_config(method, config, caps)
    if isinstance(problems, Problem):
        raise LibraInputError(
            "problems: a Problem; expected a list of problems (one problem goes to solve, a "
            "stacked batch to solve_stacked).")
    problems = as_list(problems, "problems", what="a list of problems (Problem)")
    for i, q in enumerate(problems):
        if type(q) is not Problem:
            as_instance(q, Problem, f"problems[{i}]")
        if unbuilt(q) is None and block_row(q) is None:  # (an unbuilt one is one problem)
            check_problem(q, f"problems[{i}]")
    n = len(problems)
    caps, dtype, chunk, devices = _check_options(caps, n, dtype, chunk, devices,
                                                 certify_on_host, float64_fallback)
    groups, order = _groups(problems)
    caps = None if caps is None else np.asarray(caps, np.float64)[order]
    _, res = _solve_groups(groups, caps, dtype=dtype, chunk=chunk, devices=devices,
                           certify_on_host=certify_on_host, config=config,
                           float64_fallback=float64_fallback, tier=_check_tier(tier),
                           fixed_programs=as_bool(fixed_programs, "fixed_programs"))
    inv = np.empty(n, int)
    inv[order] = np.arange(n)
    return BatchResult([res.bandwidth_gbps[j] for j in inv], res.step_time_ns[inv],
                       res.lower_bound_ns[inv], res.optimality_gap[inv],
                       res.max_violation[inv], [res.status[j] for j in inv],
                       res.iterations[inv], res.host_certified, res.float64_fallback)
