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
under an iteration limit, the few problems it stops being solved again (`_run_bucket`). A call's buckets are then merged up into larger ones present
in it (`plan_buckets`) while a program costs more to compile than the padding costs to run,
by a measured cost model that knows which programs this process has compiled already; chunk
sizes are chosen by the same model (`chunk_plan`). A first call of a few hundred mixed
problems compiles one program; a later call of ten thousand reuses it. `compiled_programs`
counts them; `warm_up` compiles them ahead of a call. The programs go through the executable
store (`compilation.STORE`): a later process loads them without tracing.

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

import concurrent.futures
import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.model import bulk
from libra_jax.model import objective as model
from libra_jax.model.problem import (
    ARRAY_FIELDS,
    SIZE_AXES,
    Problem,
    block_row,
    problem_sizes,
    unbuilt,
)
from libra_jax.solvers import active_set, first_order, ipm
from libra_jax.solvers.certificate import (
    TOLERANCES,
    VIOLATION_TOL,
    relative_gap,
    status_codes,
    tangent_lp_bound,
)
from libra_jax.solvers.compilation import STORE, timed
from libra_jax.inputs.limits import (
    as_bool,
    as_instance,
    as_int,
    as_list,
    as_numbers,
    as_real,
    as_str,
)
from libra_jax.types import STATUS_NAMES, LibraInputError, Status, float64, jit, show

# The engine's certificates are float64 (a float32 kernel is an explicit dtype choice): its
# entry points, like solve.py's, carry `types.float64`.
CHUNK_LADDER = (16, 256, 1024, 65536, 524288)


def default_max_chunk() -> int:
    """Largest chunk per device call: 256 problems on CPUs, 65536 on accelerators. On 2 CPU
    cores, 8,192 random problems at bucket (6, 8, 1, 1, 0, 0) took 36-41, 35-36, 32-33,
    33-36 and 42-44 us each in chunks of 64, 128, 256, 512 and 1024 (larger chunks fall out
    of the caches: 8192 ran 30-60% slower than 1024; smaller ones pay the call)."""
    return 256 if jax.default_backend() == "cpu" else 65536


def _ladder(n: int, minimum: int = 4) -> int:
    """The bucket size of ``n`` dimensions or phases: the least of 4, 6, 8, 12, 16, 24, ...
    (powers of two and 1.5x them) that holds max(n, ``minimum``). Padding a 2- or 3-dim
    problem to 4 costs little and saves whole programs; above that a step of 1.5x pads at
    most half of a problem's size (powers of two: up to all of it). On 2 cores, in chunks of
    256, 4,096 problems of D 2-5 and K 1-8 took 36-39 us each at D 6 against 41-42 at D 8,
    and 4,096 of K 1-12 (D 2-5, with budgets) 49-56 us at K 12 against 57-62 at K 16."""
    n = max(n, minimum, 1)
    top = 1 << (n - 1).bit_length()  # the power of two >= n
    return top * 3 // 4 if top >= 4 and n <= top * 3 // 4 else top


def _pow2(n: int, minimum: int = 0) -> int:
    n = max(n, minimum)
    return 0 if n == 0 else 1 << (n - 1).bit_length()


def bucket_shape(p: Problem) -> tuple[int, ...]:
    """The padded (D, K, I, E, J, R) a problem is solved at."""
    d, k, i, e, j, r = problem_sizes(p)
    return (_ladder(d), _ladder(k), _pow2(i), _pow2(e), _pow2(j), _pow2(r))


#: The cost model of `plan_buckets`, measured on 2 CPU cores side by side in one run (the
#: kernel of bucket (8, 8, 1, 1, 0, 0), 2,048 random problems:
#: `experiments/bench_coldstart.py --calibrate`, `experiments/results/
#: bench_coldstart_calibration.md`). A program costs its tracing and lowering (~1.5 s) and
#: XLA's compilation, which depends on the tier:
#:
#: * "full": XLA's default optimisation: 5.4-6.1 s before the first chunk; 169-198 us per
#:   problem in chunks of 256-1024 (334 in chunks of 16: ~2 ms per chunk);
#: * "quick": LLVM at -O0 (``xla_backend_optimization_level=0``): 1.7-2.6 s; 3.8-5.3x
#:   slower per problem (~9 ms per chunk): a first call of a few hundred problems is over
#:   sooner, a large one pays for the full tier.
#:
#: Per problem, at "full", a bucket (D, K, I, E, J, R) takes ~9 us x (D + J)^1.5 x
#: (1 + (K + R) / 64) (measured 72-82 us at D 4, 162-220 us at D 8, 662 us at D 16 in
#: chunks of 1024, whatever K). (Measured again on 2 cores of another machine for issue
#: 30: 2.2-2.3 s before the first chunk at "full", 0.6-0.9 s at "quick"; 45 us per
#: problem at "full" in chunks of 256, 73 in chunks of 1024: both the compilation and the
#: run were ~2.5x faster there, so their ratio, which is what the plans use, held.) The tiers give the same results (the same XLA graph; only
#: LLVM's optimisation of it differs: the before/after test runs both).
TIERS = {"full": {}, "quick": {"xla_backend_optimization_level": 0}}
COMPILE_SECONDS = {"full": 5.5, "quick": 2.0}
#: The single-problem program (`_kernel_one`, chunk size 1) compiles in about this share of
#: a chunk program's time (1.2 s against 1.8-2.0 s at the quick tier, 2 cores).
SINGLE_COMPILE_SHARE = 0.6
SLOWDOWN = {"full": 1.0, "quick": 4.5}
#: Work per chunk besides its problems (slicing, casting, the call, fetching the results).
CHUNK_SECONDS = {"full": 2e-3, "quick": 9e-3}


def problem_seconds(shape: tuple[int, ...], tier: str = "full") -> float:
    """Estimated kernel seconds per problem of bucket ``shape`` (see `TIERS`)."""
    d, k, _, _, j, r = shape
    return 9e-6 * (d + j) ** 1.5 * (1.0 + (k + r) / 64.0) * SLOWDOWN[tier]


def _join(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(max(x, y) for x, y in zip(a, b))


def program_plan(shape: tuple[int, ...], n: int, max_chunk: int,
                 compiled: frozenset = frozenset(),
                 tiers=tuple(TIERS)) -> tuple[float, str, list[int]]:
    """(estimated seconds, tier, chunk sizes) of the cheapest way to run ``n`` problems of
    bucket ``shape``, given the programs (bucket, chunk size, tier) already ``compiled``."""
    best = None
    for tier in tiers:
        sizes = {c for b, c, t in compiled if b == shape and t == tier}
        plan = chunk_plan(n, max_chunk, sizes, problem_seconds(shape, tier),
                          COMPILE_SECONDS[tier], CHUNK_SECONDS[tier])
        new = {c for c in plan if c not in sizes}
        cost = (sum(plan) * problem_seconds(shape, tier) + COMPILE_SECONDS[tier] * len(new)
                + CHUNK_SECONDS[tier] * len(plan))
        if best is None or cost < best[0]:
            best = (cost, tier, plan)
    return best


def plan_buckets(counts: dict[tuple, int], max_chunk: int,
                 compiled: frozenset = frozenset(), tiers=tuple(TIERS)) -> dict[tuple, tuple]:
    """Which bucket each bucket's problems run in: ``{bucket: target}``, a target being the
    bucket itself or a larger one (elementwise >=) they are padded up to.

    Each program costs `COMPILE_SECONDS` of its tier to compile unless it is in
    ``compiled`` (triples (bucket, chunk size, tier) this process has compiled already), and
    every problem slot of a chunk costs `problem_seconds` of its bucket and tier
    (`program_plan`). Buckets are merged greedily, the pair whose merge (into their
    elementwise maximum, or into a compiled bucket holding both) saves the most estimated
    seconds first, while a merge saves any. A first call of a few hundred mixed problems
    thus compiles one quick program; a later call of thousands more compiles at most one
    optimised program, or reuses what is there while the padding costs less than a new
    program would."""

    targets: dict[tuple, tuple] = {}  # (join, n) -> (cost, target), computed once each

    def best_target(join, n):
        if (join, n) not in targets:
            options = [join] + [shape for shape, _, _ in compiled
                                if all(x >= y for x, y in zip(shape, join))]
            targets[join, n] = min(((program_plan(t, n, max_chunk, compiled, tiers)[0], t)
                                    for t in set(options)), key=lambda ct: (ct[0], ct[1]))
        return targets[join, n]

    clusters = []  # [cost, target, join, n, members, id]
    for shape, n in sorted(counts.items()):
        c, t = best_target(shape, n)
        clusters.append([c, t, shape, n, [shape], len(clusters)])
    merges: dict[tuple, tuple] = {}  # (id a, id b) -> (saving, merged cluster)
    uid = len(clusters)
    while len(clusters) > 1:
        best = None
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                ca, cb = clusters[a], clusters[b]
                key = (ca[5], cb[5])
                if key not in merges:
                    join, n = _join(ca[2], cb[2]), ca[3] + cb[3]
                    c, t = best_target(join, n)
                    merges[key] = (ca[0] + cb[0] - c, [c, t, join, n, ca[4] + cb[4]])
                saving, merged = merges[key]
                if saving > 0 and (best is None or saving > best[0]):
                    best = (saving, a, b, merged)
        if best is None:
            break
        _, a, b, merged = best
        uid += 1
        clusters = [c for i, c in enumerate(clusters) if i not in (a, b)] + [merged + [uid]]
    return {shape: c[1] for c in clusters for shape in c[4]}


def pad_stacked(p: Problem, shape: tuple[int, ...]) -> Problem:
    """Pads a stacked batch ``p`` (leaves [B, ...], numpy) to ``shape`` = (D, K, I, E, J, R)
    with the neutral entries of the module docstring, all problems at once: each field's axes
    and fill value come from its metadata (`problem.ARRAY_FIELDS`)."""
    if any(a > b for a, b in zip(problem_sizes(p), shape)):
        raise ValueError(f"problems of size {problem_sizes(p)} do not fit the bucket {shape}")
    size = dict(zip(SIZE_AXES, shape))

    def pad(field):
        meta = field.metadata
        x = np.asarray(getattr(p, field.name), meta["dtype"])
        axes = meta["axes"]
        width = [(0, 0)] * (x.ndim - len(axes)) + [
            (0, size[a] - n) for a, n in zip(axes, x.shape[x.ndim - len(axes):])]
        if not any(w for _, w in width):
            return x
        return np.pad(x, width, constant_values=meta["fill"])

    return dataclasses.replace(p, has_cost=False, **{f.name: pad(f) for f in ARRAY_FIELDS})


def pad_concat(groups: list[Problem], shape: tuple[int, ...]) -> Problem:
    """The stacked batches ``groups`` padded to ``shape`` (as `pad_stacked`) and
    concatenated along the batch axis: one array per field, filled with the neutral values
    and each group written into its block (no per-group padded copies)."""
    for g in groups:
        if any(a > b for a, b in zip(problem_sizes(g), shape)):
            raise ValueError(f"problems of size {problem_sizes(g)} do not fit the bucket "
                             f"{shape}")
    size = dict(zip(SIZE_AXES, shape))
    counts = [int(np.shape(g.lo)[0]) for g in groups]
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    fields = {}
    for field in ARRAY_FIELDS:
        meta = field.metadata
        axes = meta["axes"]
        xs = [np.asarray(getattr(g, field.name)) for g in groups]
        free = xs[0].shape[1:xs[0].ndim - len(axes)]
        out = np.full((int(starts[-1]), *free, *(size[a] for a in axes)), meta["fill"],
                      meta["dtype"])
        for x, a, b in zip(xs, starts[:-1], starts[1:]):
            out[(slice(a, b), ..., *(slice(0, k) for k in x.shape[x.ndim - len(axes):]))] = x
        fields[field.name] = out
    return dataclasses.replace(groups[0], has_cost=False, **fields)


def stack(problems: list[Problem]) -> Problem:
    """Stacks same-shape problems along a new leading batch axis (numpy leaves)."""
    problems = [dataclasses.replace(q, has_cost=False) for q in problems]
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *problems)


def take(p: Problem, idx) -> Problem:
    """The problems ``idx`` of a stacked batch."""
    return jax.tree.map(lambda x: np.asarray(x)[idx], p)


def unstack(p: Problem, i: int) -> Problem:
    """Problem ``i`` of a stacked batch (its own sizes are those of the batch)."""
    return jax.tree.map(lambda x: np.asarray(x)[i], p)


def ladder_sizes(max_chunk: int) -> list[int]:
    """The `CHUNK_LADDER` sizes a call of at most ``max_chunk`` problems per chunk may use
    (the smallest one always)."""
    return [c for c in CHUNK_LADDER if c <= max(max_chunk, CHUNK_LADDER[0])]


def chunk_plan(n: int, max_chunk: int, compiled_sizes=(), problem_s: float = 0.0,
               compile_s: float = COMPILE_SECONDS["full"],
               chunk_s: float = CHUNK_SECONDS["full"]) -> list[int]:
    """Chunk sizes covering ``n`` problems, all from `CHUNK_LADDER` (<= ``max_chunk``; the
    last chunk is padded by repeating a problem): the cheapest, by the cost model of
    `plan_buckets` (``problem_s`` seconds per problem slot, ``compile_s`` per chunk size not
    in ``compiled_sizes``, ``chunk_s`` per chunk), of full chunks of the largest
    size then one of a size holding the rest, and one size throughout. With no cost given
    that is the first: a bucket compiles a few programs whatever the batch sizes; a size
    already compiled is reused rather than compiling another (a call of 10,000 after one of
    200 runs 40 chunks of 256 unless a program of 1024 pays for its compilation)."""
    ladder = ladder_sizes(max_chunk)
    full, left = divmod(n, ladder[-1])
    mixed = [ladder[-1]] * full
    plans = []
    if left:
        plans += [mixed + [c] for c in ladder if c >= left]
    else:
        plans.append(mixed)
    plans += [[c] * -(-n // c) for c in ladder if n > 0]
    if n == 1:
        # A single problem may also run alone: size 1 is the program `_kernel_one`, traced
        # without vmap (cheaper to compile: `SINGLE_COMPILE_SHARE`), chosen when no compiled
        # size costs less.
        plans.append([1])

    def cost(plan):
        new = {c for c in plan if c not in compiled_sizes}
        return (sum(plan) * problem_s + compile_s * len(new) * (
            SINGLE_COMPILE_SHARE if plan == [1] else 1.0) + chunk_s * len(plan), sum(plan))

    return min(plans, key=cost) if plans else []


@jit(static_argnames="config")
def _kernel(p: Problem, cap, cap_on, limit, config: ipm.IpmConfig):
    """`ipm.solve_perf` vmapped over a chunk, each problem stopped after ``limit`` (an int32
    scalar, traced: one program for every limit) iterations at most."""
    # Full-precision products: GPUs otherwise multiply float32 matrices in TF32 (10-bit
    # mantissa), which the Newton systems cannot afford.
    with jax.default_matmul_precision("highest"):
        return jax.vmap(lambda q, c, on: ipm.solve_perf(q, c, on, config, limit))(
            p, cap, cap_on)


@jit(static_argnames="config")
def _kernel_one(p: Problem, cap, cap_on, config: ipm.IpmConfig):
    """`_kernel` for a chunk of one problem (leaves [1, ...]), traced without vmap: at the
    command's bucket (4, 4, 0, 1, 0, 0), quick tier, its trace, lowering and XLA compile
    took 0.30 + 0.22 + 0.64 s against 0.76 + 0.25 + 0.83 s for the vmapped chunk of 16 (the
    while loop's batching rule interprets the whole loop body a second time), and it runs
    one problem in 2.4 ms against 9 ms for the chunk. The same operations in the same order,
    so the same results up to XLA's rounding (the shipped optima agree to 1e-12)."""
    with jax.default_matmul_precision("highest"):
        out = ipm.solve_perf(jax.tree.map(lambda x: x[0], p), cap[0], cap_on[0], config)
    return jax.tree.map(lambda x: x[None], out)


@jit(static_argnames="config")
def _kernel_optax(p: Problem, config: first_order.FirstOrderConfig):
    """The Optax method (`first_order.py`, with its exact step on the active set) vmapped
    over a chunk, as a `ipm.KernelOutput` with its in-kernel Lagrangian bound and no
    multipliers: what that bound leaves uncertified goes to the host's tangent-plane LP."""
    with jax.default_matmul_precision("highest"):
        out = jax.vmap(lambda q: first_order.solve_first_order(
            q, first_order.default_params(q.lo.dtype), config))(p)
    k, d = p.traffic_gb.shape[1:]
    b = p.lo.shape[0]
    zeros = jnp.zeros((b, 0), p.lo.dtype)
    return ipm.KernelOutput(
        bw=out.bw, step_s=out.step_s, lb_s=out.lower_bound_s,
        lam_pair=jnp.zeros((b, k, d), p.lo.dtype), lam_row=zeros, lam_lin=zeros, nu=zeros,
        iterations=jnp.full((b,), config.num_steps, jnp.int32),
        finite=out.status != int(Status.NONFINITE), started_inside=jnp.ones((b,), bool),
        violation=out.max_violation, done=jnp.ones((b,), bool))


@jit
def _evaluate_f64(p: Problem, out: ipm.KernelOutput, cap, cap_on):
    """Step time, bound and violation of a (float32) kernel result, in float64."""

    def one(q, o, c, on):
        n_gen = q.a_in.shape[0] + 1
        bw = o.bw.astype(q.lo.dtype)
        cast = lambda x: x.astype(q.lo.dtype)  # noqa: E731
        lb = ipm.lagrangian_bound(q, cast(o.lam_pair), cast(o.lam_row),
                                  cast(o.lam_lin)[:n_gen], cast(o.nu), c)
        return bw, model.step_time_s(bw, q), lb, ipm.violation(bw, q, c, on)

    with jax.default_matmul_precision("highest"):
        return jax.vmap(one)(p, out, cap, cap_on)


#: (kernel kind, bucket, chunk size, tier) of the kernel programs this process has run, for
#: `plan_buckets`' cost model.
_COMPILED: set = set()


def _compiled(kind) -> frozenset:
    """(bucket, chunk size, tier) of the programs of ``kind`` this process has run."""
    return frozenset((shape, c, tier) for k, shape, c, tier in _COMPILED if k == kind)


def _plan_call(counts: dict[tuple, int], max_chunk: int, kind, tier,
               fixed: bool = False) -> tuple[dict, dict]:
    """The plan of one call (`solve_batch`, `solve_stacked`, `warm_up`) with ``counts``
    problems per bucket: (``{bucket: target}`` from `plan_buckets`, ``{target: (tier,
    chunk sizes)}`` from `program_plan`), given what this process compiled for ``kind``
    and the caller's ``tier`` (None: the cost model chooses). With ``fixed`` (the engines'
    ``fixed_programs``) every bucket runs in its own program, in chunks of the largest
    `CHUNK_LADDER` size <= ``max_chunk``, at ``tier`` (None: "full"): a plan that depends on
    nothing but each problem's bucket."""
    if fixed:
        size = ladder_sizes(max_chunk)[-1]
        return ({shape: shape for shape in counts},
                {shape: (tier or "full", [size] * -(-n // size))
                 for shape, n in counts.items()})
    compiled = _compiled(kind)
    tiers = tuple(TIERS) if tier is None else (tier,)
    target = plan_buckets(counts, max_chunk, compiled, tiers)
    totals: dict[tuple, int] = {}
    for shape, c in counts.items():
        totals[target[shape]] = totals.get(target[shape], 0) + c
    return target, {shape: program_plan(shape, total, max_chunk, compiled, tiers)[1:]
                    for shape, total in totals.items()}


def _kind(config, dtype, devices) -> tuple:
    """What, besides bucket, chunk size and tier, tells kernel programs apart."""
    return (type(config).__name__, config, np.dtype(dtype).name, len(devices))


def compiled_programs() -> int:
    """How many kernel programs (bucket x chunk size x dtype x config) are compiled (and
    exact-step programs of the host's polish, one per bucket that needed it)."""
    return (STORE.programs() + _kernel._cache_size() + _kernel_optax._cache_size()
            + _evaluate_f64._cache_size() + _exact_step._cache_size())


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


def _shard(tree, devices):
    """Places the leading (batch) axis of every leaf across ``devices`` (jax.sharding)."""
    if len(devices) <= 1:
        return tree
    mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    return jax.device_put(tree, spec)


def _cast(p: Problem, dtype) -> Problem:
    return jax.tree.map(
        lambda x: np.asarray(x, dtype) if np.issubdtype(np.asarray(x).dtype, np.floating)
        else np.asarray(x), p)


def _call_jit(fn, args, static=None):
    """``fn(*args, **static)`` through jit's own cache (sharded calls: the store keeps
    single-device executables only)."""
    return fn(*args, **(static or {}))


def _run_bucket(p: Problem, cap, cap_on, *, dtype, plan, devices, config, tier="full"):
    """Solves a padded stacked bucket in the chunks of ``plan`` (`chunk_plan`), with the
    programs of ``tier`` (`TIERS`); returns numpy arrays (bw [B, D], step_s, lb_s, violation,
    iterations, finite, started_inside). On one CPU device, two chunks run at a time from
    two threads (XLA runs one call on ~1.7 of 2 cores; two at a time took 0.175 s for what
    one after the other took 0.25 s).

    A chunk runs for its slowest problem's iterations. With the interior-point kernel and
    more than `LIMIT_MIN_CHUNKS` chunks, the chunks after the first run under an iteration
    limit (`_IterationLimit`) and the few problems it stops are solved again from their start,
    in chunks of the size they ran in (the same program), without the limit: a problem's
    iterations and result are those of one unlimited run, wherever and whenever it runs."""
    n = p.lo.shape[0]
    ndev = len(devices)
    if ndev == 1:
        run = functools.partial(STORE.call, options=TIERS[tier])
    else:  # (sharded: jit's own cache and options)
        run = _call_jit
    is_ipm = isinstance(config, ipm.IpmConfig)
    max_iter = config.max_iter if is_ipm else 0

    def chunk(rows, size, limit):
        size = -(-size // ndev) * ndev
        idx = np.concatenate([rows, np.full(size - len(rows), rows[0])])  # padded: a repeat
        part, c, on = take(p, idx), cap[idx], cap_on[idx]
        low = _cast(part, dtype)
        args = _shard((low, c.astype(dtype), on), devices)
        if not is_ipm:
            out = run(_kernel_optax, (args[0],), {"config": config})
        elif size == 1:
            out = run(_kernel_one, args, {"config": config})
        else:
            out = run(_kernel, args + (np.int32(limit),), {"config": config})
        if np.dtype(dtype) != np.float64:
            bw, step, lb, viol = run(_evaluate_f64, _shard((part, out, c, on), devices))
        else:
            bw, step, lb, viol = out.bw, out.step_s, out.lb_s, out.violation
        got = jax.device_get((bw, step, lb, viol, out.iterations, out.finite,
                              out.started_inside, out.done))
        return [np.asarray(x)[:len(rows)] for x in got]

    starts = np.concatenate([[0], np.cumsum(plan)[:-1]]).astype(int)
    jobs = [(np.arange(a, min(a + c, n)), int(c)) for a, c in zip(starts, plan) if a < n]
    threads = len(jobs) > 1 and ndev == 1 and devices[0].platform == "cpu"
    limits = _IterationLimit(max_iter, n, len(jobs) > LIMIT_MIN_CHUNKS and is_ipm)

    def job(rows, size):
        limit = limits.current(size)
        out = chunk(rows, size, limit)
        limits.observe(out[4], limit)
        return out, limit

    def run_all(todo):
        if len(todo) > 1 and threads:
            with concurrent.futures.ThreadPoolExecutor(2) as pool:
                # (JAX's x64 switch is per thread: the workers need it as this thread has it)
                return list(pool.map(float64(lambda j: job(*j)), todo))
        return [job(*j) for j in todo]

    # The first chunk alone: it compiles (or loads) the program once, before the threads,
    # and its iterations are the first sample of the limit.
    done = [job(*jobs[0])] + run_all(jobs[1:])
    cols = [np.concatenate(c) for c in zip(*(out for out, _ in done))]
    # Problems stopped by a limit: solved again without one, in chunks of their size.
    again: dict[int, list] = {}
    for (rows, size), (out, limit) in zip(jobs, done):
        if limit < max_iter:
            stopped = rows[~out[7] & (out[4] >= limit)]
            again.setdefault(size, []).extend(stopped.tolist())
    redo = [(np.asarray(rows[i:i + size]), size) for size, rows in again.items()
            for i in range(0, len(rows), size)]
    limits.stop()
    for (rows, _), (out, _) in zip(redo, run_all(redo)):
        for col, vals in zip(cols, out):
            col[rows] = vals
    return cols[:7]


#: Chunks a bucket needs before the iteration limit is worth sampling (`_run_bucket`).
LIMIT_MIN_CHUNKS = 3
#: Every this many chunks, one runs without the limit: its iterations keep the sample of
#: `_IterationLimit` up to date.
LIMIT_SAMPLE_EVERY = 8


class _IterationLimit:
    """The iteration limit of a bucket's chunks (`_run_bucket`). A chunk costs its slowest
    problem's iterations for every problem in it, so a limit that stops the slowest few (to
    be solved again from their start, in chunks of their own) saves the difference for all
    the others. The limit L minimises the estimated cost of the bucket from the iterations
    of the problems that chunks without a limit have run so far (the first chunk, then
    every `LIMIT_SAMPLE_EVERY`-th: a sample of the rest): ``n`` min(L, top) for the chunks,
    plus a whole chunk running ``top`` iterations for every ``size`` problems above L (top:
    the most seen). Only the time depends on it, not the results."""

    def __init__(self, max_iter: int, n: int, active: bool):
        self.max_iter, self.n, self.active = max_iter, n, active
        self.seen = np.zeros(max_iter + 1, np.int64)  # problems per iteration count
        self.calls = 0

    def stop(self):
        self.active = False

    def current(self, size: int) -> int:
        """The limit of the next chunk of ``size`` problems (``max_iter``: none)."""
        self.calls += 1
        total = int(self.seen.sum())
        if (not self.active or size <= 1 or total == 0
                or (self.calls - 1) % LIMIT_SAMPLE_EVERY == 0):
            return self.max_iter
        top = int(np.flatnonzero(self.seen)[-1])
        levels = np.arange(1, top + 1)
        over = (total - np.cumsum(self.seen))[1:top + 1] / total  # share above L
        cost = self.n * levels + np.ceil(over * self.n / size) * size * top
        best = int(levels[np.argmin(cost)])
        return self.max_iter if best >= top else best

    def observe(self, iterations, limit: int) -> None:
        """The iterations of a chunk that ran under ``limit``."""
        if self.active and limit >= self.max_iter:
            self.seen += np.bincount(np.minimum(iterations, self.max_iter),
                                     minlength=self.max_iter + 1)


def pad_one(p: Problem) -> Problem:
    """``p`` padded to its bucket (`bucket_shape`), so that problems of one bucket share
    compiled programs; its first ``p.lo.shape[-1]`` dims are p's."""
    one = stack([p])
    return unstack(pad_stacked(one, bucket_shape(one)), 0)


@jit
def _exact_step(p: Problem, x):
    viol_tol = 0.1 * VIOLATION_TOL * jnp.maximum(jnp.sum(p.upper), 1e-300)
    with jax.default_matmul_precision("highest"):
        return active_set.exact_step(p, x, viol_tol)


def _polish(q: Problem, x):
    """The exact step from the kernel's point ``x`` [D] of problem ``q``, on the host:
    (bw, step_s, lb_s, violation) numpy / floats."""
    d = q.lo.shape[-1]
    padded = pad_one(q)
    start = np.concatenate([np.asarray(x, np.float64), np.ones(padded.lo.shape[-1] - d)])
    out = jax.device_get(STORE.call(_exact_step, (padded, jnp.asarray(start))))
    return (np.asarray(out.bw[:d]), float(out.objective_s), float(out.lb_s),
            float(out.violation))


def _finish(problems_for_host, caps, bw, step_s, lb_s, viol, finite, inside, scale, dtype,
            certify_on_host):
    """Gaps, statuses and the host's work on what the in-kernel bound left open (module
    docstring): the exact step (float64, no cap), then the tangent-plane LP."""
    gap_tol, viol_tol = TOLERANCES[np.dtype(dtype)]
    step = step_s * 1e9
    lb = lb_s * 1e9
    gap = relative_gap(step, lb)
    rel_viol = np.maximum(viol, 0.0) / scale
    finite = finite & np.isfinite(step)
    codes = np.asarray(status_codes(inside, finite, gap, rel_viol, gap_tol, viol_tol))
    uncertified = np.nonzero(codes == int(Status.NOT_CONVERGED))[0] if certify_on_host else []
    for i in uncertified:
        if np.dtype(dtype) != np.float64 or np.isfinite(caps[i]):
            continue
        new_bw, new_step, new_lb, new_viol = _polish(problems_for_host(i), bw[i])
        if (np.isfinite(new_step) and new_step * 1e9 <= step[i]
                and new_viol / scale[i] <= viol_tol):
            bw[i][:] = new_bw
            step[i], rel_viol[i] = new_step * 1e9, max(new_viol, 0.0) / scale[i]
        if np.isfinite(new_lb) and new_lb * 1e9 > lb[i]:
            lb[i] = new_lb * 1e9
        gap[i] = relative_gap(step[i], lb[i])
    for i in uncertified:
        cap = float(caps[i]) if np.isfinite(caps[i]) else None
        bound = tangent_lp_bound(problems_for_host(i), bw[i], cap)[0] * 1e9
        if np.isfinite(bound) and bound > lb[i]:
            lb[i] = bound
            gap[i] = relative_gap(step[i], bound)
    if len(uncertified):
        codes = np.asarray(status_codes(inside, finite, gap, rel_viol, gap_tol, viol_tol))
    host = len(uncertified)
    status = [STATUS_NAMES[Status(int(c))] for c in codes]
    return step, lb, gap, rel_viol, status, host


def _solve_groups(groups: list[Problem], caps, *, dtype, chunk, devices, certify_on_host,
                  config, float64_fallback=True, tier=None, fixed_programs=False):
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
    by_bucket: dict[tuple, list[int]] = {}
    for gi, shape in enumerate(shapes):
        by_bucket.setdefault(target[shape], []).append(gi)
    cols = [np.empty(n) for _ in range(3)]
    iters = np.zeros(n, np.int64)
    finite = np.zeros(n, bool)
    inside = np.zeros(n, bool)
    bws: list = [None] * len(groups)
    for shape, gis in by_bucket.items():
        order = np.concatenate([np.arange(offsets[g], offsets[g + 1]) for g in gis])
        bucket = pad_concat([groups[g] for g in gis], shape)
        c = caps[order]
        chosen, plan = plans[shape]
        out = _run_bucket(bucket, np.where(np.isfinite(c), c, 0.0), np.isfinite(c),
                          dtype=dtype, plan=plan, devices=devices, config=config,
                          tier=chosen)
        _COMPILED.update((kind, shape, size, chosen) for size in plan)
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
    step, lb, gap, rel_viol, status, host = _finish(
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
            config=None, tier: str | None = None) -> WarmUp:
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
    target, plans = _plan_call(counts, max_chunk, kind, _check_tier(tier))
    programs = []
    for shape, (chosen, plan) in plans.items():
        sample = next(first[s] for s in counts if target[s] == shape)
        bucket = pad_concat([stack([sample])], shape)
        for size in sorted(set(plan)):  # (a cap changes no program: cap_on is an input)
            _run_bucket(bucket, np.zeros(1), np.zeros(1, bool), dtype=dtype,
                        plan=[size], devices=devices, config=config, tier=chosen)
            _COMPILED.add((kind, shape, size, chosen))
            programs.append((shape, size, chosen))
    return WarmUp(programs)


@float64
@timed
def solve_stacked(p: Problem | list[Problem], *, caps=None, dtype=np.float64,
                  chunk: int | None = None, devices=None, certify_on_host: bool = True,
                  method: str = "ipm", config=None,
                  float64_fallback: bool = True, tier: str | None = None,
                  fixed_programs: bool = False) -> BatchResult:
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
                             fixed_programs=as_bool(fixed_programs, "fixed_programs"))
    if isinstance(p, Problem):
        res.bandwidth_gbps = bws[0]
    return res


def _groups(problems: list[Problem]) -> tuple[list[Problem], np.ndarray]:
    """The stacked groups of one size each that `solve_batch` solves, and the input index
    of each of their rows in order. Problems that `problem_from_arrays` left unbuilt are
    built together (`bulk.build_all`) and their blocks taken as they are (the rows of each
    block in the list, in order); the others are stacked by size (`problem_sizes`)."""
    bulk.build_all(problems)
    blocks: dict[int, tuple] = {}
    by_size: dict[tuple, list[int]] = {}
    for idx, q in enumerate(problems):
        placed = block_row(q)
        if placed is not None:
            block, row = placed
            entry = blocks.setdefault(id(block), (block, [], []))
            entry[1].append(row)
            entry[2].append(idx)
        else:
            by_size.setdefault(problem_sizes(q), []).append(idx)
    groups, order = [], []
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
