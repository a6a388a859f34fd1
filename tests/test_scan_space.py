"""The scan's design space (`libra_jax.studies.scan.space`) at scale and with the mapping
search: the enumeration order against plain nested loops, ``iter_designs(start, stop)``
against slicing, counting by arithmetic, memory flat in the number of designs iterated,
jumping into a 10^8-design space without building the designs before the start, and
``workloads[i].mapping: search`` (every co-search placement once, the fixed one among them).
"""

from __future__ import annotations

import dataclasses
import itertools
import pathlib
import tracemalloc

import numpy as np
import pytest

from libra_jax.inputs.generators import Placement, parallel_communicators
from libra_jax.solvers import batch
from libra_jax.studies import scan
from libra_jax.studies.cosearch import enumerate_placements
from libra_jax.studies.scan import space as space_mod
from libra_jax.studies.scan.space import (
    chunked,
    count_placements,
    fixed_placement,
    workload_placements,
)
from libra_jax.types import LibraInputError

GPT3 = "workload/GPT_3.txt"


def _space(npus=24, max_dims=3, budgets=(100.0, 200.0), tier_options=None,
           workloads=((GPT3, 4, "fixed"),)):
    return scan.make_space(scan.ScanConfig(
        space=scan.SpaceConfig(npus=npus, min_dims=2, max_dims=max_dims,
                               budgets_gbps=list(budgets), tier_options=tier_options),
        workloads=[scan.ScanWorkloadConfig(file=f, tp=tp, mapping=m, name=f"w{i}")
                   for i, (f, tp, m) in enumerate(workloads)],
    ))


# Mapping skips ((3,8), (6,4) ... cannot hold tp 4 innermost-first), Switch skips
# (InterChiplet has no Switch price), two tier options for 2 dims, 2 and 3 dims, 2 budgets,
# a workload with the mapping search.
MIXED = dict(npus=24, max_dims=3, tier_options=[
    ["InterChiplet", "InterPod"], ["InterNode", "InterPod"],
    ["InterChiplet", "InterNode", "InterPod"]],
    workloads=((GPT3, 4, "fixed"), (GPT3, 2, "search")))


def _nested_loops(space):
    """The enumeration written as plain nested loops over everything, filtering each design
    (the reference order: D, shape, workload, mapping, budget, tiers, blocks), and the skip
    counts found the same way."""
    cm = space.cost_model.tiers
    designs, skipped = [], space_mod.new_skip_counts(space)
    for d in space.dims:
        for shape in scan.enumerate_shapes(space.npus, d, space.min_dim_size):
            for wi, w in enumerate(space.workloads):
                maps = workload_placements(w, shape)
                if not maps:
                    skipped["mapping_designs"] += (len(space.budgets_gbps) * len(
                        space.tier_options[d]) * len(space.blocks) ** d)
                    skipped["mapping_shapes"][w.name] += 1
                for m, b, tiers, blocks in itertools.product(
                        maps, space.budgets_gbps, space.tier_options[d],
                        itertools.product(space.blocks, repeat=d)):
                    if any(x == "Switch" and "Switch" not in cm[t]
                           for x, t in zip(blocks, tiers)):
                        skipped["switch_designs"] += 1
                        continue
                    designs.append(scan.Design(len(designs), shape, blocks, tiers, b, wi, m))
    return designs, skipped


def test_order_ids_and_counts_equal_nested_loops():
    space = _space(**MIXED)
    ref, ref_skipped = _nested_loops(space)
    assert list(scan.iter_designs(space)) == ref
    total, skipped = scan.count_designs(space)
    assert (total, skipped) == (len(ref), ref_skipped)
    assert skipped["mapping_designs"] > 0 and skipped["switch_designs"] > 0
    assert skipped["mapping_shapes"]["w1"] == 0  # the search fits tp 2 on every shape


def test_fixed_mapping_keeps_todays_order():
    """Default workloads: one mapping per shape, the placement of `parallel_communicators`,
    the same designs and ids as before the mapping existed."""
    space = _space(npus=16, max_dims=3)
    designs = list(scan.iter_designs(space))
    assert designs == _nested_loops(space)[0]
    assert [d.design_id for d in designs] == list(range(len(designs)))
    for d in designs:
        tp_comm, dp_comm = parallel_communicators(d.shape, 4)
        assert d.mapping.pp == (1,) * len(d.shape)
        assert Placement.comm(d.mapping.tp).tolist() == list(tp_comm)
        assert Placement.comm(d.mapping.dp).tolist() == list(dp_comm)


@pytest.mark.parametrize("start, stop", [
    (0, None), (0, 0), (0, 1), (5, 6), (7, 200), (143, 415), (416, None), (10**6, None),
    (0, 10**6), (35, 36),
])
def test_iter_range_equals_slicing(start, stop):
    space = _space(**MIXED)
    full = list(scan.iter_designs(space))
    assert len(full) > 400
    assert list(scan.iter_designs(space, start, stop)) == full[start:stop]


def test_every_range_boundary_equals_slicing():
    space = _space(**MIXED)
    full = list(scan.iter_designs(space))
    for start in range(0, len(full) + 2, 7):
        got = list(scan.iter_designs(space, start, start + 11))
        assert got == full[start:start + 11], start


@pytest.mark.parametrize("start, stop, key", [
    (-1, None, "start = -1"), (0, -2, "stop = -2"), (3, 2, "stop = 2 is below start = 3"),
    (True, None, "start = True"), (1.5, None, "start = 1.5"),
])
def test_bad_range_names_the_key_and_value(start, stop, key):
    with pytest.raises(LibraInputError, match=key.replace("(", r"\(")):
        next(scan.iter_designs(_space(), start, stop))


def _big_space():
    """65,536 NPUs, 2-6 dims, 3 blocks, 14 budgets, 3 workloads: 107,549,694 designs."""
    tiers = [["InterPackage"] * (d - 2) + ["InterNode", "InterPod"] for d in range(2, 7)]
    return scan.make_space(scan.ScanConfig(
        space=scan.SpaceConfig(npus=65536, min_dims=2, max_dims=6, tier_options=tiers,
                               budgets_gbps=[100.0 * (i + 1) for i in range(14)]),
        workloads=[scan.ScanWorkloadConfig(file=GPT3, tp=16),
                   scan.ScanWorkloadConfig(file="workload/Turing_NLG.txt", tp=1),
                   scan.ScanWorkloadConfig(file="workload/MSFT_1T.txt", tp=128)],
    ))


def test_count_and_jump_in_a_1e8_space_build_no_skipped_design(monkeypatch):
    """Counting builds no design; starting near the end of 10^8 designs builds only the
    designs asked for (Design is counted where iter_designs builds it)."""
    space = _big_space()
    built = []

    def counting_design(*args):
        built.append(args[0])
        return scan.Design(*args)

    monkeypatch.setattr(space_mod, "Design", counting_design)
    total, skipped = scan.count_designs(space)
    assert total == 107_549_694 and not built
    assert skipped["mapping_designs"] == skipped["switch_designs"] == 0
    last = list(scan.iter_designs(space, total - 3))
    assert built == [d.design_id for d in last] == [total - 3, total - 2, total - 1]
    assert last[-1].shape == (2048, 2, 2, 2, 2, 2) and last[-1].workload == 2
    assert last[-1].blocks == ("Switch",) * 6 and last[-1].budget_gbps == 1400.0
    middle = list(scan.iter_designs(space, 54_321_000, 54_321_005))
    assert [d.design_id for d in middle] == list(range(54_321_000, 54_321_005))
    assert len(built) == 8


def _peak_bytes(space, n: int) -> int:
    """tracemalloc peak while the run loop's way (`chunked` lists of 2,048) goes over n
    designs."""
    tracemalloc.start()
    seen = 0
    for chunk in chunked(scan.iter_designs(space, 0, n), 2048):
        seen += len(chunk)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seen == n
    return peak


def test_memory_does_not_grow_with_designs_iterated():
    space = _big_space()
    small, large = _peak_bytes(space, 10**5), _peak_bytes(space, 10**6)
    assert large < 1.5 * small, (small, large)
    assert large < 8 * 2**20  # a chunk of 2,048 designs, not the designs seen


# ------------------------------------------------------------------------- mapping search


@pytest.mark.parametrize("shape, tp", [
    ((4, 4), 4), ((2, 8), 4), ((3, 8), 4), ((6, 4), 4), ((2, 12), 8), ((4, 4, 4), 16),
    ((4, 4, 4), 1), ((2, 2, 2, 2048), 128), ((8, 8, 256), 16), ((3, 5), 2),
])
def test_count_placements_equals_the_cosearch_enumeration(shape, tp):
    npus = int(np.prod(shape))
    w = dataclasses.replace(_space().workloads[0], tp=tp, mapping=scan.config.Mapping.search)
    placements = workload_placements(w, shape)
    assert placements == enumerate_placements(shape, tp=tp, pp=1, dp=npus // tp)
    assert count_placements(w, shape) == len(placements) == len(set(placements))
    fixed = fixed_placement(shape, tp)
    assert fixed is None or fixed in placements
    w = dataclasses.replace(w, mapping=scan.config.Mapping.fixed)
    assert count_placements(w, shape) == len(workload_placements(w, shape)) == int(
        fixed is not None)


def test_mapping_search_gives_every_placement_once_per_shape():
    space = _space(npus=16, max_dims=3, workloads=((GPT3, 4, "search"),))
    designs = list(scan.iter_designs(space))
    total = 0
    for d in space.dims:
        for shape in scan.enumerate_shapes(16, d):
            expected = enumerate_placements(shape, tp=4, pp=1, dp=4)
            got = [x.mapping for x in designs if x.shape == shape]
            assert sorted(set(got), key=expected.index) == expected
            for p in expected:  # each placement once per (budget, tiers, blocks)
                keys = [(x.budget_gbps, x.tiers, x.blocks) for x in designs
                        if x.shape == shape and x.mapping == p]
                assert len(keys) == len(set(keys)) == 2 * 3 ** d  # budgets x blocks
            total += len(expected) * 2 * 3 ** d
    assert scan.count_designs(space)[0] == len(designs) == total
    assert len({(x.shape, x.mapping) for x in designs}) > len({x.shape for x in designs})


def test_mapping_search_fits_shapes_the_fixed_mapping_cannot():
    """(3, 8) with tp 4: TP from the innermost dim fails (4 neither divides nor fills 3);
    the search lays TP on dim 1 alone."""
    fixed = _space(npus=24, max_dims=2)
    search = _space(npus=24, max_dims=2, workloads=((GPT3, 4, "search"),))
    assert (3, 8) not in {x.shape for x in scan.iter_designs(fixed)}
    maps = {x.mapping for x in scan.iter_designs(search) if x.shape == (3, 8)}
    assert maps == {Placement((1, 4), (1, 1), (3, 2))}
    assert scan.count_designs(search)[1]["mapping_shapes"] == {"w0": 0}


def test_bad_mapping_value_names_the_key():
    with pytest.raises(LibraInputError, match=r"workloads\[0\]\.mapping = 'serch': expected "
                                              "one of fixed, search"):
        _space(workloads=((GPT3, 4, "serch"),))


def test_design_traffic_of_a_mapping_and_its_checks():
    space = _space(npus=16, max_dims=2)
    w = space.workloads[0]
    # The fixed placement's traffic is the default's; the other placements differ.
    np.testing.assert_array_equal(scan.design_traffic(w, (4, 4))[0], scan.design_traffic(
        w, (4, 4), fixed_placement((4, 4), 4))[0])
    other = Placement((1, 4), (1, 1), (4, 1))
    t = scan.design_traffic(w, (4, 4), other)[0]
    assert not np.array_equal(t, scan.design_traffic(w, (4, 4))[0])
    assert (t[:, 0] > 0).any() and (t[:, 1] > 0).any()  # DP on dim 0, TP on dim 1
    for bad in (Placement((2, 4), (1, 1), (2, 1)), Placement((2, 2), (2, 1), (1, 2)),
                Placement((4,), (1,), (4,))):
        with pytest.raises(LibraInputError, match="does not fit the shape \\[4, 4\\]"):
            scan.design_traffic(w, (4, 4), bad)


def test_mapping_search_best_is_at_least_the_fixed_mapping_real_solver():
    """Real solver: per (shape, budget) the best placement's step time <= the fixed one's;
    rows name their mapping; dedup solves each (shape, mapping, budget) once and gives the
    numbers of solving every design."""
    space = _space(npus=16, max_dims=2, budgets=(100.0,), workloads=((GPT3, 4, "search"),))
    designs = list(scan.iter_designs(space))
    solved = []

    def counting(batches, **kw):
        solved.append(sum(len(b.compute_s) for b in batches))
        return batch.solve_stacked(batches, **kw)

    rows = scan.solve_designs(designs, space, solver=counting)
    assert solved == [len({(x.shape, x.mapping) for x in designs})] and solved[0] > 3
    assert all(r["status"] == "ok" for r in rows)
    for x, r in zip(designs, rows):
        assert r["mapping"] == x.mapping.describe()
    improved = 0
    for shape in {x.shape for x in designs}:
        fixed = fixed_placement(shape, 4)
        times = {x.mapping: r["step_time_ns"] for x, r in zip(designs, rows)
                 if x.shape == shape}
        assert min(times.values()) <= times[fixed]
        improved += min(times.values()) < times[fixed] * (1 - 1e-6)
    full = scan.solve_designs(designs, space, dedup=False)
    for a, b in zip(rows, full):
        np.testing.assert_allclose(a["step_time_ns"], b["step_time_ns"], rtol=1e-9)
        np.testing.assert_allclose(a["network_cost_usd"], b["network_cost_usd"], rtol=1e-6)
    assert improved >= 1  # the search finds a better placement on some shape


def test_hydra_composes_and_checks_the_mapping_key():
    from hydra import compose, initialize_config_module
    from hydra.errors import ConfigCompositionException
    from omegaconf import OmegaConf

    import libra_jax.cli.scan  # noqa: F401  (registers the schema)

    wl = "workloads=[{file: workload/GPT_3.txt, tp: 4, mapping: %s}]"
    with initialize_config_module("libra_jax.conf", version_base="1.3"):
        default = OmegaConf.to_object(compose("scan"))
        assert {w.mapping for w in default.workloads} == {scan.config.Mapping.fixed}
        cfg = OmegaConf.to_object(compose("scan", overrides=["space.npus=16", wl % "search"]))
        assert cfg.workloads[0].mapping == scan.config.Mapping.search
        assert cfg.workloads[0].mapping == "search"
        with pytest.raises(ConfigCompositionException) as e:
            compose("scan", overrides=[wl % "serch"])
    text = f"{e.value} {e.value.__cause__}"
    assert "mapping" in text and "serch" in text


@pytest.mark.parametrize("name, designs", [("scan_16k", 13_648_284),
                                           ("enumerate_64k", 107_549_694)])
def test_experiment_configs_compose_and_have_the_stated_size(name, designs):
    """experiments/scan_16k: the configs compose as the README's command composes them, and
    hold the design counts its README states."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    import libra_jax.cli.scan  # noqa: F401  (registers the schema)

    folder = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "scan_16k"
    with initialize_config_dir(str(folder), version_base="1.3"):
        cfg = OmegaConf.to_object(compose(name))
    total, skipped = scan.count_designs(scan.make_space(cfg))
    assert total == designs and skipped["switch_designs"] == skipped["mapping_designs"] == 0
    assert f"{designs:,}" in (folder / "README.md").read_text()
