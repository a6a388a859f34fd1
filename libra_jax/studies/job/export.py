"""A design written for ASTRA-sim 2.x (``export_astrasim=true``): the network YAML and system
JSON, and the step as per-NPU Chakra execution traces with the simulator's command line."""

from __future__ import annotations

import logging
import pathlib

from libra_jax.inputs import astrasim, chakra, chakra_export
from libra_jax.model import step, step_partial, step_trace
from libra_jax.model.timing import TimingModel
from libra_jax.studies.job.config import LibraConfig
from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)


def _design_files(c: LibraConfig, out: pathlib.Path, network, bandwidth_gbps,
                  tm: TimingModel) -> None:
    """The network YAML and system JSON in ``out`` (``<run dir>/astrasim/``)."""
    delay = tm.endpoint_delay_ns
    if delay != int(delay):
        raise LibraInputError(
            f"system.endpoint_delay_ns = {show(delay)}: ASTRA-sim counts whole ns; give an integer "
            "to export the design (export_astrasim=true).")
    if delay == 0:
        log.warning("system.endpoint_delay_ns = 0: ASTRA-sim's analytical event queue aborts on "
                    "a zero endpoint-delay (assertion 'event time > current time', EventQueue.cpp "
                    "l. 33); rerun with system.endpoint_delay_ns=1 to export a step it can run.")
    yml, js = astrasim.export_design(
        network, bandwidth_gbps, out_dir=out, latency_ns=tm.latency_ns,
        chunks=tm.chunks, endpoint_delay_ns=int(delay),
        local_mem_bw_gbps=1e6 if tm.local_mem_bw_gbps is None else tm.local_mem_bw_gbps,
        # with system.gb_is_gib the design is already in ASTRA-sim's GB (2^30 bytes)
        gb_is_gib=not tm.gb_is_gib, scheduling_policy=tm.queue_policy.upper(),
        # the runtime (docs/runtime.md); its defaults write the stock files unchanged
        algorithm="ring" if tm.algorithm is None else list(tm.algorithm),
        inter_dim_scheduling=tm.inter_dim_scheduling,
        intra_dim_scheduling=tm.intra_dim_scheduling,
        collective_optimization=tm.collective_optimization,
        active_chunks_per_dim=tm.active_chunks_per_dim)
    log.info("ASTRA-sim design: %s and %s", yml, js)


def _run_script(out: pathlib.Path, tm: TimingModel, comm_groups: str = "empty") -> None:
    """``<out>/run.sh``: the simulator's command line on the files of ``out``."""
    backend = "Aware" if tm.network_backend == "aware" else "Unaware"
    inflight = tm.max_inflight_collectives or 1024
    (out / "run.sh").write_text(
        "#!/bin/sh\n# ASTRA-sim 2.x (analytical backend) on the step libra_jax timed; "
        "ASTRASIM_MAX_INFLIGHT_COMM needs the local patch of\n# "
        "shared/reference/astrasim_workload (stock ASTRA-sim runs one collective per NPU).\n"
        'echo \'{"memory-type": "NO_MEMORY_EXPANSION"}\' > "$(dirname "$0")/memory.json"\n'
        f"ASTRASIM_MAX_INFLIGHT_COMM={inflight} "
        f"${{ASTRA_SIM_BIN:-AstraSim_Analytical_Congestion_{backend}}} "
        f'--workload-configuration="$(dirname "$0")/et/wl" --comm-group-configuration={comm_groups} '
        '--system-configuration="$(dirname "$0")/system.json" '
        '--remote-memory-configuration="$(dirname "$0")/memory.json" '
        '--network-configuration="$(dirname "$0")/network.yml" '
        f"--num-queues-per-dim={tm.queues_per_dim}\n")


def export_astrasim(c: LibraConfig, output_dir: pathlib.Path, network, bandwidth_gbps,
                    tm: TimingModel, workload=None, folder: str = "astrasim") -> None:
    """With ``export_astrasim=true``: the design as ASTRA-sim 2.x network YAML + system JSON
    in ``<run dir>/astrasim/`` (`libra_jax.inputs.astrasim`; link GB/s written in 2^30
    bytes) and, given the workload, the step as per-NPU Chakra execution traces
    ``astrasim/et/wl.<rank>.et`` (`libra_jax.inputs.chakra`; the configured training
    loop's dependencies, compute rounded to whole microseconds) with the simulator's
    command line in ``astrasim/run.sh``. ``folder``: another folder of the run directory
    (a serving run writes each phase to ``astrasim/<phase>``)."""
    if not c.export_astrasim:
        return
    out = output_dir / folder
    _design_files(c, out, network, bandwidth_gbps, tm)
    if workload is None:
        return
    nodes = step.step_graph(workload, tm.training_loop)
    if step_partial.has_partial_groups(nodes, network.npus):
        # a group over part of a dimension: only pg_name says it
        _export_partial_groups(nodes, network, out, tm)
        return
    paths = chakra.write_traces(nodes, network.npus, out / "et")
    rounding = chakra.rounding_report(nodes)
    _run_script(out, tm)
    log.info("Chakra ETs: %d files in %s (compute rounded to whole us: %+.0f ns in all, "
             "%d node(s) written as 0 us); command: %s", len(paths), out / "et",
             rounding.total_change_ns, len(rounding.zero_us_nodes), out / "run.sh")


def _export_partial_groups(nodes, network, out: pathlib.Path, tm: TimingModel) -> None:
    """The step with its groups over part of a dimension given as ``pg_name`` groups (one
    per block of NPUs, `step_trace.trace_from_nodes`), with ``wl.comm_groups.json``: the
    only way a Chakra trace says such a group. ASTRA-sim runs each as a flat ring on
    dimension 0's queue, which is how ``model=pipelined`` timed it
    (`model.step_partial`)."""
    trace = step_trace.trace_from_nodes(nodes, network.npus, partial_as_pg=True)
    files = chakra_export.write_trace_set(trace, out / "et", name="wl")
    rings = sum(1 for g in trace.groups if g.ranks is not None)
    _run_script(out, tm, '"$(dirname "$0")/et/wl.comm_groups.json"')
    r = files.rounding
    log.info(
        "Chakra ETs: %d files in %s with %d pg_name groups (wl.comm_groups.json) for the "
        "collectives over part of a dimension (one flat ring over each group's NPUs on "
        "dimension 0's queue, as ASTRA-sim runs them and as libra_jax timed them); compute "
        "rounded to whole us: %+.0f ns over all ranks' files, %d node(s) written as 0 us; "
        "command: %s",
        len(files.et), out / "et", rings, r.total_change_ns, len(r.zero_us_nodes),
        out / "run.sh")


def export_astrasim_trace(c: LibraConfig, output_dir: pathlib.Path, inputs,
                          bandwidth_gbps) -> None:
    """With ``export_astrasim=true`` on an imported trace set (`studies.job.trace`): the
    design's network YAML and system JSON, the trace set written back as
    ``astrasim/et/wl.<rank>.et`` (with ``wl.comm_groups.json`` for its ``pg_name`` groups;
    `libra_jax.inputs.chakra_export`) and the command in ``astrasim/run.sh``."""
    if not c.export_astrasim:
        return
    tm = inputs.timing_model
    out = output_dir / "astrasim"
    _design_files(c, out, inputs.network, bandwidth_gbps, tm)
    paths = chakra_export.write_trace_set(inputs.trace, out / "et", name="wl")
    groups = out / "et" / "wl.comm_groups.json"
    _run_script(out, tm, '"$(dirname "$0")/et/wl.comm_groups.json"' if groups.exists()
                else "empty")
    log.info("Chakra ETs: %d files in %s; command: %s", len(paths.et), out / "et",
             out / "run.sh")
