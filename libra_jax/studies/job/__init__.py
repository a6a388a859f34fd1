"""One job of ``libra-train`` or ``libra-evaluate`` as a study: its schema
(:mod:`~libra_jax.studies.job.config`), the config turned into model inputs
(:mod:`~libra_jax.studies.job.inputs`), what a training job computes
(:mod:`~libra_jax.studies.job.train`: a single solve with its chunk-count search, memory check,
power, sensitivities and reference design; the mapping co-search; a multi-workload solve, each
with a typed result), what an evaluation computes (:mod:`~libra_jax.studies.job.evaluate`) and
the ASTRA-sim export of a design (:mod:`~libra_jax.studies.job.export`). The commands
(`libra_jax.cli`) turn a composed config into these studies' inputs, call them, and print and
write what they return.
"""
