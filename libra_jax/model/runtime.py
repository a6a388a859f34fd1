"""ASTRA-sim's runtime beyond its defaults, as its system layer runs it
(``docs/runtime.md``): the order in which each chunk visits the dimensions
(``inter-dimension-scheduling``), the all-reduce's hierarchy (``collective-optimization``),
each dimension's algorithm, and the streams of one collective built from them.

`collective_streams` replays ``Sys::generate_collective`` (astra-sim/system/Sys.cc) for one
collective: the chunks (``determine_chunk_size``; Themis-flex sizes its own), each chunk's
dimension order, and each chunk's phases with their queue half, bytes, fixed time, ring
messages and local reductions: the stages `step.simulate_step` replays. Orders:

* ``ascending``: dimensions 0..D-1 (an all-gather D-1..0);
* ``round_robin``: that order rotated left by a counter that every chunk of every collective
  advances (mod D, all dimensions of the network);
* ``themis`` (``offlineGreedy``, `OfflineGreedy::get_chunk_scheduling`): per chunk, the
  dimensions sorted by the load the collective's earlier chunks put on them (least loaded
  first; an all-gather most loaded first), the load of a dimension being the chunk's
  MiB x (n-1)/n (reduce-scatter; all-gather (n-1)) over its link bandwidth relative to
  dimension 0. When the loads differ by less than 1/16 of a chunk the chunk goes in
  ascending order. The loads restart with every collective issued at a new tick.
  All-to-all keeps the ascending order. An all-reduce under Themis is a reduce-scatter up
  every dimension and an all-gather back down (no all-reduce phase on the last one);
* ``themis_flex`` (``offlineGreedyFlex``): as ``themis``, but a chunk's size is the load
  difference of the first and last dimension in bytes (at least the recommended chunk;
  below it, a recommended chunk in ascending order), so the chunk count varies.

``collective-optimization`` ``baseline``: an all-reduce is a full all-reduce on every
involved dimension in turn (the chunk does not shrink). ``localBWAware`` (default):
reduce-scatter up to the last dimension, all-reduce there, all-gather back down.

Every name here is host numpy; units ns, bytes, GB/s (bytes / GB/s = ns).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import NamedTuple, Sequence

import numpy as np

from libra_jax.inputs.astrasim import links_sharing
from libra_jax.model import algorithms, pipelined
from libra_jax.types import Block, Collective

RS, AG, AR, A2A = (int(Collective.REDUCESCATTER), int(Collective.ALLGATHER),
                   int(Collective.ALLREDUCE), int(Collective.ALLTOALL))
_MIB = 1048576.0


class Stage(NamedTuple):
    """One phase of a stream on one dimension (what `step.py` queues and times).

    ``dim``; ``coef`` bytes sent per NPU over the phase (x 1e9/2^30 under ``gb_is_gib``), so
    its bandwidth time is ``coef / bw`` ns; ``fixed`` ns (hop latency, endpoint delays, local
    reductions); ``kind`` the queue half ("any", "first", "last"); ``steps`` ring messages
    sent one after another; ``red`` the local-reduction part of ``fixed``; ``com`` the
    phase's collective code (RS, AG, AR, A2A); ``size`` max(bytes in, bytes out) per NPU in
    ASTRA-sim's integer bytes (a reduce-scatter floors; smallest-first scheduling sorts by
    it); ``exact`` None for a ring phase (its messages
    are replayed by the link model), else the phase's time alone at the bandwidths on the
    run's backend (`algorithms.phase_time_ns`), ns."""

    dim: int
    coef: float
    fixed: float
    kind: str
    steps: float
    red: float
    com: int
    size: float
    exact: float | None = None


@dataclasses.dataclass
class RuntimeState:
    """What ASTRA-sim's system layer carries from one collective to the next (every NPU
    alike): the round-robin counter and Themis's per-dimension loads (``[dim, load]`` in the
    order its last sort left them) with the tick of the last collective it scheduled."""

    rr: int = 0
    loads: list | None = None
    tick: float = 0.0
    #: the trace replay's rule where it cannot follow the event order (per-rank graphs,
    #: sends, pg_name groups): once a collective has ended, NPU 0 no longer issues first
    #: (`collective_streams` with ``npu0_first=None``); `step.simulate_step` passes
    #: ``npu0_first`` from the event order instead
    ended: bool = False
    #: the tick after which NPU 0's restart of the loads takes effect (that rule)
    restart_after: float | None = None


def ring_phase(com: int, n: int, size: float, block: int, lat: float, ep: float, lmb, unit):
    """A ring phase on a dimension of ``n`` NPUs entering with ``size`` bytes per NPU
    (``Ring``'s constructor): (coef, fixed, steps, red, final size).

    Messages: reduce-scatter / all-reduce / all-to-all ``size / n``, all-gather ``size``;
    steps n-1 (RS, AG), 2(n-1) (AR), n(n-1)/2 (A2A); each step costs ``hops x lat + ep``
    (2 hops through a Switch) and the phase one ``ep`` more (steps + 1 memory-bus bundles,
    ``Ring.cc``); the first n-1 steps of RS / AR reduce their message (3 x msg / lmb).
    Final size: RS size / n, AG size x n, AR and A2A size."""
    nm1 = n - 1.0
    msg = size if com == AG else size / n
    steps = {AR: 2 * nm1, RS: nm1, AG: nm1, A2A: n * nm1 / 2}[com]
    hops = 2.0 if block == Block.SWITCH else 1.0
    red = 3.0 * nm1 * msg / lmb if (lmb is not None and com in (RS, AR)) else 0.0
    final = {RS: size / n, AG: size * n, AR: size, A2A: size}[com]
    return steps * msg * unit, steps * (hops * lat + ep) + ep + red, steps, red, final


def phase_algorithm(algorithm: str, collective: int) -> str:
    """The algorithm a dimension runs for a collective, as the export writes the
    ``*-implementation`` lists: ``double_binary_tree`` in the all-reduce list only, ring in
    the others; ``halving_doubling`` has no all-to-all (ring there)."""
    if (algorithm == "double_binary_tree" and collective != AR) or (
            algorithm == "halving_doubling" and collective == A2A):
        return "ring"
    return algorithm


def phase_type(algorithm: str, com: int) -> int:
    """The phase a dimension runs: ASTRA-sim's tree (``DoubleBinaryTreeAllReduce``) is an
    all-reduce of the bytes it is given whatever phase the collective asked for (a
    localBWAware all-reduce's reduce-scatter and all-gather phases included)."""
    return AR if algorithm == "double_binary_tree" else com


def phase_work(algorithm: str, com: int, n: int, size: float, block: int, lat: float,
               ep: float, lmb, unit, share: int = 1, dim: int = 0):
    """A phase of any algorithm in `ring_phase`'s form, with the bytes coefficient per NPU
    bandwidth: ``ring`` is `ring_phase`, the others `algorithms.phase_stage` (unaware), at
    the dimension's link bandwidth = per-NPU / ``share`` (`link_share` of the algorithm the
    dimension is configured with: a ring phase on a tree dimension runs on the tree's
    links)."""
    if algorithm == "ring":
        coef, fixed, steps, red, final = ring_phase(com, n, size, block, lat, ep, lmb, unit)
        return coef * share, fixed, steps, red, final
    st = algorithms.phase_stage(algorithm, com, n, block, size, lat, ep, lmb, unit != 1.0,
                                "unaware", dim=dim)
    return st.bytes_coef * share, st.fixed_ns, st.steps, st.reduction_ns, st.out_bytes


# ------------------------------------------------------------------------ orders
def _bytes(mib: float, recommended: int) -> int:
    """A load gap (MiB) in whole bytes; a gap with a dimension given no bandwidth is not a
    number of bytes (ASTRA-sim's cast of it is undefined): the recommended chunk then."""
    return int(mib * _MIB) if math.isfinite(mib) else recommended


def _themis_order(state: RuntimeState, flex: bool, com: int, involved, npus, link_bw,
                  remaining: int, recommended: int):
    """`OfflineGreedy::get_chunk_scheduling` of Sys 0: (order, bytes this chunk takes).
    ``state.loads`` is updated in place; ASTRA-sim's integer arithmetic is kept (sizes are
    uint64: chunk sizes divide with truncation), as is its update of the loads in the
    ascending fallback (by position in its vector)."""
    num = len(npus)
    loads = state.loads
    ct = RS if com == AR else com
    loads.sort(key=lambda x: x[1])  # std::sort of <= 16 entries: insertion sort (stable)
    if ct == AG:
        loads.reverse()
    # ASTRA-sim's doubles: a dimension given no bandwidth has an infinite ratio (dimension 0
    # without any) or loads that grow without bound (its own), so it goes last
    ratio = [link_bw[d] / link_bw[0] if link_bw[0] > 0 else (math.inf if link_bw[d] > 0
                                                              else 0.0) for d in range(num)]

    def inv(d):
        return bool(involved[d]) and npus[d] != 1

    def add(entry, dim, chunk):
        share = (npus[dim] - 1) / npus[dim] if ct == RS else npus[dim] - 1
        entry[1] += ((chunk / _MIB) * share) / ratio[dim] if ratio[dim] > 0 else math.inf
        return chunk // npus[dim] if ct == RS else chunk * npus[dim]

    chunk = recommended
    taken = None
    if not flex:
        taken = min(remaining, chunk)
    result = []
    done = False
    for ptr, entry in enumerate(list(loads)):
        dim = entry[0]
        if not inv(dim):
            result.append(dim)
            continue
        if not done:
            done = True
            if ct == RS:
                diff = abs(loads[-1][1] - entry[1])
                size = _bytes(diff * ratio[dim] / ((npus[dim] - 1) / npus[dim]), recommended)
            else:
                last = len(loads) - 1
                while not inv(loads[last][0]):
                    last -= 1
                diff = abs(loads[last][1] - entry[1])
                ld = loads[last][0]
                size = _bytes(diff * ratio[ld] / (npus[ld] - 1), recommended)
                last -= 1
                while ptr <= last:
                    if inv(loads[last][0]):
                        size //= npus[loads[last][0]]
                    last -= 1
            threshold = recommended if flex else recommended // 16
            if size < threshold:
                if flex:
                    taken = min(remaining, recommended)
                    chunk = taken
                loads.sort(key=lambda x: x[0])
                if ct == AG:
                    loads.reverse()
                for pos in range(num):  # by position, as ASTRA-sim does
                    if inv(pos):
                        chunk = add(loads[pos], pos, chunk)
                return list(range(num)), taken
            if flex:
                chunk = size
                taken = min(remaining, size)
        result.append(dim)
        chunk = add(entry, dim, chunk)
    return result, taken


def _phases(com: int, order, involved, npus, tm):
    """(collective code, dim, queue half) of one chunk in ``order`` (generate_collective)."""
    dims = [d for d in order[:len(npus)] if involved[d] and npus[d] != 1]
    if not dims:
        return []
    if com != AR or tm.collective_optimization == "baseline":
        return [(com, d, "any") for d in dims]
    if tm.themis_scheduling:
        return [(RS, d, "first") for d in dims] + [(AG, d, "last") for d in reversed(dims)]
    return ([(RS, d, "first") for d in dims[:-1]] + [(AR, dims[-1], "first")]
            + [(AG, d, "last") for d in reversed(dims[:-1])])


class _Setup(NamedTuple):
    npus: list  # [D] NPUs of each dimension in the group
    involved: list  # [D] bool
    lat: np.ndarray  # [D] ns per hop
    unit: float  # bytes x this = the bytes coefficient (1e9 / 2^30 under gb_is_gib)
    algos: list  # [D] the algorithm each dimension runs for this collective
    share: list  # [D] `link_share` of the algorithm each dimension is configured with
    size: int  # bytes to split (Sys::determine_chunk_size may raise it)
    chunk: int  # bytes of a recommended chunk


def _setup(collective: int, size_bytes: float, group, tm, npus_per_dim=None) -> _Setup:
    """What `collective_streams` and `bound_work` both start from: the group, the
    latencies, the algorithms and link shares, and the chunks (``Sys::determine_chunk_size``:
    ``size // chunks`` bytes, at least the group's NPUs, all-gather excepted)."""
    npus = [int(g) for g in group]
    num = len(npus)
    total = int(np.prod([max(g, 1) for g in npus]))
    configured = tm.algorithm or ("ring",) * num
    net = [int(x) for x in (group if npus_per_dim is None else npus_per_dim)]
    size = int(round(size_bytes))
    chunk = size // int(tm.chunks)
    if collective != AG and total > chunk:
        chunk, size = total, int(tm.chunks) * total
    return _Setup(npus, [g > 1 for g in npus],
                  np.zeros(num) if tm.latency_ns is None
                  else np.asarray(tm.latency_ns, np.float64),
                  1.0 / pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0,
                  [phase_algorithm(a, collective) for a in configured],
                  [link_share(a, n) for a, n in zip(configured, net)], size, max(chunk, 1))


def npu0_issues(state: RuntimeState, now: float) -> None:
    """NPU 0 calls ``Sys::generate_collective`` at ``now``: under Themis it restarts the
    loads when the tick is new (``last_scheduled_collective``)."""
    if state.loads is not None and now != state.tick:
        state.loads = [[d, 0.0] for d in range(len(state.loads))]
    state.tick = now


def collective_streams(collective: int, size_bytes: float, group, blocks, tm, bw_gbps,
                       state: RuntimeState, now: float = 0.0, exact_cache: dict | None = None,
                       npus_per_dim=None, npu0_first: bool | None = None):
    """The streams of one collective as ``Sys::generate_collective`` builds them under the
    runtime of ``tm`` (module docstring): a list with one list of `Stage` per stream.

    Args:
      collective: `Collective` code (not SENDRECV). size_bytes: the ET's per-NPU size.
      group: [D] NPUs of each dimension in the group (1 = not involved; a whole dimension).
      blocks: [D] `Block` codes. tm: a `timing.TimingModel`.
      bw_gbps: [D] per-NPU GB/s (Themis orders by the link bandwidths written for them).
      state: the `RuntimeState` carried between collectives (updated).
      now: the issue time, ns (Themis restarts its loads at a new tick).
      exact_cache: a dict kept between calls of one simulation (the exact phase times of
        the algorithms other than ring).
      npus_per_dim: [D] the network's NPUs per dimension (the links written for a dimension
        the collective does not use, which Themis's loads divide by); default ``group``.
      npu0_first: Themis: whether NPU 0 is the first NPU to issue it within its tick (it
        then restarts the loads at a new tick before scheduling; otherwise the chunks are
        scheduled with the loads as they are, and the caller calls `npu0_issues` when NPU 0
        issues); None: the trace replay's rule (`RuntimeState.ended`).
    """
    exact_cache = {} if exact_cache is None else exact_cache
    npus, involved, lat, unit, algos, share, size, chunk = _setup(collective, size_bytes,
                                                                   group, tm, npus_per_dim)
    num = len(npus)
    link = [float(bw_gbps[d]) / share[d] for d in range(num)]  # the YAML's link bandwidth
    inter = tm.inter_dim_scheduling
    themis = tm.themis_scheduling and collective != A2A
    if tm.themis_scheduling:
        if state.loads is None:
            state.loads = [[d, 0.0] for d in range(num)]
        if npu0_first is None:
            if state.restart_after is not None and now != state.restart_after:
                state.loads, state.restart_after = [[d, 0.0] for d in range(num)], None
            if not state.ended and now != state.tick:  # NPU 0 first: it restarts them
                state.loads = [[d, 0.0] for d in range(num)]
            elif state.ended and now != state.tick:  # another NPU schedules it with the
                state.restart_after = now  # loads as they are; NPU 0 restarts them later
            state.tick = now
        elif npu0_first:
            npu0_issues(state, now)
    streams = []
    while size > 0:
        order = list(range(num))
        if collective == AG:
            order.reverse()
        if inter == "round_robin":
            order = order[state.rr:] + order[:state.rr]
            state.rr = (state.rr + 1) % num
        if themis:
            order, this = _themis_order(state, inter == "themis_flex", collective, involved,
                                        npus, link, size, chunk)
            size -= this
        else:  # every stream carries a whole chunk, the last one too
            this, size = chunk, max(size - chunk, 0)
        stages, remain, whole = [], float(this), int(this)
        for com, d, kind in _phases(collective, order, involved, npus, tm):
            com = phase_type(algos[d], com)
            # ASTRA-sim's bytes are integers: a reduce-scatter floors (what smallest-first
            # compares: an all-gather back up can come out a few bytes short of its input)
            out = whole // npus[d] if com == RS else (whole * npus[d] if com == AG else whole)
            args = (com, npus[d], remain, int(blocks[d]), float(lat[d]),
                    float(tm.endpoint_delay_ns), tm.local_mem_bw_gbps)
            coef, fixed, steps, red, final = phase_work(algos[d], *args, unit, share[d], d)
            exact = None
            if algos[d] != "ring":
                key = (algos[d], *args, link[d], tm.gb_is_gib, tm.network_backend)
                if key not in exact_cache:
                    exact_cache[key] = algorithms.phase_time_ns(
                        algos[d], com, npus[d], int(blocks[d]), remain, link[d], args[4],
                        args[5], args[6], tm.gb_is_gib, tm.network_backend, dim=d)
                exact = exact_cache[key]
            stages.append(Stage(d, coef, fixed, kind, steps, red, com, float(max(whole, out)),
                                exact))
            remain, whole = final, out
        if not stages:
            break
        streams.append(stages)
    return streams


def link_share(algorithm: str, npus: int) -> int:
    """How many links carry one NPU's traffic at once on a dimension configured with
    ``algorithm``: the export's rule (`astrasim.links_sharing`: link bandwidth = per-NPU
    bandwidth / this), so the model and the exported network agree."""
    return max(links_sharing(algorithm, npus), 1)


# --------------------------------------------------------------------- the bound
def _orders(tm, collective: int, involved) -> list[list[int]]:
    """The dimension orders a chunk may take: ascending's one, every rotation under round
    robin (the counter's start depends on earlier collectives), every order of the involved
    dimensions under Themis (it depends on the bandwidths)."""
    num = len(involved)
    base = list(range(num))
    if collective == AG:
        base.reverse()
    if tm.themis_scheduling and collective != A2A:
        dims = [d for d in range(num) if involved[d]]
        rest = [d for d in range(num) if not involved[d]]
        return [list(p) + rest for p in itertools.permutations(dims)]
    if tm.inter_dim_scheduling == "round_robin":
        return [base[r:] + base[:r] for r in range(num)]
    return [base]


def bound_work(collective: int, size_bytes: float, group, blocks, tm):
    """A convex lower bound of one collective under the runtime of ``tm``, whatever order
    its chunks take: (dim_const [D] ns, dim_coef [D] bytes, route_const ns, route_coef [D]
    bytes), every value affine in 1 / bw:

    * dimension d is busy at least ``dim_const[d] + dim_coef[d] / bw[d]`` with the
      collective's stages (all chunks; each chunk's least work on d over its possible orders,
      the fixed and the bytes part each at their least);
    * one chunk takes at least ``route_const + sum_d route_coef[d] / bw[d]`` (its stages run
      one after another; each part at its least over the orders).

    Themis-flex sizes its own chunks (at least the recommended one, so at most ``chunks`` of
    them): its bytes are counted for the whole size and its per-chunk latency once. The
    congestion-aware backend's Switch factor and the concurrency of a dimension's queues are
    the caller's (`timing_rows`)."""
    npus, involved, lat, unit, algos, share, size, chunk = _setup(collective, size_bytes,
                                                                   group, tm)
    num = len(npus)
    themis = tm.themis_scheduling and collective != A2A
    # streams of a whole chunk each (Themis: the last one carries the rest)
    scale = size / chunk if themis else -(-size // chunk)
    per_order = []
    for order in _orders(tm, collective, involved):
        lat_d, red_d, coef_d = np.zeros(num), np.zeros(num), np.zeros(num)
        remain = float(chunk)
        for com, d, _ in _phases(collective, order, involved, npus, tm):
            com = phase_type(algos[d], com)
            coef, fixed, _, red, final = phase_work(algos[d], com, npus[d], remain,
                                                    int(blocks[d]), float(lat[d]),
                                                    float(tm.endpoint_delay_ns),
                                                    tm.local_mem_bw_gbps, unit, share[d], d)
            lat_d[d] += fixed - red
            red_d[d] += red
            coef_d[d] += coef
            remain = final
        per_order.append((lat_d, red_d, coef_d))
    lat_d, red_d, coef_d = (np.min([o[i] for o in per_order], axis=0) for i in range(3))
    route_const = min(float(o[0].sum() + o[1].sum()) for o in per_order)
    route_coef = coef_d.copy()
    # all chunks (bytes and reductions are linear in the chunk's size; its latency is not)
    latency_chunks = (1 if tm.inter_dim_scheduling == "themis_flex" and themis
                      else -(-size // chunk))
    dim_const = latency_chunks * lat_d + scale * red_d
    dim_coef = scale * coef_d
    return dim_const, dim_coef, route_const, route_coef
