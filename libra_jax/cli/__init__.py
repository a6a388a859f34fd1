"""Command-line layer: the Hydra config schema, the printed tables and result files, and the
three commands (``libra-train``, ``libra-evaluate``, ``libra-scan``; also ``python -m
libra_jax.train`` etc.)."""
