"""Batched `perf` solves: pad to bucket sizes, stack, one compiled call per bucket.

Problems of different sizes (dims D, phases K, inequality rows I, equality rows E) are padded
on the host with neutral values (jraph's pad-to-fixed-size idea) so that every problem in a
bucket has the same shapes, and a bucket is one compiled, vmapped call:

  * a padded dimension has no traffic, cost rate 0, and is fixed at 1 GB/s by an equality
    (its lower bound is marked tight), so it moves nothing and costs nothing;
  * a padded phase has no traffic (its epigraph variable is pinned at 0, see barrier.py);
  * a padded inequality row is 0 <= 1 (slack 1, zero gradient), a padded equality 0 == 0.

Sizes are rounded up to powers of two, so the number of compilations is bounded by the number
of distinct (D, K, I, E) buckets, not by the number of problems; results come back in input
order. Padding never changes a result (tested: batched == single).
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.barrier import BarrierConfig
from libra_jax.certificate import tangent_lp_bound
from libra_jax.problem import Problem
from libra_jax.solve import GAP_TOL, VIOLATION_TOL, _perf_core
from libra_jax.types import STATUS_NAMES, Status


def _bucket(n: int, minimum: int = 1) -> int:
    """Smallest power of two >= max(n, minimum)."""
    n = max(n, minimum)
    return 1 << (n - 1).bit_length()


def bucket_shape(p: Problem) -> tuple[int, ...]:
    """(D, K, I, E, J, R) bucket of a problem (J pieces and R rows of a general model)."""
    k, d = p.traffic_gb.shape
    return (_bucket(d), _bucket(k), _bucket(p.a_in.shape[0]), _bucket(p.a_eq.shape[0]),
            _bucket(p.piece_weight.shape[0]), _bucket(p.row_piece.shape[0]))


def _block(x, rows, cols):
    """x [r, c] zero-padded to [rows, cols]."""
    x = np.asarray(x, np.float64)
    out = np.zeros((rows, cols))
    out[: x.shape[0], : x.shape[1]] = x
    return out


def pad_problem(p: Problem, shape: tuple[int, ...]) -> Problem:
    """Pads a problem with neutral entries to the (D, K, I, E, J, R) ``shape`` (numpy, host)."""
    d_pad, k_pad, i_pad, e_pad, j_pad, r_pad = shape
    k, d = p.traffic_gb.shape
    i, e = p.a_in.shape[0], p.a_eq.shape[0]
    j, r = p.piece_weight.shape[0], p.row_piece.shape[0]
    size = (d, k, i, e, j, r)
    if any(a > b for a, b in zip(size, shape)):
        raise ValueError(f"problem of size {size} does not fit the bucket {shape}")

    def vec(x, n, fill):
        x = np.asarray(x)
        return np.concatenate([x, np.full((n - x.shape[0],), fill, x.dtype)])

    def mat(x, rows, cols):
        return _block(np.asarray(x, np.float64).reshape(-1, d), rows, cols)

    return Problem(
        traffic_gb=mat(p.traffic_gb, k_pad, d_pad),
        weight=vec(p.weight, k_pad, 0.0),
        compute_s=np.asarray(p.compute_s, np.float64),
        cost_rate=vec(p.cost_rate, d_pad, 0.0),
        lo=vec(p.lo, d_pad, 1.0),
        hi=vec(p.hi, d_pad, np.inf),
        upper=vec(p.upper, d_pad, 1.0),
        a_eq=mat(p.a_eq, e_pad, d_pad),
        b_eq=vec(p.b_eq, e_pad, 0.0),
        a_in=mat(p.a_in, i_pad, d_pad),
        b_in=vec(p.b_in, i_pad, 1.0),
        lo_tight=vec(p.lo_tight, d_pad, True),
        hi_tight=vec(p.hi_tight, d_pad, False),
        in_tight=vec(p.in_tight, i_pad, False),
        interior=vec(p.interior, d_pad, 1.0),
        min_cost_bw=vec(p.min_cost_bw, d_pad, 1.0),
        total_bw_gbps=np.asarray(p.total_bw_gbps, np.float64),
        piece_weight=vec(p.piece_weight, j_pad, 0.0),
        row_piece=vec(np.asarray(p.row_piece, np.int32), r_pad, 0),
        row_const_s=vec(p.row_const_s, r_pad, 0.0),
        row_gb=mat(p.row_gb, r_pad, d_pad),
        row_nest=_block(p.row_nest, r_pad, j_pad),
        row_on=vec(p.row_on, r_pad, False),
        comm_const_s=np.asarray(p.comm_const_s, np.float64),
        has_cost=False,
    )


def stack(problems: list[Problem]) -> Problem:
    """Stacks same-shape problems along a new leading batch axis."""
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *problems)


@functools.partial(jax.jit, static_argnames="config")
def solve_stacked(p: Problem, dim_valid: jax.Array,
                  config: BarrierConfig = BarrierConfig()) -> dict:
    """jit(lax.map(perf solve)) over a stacked batch ``p`` with ``dim_valid`` [B, D] (False on
    padded dims). Returns arrays with a leading batch axis: bw [B, D], step_s, lb_s, gap,
    violation (relative to the total bandwidth, as for single solves), status (codes)."""

    def one(q, valid):
        out = _perf_core(q, jnp.asarray(0.0, q.lo.dtype), False, q.interior, config)
        gap = jnp.maximum(out["step_s"] - out["lb_s"], 0.0) / out["lb_s"]
        gap = jnp.where(out["lb_s"] > 0, gap, jnp.inf)
        scale = jnp.maximum(jnp.sum(jnp.where(valid, q.upper, 0.0)), 1e-300)
        rel_viol = jnp.maximum(out["violation"], 0.0) / scale
        status = jnp.where(
            ~out["started_inside"], Status.INFEASIBLE,
            jnp.where(~out["finite"], Status.NONFINITE,
                      jnp.where((gap <= GAP_TOL) & (rel_viol <= VIOLATION_TOL),
                                Status.OK, Status.NOT_CONVERGED)))
        return dict(bw=out["bw"], step_s=out["step_s"], lb_s=out["lb_s"], gap=gap,
                    violation=rel_viol, status=status)

    # lax.map, not vmap: a vmapped SVD / LU becomes jaxlib's batched LAPACK kernel, whose
    # parallel batch map intermittently deadlocked in XLA:CPU's thread pool (jax 0.10, seen
    # in a native stack). Problems of a chunk run one after another inside one compiled call;
    # sharding still splits the chunk over devices.
    return jax.lax.map(lambda args: one(*args), (p, dim_valid))


@dataclasses.dataclass
class BatchResult:
    """Per-problem results in input order (numpy)."""

    bandwidth_gbps: list  # [B] arrays of each problem's own D
    step_time_ns: np.ndarray  # [B]
    lower_bound_ns: np.ndarray  # [B] certified lower bound of the optimal step time
    optimality_gap: np.ndarray  # [B]
    max_violation: np.ndarray  # [B] relative
    status: list  # [B] status names

    def __len__(self):
        return len(self.status)


def _shard(tree, devices):
    """Places the leading (batch) axis of every leaf across ``devices`` (jax.sharding)."""
    if len(devices) <= 1:
        return tree
    mesh = jax.sharding.Mesh(np.asarray(devices), ("batch",))
    spec = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    return jax.device_put(tree, spec)


def solve_batch(problems: list[Problem], config: BarrierConfig = BarrierConfig(),
                chunk: int | None = None, devices: list | None = None,
                certify_on_host: bool = True) -> BatchResult:
    """Solves many `perf` problems of any sizes; results in input order.

    Args:
      problems: problems from `problem.build_problem` / `problem_from_arrays`.
      config: barrier settings (static).
      chunk: at most this many problems per device call (memory bound); None = whole bucket.
        A bucket's last partial chunk is padded by repeating a problem, so chunks of one
        bucket share one compilation.
      devices: devices to shard each chunk's batch axis over (default: all local devices:
        the GPUs, or the CPU devices made by
        XLA_FLAGS=--xla_force_host_platform_device_count=N). Chunks are rounded up to a
        multiple of their number.
      certify_on_host: where the in-jit Lagrangian bound does not certify a result (it is
        weaker than the tangent LP on some degenerate problems, e.g. one used dimension),
        compute the tangent-LP certificate of `certificate.py` on the host, as single solves
        do, so that batched and single statuses agree. Costs one small LP per such problem.
    """
    devices = jax.local_devices() if devices is None else list(devices)
    n = len(problems)
    bw: list = [None] * n
    step = np.empty(n)
    lb = np.empty(n)
    gap = np.empty(n)
    viol = np.empty(n)
    status: list = [None] * n
    buckets: dict[tuple, list[int]] = {}
    for idx, p in enumerate(problems):
        buckets.setdefault(bucket_shape(p), []).append(idx)
    for shape, idxs in buckets.items():
        size = chunk or len(idxs)
        size = -(-size // len(devices)) * len(devices)
        for start in range(0, len(idxs), size):
            part = idxs[start:start + size]
            padded = [pad_problem(problems[i], shape) for i in part]
            padded += [padded[0]] * (size - len(part))
            valid = np.zeros((size, shape[0]), bool)
            for j, i in enumerate(part):
                valid[j, : problems[i].num_dims] = True
            valid[len(part):] = valid[0]
            batch = _shard((stack(padded), valid), devices)
            out = jax.device_get(solve_stacked(*batch, config))
            for j, i in enumerate(part):
                d = problems[i].num_dims
                bw[i] = np.asarray(out["bw"][j][:d])
                step[i] = out["step_s"][j] * 1e9
                lb[i] = out["lb_s"][j] * 1e9
                gap[i] = out["gap"][j]
                viol[i] = out["violation"][j]
                code = Status(int(out["status"][j]))
                if code == Status.NOT_CONVERGED and certify_on_host:
                    code, lb[i], gap[i] = _certify(problems[i], bw[i], step[i], viol[i])
                status[i] = STATUS_NAMES[code]
    return BatchResult(bw, step, lb, gap, viol, status)


def _certify(p: Problem, bw, step_ns, rel_viol):
    """The tangent-LP certificate (as single solves use) for a result the in-jit bound could
    not certify; returns (status, lower bound ns, gap)."""
    lb = tangent_lp_bound(p, bw)[0] * 1e9
    gap = max(step_ns - lb, 0.0) / lb if lb > 0 else float("inf")
    ok = gap <= GAP_TOL and rel_viol <= VIOLATION_TOL
    return (Status.OK if ok else Status.NOT_CONVERGED), lb, gap
