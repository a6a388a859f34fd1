"""A convex lower bound of an imported trace's step time (`types.TraceSet`), as general model
rows (`problem.ModelRows`), for ``libra-train workload.chakra_et=...`` (issue 32).

The simulated step (`step_trace.simulate_trace`) is not convex in the bandwidths: queues,
links and the in-flight limit reorder work. What bounds it from below, whatever the order:

* **a path** of the step's dependency graph (every rank's data dependencies, and each
  RECV after its matching SEND was issued plus the message's time), each node at its
  isolated time: compute at its duration, a collective at the convex lower bound of its
  chunk schedule alone (`timing_rows.collective_pieces`: what bounds #18's generated steps),
  a message at its bytes over the slowest link it must cross. Contention, queueing and the
  compute unit's one-at-a-time only delay nodes, so every path's length is a lower bound;
* **a rank's compute**: one compute node at a time;
* **a rank's work per dimension**: what its collectives put on dimension d (all chunks and
  stages, `timing_rows.dimension_work`), over the ``queues_per_dim`` queues that run it.

A graph has too many paths to list, so `TraceBound` finds them as needed (a cutting plane):
`longest_path` gives the longest path at a given design, `rows` the model over the paths
found so far. The minimum of that model over the feasible designs is a lower bound of the
best simulated step however few paths it holds, so the gap of a design, (simulated step -
the solver's certified lower bound of the model) / that bound, is certified after any
number of rounds; more rounds only tighten it. Units: rows in s and GB (as `ModelRows`),
everything else ns, bytes, GB/s.

Messages (SEND / RECV) are bounded by their bytes over the link of the first dimension on
which the two NPUs differ (congestion-unaware backend: ASTRA-sim times them there) or, under
the congestion-aware backend, over every dimension they cross (dimension-ordered routing,
store and forward; twice through a Switch). Collectives over a ``pg_name`` group (a flat
ring on dimension 0's queue) are bounded alike for every member
(`step_partial.pg_ring_piece`): a member's ring stage lasts at least the ``steps`` hops
before it on the ring, each at its time alone.
"""

from __future__ import annotations

import collections

import numpy as np

from libra_jax.inputs.chakra_graph import topological_order
from libra_jax.model import pipelined, step, step_partial
from libra_jax.model.problem import ModelRows
from libra_jax.model.timing_rows import collective_pieces, dimension_work
from libra_jax.model.timing_spec import TimingModel
from libra_jax.types import LibraInputError, TraceNode


#: Ranks of more nodes than this get no compute-unit cuts (`TraceBound._serial_ns`).
SERIAL_MAX_NODES = 20_000


def coordinates(rank: int, npus_per_dim) -> list[int]:
    """The NPU's coordinate on every dimension (dimension 0 fastest, as ASTRA-sim numbers
    NPUs: ``rank = sum_d coord_d * prod_{e<d} n_e``)."""
    out = []
    for n in npus_per_dim:
        out.append(rank % int(n))
        rank //= int(n)
    return out


def differing_dims(a: int, b: int, npus_per_dim) -> list[int]:
    """The dimensions on which NPUs ``a`` and ``b`` differ, in order."""
    ca, cb = coordinates(a, npus_per_dim), coordinates(b, npus_per_dim)
    return [d for d in range(len(ca)) if ca[d] != cb[d]]


class TraceBound:
    """The cutting-plane lower bound of one trace set on one network (module docstring).

    Args:
      trace: the `types.TraceSet` (ranks = the network's NPUs).
      network: the `topology.Network`.
      tm: the `timing_spec.TimingModel` (``model=pipelined``: the collectives' pieces).
      ranks: the ranks whose graphs are searched (default all). Pass one representative
        per class of ranks with identical graphs (with ``class_of``) to search fewer nodes:
        a message from a rank outside ``ranks`` is then taken from its class's
        representative.
      class_of: [R] each rank's class (its representative's index in ``ranks``), or None.
    """

    def __init__(self, trace, network, tm: TimingModel, ranks=None, class_of=None):
        if tm.model != "pipelined":
            raise LibraInputError(
                f"model = {tm.model}: an imported trace is timed as ASTRA-sim runs it; set "
                "model=pipelined.")
        self.trace, self.network, self.tm = trace, network, tm
        self.d = network.num_dims
        self.npus = [int(n) for n in network.npus]
        self.ranks = list(range(trace.num_ranks)) if ranks is None else [int(r) for r in ranks]
        self.class_of = (np.arange(trace.num_ranks) if class_of is None
                         else np.asarray(class_of, int))
        self.rep = {c: r for c, r in enumerate(self.ranks)} if class_of is not None else None
        self._rows: list[tuple[int, float, np.ndarray]] = []  # (piece, const s, coef GB)
        self._pieces = 0
        self._terms: dict = {}  # key -> (c0 s, {piece: w})
        self._coll_keys: list = []
        self._node_term: dict[int, list] = {}
        gib = pipelined.GIB_PER_GB if tm.gb_is_gib else 1.0
        self._gib = gib
        self._factor = step.link_factor(network.block_codes, tm.network_backend)
        self._aware = tm.network_backend == "aware"
        self._serial = None
        self._last = ({}, {})
        self._build_terms()

    # ------------------------------------------------------------------ terms

    def _new_piece(self, rows) -> int:
        j = self._pieces
        self._pieces += 1
        for const_s, coef_gb in rows:
            self._rows.append((j, float(const_s), np.asarray(coef_gb, np.float64)))
        return j

    def _message_coef(self, src: int, dst: int, nbytes: float) -> np.ndarray:
        """[D] GB over each dimension's bandwidth that bound a message src -> dst."""
        dims = differing_dims(src, dst, self.npus)
        coef = np.zeros(self.d)
        for d in (dims if self._aware else dims[:1]):
            coef[d] = nbytes / self._gib * self._factor[d] / 1e9
        return coef

    def _term(self, key):
        """(c0 s, {piece: w}) of a comm node's isolated time, built once per key."""
        if key in self._terms:
            return self._terms[key]
        kind = key[0]
        if kind == "msg":
            _, src, dst, nbytes = key
            coef = self._message_coef(src, dst, nbytes)
            # a message no link carries (src == dst) takes no bandwidth time
            term = (0.0, {self._new_piece([(0.0, coef)]): 1.0})
        elif kind == "pg":
            _, code, nbytes, members = key
            piece = step_partial.pg_ring_piece(code, nbytes, members, self.network, self.tm)
            term = (0.0, {} if piece is None else {self._new_piece([piece]): 1.0})
        else:  # a collective over whole dimensions: the pieces of its chunk schedule
            _, code, nbytes, group = key
            (c0, w, c, a, on), = collective_pieces([(code, nbytes, group)], self.network,
                                                   self.tm)
            nest = {}
            for jj in range(w.shape[0]):
                if np.any(on[jj]):
                    idx = np.nonzero(on[jj])[0]
                    nest[self._new_piece([(c[jj, i], a[jj, i]) for i in idx])] = float(w[jj])
            term = (float(c0), nest)
            self._coll_keys.append(key)
        self._terms[key] = term
        return term

    def _build_terms(self) -> None:
        groups = self.trace.groups
        for r in self.ranks:
            rt = self.trace.ranks[r]
            terms = [None] * rt.num_nodes
            kind = rt.kind
            for i in np.nonzero(kind != TraceNode.COMPUTE)[0]:
                k = int(kind[i])
                size = float(rt.size_bytes[i])
                if k == TraceNode.COLLECTIVE:
                    g = groups[int(rt.group[i])]
                    if g.ranks is not None:
                        key = ("pg", int(rt.collective[i]), size, tuple(g.ranks))
                    else:
                        grp = tuple(n if inv else 1 for n, inv in zip(self.npus, g.involved))
                        if all(x == 1 for x in grp):
                            continue  # a collective over no dimension with 2+ NPUs: free
                        key = ("coll", int(rt.collective[i]), size, grp)
                elif k == TraceNode.SEND:
                    key = ("msg", r, int(rt.peer[i]), size)
                else:  # a RECV takes no time of its own: it waits for its SEND's message
                    continue
                terms[i] = key
                self._term(key)
            self._node_term[r] = terms

    # ------------------------------------------------------------------ evaluation

    def _piece_times_s(self, bw) -> np.ndarray:
        inv = np.where(np.asarray(bw, np.float64) > 0, 1.0 / np.maximum(bw, 1e-300), np.inf)
        t = np.full(self._pieces, -np.inf)
        for j, const, coef in self._rows:
            used = coef > 0
            v = const + float(np.sum(coef[used] * inv[used]))
            if v > t[j]:
                t[j] = v
        return np.where(np.isfinite(t), t, 0.0)

    def term_ns(self, key, piece_s) -> float:
        c0, nest = self._terms[key]
        return 1e9 * (c0 + sum(w * piece_s[j] for j, w in nest.items()))

    def longest_path(self, bw):
        """(length ns, path) of the longest path at ``bw`` [D] GB/s, nodes at their isolated
        times; path: [(rank, node index)] in order. A RECV waits for its matching SEND's
        finish (both end when the message arrives), the k-th SEND of a (source, destination,
        tag, size) matching the k-th RECV."""
        piece_s = self._piece_times_s(bw)
        trace = self.trace
        dur, indeg, children = {}, {}, collections.defaultdict(list)
        sends = collections.defaultdict(collections.deque)
        for r in self.ranks:
            rt = trace.ranks[r]
            for i in np.nonzero(rt.kind == TraceNode.SEND)[0].tolist():
                sends[(self._cls(r), self._cls(int(rt.peer[i])), int(rt.tag[i]),
                       float(rt.size_bytes[i]))].append((r, i))
        for r in self.ranks:
            rt = trace.ranks[r]
            ptr, deps = rt.dep_ptr.tolist(), rt.deps.tolist()
            kind = rt.kind.tolist()
            terms = self._node_term[r]
            for i in range(rt.num_nodes):
                node = (r, i)
                n_dep = ptr[i + 1] - ptr[i]
                for dep in deps[ptr[i]:ptr[i + 1]]:
                    children[(r, dep)].append(node)
                if kind[i] == TraceNode.RECV:
                    q = sends.get((self._cls(int(rt.peer[i])), self._cls(r), int(rt.tag[i]),
                                   float(rt.size_bytes[i])))
                    if q:
                        children[q.popleft()].append(node)
                        n_dep += 1
                indeg[node] = n_dep
                if kind[i] == TraceNode.COMPUTE:
                    dur[node] = float(rt.duration_ns[i])
                elif kind[i] == TraceNode.RECV or terms[i] is None:
                    dur[node] = 0.0
                else:
                    dur[node] = self.term_ns(terms[i], piece_s)
        start, pred, finish = {}, {}, {}
        ready = [node for node, n in indeg.items() if n == 0]
        while ready:
            node = ready.pop()
            f = start.get(node, 0.0) + dur[node]
            finish[node] = f
            for c in children[node]:
                if f > start.get(c, -1.0):
                    start[c], pred[c] = f, node
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(finish) != len(indeg):
            raise LibraInputError(
                f"{trace.prefix}: the ranks' graphs wait for each other in a cycle (through "
                "SEND / RECV pairs): the step never ends.")
        self._last = (finish, pred)
        if not finish:
            return 0.0, []
        node = max(finish, key=finish.__getitem__)
        return finish[node], self._path_to(node, pred)

    @staticmethod
    def _path_to(node, pred) -> list:
        path = []
        while node is not None:
            path.append(node)
            node = pred.get(node)
        path.reverse()
        return path

    def _serial_ns(self) -> dict:
        """{(rank, node): ns of compute on the node's rank that must run after it}: the
        durations of the node's compute descendants in its rank's own graph (strict), which
        the rank's compute unit runs one at a time after the node ends. Built once; ranks
        of more than `SERIAL_MAX_NODES` nodes are left out (the sets cost N^2 bits)."""
        if self._serial is not None:
            return self._serial
        out = {}
        for r in self.ranks:
            rt = self.trace.ranks[r]
            n = rt.num_nodes
            if n > SERIAL_MAX_NODES or n == 0:
                continue
            kind = rt.kind.tolist()
            comp = [i for i in range(n) if kind[i] == TraceNode.COMPUTE]
            if not comp:
                continue
            bit = {i: 1 << k for k, i in enumerate(comp)}
            dur = np.asarray(rt.duration_ns, np.float64)[comp]
            ptr, deps = rt.dep_ptr.tolist(), rt.deps.tolist()
            children = [[] for _ in range(n)]
            for i in range(n):
                for dep in deps[ptr[i]:ptr[i + 1]]:
                    children[dep].append(i)
            order = topological_order(n, np.repeat(np.arange(n), np.diff(rt.dep_ptr)),
                                      rt.deps, rt.path, rt.node_id, rt.name).tolist()
            below = [0] * n  # bit set of each node's compute descendants (strict)
            for i in reversed(order):
                m = 0
                for c in children[i]:
                    m |= below[c] | bit.get(c, 0)
                below[i] = m
            nbytes = (len(comp) + 7) // 8
            for i in range(n):
                if below[i]:
                    bits = np.unpackbits(np.frombuffer(below[i].to_bytes(nbytes, "little"),
                                                       np.uint8), bitorder="little")
                    out[(r, i)] = float(bits[:len(comp)] @ dur)
        self._serial = out
        return out

    def best_cut(self, bw):
        """(value ns, cut) of the strongest cut at ``bw``: the longest path, or a path to a
        node followed by the compute its rank must still run after it (`_serial_ns`),
        whichever is longer there. ``cut`` = (path, extra ns) for `rows`."""
        length, path = self.longest_path(bw)
        finish, pred = self._last
        best, cut = length, (path, 0.0)
        for node, extra in self._serial_ns().items():
            v = finish.get(node)
            if v is not None and v + extra > best * (1 + 1e-12):
                best, cut = v + extra, (node, extra)
        if cut[0] is not path:
            cut = (self._path_to(cut[0], pred), cut[1])
        return best, cut

    def _cls(self, rank: int) -> int:
        return int(self.class_of[rank])

    # ------------------------------------------------------------------ rows

    def path_expr(self, path):
        """(const s, {piece: coef}) of a path's length (`longest_path`'s path)."""
        const, nest = 0.0, collections.Counter()
        for r, i in path:
            rt = self.trace.ranks[r]
            k = int(rt.kind[i])
            key = self._node_term[r][i]
            if k == TraceNode.COMPUTE:
                const += float(rt.duration_ns[i]) / 1e9
            elif k != TraceNode.RECV and key is not None:
                c0, terms = self._terms[key]
                const += c0
                for j, w in terms.items():
                    nest[j] += w
        return const, dict(nest)

    def floor_rows(self):
        """Rows of the path-free bounds (s, GB): each rank's compute, and its work on each
        dimension's queues over their number: a collective over whole dimensions keeps a
        queue of each dimension it crosses busy for its work there
        (`timing_rows.dimension_work`); one over a ``pg_name`` group keeps dimension 0's
        queues busy at least for its ring's bound (`step_partial.pg_ring_piece`, as in the
        collective's term)."""
        out = []
        q = float(self.tm.queues_per_dim)
        work = dict(zip(self._coll_keys, dimension_work(
            [k[1:] for k in self._coll_keys], self.network, self.tm)))
        for r in self.ranks:
            rt = self.trace.ranks[r]
            out.append((float(np.sum(rt.duration_ns[rt.kind == TraceNode.COMPUTE])) / 1e9,
                        np.zeros(self.d)))
            const, coef = np.zeros(self.d), np.zeros(self.d)
            ring = np.zeros(self.d)  # GB over each dimension's bandwidth, on dim 0's queues
            ring_s = 0.0
            for key in self._node_term[r]:
                if key is None:
                    continue
                if key[0] == "coll":
                    c, a = work[key]
                    const, coef = const + c, coef + a
                elif key[0] == "pg":
                    piece = step_partial.pg_ring_piece(*key[1:], self.network, self.tm)
                    if piece is not None:
                        ring_s, ring = ring_s + piece[0], ring + piece[1]
            for dim in range(self.d):
                row = np.zeros(self.d)
                row[dim] = coef[dim]
                c = float(const[dim])
                if dim == 0:
                    row, c = row + ring, c + ring_s
                if np.any(row > 0):
                    out.append((c / q, row / q))
        return out

    def used_dims(self) -> np.ndarray:
        """[D] bool: the dimensions some collective or message of the trace set crosses."""
        return np.any(self.rows([]).coef_gb > 0, axis=0)

    def rows(self, paths) -> ModelRows:
        """`ModelRows` of the step's lower bound over ``paths`` (`longest_path`'s paths, or
        `best_cut`'s (path, extra ns) cuts) and the
        path-free bounds: one piece (weight 1) whose rows are the paths, the ranks' compute
        and their dimension work, over the pieces of the nodes' isolated times."""
        j_step = self._pieces
        rows = list(self._rows)
        nests = [{} for _ in rows]
        for const, coef in self.floor_rows():
            rows.append((j_step, const, coef))
            nests.append({})
        for cut in paths:
            path, extra_ns = cut if isinstance(cut, tuple) else (cut, 0.0)
            const, nest = self.path_expr(path)
            rows.append((j_step, const + extra_ns / 1e9, np.zeros(self.d)))
            nests.append(nest)
        n_rows, n_pieces = len(rows), j_step + 1
        nest_m = np.zeros((n_rows, n_pieces))
        for i, m in enumerate(nests):
            for j, v in m.items():
                nest_m[i, j] += v
        weight = np.zeros(n_pieces)
        weight[j_step] = 1.0
        return ModelRows(
            weight=weight, piece=np.asarray([x[0] for x in rows], int),
            const_s=np.asarray([x[1] for x in rows], np.float64),
            coef_gb=np.asarray([x[2] for x in rows], np.float64).reshape(n_rows, self.d),
            const0_s=0.0, nest=nest_m)

    def value_ns(self, rows: ModelRows, bw) -> float:
        """The model ``rows`` at ``bw`` (ns): pieces in order, each the max of its rows."""
        inv = 1.0 / np.asarray(bw, np.float64)
        t = np.full(rows.weight.shape[0], -np.inf)
        for j in range(rows.weight.shape[0]):
            sel = rows.piece == j
            if not np.any(sel):
                t[j] = 0.0
                continue
            coef = rows.coef_gb[sel]
            band = np.where(coef > 0, coef * inv, 0.0).sum(axis=1)
            t[j] = np.max(rows.const_s[sel] + band + rows.nest[sel][:, :j] @ t[:j])
        return 1e9 * float(rows.const0_s + rows.weight @ t)
