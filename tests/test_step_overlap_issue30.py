"""Issue 30 point 4, the wider search: communication-bound ``dp_overlap`` steps with TP and DP
on disjoint dimensions, drawn beyond the ``disjoint_comm`` kind (experiments/astrasim_heldout.py
``--kind disjoint_wide``: TP all-reduces 32 MiB - 1 GiB, 2-16 layers, DP all-reduce / ZeRO /
reduce-scatter / all-gather 8-512 MiB, TP {0,1} / DP {2,3} and other disjoint splits, 1-16
chunks, 1 / 2 / 4 queues, in-flight limit 1-16, local-mem-bw 1600, 1e6 or 100-1600 GB/s,
Switch / Ring dims, 200-1000 ns per hop). Held-out set ``astrasim_heldout5`` (seed 5, 150 draws
x 2 backends) was drawn and run with `model/step.py` unchanged and never tuned on."""

from __future__ import annotations

import pathlib

import pytest

from test_step import _errors, _heldout_check

ROOT = pathlib.Path(__file__).resolve().parent.parent
HELDOUT5 = ROOT / "experiments" / "results" / "astrasim_heldout5"
# ASTRA-sim's own deadlocks in the set (event queue drained, no NPU finished): no reference
_DEADLOCKED5 = {("w5_0015", "unaware"), ("w5_0065", "aware")}
# measured: unaware 0.009%, aware 0.53% (w5_0002: ZeRO, 2 queues, 16 chunks, Switch(7) after
# a Ring in the all-gather: the NPUs stop being alike, docs/step_simulation.md section 6.2)
_PIN5 = {"unaware": 0.001, "aware": 0.01}


def _check(errs):
    failed = {(c.rsplit("_", 1)[0], b) for (c, b), v in errs.items()
              if isinstance(v, str) and v.startswith("ASTRA-sim")}
    assert failed <= _DEADLOCKED5, failed - _DEADLOCKED5
    assert not any(isinstance(v, str) for (c, b), v in errs.items()
                   if (c.rsplit("_", 1)[0], b) not in failed), errs  # nothing refused
    _heldout_check({k: v for k, v in errs.items() if not isinstance(v, str)}, _PIN5)


def test_heldout_disjoint_wide_first_draws():
    """The first 25 draws of astrasim_heldout5 (both backends), and w5_0002 (the largest
    aware error), within the pins."""
    ids = {f"w5_{i:04d}_{b}" for i in list(range(25)) for b in ("unaware", "aware")}
    errs = _errors(HELDOUT5, ids)
    assert len(errs) == 50
    assert errs[("w5_0015_unaware", "unaware")].startswith("ASTRA-sim")
    assert abs(errs[("w5_0002_aware", "aware")]) > 0.004  # the divergence of section 6.2
    _check(errs)


@pytest.mark.slow
def test_heldout_disjoint_wide_all():
    errs = _errors(HELDOUT5)
    assert len(errs) == 300
    assert {(c.rsplit("_", 1)[0], b) for (c, b), v in errs.items()
            if isinstance(v, str)} == _DEADLOCKED5
    _check(errs)
