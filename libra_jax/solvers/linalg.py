"""Dense linear algebra in jnp operations, no LAPACK, so that it vmaps to elementwise work:
the Cholesky factor (`cholesky`, with dependent rows skipped), the triangular solves
(`solve_lower`, `solve_upper_t`), an orthonormal basis of a row space by Gram-Schmidt
(`row_basis`). Loops are unrolled in Python for small static sizes. Used by the
interior-point kernel (`ipm.py`) and the active-set step (`active_set.py`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _unrolled(n: int) -> bool:
    return n <= 16


def _loop(n, body, init):
    """fori_loop(0, n, body, init), unrolled in Python for small static n."""
    if _unrolled(n):
        for j in range(n):
            init = body(j, init)
        return init
    return jax.lax.fori_loop(0, n, body, init)


def cholesky(a: jax.Array, skip_tol: float | None = None):
    """Lower Cholesky factor of a symmetric positive (semi)definite ``a`` [n, n].

    Right-looking: column j is a's column j divided by the square root of its pivot, then
    a -= l l^T. With ``skip_tol``, a pivot <= skip_tol * (its original diagonal) marks a
    dependent row: its column is left zero and it is reported in ``skipped`` [n] (the
    triangular solves then give 0 in that coordinate). Without it, pivots are floored at
    the smallest normal number (callers scale and regularise first).
    """
    n = a.shape[-1]
    idx = jnp.arange(n)
    diag0 = jnp.diagonal(a)
    tiny = jnp.finfo(a.dtype).tiny

    def body(j, carry):
        a, low, skipped = carry
        col = a[:, j]
        piv = col[j]
        if skip_tol is None:
            bad = jnp.asarray(False)
            piv = jnp.maximum(piv, tiny)
        else:
            bad = piv <= skip_tol * jnp.maximum(diag0[j], tiny)
            piv = jnp.where(bad, 1.0, piv)
        root = jnp.sqrt(piv)
        l = jnp.where(idx > j, col / root, 0.0)
        l = jnp.where(idx == j, root, l)
        l = jnp.where(bad, 0.0, l)
        a = a - l[:, None] * l[None, :]
        return a, low.at[:, j].set(l), skipped.at[j].set(bad)

    init = (a, jnp.zeros_like(a), jnp.zeros((n,), bool))
    _, low, skipped = _loop(n, body, init)
    return low, skipped


def solve_lower(low: jax.Array, b: jax.Array, skipped=None) -> jax.Array:
    """x with low @ x = b (forward substitution; b [n] or [n, m])."""
    n = low.shape[-1]

    def body(j, x):
        piv = low[j, j]
        val = (b[j] - low[j] @ x) / jnp.where(piv != 0, piv, 1.0)
        if skipped is not None:
            val = jnp.where(skipped[j], 0.0, val)
        return x.at[j].set(val)

    return _loop(n, body, jnp.zeros_like(b))


def solve_upper_t(low: jax.Array, b: jax.Array, skipped=None) -> jax.Array:
    """x with low^T @ x = b (back substitution)."""
    n = low.shape[-1]

    def body(i, x):
        j = n - 1 - i
        piv = low[j, j]
        val = (b[j] - low[:, j] @ x) / jnp.where(piv != 0, piv, 1.0)
        if skipped is not None:
            val = jnp.where(skipped[j], 0.0, val)
        return x.at[j].set(val)

    return _loop(n, body, jnp.zeros_like(b))


def row_basis(e: jax.Array, tol: float = 1e-9, passes: int = 1):
    """Orthonormal basis of the row space of ``e`` [E, n] by Gram-Schmidt.

    Returns (q [E, n], r [E, E] lower triangular, dependent [E]) with e = r @ q; a row that
    depends on earlier ones (its remainder <= tol of its norm) gets a zero row of q, a zero
    column of r and ``dependent`` True (triangular solves with r skip it). ``passes`` = 2
    orthogonalises every row twice ("twice is enough"): q then stays orthonormal to rounding
    however ill-conditioned the rows are (one pass loses orthogonality in proportion to it).
    """
    m = e.shape[0]
    norms = jnp.sqrt(jnp.sum(e**2, axis=1))

    def body(j, carry):
        q, r, dep = carry
        coef = q @ e[j]  # [E]: zero for rows not yet built
        v = e[j] - coef @ q
        for _ in range(0 if isinstance(j, int) and j == 0 else passes - 1):  # (row 0: none)
            again = q @ v
            v = v - again @ q
            coef = coef + again
        nv = jnp.sqrt(jnp.sum(v**2))
        bad = nv <= tol * jnp.maximum(norms[j], jnp.finfo(e.dtype).tiny)
        q = q.at[j].set(jnp.where(bad, 0.0, v / jnp.where(bad, 1.0, nv)))
        r = r.at[j].set(jnp.where(jnp.arange(m) < j, coef, 0.0)).at[j, j].set(
            jnp.where(bad, 0.0, nv))
        return q, r, dep.at[j].set(bad)

    init = (jnp.zeros_like(e), jnp.zeros((m, m), e.dtype), jnp.zeros((m,), bool))
    return _loop(m, body, init)
