"""Inputs layer: networks, workloads, communicators and cost models, read from LIBRA's and
ASTRA-sim's file formats (or generated from a parallel mapping) and validated on the host.

``LIBRA_INPUTS_DIR`` holds the inputs shipped with the public LIBRA code; config paths that
are not found relative to the working directory are looked up there.
"""

import pathlib

#: The shipped LIBRA inputs (network/, workload/, communicator/, cost_model/).
LIBRA_INPUTS_DIR = pathlib.Path(__file__).resolve().parents[1] / "data" / "libra_inputs"
#: libra_jax's own shipped inputs (the technology catalogue ``technologies.yaml``).
DATA_DIR = LIBRA_INPUTS_DIR.parent
