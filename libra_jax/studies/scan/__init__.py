"""Design-space scan: ``python -m libra_jax.scan [key=value ...]`` (config ``conf/scan.yaml``).

Enumerates network designs for N NPUs and optimises every one (LIBRA, Won et al. ISPASS 2024,
Sec. V "design-space exploration"): a design is

    (shape, blocks, cost tiers, budget, workload, mapping)

* shape: an ordered factorisation N = n_0 * ... * n_{D-1} (dim 0 innermost), D in
  [min_dims, max_dims], each n_d in [min_dim_size, max_dim_size];
* blocks: one of {Ring, FullyConnected, Switch} per dimension (product over dims);
* cost tiers: one cost-model row per dimension (default: the last D of ``tier_order``, so the
  innermost dims get the cheaper tiers); a Switch needs a tier with a Switch price;
* budget: per-NPU bandwidth summed over the dimensions, sum(bw) == budget (GB/s);
* workload: a shipped text workload whose collectives use communicators derived from its
  tensor- and data-parallel degrees (`parallel_communicators`): Forward and InputGrad use the
  TP group, WeightGrad the DP group, TP filling dimensions from the innermost outward;
* mapping: with ``workloads[i].mapping: search``, every TP x DP placement of the mapping
  co-search on the shape (`space.workload_placements`); the default ``fixed`` is the one
  placement above;
* or an imported Chakra trace set (``workloads[i].chakra_et``): it fits only
  ``space.npus`` = its ranks and the dimension counts its ``involved_dim`` lists fit
  (refused up front otherwise); each design is solved as ``libra-train`` solves a trace,
  its step simulated (`traces`).

Each design is solved for minimum step time (`perf`) with `batch.solve_stacked` (jit(vmap) over
buckets), in chunks of ``scan.chunk_size`` designs enumerated lazily in a fixed order, so
memory is bounded by the chunk size whatever the size of the space. A rerun with the same
``scan.output_dir`` skips chunks whose file exists, so a killed scan resumes without
recomputing or losing anything. At the end the chunk files are streamed once to build the
top-k table (``top_k.md``), the per-workload Pareto fronts of (step time, network cost)
(``pareto_front.csv``), their plot (``pareto.png``) and an interactive page
(``pareto.html``).

Technology catalogue (docs/scan_power.md): a cost model whose tiers give ``Energy`` adds
``network_power_w`` and ``energy_per_step_j`` to every row (``space.npu_w``: W per NPU) and
makes the fronts 3-objective (step time, network cost, network power); a tier's
``MaxGbps`` bounds its dimension's bandwidth, ``ReachM`` with ``space.span_m_by_npus``
skips designs whose links do not reach (skip counters ``max_gbps_designs``,
``reach_designs``).

Shards (`shards`): ``scan.shard_index=I scan.num_shards=N`` computes the I-th of N contiguous
ranges of the design order into the same ``scan.output_dir`` as the other shards (own chunk
files ``chunk_sIofN_*``, own manifest and completion record under ``shards/``; each resumes on
its own); ``scan.merge=true`` then checks that every shard is finished and of the same scan
and writes the summary an unsharded run writes (`merge_scan`), the same bytes but the PNG.

Output (``scan.output_dir``)::

    chunks/chunk_000000.parquet ...   one row per design (columns: `files.columns`)
    top_k.md  pareto_front.csv  pareto.png  pareto.html  scan_manifest.json
    scan_summary.json

Load every design of a scan (finished, or the finished chunks of a running one) with::

    import pandas as pd
    designs = pd.read_parquet("OUTPUT_DIR/chunks")   # bandwidth_gbps: list of float64

With ``scan.format=csv``: ``pd.concat(map(pd.read_csv, sorted(glob("OUTPUT_DIR/chunks/
chunk_*.csv"))))``, ``bandwidth_gbps`` a JSON list per row (``.map(json.loads)``). Every
number is stored at full precision; files appear only when complete (`files.atomic_write`).

The format is an explicit setting (``parquet`` by default, pyarrow being a dependency; no
``auto``), recorded with the space in ``scan_manifest.json``, so a resume never depends on
which packages are installed: the same settings resume the same scan anywhere, and a
different format is refused, naming it.

The optimal bandwidths of the `perf` problem depend on the traffic (shape, workload, mapping)
and the budget only, not on the building blocks or cost tiers, which only price the result.
With ``scan.dedup=true`` (default) a chunk solves each distinct (shape, workload, mapping,
budget) problem once and prices it for every design sharing it; ``scan.dedup=false`` solves
every design (same numbers, tested).

Modules, in the order of the data: `config` (schema), `space` (validation, enumeration),
`problems` (a chunk's stacked problems and result rows; `traces` for trace sets), `files`
(formats, atomic writes),
`summary` (Pareto fronts, top-k, plot), `shards` (the split, the shard set's checks),
`run` (the loop, resume, progress, the merge).
"""

from libra_jax.studies.scan.config import (
    Dtype,
    Format,
    RankBy,
    ReportConfig,
    RunConfig,
    ScanConfig,
    ScanWorkloadConfig,
    SpaceConfig,
)
from libra_jax.studies.scan.files import COLUMNS, chunk_path, read_chunk, write_chunk
from libra_jax.studies.scan.problems import ChunkBuilder, design_traffic, solve_designs
from libra_jax.studies.scan.run import (
    ScanResult,
    describe,
    merge_scan,
    outputs_text,
    run_scan,
)
from libra_jax.studies.scan.shards import Shard, check_shard_set
from libra_jax.studies.scan.space import (
    Design,
    ScanSpace,
    ScanWorkload,
    count_designs,
    enumerate_shapes,
    iter_designs,
    make_space,
)
from libra_jax.studies.scan.summary import (
    pareto_figure,
    pareto_front,
    pareto_front_3d,
    pareto_html,
    summarise,
)

__all__ = [
    "COLUMNS", "ChunkBuilder", "Design", "Dtype", "Format", "RankBy", "ReportConfig",
    "RunConfig", "ScanConfig", "ScanResult", "ScanSpace", "ScanWorkload", "ScanWorkloadConfig",
    "Shard", "SpaceConfig", "check_shard_set", "chunk_path", "count_designs", "describe",
    "design_traffic", "enumerate_shapes", "iter_designs", "make_space", "merge_scan",
    "outputs_text", "pareto_figure", "pareto_front", "pareto_front_3d", "pareto_html",
    "read_chunk", "run_scan", "solve_designs",
    "summarise", "write_chunk",
]
