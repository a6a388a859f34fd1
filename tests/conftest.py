"""The test process is an entry point: like the CLIs it runs JAX in float64 (the model
functions called directly by the tests assume it; the solvers switch it on themselves)."""

import jax

jax.config.update("jax_enable_x64", True)
