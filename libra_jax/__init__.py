"""libra_jax: workload-aware bandwidth allocation for multi-dimensional training networks.

The public API, in the order of one study (inputs -> problem -> solve -> evaluate)::

    import jax
    import libra_jax as lj

    inputs = lj.LIBRA_INPUTS_DIR  # the inputs shipped with the public LIBRA code
    net = lj.parse_notation("RI(16)_FC(8)_SW(32)")
    wl = lj.load_workload(inputs / "workload/Turing_NLG.txt",
                          inputs / "communicator/Turing_NLG_3D.yml", net.num_dims)
    problem = lj.build_problem(net, wl, None, lj.ConstraintSpec(total_bw_gbps=500.0))
    result = lj.solve(problem)               # certified optimum: bandwidth_gbps, gap, status
    many = lj.solve_batch([problem] * 1000)  # the vmapped engine: many problems at once
    llm8 = inputs.parent / "traces" / "llm8"  # a shipped 8-rank LLM step as Chakra traces
    trace = lj.read_chakra(llm8 / "wl", llm8 / "comm_groups.json", num_dims=2)
    with jax.enable_x64(True):  # model functions are plain JAX functions: pick the dtype
        step_s = lj.step_time_s(result.bandwidth_gbps, problem)

Layers (each imports only the ones above it): :mod:`libra_jax.types` -> ``inputs`` (file
formats, networks, workloads, cost models) -> ``model`` (collective traffic, timing models,
the ``Problem`` pytree and its pure JAX functions) -> ``solvers`` (interior-point kernel, batch
engine, certificates) -> ``studies`` (multi-workload, co-search, sensitivities, chunk counts,
scans) -> ``cli`` (Hydra configs, tables, the three commands).
"""

from libra_jax.inputs import LIBRA_INPUTS_DIR
from libra_jax.inputs.chakra_export import write_trace_set
from libra_jax.inputs.chakra_import import read_chakra
from libra_jax.inputs.cost import CostModel, cost_rates_usd_per_gbps, load_cost_model
from libra_jax.inputs.topology import (
    Network,
    load_network_file,
    network_from_lists,
    parse_notation,
)
from libra_jax.inputs.workload import Workload, load_communicator, load_workload
from libra_jax.model.objective import (
    max_violation,
    network_cost_usd,
    step_time_s,
    time_x_cost,
)
from libra_jax.model.problem import (
    ConstraintSpec,
    Problem,
    build_problem,
    problem_from_arrays,
    problems_from_stacked,
)
from libra_jax.model.step_trace import simulate_trace
from libra_jax.model.timing import TimingModel, build_timed_problem
from libra_jax.solvers.batch import BatchResult, WarmUp, solve_batch, solve_stacked, warm_up
from libra_jax.solvers.compilation import enable_compilation_cache
from libra_jax.solvers.solve import Baseline, SolveResult, equal_split, solve
from libra_jax.studies.multi import MultiResult, solve_multi
from libra_jax.types import STATUS_NAMES, LibraInputError, Status, TraceSet, float64

__all__ = [
    "Baseline",
    "BatchResult",
    "ConstraintSpec",
    "CostModel",
    "LIBRA_INPUTS_DIR",
    "LibraInputError",
    "MultiResult",
    "Network",
    "Problem",
    "STATUS_NAMES",
    "SolveResult",
    "Status",
    "TimingModel",
    "TraceSet",
    "WarmUp",
    "Workload",
    "build_problem",
    "build_timed_problem",
    "cost_rates_usd_per_gbps",
    "enable_compilation_cache",
    "equal_split",
    "float64",
    "load_communicator",
    "load_cost_model",
    "load_network_file",
    "load_workload",
    "max_violation",
    "network_cost_usd",
    "network_from_lists",
    "parse_notation",
    "problem_from_arrays",
    "problems_from_stacked",
    "read_chakra",
    "simulate_trace",
    "solve",
    "solve_batch",
    "solve_multi",
    "solve_stacked",
    "step_time_s",
    "time_x_cost",
    "warm_up",
    "write_trace_set",
]
