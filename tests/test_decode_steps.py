"""Serving's decode steps against ASTRA-sim (issue 34; docs/serving.md, "Validation: decode
steps in ASTRA-sim"): libra_jax's TPOT recomputed from stored runs of
``experiments/decode_steps.py`` (tuning set, seed 441; both analytical backends) and the
stored sets checked against the bar, with every miss given its known cause."""

from __future__ import annotations

import csv
import pathlib
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
import decode_steps as ds  # noqa: E402

#: clean runs (chunks divide every size, pp on one dimension): dense TP / PP / replicas on
#: Switch, Ring and FullyConnected dimensions, MoE with EP all-to-alls (0089: EP over part of
#: a dimension, pg_name rings); the aware backend 2-23 % above the unaware one in 0001, 0039,
#: 0052
SAMPLE = ("ds441_0000", "ds441_0010", "ds441_0052", "ds441_0060",
          "ds441_0001", "ds441_0039", "ds441_0043", "ds441_0089")
#: chunks = 3 does not divide the 8 KiB all-reduces: ASTRA-sim runs 4 streams
UNEVEN = "ds441_0014"
TOL = 0.05


def _tpot_ns(case: dict) -> float:
    """The TPOT a serving run reports for the stored case (`phase_times_s(...)[1]`)."""
    from libra_jax.studies.job.serving import _problems
    from libra_jax.studies.serving import phase_times_s

    _, network, rates, spec, tm, ph = ds.build(case["overrides"], case["backend"])
    assert tm.network_backend == case["backend"] and tm.model == "pipelined"
    bw = np.asarray(case["bandwidth_gbps"], np.float64)
    return float(phase_times_s(bw, _problems(network, ph, rates, spec, tm))[1]) * 1e9


def test_sample_within_five_percent_both_backends():
    """TPOT within 5 % of ASTRA-sim's time of the exported decode step, per backend."""
    runs = [(c, r) for c, r in ds.load("tuning") if c["draw_id"] in SAMPLE]
    assert len(runs) == 2 * len(SAMPLE)
    assert {c["kind"] for c, _ in runs} == {"dense", "moe"}
    for case, res in runs:
        astra = float(res["astra_max_ns"])
        tpot = _tpot_ns(case)
        assert abs(tpot / astra - 1) <= TOL, (case["case_id"], tpot, astra)


def test_uneven_chunks_is_the_known_miss():
    """chunks = 3 on 8 KiB all-reduces: ASTRA-sim runs floor(8192 / 3)-byte streams until the
    size is used up, 4 of them (`step.chunk_split`); the TPOT problem times 3 streams of
    8192 / 3 and is 24 % low, the whole-step simulation (which splits as ASTRA-sim does) is
    within 0.5 %."""
    from libra_jax.model import step, timing

    case, res = next((c, r) for c, r in ds.load("tuning")
                     if c["draw_id"] == UNEVEN and c["backend"] == "unaware")
    astra = float(res["astra_max_ns"])
    assert step.chunk_split(1, 8192.0, 3, 16) == (4, 2730)
    assert _tpot_ns(case) / astra - 1 == pytest.approx(-0.2449, abs=2e-3)
    _, network, _, _, tm, ph = ds.build(case["overrides"], case["backend"])
    stepped = timing.step_time_ns(ph.decode, network, tm, case["bandwidth_gbps"])
    assert abs(stepped / astra - 1) <= 0.005


def test_stored_sets_against_the_bar():
    """The stored predictions (``model.csv``) of both sets, per backend. The bar (>= 95 %
    of the runs within 5 %) is met by the whole-step simulation on every run and by the TPOT
    of the written step on the clean runs; the TPOT a serving run reports misses it (85-87 %
    within 5 %), and every such miss has a known cause (`decode_steps.cause`)."""
    for name in ds.SETS:
        with open(ds.OUT / name / "model.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for backend in ("unaware", "aware"):
            mine = [r for r in rows if r["backend"] == backend]
            assert len(mine) == ds.DRAWS

            def share(col, keep=None):
                errs = ds.errors(mine, col, backend, keep)
                return sum(abs(e) <= TOL for e in errs) / len(errs)

            assert share("step_ns") >= 0.95, (name, backend)
            assert share("tpot_written_ns", ds.clean) >= 0.95, (name, backend)
            assert share("tpot_ns") >= 0.85, (name, backend)
            for r in mine:
                if abs(float(r["tpot_ns"]) / float(r["astra_ns"]) - 1) > TOL:
                    assert ds.cause(r) != "other", r["case_id"]
