"""The Hydra configs (``config.yaml``, ``scan.yaml`` and their groups), shipped inside the package so every CLI finds them after any install."""
