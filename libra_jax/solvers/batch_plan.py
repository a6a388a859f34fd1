"""The batch engine's call planner (`batch`): buckets, chunk sizes, tiers and their cost model.

A problem's bucket (`bucket_shape`: D and K on the 1.5x ladder of `_ladder`, the other sizes
powers of two), the padding of problems to a bucket (`pad_stacked`, `pad_concat`) and the
stacking helpers (`stack`, `take`, `unstack`); the chunk sizes of a bucket's batch
(`CHUNK_LADDER`, `chunk_plan`); the tiers of XLA optimisation and the measured
compile-vs-padding cost model (`TIERS`, `problem_seconds`, `program_plan`) by which a call's
buckets are merged (`plan_buckets`), across calls with the padding paid as rent (`Paid`);
the programs a process has run or finds stored (`COMPILED`, `compiled_for`, `remember`).
Pure host-side planning: nothing here runs a kernel. See `batch`'s docstring for the whole
engine.
"""

from __future__ import annotations

import ast
import dataclasses

import jax
import numpy as np

from libra_jax.model.problem import (
    ARRAY_FIELDS,
    SIZE_AXES,
    Problem,
    problem_sizes,
)
from libra_jax.solvers.compilation import STORE

CHUNK_LADDER = (16, 256, 1024, 65536, 524288)


def default_max_chunk() -> int:
    """Largest chunk per device call: 256 problems on CPUs, 65536 on accelerators. On 2 CPU
    cores, 8,192 random problems at bucket (6, 8, 1, 1, 0, 0) took 36-41, 35-36, 32-33,
    33-36 and 42-44 us each in chunks of 64, 128, 256, 512 and 1024 (larger chunks fall out
    of the caches: 8192 ran 30-60% slower than 1024; smaller ones pay the call)."""
    return 256 if jax.default_backend() == "cpu" else 65536


def _ladder(n: int, minimum: int = 4) -> int:
    """The bucket size of ``n`` dimensions or phases: the least of 4, 6, 8, 12, 16, 24, ...
    (powers of two and 1.5x them) that holds max(n, ``minimum``). Padding a 2- or 3-dim
    problem to 4 costs little and saves whole programs; above that a step of 1.5x pads at
    most half of a problem's size (powers of two: up to all of it). On 2 cores, in chunks of
    256, 4,096 problems of D 2-5 and K 1-8 took 36-39 us each at D 6 against 41-42 at D 8,
    and 4,096 of K 1-12 (D 2-5, with budgets) 49-56 us at K 12 against 57-62 at K 16."""
    n = max(n, minimum, 1)
    top = 1 << (n - 1).bit_length()  # the power of two >= n
    return top * 3 // 4 if top >= 4 and n <= top * 3 // 4 else top


def _pow2(n: int, minimum: int = 0) -> int:
    n = max(n, minimum)
    return 0 if n == 0 else 1 << (n - 1).bit_length()


def bucket_shape(p: Problem) -> tuple[int, ...]:
    """The padded (D, K, I, E, J, R) a problem is solved at."""
    d, k, i, e, j, r = problem_sizes(p)
    return (_ladder(d), _ladder(k), _pow2(i), _pow2(e), _pow2(j), _pow2(r))


#: The cost model of `plan_buckets`, measured on 2 CPU cores side by side in one run (the
#: kernel of bucket (8, 8, 1, 1, 0, 0), 2,048 random problems:
#: `experiments/bench_coldstart.py --calibrate`, `experiments/results/
#: bench_coldstart_calibration.md`). A program costs its tracing and lowering (~1.5 s) and
#: XLA's compilation, which depends on the tier:
#:
#: * "full": XLA's default optimisation: 5.4-6.1 s before the first chunk; 169-198 us per
#:   problem in chunks of 256-1024 (334 in chunks of 16: ~2 ms per chunk);
#: * "quick": LLVM at -O0 (``xla_backend_optimization_level=0``): 1.7-2.6 s; 3.8-5.3x
#:   slower per problem (~9 ms per chunk): a first call of a few hundred problems is over
#:   sooner, a large one pays for the full tier.
#:
#: Per problem, at "full", a bucket (D, K, I, E, J, R) takes ~10.5 us x (D + J)^1.2 x
#: (1 + (K + R) / 10) (first measured as 9 us x (D + J)^1.5, whatever K: 72-82 us at D 4,
#: 162-220 us at D 8, 662 us at D 16 in chunks of 1024; the kernel of issue 30 depends
#: more on K and less on D: CPU us per problem in chunks of 256, 2,048 problems of D 2-4
#: and K 1-4 padded to each bucket (D, K, 2, 1), on 2 cores: D 4: 24, 33, 48, 64 at K 4,
#: 8, 16, 24; D 6: 40, 50, 71, 99; D 8: 44, 60, 85, 106). (Measured again on 2 cores of another machine for issue
#: 30: 2.2-2.3 s before the first chunk at "full", 0.6-0.9 s at "quick"; 45 us per
#: problem at "full" in chunks of 256, 73 in chunks of 1024: both the compilation and the
#: run were ~2.5x faster there, so their ratio, which is what the plans use, held.) The tiers give the same results (the same XLA graph; only
#: LLVM's optimisation of it differs: the before/after test runs both).
TIERS = {"full": {}, "quick": {"xla_backend_optimization_level": 0}}


COMPILE_SECONDS = {"full": 5.5, "quick": 2.0}


#: The single-problem program (`_kernel_one`, chunk size 1) compiles in about this share of
#: a chunk program's time (1.2 s against 1.8-2.0 s at the quick tier, 2 cores).
SINGLE_COMPILE_SHARE = 0.6


SLOWDOWN = {"full": 1.0, "quick": 4.5}


#: Work per chunk besides its problems (slicing, casting, the call, fetching the results).
CHUNK_SECONDS = {"full": 2e-3, "quick": 9e-3}


#: On an accelerator a chunk costs mostly a fixed time (every interior-point iteration
#: launches the same kernels whatever the chunk holds) and a problem slot little. One H200
#: (2026-12-04, `experiments/results/bench_batch_gpu_h200.md`), 10^6 gpt3_4d problems of
#: bucket (4, 12, 0, 1, 0, 0), float64: 977 chunks of 1024 (the plan of the CPU model
#: above) ran 5.2 ms each, 197,697 problems/s of solving; the same problems in 16 chunks of
#: 65536 ran 384,305 problems/s (the last commit before the cost model, side by side in one
#: run), ~160 ms a chunk: ~5 ms a chunk and ~2.4 us a problem slot, 1/50 of the CPU model's
#: 122 us for that bucket. The quick tier is not measured there: `plan_call` plans it on an
#: accelerator only when the caller asks for it, with the CPU's ratios.
ACCELERATOR_PROBLEM_SHARE = 1.0 / 50.0
ACCELERATOR_CHUNK_SECONDS = {"full": 5e-3, "quick": 5e-3 * 4.5}


def on_accelerator() -> bool:
    """Whether the planner plans for an accelerator (JAX's default backend is not the CPU),
    as `default_max_chunk` does."""
    return jax.default_backend() != "cpu"


def chunk_seconds(tier: str = "full") -> float:
    """Estimated fixed seconds of one chunk of ``tier`` on the default backend."""
    return (ACCELERATOR_CHUNK_SECONDS if on_accelerator() else CHUNK_SECONDS)[tier]


def problem_seconds(shape: tuple[int, ...], tier: str = "full") -> float:
    """Estimated kernel seconds per problem of bucket ``shape`` (see `TIERS`) on the default
    backend (`ACCELERATOR_PROBLEM_SHARE` of the CPU's on an accelerator)."""
    d, k, _, _, j, r = shape
    share = ACCELERATOR_PROBLEM_SHARE if on_accelerator() else 1.0
    return 10.5e-6 * (d + j) ** 1.2 * (1.0 + (k + r) / 10.0) * SLOWDOWN[tier] * share


def _join(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(max(x, y) for x, y in zip(a, b))


def program_plan(shape: tuple[int, ...], n: int, max_chunk: int,
                 compiled: frozenset = frozenset(),
                 tiers=tuple(TIERS), credit: float = 0.0,
                 calls: int = 1, stored: frozenset = frozenset()
                 ) -> tuple[float, str, list[int]]:
    """(estimated seconds, tier, chunk sizes) of the cheapest way to run ``n`` problems of
    bucket ``shape``, given the programs (bucket, chunk size, tier) already ``compiled``
    and the padding ``credit`` (seconds: what programs of this bucket would have saved the
    calls before, `paid_credit`): a new program of the "full" tier costs that much less
    to compile in the estimate (down to `MIN_COMPILE_SHARE` of it). ``calls``: how many
    calls like this one a compiled program will serve (`warm_up`'s): its compilation
    counts for 1 / ``calls`` of it in this one. A program in ``stored`` (on disk from an
    earlier process, not yet in this one) costs `LOAD_SECONDS` instead of a compilation."""
    best = None
    for tier in tiers:
        sizes = {c for b, c, t in compiled if b == shape and t == tier}
        loadable = {c for b, c, t in stored if b == shape and t == tier} - sizes
        compile_s = COMPILE_SECONDS[tier]
        if tier == "full" and credit > 0.0:
            compile_s = max(compile_s - credit, MIN_COMPILE_SHARE * compile_s)
        compile_s /= calls
        plan = chunk_plan(n, max_chunk, sizes, problem_seconds(shape, tier),
                          compile_s, chunk_seconds(tier), loadable)
        new = {c for c in plan if c not in sizes}
        cost = (sum(plan) * problem_seconds(shape, tier)
                + sum(LOAD_SECONDS if c in loadable else compile_s for c in new)
                + chunk_seconds(tier) * len(plan))
        if best is None or cost < best[0]:
            best = (cost, tier, plan)
    return best


def plan_buckets(counts: dict[tuple, int], max_chunk: int,
                 compiled: frozenset = frozenset(), tiers=tuple(TIERS),
                 paid: frozenset = frozenset(), calls: int = 1,
                 stored: frozenset = frozenset()) -> dict[tuple, tuple]:
    """Which bucket each bucket's problems run in: ``{bucket: target}``, a target being the
    bucket itself or a larger one (elementwise >=) they are padded up to.

    Each program costs `COMPILE_SECONDS` of its tier to compile unless it is in
    ``compiled`` (triples (bucket, chunk size, tier) this process has compiled already), and
    every problem slot of a chunk costs `problem_seconds` of its bucket and tier
    (`program_plan`). Buckets are merged greedily, the pair whose merge (into their
    elementwise maximum, or into a compiled bucket holding both) saves the most estimated
    seconds first, while a merge saves any. A first call of a few hundred mixed problems
    thus compiles one quick program; a later call of thousands more compiles at most one
    optimised program, or reuses what is there while the padding costs less than a new
    program would.

    Across calls, the padding is rent and a program is bought (ski rental): ``paid``
    (`Paid.key`) holds the problems earlier calls of this process ran padded, per (bucket,
    the bucket it ran in); what they would have saved in a bucket ``t`` (`paid_credit`) is
    taken off the estimated compilation of ``t``'s program. A mix solved again and again
    thus gets the finer programs once its padding has cost about what compiling them does
    (by the cost model), and a call that repeats nothing pays as before."""

    targets: dict[tuple, tuple] = {}  # (join, n) -> (cost, target), computed once each
    credits: dict[tuple, float] = {}  # shape -> paid_credit, computed once each

    def credit(t):
        if t not in credits:
            credits[t] = paid_credit(paid, t) if paid else 0.0
        return credits[t]

    def best_target(join, n):
        if (join, n) not in targets:
            options = [join] + [shape for shape, _, _ in compiled | stored
                                if all(x >= y for x, y in zip(shape, join))]
            targets[join, n] = min(((program_plan(t, n, max_chunk, compiled, tiers,
                                                  credit(t), calls, stored)[0], t)
                                    for t in set(options)), key=lambda ct: (ct[0], ct[1]))
        return targets[join, n]

    clusters = []  # [cost, target, join, n, members, id]
    for shape, n in sorted(counts.items()):
        c, t = best_target(shape, n)
        clusters.append([c, t, shape, n, [shape], len(clusters)])
    merges: dict[tuple, tuple] = {}  # (id a, id b) -> (saving, merged cluster)
    uid = len(clusters)
    while len(clusters) > 1:
        best = None
        for a in range(len(clusters)):
            for b in range(a + 1, len(clusters)):
                ca, cb = clusters[a], clusters[b]
                key = (ca[5], cb[5])
                if key not in merges:
                    join, n = _join(ca[2], cb[2]), ca[3] + cb[3]
                    c, t = best_target(join, n)
                    merges[key] = (ca[0] + cb[0] - c, [c, t, join, n, ca[4] + cb[4]])
                saving, merged = merges[key]
                if saving > 0 and (best is None or saving > best[0]):
                    best = (saving, a, b, merged)
        if best is None:
            break
        _, a, b, merged = best
        uid += 1
        clusters = [c for i, c in enumerate(clusters) if i not in (a, b)] + [merged + [uid]]
    return {shape: c[1] for c in clusters for shape in c[4]}


#: Estimated seconds (in `COMPILE_SECONDS`' units) to load a program another process stored:
#: 0.1-0.3 s measured on 2 cores, against 2.2-2.4 s to compile at the full tier.
LOAD_SECONDS = 0.5


#: A program's estimated compilation never falls below this share of `COMPILE_SECONDS`
#: whatever the padding credit (`program_plan`): its loading and first run are not free.
MIN_COMPILE_SHARE = 0.01


def paid_credit(paid: frozenset, shape: tuple[int, ...]) -> float:
    """Estimated seconds the problems of ``paid`` (triples (bucket, bucket it ran in,
    problems), `Paid.key`) would have saved running in ``shape`` instead: those whose
    bucket fits ``shape``, each the difference of `problem_seconds` (full tier) where
    ``shape`` is the smaller."""
    here = problem_seconds(shape)
    total = 0.0
    for bucket, ran, n in paid:
        if all(x <= y for x, y in zip(bucket, shape)):
            total += n * max(problem_seconds(ran) - here, 0.0)
    return total


class Paid:
    """The padding a process's calls paid, per kind of kernel program: problems per (bucket,
    the larger bucket they ran in) (`plan_buckets`' ski rental). ``key(kind)`` gives them as
    they stood when the kind's total last doubled (triples (bucket, ran in, problems)), so
    that a plan made for a mix is taken again (`_PLANS`) until then: a mix of 10,000
    problems is planned afresh after calls 1, 2, 4, 8, ..., not at every call."""

    def __init__(self) -> None:
        self.counts: dict = {}
        self.totals: dict = {}
        self.keys: dict = {}

    def add(self, kind, bucket: tuple, ran: tuple, n: int) -> None:
        if bucket != ran and n > 0:
            mine = self.counts.setdefault(kind, {})
            mine[bucket, ran] = mine.get((bucket, ran), 0) + n
            before = self.totals.get(kind, 0)
            self.totals[kind] = before + n
            if before.bit_length() != self.totals[kind].bit_length():
                self.keys.pop(kind, None)

    def key(self, kind) -> frozenset:
        if kind not in self.keys:
            self.keys[kind] = frozenset((b, r, n) for (b, r), n in
                                        self.counts.get(kind, {}).items())
        return self.keys[kind]


# The programs a process has run or finds stored, and the padding it paid: what
# `plan_call` is given by the engines (`batch`).

#: (kernel kind, bucket, chunk size, tier) of the kernel programs this process has run, for
#: `plan_buckets`' cost model.
COMPILED: set = set()


#: The padding this process's calls paid, per kind (`Paid`: the planner's ski rental).
PAID = Paid()


def compiled_for(kind) -> tuple[frozenset, frozenset]:
    """(bucket, chunk size, tier) of the programs of ``kind`` this process has run, and of
    the others the executable store holds on disk from earlier processes (`remember`):
    loading one costs `LOAD_SECONDS`, a small share of compiling it."""
    mine = frozenset((shape, c, tier) for k, shape, c, tier in COMPILED if k == kind)
    notes = STORE.notes()
    key = (repr(kind), len(notes))
    if key not in STORED:
        stored = set()
        prefix = key[0] + "|"
        for note in notes:
            if note.startswith(prefix):
                try:
                    shape, c, tier = ast.literal_eval(note[len(prefix):])
                    stored.add((tuple(int(x) for x in shape), int(c), str(tier)))
                except (ValueError, SyntaxError, TypeError):
                    continue  # (a damaged line: that program is compiled again if needed)
        STORED.clear()
        STORED[key] = frozenset(stored)
    return mine, STORED[key] - mine


#: The stored programs of the last kind `compiled_for` looked up, by (kind, notes read).
STORED: dict = {}


def remember(kind, shape, size, tier) -> None:
    """Records a program this process ran (the planner's `COMPILED`, and a note in the
    executable store, which holds the program itself, for later processes)."""
    if (kind, shape, size, tier) not in COMPILED:
        COMPILED.add((kind, shape, size, tier))
        STORE.note(f"{kind!r}|{(shape, size, tier)!r}")


def plan_call(counts: dict[tuple, int], max_chunk: int, compiled: frozenset, tier,
              fixed: bool = False, paid: frozenset = frozenset(),
              calls: int = 1, stored: frozenset = frozenset()) -> tuple[dict, dict]:
    """The plan of one call with ``counts`` problems per bucket: (``{bucket: target}`` from
    `plan_buckets`, ``{target: (tier, chunk sizes)}`` from `program_plan`), given the
    programs ``compiled``, the padding ``paid`` before (`Paid.key`), the ``calls`` like
    it the programs will serve and those ``stored`` by earlier processes (`program_plan`),
    and the caller's ``tier`` (None: the cost model chooses). With
    ``fixed`` (the engines' ``fixed_programs``) every bucket runs in its own program, in
    chunks of the largest `CHUNK_LADDER` size <= ``max_chunk``, at ``tier`` (None: "full"):
    a plan that depends on nothing but each problem's bucket. A plan depends on nothing
    else: one made before for the same arguments is taken again (`_PLANS`)."""
    if fixed:
        size = ladder_sizes(max_chunk)[-1]
        return ({shape: shape for shape in counts},
                {shape: (tier or "full", [size] * -(-n // size))
                 for shape, n in counts.items()})
    # (the quick tier is not measured on an accelerator: there it runs only when asked for)
    tiers = (("full",) if on_accelerator() else tuple(TIERS)) if tier is None else (tier,)
    key = (frozenset(counts.items()), max_chunk, compiled, tiers, paid, calls, stored,
           on_accelerator())
    plan = _PLANS.get(key)
    if plan is None:
        target = plan_buckets(counts, max_chunk, compiled, tiers, paid, calls, stored)
        totals: dict[tuple, int] = {}
        for shape, c in counts.items():
            totals[target[shape]] = totals.get(target[shape], 0) + c
        plan = target, {shape: program_plan(shape, total, max_chunk, compiled, tiers,
                                            paid_credit(paid, shape), calls, stored)[1:]
                        for shape, total in totals.items()}
        if len(_PLANS) >= 256:
            _PLANS.clear()
        _PLANS[key] = plan
    return dict(plan[0]), dict(plan[1])


#: The plans `plan_call` made, by what decides them (the counts per bucket, the largest
#: chunk, the programs compiled, the tiers): a call like an earlier one (the same sizes in
#: the same numbers, nothing compiled since) plans nothing again (planning took 0.02 s for
#: the 10,000 problems of `experiments/bench_list_api.py`'s varied mix, 60 buckets).
_PLANS: dict[tuple, tuple] = {}


def pad_stacked(p: Problem, shape: tuple[int, ...]) -> Problem:
    """Pads a stacked batch ``p`` (leaves [B, ...], numpy) to ``shape`` = (D, K, I, E, J, R)
    with the neutral entries of the module docstring, all problems at once: each field's axes
    and fill value come from its metadata (`problem.ARRAY_FIELDS`)."""
    if any(a > b for a, b in zip(problem_sizes(p), shape)):
        raise ValueError(f"problems of size {problem_sizes(p)} do not fit the bucket {shape}")
    size = dict(zip(SIZE_AXES, shape))

    def pad(field):
        meta = field.metadata
        x = np.asarray(getattr(p, field.name), meta["dtype"])
        axes = meta["axes"]
        width = [(0, 0)] * (x.ndim - len(axes)) + [
            (0, size[a] - n) for a, n in zip(axes, x.shape[x.ndim - len(axes):])]
        if not any(w for _, w in width):
            return x
        return np.pad(x, width, constant_values=meta["fill"])

    return dataclasses.replace(p, has_cost=False, **{f.name: pad(f) for f in ARRAY_FIELDS})


def pad_concat(groups: list[Problem], shape: tuple[int, ...]) -> Problem:
    """The stacked batches ``groups`` padded to ``shape`` (as `pad_stacked`) and
    concatenated along the batch axis: one array per field, filled with the neutral values
    and each group written into its block (no per-group padded copies)."""
    for g in groups:
        if any(a > b for a, b in zip(problem_sizes(g), shape)):
            raise ValueError(f"problems of size {problem_sizes(g)} do not fit the bucket "
                             f"{shape}")
    size = dict(zip(SIZE_AXES, shape))
    counts = [int(np.shape(g.lo)[0]) for g in groups]
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    fields = {}
    for field in ARRAY_FIELDS:
        meta = field.metadata
        axes = meta["axes"]
        xs = [np.asarray(getattr(g, field.name)) for g in groups]
        free = xs[0].shape[1:xs[0].ndim - len(axes)]
        out = np.full((int(starts[-1]), *free, *(size[a] for a in axes)), meta["fill"],
                      meta["dtype"])
        for x, a, b in zip(xs, starts[:-1], starts[1:]):
            out[(slice(a, b), ..., *(slice(0, k) for k in x.shape[x.ndim - len(axes):]))] = x
        fields[field.name] = out
    return dataclasses.replace(groups[0], has_cost=False, **fields)


def stack(problems: list[Problem]) -> Problem:
    """Stacks same-shape problems along a new leading batch axis (numpy leaves)."""
    problems = [dataclasses.replace(q, has_cost=False) for q in problems]
    return jax.tree.map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *problems)


def take(p: Problem, idx) -> Problem:
    """The problems ``idx`` of a stacked batch."""
    return jax.tree.map(lambda x: np.asarray(x)[idx], p)


def unstack(p: Problem, i: int) -> Problem:
    """Problem ``i`` of a stacked batch (its own sizes are those of the batch)."""
    return jax.tree.map(lambda x: np.asarray(x)[i], p)


def ladder_sizes(max_chunk: int) -> list[int]:
    """The `CHUNK_LADDER` sizes a call of at most ``max_chunk`` problems per chunk may use
    (the smallest one always)."""
    return [c for c in CHUNK_LADDER if c <= max(max_chunk, CHUNK_LADDER[0])]


def chunk_plan(n: int, max_chunk: int, compiled_sizes=(), problem_s: float = 0.0,
               compile_s: float = COMPILE_SECONDS["full"],
               chunk_s: float = CHUNK_SECONDS["full"], load_sizes=()) -> list[int]:
    """Chunk sizes covering ``n`` problems, all from `CHUNK_LADDER` (<= ``max_chunk``; the
    last chunk is padded by repeating a problem): the cheapest, by the cost model of
    `plan_buckets` (``problem_s`` seconds per problem slot, ``compile_s`` per chunk size not
    in ``compiled_sizes``, ``chunk_s`` per chunk), of full chunks of the largest
    size then one of a size holding the rest, and one size throughout. With no cost given
    that is the first: a bucket compiles a few programs whatever the batch sizes; a size
    already compiled is reused rather than compiling another (a call of 10,000 after one of
    200 runs 40 chunks of 256 unless a program of 1024 pays for its compilation)."""
    ladder = ladder_sizes(max_chunk)
    full, left = divmod(n, ladder[-1])
    mixed = [ladder[-1]] * full
    plans = []
    if left:
        plans += [mixed + [c] for c in ladder if c >= left]
    else:
        plans.append(mixed)
    plans += [[c] * -(-n // c) for c in ladder if n > 0]
    if n == 1:
        # A single problem may also run alone: size 1 is the program `_kernel_one`, traced
        # without vmap (cheaper to compile: `SINGLE_COMPILE_SHARE`), chosen when no compiled
        # size costs less.
        plans.append([1])

    def cost(plan):
        new = {c for c in plan if c not in compiled_sizes}
        loads = {c for c in new if c in load_sizes}
        return (sum(plan) * problem_s + LOAD_SECONDS * len(loads)
                + compile_s * len(new - loads) * (
            SINGLE_COMPILE_SHARE if plan == [1] else 1.0) + chunk_s * len(plan), sum(plan))

    return min(plans, key=cost) if plans else []
