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

#: clean runs (chunks divide every size): dense TP / PP / replicas on Switch, Ring and
#: FullyConnected dimensions (0010: TP and PP share FC16, the stage sends ring blocks of 4),
#: MoE with EP all-to-alls (0089: EP over part of a dimension, pg_name rings)
SAMPLE = ("ds441_0000", "ds441_0010", "ds441_0052", "ds441_0060",
          "ds441_0039", "ds441_0043", "ds441_0089")
#: chunks = 3 does not divide the sizes: ASTRA-sim runs one stream more (MoE, dense)
UNEVEN = ("ds441_0027", "ds441_0050")
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


def test_uneven_chunks_as_astrasim_splits_them(monkeypatch):
    """chunks = 3 on sizes it does not divide: ASTRA-sim runs streams of floor(size / 3)
    bytes until the size is used up, 4 of them (`step.chunk_split`); so does the TPOT
    problem (`timing_rows.streams`): within 0.5 %, where 3 streams of size / 3 were 20-24 %
    low."""
    from libra_jax.model import step, timing_rows

    assert step.chunk_split(1, 8192.0, 3, 16) == (4, 2730)
    for draw in UNEVEN:
        case, res = next((c, r) for c, r in ds.load("tuning")
                         if c["draw_id"] == draw and c["backend"] == "unaware")
        astra = float(res["astra_max_ns"])
        assert abs(_tpot_ns(case) / astra - 1) <= 0.005, draw
        with monkeypatch.context() as m:
            m.setattr(timing_rows, "streams", lambda code, size, network, tm: (tm.chunks, size))
            assert _tpot_ns(case) / astra - 1 < -0.2, draw


def test_stored_sets_against_the_bar():
    """The stored predictions (``model.csv``) of both sets, per backend: >= 95 % of the
    runs within 5 % for the TPOT a serving run reports, for the TPOT of the written step
    (compute rounded to whole us as the ETs hold it) and for the whole-step simulation;
    every TPOT miss has a known cause (`decode_steps.cause`: a group over part of a
    dimension, or compute under the ETs' 1 us resolution)."""
    for name in ds.SETS:
        with open(ds.OUT / name / "model.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for backend in ("unaware", "aware"):
            mine = [r for r in rows if r["backend"] == backend]
            assert len(mine) == ds.DRAWS

            def share(col):
                errs = ds.errors(mine, col, backend)
                return sum(abs(e) <= TOL for e in errs) / len(errs)

            for col in ("tpot_ns", "tpot_written_ns", "step_ns"):
                assert share(col) >= 0.95, (name, backend, col)
            for r in mine:
                if abs(float(r["tpot_ns"]) / float(r["astra_ns"]) - 1) > TOL:
                    assert ds.cause(r) in ("partial groups", "us rounding"), r["case_id"]
