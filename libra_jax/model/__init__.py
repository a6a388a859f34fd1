"""Model layer: the bytes each collective puts on each dimension, the timing models, and the
``Problem`` pytree with its pure, jit-able JAX functions of the bandwidth vector (step time,
cost, violation)."""
