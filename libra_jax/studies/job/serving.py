"""The serving job of ``libra-train`` (``workload.generator=serving``): the phases generated,
the SLOs checked, the optimum for ``objective`` (serving_throughput, perf_per_cost or
perf_per_watt on tokens/s; `libra_jax.studies.serving`) with its certified gap, and the
serving metrics at the optimum and at the equal split of the budget, as typed results.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

from libra_jax.inputs.generators import PHASE_NAMES, ServingPhases, serving_phases
from libra_jax.model import timing
from libra_jax.model.problem import ConstraintSpec, Problem, with_cost_rates
from libra_jax.solvers import solve as solve_mod
from libra_jax.solvers.compilation import CompileClock
from libra_jax.studies import serving
from libra_jax.studies.job.config import LibraConfig
from libra_jax.studies.job.inputs import check_serving_keys, design_inputs, to_timing
from libra_jax.studies.job.train import check_product_bounded, power_of_run
from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ServingMetrics:
    """A design's serving figures (units in the names; None where the run has no cost model
    or no power figures)."""

    bandwidth_gbps: np.ndarray
    prefill_ms: float
    decode_ms: float
    kv_transfer_ms: float | None
    ttft_ms: float  # prefill (+ KV transfer)
    tpot_ms: float  # one decode step
    tokens_per_s: float  # the fleet
    tokens_per_s_per_npu: float
    tokens_per_s_per_replica: float  # one decode replica's batch / TPOT
    network_cost_usd: float | None
    tokens_per_s_per_usd: float | None  # per $ of network
    network_power_w: float | None
    total_power_w: float | None
    tokens_per_j: float | None  # tokens per joule of total power


def serving_metrics(bw, phases: ServingPhases, problems, form: serving.ServingForm,
                    cost_rates, power) -> ServingMetrics:
    """The figures of design ``bw`` (module docstring of `studies.serving`)."""
    bw = np.asarray(bw, np.float64)
    t = serving.phase_times_s(bw, problems)
    kv = t[2] if len(t) > 2 else None
    tok = 1.0 / float(np.max(form.a @ t))
    npus = phases.parallel.replica_npus * phases.parallel.replicas
    cost = None if cost_rates is None else float(np.asarray(cost_rates) @ bw)
    net_w = tot_w = None
    if power is not None:
        net_w = float(power[0] @ bw)
        tot_w = net_w + power[1]
    return ServingMetrics(
        bandwidth_gbps=bw, prefill_ms=t[0] * 1e3, decode_ms=t[1] * 1e3,
        kv_transfer_ms=None if kv is None else kv * 1e3,
        ttft_ms=(t[0] + (kv or 0.0)) * 1e3, tpot_ms=t[1] * 1e3, tokens_per_s=tok,
        tokens_per_s_per_npu=tok / npus,
        tokens_per_s_per_replica=phases.model.batch / t[1],
        network_cost_usd=cost,
        tokens_per_s_per_usd=None if not cost else tok / cost,
        network_power_w=net_w, total_power_w=tot_w,
        tokens_per_j=None if not tot_w else tok / tot_w)


@dataclasses.dataclass(frozen=True)
class ServingRun:
    """A serving optimum and what the command reports next to it."""

    network: object
    phases: ServingPhases
    phase_names: tuple[str, ...]
    spec: ConstraintSpec
    cost_rates: np.ndarray | None
    timing_model: timing.TimingModel
    power: object
    objective: str
    form: serving.ServingForm
    optimum: serving.ServingSolve
    metrics: ServingMetrics
    equal_split: ServingMetrics
    reference: ServingMetrics | None  # the shipped design (reference_bw_gbps), or None
    status: str
    compile_seconds: float


def run_serving(c: LibraConfig) -> ServingRun:
    """The serving job (module docstring)."""
    check_serving_keys(c)
    if c.bandwidth_gbps is not None:
        raise LibraInputError(
            f"bandwidth_gbps={show(list(c.bandwidth_gbps))} is an input of libra-evaluate; "
            "libra-train optimises the bandwidths. Remove it.")
    network, cost_rates, spec = design_inputs(c)
    tm, search = to_timing(c, network.num_dims, network)
    if search is not None:
        raise LibraInputError(
            f"system.chunks = {show(search)}: a chunk-count search is not available with "
            "workload.generator=serving; give one count.")
    w = c.workload
    phases = serving_phases(w.model, w.parallel, w.npu, network.npus)
    names = PHASE_NAMES[:len(phases.workloads)]
    power = power_of_run(c, network, spec)
    k = c.constraints
    form = serving.serving_form(phases, k.max_ttft_ms, k.max_tpot_ms)
    obj = getattr(c.objective, "value", c.objective)
    log.info("serving %s on %s: phases %s, objective %s", phases.model.name, network.notation,
             ", ".join(names), obj)
    with CompileClock() as clock:
        problems = _problems(network, phases, cost_rates, spec, tm)
        serving.check_slos(problems, form, cost_rates, spec)
        opt = _optimise(obj, network, phases, problems, form, cost_rates, spec, tm, power)
    merged, _ = serving.merged_problem(problems, form, cost_rates, spec)
    eq = solve_mod.equal_split(merged).bandwidth_gbps
    ok = (opt.certified and opt.gap <= 1e-3 and opt.max_violation <= 1e-6
          and not opt.slo_violation > 1e-6)
    return ServingRun(
        network=network, phases=phases, phase_names=names, spec=spec, cost_rates=cost_rates,
        timing_model=tm, power=power, objective=obj, form=form, optimum=opt,
        metrics=serving_metrics(opt.bandwidth_gbps, phases, problems, form, cost_rates, power),
        equal_split=serving_metrics(eq, phases, problems, form, cost_rates, power),
        reference=None if c.reference_bw_gbps is None else serving_metrics(
            _reference(c, network), phases, problems, form, cost_rates, power),
        status="ok" if ok else "uncertified", compile_seconds=clock.seconds)


def _reference(c: LibraConfig, network) -> np.ndarray:
    bw = [float(x) for x in c.reference_bw_gbps]
    if len(bw) != network.num_dims or not all(np.isfinite(bw)) or min(bw) <= 0:
        raise LibraInputError(
            f"reference_bw_gbps = {show(list(c.reference_bw_gbps))}: expected "
            f"{network.num_dims} positive GB/s, one per dimension.")
    return np.array(bw)


def _problems(network, phases: ServingPhases, cost_rates, spec, tm) -> list[Problem]:
    return [timing.build_timed_problem(network, wl, cost_rates, spec, tm)
            for wl in phases.workloads]


def _optimise(obj, network, phases, problems, form, cost_rates, spec, tm, power):
    if obj == "serving_throughput":
        return serving.min_seconds_per_token(problems, form, cost_rates, spec)
    if obj == "perf_per_cost":
        rates, offset, key = np.asarray(cost_rates, np.float64), 0.0, "max_cost_usd"
    else:
        rates, offset, key = np.asarray(power[0], np.float64), float(power[1]), "max_power_w"
    merged, _ = serving.merged_problem(problems, form, cost_rates, spec)
    if not form.b.size:
        check_product_bounded(
            obj, merged, power, "Give constraints.max_tpot_ms and/or constraints.max_ttft_ms "
            "(the latency to serve at), or constraints.lower_gbps.")
    if form.a.shape[0] == 1 and not form.b.size:
        return serving.merged_product(problems, form, cost_rates, spec, obj, power)
    lo = float(rates @ np.asarray(with_cost_rates(merged, rates).min_cost_bw, np.float64))
    free = serving.min_seconds_per_token(problems, form, cost_rates, spec)
    hi = float(rates @ free.bandwidth_gbps)
    current = getattr(spec, key)

    def build(cap):
        capped = dataclasses.replace(spec, **{key: cap if current is None
                                             else min(cap, current)})
        return _problems(network, phases, cost_rates, capped, tm), capped

    floor = serving.product_floor(problems, form, cost_rates, spec, obj, power)
    return serving.level_search(build, form, cost_rates, lambda bw: float(rates @ bw), offset,
                                lo, hi, floor)
