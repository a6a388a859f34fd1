"""The batch engine's runner (`batch`): the kernel programs, chunk running and the host's finish.

The jitted kernels (`_kernel`, the interior point vmapped over a chunk; `_kernel_one`, one
problem without vmap; `_kernel_optax`, the first-order method; `_evaluate_f64`, the float64
evaluation of a float32 run) and `compiled_programs`, which counts them; one bucket's chunks
run across devices, under an iteration limit after the first, several buckets side by side
(`run_buckets`, `run_bucket`,
`_IterationLimit`); the host's polish by the exact step on the active set and its
tangent-plane certificate (`finish`). See `batch`'s docstring for the whole engine.
"""

from __future__ import annotations

import concurrent.futures
import functools

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.model import objective as model
from libra_jax.model.problem import Problem
from libra_jax.solvers import active_set, first_order, ipm
from libra_jax.solvers.certificate import (
    TOLERANCES,
    VIOLATION_TOL,
    relative_gap,
    status_codes,
    tangent_lp_bound,
)
from libra_jax.solvers.compilation import STORE
from libra_jax.types import STATUS_NAMES, Status, float64, jit
from libra_jax.solvers.batch_plan import (
    TIERS,
    bucket_shape,
    pad_stacked,
    stack,
    take,
    unstack,
)


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


def compiled_programs() -> int:
    """How many kernel programs (bucket x chunk size x dtype x config) are compiled (and
    exact-step programs of the host's polish, one per bucket that needed it)."""
    return (STORE.programs() + _kernel._cache_size() + _kernel_optax._cache_size()
            + _evaluate_f64._cache_size() + _exact_step._cache_size())


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


#: Chunks in flight at a time on one CPU device (`run_buckets`); 1: one after the other.
CHUNK_THREADS = 2


def run_bucket(p: Problem, cap, cap_on, *, dtype, plan, devices, config, tier="full",
               iteration_limit=True):
    """Solves a padded stacked bucket in the chunks of ``plan`` (`chunk_plan`), with the
    programs of ``tier`` (`TIERS`); returns numpy arrays (bw [B, D], step_s, lb_s, violation,
    iterations, finite, started_inside): `run_buckets` of one bucket."""
    return run_buckets([(p, cap, cap_on, plan, tier)], dtype=dtype, devices=devices,
                       config=config, iteration_limit=iteration_limit)[0]


def run_buckets(buckets, *, dtype, devices, config, iteration_limit=True) -> list:
    """Solves padded stacked buckets, each ``(problems, cap, cap_on, plan, tier)``: its
    problems in the chunks of ``plan`` (`chunk_plan`) with the programs of ``tier``
    (`TIERS`). Returns, per bucket, numpy arrays (bw [B, D], step_s, lb_s, violation,
    iterations, finite, started_inside). On one CPU device, `CHUNK_THREADS` chunks run at a
    time from as many threads (XLA runs one call on ~1.7 of 2 cores; two at a time took
    0.175 s for what one after the other took 0.25 s; on one H200 two threads gained
    nothing: 192,548 against 197,697 problems/s of solving, 10^6 gpt3_4d problems), the
    chunks of every bucket in one pool: first each
    bucket's first chunk (it compiles or loads its program, once, under the store's lock,
    and its iterations are the first sample of its limit), then the other chunks of all
    buckets, then the problems a limit stopped (below). Buckets thus run side by side: a
    call split into several buckets keeps both cores busy as one bucket does.

    A chunk runs for its slowest problem's iterations. With the interior-point kernel and
    more than `LIMIT_MIN_CHUNKS` chunks in a bucket, the bucket's chunks after its first
    run under an iteration limit (`_IterationLimit`, one per bucket) and the few problems it
    stops are solved again from their start, in chunks of the size they ran in (the same
    program), without the limit: a problem's iterations and result are those of one
    unlimited run, wherever and whenever it runs. ``iteration_limit=False``: no limit in
    any chunk."""
    ndev = len(devices)
    is_ipm = isinstance(config, ipm.IpmConfig)
    max_iter = config.max_iter if is_ipm else 0

    def chunk(b, rows, size, limit):
        p, cap, cap_on, _, tier = buckets[b]
        if ndev == 1:
            run = functools.partial(STORE.call, options=TIERS[tier])
        else:  # (sharded: jit's own cache and options)
            run = _call_jit
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

    jobs, limits = [], []  # jobs: (bucket, rows, size), in each bucket's chunk order
    for b, (p, _, _, plan, _) in enumerate(buckets):
        n = p.lo.shape[0]
        starts = np.concatenate([[0], np.cumsum(plan)[:-1]]).astype(int)
        mine = [(b, np.arange(a, min(a + c, n)), int(c)) for a, c in zip(starts, plan)
                if a < n]
        jobs += mine
        limits.append(_IterationLimit(max_iter, n, iteration_limit
                                      and len(mine) > LIMIT_MIN_CHUNKS and is_ipm))
    threads = (len(jobs) > 1 and ndev == 1 and devices[0].platform == "cpu"
               and CHUNK_THREADS > 1)

    def job(b, rows, size):
        limit = limits[b].current(size)
        out = chunk(b, rows, size, limit)
        limits[b].observe(out[4], limit)
        return out, limit

    def run_all(todo):
        if len(todo) > 1 and threads:
            with concurrent.futures.ThreadPoolExecutor(CHUNK_THREADS) as pool:
                # (JAX's x64 switch is per thread: the workers need it as this thread has it)
                return list(pool.map(float64(lambda j: job(*j)), todo))
        return [job(*j) for j in todo]

    of_bucket = [[i for i, j in enumerate(jobs) if j[0] == b] for b in range(len(buckets))]
    firsts = [mine[0] for mine in of_bucket]
    rest = [i for mine in of_bucket for i in mine[1:]]
    done = [None] * len(jobs)
    for i, out in zip(firsts, run_all([jobs[i] for i in firsts])):
        done[i] = out
    for i, out in zip(rest, run_all([jobs[i] for i in rest])):
        done[i] = out
    results = [[np.concatenate(c) for c in zip(*(done[i][0] for i in mine))]
               for mine in of_bucket]
    # Problems stopped by a limit: solved again without one, in chunks of their size.
    redo = []
    for b, mine in enumerate(of_bucket):
        again: dict[int, list] = {}
        for i in mine:
            _, rows, size = jobs[i]
            out, limit = done[i]
            if limit < max_iter:
                stopped = rows[~out[7] & (out[4] >= limit)]
                again.setdefault(size, []).extend(stopped.tolist())
        redo += [(b, np.asarray(rows[i:i + size]), size) for size, rows in again.items()
                 for i in range(0, len(rows), size)]
        limits[b].stop()
    for (b, rows, _), (out, _) in zip(redo, run_all(redo)):
        for col, vals in zip(results[b], out):
            col[rows] = vals
    return [cols[:7] for cols in results]


#: Chunks a bucket needs before the iteration limit is worth sampling (`run_bucket`).
LIMIT_MIN_CHUNKS = 3


#: Every this many chunks, one runs without the limit: its iterations keep the sample of
#: `_IterationLimit` up to date.
LIMIT_SAMPLE_EVERY = 8


class _IterationLimit:
    """The iteration limit of a bucket's chunks (`run_bucket`). A chunk costs its slowest
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


def finish(problems_for_host, caps, bw, step_s, lb_s, viol, finite, inside, scale, dtype,
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
    names = np.array([STATUS_NAMES[Status(c)] for c in range(len(Status))], dtype=object)
    status = names[codes].tolist()  # (an enum per problem cost ~1 us: 1 s of 10^6)
    return step, lb, gap, rel_viol, status, host
