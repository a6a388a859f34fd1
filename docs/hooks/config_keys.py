"""Unit and meaning of every configuration key, for the generated configuration reference.

``KEYS[kind][key] = (unit, meaning)``, kind "train" (``LibraConfig``: libra-train and
libra-evaluate) or "scan" (``ScanConfig``: libra-scan). The keys must be exactly the schema's
(``generate.check_keys``; tests/test_docs.py and the site's build check it): a key added to a
schema needs its line here, or the build stops naming it. Types and defaults are not written
here: they come from the schema and the commands' YAML files. Unit "-": a name, a flag, a
count or a choice.
"""

GBPS = "GB/s per NPU"
GBPS_D = "GB/s per NPU, one per dimension"

TRAIN = {
    # network
    "network.file": ("path", "LIBRA network YAML (`Topology`, `NpusCount`, `CostDimension`). "
                     "Set exactly one of `network.file`, `network.notation`, `network.topology`; "
                     "to replace a preset's file, null it: `network.file=null`"),
    "network.notation": ("-", "the network as a notation, e.g. `\"RI(16)_FC(8)_SW(32)\"` "
                         "(RI / FC / SW = Ring / FullyConnected / Switch, NPUs in brackets, "
                         "dimension 0 first)"),
    "network.topology": ("-", "or inline: one building block per dimension, "
                         "`[Ring,FullyConnected,Switch]` ..."),
    "network.npus": ("NPUs, one per dimension", "... with the NPUs of each dimension, `[16,8,32]` "
                     "(only with `network.topology`)"),
    "network.cost_tiers": ("-", "cost-model row pricing each dimension, e.g. "
                           "`[InterPackage,InterNode,InterPod]` (notation / topology only; a "
                           "network file has `CostDimension`)"),
    "network.latency_ns": ("ns per hop, one per dimension",
                           "link latency (`model=pipelined`; a Switch step is 2 hops, Ring / "
                           "FullyConnected 1); null: the tiers' `LatencyNs` where every tier "
                           "gives one"),
    "network.span_m": ("m, one per dimension", "the distance each dimension's links cover; a span "
                       "beyond its tier's `ReachM` is an error"),
    # cost model
    "cost_model.file": ("path", "LIBRA cost model YAML ($ per GB/s per component), or a "
                        "technology catalogue (also `Energy`, `ReachM`, `LatencyNs`, `MaxGbps`), "
                        "e.g. `technologies.yaml`. null: the network is not priced, cost fields "
                        "are null, and `objective=perf_per_cost` / `constraints.max_cost_usd` "
                        "are errors"),
    # workload
    "workload.file": ("path", "ASTRA-sim 1.0 text workload (`.txt`) or native YAML workload "
                      "(`.yaml` / `.yml`)"),
    "workload.communicator_file": ("path", "LIBRA communicator YAML (NPUs per dimension per "
                                   "phase; required for `.txt`, an optional default for YAML "
                                   "workloads)"),
    "workload.generator": ("-", "generate the workload from a model description instead "
                           "(`workload.file` must be null; presets: `dnn=<name>`); `serving`: "
                           "an inference fleet (prefill, decode, KV transfer; see Serving)"),
    "workload.chakra_et": ("path prefix", "a Chakra trace set instead: `<prefix>.<rank>.et` "
                           "(or `.et.gz`) for every NPU (`workload.file` must be null; needs "
                           "`model=pipelined`; see Bring your own trace)"),
    "workload.comm_groups": ("path", "the trace set's `pg_name` communicator groups: ASTRA-sim's "
                             "`--comm-group-configuration` JSON `{\"<id>\": [npus...]}`"),
    "workload.model": ("-", "the generator's model: architecture and batch (`layers hidden heads "
                       "ffn_hidden seq_len ...`; see Workloads from a model description)"),
    "workload.parallel": ("-", "the parallel mapping: `tp pp dp` (product = NPUs), `zero_stage`, "
                          "`recompute`, `ep`, `placement`; serving: `tp pp ep replicas`, "
                          "`disaggregated`, `prefill_replicas`, `kv_dim`"),
    "workload.npu": ("TFLOP/s, GB, GB/s", "the NPU: `peak_tflops`, `efficiency`, `memory_gb` "
                     "(null: not checked), `memory_bw_gbps`"),
    # constraints
    "constraints.total_bw_gbps": (GBPS, "the sum of the per-dimension bandwidths equals "
                                  "(`eq`) or is at most (`le`) this total"),
    "constraints.total_bw_mode": ("-", "`eq`: sum(bw) == total; `le`: sum(bw) <= total"),
    "constraints.lower_gbps": (GBPS_D, "per-dimension lower bounds (default 0)"),
    "constraints.upper_gbps": (GBPS_D, "per-dimension upper bounds (null entries: no bound); "
                               "with a tier's `MaxGbps` the smaller binds"),
    "constraints.linear": ("GB/s", "linear constraints on `bw[i]`, e.g. "
                           "`\"2*bw[0] - bw[1] <= 100 + bw[3]\"` (numbers, `+ - *`, one of "
                           "`== <= >=`)"),
    "constraints.max_cost_usd": ("$", "network cost budget (needs a cost model)"),
    "constraints.max_power_w": ("W", "network power cap (needs tiers that give `Energy`, e.g. "
                                "`cost_model.file=technologies.yaml`)"),
    "constraints.max_ttft_ms": ("ms", "serving SLO: time to first token (one prefill pass, plus "
                                "the KV transfer when disaggregated) at most this "
                                "(`workload.generator=serving` only)"),
    "constraints.max_tpot_ms": ("ms", "serving SLO: time per output token (one decode step) at "
                                "most this (`workload.generator=serving` only)"),
    # power
    "power.npu_w": ("W per NPU", "one NPU's power apart from the network: total power = NPUs x "
                    "`npu_w` + network power"),
    # objective, solver
    "objective": ("-", "`perf`: minimise step time; `perf_per_cost`: step time x network cost; "
                  "`perf_per_watt`: step time x total power (= energy per step, J); "
                  "`serving_throughput` (serving only): maximise tokens/s, and with a serving "
                  "workload `perf_per_cost` / `perf_per_watt` are on tokens/s ($ per token/s, J "
                  "per token)"),
    "solver.method": ("-", "`ipm`: the primal-dual interior-point kernel of the batch engine "
                      "(`solvers/ipm.py`), certified gaps ~1e-13 (nested overlap-loop rows "
                      "~1e-10). `optax`: projected Adam with an augmented Lagrangian "
                      "(`solvers/first_order.py`), then an exact Newton step on the active set it "
                      "identifies (`solvers/active_set.py`), certified in the kernel; "
                      "`perf_per_cost` by a price continuation; all 30 shipped cases `ok` (perf "
                      "gaps <= 1.7e-16, perf_per_cost <= 1.4e-7), ~10x slower than `ipm` for "
                      "perf, ~6x for perf_per_cost; refused for `perf_per_watt`"),
    # multi-workload
    "workloads": ("-", "several workloads designed for at once (one bandwidth vector); "
                  "`workload.file` must then be null"),
    "workloads[i].file": ("path", "the entry's workload file (as `workload.file`; exactly one "
                          "of `file` and `chakra_et` per entry)"),
    "workloads[i].communicator_file": ("path", "its communicator (as "
                                       "`workload.communicator_file`)"),
    "workloads[i].chakra_et": ("path prefix", "a Chakra trace set instead (as "
                               "`workload.chakra_et`): every workload of the run is then timed "
                               "by its simulated step (`model=pipelined`; `sum_time` or "
                               "`sum_time_x_cost`)"),
    "workloads[i].comm_groups": ("path", "its `pg_name` groups (as `workload.comm_groups`)"),
    "workloads[i].name": ("-", "its name in tables and `result.json` (default: the file stem, "
                          "or the trace prefix's last part)"),
    "weights": ("-", "one weight >= 0 per workload (null: all 1)"),
    "multi_objective": ("-", "`sum_time`: minimise sum_i w_i step_i; `sum_time_x_cost`: network "
                        "cost x that sum; `worst_slowdown`: minimise max_i step_i / own optimum_i"),
    # co-search
    "cosearch.enabled": ("-", "search the TP / PP / DP placement together with the bandwidths"),
    "cosearch.tp": ("-", "fixed tensor-parallel degree, or null: every divisor (TP x PP x DP = "
                    "NPUs)"),
    "cosearch.pp": ("-", "fixed pipeline-parallel degree, or null: every divisor"),
    "cosearch.dp": ("-", "fixed data-parallel degree, or null: every divisor"),
    "cosearch.top_k": ("-", "rows of the printed table and of `result.json`'s `top_k`"),
    "cosearch.reference_communicator": ("path", "a LIBRA communicator YAML whose mapping is shown "
                                        "as the `ref` line, on the same model and constraints"),
    # timing model
    "model": ("-", "collective model: `libra` (LIBRA's, bandwidth only) or `pipelined` (latency- "
              "and chunk-aware, validated against ASTRA-sim)"),
    "schedule": ("-", "order of a collective's chunks across dimensions (`model=pipelined`)"),
    "training_loop": ("-", "which communication overlaps compute: none (LIBRA's), the "
                      "weight-gradient collectives, or all"),
    "system.chunks": ("chunks per collective", "null = 1; a list (e.g. `[1,4,16,64]`) is searched: "
                      "the bandwidths are optimised for each count"),
    "system.endpoint_delay_ns": ("ns per message", "fixed cost of every message at the endpoint"),
    "system.local_mem_bw_gbps": ("GB/s (1e9 B)", "memory bandwidth of reductions (3 bytes moved "
                                 "per byte reduced); null: free"),
    "system.gb_is_gib": ("-", "link GB/s count 2^30 bytes, as ASTRA-sim does"),
    "system.queue_policy": ("-", "collectives waiting on one dimension: the newest first (`lifo`, "
                            "ASTRA-sim's default) or the oldest"),
    "system.queues_per_dim": ("queues per dimension", "each runs one chunk-stage at a time "
                              "(ASTRA-sim `--num-queues-per-dim`)"),
    "system.network_backend": ("-", "link model: `aware` is ASTRA-sim's congestion-aware backend "
                               "(store-and-forward Switch hops, shared FIFO links)"),
    "system.max_inflight_collectives": ("collectives per NPU", "collectives in flight at once; "
                                        "null: no limit; 1 = stock ASTRA-sim"),
    # runtime (docs/runtime.md)
    "system.inter_dim_scheduling": ("-", "the order each chunk visits the dimensions in: "
                                    "`ascending` (ASTRA-sim's default), `themis` (Themis, "
                                    "ASTRA-sim's `offlineGreedy`), `themis_flex` "
                                    "(`offlineGreedyFlex`), `round_robin` (`model=pipelined`)"),
    "system.intra_dim_scheduling": ("-", "the order of the streams waiting at a dimension: `fifo` "
                                    "or `smallest_first` (ASTRA-sim's `smallestFirst`)"),
    "system.collective_optimization": ("-", "an all-reduce's hierarchy: `local_bw_aware` "
                                       "(reduce-scatter up the dimensions, all-reduce on the "
                                       "last, all-gather down) or `baseline` (a full all-reduce "
                                       "on each dimension in turn)"),
    "system.algorithm": ("-", "one collective algorithm per dimension: `ring`, `direct`, "
                         "`halving_doubling`, `double_binary_tree`; null: ring everywhere"),
    "system.active_chunks_per_dim": ("streams per dimension", "chunks a dimension runs at once "
                                     "(ASTRA-sim `active-chunks-per-dimension`)"),
    "system.whole_ns": ("-", "`network_backend=aware` only: every link time in whole ns, as "
                        "ASTRA-sim's links cast it, so messages tie at a link as they do "
                        "there; false: real-valued times, of which the certified bounds are "
                        "bounds ([runtime](../runtime.md))"),
    "runtime": ("-", "`fixed`: optimise the bandwidths for the runtime of `system.*`; `search`: "
                "choose the runtime too, from `runtime_search`'s candidates (`model=pipelined`)"),
    "runtime_search.inter_dim_scheduling": ("-", "schedulings tried by `runtime=search`; null: "
                                            "`[ascending, themis, round_robin]`"),
    "runtime_search.intra_dim_scheduling": ("-", "intra-dimension orders tried; null: "
                                            "`system.intra_dim_scheduling` only"),
    "runtime_search.collective_optimization": ("-", "all-reduce hierarchies tried; null: "
                                               "`system.collective_optimization` only"),
    "runtime_search.algorithm": ("-", "one list per dimension of the algorithms tried there, "
                                 "e.g. `[[ring],[ring,direct]]`; null: ring plus the one "
                                 "alternative the dimension's block supports (docs/runtime.md)"),
    "runtime_search.active_chunks_per_dim": ("streams per dimension", "counts tried; null: "
                                             "`system.active_chunks_per_dim` only"),
    "runtime_search.chunks": ("chunks per collective", "chunk counts tried; null: "
                              "`system.chunks` only"),
    "runtime_search.refine_evals": ("simulations per dimension", "the pattern search on the "
                                    "simulated objective of each candidate runtime"),
    # evaluate, presets, output, cache
    "bandwidth_gbps": (GBPS_D, "`libra-evaluate` only: the design to evaluate"),
    "reference_bw_gbps": (GBPS_D, "a shipped system's design (real-system presets): shown next to "
                          "the optimum at its network power and at its network cost"),
    "export_astrasim": ("-", "also write the design as ASTRA-sim 2.x inputs (network YAML, system "
                        "JSON, Chakra traces) under `<run dir>/astrasim/`"),
    "compilation_cache_dir": ("path", "JAX's persistent compilation cache (repeat runs skip XLA "
                              "compilation); null: off"),
}

SCAN = {
    "space.npus": ("NPUs", "N, the NPUs of every design"),
    "space.min_dims": ("dimensions", "fewest dimensions of a shape (inclusive)"),
    "space.max_dims": ("dimensions", "most dimensions of a shape (inclusive)"),
    "space.min_dim_size": ("NPUs per dimension", "smallest dimension (>= 2)"),
    "space.max_dim_size": ("NPUs per dimension", "largest dimension (null: no bound)"),
    "space.blocks": ("-", "building blocks tried on every dimension"),
    "space.budgets_gbps": (GBPS, "total budgets: the sum of the per-NPU bandwidths of a design"),
    "space.cost_model": ("path", "cost model (or technology catalogue) pricing every design"),
    "space.tier_order": ("-", "cost tiers, innermost (cheapest) -> outermost; a D-dimensional "
                         "shape uses the last D"),
    "space.tier_options": ("-", "or per-dimension tier lists, each used for the shapes of its "
                           "length"),
    "space.npu_w": ("W per NPU", "power of one NPU apart from the network (`energy_per_step_j`; "
                    "only with tiers that give `Energy`)"),
    "space.span_m_by_npus": ("NPUs -> m", "NPUs enclosed -> physical span, e.g. "
                             "`{8: 0.05, 72: 2, 1024: 30, 65536: 500}`: dimension d spans the value "
                             "of the smallest key >= n_0 x ... x n_d; designs whose tier's "
                             "`ReachM` is shorter are skipped. null: no reach check"),
    "workloads": ("-", "the scanned workloads, each with its parallel degrees"),
    "workloads[i].file": ("path", "ASTRA-sim text (`.txt`) or native YAML workload (exactly "
                          "one of `file` and `chakra_et`)"),
    "workloads[i].chakra_et": ("path prefix", "a Chakra trace set instead (`file: null`): fits "
                               "only `space.npus` = its ranks and the dimension counts its "
                               "`involved_dim` lists fit (refused up front otherwise); each "
                               "design's step simulated at the best design of the cutting "
                               "plane and pattern search, its certified gap as "
                               "`optimality_gap`; mapping `trace`"),
    "workloads[i].comm_groups": ("path", "the trace set's `pg_name` groups (as "
                                 "`workload.comm_groups`)"),
    "workloads[i].name": ("-", "its name in the rows (default: the file stem, or the trace "
                          "prefix's last part)"),
    "workloads[i].tp": ("NPUs", "tensor-parallel degree: the Forward / InputGrad group, filled "
                        "from the innermost dimension outward"),
    "workloads[i].dp": ("NPUs", "data-parallel degree: the WeightGrad group (the rest); null: "
                        "npus / tp; tp x dp must equal `space.npus`"),
    "workloads[i].mapping": ("-", "`fixed`: that one layout per shape; `search`: every TP x DP "
                             "placement of the co-search, one design per placement"),
    "scan.output_dir": ("path", "where the chunks and the summary go (null: the Hydra run dir); "
                        "rerun with the same dir to resume"),
    "scan.chunk_size": ("designs per chunk file", "bounds memory; part of the resume identity"),
    "scan.solve_chunk": ("problems per device call", "every call this size (rounded down to 16, "
                         "256, 1024, 65536, ...); null: on CPUs 16 with dedup, else 256; 65536 "
                         "on GPUs"),
    "scan.dtype": ("-", "the kernel's precision (certificates in float64)"),
    "scan.dedup": ("-", "solve each distinct (shape, workload, mapping, budget) once per chunk and "
                   "price it per design"),
    "scan.format": ("-", "chunk files, full precision; part of the resume identity"),
    "scan.max_chunks": ("chunks", "compute at most this many chunks, then stop (resume later)"),
    "scan.progress": ("-", "tqdm progress bar on stderr, only when stderr is a terminal"),
    "scan.shard_index": ("-", "this process computes shard `shard_index` of `num_shards` "
                         "(0 .. num_shards - 1)"),
    "scan.num_shards": ("shards", "contiguous ranges of the design order (1: one unsharded run, "
                        "which writes its own summary)"),
    "scan.merge": ("-", "check the finished shards of `scan.output_dir` and write their summary"),
    "report.top_k": ("rows per workload", "of the top-k table (`top_k.md`)"),
    "report.rank_by": ("-", "the column the top-k table ranks by (lower is better)"),
    "report.plot_labels": ("points per workload", "Pareto points labelled in `pareto.png`"),
    "report.plot_points": ("designs per workload", "background designs drawn (reservoir sample)"),
    "report.html_points": ("designs per workload", "of those, drawn in `pareto.html` (~1 kB "
                           "each)"),
    "compilation_cache_dir": ("path", "JAX's persistent compilation cache; null: off"),
}

KEYS = {"train": TRAIN, "scan": SCAN}
