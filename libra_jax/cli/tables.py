"""What a run prints: the summary tables of ``libra-train`` (single, multi-workload and
co-search runs, with the lines beyond LIBRA's model and the technology catalogue's) and of
``libra-evaluate``; the ``result.json`` dictionaries are in :mod:`libra_jax.cli.report`.

Host-side only (plain Python floats); nothing here touches JAX. Units: bandwidth GB/s per NPU
per dimension, time ns (the tables also show ms), cost $, time x cost ns*$.
"""

from __future__ import annotations

from typing import Any, Sequence

from libra_jax.cli.report import (
    exact_gap,
    json_num,
    json_nums,
    perf_per_cost_gain,
    perf_per_watt_gain,
    power_of,
    ratio,
    speedup,
)

_OBJECTIVE_WORDS = {
    "perf": "minimise step time",
    "perf_per_cost": "minimise step time x network cost",
    "perf_per_watt": "minimise step time x total power (energy per step)",
}


# --------------------------------------------------------------------------------------------
# The printed table
# --------------------------------------------------------------------------------------------


#: Time units from the largest down, with their size in ns.
TIME_UNITS = (("s", 1e9), ("ms", 1e6), ("us", 1e3), ("ns", 1.0))


def time_text(value_ns: float | None, suffix: str = "") -> str:
    """``value_ns`` (ns, or ns times ``suffix``) in the largest of s, ms, us and ns in which it
    reads at least 1, e.g. 5.5e12 -> "5,535.683 s*$" with ``suffix="*$"`` (time x cost
    sensitivities run to 1e12 ns*$ and more); None -> "-"."""
    v = json_num(value_ns)
    if v is None:
        return "-"
    unit, size = next(((u, f) for u, f in TIME_UNITS if abs(v) >= f), TIME_UNITS[-1])
    return f"{v / size:,.3f} {unit}{suffix}"


def _fmt(x: Any, spec: str, unit: str = "") -> str:
    v = json_num(x)
    if v is None:
        return "-" if x is None else str(x)  # None -> "-", nan/inf shown as such
    return f"{v:{spec}}{unit}"


def constraints_text(spec: Any) -> list[str]:
    """One line per constraint of a ``problem.ConstraintSpec``."""
    if spec is None:
        return []
    lines = []
    if spec.total_bw_gbps is not None:
        op = "==" if spec.total_bw_mode == "eq" else "<="
        lines.append(f"sum(bw) {op} {spec.total_bw_gbps:g} GB/s")
    if spec.lower_gbps is not None:
        lines.append(f"bw >= {list(spec.lower_gbps)} GB/s")
    if spec.upper_gbps is not None:
        lines.append(f"bw <= {list(spec.upper_gbps)} GB/s")
    lines.extend(str(s) for s in spec.linear)
    if spec.max_cost_usd is not None:
        lines.append(f"network cost <= ${spec.max_cost_usd:,.2f}")
    if getattr(spec, "max_power_w", None) is not None:
        lines.append(f"network power <= {spec.max_power_w:,.1f} W")
    return lines or ["bw >= 0 only"]


def format_physical(limits: Any, reference: Any) -> list[str]:
    """Lines after the table for a technology catalogue: which bandwidth limits bind, and a
    shipped design (``reference_bw_gbps``) next to the optima at its power and its cost."""
    lines = []
    if limits:
        bind = [f"dim {d} <= {x['upper_gbps']:g} GB/s ({x['source']})"
                for d, x in enumerate(limits) if x["binding"]]
        if bind:
            lines += ["", "binding bandwidth limits: " + "; ".join(bind)]
    if reference:
        lines += ["", "shipped design vs libra_jax:"]
        rows = [("design", "GB/s per dim", "step time", "network cost", "network power",
                 "energy/step", "status")]
        for key, label in (("shipped", "shipped (reference_bw_gbps)"),
                           ("same_power", "optimum at the same network power"),
                           ("same_cost", "optimum at the same network cost")):
            x = reference.get(key)
            if x is None:
                continue
            rows.append((label, "[" + ", ".join(f"{v:,.1f}" for v in x["bandwidth_gbps"]) + "]",
                         _fmt(x["step_time_ns"] / 1e6, ",.4f", " ms"),
                         "-" if x["network_cost_usd"] is None
                         else f"${x['network_cost_usd']:,.0f}",
                         _fmt(x["network_power_w"], ",.0f", " W"),
                         _fmt(x["energy_per_step_j"], ",.2f", " J"),
                         str(x.get("status", "-"))))
        lines += text_table(rows, "lrrrrrl")
    return lines


def text_table(rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """Left/right aligned columns ('l'/'r' per column), two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(align))]
    out = []
    for r in rows:
        cells = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(r, widths, align)]
        out.append("  ".join(cells).rstrip())
    return out


def _header_and_dims(title, objective, words, spec, network, bw, base_bw, label) -> list:
    """Title, objective and constraint lines, then the per-dimension bandwidth table."""
    lines = [title, f"objective:   {objective} ({words.get(objective, objective)})"]
    for i, c in enumerate(constraints_text(spec)):
        lines.append(("constraints: " if i == 0 else "             ") + c)
    lines.append("")
    tiers = network.cost_tiers or ("-",) * network.num_dims
    bw, base_bw = list(bw), list(base_bw)
    rows = [("dim", "block", "NPUs", "cost tier", label, "equal split GB/s")]
    for d in range(network.num_dims):
        rows.append((str(d), network.blocks[d], str(network.npus[d]), tiers[d],
                     _fmt(bw[d], ".3f"), _fmt(base_bw[d], ".3f")))
    rows.append(("", "total", "", "", _fmt(sum(map(float, bw)), ".3f"),
                 _fmt(sum(map(float, base_bw)), ".3f")))
    lines += text_table(rows, "rlrlrr")
    lines.append("(bandwidth is per NPU, per dimension)")
    design = design_override(bw)
    if design is not None:
        lines.append(f"design at full precision, for libra-evaluate: {design}")
    lines.append("")
    return lines


def design_override(bw: Any) -> str | None:
    """``'bandwidth_gbps=[...]'``: the design as a libra-evaluate override, every number at
    full precision (its shortest exact repr, so the constraints the optimum meets still hold
    when it is evaluated; the table's 3 decimals can break ``sum(bw) == 500`` by rounding),
    in single quotes for the shell (``[`` is a pattern to zsh). None when an entry is not a
    finite number."""
    values = [json_num(x) for x in list(bw)]
    if not values or any(v is None for v in values):
        return None
    return "'bandwidth_gbps=[" + ",".join(repr(v) for v in values) + "]'"


def _notes(status: str, projected: bool) -> list[str]:
    """The note on a projected baseline and the warning on a status other than ok."""
    lines = []
    if projected:
        lines += ["", "note: the equal split of the budget violates the constraints; the baseline",
                  "      is the nearest feasible point to it instead."]
    if status != "ok":
        lines += ["", f"warning: solver status is {status!r}; treat the numbers above with "
                  "care."]
    return lines


def format_table(
    result: Any,
    baseline: Any,
    network: Any,
    workload: Any,
    spec: Any = None,
    compile_seconds: float | None = None,
    power: Any = None,
) -> str:
    """The human-readable summary printed by ``python -m libra_jax.train``.

    Args:
      result: the ``solve.SolveResult``.
      baseline: the ``solve.equal_split`` baseline.
      network: the ``topology.Network``.
      workload: the ``workload.Workload``.
      spec: the ``problem.ConstraintSpec`` (listed in the header), optional.
      compile_seconds: JAX compilation during the solve, shown apart from the solve time.

    Returns:
      A multi-line string (no trailing newline).
    """
    name = getattr(workload, "name", "workload")
    objective = result.objective
    title = (f"LIBRA bandwidth optimisation: {name} on {network.notation} "
             f"({network.num_npus:,} NPUs, {network.num_dims} dimensions)")
    lines = _header_and_dims(title, objective, _OBJECTIVE_WORDS, spec, network,
                             result.bandwidth_gbps, baseline.bandwidth_gbps, "optimal GB/s")

    def ms_ns(x: Any) -> str:
        v = json_num(x)
        return "-" if v is None else f"{v / 1e6:,.4f} ms ({v:,.1f} ns)"

    def usd(x: Any) -> str:
        v = json_num(x)
        return "-" if v is None else f"${v:,.2f}"

    def times(x: Any) -> str:
        v = json_num(x)
        return "-" if v is None else f"{v:.4f}x"

    baseline_comm = getattr(baseline, "comm_time_ns", None)
    rows = [
        ("", "optimal", "equal split"),
        ("step time", ms_ns(result.step_time_ns), ms_ns(baseline.step_time_ns)),
        ("comm time", ms_ns(result.comm_time_ns), ms_ns(baseline_comm)),
        ("network cost", usd(result.network_cost_usd), usd(baseline.network_cost_usd)),
        ("time x cost (ns*$)", _fmt(result.time_x_cost, ".6e"), _fmt(baseline.time_x_cost, ".6e")),
    ]
    if power is not None and power[0] is not None:
        pw = power_of(json_nums(result.bandwidth_gbps), result.step_time_ns, power)
        base = power_of(json_nums(baseline.bandwidth_gbps), baseline.step_time_ns, power)
        rows += [
            ("network power", _fmt(pw["network_power_w"], ",.1f", " W"),
             _fmt(base["network_power_w"], ",.1f", " W")),
            ("total power", _fmt(pw["total_power_w"], ",.1f", " W"),
             _fmt(base["total_power_w"], ",.1f", " W")),
            ("energy per step", _fmt(pw["energy_per_step_j"], ",.4f", " J"),
             _fmt(base["energy_per_step_j"], ",.4f", " J")),
        ]
    lines += text_table(rows, "lrr")
    lines.append("")
    rows = [
        ("speed-up over equal split", times(speedup(result, baseline))),
        ("perf-per-cost gain", times(perf_per_cost_gain(result, baseline))),
        *([("perf-per-watt gain", times(perf_per_watt_gain(result, baseline, power)))]
          if power is not None and power[0] is not None else []),
        ("optimality gap", _fmt(result.optimality_gap, ".3e")),
        ("max constraint violation", _fmt(result.max_violation, ".3e")),
        ("status", str(result.status)),
        ("solve time", _fmt(result.solve_seconds, ".3f", " s")),
        ("compile time", _fmt(compile_seconds, ".3f", " s")),
    ]
    lines += text_table(rows, "ll") + _notes(result.status, baseline.projected)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Multi-workload runs (libra_jax/studies/multi.py)
# --------------------------------------------------------------------------------------------


_MULTI_WORDS = {
    "sum_time": "minimise the weighted sum of step times",
    "sum_time_x_cost": "minimise network cost x the weighted sum of step times",
    "worst_slowdown": "minimise the worst slowdown against each workload's own optimum",
}


def format_multi_table(result: Any, network: Any, spec: Any = None,
                       compile_seconds: float | None = None) -> str:
    """The summary printed for a multi-workload run (``multi.MultiResult``)."""
    objective = result.objective
    names = ", ".join(w.name for w in result.workloads)
    title = (f"LIBRA multi-workload optimisation: {len(result.workloads)} workloads ({names}) "
             f"on {network.notation} ({network.num_npus:,} NPUs, {network.num_dims} dimensions)")
    lines = _header_and_dims(title, objective, _MULTI_WORDS, spec, network,
                             result.bandwidth_gbps, result.baseline.bandwidth_gbps,
                             "shared GB/s")

    def ms(x: Any) -> str:
        v = json_num(x)
        return "-" if v is None else f"{v / 1e6:,.4f} ms"

    rows = [("workload", "weight", "shared design", "own optimum", "equal split",
             "slowdown vs own", "speed-up vs equal")]
    for w in result.workloads:
        rows.append((
            w.name, _fmt(w.weight, "g"), ms(w.step_time_ns), ms(w.own_optimum_step_time_ns),
            ms(w.equal_split_step_time_ns),
            _fmt(ratio(w.step_time_ns, w.own_optimum_step_time_ns), ".4f", "x"),
            _fmt(ratio(w.equal_split_step_time_ns, w.step_time_ns), ".4f", "x"),
        ))
    lines += text_table(rows, "lrrrrrr")
    lines.append("(step time of each workload; own optimum: the workload alone on the network)")
    lines.append("")

    if objective == "worst_slowdown":
        def val(x: Any) -> str:
            return _fmt(x, ".6f", "x")
    elif objective == "sum_time":
        def val(x: Any) -> str:
            v = json_num(x)
            return "-" if v is None else f"{v / 1e6:,.4f} ms ({v:,.1f} ns)"
    else:
        def val(x: Any) -> str:
            return _fmt(x, ".6e", " ns*$")
    gain = ratio(result.baseline_objective_value, result.objective_value)
    rows = [
        ("objective value", val(result.objective_value)),
        ("at the equal split", val(result.baseline_objective_value)),
        ("gain over equal split", _fmt(gain, ".4f", "x")),
        ("network cost", "-" if json_num(result.network_cost_usd) is None
         else f"${result.network_cost_usd:,.2f}"),
        ("optimality gap", _fmt(result.optimality_gap, ".3e")),
        ("max constraint violation", _fmt(result.max_violation, ".3e")),
        ("status", str(result.status)),
        ("solve time", _fmt(result.solve_seconds, ".3f", " s")),
        ("compile time", _fmt(compile_seconds, ".3f", " s")),
    ]
    lines += text_table(rows, "ll") + _notes(result.status, result.baseline.projected)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Beyond LIBRA's model: timing model, exact time, chunk search, sensitivities
# --------------------------------------------------------------------------------------------


def format_extras(tm: Any, result: Any, exact_ns: float | None, choice: Any,
                  sens: dict | None) -> list[str]:
    """Lines printed after the main table for a run beyond LIBRA's model: the model, the
    chunk-count search, the exact simulated time and the marginal values."""
    lines = []
    if not tm.is_reference or choice is not None:
        words = f"model {tm.model}"
        if tm.model == "pipelined":
            words += f" (schedule {tm.schedule}, {tm.chunks} chunk(s)"
            if tm.latency_ns is not None:
                words += ", latency " + "/".join(f"{x:g}" for x in tm.latency_ns) + " ns per hop"
            words += ")"
        lines += ["", f"step-time model: {words}, training loop {tm.training_loop}"]
    if choice is not None:
        lines += ["", "chunk-count search (each count optimised):"]
        rows = [("chunks", "step time", "gap", "status")]
        for i, (k, r) in enumerate(zip(choice.chunks, choice.results)):
            rows.append((f"{k}{' *' if i == choice.best else ''}",
                         _fmt(r.step_time_ns, ",.1f", " ns"), _fmt(r.optimality_gap, ".2e"),
                         str(r.status)))
        lines += text_table(rows, "lrrl")
    if exact_ns is not None and json_num(result.step_time_ns) is not None:
        rel = exact_ns / result.step_time_ns - 1.0
        lines += ["", f"simulated step at the optimum: {exact_ns:,.1f} ns "
                      f"({rel:+.2e} relative to the convex model the solver minimises)"]
        gap = exact_gap(result, exact_ns)
        if gap is not None:
            lines.append(f"certified gap of the simulated step: {gap:.2e} (the convex model "
                         "is a lower bound of it, so its certified bound bounds the simulated "
                         "optimum too)")
    if sens is not None:
        lines.append("")
        if sens.get("status") == "unavailable":
            lines.append(f"sensitivities: unavailable ({sens.get('message')})")
        else:
            perf = sens.get("objective") == "perf"
            prefix = "d_step_ns_d_" if perf else "d_time_x_cost_d_"
            suffix = "" if perf else "*$"
            total = json_num(sens.get(prefix + "total_bw_gbps"))
            gift = sens.get(prefix + "gift_gbps")
            if total is not None:
                lines.append(f"marginal value of the total budget: {time_text(total, suffix)} "
                             "per GB/s")
            if gift is not None:
                lines.append("marginal value of one more GB/s on a dimension alone (per GB/s): "
                             + ", ".join(time_text(g, suffix) for g in gift))
            for key, unit in (("max_power_w", "W of network power cap"),
                              ("max_cost_usd", "$ of network cost budget")):
                v = json_num(sens.get(prefix + key))
                if v is not None:
                    lines.append(f"marginal value of one more {unit}: {time_text(v, suffix)}")
            if sens.get("status") == "kink":
                lines.append("  (some derivatives are one-sided: see result.json "
                             "sensitivities.one_sided)")
    return lines


def format_evaluation(data: dict, network: Any, workload: Any, tm: Any, top: int = 12) -> str:
    """The summary printed by ``python -m libra_jax.evaluate``: the design, its step time,
    cost and constraints, and the collectives that take the most time, per dimension."""
    name = getattr(workload, "name", "workload")
    lines = [f"Design evaluation: {name} on {network.notation} ({network.num_npus:,} NPUs, "
             f"{network.num_dims} dimensions)"]
    words = f"model {tm.model}"
    if tm.model == "pipelined":
        words += f", schedule {tm.schedule}, {tm.chunks} chunk(s)"
    lines += [f"step-time model: {words}, training loop {tm.training_loop}"]
    if not getattr(tm, "is_default_runtime", True):
        algo = "ring" if tm.algorithm is None else "/".join(tm.algorithm)
        lines += [f"runtime: {tm.inter_dim_scheduling} across dimensions, "
                  f"{tm.intra_dim_scheduling} within, {tm.collective_optimization}, "
                  f"algorithm {algo}, {tm.active_chunks_per_dim} active chunk(s) per "
                  "dimension (docs/runtime.md)"]
    lines += [""]
    tiers = network.cost_tiers or ("-",) * network.num_dims
    rows = [("dim", "block", "NPUs", "cost tier", "GB/s")]
    for d in range(network.num_dims):
        rows.append((str(d), network.blocks[d], str(network.npus[d]), tiers[d],
                     _fmt(data["bandwidth_gbps"][d], ".3f")))
    lines += text_table(rows, "rlrlr") + [""]

    def ns(x):
        return "-" if x is None else f"{x / 1e6:,.4f} ms ({x:,.1f} ns)"

    rows = [("step time", ns(data["step_time_ns"])),
            ("compute time", ns(data["compute_time_ns"])),
            ("exposed comm time", ns(data["comm_time_ns"])),
            ("network cost", "-" if data["network_cost_usd"] is None
             else f"${data['network_cost_usd']:,.2f}")]
    if data.get("network_power_w") is not None:
        rows += [("network power", _fmt(data["network_power_w"], ",.1f", " W")),
                 ("total power", _fmt(data["total_power_w"], ",.1f", " W")),
                 ("energy per step", _fmt(data["energy_per_step_j"], ",.4f", " J"))]
    if data["step_time_libra_ns"] is not None:
        rows.append(("LIBRA model step time", ns(data["step_time_libra_ns"])))
    c = data["constraints"]
    rows.append(("constraints", "met" if c["satisfied"] else "VIOLATED: " + "; ".join(c["violated"])))
    lines += text_table(rows, "ll") + [""]
    br = sorted(data["breakdown"], key=lambda b: -b["time_ns"])
    lines.append(f"collectives by time (top {min(top, len(br))} of {len(br)}; per-dimension busy "
                 "time = bandwidth + latency + reduction, ns):")
    head = ("layer", "phase", "collective", "bytes", "time ns", "fill/drain ns") + tuple(
        f"dim {d}" for d in range(network.num_dims))
    rows = [head]
    for b in br[:top]:
        rows.append((b["layer"], b["phase"], b["collective"], f"{b['size_bytes']:,.0f}",
                     f"{b['time_ns']:,.1f}", f"{b['fill_drain_ns']:,.1f}")
                    + tuple(f"{x:,.1f}" for x in b["busy_ns"]))
    lines += text_table(rows, "lllrrr" + "r" * network.num_dims)
    return "\n".join(lines)


# ------------------------------------------------------------------ mapping co-search


def format_cosearch_table(res: Any, top_k: int) -> str:
    """The co-search summary printed by the CLI."""
    ref = res.reference
    lines = [f"mapping co-search: {res.enumerated} placements enumerated, "
             f"{len(res.ranked)} solved in one batch ({res.solve_seconds:.2f} s), "
             f"{res.duplicates} duplicates, {sum(res.dropped.values())} dropped"]
    for reason, n in res.dropped.items():
        lines.append(f"  dropped {n}: {reason} (e.g. {res.dropped_examples[reason]})")
    lines.append("")
    header = ("rank", "mapping", "step time ms", "comm ms", "speed-up vs ref", "gap",
              "memory GB", "bandwidth GB/s")

    def row(rank, r):
        return (rank, r.description, f"{r.step_time_ns / 1e6:,.3f}",
                f"{r.comm_time_ns / 1e6:,.3f}",
                "-" if ref is None else f"{ref.step_time_ns / r.step_time_ns:.4f}x",
                _fmt(r.optimality_gap, ".1e"), f"{r.memory.total_bytes / 1e9:.1f}",
                "[" + ", ".join(f"{b:.1f}" for b in r.bandwidth_gbps) + "]")

    rows = [header] + [row(str(i + 1), r) for i, r in enumerate(res.ranked[:top_k])]
    if ref is not None:
        rows.append(row("ref", ref))
    lines += text_table(rows, "rlrrrrrl")
    if ref is not None:
        lines.append("(ref: the reference communicator's mapping, same model and constraints"
                     + ("" if ref.memory.fits else "; it does NOT fit in memory: "
                        + ref.memory.describe()) + ")")
    return "\n".join(lines)


def memory_line(est: Any) -> str:
    """The memory line of a generated transformer (`model.memory.MemoryEstimate`)."""
    return f"memory per NPU: {est.describe()}" + (
        "" if est.capacity_bytes is not None else " (workload.npu.memory_gb is null: not checked)")


def _runtime_text(rt: dict) -> str:
    algo = "ring" if rt["algorithm"] is None else ",".join(rt["algorithm"])
    return (f"{rt['inter_dim_scheduling']}/{rt['intra_dim_scheduling']}/"
            f"{rt['collective_optimization']}/[{algo}]/x{rt['active_chunks_per_dim']}")


def format_runtime(data: dict) -> str:
    """A runtime run's table (`report.runtime_result_dict`): the runtime and design, the
    simulated step against the certified bound and, for ``runtime=search``, the joint
    optimum against LIBRA alone, runtime alone and the default."""
    obj, unit = data["objective"], data["objective_unit"]
    net, wl = data["network"], data["workload"]

    def value(v):
        return time_text(v) if unit == "ns" else (
            time_text(v, "*$") if unit == "ns*$" else _fmt(v, ",.6g", " J"))

    search = data["runtime_search"]
    lines = [f"runtime co-design ({'runtime=search' if search else 'fixed runtime'}): "
             f"{wl['name']} on {net['notation']}",
             f"objective:   {obj} ({_OBJECTIVE_WORDS.get(obj, obj)})",
             f"runtime:     {_runtime_text(data['runtime'])} "
             "(inter/intra-dimension scheduling, collective optimization, algorithm per "
             "dimension, active chunks per dimension)"]
    rows = [["dim", "block", "bw GB/s", "model optimum", "equal split"]]
    for d, (b, n) in enumerate(zip(net["blocks"], net["npus"])):
        rows.append([str(d), f"{b}({n})", _fmt(data["bandwidth_gbps"][d], ",.3f"),
                     _fmt(data["model_optimum_gbps"][d], ",.3f"),
                     _fmt(data["equal_split"]["bandwidth_gbps"][d], ",.3f")])
    lines += [""] + text_table(rows, "lrrrr") + [""]
    gap = data["exact_optimality_gap"]
    lines += [f"step (simulated):      {time_text(data['step_time_ns'])}  (model's optimum "
              f"{time_text(data['model_optimum_step_time_ns'])}, equal split "
              f"{time_text(data['equal_split']['step_time_ns'])})",
              f"objective (simulated): {value(data['objective_value'])}",
              f"certified lower bound: {value(data['lower_bound'])}"
              + (" (least over the candidates)" if search else ""),
              "certified gap:         " + ("-" if gap is None else f"{100 * gap:.3f}%")
              + f"  ({data['designs_simulated']} designs simulated)"]
    if search:
        rows = [["", "runtime", "bw GB/s", "step", "cost $", "objective", "speed-up",
                 "gain"]]
        for r in search["table"]:
            rows.append([r["name"], _runtime_text(r["runtime"]),
                         ", ".join(_fmt(x, ",.1f") for x in r["bandwidth_gbps"]),
                         time_text(r["step_time_ns"]), _fmt(r["network_cost_usd"], ",.0f"),
                         value(r["objective_value"]), _fmt(r["speedup_vs_default"], ".3f", "x"),
                         _fmt(r["gain_vs_default"], ".3f", "x")])
        lines += ["", f"{len(search['candidates'])} candidate runtimes; speed-up and gain "
                  "against the default (LIBRA's optimum, default runtime):", ""]
        lines += text_table(rows, "llrrrrrr")
    return "\n".join(lines)
