"""The set-wide state of reading a Chakra trace set (`chakra_import.read_chakra`): the notes
of the rules applied (`Notes`), the collectives' groups (`Groups`: ``involved_dim`` lists,
every dimension, ``pg_name`` ids, deduplicated and checked) and ASTRA-sim's
``--comm-group-configuration`` JSON read and checked (`load_comm_groups`). The rules are
in `chakra_import`'s docstring (**Groups**).
"""

from __future__ import annotations

import collections
import json
from typing import Any

from libra_jax.inputs.limits import LIMITS, as_int, as_path
from libra_jax.inputs.reading import read_text
from libra_jax.types import CommGroup, LibraInputError, show


class Notes:
    """Counts of the rules applied over the whole set, rendered as one sentence each."""

    def __init__(self):
        self.counts: collections.Counter = collections.Counter()
        self.text: dict = {}

    def add(self, key, text: str, count: int = 1) -> None:
        self.counts[key] += count
        self.text.setdefault(key, text)

    def sentences(self) -> list[str]:
        return [self.text[k].format(n=n) for k, n in self.counts.items() if n]


# --------------------------------------------------------------------------- groups
class Groups:
    """The set's groups: dedup and checks (the JSON's groups checked once each)."""

    def __init__(self, comm_groups, source: str, num_ranks: int, num_dims: int | None,
                 notes: Notes):
        self.json, self.source = comm_groups, source
        self.num_ranks, self.num_dims, self.notes = num_ranks, num_dims, notes
        self.index: dict[CommGroup, int] = {}
        self.pg_cache: dict[str, tuple[CommGroup, frozenset | None]] = {}
        self.involved_cache: dict[tuple, tuple[int, Any]] = {}

    def add(self, group: CommGroup) -> int:
        k = self.index.get(group)
        if k is None:
            k = self.index[group] = len(self.index)
        return k

    def _need_dims(self, where, why: str) -> int:
        if self.num_dims is None:
            raise LibraInputError(
                f"{where}: {why}, which ASTRA-sim runs over every network dimension; pass "
                f"num_dims (the network's dimension count) to read it.")
        return self.num_dims

    def involved(self, values: tuple, where) -> int:
        hit = self.involved_cache.get(values)
        if hit is not None:
            k, note = hit
            if note is not None:
                self.notes.add(note, "")
            return k
        k, note = self._involved(list(values), where)
        self.involved_cache[values] = k, note
        return k

    def _involved(self, values: list, where) -> tuple[int, Any]:
        n = len(values)
        note = None
        if self.num_dims is not None and n != self.num_dims:
            d = self.num_dims
            if n < d:
                raise LibraInputError(
                    f"{where}: involved_dim = {show(values)} has {n} entries for a "
                    f"{d}-dimension network (ASTRA-sim reads past its end, hangs on some "
                    f"NPUs and still exits 0); give one entry per network dimension.")
            if any(values[d:]):
                raise LibraInputError(
                    f"{where}: involved_dim = {show(values)} has {n} entries and involves "
                    f"dimension {values.index(True, d)}, but the network has {d} "
                    f"dimensions.")
            note = ("trim", n, d)
            self.notes.add(note,
                           f"{{n}} involved_dim list(s) of {n} entries for a {d}-dimension "
                           f"network: the extra entries are all False and were dropped.")
            values = values[:d]
        if not any(values):
            raise LibraInputError(
                f"{where}: involved_dim = {show(values)} involves no dimension; a "
                f"collective needs at least one.")
        bits = "".join("1" if v else "0" for v in values)
        return self.add(CommGroup(name=f"involved_dim={bits}", involved=tuple(values))), note

    def all_dims(self, where) -> int:
        d = self._need_dims(where, "the collective has neither involved_dim nor pg_name")
        beyond = (f"; for this {d}-dimension network it would read past them"
                  if d > 4 else "")
        self.notes.add("all_dims",
                       f"{{n}} collective(s) with neither involved_dim nor pg_name: every "
                       f"dimension involved (ASTRA-sim's rule; it assumes 4 dimensions, all "
                       f"involved{beyond}).")
        return self.add(CommGroup(name="involved_dim=" + "1" * d, involved=(True,) * d))

    def pg(self, name: str, rank: int, where) -> int:
        cached = self.pg_cache.get(name)
        if cached is None:
            cached = self.pg_cache[name] = self._pg_group(name, where)
        group, members = cached
        if members is None:
            self.notes.add(("whole", name),
                           f"pg_name {name!r} is a group of all {self.num_ranks} NPUs: run "
                           f"as the ordinary collective over every dimension, as ASTRA-sim "
                           f"does ({{n}} node(s)).")
        elif rank not in members:
            raise LibraInputError(
                f"{where}: pg_name {name!r}: group {list(group.ranks) if group.ranks else ''}"
                f" of {self.source} does not list rank {rank}, which runs this collective.")
        return self.add(group)

    def lookup(self, name: str) -> tuple[CommGroup, frozenset | None] | None:
        """``pg(name, ...)``'s group and its members (None: all NPUs), or None where `pg`
        would refuse the name; adds no group and no note."""
        cached = self.pg_cache.get(name)
        if cached is None:
            try:
                cached = self.pg_cache[name] = self._pg_group(name, "")
            except LibraInputError:
                return None
        return cached

    def _pg_group(self, name: str, where) -> tuple[CommGroup, frozenset | None]:
        if self.json is None:
            raise LibraInputError(
                f"{where}: pg_name = {name!r} but no comm_groups JSON was given (ASTRA-sim's "
                f"--comm-group-configuration); pass it to read this trace.")
        try:
            gid = int(name.strip())
        except ValueError:
            raise LibraInputError(
                f"{where}: pg_name = {show(name)}: expected an integer group id (ASTRA-sim "
                f"reads pg_name as the id of a group of {self.source}).") from None
        if gid not in self.json:
            raise LibraInputError(
                f"{where}: pg_name = {name!r}: no group {gid} in {self.source} (it has "
                f"{show(sorted(self.json))}).")
        ranks, key = self.json[gid]
        for npu in ranks:
            if not 0 <= npu < self.num_ranks:
                raise LibraInputError(
                    f"{where}: pg_name = {name!r}: group {key!r} of {self.source} lists NPU "
                    f"{npu}, outside the trace set's ranks [0, {self.num_ranks}).")
        if len(ranks) == 1 < self.num_ranks:
            raise LibraInputError(
                f"{where}: pg_name = {name!r}: group {key!r} of {self.source} lists one NPU; "
                f"ASTRA-sim never finishes a collective over a group of one NPU (the shared "
                f"build exits 0 with no NPU finished); drop the collective or list its "
                f"group's NPUs.")
        if len(set(ranks)) != len(ranks):
            dup = next(r for r, c in collections.Counter(ranks).items() if c > 1)
            raise LibraInputError(
                f"{where}: pg_name = {name!r}: group {key!r} of {self.source} lists NPU "
                f"{dup} more than once.")
        label = str(gid)  # "01" and "1" name one group, as ASTRA-sim reads them
        if len(ranks) == self.num_ranks:
            d = self._need_dims(where, f"pg_name {name!r} is a group of all "
                                       f"{self.num_ranks} NPUs")
            return CommGroup(name=label, involved=(True,) * d), None
        return CommGroup(name=label, ranks=tuple(ranks)), frozenset(ranks)


def load_comm_groups(comm_groups) -> tuple[dict | None, str]:
    """``{id: (ranks, key)}`` from the JSON file or dict, its structure checked."""
    if comm_groups is None:
        return None, "the comm_groups JSON"
    if isinstance(comm_groups, dict):
        raw, source = comm_groups, "the comm_groups mapping"
    else:
        path = as_path(comm_groups, "comm_groups")
        source = path
        text = read_text(path, "communicator-group JSON")

        def pairs(items):
            seen = {}
            for k, v in items:
                if k in seen:
                    raise LibraInputError(f"{path}: group {k!r} is given twice.")
                seen[k] = v
            return seen

        try:
            raw = json.loads(text, object_pairs_hook=pairs)
        except json.JSONDecodeError as e:
            raise LibraInputError(
                f"{path}, line {e.lineno}: not valid JSON ({e.msg}).") from None
        except RecursionError:
            raise LibraInputError(f"{path}: the JSON is nested too deeply.") from None
        if not isinstance(raw, dict):
            raise LibraInputError(
                f"{path}: expected a JSON object {{\"<group id>\": [NPU ids...]}}, got "
                f"{type(raw).__name__}.")
    out = {}
    for key, ranks in raw.items():
        try:
            gid = int(str(key).strip())
        except ValueError:
            gid = None
        if gid is None or gid <= 0:
            raise LibraInputError(
                f"{source}: group id {show(key)}: expected an integer > 0 (ASTRA-sim reads "
                f"the ids as integers and requires them > 0).")
        if gid in out:
            raise LibraInputError(f"{source}: group id {gid} is given twice.")
        if not isinstance(ranks, (list, tuple)) or not ranks:
            raise LibraInputError(
                f"{source}: group {key!r} = {show(ranks)}: expected a non-empty list of NPU "
                f"ids.")
        out[gid] = ([as_int(r, f"{source}: group {key!r}[{i}]", 0,
                            LIMITS.max_npus - 1) for i, r in enumerate(ranks)], str(key))
    return out, source
