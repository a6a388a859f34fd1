"""Issue 19, point 8: the link technology of the scale-out network under network power caps.

    python experiments/physical_study.py [--out DIR] [--scenarios rack row hall]
        [--workloads gpt3 moe] [--technologies CopperDAC ...] [--fractions 0.5 0.75 1.0]
        [--no-ppw] [--no-sensitivity]

Networks: a scale-up dimension (Switch, tier ``ScaleUpSerDes``: NVLink-class SerDes over
copper to NVSwitch-class switches) x a scale-out dimension (Switch) whose tier is, in turn,
each scale-out technology of the catalogue (libra_jax/data/technologies.yaml): passive copper
DAC, linear-drive optics (LPO), DSP pluggable optics, co-packaged optics (CPO). Three
scenarios (:data:`SCENARIOS`) give each dimension a physical span, checked against the
tier's reach (``network.span_m`` / ``cost.check_reach``):

* ``rack``: 4 nodes of 8 B200-class GPUs under one top-of-rack switch (32 NPUs), spans
  0.5 m / 2.5 m: every technology reaches, copper included;
* ``row``:  GB200 NVL72 class, 8 racks of 72 GPUs in one row (576 NPUs; preset
  ``gb200_nvl72``), spans 1.5 m / 30 m: copper does not reach;
* ``hall``: DGX H100 SuperPOD class, 128 nodes of 8 GPUs (1,024 NPUs; preset ``h100_dgx``),
  spans 0.5 m / 50 m; scale-up capped at H100's NVLink4 450 GB/s.

Workloads: GPT-3 175B (conf/dnn/gpt3_175b.yaml) and the 64-expert MoE GPT
(conf/dnn/moe_gpt_64e.yaml), generated for each network with a mapping that fits the NPU's
memory (checked with `libra_jax.model.memory`): TP inside the scale-up domain, PP / DP / EP
inside it or across (see each scenario's ``workloads``).

Power budgets: network power caps (``ConstraintSpec.max_power_w``) at fractions (default
0.5 / 0.75 / 1.0 = low / medium / high) of the network power of the scenario's *reference
design*: the shipped per-GPU bandwidths (scale-up 900 or 450 GB/s, scale-out 50 GB/s = one
400G NIC per GPU) on DSP optics, as DGX / NVL72 SuperPODs ship. For each scenario x workload
x technology x budget: ``solve(objective="perf")`` under the cap and the tiers' ``MaxGbps``
(merged by `config.physical_inputs`), and once per technology the ``perf_per_watt`` optimum
(min energy per step, no cap). A sensitivity variant holds CPO to the pluggables' 100 GB/s
port (``VARIANTS``), separating its energy from its 1.6T port. Every row records the optimal
GB/s per dimension, step time, network cost, network / total power, energy per step (step
time x (N x npu_w + network power)), status, certified gap and which bounds bind. A perf
optimum whose cap is slack may not be unique; the least-power one is reported
(`least_power_optimum`).

Outputs in ``--out`` (default experiments/results/physical_study/): results.csv, table.md,
plot.png, run_info.json. About 1-2 minutes on 2 CPU cores (JAX compilation included).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import pathlib
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from libra_jax.cli import config as libra_config  # noqa: E402
from libra_jax.inputs import generators  # noqa: E402
from libra_jax.inputs.cost import load_cost_model  # noqa: E402
from libra_jax.inputs.paths import resolve_path  # noqa: E402
from libra_jax.model import memory  # noqa: E402
from libra_jax.model.problem import build_problem  # noqa: E402
from libra_jax.solvers.solve import design_metrics, solve  # noqa: E402
from libra_jax.types import LibraInputError  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
OUT_DEFAULT = REPO / "experiments" / "results" / "physical_study"
CATALOGUE = REPO / "libra_jax" / "data" / "technologies.yaml"

SCALE_UP_TIER = "ScaleUpSerDes"
#: Scale-out technologies of the catalogue, in the order the outputs list them.
TECHNOLOGIES = ("CopperDAC", "LinearDriveOptics", "DspOptics800G", "CoPackagedOptics")
TECH_LABELS = {"CopperDAC": "copper DAC", "LinearDriveOptics": "LPO",
               "DspOptics800G": "DSP optics", "CoPackagedOptics": "CPO"}
TECH_COLOURS = {"CopperDAC": "#937860", "LinearDriveOptics": "#55A868",
                "DspOptics800G": "#C44E52", "CoPackagedOptics": "#4C72B0"}
#: Sensitivity variants: key -> (tier, scale-out upper bound GB/s). CPO held to one 800G
#: port (100 GB/s) like the pluggables, to separate its energy from its 1.6T port.
VARIANTS = {"CoPackagedOptics@100GBps": ("CoPackagedOptics", 100.0)}
TECH_LABELS["CoPackagedOptics@100GBps"] = "CPO at 100 GB/s"
TECH_COLOURS["CoPackagedOptics@100GBps"] = "#8FAADC"
#: The reference design's scale-out technology (what the shipped systems use).
REFERENCE_TIER = "DspOptics800G"
#: Power caps: (label, fraction of the reference design's network power).
BUDGETS = (("low", 0.5), ("medium", 0.75), ("high", 1.0))
#: Relative tolerance for "a bound binds".
BIND_RTOL = 1e-6

WORKLOADS = ("gpt3", "moe")
WORKLOAD_LABELS = {"gpt3": "GPT-3 175B", "moe": "MoE GPT 64E"}


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One physical network: presets + overrides for the scale-up x scale-out design."""

    name: str
    title: str
    preset: str  # conf/conf/<preset>.yaml: NPU (TFLOP/s, memory, W) and network
    npus: tuple[int, int]
    span_m: tuple[float, float]  # scale-up, scale-out; [estimate]s, see `note`
    reference_bw_gbps: tuple[float, float]  # the shipped per-GPU design
    workloads: dict  # workload key -> Hydra overrides (dnn choice, mapping)
    scaleup_upper_gbps: float | None = None  # NPU-side limit below the tier's MaxGbps
    scaleup_upper_note: str = ""
    note: str = ""

    def overrides(self, workload: str, tech: str) -> list[str]:
        tier, out_upper = tech_tier(tech)
        ov = [f"conf={self.preset}",
              f"network.npus=[{self.npus[0]},{self.npus[1]}]",
              f"network.cost_tiers=[{SCALE_UP_TIER},{tier}]",
              f"network.span_m=[{self.span_m[0]},{self.span_m[1]}]",
              "constraints.max_power_w=null",
              f"reference_bw_gbps=[{self.reference_bw_gbps[0]},{self.reference_bw_gbps[1]}]"]
        if self.scaleup_upper_gbps is not None or out_upper is not None:
            up = ["null" if u is None else f"{u}" for u in (self.scaleup_upper_gbps, out_upper)]
            ov.append(f"constraints.upper_gbps=[{up[0]},{up[1]}]")
        return ov + list(self.workloads[workload])


def tech_tier(tech: str) -> tuple[str, float | None]:
    """(catalogue tier, extra scale-out upper bound GB/s or None) of a technology key."""
    return VARIANTS.get(tech, (tech, None))


def _mapping(tp, pp, dp, ep=1, **model):
    out = [f"workload.parallel.tp={tp}", f"workload.parallel.pp={pp}",
           f"workload.parallel.dp={dp}"]
    if ep != 1:
        out.append(f"workload.parallel.ep={ep}")
    out += [f"workload.model.{k}={v}" for k, v in model.items()]
    return out


SCENARIOS = {
    "rack": Scenario(
        name="rack",
        title="rack: 4 nodes x 8 B200-class GPUs, top-of-rack switch",
        preset="gb200_nvl72", npus=(8, 4), span_m=(0.5, 2.5),
        reference_bw_gbps=(900.0, 50.0),
        workloads={
            "gpt3": _mapping(8, 2, 2),                        # TP 8 in the node; PP 2 x DP 2 across
            "moe": ["dnn=moe_gpt_64e", *_mapping(4, 1, 8, ep=8)],  # TP 4; DP 8 = 2 x 4, EP 8 = DP
        },
        note=("illustrative: the NPU figures are gb200_nvl72's (B200 at 1,200 W, 2,500 TFLOP/s, "
              "186 GB) put in 8-GPU NVLink nodes; 4 nodes per rack and the 0.5 m / 2.5 m spans "
              "are estimates (the scale-out cables stay inside one rack, within the DAC's 3 m)"),
    ),
    "row": Scenario(
        name="row",
        title="row: GB200 NVL72 class, 8 racks of 72 GPUs",
        preset="gb200_nvl72", npus=(72, 8), span_m=(1.5, 30.0),
        reference_bw_gbps=(900.0, 50.0),
        workloads={
            # the preset's: TP 8 x PP 3 x DP 3 inside a rack; DP 8 across racks
            "gpt3": _mapping(8, 3, 24),
            # TP 1, DP 576 = 72 x 8, EP 8 inside the rack; global batch 4096 -> 4608 so that
            # micro_batch 4 x DP 576 divides it (2 micro-batches per step)
            "moe": ["dnn=moe_gpt_64e", *_mapping(1, 1, 576, ep=8, global_batch=4608)],
        },
        note=("the gb200_nvl72 preset (spans 1.5 m / 30 m are the preset's estimates); the "
              "MoE's global batch is 4,608 instead of 4,096 so that micro-batch 4 x DP 576 "
              "divides it (with TP dividing the 16 heads, DP = 576 / TP is 36-576, never a "
              "power of two, so it cannot divide 4,096 / 4)"),
    ),
    "hall": Scenario(
        name="hall",
        title="hall: DGX H100 SuperPOD class, 128 nodes x 8 GPUs",
        preset="h100_dgx", npus=(8, 128), span_m=(0.5, 50.0),
        reference_bw_gbps=(450.0, 50.0),
        scaleup_upper_gbps=450.0,
        scaleup_upper_note="H100 NVLink4: 18 links x 25 GB/s = 450 GB/s per direction [H]",
        workloads={
            "gpt3": _mapping(8, 8, 16),  # the preset's (Megatron-LM's 1,024-GPU run)
            # TP 4; DP 256 = 2 x 128, EP 64 spans 32 nodes
            "moe": ["dnn=moe_gpt_64e", *_mapping(4, 1, 256, ep=64)],
        },
        note=("the h100_dgx preset (spans 0.5 m / 50 m are the preset's estimates); scale-up "
              "capped at 450 GB/s (the ScaleUpSerDes tier's MaxGbps is NVLink5's 900)"),
    ),
}


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------


def compose_config(overrides: Sequence[str]):
    """The run config of libra_jax (conf/config.yaml) with Hydra overrides."""
    with initialize_config_dir(config_dir=str(libra_config.CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


@dataclasses.dataclass
class Case:
    scenario: Scenario
    workload: str
    tech: str  # technology key (a tier, or a VARIANTS key)
    cfg: object
    network: object
    workload_obj: object
    cost_rates: np.ndarray
    spec: object  # ConstraintSpec with power rates and the merged upper bounds
    phys: object  # config.PhysicalInputs
    mapping: str
    memory_gb: float

    @property
    def n_npus(self) -> int:
        return int(math.prod(self.network.npus))

    @property
    def power_rates(self) -> np.ndarray:
        return np.asarray(self.spec.power_rates_w_per_gbps, np.float64)

    def problem(self, max_power_w: float | None):
        return build_problem(self.network, self.workload_obj, self.cost_rates,
                             dataclasses.replace(self.spec, max_power_w=max_power_w))


def reach_problem(scenario: Scenario, tech: str) -> str | None:
    """None when every dimension's tier reaches its span, else the short reason (and the
    library's own check agrees)."""
    cm = load_cost_model(CATALOGUE)
    tiers = (SCALE_UP_TIER, tech_tier(tech)[0])
    for d, (t, span) in enumerate(zip(tiers, scenario.span_m)):
        reach = cm.reach_m.get(t)
        if reach is not None and span > reach:
            return (f"does not reach (span {span:g} m > reach {reach:g} m): "
                    f"needs a {('scale-up', 'scale-out')[d]} span <= {reach:g} m")
    return None


def describe_mapping(par) -> str:
    """E.g. ``TP8 (up 8) x PP2 (out 2) x DP2 (out 2)``; ``EP8`` inside the DP group."""
    parts = []
    for name, f in (("TP", par.placement.tp), ("PP", par.placement.pp),
                    ("DP", par.placement.dp)):
        on = [f"{w} {x}" for w, x in zip(("up", "out"), f) if x > 1]
        parts.append(f"{name}{math.prod(f)}" + (f" ({' x '.join(on)})" if on else ""))
    return " x ".join(parts) + (f", EP{par.ep} inside DP" if par.ep > 1 else "")


def load_case(scenario: Scenario, workload: str, tech: str) -> Case:
    """Composes and builds the inputs of one scenario x workload x scale-out tier; raises
    `LibraInputError` when a span exceeds a reach or the mapping does not fit in memory."""
    cfg = compose_config(scenario.overrides(workload, tech))
    network, wl, rates, spec = libra_config.to_inputs(cfg)
    cm = load_cost_model(resolve_path(cfg.cost_model.file, "cost_model.file"))
    phys = libra_config.physical_inputs(cfg, network, cm)
    w = cfg.workload
    par = generators.Parallel.parse(OmegaConf.to_container(w.parallel), network.npus)
    est = memory.transformer_memory(generators.Transformer.parse(OmegaConf.to_container(w.model)),
                                    par, generators.Npu.parse(OmegaConf.to_container(w.npu)))
    memory.check_fits(est, f"{scenario.name}/{workload}")
    mapping = describe_mapping(par)
    return Case(scenario, workload, tech, cfg, network, wl, np.asarray(rates, np.float64), spec,
                phys, mapping, est.total_bytes / 1e9)


# --------------------------------------------------------------------------------------------
# Solves
# --------------------------------------------------------------------------------------------

COLUMNS = [
    "scenario", "network", "n_npus", "workload", "mapping", "memory_per_npu_gb",
    "technology", "scaleup_tier", "scaleout_tier", "span_scaleup_m", "span_scaleout_m",
    "reach_scaleout_m",
    "objective", "budget", "budget_fraction", "power_cap_w",
    "bw_scaleup_gbps", "bw_scaleout_gbps", "upper_scaleup_gbps", "upper_scaleout_gbps",
    "step_time_ms", "comm_time_ms", "network_cost_usd", "network_power_w", "npu_power_w",
    "total_power_w", "energy_per_step_j", "network_power_share",
    "status", "optimality_gap", "power_cap_binds", "scaleup_upper_binds",
    "scaleout_upper_binds", "binding", "solve_s", "note",
]


def _base_row(scenario: Scenario, workload: str, tech: str) -> dict:
    cm = load_cost_model(CATALOGUE)
    tier, _ = tech_tier(tech)
    return dict(scenario=scenario.name, technology=tech,
                network=f"SW({scenario.npus[0]})_SW({scenario.npus[1]})",
                n_npus=int(math.prod(scenario.npus)), workload=workload,
                scaleup_tier=SCALE_UP_TIER, scaleout_tier=tier,
                span_scaleup_m=scenario.span_m[0], span_scaleout_m=scenario.span_m[1],
                reach_scaleout_m=cm.reach_m.get(tier, math.inf))


def _design_row(case: Case, bw, step_ns, comm_ns) -> dict:
    """The columns every solved or evaluated design has."""
    bw = np.asarray(bw, np.float64)
    net_w = float(case.power_rates @ bw)
    npu_w = float(case.phys.static_power_w)
    total = npu_w + net_w
    up = case.phys.upper_gbps or [None, None]
    return dict(
        mapping=case.mapping, memory_per_npu_gb=case.memory_gb,
        bw_scaleup_gbps=float(bw[0]), bw_scaleout_gbps=float(bw[1]),
        upper_scaleup_gbps=up[0], upper_scaleout_gbps=up[1],
        step_time_ms=step_ns / 1e6, comm_time_ms=comm_ns / 1e6,
        network_cost_usd=float(case.cost_rates @ bw), network_power_w=net_w,
        npu_power_w=npu_w, total_power_w=total, energy_per_step_j=step_ns * 1e-9 * total,
        network_power_share=net_w / total)


def _binding(case: Case, row: dict, cap: float | None) -> dict:
    bw = (row["bw_scaleup_gbps"], row["bw_scaleout_gbps"])
    ups = case.phys.upper_gbps or [None, None]
    frm = case.phys.upper_from or [None, None]
    binds = [u is not None and b >= float(u) * (1 - BIND_RTOL) for b, u in zip(bw, ups)]
    cap_binds = cap is not None and row["network_power_w"] >= cap * (1 - BIND_RTOL)
    words = []
    if cap_binds:
        words.append("power cap")
    for d, (b, f, u) in enumerate(zip(binds, frm, ups)):
        if b:
            src = ("MaxGbps" if f and f.startswith("MaxGbps") else
                   "NVLink4 limit" if d == 0 else "port limit (sensitivity)")
            words.append(f"{('scale-up', 'scale-out')[d]} {src} {float(u):g}")
    return dict(power_cap_binds=bool(cap_binds), scaleup_upper_binds=bool(binds[0]),
                scaleout_upper_binds=bool(binds[1]),
                binding=" + ".join(words) if words else "none")


def reference_power_w(scenario: Scenario, workload: str) -> tuple[float, dict]:
    """Network power of the scenario's reference design (shipped bandwidths on DSP optics)
    and its evaluated row."""
    case = load_case(scenario, workload, REFERENCE_TIER)
    ref = np.asarray(scenario.reference_bw_gbps, np.float64)
    step, comm, _ = design_metrics(case.problem(None), ref)
    row = _base_row(scenario, workload, REFERENCE_TIER)
    row.update(_design_row(case, ref, step, comm))
    row.update(objective="reference", budget="shipped", budget_fraction=1.0,
               power_cap_w=None, status="evaluated", optimality_gap=None, solve_s=0.0,
               note="shipped per-GPU bandwidths on DSP optics (not optimised)")
    row.update(_binding(case, row, None))
    return float(case.power_rates @ ref), row


def solve_row(case: Case, objective: str, budget: str, fraction: float | None,
              cap: float | None) -> dict:
    """One solve of ``case``: ``perf`` under the network power cap ``cap`` (W) and the
    MaxGbps bounds, or ``perf_per_watt`` (min energy per step, no cap)."""
    p = case.problem(cap)
    kw = dict(power_rates_w_per_gbps=case.power_rates, static_power_w=case.phys.static_power_w)
    r = solve(p, objective, **kw)
    note = ""
    if objective == "perf" and r.status == "ok":
        r, note = least_power_optimum(case, r, cap, kw)
    row = _base_row(case.scenario, case.workload, case.tech)
    row.update(_design_row(case, r.bandwidth_gbps, r.step_time_ns, r.comm_time_ns))
    # the library's own power / energy must agree with the hand formula above
    assert math.isclose(row["network_power_w"], r.network_power_w, rel_tol=1e-9)
    assert math.isclose(row["energy_per_step_j"], r.energy_per_step_j, rel_tol=1e-9)
    row.update(objective=objective, budget=budget, budget_fraction=fraction, power_cap_w=cap,
               status=r.status, optimality_gap=r.optimality_gap, solve_s=r.solve_seconds,
               note=note)
    row.update(_binding(case, row, cap))
    return row


def least_power_optimum(case: Case, r, cap: float | None, kw: dict, rtol: float = 1e-9,
                        iters: int = 60):
    """``(result, note)``: when the power cap is slack and some dimension is below its upper
    bound, the perf optimum need not be unique (LIBRA's step time stops improving once one
    dimension no longer limits a collective, so extra GB/s there buy nothing). Then the
    least network power that still reaches the optimal step time (to ``rtol``) is found by
    bisection on the cap and that design is returned, so power and cost columns do not
    depend on which optimal point the interior-point method stops at."""
    bw = np.asarray(r.bandwidth_gbps, np.float64)
    ups = [math.inf if u is None else float(u) for u in (case.phys.upper_gbps or [None] * 2)]
    at_upper = all(b >= u * (1 - BIND_RTOL) for b, u in zip(bw, ups))
    power = float(case.power_rates @ bw)
    if at_upper or (cap is not None and power >= cap * (1 - BIND_RTOL)):
        return r, ""
    target = r.step_time_ns * (1 + rtol)
    lo, hi, best = 0.0, power, r
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        t = solve(case.problem(mid), "perf", **kw)
        if t.status == "ok" and t.step_time_ns <= target:
            hi, best = mid, t
        else:
            lo = mid
        if hi - lo <= 1e-9 * power:
            break
    new = float(case.power_rates @ np.asarray(best.bandwidth_gbps))
    if new >= power * (1 - 1e-6):
        return r, ""
    # certified against the original problem: its lower bound on the step time still holds
    # (the tighter cap only shrinks the feasible set)
    gap = max(0.0, best.step_time_ns / r.lower_bound - 1.0) if r.lower_bound else math.inf
    best = dataclasses.replace(best, optimality_gap=max(gap, r.optimality_gap),
                               lower_bound=r.lower_bound)
    return best, (f"perf optimum not unique (cap slack): least-power optimal design reported; "
                  f"the solver's first point was bw {bw[0]:.2f}/{bw[1]:.2f} GB/s at "
                  f"{power:.0f} W, same step time")


def no_reach_row(scenario: Scenario, workload: str, tier: str, objective: str, budget: str,
                 fraction: float | None, cap: float | None, reason: str) -> dict:
    row = _base_row(scenario, workload, tier)
    row.update(objective=objective, budget=budget, budget_fraction=fraction, power_cap_w=cap,
               status="no_reach", note=reason)
    return row


def run_study(scenarios: Sequence[str] = tuple(SCENARIOS), workloads: Sequence[str] = WORKLOADS,
              technologies: Sequence[str] = TECHNOLOGIES,
              budgets: Sequence[tuple[str, float]] = BUDGETS, ppw: bool = True,
              variants: Sequence[str] = tuple(VARIANTS), log=print) -> list[dict]:
    """Every row of the study: the reference designs, perf under each cap for every
    technology (and sensitivity variant), perf_per_watt per technology (not the variants)."""
    rows = []
    for sname in scenarios:
        sc = SCENARIOS[sname]
        for wl in workloads:
            p_ref, ref_row = reference_power_w(sc, wl)
            rows.append(ref_row)
            for tier in [*technologies, *variants]:
                with_ppw = ppw and tier not in VARIANTS
                reason = reach_problem(sc, tier)
                if reason is not None:
                    # the library refuses the same design (check_reach)
                    try:
                        load_case(sc, wl, tier)
                    except LibraInputError as e:
                        assert "ReachM" in str(e), e
                    else:  # pragma: no cover
                        raise AssertionError(f"{sname}/{tier}: check_reach accepted it")
                    for label, frac in budgets:
                        rows.append(no_reach_row(sc, wl, tier, "perf", label, frac,
                                                 frac * p_ref, reason))
                    if with_ppw:
                        rows.append(no_reach_row(sc, wl, tier, "perf_per_watt", "none", None,
                                                 None, reason))
                    log(f"{sname:5s} {wl:5s} {tier:24s} {reason}")
                    continue
                case = load_case(sc, wl, tier)
                for label, frac in budgets:
                    row = solve_row(case, "perf", label, frac, frac * p_ref)
                    rows.append(row)
                    log(f"{sname:5s} {wl:5s} {tier:24s} {label:6s} cap {frac * p_ref:9.0f} W "
                        f"bw [{row['bw_scaleup_gbps']:7.2f}, {row['bw_scaleout_gbps']:7.2f}] "
                        f"step {row['step_time_ms']:10.3f} ms  {row['status']} "
                        f"gap {row['optimality_gap']:.1e}  binds: {row['binding']}")
                if with_ppw:
                    row = solve_row(case, "perf_per_watt", "none", None, None)
                    rows.append(row)
                    log(f"{sname:5s} {wl:5s} {tier:24s} ppw    "
                        f"bw [{row['bw_scaleup_gbps']:7.2f}, {row['bw_scaleout_gbps']:7.2f}] "
                        f"energy {row['energy_per_step_j']:.4g} J  {row['status']}")
    return rows


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------


def _csv_value(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    return v


def write_csv(rows: list[dict], path: pathlib.Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_value(r.get(k)) for k in COLUMNS})


def catalogue_confidence(path: pathlib.Path = CATALOGUE) -> dict[str, dict[str, str]]:
    """tier -> {figure key -> confidence tag} read from the catalogue's comments
    (``[H]``, ``[M]``, ``[L]``, ``[estimate]``); nested Energy keys as ``Energy.Link``."""
    out: dict[str, dict[str, str]] = {}
    tier, parent = None, None
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_]+):", line)
        if m:
            tier, parent = m.group(1), None
            out[tier] = {}
            continue
        m = re.match(r"^(\s+)([A-Za-z]+):\s*([^#]*?)\s*(#.*)?$", line)
        if tier is None or not m:
            continue
        indent, key, value, comment = m.groups()
        if value == "":
            parent = key
            continue
        full = f"{parent}.{key}" if len(indent) > 2 and parent else key
        if len(indent) <= 2:
            parent = None
        tag = re.findall(r"\[(H|M|L|estimate)\]", comment or "")
        out[tier][full] = {"estimate": "E"}.get(tag[-1], tag[-1]) if tag else "?"
    return out


def _fmt(v, spec=".1f", missing="-"):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return missing
    return format(v, spec)


def md_table(header, rows) -> list[str]:
    return (["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|"]
            + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows])


def _pct(a, b) -> str:
    return f"{100 * (a / b - 1):+.1f}%"


def _ms(v: float) -> str:
    return f"{v:,.0f}" if v >= 1000 else f"{v:.4g}"


def findings(rows: list[dict], scenarios, workloads, technologies, budgets,
             variants=()) -> list[str]:
    """Sentences computed from the rows (no number here is typed in by hand)."""
    out = []
    by = {(r["scenario"], r["workload"], r["technology"], r["objective"], r["budget"]): r
          for r in rows}
    solved = [r for r in rows if r["objective"] in ("perf", "perf_per_watt")
              and r["status"] != "no_reach"]
    if solved:
        worst = max(r["optimality_gap"] for r in solved)
        bad = [r for r in solved if r["status"] != "ok"]
        out.append(f"- **Solves.** {len(solved)} solves, "
                   f"{len(solved) - len(bad)} with status ok; largest certified optimality gap "
                   f"{worst:.1e}.")
    nr = sorted({(r["scenario"], r["technology"], r["note"]) for r in rows
                 if r["status"] == "no_reach"}, key=lambda x: scenarios.index(x[0]))
    if nr:
        fits = [s for s in scenarios if not any(x[0] == s for x in nr)]
        out.append("- **Reach.** " + "; ".join(f"{s}: {TECH_LABELS[t]} {note}"
                                               for s, t, note in nr)
                   + (f". Every technology reaches in: {', '.join(fits)}." if fits else "."))
    # technology ranking at each cap, relative to DSP optics
    for s in scenarios:
        for wl in workloads:
            ref = by.get((s, wl, REFERENCE_TIER, "reference", "shipped"))
            parts = []
            for label, _ in budgets:
                dsp = by.get((s, wl, REFERENCE_TIER, "perf", label))
                got = [(by[(s, wl, t, "perf", label)], t) for t in technologies
                       if (s, wl, t, "perf", label) in by
                       and by[(s, wl, t, "perf", label)]["status"] == "ok"]
                if not got or dsp is None or dsp["status"] != "ok":
                    continue
                best, bt = min(got, key=lambda x: x[0]["step_time_ms"])
                rel = ", ".join(f"{TECH_LABELS[t]} {_pct(r['step_time_ms'], dsp['step_time_ms'])}"
                                for r, t in got if t != REFERENCE_TIER)
                parts.append(f"{label} cap ({dsp['power_cap_w'] / 1e3:.1f} kW): best "
                             f"{TECH_LABELS[bt]} ({_ms(best['step_time_ms'])} ms, bw "
                             f"{best['bw_scaleup_gbps']:.0f}/{best['bw_scaleout_gbps']:.0f}); "
                             f"step time vs DSP optics: {rel}")
            if parts:
                head = (f"- **{s} / {WORKLOAD_LABELS[wl]}** (reference design "
                        f"{_ms(ref['step_time_ms'])} ms at {ref['network_power_w'] / 1e3:.1f} kW). "
                        if ref else f"- **{s} / {WORKLOAD_LABELS[wl]}**. ")
                out.append(head + "; ".join(parts) + ".")
    # sensitivity: CPO held to the pluggables' 100 GB/s port
    for v in variants:
        tier = VARIANTS[v][0]
        parts = []
        for s in scenarios:
            for wl in workloads:
                cells = []
                for label, _ in budgets:
                    a = by.get((s, wl, v, "perf", label))
                    full = by.get((s, wl, tier, "perf", label))
                    dsp = by.get((s, wl, REFERENCE_TIER, "perf", label))
                    if not (a and full and dsp) or "ok" != a["status"] or "ok" != full["status"]:
                        continue
                    cells.append(f"{label} {_pct(a['step_time_ms'], dsp['step_time_ms'])} vs "
                                 f"{_pct(full['step_time_ms'], dsp['step_time_ms'])}")
                if cells:
                    parts.append(f"{s} / {WORKLOAD_LABELS[wl]}: " + ", ".join(cells))
        if parts:
            out.append(
                f"- **Sensitivity: {TECH_LABELS[v]}** (CPO's energy with a "
                f"{VARIANTS[v][1]:g} GB/s port, like the pluggables). Step time vs DSP optics "
                f"at each cap, {TECH_LABELS[v]} vs {TECH_LABELS[tier]} at 200 GB/s: "
                + "; ".join(parts) + ". The difference between the two is what CPO's 1.6T "
                "port (MaxGbps 200) buys; what is left against DSP optics is its lower pJ/bit.")
    # how much faster than the shipped design at the shipped power
    hi = budgets[-1][0]
    gains = []
    for s in scenarios:
        for wl in workloads:
            ref = by.get((s, wl, REFERENCE_TIER, "reference", "shipped"))
            for t in technologies:
                r = by.get((s, wl, t, "perf", hi))
                if ref and r and r["status"] == "ok":
                    gains.append((ref["step_time_ms"] / r["step_time_ms"], s, wl, t, r))
    if gains:
        g = max(gains, key=lambda x: x[0])
        dsp_gains = [x for x in gains if x[3] == REFERENCE_TIER]
        dg = max(dsp_gains, key=lambda x: x[0]) if dsp_gains else None
        out.append(
            f"- **Against the shipped design at its own network power** ({hi} cap = "
            f"{budgets[-1][1]:g} x reference): the largest speed-up is {g[0]:.3f}x "
            f"({g[1]} / {WORKLOAD_LABELS[g[2]]} on {TECH_LABELS[g[3]]}, bw "
            f"{g[4]['bw_scaleup_gbps']:.0f}/{g[4]['bw_scaleout_gbps']:.0f} GB/s)"
            + (f"; on the same DSP optics re-splitting alone gives at most {dg[0]:.3f}x "
               f"({dg[1]} / {WORKLOAD_LABELS[dg[2]]})." if dg else "."))
    # binding constraints
    perf = [r for r in rows if r["objective"] == "perf" and r["status"] == "ok"
            and r["technology"] not in VARIANTS]
    if perf:
        cap_n = sum(r["power_cap_binds"] for r in perf)
        up_n = sum(r["scaleup_upper_binds"] for r in perf)
        out_n = sum(r["scaleout_upper_binds"] for r in perf)
        slack = [r for r in perf if not r["power_cap_binds"]]
        out.append(
            f"- **Binding bounds** ({len(perf)} capped solves, sensitivity rows aside): the "
            f"power cap binds in {cap_n}, "
            f"the scale-up limit in {up_n}, the scale-out MaxGbps in {out_n}."
            + (" The cap is slack only in: " + "; ".join(
                f"{r['scenario']}/{r['workload']}/{TECH_LABELS[r['technology']]}/"
                f"{r['budget']} ({r['network_power_w'] / 1e3:.1f} of "
                f"{r['power_cap_w'] / 1e3:.1f} kW; {r['binding']})" for r in slack) + "."
               if slack else ""))
    # energy: network share and spread across technologies
    if perf:
        shares = [r["network_power_share"] for r in perf]
        spreads = []
        for s in scenarios:
            for wl in workloads:
                for label, _ in budgets:
                    es = [by[(s, wl, t, "perf", label)]["energy_per_step_j"]
                          for t in technologies if (s, wl, t, "perf", label) in by
                          and by[(s, wl, t, "perf", label)]["status"] == "ok"]
                    if len(es) > 1:
                        spreads.append((max(es) / min(es) - 1, s, wl, label))
        txt = (f"- **Energy.** The network is {100 * min(shares):.1f}-{100 * max(shares):.1f} % "
               "of total power in the capped solves, so energy per step follows step time: ")
        if spreads:
            m = max(spreads)
            txt += (f"across technologies at the same cap it differs by at most "
                    f"{100 * m[0]:.1f} % ({m[1]} / {WORKLOAD_LABELS[m[2]]}, {m[3]} cap).")
        out.append(txt)
    ppw_rows = [r for r in rows if r["objective"] == "perf_per_watt" and r["status"] == "ok"]
    if ppw_rows:
        at_max = sum(r["scaleup_upper_binds"] and r["scaleout_upper_binds"] for r in ppw_rows)
        best = {}
        for r in ppw_rows:
            k = (r["scenario"], r["workload"])
            if k not in best or r["energy_per_step_j"] < best[k]["energy_per_step_j"]:
                best[k] = r
        out.append(
            f"- **perf_per_watt** (min energy per step, no cap): {at_max} of {len(ppw_rows)} "
            "optima put both dimensions at their upper bound (NPU power dominates, so "
            "finishing sooner saves more than the links cost). Least energy per step: "
            + "; ".join(f"{s} / {WORKLOAD_LABELS[w]}: {TECH_LABELS[r['technology']]} "
                        f"{r['energy_per_step_j']:.4g} J"
                        for (s, w), r in best.items()) + ".")
    # cost
    cost_parts = []
    for s in scenarios:
        for wl in workloads:
            rs = [(by[(s, wl, t, "perf", hi)], t) for t in technologies
                  if (s, wl, t, "perf", hi) in by and by[(s, wl, t, "perf", hi)]["status"] == "ok"]
            if rs:
                cost_parts.append(f"{s} / {WORKLOAD_LABELS[wl]}: " + ", ".join(
                    f"{TECH_LABELS[t]} ${r['network_cost_usd'] / 1e6:.2f}M" for r, t in rs))
    if cost_parts:
        out.append(f"- **Network cost at the {hi} cap**: " + "; ".join(cost_parts) + ".")
    return out


NOTES = """\
## Notes: which figures are estimates, and what that means

Confidence of the catalogue figures the study uses (read from the tags in
`libra_jax/data/technologies.yaml`; H primary source, M reputable secondary, L single blog /
marketing figure, E estimate with no public figure):

{confidence}

What it means for the conclusions:

- **Power, hence the power-capped optima, rests mostly on H/M energy figures for the
  optics**: DSP optics' module energy is H (NVIDIA's 17 W per 800G), CPO's is M (NVIDIA and
  Broadcom launch figures), copper's is H. LPO's is L (one vendor blog's 8-9 W per 800G): the
  LPO rows are the least certain of the optics. The switch ASIC (9.3 pJ/bit, M) and NIC SerDes
  (5.5 pJ/bit, L) are the same for every scale-out technology; they dilute the differences
  between technologies, and if SerDes energy is lower than 5.5 the optics' share, and the gap
  between DSP and LPO/CPO, grows. The scale-up tier's switch energy (NVSwitch) is an estimate
  (a 51.2T Ethernet ASIC as proxy) and its link energy L: every scenario's scale-up power, and
  therefore how much of a cap is left for scale-out, moves with them.
- **Costs are weaker than powers.** Module and switch prices are L (one reseller blog), the NIC
  price and all scale-up prices are E (LIBRA's own cost-model numbers), and CPO's and copper's
  link prices are E (CPO = 0.6 x DSP from a 2021 marketing claim). Read the cost column as "what
  this catalogue implies", not as a market price; no conclusion here is drawn from cost.
- **Bandwidth limits decide many optima.** MaxGbps 100 GB/s (one 800G port) for DAC, LPO and
  DSP optics and 200 GB/s (one 1.6T port) for CPO are per-port figures (H / L / H / M): a
  design with two NICs per GPU would double them. Part of CPO's lead comes from its 200 GB/s
  port, not from its energy: the "CPO at 100 GB/s" sensitivity rows hold CPO to the
  pluggables' port, and the difference between the two CPO columns above is that part.
  Likewise copper's 100 GB/s port is what stops it from winning at high caps in the rack.
- **Reach**: copper DAC's 3 m is H (NVIDIA LinkX, 100G lanes); at 200G lanes it shrinks to
  ~1-2 m (L-M), which would also rule copper out of the 2.5 m rack span. The spans themselves
  are estimates.
- **What is not modelled**: LIBRA's step-time model (model=libra) has no per-hop latency, so
  DSP optics' extra ~100 ns (L) is not in these step times; one switch stage per dimension is
  counted (no spine level, its optics, NIC logic or PCIe); NPU power is TDP (M), so total
  power and energy per step are upper-end figures; NPU compute efficiency 0.52 is an
  estimate. The rack scenario's system is illustrative (see its note).
"""


def confidence_table(technologies) -> list[str]:
    conf = catalogue_confidence()
    keys = ["Link", "Switch", "Nic", "Energy.Link", "Energy.Switch", "Energy.Nic", "ReachM",
            "MaxGbps"]
    tiers = [SCALE_UP_TIER, *technologies]
    rows = [[t, *(conf.get(t, {}).get(k, "-") for k in keys)] for t in tiers]
    return md_table(["tier", "Link $", "Switch $", "Nic $", "Energy.Link", "Energy.Switch",
                     "Energy.Nic", "ReachM", "MaxGbps"], rows)


def write_table(rows: list[dict], path: pathlib.Path, scenarios, workloads, technologies,
                budgets, seconds: float, command: str, variants=()) -> None:
    lines = [
        "# Physical study: scale-out link technology under network power caps (issue 19, "
        "point 8)", "",
        f"Generated by `{command}` in {seconds:.0f} s (all solves certified by the library's "
        "interior-point solver; step-time model: LIBRA's, bandwidth only). Bandwidths are GB/s "
        "per NPU per direction; power caps apply to the network power "
        "`N x 0.008 x pJ/bit x GB/s` summed over both dimensions; total power = N x npu_w + "
        "network power; energy per step = step time x total power. Budgets are fractions of "
        "the network power of each scenario's reference design (the shipped per-GPU bandwidths "
        "on DSP optics). All rows: `results.csv`; plot: `plot.png`.", "",
        "## Scenarios", ""]
    srows = []
    by = {(r["scenario"], r["workload"], r["technology"], r["objective"], r["budget"]): r
          for r in rows}
    for s in scenarios:
        sc = SCENARIOS[s]
        for wl in workloads:
            ref = by.get((s, wl, REFERENCE_TIER, "reference", "shipped"))
            if ref is None:
                continue
            srows.append([
                s, sc.title.split(": ", 1)[-1],
                f"SW({sc.npus[0]})_SW({sc.npus[1]}) = {ref['n_npus']:,}",
                f"{sc.span_m[0]:g} / {sc.span_m[1]:g}", WORKLOAD_LABELS[wl], ref["mapping"],
                f"{ref['memory_per_npu_gb']:.0f}",
                f"{sc.reference_bw_gbps[0]:g} / {sc.reference_bw_gbps[1]:g}",
                f"{ref['network_power_w'] / 1e3:.2f}",
                ", ".join(f"{f * ref['network_power_w'] / 1e3:.1f}" for _, f in budgets),
                f"{ref['npu_power_w'] / 1e3:.0f}"])
    lines += md_table(["scenario", "system", "network (NPUs)", "span up / out (m)", "workload",
                       "mapping", "memory/NPU (GB)", "reference bw (GB/s)",
                       "reference network power (kW)",
                       "caps " + "/".join(b for b, _ in budgets) + " (kW)", "NPU power (kW)"],
                      srows)
    lines += [""] + [f"- {s}: {SCENARIOS[s].note}." + (
        f" Scale-up upper bound: {SCENARIOS[s].scaleup_upper_note}."
        if SCENARIOS[s].scaleup_upper_gbps else "") for s in scenarios]
    lines += ["", "## Findings (computed from the rows below)", ""]
    lines += findings(rows, scenarios, workloads, technologies, budgets, variants)
    lines += ["", "## The shipped design against the optima at its own network power", "",
              f"Reference design evaluated, and each technology's optimum under the "
              f"{budgets[-1][0]} cap ({budgets[-1][1]:g} x the reference's network power); "
              "speed-up = reference step time / optimum step time.", ""]
    srows = []
    for s in scenarios:
        for wl in workloads:
            ref = by.get((s, wl, REFERENCE_TIER, "reference", "shipped"))
            if ref is None:
                continue
            cells = []
            for t in technologies:
                r = by.get((s, wl, t, "perf", budgets[-1][0]))
                if r is None:
                    cells.append("-")
                elif r["status"] == "no_reach":
                    cells.append("no reach")
                else:
                    cells.append(f"{ref['step_time_ms'] / r['step_time_ms']:.3f}x "
                                 f"({r['bw_scaleup_gbps']:.0f}/{r['bw_scaleout_gbps']:.0f})")
            srows.append([s, WORKLOAD_LABELS[wl], _ms(ref["step_time_ms"]),
                          f"{ref['bw_scaleup_gbps']:.0f}/{ref['bw_scaleout_gbps']:.0f}", *cells])
    lines += md_table(["scenario", "workload", "reference step (ms)", "reference bw",
                       *[f"{TECH_LABELS[t]} (bw)" for t in technologies]], srows)
    lines += ["", "## Step time vs DSP optics at the same power cap", "",
              "Step time of each technology's optimum relative to DSP optics' optimum under the "
              "same cap (negative: faster).", ""]
    prow = []
    for s in scenarios:
        for wl in workloads:
            for label, frac in budgets:
                dsp = by.get((s, wl, REFERENCE_TIER, "perf", label))
                if dsp is None or dsp["status"] != "ok":
                    continue
                cells = []
                for t in [*technologies, *variants]:
                    r = by.get((s, wl, t, "perf", label))
                    if r is None:
                        cells.append("-")
                    elif r["status"] == "no_reach":
                        cells.append("no reach")
                    else:
                        cells.append(_pct(r["step_time_ms"], dsp["step_time_ms"]))
                prow.append([s, WORKLOAD_LABELS[wl], f"{label} ({frac:g}x)",
                             _ms(dsp["step_time_ms"]), *cells])
    lines += md_table(["scenario", "workload", "cap", "DSP optics step (ms)",
                       *[TECH_LABELS[t] for t in [*technologies, *variants]]], prow)
    lines += ["", "## All rows", "",
              "bw = scale-up / scale-out GB/s per NPU. perf: min step time under the cap; "
              "perf_per_watt: min energy per step, no cap; reference: the shipped design "
              "evaluated.", ""]
    full = []
    for r in rows:
        if r["status"] == "no_reach":
            full.append([r["scenario"], WORKLOAD_LABELS[r["workload"]],
                         TECH_LABELS[r["technology"]], r["objective"], r["budget"],
                         _fmt(r["power_cap_w"] and r["power_cap_w"] / 1e3, ".2f"),
                         "-", "-", "-", "-", "-", "-", "no_reach", "-", r["note"]])
            continue
        full.append([
            r["scenario"], WORKLOAD_LABELS[r["workload"]], TECH_LABELS[r["technology"]],
            r["objective"], r["budget"],
            _fmt(r["power_cap_w"] and r["power_cap_w"] / 1e3, ".2f"),
            f"{r['bw_scaleup_gbps']:.1f} / {r['bw_scaleout_gbps']:.1f}",
            _ms(r["step_time_ms"]), f"{r['network_cost_usd'] / 1e6:.3f}",
            f"{r['network_power_w'] / 1e3:.2f}", f"{r['total_power_w'] / 1e3:.1f}",
            f"{r['energy_per_step_j']:.4g}", r["status"],
            _fmt(r["optimality_gap"], ".1e"), r["binding"]])
    lines += md_table(["scenario", "workload", "scale-out", "objective", "budget", "cap (kW)",
                       "bw (GB/s)", "step (ms)", "net cost ($M)", "net power (kW)",
                       "total power (kW)", "energy/step (J)", "status", "gap", "binds"], full)
    lines += ["", NOTES.format(confidence="\n".join(confidence_table(technologies)))]
    path.write_text("\n".join(lines))


def plot(rows: list[dict], path: pathlib.Path, scenarios, workloads, technologies,
         budgets, variants=()) -> None:
    """Step time vs network power, one panel per scenario x workload: a line per technology
    through its capped optima, a star at its perf_per_watt optimum, a cross at the reference
    design, dotted verticals at the caps."""
    fig, axes = plt.subplots(len(scenarios), len(workloads),
                             figsize=(6.2 * len(workloads), 3.9 * len(scenarios)),
                             squeeze=False)
    for i, s in enumerate(scenarios):
        for j, wl in enumerate(workloads):
            ax = axes[i, j]
            sel = [r for r in rows if r["scenario"] == s and r["workload"] == wl]
            ref = next((r for r in sel if r["objective"] == "reference"), None)
            caps = sorted({r["power_cap_w"] for r in sel
                           if r["objective"] == "perf" and r["power_cap_w"]})
            for c, (label, _) in zip(caps, budgets):
                ax.axvline(c / 1e3, color="0.6", ls=":", lw=0.9)
                ax.annotate(f"{label} cap", (c / 1e3, 0.02), xycoords=("data", "axes fraction"),
                            fontsize=7, color="0.4", ha="right", va="bottom", rotation=90)
            missing = []
            for t in [*technologies, *variants]:
                pts = [r for r in sel if r["technology"] == t and r["objective"] == "perf"
                       and r["status"] == "ok"]
                if not pts and any(r["technology"] == t and r["status"] == "no_reach"
                                   for r in sel):
                    missing.append(f"{TECH_LABELS[t]}: "
                                   + next(r["note"] for r in sel if r["technology"] == t
                                          ).split(":")[0])
                    continue
                pts.sort(key=lambda r: r["network_power_w"])
                ax.plot([r["network_power_w"] / 1e3 for r in pts],
                        [r["step_time_ms"] for r in pts], marker="o", ms=5,
                        color=TECH_COLOURS[t], ls="--" if t in VARIANTS else "-")
                pw = [r for r in sel if r["technology"] == t
                      and r["objective"] == "perf_per_watt" and r["status"] == "ok"]
                for r in pw:
                    ax.plot(r["network_power_w"] / 1e3, r["step_time_ms"], marker="*", ms=12,
                            color=TECH_COLOURS[t], mec="k", mew=0.5, ls="none")
            if ref is not None:
                ax.plot(ref["network_power_w"] / 1e3, ref["step_time_ms"], marker="X", ms=9,
                        color="k", ls="none")
            if missing:
                ax.text(0.98, 0.97, "\n".join(missing), transform=ax.transAxes, ha="right",
                        va="top", fontsize=7, color=TECH_COLOURS["CopperDAC"])
            ax.set_xlabel("network power (kW)")
            ax.set_ylabel("step time (ms)")
            ax.set_title(f"{SCENARIOS[s].title}: {WORKLOAD_LABELS[wl]}", fontsize=9)
            ax.grid(alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", ms=5, color=TECH_COLOURS[t], label=TECH_LABELS[t],
                          ls="--" if t in VARIANTS else "-")
               for t in [*technologies, *variants]]
    handles += [plt.Line2D([], [], marker="*", ms=11, color="0.6", mec="k", mew=0.5, ls="none",
                           label="perf_per_watt optimum (no cap)"),
                plt.Line2D([], [], marker="X", ms=9, color="k", ls="none",
                           label="reference: shipped bandwidths on DSP optics")]
    fig.suptitle("Optimal step time vs network power per scale-out technology "
                 "(dots: perf optima under the low / medium / high network power caps)",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8,
               frameon=False)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def main(argv: Sequence[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=pathlib.Path, default=OUT_DEFAULT, help="output folder")
    ap.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--technologies", nargs="+", default=list(TECHNOLOGIES),
                    choices=list(TECHNOLOGIES))
    ap.add_argument("--fractions", nargs="+", type=float, default=[f for _, f in BUDGETS],
                    help="power caps as fractions of the reference design's network power")
    ap.add_argument("--no-ppw", action="store_true", help="skip the perf_per_watt rows")
    ap.add_argument("--no-sensitivity", action="store_true",
                    help="skip the sensitivity variants (CPO at 100 GB/s)")
    args = ap.parse_args(argv)
    if REFERENCE_TIER not in args.technologies:
        ap.error(f"--technologies must include {REFERENCE_TIER} (the reference)")
    names = ("low", "medium", "high") if len(args.fractions) == 3 else tuple(
        f"x{f:g}" for f in args.fractions)
    budgets = tuple(zip(names, args.fractions))
    start = time.perf_counter()
    variants = [] if args.no_sensitivity else [
        v for v, (t, _) in VARIANTS.items() if t in args.technologies]
    rows = run_study(args.scenarios, args.workloads, args.technologies, budgets,
                     ppw=not args.no_ppw, variants=variants)
    seconds = time.perf_counter() - start
    out = args.out if args.out.is_absolute() else pathlib.Path.cwd() / args.out
    out.mkdir(parents=True, exist_ok=True)
    given = list(sys.argv[1:] if argv is None else argv)
    command = " ".join(["python experiments/physical_study.py", *given])
    write_csv(rows, out / "results.csv")
    write_table(rows, out / "table.md", args.scenarios, args.workloads, args.technologies,
                budgets, seconds, command, variants)
    plot(rows, out / "plot.png", args.scenarios, args.workloads, args.technologies, budgets,
         variants)
    import jax
    info = dict(command=command, wall_seconds=round(time.perf_counter() - start, 2),
                solve_seconds=round(seconds, 2),
                solves=sum(r["status"] not in ("no_reach", "evaluated") for r in rows),
                rows=len(rows), scenarios=args.scenarios, workloads=args.workloads,
                technologies=args.technologies, variants=variants, budgets=dict(budgets),
                git_commit=_git_commit(), python=platform.python_version(),
                jax=jax.__version__, jax_backend=jax.default_backend(),
                date=time.strftime("%Y-%m-%d %H:%M:%S %z"))
    (out / "run_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote {out}/results.csv, table.md, plot.png, run_info.json ({len(rows)} rows, "
          f"{info['wall_seconds']:.1f} s)")
    return rows


if __name__ == "__main__":
    main()
