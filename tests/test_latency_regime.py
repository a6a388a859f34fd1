"""The latency regime (issue 34 point 5; docs/pipelined_model.md, "Latency regime"): small
collectives against the stored ASTRA-sim runs of ``experiments/latency_regime.py`` (tuning
set, seed 341; both analytical backends), and the endpoint-delay count of a ring phase by
hand: steps + 1 (``Ring.cc``: the StreamInit packet and every receipt each go through a
memory-bus bundle)."""

from __future__ import annotations

import csv
import dataclasses
import json
import pathlib
import sys

import jax
import numpy as np
import pytest

from libra_jax.model import pipelined as pl
from libra_jax.model import timing
from libra_jax.types import Block, Collective

ROOT = pathlib.Path(__file__).resolve().parents[1]
TUNING = ROOT / "experiments" / "results" / "latency_regime" / "tuning"
#: the ten draws of the tuning set the model missed most before the fix (-5.4 % .. -1.6 %,
#: steps endpoint delays per ring phase), each on both backends: 20 runs
SAMPLE = ("lr341_0002", "lr341_0098", "lr341_0121", "lr341_0057", "lr341_0094",
          "lr341_0143", "lr341_0119", "lr341_0012", "lr341_0010", "lr341_0030")
TOL = 0.02  # the acceptance bar: every run within 2 %
GIB = 2**30 / 1e9  # bytes per ns at 1 GB/s, GB = 2^30 B as the network YAML


def _stored():
    sys.path.insert(0, str(ROOT / "experiments"))
    import astrasim_workload as aw

    cases = json.loads((TUNING / "cases.json").read_text())
    with open(TUNING / "results.csv", newline="") as f:
        span = {r["case_id"]: float(r["coll_span_ns"]) for r in csv.DictReader(f)}
    return aw, [(c, span[c["case_id"]]) for c in cases if c["draw_id"] in SAMPLE]


def test_sample_within_two_percent_both_backends():
    """libra_jax's collective time (``model=pipelined``: `timing.collective_times_ns`) and
    the whole-step simulation (`timing.step_time_ns` less the 1 us compute before the
    collective) against ASTRA-sim's span, per backend: within 2 %, and the two agree."""
    aw, runs = _stored()
    assert len(runs) == 2 * len(SAMPLE)
    assert {c["backend"] for c, _ in runs} == {"unaware", "aware"}
    for case, astra in runs:
        network, workload, tm, bw = aw.case_inputs(case)
        assert tm.endpoint_delay_ns >= 1 and tm.is_default_runtime
        coll, _ = timing.collective_times_ns(workload, network, tm, bw)
        stepped = timing.step_time_ns(workload, network, tm, bw) - 1000.0
        assert abs(coll[0, 0] / astra - 1) <= TOL, (case["case_id"], coll[0, 0], astra)
        assert abs(stepped / astra - 1) <= TOL, (case["case_id"], stepped, astra)
        # the closed form is real-valued: the simulation agrees with it in real-valued time
        # (the harness counts whole ns on the aware backend, as ASTRA-sim: system.whole_ns)
        real = dataclasses.replace(tm, whole_ns=False)
        stepped = timing.step_time_ns(workload, network, real, bw) - 1000.0
        assert stepped == pytest.approx(coll[0, 0], rel=1e-9), case["case_id"]


def _time(col, size, comm, blocks, bw, lat, ep):
    with jax.enable_x64(True):
        return float(pl.collective_time_ns(
            int(col), float(size), np.array(comm), np.array([int(b) for b in blocks]),
            np.array(bw, float), latency_ns=np.array(lat, float), chunks=1,
            endpoint_delay_ns=ep, local_mem_bw_gbps=1e6, gb_is_gib=True))


def test_endpoint_delays_by_hand():
    """Reduce-scatter of 16 KiB on FullyConnected(4), 1 chunk, 100 GB/s, 500 ns per hop,
    100 ns endpoint delay, local memory 1e6 GB/s: 3 steps of a 4 KiB message and 3 + 1 = 4
    endpoint delays, 3 x (4096 / (100 x 2^30 / 1e9) + 500) + 4 x 100 + 3 x 3 x 4096 / 1e6
    = 2,014.48 ns. ASTRA-sim (stored from the patched c459ab6 build, both backends): 2,014 ns
    (each message floored to 38 ns, each reduction to 0); with steps endpoint delays the
    model said 1,914.48 (-4.9 %).

    All-reduce of 16 KiB on FC(2) x FC(2), same link: reduce-scatter on dimension 0 (1 step
    of 8 KiB), all-reduce on dimension 1 (2 steps of 4 KiB), all-gather on dimension 0 (1 step
    of 8 KiB): 4 steps, 3 phases, 4 + 3 = 7 endpoint delays. ASTRA-sim: 2,928 ns (floors: 76
    and 38 ns per message); with 4 endpoint delays the model said 2,628.9 (-10.2 %)."""
    m4, m8 = 4096 / (100 * GIB), 8192 / (100 * GIB)
    fc = Block.FULLYCONNECTED
    rs = _time(Collective.REDUCESCATTER, 16384, [4], [fc], [100], [500], 100.0)
    assert rs == pytest.approx(3 * (m4 + 500) + 4 * 100 + 3 * 3 * 4096 / 1e6, rel=1e-12)
    assert rs - 2014.0 == pytest.approx(3 * (m4 - 38), abs=0.05)  # ASTRA-sim's floors
    ar = _time(Collective.ALLREDUCE, 16384, [2, 2], [fc, fc], [100, 100], [500, 500], 100.0)
    red = 3 * 8192 / 1e6 + 3 * 4096 / 1e6  # RS0 reduces one 8 KiB message, AR1 one of 4 KiB
    assert ar == pytest.approx(2 * (m8 + 500) + 2 * (m4 + 500) + 7 * 100 + red, rel=1e-12)
    assert ar - 2928.0 == pytest.approx(2 * (m8 - 76) + 2 * (m4 - 38), abs=0.05)
    # no endpoint delay: no endpoint term at all
    assert _time(Collective.REDUCESCATTER, 16384, [4], [fc], [100], [500], 0.0) == \
        pytest.approx(3 * (m4 + 500) + 3 * 3 * 4096 / 1e6, rel=1e-12)


def test_stored_sets_meet_the_bar():
    """The stored predictions of both sets (``model.csv``, written by the harness after the
    fix): per backend, >= 95 % of the runs within 2 % and none beyond 5 %."""
    for name in ("tuning", "heldout"):
        with open(TUNING.parent / name / "model.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        for backend in ("unaware", "aware"):
            for col in ("pipelined_ns", "step_ns"):
                errs = [abs(float(r[col]) / float(r["astra_span_ns"]) - 1) for r in rows
                        if r["backend"] == backend]
                assert len(errs) == 150
                assert sum(e <= 0.02 for e in errs) >= 0.95 * len(errs), (name, backend, col)
                assert max(errs) <= 0.05, (name, backend, col)
