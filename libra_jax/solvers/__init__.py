"""Solvers layer: the interior-point kernel (no LAPACK, vmapped), the batch engine behind every
solve, the first-order (Optax) method, the barrier for the small auxiliary QPs, and the
optimality certificates."""
