"""Per-dimension collective algorithms as ASTRA-sim 2.x runs them (``docs/algorithms.md``):
``ring``, ``direct`` (class ``AllToAll``, with its window) and ``halving_doubling``, for one
dimension's phase (reduce-scatter, all-gather, all-reduce, all-to-all), on both analytical
backends; ``double_binary_tree`` (``DoubleBinaryTreeAllReduce.cc``) for an all-reduce phase
of one chunk.

* `phase_stage` gives a phase in the stage form `step.py` consumes: the congestion-unaware
  time is ``bytes_coef / bw_gbps + fixed_ns`` (``fixed_ns`` includes the reductions), with
  ``steps`` sequential rounds and ``parallel`` messages in flight per round.
* `phase_time_ns` is the exact time of the phase at a bandwidth, on either backend: an event
  replay of ASTRA-sim's algorithm state machine (``Ring.cc``, ``AllToAll.cc``,
  ``HalvingDoubling.cc``) on every NPU of the group, with the congestion-aware backend's
  FIFO links (store and forward, ``congestion_aware/Link.cpp``) or the unaware backend's
  ``bytes / bw + hops x latency`` per message (concurrent sends never share bandwidth).

Host numpy / plain floats. Units: bytes, ns, GB/s (1 GB = 2^30 B when ``gb_is_gib``, as the
network YAML's link bandwidth; ``local_mem_bw_gbps`` uses 1 GB = 1e9 B).
"""

from __future__ import annotations

import heapq
import math
import numbers
from typing import NamedTuple

from libra_jax.model.algorithm_tree import (
    TreeCopies,
    TreeGroup,
    TreeLinks,
    copy_links,
    hops,
    peer_links,
    route,
    tree_links,
    tree_replay,
    tree_stage,
    tree_time_ns,
)
from libra_jax.model.pipelined_work import GIB_PER_GB
from libra_jax.types import Block, Collective, LibraInputError, show

ALGORITHMS = ("ring", "direct", "halving_doubling", "double_binary_tree")
#: the ASTRA-sim names (``all-reduce-implementation`` etc.) of each algorithm; the ``one*``
#: variants time alike on a one-dimension network (they flatten a multi-dim one to a ring).
ASTRA_NAMES = {"ring": "ring", "direct": "direct", "halving_doubling": "halvingDoubling",
               "double_binary_tree": "doubleBinaryTree"}
PHASES = (Collective.REDUCESCATTER, Collective.ALLGATHER, Collective.ALLREDUCE,
          Collective.ALLTOALL)
BACKENDS = ("unaware", "aware")


class PhaseStage(NamedTuple):
    """One dimension's phase. Unaware time = ``bytes_coef / bw_gbps + fixed_ns`` when
    ``affine`` (else use `phase_time_ns`)."""

    bytes_coef: float  # bytes x unit: the time's 1/bw coefficient (ns x GB/s)
    fixed_ns: float  # latencies + endpoint delays + reductions
    steps: float  # sequential rounds of messages
    parallel: int  # messages each NPU has in flight per round (ring, HD: 1)
    reduction_ns: float  # the reductions' part of fixed_ns
    out_bytes: float  # bytes per NPU the phase hands to the next dimension
    affine: bool  # the unaware time is exactly bytes_coef / bw + fixed_ns


# ------------------------------------------------------------------------------ checks
def check_algorithm(algorithm, phase, n, block, dim=0):
    """Raise `LibraInputError` (naming ``system.algorithm[dim]``) where ASTRA-sim refuses or
    this model does not cover the combination."""
    key = f"system.algorithm[{dim}]"
    if algorithm not in ALGORITHMS:
        raise LibraInputError(f"{key}: unknown value {show(algorithm)}; expected one of "
                              f"{', '.join(ALGORITHMS)}.")
    if int(phase) not in [int(p) for p in PHASES]:
        raise LibraInputError(f"{key}: phase {show(phase)} is not RS, AG, AR or A2A.")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 2:
        raise LibraInputError(f"{key}: a phase needs a group of >= 2 NPUs, got {show(n)}.")
    if algorithm == "double_binary_tree":
        if int(phase) != Collective.ALLREDUCE:
            raise LibraInputError(
                f"{key}: {show(algorithm)} has only an all-reduce: ASTRA-sim runs it for "
                f"any phase as an all-reduce of the whole buffer (phase {int(phase)} asked; "
                "a localBWAware all-reduce gives every dimension but the last a "
                "reduce-scatter phase).")
        if n & (n - 1):
            raise LibraInputError(f"{key}: {show(algorithm)} needs a power-of-two group "
                                  f"(ASTRA-sim's BinaryTree crashes otherwise), got {n}.")
    if algorithm == "halving_doubling":
        if int(phase) == Collective.ALLTOALL:
            raise LibraInputError(f"{key}: {show(algorithm)} has no all-to-all (ASTRA-sim "
                                  "exits: unknown communication type).")
        if n & (n - 1):
            raise LibraInputError(f"{key}: {show(algorithm)} needs a power-of-two group, "
                                  f"got {n} NPUs.")


# ------------------------------------------------------------------ the message schedule
class _Plan(NamedTuple):
    stream_count: int  # messages each NPU sends
    par: int  # parallel_reduce
    nonzero: int  # get_non_zero_latency_packets
    sizes: tuple  # message size of send k (bytes)
    release: tuple  # bundle size at insert k (bytes, for the reduction)
    offsets: tuple  # receiver offset of insert k (signed: + clockwise)
    ar_gate: bool  # AllToAll all-reduce: the AG half waits for every RS message
    out_bytes: float


def _plan(algorithm, phase, n, data, window=-1, ticks=False):
    """``ticks``: ASTRA-sim's integer (uint64) sizes, each division floored."""
    ph = int(phase)
    ar, ag, rs = (ph == Collective.ALLREDUCE, ph == Collective.ALLGATHER,
                  ph == Collective.REDUCESCATTER)

    def div(x, y):
        return float(math.floor(x / y)) if ticks else x / y

    out = data * n if ag else (div(data, n) if rs else data)
    if algorithm in ("ring", "direct"):
        msg = data if ag else div(data, n)
        if algorithm == "ring":
            par = 1  # InjectionPolicy::Normal (Sys::generate_collective_phase)
            sc = 2 * (n - 1) if ar else ((n - 1) * n // 2 if ph == Collective.ALLTOALL
                                          else n - 1)
            nonzero = (n - 1) * par
        else:
            par = n - 1 if window == -1 else min(window, n - 1)
            sc = 2 * (n - 1) if ar else n - 1
            nonzero = par
        inserts = sc + par  # the first par at StreamInit, then one per receipt
        if algorithm == "ring":
            offs = tuple(1 for _ in range(inserts))
        else:
            offs = tuple(k % (n - 1) + 1 for k in range(inserts))
        sizes = tuple(msg for _ in range(inserts))
        return _Plan(sc, par, nonzero, sizes, sizes, offs,
                     algorithm == "direct" and ar, out)
    # halving-doubling
    L = int(round(math.log2(n)))
    if ar:  # halves up to n/2 apart, then (rank_offset == n) doubles back
        sz = [div(data, 2)]
        for _ in range(L - 1):
            sz.append(div(sz[-1], 2))
        sz.append(sz[-1])
        for _ in range(L - 1):
            sz.append(sz[-1] * 2)
        off = [2 ** i for i in range(L)] + [n // 2 ** (i + 1) for i in range(L)]
        sc = 2 * L
    elif ag:
        sz = [data * 2 ** i for i in range(L)]
        off = [n // 2 ** (i + 1) for i in range(L)]
        sc = L
    else:
        sz = [div(data, 2)]
        for _ in range(L - 1):
            sz.append(div(sz[-1], 2))
        off = [2 ** i for i in range(L)]
        sc = L
    sz.append(sz[-1])
    off.append(off[-1])
    return _Plan(sc, 1, L - 1, tuple(sz), tuple(sz), tuple(off), False, out)


def _bundles(plan, phase, ep, lmb, ticks=False):
    """Delay of the memory-bus bundle of every insert (endpoint delay + reduction: a write
    and two reads of the bundle's bytes at ``lmb`` GB/s, 1 GB = 1e9 B; ``PacketBundle.cc``;
    ``ticks``: each of the three floored to an integer ns as ASTRA-sim does)."""
    ph = int(phase)
    zero = nonzero = 0
    toggle = False
    out = []
    for k in range(plan.stream_count + plan.par):
        if zero == 0 and nonzero == 0:
            zero, nonzero = plan.par, plan.nonzero
            toggle = not toggle
        if zero > 0:
            zero -= 1
            out.append((ep, 0.0))
            continue
        nonzero -= 1
        proc = ph == Collective.REDUCESCATTER or (ph == Collective.ALLREDUCE and toggle)
        red = 0.0
        if proc and lmb is not None:
            red = 3.0 * (math.floor(plan.release[k] / lmb) if ticks else plan.release[k] / lmb)
        out.append((ep + red, red))
    return out


def _direction(algorithm, idx, off):
    if algorithm != "halving_doubling":
        return 1
    return 1 if (idx // off) % 2 == 0 else -1


# ----------------------------------------------------------------------- the stage form
def phase_stage(algorithm, phase, n, block, bytes_in, latency_ns, endpoint_delay_ns,
                local_mem_bw_gbps, gb_is_gib, backend="unaware", window=-1, dim=0):
    """One dimension's phase as a `PhaseStage` (see the class). ``bytes_in``: bytes per NPU
    entering the phase (ASTRA-sim's ``data_size``); ``window``: ``direct``'s window (-1:
    n - 1 messages at once, ASTRA-sim's ``directW``). ``backend`` only chooses whether a
    Switch's message crosses two links (the aware backend's store and forward)."""
    check_algorithm(algorithm, phase, n, block, dim)
    if backend not in BACKENDS:
        raise LibraInputError(f"network_backend: unknown value {show(backend)}.")
    unit = 1.0 / GIB_PER_GB if gb_is_gib else 1.0
    if algorithm == "double_binary_tree":
        coef, fixed, steps, red, out, affine = tree_stage(
            n, block, float(bytes_in), float(latency_ns), float(endpoint_delay_ns),
            local_mem_bw_gbps, unit, backend)
        if backend == "aware":
            affine = affine and _aware_affine("double_binary_tree", block, 1, n)
        return PhaseStage(coef, fixed, steps, 1, red, out, affine)
    plan = _plan(algorithm, phase, n, float(bytes_in), window)
    bundles = _bundles(plan, phase, float(endpoint_delay_ns), local_mem_bw_gbps)
    lat = float(latency_ns)
    P = plan.par
    # rounds of up to P sends that leave together (the slowest receipt of one round and
    # its bundle start the next); a direct all-reduce's all-gather half waits for its
    # reduce-scatter half (AllToAll::run), so each half is split on its own
    halves = ([(0, n - 1), (n - 1, 2 * (n - 1))] if plan.ar_gate
              else [(0, plan.stream_count)])
    chunks = [range(a, min(a + P, b)) for a, b in halves for a in range(a, b, P)]
    rounds = len(chunks)
    coef = fixed = red_total = 0.0
    affine = True
    fixed += bundles[0][0]
    red_total += bundles[0][1]
    for ks in chunks:
        hop = [hops(block, n, plan.offsets[j]) for j in ks]
        if rounds > 1 and (len(set(hop)) > 1
                           or len({bundles[j + P][0] for j in ks}) > 1):
            # one round's messages arrive (a Ring) or are released (a reduction on some
            # bundles only) apart, and each General sends the next message on its own
            affine = False
        coef += plan.sizes[ks[0]] * unit
        fixed += max(hop) * lat
        # the bundles of this round's receipts (inserts ks + 1), the slowest gates
        b = max(bundles[j + P][0] for j in ks)
        rb = max(bundles[j + P][1] for j in ks)
        fixed += b
        red_total += rb
    if backend == "aware":
        affine = affine and _aware_affine(algorithm, block, P)
        if int(block) == Block.SWITCH:
            coef *= 2.0
    return PhaseStage(coef, fixed, float(rounds), P, red_total, plan.out_bytes, affine)


def _aware_affine(algorithm, block, par, n=0):
    """Whether the congestion-aware time is the stage form (a Switch's bytes twice): no two
    messages ever queue for one link. True for one message at a time over one link (ring
    on a Ring; ring, halving-doubling and a window of 1 through a Switch) and for anything
    on FullyConnected (a link per pair); false where messages take several hops of a Ring
    (direct, halving-doubling, tree) or several leave one NPU through its Switch link."""
    b = int(block)
    if b == Block.FULLYCONNECTED:
        return True
    if b == Block.SWITCH:
        return par == 1 and (algorithm != "double_binary_tree" or n == 2)
    return algorithm == "ring"


# ------------------------------------------------------------ one NPU's state machine
class PhaseDriver:
    """One NPU's algorithm state machine of one phase (``Ring.cc``, ``AllToAll.cc``,
    ``HalvingDoubling.cc``; not the tree): `phase_time_ns` runs one per NPU of the group,
    `step.simulate_step`'s congestion-aware replay one for the representative NPU.

    The caller owns the clock and the network. ``start(t)`` and ``received(t)`` (a message
    for this NPU arrived) insert packets and return the times at which their memory-bus
    bundles complete (endpoint delay + reduction); at each such time the caller calls
    ``general(t)``, which returns the messages this NPU sends then, as ``(offset, bytes)``
    (the receiver ``offset`` places on, signed: + clockwise), and sets ``done`` (the phase's
    end on this NPU, ns) once nothing is left to send and every bundle is back.
    """

    def __init__(self, algorithm, phase, n, bytes_in, endpoint_delay_ns, local_mem_bw_gbps,
                 window=-1, idx=0, ticks=False, dim=0):
        check_algorithm(algorithm, phase, n, Block.FULLYCONNECTED, dim)
        if algorithm == "double_binary_tree":
            raise LibraInputError(f"system.algorithm[{dim}]: the tree has no one-NPU driver "
                                  "(its NPUs differ); use phase_time_ns.")
        plan = _plan(algorithm, phase, n, float(bytes_in), window, ticks)
        self._setup(algorithm, n, plan, _bundles(plan, phase, float(endpoint_delay_ns),
                                                 local_mem_bw_gbps, ticks), idx)

    @classmethod
    def group(cls, algorithm, phase, n, bytes_in, endpoint_delay_ns, local_mem_bw_gbps,
              window=-1, ticks=False):
        """One driver per NPU 0..n-1 of the group (the plan computed once)."""
        out = [cls(algorithm, phase, n, bytes_in, endpoint_delay_ns, local_mem_bw_gbps,
                   window, 0, ticks)] + [cls.__new__(cls) for _ in range(1, n)]
        for i in range(1, n):
            out[i]._setup(algorithm, n, out[0].plan, out[0].bundles, i)
        return out

    def _setup(self, algorithm, n, plan, bundles, idx):
        self.algorithm, self.n, self.plan, self.bundles, self.idx = (algorithm, n, plan,
                                                                     bundles, idx)
        self.packets = []  # FIFO of (signed offset, bytes)
        self.inserted = self.received_count = 0
        self.left = plan.stream_count  # messages still to send
        self.free = 0  # bundles back, not yet used by a send
        self.done = None

    def _insert(self, t, timers):
        k = self.inserted
        self.inserted += 1
        off = self.plan.offsets[k]
        self.packets.append((_direction(self.algorithm, self.idx, off) * off,
                             self.plan.sizes[k]))
        timers.append(t + self.bundles[k][0])

    def start(self, t):
        """StreamInit at ``t``: -> the bundle completion times."""
        timers = []
        for _ in range(self.plan.par):
            self._insert(t, timers)
        return timers

    def received(self, t):
        """A message arrived at ``t``: -> the bundle completion times."""
        self.received_count += 1
        timers = []
        self._insert(t, timers)
        return timers

    def _ready(self, sends):
        if not self.packets or self.left == 0 or self.free == 0:
            return
        sends.append(self.packets.pop(0))
        self.left -= 1
        self.free -= 1

    def general(self, t):
        """A bundle completed at ``t``: -> the messages sent now [(signed offset, bytes)]."""
        sends = []
        self.free += 1
        plan = self.plan
        if plan.ar_gate and self.left <= self.n - 1:
            # direct all-reduce: the all-gather half waits for every reduce-scatter receipt
            if self.received_count < self.n - 1:
                return sends
            for _ in range(plan.par):
                self._ready(sends)
        else:
            self._ready(sends)
        if self.left == 0 and self.free == plan.par and self.done is None:
            self.done = t
        return sends


class StageDriver:
    """The drivers of one direct / halving-doubling stage in the whole-step aware replays
    (`step.simulate_step`, `trace_runtime`), keyed by NPU ``i`` of the group. Every NPU runs
    the same sends where the links carry equal loads: there NPU 0 stands for all
    (by symmetry it receives its k-th message when its own k-th one arrives), on its own
    links (`peer_links`). Halving-doubling on a Ring of more than 2 is not symmetric (NPU
    ``i`` goes clockwise when ``(i // offset) % 2 == 0``): there all ``n`` NPUs run from the
    stage's start, each message on its own route's links (`route`; NPU 0's two ring links
    are the representative's ``(dim, 0)`` / ``(dim, 1)``, which ring stages use), and the
    stage ends when the last NPU's driver is done (then no message of it is left; NPU 0's
    own end instead: worse, -12.9 % on rs11_0290).

    ``start(t)`` / ``received(t, i)`` -> [(bundle time, NPU)]; ``general(t, i)`` -> the
    messages sent then [(receiver NPU, link keys, bytes)]; ``done`` (ns) once all are."""

    def __init__(self, algorithm, phase, n, block, bytes_in, endpoint_delay_ns,
                 local_mem_bw_gbps, dim=0, links_n=None):
        self.n, self.block, self.dim = n, int(block), dim
        self.links_n = n if links_n is None else links_n  # the dimension's NPUs
        self.full = algorithm == "halving_doubling" and self.block == Block.RING and n > 2
        args = (algorithm, phase, n, bytes_in, endpoint_delay_ns, local_mem_bw_gbps)
        self.npus = (PhaseDriver.group(*args) if self.full
                     else [PhaseDriver(*args, dim=dim)])
        self.done = None

    def _key(self, a, b):
        if a != 0:
            return (self.dim, ("hop", a, b))
        return (self.dim, 0 if b == 1 else 1)

    def start(self, t):
        return [(tt, i) for i, d in enumerate(self.npus) for tt in d.start(t)]

    def received(self, t, i):
        return [(tt, i) for tt in self.npus[i].received(t)]

    def general(self, t, i):
        out = []
        for off, size in self.npus[i].general(t):
            dst = (i + off) % self.n if self.full else 0  # (NPU 0 gets its own, by symmetry)
            links = (tuple(self._key(a, b) for a, b in route(self.block, self.n, i, dst))
                     if self.full else peer_links(self.block, self.links_n, self.dim, off))
            out.append((dst, links, size, off))
        if self.done is None and all(d.done is not None for d in self.npus):
            self.done = t
        return out


# --------------------------------------------------------------- exact replay at a bw
def phase_time_ns(algorithm, phase, n, block, bytes_in, bw_gbps, latency_ns,
                  endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, backend="unaware",
                  window=-1, dim=0, ticks=False):
    """Exact time (ns) of one phase of one chunk at ``bw_gbps``: ASTRA-sim's algorithm state
    machine (`PhaseDriver`) run on all ``n`` NPUs of the group (module docstring).
    ``ticks``: as ASTRA-sim, integer sizes and every delay floored to an integer ns (else
    real-valued, as the rest of the model). A Ring of 2 NPUs has one link each way (the
    stock aware binary aborts on a one-dimension network that is a Ring of 2, `aware_aborts`;
    in a network of several dimensions it runs)."""
    check_algorithm(algorithm, phase, n, block, dim)
    if backend not in BACKENDS:
        raise LibraInputError(f"network_backend: unknown value {show(backend)}.")
    if not bw_gbps > 0:
        raise LibraInputError(f"bandwidth_gbps[{dim}]: must be > 0, got {show(bw_gbps)}.")
    fl = math.floor if ticks else float
    if algorithm == "double_binary_tree":
        return tree_time_ns(n, int(block), float(bytes_in), bw_gbps, float(latency_ns),
                             float(endpoint_delay_ns), local_mem_bw_gbps, gb_is_gib,
                             backend == "aware", fl)
    npus = PhaseDriver.group(algorithm, phase, n, bytes_in, endpoint_delay_ns,
                             local_mem_bw_gbps, window, ticks)
    bpns = bw_gbps * (GIB_PER_GB if gb_is_gib else 1.0)  # bytes per ns
    lat = float(latency_ns)
    aware = backend == "aware"
    blk = int(block)
    ev = []
    seq = [0]

    def push(t, kind, data):
        seq[0] += 1
        heapq.heappush(ev, (t, seq[0], kind, data))

    def timers(i, times):
        for tt in times:
            push(tt, "general", i)

    link_busy, link_wait = {}, {}

    def link_put(link, msg, t):
        if link_busy.get(link):
            link_wait.setdefault(link, []).append(msg)
            return
        link_busy[link] = True
        size = msg[2]
        push(t + fl(size / bpns), "free", link)
        push(t + fl(size / bpns + lat), "hop", msg)

    for i in range(n):
        timers(i, npus[i].start(0.0))
    while ev:
        t, _, kind, data = heapq.heappop(ev)
        if kind == "general":
            i = data
            for off, size in npus[i].general(t):
                dest = (i + off) % n
                if aware:
                    link_put(route(blk, n, i, dest)[0], (i, dest, size, 0), t)
                else:
                    push(t + fl(size / bpns + hops(blk, n, off) * lat), "recv", dest)
        elif kind == "recv":
            timers(data, npus[data].received(t))
        elif kind == "free":
            link_busy[data] = False
            if link_wait.get(data):
                link_put(data, link_wait[data].pop(0), t)
        else:  # a message arrived at the end of a link
            src, dst, size, h = data
            path = route(blk, n, src, dst)
            if h + 1 < len(path):
                link_put(path[h + 1], (src, dst, size, h + 1), t)
            else:
                timers(dst, npus[dst].received(t))
    if any(d.done is None for d in npus):
        raise RuntimeError("phase replay did not finish (model error)")
    return max(d.done for d in npus)


def aware_aborts(blocks, npus_per_dim):
    """Whether ASTRA-sim's congestion-aware binary aborts on this network: a one-dimension
    network that is a Ring of 2 NPUs (``Ring`` connects the pair twice; ``Device::connect``
    asserts). Several dimensions go through ``MultiDimTopologyLocal``, which gives a Ring of
    2 one link each way, and run."""
    return (len(blocks) == 1 and int(blocks[0]) == Block.RING
            and int(npus_per_dim[0]) == 2)


def phase_list(algorithms, collective, npus_per_dim, collective_optimization="localBWAware"):
    """[(dim, phase)] one chunk runs, in order (``Sys::generate_collective``): every
    collective but an all-reduce under ``localBWAware`` runs its own phase on every involved
    dimension (ascending; an all-gather descending), so a ``baseline`` all-reduce is a full
    all-reduce per dimension; a ``localBWAware`` all-reduce is reduce-scatter up to the last
    involved dimension, all-reduce there, all-gather back down."""
    dims = [d for d, g in enumerate(npus_per_dim) if g > 1]
    c = int(collective)
    if c != Collective.ALLREDUCE or collective_optimization == "baseline":
        order = dims[::-1] if c == Collective.ALLGATHER else dims
        return [(d, c) for d in order]
    return ([(d, int(Collective.REDUCESCATTER)) for d in dims[:-1]]
            + [(dims[-1], int(Collective.ALLREDUCE))]
            + [(d, int(Collective.ALLGATHER)) for d in dims[-2::-1]])


def multi_dim_time_ns(algorithms, collective, npus_per_dim, blocks, chunk_bytes, bw_gbps,
                      latency_ns, endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib,
                      backend="unaware", collective_optimization="localBWAware", window=-1,
                      ticks=False):
    """One chunk through every dimension's phase in turn (`phase_list`), each phase's
    ``out_bytes`` the next one's input: the time of a one-chunk collective (ns)."""
    data, total = float(chunk_bytes), 0.0
    for d, ph in phase_list(algorithms, collective, npus_per_dim, collective_optimization):
        total += phase_time_ns(algorithms[d], ph, int(npus_per_dim[d]), blocks[d], data,
                               bw_gbps[d], latency_ns[d], endpoint_delay_ns,
                               local_mem_bw_gbps, gb_is_gib, backend, window, d, ticks)
        if algorithms[d] != "double_binary_tree":  # the tree leaves the size as it is
            data = _plan(algorithms[d], ph, int(npus_per_dim[d]), data, window,
                         ticks).out_bytes
    return total


# ------------------------------------------------------------------ double binary tree
def tree_chunks_time_ns(n, block, chunk_bytes, chunks, bw_gbps, latency_ns,
                        endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, backend="unaware",
                        ticks=False, queues=1, first_tree=0):
    """A one-dimension tree all-reduce of ``chunks`` streams of ``chunk_bytes`` (ns): the
    last exit of `tree_replay` (alternating trees from ``first_tree``)."""
    check_algorithm("double_binary_tree", Collective.ALLREDUCE, n, block)
    out = tree_replay(n, int(block), [float(chunk_bytes)] * chunks,
                      [(first_tree + j) % 2 for j in range(chunks)], bw_gbps,
                      float(latency_ns), float(endpoint_delay_ns), local_mem_bw_gbps,
                      gb_is_gib, backend == "aware", math.floor if ticks else float, queues)
    return max(max(x) for x in out)


def tree_follow_ns(n, block, bytes_prev, bytes_this, same_tree, bw_gbps, latency_ns,
                   endpoint_delay_ns, local_mem_bw_gbps, gb_is_gib, backend="unaware"):
    """How long after the previous tree chunk in its queue a chunk ends at the earliest,
    less its own time alone (ns): `tree_replay` of the two from one start, the second's
    end minus its `phase_time_ns`. Its NPUs run it once they left the previous one, so its
    end is max(own start + own time, previous start + this + own time) (exact on the
    unaware backend, where the replay is max-plus in the NPUs' start times: a chunk
    starting later than all NPUs' exits of the previous one ends its time alone after)."""
    args = (bw_gbps, float(latency_ns), float(endpoint_delay_ns), local_mem_bw_gbps,
            gb_is_gib, backend == "aware", float)
    two = tree_replay(n, int(block), [float(bytes_prev), float(bytes_this)],
                      [0, 0 if same_tree else 1], *args)
    return max(two[1]) - max(tree_replay(n, int(block), [float(bytes_this)], [0], *args)[0])


class RingCopies:
    """Halving-doubling on a Ring of more than 2 NPUs under the aware backend when every NPU
    of the ring is its own copy (`step.simulate_step`, `step.copy_dims`): NPU ``i`` starts
    the stage when its own queue hands it over, runs its own `PhaseDriver`, and its messages
    go hop by hop over the links of the NPUs they leave (``copy_of(a)``'s clockwise /
    anticlockwise ring link, the keys its ring stages use). An NPU takes a message from its
    partner only once it has posted the receive for it, which ASTRA-sim does when it sends
    to that partner (``HalvingDoubling::ready``: ``sim_send`` then ``sim_recv`` from the same
    NPU; matched by source, in order): a message that arrives before (the NPU has not
    started the stage, or a later step's message overtook an earlier one on a shared link)
    waits, and is taken in the tick of that send, after the events already in it
    (``sim_recv`` schedules its callback 0 ns later). Stages are matched by their logical
    id (node, stream, stage)."""

    def __init__(self, dim, n, copy_of, blk=Block.RING, ring=False):
        self.dim, self.n, self.copy_of, self.blk, self.ring = dim, n, copy_of, int(blk), ring
        # logical id -> [drivers [n], streams [n], receives posted and not yet matched
        # [n] {source: count}, messages arrived and not yet taken [n] {source: count}]
        self.stages = {}

    def start(self, lid, i, s, t, make_group, sign=1):
        """NPU ``i``'s stream ``s`` starts stage ``lid`` at ``t`` -> [(time, stream, NPU)]
        of its bundles ("general" events); ``s.driver`` is its `_RingCopy`; ``sign`` -1: a
        ring sent anticlockwise (its offsets negated)."""
        e = self.stages.setdefault(lid, [None, [None] * self.n, [{} for _ in range(self.n)],
                                         [{} for _ in range(self.n)]])
        if e[0] is None:
            e[0] = make_group()
        e[1][i] = s
        s.driver = _RingCopy(self, lid, e[0][i], sign)
        return [(tt, s, i) for tt in e[0][i].start(t)]

    def deliver(self, lid, src, dst, t):
        """``src``'s message reached NPU ``dst`` at ``t`` -> [(time, stream, NPU)] of the
        bundles it starts (none while no receive waits for it)."""
        e = self.stages[lid]
        if e[2][dst].get(src, 0) > 0:
            e[2][dst][src] -= 1
            return self.receive(lid, dst, t)
        e[3][dst][src] = e[3][dst].get(src, 0) + 1
        return []

    def post(self, lid, i, src) -> bool:
        """NPU ``i`` posts a receive from ``src``: -> whether a message waited for it."""
        e = self.stages[lid]
        if e[3][i].get(src, 0) > 0:
            e[3][i][src] -= 1
            return True
        e[2][i][src] = e[2][i].get(src, 0) + 1
        return False

    def receive(self, lid, i, t):
        """NPU ``i`` takes a message at ``t`` -> [(time, stream, NPU)] of its bundles."""
        e = self.stages[lid]
        return [(tt, e[1][i], i) for tt in e[0][i].received(t)]


class _RingCopy:
    """One NPU's driver in `RingCopies` (the interface of `StageDriver`); ``taken``: the
    (ring, stage, NPU) of each message its last sends found waiting, to be taken 0 ns
    later."""

    def __init__(self, ring, lid, drv, sign=1):
        self.ring, self.lid, self.drv, self.sign = ring, lid, drv, sign
        self.done = None
        self.taken = []

    def general(self, t, i):
        r, out = self.ring, []
        self.taken = []
        for off, size in self.drv.general(t):
            off *= self.sign
            dst = (i + off) % r.n
            out.append((dst, copy_links(r.blk, r.n, r.dim, r.copy_of, i, dst), size, off))
            # a ring receives from the NPU before it, halving-doubling from its partner
            if r.post(self.lid, i, (i - off) % r.n if r.ring else dst):
                self.taken.append((r, self.lid, i))
        self.done = self.drv.done
        return out

    def received(self, t, dst):
        """The sender's message reached NPU ``dst`` -> [(time, stream, NPU)] of its bundles."""
        return self.ring.deliver(self.lid, self.drv.idx, dst, t)
