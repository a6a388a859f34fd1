"""The fuzz suite's oracle: what an input must give and what its outcome is.

Before a case runs, the expectations its generator records (``expect``): a YAML document
with a duplicate key (:func:`yaml_duplicate_keys`, merge keys included) or a value that is
not a real number (:func:`_non_number`) must be refused. Then :func:`run_case` runs one case
in this process (the loader, ``build_problem`` of the problem the accepted input makes, and
``solve``) and classifies it: ``accepted`` and ``rejected`` (``LibraInputError``) keep the
contract; ``crash:<type>``, ``timeout``, ``memory``, ``silent-accept``, ``bad-result``
(:func:`_check_result`), ``code-exec``, ``long-message`` and ``empty-message`` do not (the
package docstring lists them all).
"""

from __future__ import annotations

import math
import os
import pathlib
import shutil
import signal
import tempfile
import time
import traceback
import warnings

import yaml

from .common import (
    FIXTURES,
    INPUTS,
    KINDS,
    MAX_MESSAGE_CHARS,
    MEM_LIMIT_MB,
    OK_OUTCOMES,
    TIME_LIMIT_S,
    WALL_SLACK,
    _reset_peak,
    _rss_kb,
    big_input,
    decode,
)


def _dup_key_check(before: bytes, after: bytes) -> str | None:
    """``"duplicate key"`` when ``after`` parses as YAML with a duplicate mapping key and
    ``before`` did not (the oracle of the generic text mutations); None otherwise."""
    if len(after) > 65536:
        return None
    dup_after = yaml_duplicate_keys(after)
    if dup_after and not yaml_duplicate_keys(before):
        return f"duplicate key {dup_after[0]!r}"
    return None


class _MergeKey:
    def __repr__(self) -> str:
        return "'<<'"


#: The merge key in `yaml_duplicate_keys`' result.
MERGE_KEY = _MergeKey()


def yaml_duplicate_keys(data: bytes | str) -> list:
    """The keys that occur twice in one mapping of a YAML document, the merge key ``<<``
    included (once per mapping; several merges are one ``<<`` with a list); [] if there are
    none or the text is not YAML."""
    found = []

    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                key = MERGE_KEY  # not the string '<<' (a quoted '<<' is an ordinary key)
            else:
                try:
                    key = loader.construct_object(key_node, deep=True)
                    hash(key)
                except Exception:  # noqa: BLE001 -- an unhashable key is not our question
                    continue
            if key in seen:
                found.append(key)
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.add_constructor("tag:yaml.org,2002:map", construct_mapping)
    try:
        yaml.load(data, Loader=Loader)  # noqa: S506 -- a SafeLoader subclass
    except Exception:  # noqa: BLE001
        return []
    return found


def _non_number(v) -> bool:
    """True for a tagged JSON value that is not a real number (strings, bools, lists,
    mappings, bytes, complex, sets, opaque objects)."""
    if isinstance(v, bool) or isinstance(v, (str, list)):
        return True
    if isinstance(v, dict):
        tags = set(v)
        return not tags & {"$float", "$int_digits", "$np"}
    return False


def _check_result(r) -> str | None:
    """Why a solve result breaks the contract (status ok with a number that is not
    finite, or negative), or None."""
    import numpy as np  # noqa: PLC0415

    if r.status != "ok":
        return None
    bw = np.asarray(r.bandwidth_gbps, np.float64)
    if not np.all(np.isfinite(bw)) or np.any(bw < -1e-9 * max(1.0, float(np.abs(bw).max()))):
        return f"status ok with bandwidth {bw.tolist()}"
    for name in ("step_time_ns", "comm_time_ns", "network_cost_usd", "time_x_cost"):
        v = getattr(r, name)
        if v is None:
            continue
        if not math.isfinite(v) or v < 0:
            return f"status ok with {name} = {v!r}"
    if r.step_time_ns <= 0:
        return f"status ok with step_time_ns = {r.step_time_ns!r}"
    gap = r.optimality_gap
    if gap is not None and not math.isfinite(gap):
        return f"status ok with optimality_gap = {gap!r}"
    return None


# ------------------------------------------------------------------- running one case

class _Context:
    """What a worker prepares once: the shipped networks, workloads, cost models, rates
    and a problem, for the solve stage and the ``$ref`` arguments."""

    def __init__(self):
        import libra_jax as lj  # noqa: PLC0415

        self.lj = lj
        i = INPUTS
        self.net3d = lj.load_network_file(i / "network/3d_network.yml")
        self.net4d = lj.load_network_file(i / "network/4d_network.yml")
        self.cm3d = lj.load_cost_model(i / "cost_model/3d_cost_model.yml")
        self.cm4d = lj.load_cost_model(i / "cost_model/4d_cost_model.yml")
        self.wl3d = lj.load_workload(i / "workload/Turing_NLG.txt",
                                     i / "communicator/Turing_NLG_3D.yml", 3)
        self.wl4d = lj.load_workload(i / "workload/GPT_3.txt",
                                     i / "communicator/GPT_3_4d.yml", 4)
        self.rates3d = lj.cost_rates_usd_per_gbps(self.net3d, self.cm3d)
        self.rates4d = lj.cost_rates_usd_per_gbps(self.net4d, self.cm4d)
        self._problem3d = None

    def problem3d(self):
        if self._problem3d is None:
            self._problem3d = self.lj.build_problem(
                self.net3d, self.wl3d, self.rates3d, self.lj.ConstraintSpec(total_bw_gbps=500.0))
        return self._problem3d

    def refs(self) -> dict:
        return {"net3d": self.net3d, "net4d": self.net4d, "wl3d": self.wl3d,
                "wl4d": self.wl4d, "rates3d": self.rates3d, "rates4d": self.rates4d,
                "cm3d": self.cm3d, "cm4d": self.cm4d, "problem3d": self.problem3d}

    def rates_for(self, net):
        if net.cost_tiers is None:
            return None
        for cm in (self.cm3d, self.cm4d):
            if all(t in cm.tiers for t in net.cost_tiers):
                return self.lj.cost_rates_usd_per_gbps(net, cm)
        return None

    def dp_workload(self, net, tmp: pathlib.Path):
        """Turing-NLG's layers, data parallel over every dimension of ``net``."""
        comm = tmp / "dp_communicator.yml"
        d = net.num_dims
        comm.write_text(f"Forward: {[-1] * d}\nInputGrad: {[-1] * d}\n"
                        f"WeightGrad: {list(net.npus)}\n")
        return self.lj.load_workload(INPUTS / "workload/Turing_NLG.txt", comm, d)


_CTX: _Context | None = None


def context() -> _Context:
    global _CTX
    if _CTX is None:
        _CTX = _Context()
    return _CTX


def _compile_clock():
    try:
        from libra_jax.cli.runtime import CompileClock  # noqa: PLC0415

        return CompileClock()
    except Exception:  # noqa: BLE001 -- a clock that measures nothing
        return _NullClock()


class _NullClock:
    seconds = 0.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _materialize(case: dict, tmp: pathlib.Path) -> pathlib.Path | None:
    """Writes a file case's input (``@SENTINEL@`` -> a path in ``tmp``); its path."""
    if "suffix" not in case:
        return None
    if "generate" in case:
        g = case["generate"]
        data = big_input(g["kind"], g["variant"], g["mb"])
    else:
        data = case["data"]
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    data = data.replace(b"@SENTINEL@", str(tmp / "PWNED").encode())
    path = tmp / f"input{case['suffix']}"
    path.write_bytes(data)
    return path


class _NeverRaised(Exception):
    pass


def _args(case: dict, ctx: _Context | None) -> dict:
    args = decode(case.get("args", {}), ctx.refs() if ctx is not None else None)
    if "generate" in case and "suffix" not in case:
        g = case["generate"]
        args["notation" if g["kind"] == "notation" else "strings"] = big_input(
            g["kind"], g["variant"], g["mb"])
    return args


def _load(case: dict, ctx: _Context, path: pathlib.Path | None, tmp: pathlib.Path, stage):
    """Stage 1: the loader. Returns what the solve stage needs (or None: nothing to
    solve), raising what the loader raises."""
    kind = case["kind"]
    if kind == "selftest":
        return _selftest(case["_decoded"])
    lj = ctx.lj
    from libra_jax.inputs.astrasim import import_network_yaml  # noqa: PLC0415
    from libra_jax.model.linear import parse_linear_constraints  # noqa: PLC0415

    spec500 = lj.ConstraintSpec(total_bw_gbps=500.0)
    objective = "perf"
    if kind == "network":
        net = lj.load_network_file(path)
        stage(2)
        return net, ctx.dp_workload(net, tmp), ctx.rates_for(net), spec500, objective
    if kind == "astrasim_network":
        net, _, _ = import_network_yaml(path)
        stage(2)
        return net, ctx.dp_workload(net, tmp), None, spec500, objective
    if kind == "cost_model":
        cm = lj.load_cost_model(path)
        stage(2)
        for net, wl in ((ctx.net3d, ctx.wl3d), (ctx.net4d, ctx.wl4d)):
            if all(t in cm.tiers for t in net.cost_tiers):
                rates = lj.cost_rates_usd_per_gbps(net, cm)
                return net, wl, rates, spec500, "perf_per_cost"
        return None
    if kind == "communicator":
        comm = lj.load_communicator(path)
        stage(2)
        d = comm.shape[1]
        npus = [max(2, int(comm[:, j].max())) for j in range(d)]
        net = lj.network_from_lists(["Ring"] * d, npus)
        wl = lj.load_workload(INPUTS / "workload/Turing_NLG.txt", path, d)
        return net, wl, None, spec500, objective
    if kind == "workload_txt":
        wl = lj.load_workload(path, INPUTS / "communicator/Turing_NLG_3D.yml", 3)
        stage(2)
        return ctx.net3d, wl, ctx.rates3d, spec500, objective
    if kind == "workload_yaml":
        wl = lj.load_workload(path, FIXTURES / "tiny_communicator_4d.yml", 4)
        stage(2)
        return ctx.net4d, wl, ctx.rates4d, spec500, objective
    args = case["_decoded"]
    if kind == "notation":
        net = lj.parse_notation(args["notation"], args.get("cost_tiers"))
        stage(2)
        return net, ctx.dp_workload(net, tmp), ctx.rates_for(net), spec500, objective
    if kind == "lists":
        net = lj.network_from_lists(args["topology"], args["npus"], args.get("cost_tiers"))
        stage(2)
        return net, ctx.dp_workload(net, tmp), ctx.rates_for(net), spec500, objective
    if kind == "linear":
        parse_linear_constraints(args["strings"], args["num_dims"])
        stage(2)
        if args["num_dims"] != 4 or isinstance(args["num_dims"], bool):
            return None
        return (ctx.net4d, ctx.wl4d, ctx.rates4d,
                lj.ConstraintSpec(total_bw_gbps=1000.0, linear=args["strings"]), objective)
    if kind == "spec":
        spec = lj.ConstraintSpec(**args["spec"])
        net, wl, rates = ((ctx.net3d, ctx.wl3d, ctx.rates3d) if args["net"] == "3d"
                          else (ctx.net4d, ctx.wl4d, ctx.rates4d))
        stage(2)
        return net, wl, rates, spec, args["objective"]
    if kind == "build_args":
        p = lj.build_problem(args["network"], args["workload"], args["cost_rates"],
                             args["spec"])
        return "problem", p, "perf"
    if kind == "solve_args":
        return "solve", args
    if kind == "num_dims":
        lj.load_workload(INPUTS / args["path"], INPUTS / args["communicator"],
                         args["num_dims"])
        return None
    if kind == "chakra_et":  # a Chakra trace set (tests/fuzz/traces.py)
        from .traces import load_trace_case  # noqa: PLC0415

        load_trace_case(args, tmp)
        return None
    if kind == "path_args":
        loader = args["loader"]
        fn = (import_network_yaml if loader == "import_network_yaml"
              else getattr(lj, loader))
        if loader == "load_workload":
            fn(args["path"], INPUTS / "communicator/Turing_NLG_3D.yml", 3)
        else:
            fn(args["path"])
        return None
    raise KeyError(kind)


def _selftest(args: dict) -> None:
    """The runner's own check (kind ``selftest``, never generated): burn ``cpu_s`` of CPU,
    touch ``alloc_mb`` of memory, or ``die`` (SIGKILL itself)."""
    if args.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    t = time.process_time()
    while time.process_time() - t < args.get("cpu_s", 0.0):
        pass
    if args.get("alloc_mb"):
        block = bytearray(int(args["alloc_mb"] * 2**20))
        for i in range(0, len(block), 4096):
            block[i] = 1
        time.sleep(0.5)
    return None


def run_case(case: dict, *, solve: bool = True, stage=None) -> dict:
    """Runs one case in this process: the loader, then ``build_problem`` of the problem
    the accepted input makes (with the shipped inputs it lacks), then (``solve``) ``solve``. Returns ``{"outcome", "stage", "exc_type", "message", "seconds",
    "compile_s", "peak_mb", ...}``; ``outcome`` is ``accepted``, ``rejected`` or a failure
    (package docstring). Warnings are errors, as in the test suite. ``stage(n)`` is called
    at each stage (1 load, 2 build, 3 solve), for a watcher's time limits."""
    stage = stage or (lambda n: None)
    if case["kind"] == "selftest":  # the runner's own check: no library involved
        LibraInputError, ctx, clock = _NeverRaised, None, _NullClock()  # noqa: N806
    else:
        from libra_jax.types import LibraInputError  # noqa: PLC0415

        ctx, clock = context(), _compile_clock()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="fuzzcase-"))
    out = {"id": case.get("id"), "kind": case["kind"], "family": case["family"],
           "loader": case.get("loader") or KINDS[case["kind"]][0], "stage": "load",
           "exc_type": None, "message": None, "compile_s": 0.0, "solved": None}
    had_peak = _reset_peak()
    rss0 = _rss_kb()
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    try:
        path = _materialize(case, tmp)
        case = dict(case, _decoded=_args(case, ctx))
    except Exception as e:  # noqa: BLE001 -- the fuzzer's own bug, not the library's
        shutil.rmtree(tmp, ignore_errors=True)
        out.update(outcome="harness-error", exc_type=type(e).__name__, message=str(e)[:300],
                   seconds=0.0, traceback=_tb_tail(e))
        return out
    try:
        stage(1)
        with warnings.catch_warnings(), clock:
            warnings.simplefilter("error")
            loaded = _load(case, ctx, path, tmp, stage)
            out["stage"] = "build"
            if loaded is not None:
                _solve_stage(ctx, loaded, out, stage, solve)
        out["outcome"] = "accepted"
        if case.get("expect"):
            out["outcome"] = "silent-accept"
            out["message"] = f"accepted, but: {case['expect']}"
        elif out.get("bad_result"):
            out["outcome"] = "bad-result"
            out["message"] = out["bad_result"]
    except LibraInputError as e:
        msg = str(e)
        out.update(outcome="rejected", exc_type=type(e).__name__, message=msg[:500],
                   message_chars=len(msg))
        if len(msg) > MAX_MESSAGE_CHARS or not msg.strip():
            out["outcome"] = "long-message" if msg.strip() else "empty-message"
    except MemoryError as e:
        out.update(outcome="memory", exc_type="MemoryError", message=str(e)[:500])
    except BaseException as e:  # noqa: BLE001 -- every other exception is the finding
        if isinstance(e, KeyboardInterrupt):
            raise
        try:
            msg = str(e)
        except Exception:  # noqa: BLE001
            msg = f"<str of {type(e).__name__} failed>"
        out.update(outcome=f"crash:{type(e).__name__}", exc_type=type(e).__name__,
                   message=msg[:500], traceback=_tb_tail(e))
    finally:
        out["seconds"] = time.perf_counter() - t0
        out["cpu_s"] = time.process_time() - cpu0
        out["compile_s"] = getattr(clock, "seconds", 0.0)
        if (tmp / "PWNED").exists():
            out.update(outcome="code-exec", message="a YAML python tag ran a command")
        shutil.rmtree(tmp, ignore_errors=True)
        stage(0)
    net_s = out["seconds"] - out["compile_s"]
    net_cpu = out["cpu_s"] - out["compile_s"]
    if out["outcome"] in OK_OUTCOMES and (net_cpu > TIME_LIMIT_S
                                          or net_s > TIME_LIMIT_S * WALL_SLACK):
        out.update(outcome="timeout", message=f"{net_cpu:.1f} s CPU, {net_s:.1f} s wall, "
                   f"net of compilation (was {out['outcome']}: {str(out['message'])[:200]})")
    if had_peak:
        out["peak_mb"] = max(0, _rss_kb(field="VmHWM") - rss0) / 1024
        if out["outcome"] in OK_OUTCOMES and out["peak_mb"] > MEM_LIMIT_MB:
            out.update(outcome="memory", message=f"peak RSS +{out['peak_mb']:.0f} MB")
    return out


def _tb_tail(e: BaseException, frames: int = 4) -> str:
    tb = traceback.extract_tb(e.__traceback__)[-frames:]
    return " | ".join(f"{pathlib.Path(f.filename).name}:{f.lineno} {f.name}" for f in tb)


def _solve_stage(ctx: _Context, loaded, out: dict, stage, solve: bool) -> None:
    """Builds the problem of an accepted input (always) and solves it (``solve``)."""
    lj = ctx.lj
    from libra_jax.inputs.workload import check_workload_network  # noqa: PLC0415

    if loaded[0] == "solve":  # solve's own arguments: solve is the function under test
        args = loaded[1]
        stage(3)
        out["stage"] = "solve"
        r = lj.solve(args["p"], args["objective"], method=args["method"],
                     max_rounds=args["max_rounds"], batch=args["batch"])
    elif loaded[0] == "problem":
        _, p, objective = loaded
        if not solve:
            return
        stage(3)
        out["stage"] = "solve"
        r = lj.solve(p, objective)
    else:
        net, wl, rates, spec, objective = loaded
        check_workload_network(wl, net)
        p = lj.build_problem(net, wl, rates, spec)
        if not solve:
            return
        stage(3)
        out["stage"] = "solve"
        if objective == "perf_per_cost" and rates is None:
            objective = "perf"
        r = lj.solve(p, objective)
    out["solved"] = r.status
    bad = _check_result(r)
    if bad:
        out["bad_result"] = bad
