"""The exact step time at given bandwidths and each collective's breakdown (what
``libra-evaluate`` reports and what the solver's rows bound): `collective_times_ns`,
`loop_step_time_ns`, `step_time_ns`. Split from `timing.py` (which re-exports every name).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from libra_jax.model import pipelined, runtime, step, step_partial
from libra_jax.model.collectives import traffic_bytes
from libra_jax.model.timing_rows import streams, unique_collectives
from libra_jax.model.timing_spec import HOPS, TimingModel, check_timing
from libra_jax.types import Collective, StepNode

def collective_times_ns(workload, network, tm: TimingModel, bandwidth_gbps):
    """Each layer-phase's collective at given bandwidths, by the exact model.

    For ``model=pipelined`` this is `pipelined.collective_time_ns` (the simulated chunk
    schedule), which the solver's convex rows bound from below for all-reduce under the
    ``pipelined`` schedule and for ``balanced`` (see `pipelined.py`); elsewhere the two
    agree. A phase whose collective is issued n times per step (`Workload.issues`, e.g.
    once per micro-batch) counts n collectives of size / n. Returns (times [L, 3] ns (0
    without a collective), breakdown: list of dicts per communicating layer-phase: layer,
    phase, collective, size_bytes, issues, and the step's totals time_ns, per-dimension
    bandwidth_ns / latency_ns / reduction_ns / busy_ns, and fill_drain_ns)."""
    check_timing(tm, network.num_dims)
    # the congestion-aware backend sends a stage's bytes twice through a Switch
    bw = (np.asarray(bandwidth_gbps, np.float64)
          / step.link_factor(network.block_codes, tm.network_backend))
    keys, index, issues = unique_collectives(workload)
    d = network.num_dims
    per_key = []
    lat = np.zeros(d) if tm.latency_ns is None else np.asarray(tm.latency_ns, np.float64)
    blocks = np.asarray(network.block_codes, np.int32)
    gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
    with jax.enable_x64(True):
        for code, size, comm in keys:
            comm = np.asarray(comm, np.int32)
            t = np.asarray(traffic_bytes(code, size, comm), np.float64)
            if tm.model == "libra" or code == Collective.SENDRECV:
                used = t > 0
                band = np.where(used, t / gib / np.where(used, bw, 1.0), 0.0)
                lat_d = np.where(used, HOPS[blocks] * lat + tm.endpoint_delay_ns, 0.0)
                busy = band + lat_d
                per_key.append(dict(time_ns=float(busy.max()), bandwidth_ns=band,
                                    latency_ns=lat_d, reduction_ns=np.zeros(d), busy_ns=busy,
                                    fill_drain_ns=0.0))
                continue
            if not tm.is_default_runtime:
                per_key.append(_runtime_breakdown(code, size, comm, network, tm,
                                                  bandwidth_gbps))
                continue
            chunks, run = streams(code, size, network, tm)  # as ASTRA-sim splits it
            out = jax.device_get(pipelined.collective_breakdown_ns(
                code, run, comm, blocks, jnp.asarray(bw), latency_ns=lat, chunks=chunks,
                endpoint_delay_ns=tm.endpoint_delay_ns, local_mem_bw_gbps=tm.local_mem_bw_gbps,
                gb_is_gib=tm.gb_is_gib, schedule=tm.schedule))
            per_key.append(dict(time_ns=float(out["total_ns"]),
                                bandwidth_ns=np.asarray(out["bandwidth_ns"]),
                                latency_ns=np.asarray(out["latency_ns"]),
                                reduction_ns=np.asarray(out["reduction_ns"]),
                                busy_ns=np.asarray(out["busy_ns"]),
                                fill_drain_ns=float(out["fill_drain_ns"])))
    times = np.zeros(index.shape)
    breakdown = []
    names = ("forward", "input_grad", "weight_grad")
    for l, p in zip(*np.nonzero(index >= 0)):
        k, n = per_key[index[l, p]], int(issues[l, p])
        times[l, p] = n * k["time_ns"]
        breakdown.append(dict(
            layer=workload.layer_names[l], phase=names[p],
            collective=Collective(keys[index[l, p]][0]).name,
            size_bytes=n * keys[index[l, p]][1], issues=n, time_ns=n * k["time_ns"],
            bandwidth_ns=(n * k["bandwidth_ns"]).tolist(),
            latency_ns=(n * k["latency_ns"]).tolist(),
            reduction_ns=(n * k["reduction_ns"]).tolist(), busy_ns=(n * k["busy_ns"]).tolist(),
            fill_drain_ns=n * k["fill_drain_ns"]))
    return times, breakdown


def _runtime_breakdown(code, size, comm, network, tm: TimingModel, bandwidth_gbps) -> dict:
    """One collective alone under a runtime other than ASTRA-sim's default: its time
    simulated (`step.simulate_step` on a one-node step) and where it goes, summed over its
    streams' stages (`runtime.collective_streams`)."""
    involved = tuple(bool(g > 1) for g in comm)
    node = StepNode(name="c", kind="comm", collective=int(code), size_bytes=float(size),
                    involved=involved, group=tuple(int(g) if g > 1 else 1 for g in comm))
    bw = np.asarray(bandwidth_gbps, np.float64)
    timed = step.simulate_step([node], network.block_codes, network.npus, bw, tm)
    d = network.num_dims
    factor = step.link_factor(network.block_codes, tm.network_backend)
    band, lat, red = np.zeros(d), np.zeros(d), np.zeros(d)
    for stages in runtime.collective_streams(int(code), float(size), node.group,
                                             network.block_codes, tm, bw,
                                             runtime.RuntimeState(),
                                             npus_per_dim=network.npus):
        for st in stages:
            band[st.dim] += st.coef * factor[st.dim] / bw[st.dim] if st.coef > 0 else 0.0
            lat[st.dim] += st.fixed - st.red
            red[st.dim] += st.red
    busy = np.asarray(timed.busy_ns, np.float64)
    return dict(time_ns=float(timed.time_ns), bandwidth_ns=band, latency_ns=lat,
                reduction_ns=red, busy_ns=busy, fill_drain_ns=float(timed.time_ns - busy.max()))


def loop_step_time_ns(compute_ns, comm_ns, training_loop: str) -> float:
    """The training loop's step time (ns) from per layer-phase compute and collective times
    [L, 3] (ns), by direct simulation (the rows of `model_rows` encode the same)."""
    c, t = np.asarray(compute_ns, np.float64), np.asarray(comm_ns, np.float64)
    if training_loop == "no_overlap":
        return float(c.sum() + t.sum())
    both = max if training_loop == "full_overlap" else (lambda a, b: a + b)
    now = sum(both(c[l, 0], t[l, 0]) for l in range(c.shape[0]))
    queue = -np.inf
    for l in range(c.shape[0] - 1, -1, -1):
        now += both(c[l, 1], t[l, 1]) + c[l, 2]
        if t[l, 2] > 0:
            queue = max(queue, now) + t[l, 2]
    return float(max(now, queue))


def step_time_ns(workload, network, tm: TimingModel, bandwidth_gbps) -> float:
    """The step time (ns) at given bandwidths by the exact model: for ``model=pipelined``
    the step simulated as ASTRA-sim's system layer runs it (`step.simulate_step`: every
    collective chunked over per-dimension queues, collectives in flight together sharing
    dimensions, the configured link model; a step with a collective over part of a
    dimension as its Chakra export runs, each such group a ``pg_name`` flat ring:
    `step_partial.simulate_graph_ns`); for ``model=libra`` the training loop over LIBRA's
    collective times (`loop_step_time_ns`)."""
    check_timing(tm, network.num_dims)
    if tm.model == "libra":
        coll_ns, _ = collective_times_ns(workload, network, tm, bandwidth_gbps)
        return loop_step_time_ns(workload.compute_ns, coll_ns, tm.training_loop)
    nodes = step.step_graph(workload, tm.training_loop)
    return step_partial.simulate_graph_ns(nodes, network.block_codes, network.npus,
                                          bandwidth_gbps, tm)
