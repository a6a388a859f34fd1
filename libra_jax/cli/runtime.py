"""What every command does around its job: JAX's compilation cache, the compile clock, and
running one Hydra job so that bad input is a message, not a traceback.

* :func:`enable_compilation_cache` -- JAX's persistent compilation cache (config key
  ``compilation_cache_dir``): a repeat run loads its XLA executables from disk instead of
  compiling them again.
* :class:`CompileClock` -- seconds JAX spends tracing, lowering and compiling (or loading
  from the cache) while it runs, read from ``jax.monitoring``'s duration events; the commands
  report them as ``compile_seconds``, apart from ``solve_seconds``.
* :func:`run_job` / :func:`exit_on_failures` -- one Hydra job: typed config in, the objective
  value out (what sweeper plugins such as Optuna minimise); a failed job logs one ``error:``
  paragraph, writes an error ``result.json`` and returns +inf, and the process exits 1 after
  the whole sweep.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import pathlib
import sys
from typing import Any, Callable

import jax
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from jax.experimental.compilation_cache import compilation_cache
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from libra_jax.cli import config, report
from libra_jax.types import LibraInputError, show

log = logging.getLogger(__name__)

#: jax.monitoring duration events of one compilation: tracing to a jaxpr, lowering to MLIR,
#: XLA compilation (or loading the executable from the persistent cache). Tracing is
#: recorded for top-level traces only, so the three never overlap.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)

#: One entry per failed job of this process ("<run dir>: <message>"); exit status 1 if non-empty.
FAILURES: list[str] = []
_JOBS: list[bool] = []  # one entry per job run; True in a multirun


def enable_compilation_cache(directory: str | None) -> None:
    """Switches JAX's persistent compilation cache on in ``directory`` (``~`` expanded), or
    off when ``directory`` is None.

    Every program is cached, however small and quick to compile: a run compiles about 80
    small programs, and loading all of them is what makes a repeat run fast (with a
    threshold of 0.05 s of compile time, let alone JAX's default 1 s, only one of them is
    cached and a repeat ``conf=turing_nlg`` run took 4.3 s instead of 2.6 s). Call it before
    the first compilation; calling it again (each job of a multirun) re-reads the setting.
    """
    compilation_cache.reset_cache()  # JAX decides once whether to use the cache: ask again
    if directory is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return
    jax.config.update("jax_enable_compilation_cache", True)
    compilation_cache.set_cache_dir(os.path.expanduser(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # no size floor


class CompileClock:
    """Seconds JAX spends compiling while the clock runs (a context manager).

    ``seconds`` sums :data:`COMPILE_EVENTS`: tracing, lowering and XLA compilation, or loading
    the executable from the persistent cache on a hit. Example::

        with CompileClock() as clock:
            result = solve(problem)
        solve_only_s = result.solve_seconds - clock.seconds
    """

    def __init__(self) -> None:
        self.seconds = 0.0

    def _listen(self, event: str, duration_secs: float, **kwargs) -> None:
        if event in COMPILE_EVENTS:
            self.seconds += duration_secs

    def __enter__(self) -> CompileClock:
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)

    def net(self, result: Any) -> Any:
        """``result`` (a solver result dataclass) with ``solve_seconds`` net of the
        compilation this clock measured during the solve."""
        return dataclasses.replace(
            result, solve_seconds=max(result.solve_seconds - self.seconds, 0.0))


def typed_config(cfg: DictConfig, schema: Any = config.LibraConfig) -> Any:
    """The composed config as the ``schema`` object (:class:`~libra_jax.cli.config.LibraConfig`,
    or the scan's ``ScanConfig``): the one conversion of a command.

    Raises:
      LibraInputError: a key the schema does not define (added with ``+``), or a value the
        schema refuses once interpolations are resolved (``key=${oc.env:NAME}``, a key an
        interpolation names that does not exist).
    """
    config.reject_unknown_keys(cfg, schema)
    try:
        return OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "config"
        detail = (getattr(e, "msg", None) or str(e)).splitlines()
        text = detail[0] if detail else type(e).__name__
        raise LibraInputError(f"{key}: {text[:300]}") from None


def objective_value(value: float | None) -> float:
    """A job's return value: the objective as a float; +inf when there is none (a failed job,
    or a result without a finite value).

    Every objective is minimised, so +inf ranks such a job last and a sweep goes on. Not NaN:
    hydra-optuna-sweeper 1.3 aborts the whole sweep on a NaN trial (Optuna refuses the value,
    and the sweeper's fallback then fails too).
    """
    return math.inf if value is None else float(value)


def os_error_message(e: OSError) -> str:
    """An ``OSError`` on a path the config names (an output directory, the compilation
    cache, ...) as a one-line message, e.g. "cannot use '/proc/x': No such file or
    directory"."""
    reason = e.strerror or " ".join(str(e).split()) or type(e).__name__
    if e.filename is None:
        return f"{reason} (a path the config names)"
    return f"cannot use {show(str(e.filename))}: {reason}"


def _fail(output_dir: pathlib.Path, message: str, cfg: DictConfig) -> None:
    """Record the failure and write the error ``result.json``. Reads the composed config as
    it is: the typed one may be what failed."""
    FAILURES.append(f"{output_dir}: {message}")
    multi_run = cfg.get("workloads") is not None
    data = report.error_dict(
        message,
        objective=cfg.get("multi_objective" if multi_run else "objective"),
        workload_file=OmegaConf.select(cfg, "workload.file"),
    )
    if multi_run:
        data.update({k: None for k in report.MULTI_EXTRA_KEYS})
    report.write_json(output_dir / "result.json", data)


def run_job(cfg: DictConfig, job: Callable[[config.LibraConfig, pathlib.Path], float]) -> float:
    """Runs ``job(typed config, run dir)`` as one Hydra job and returns its objective value.

    Converts the config (:func:`typed_config`) and switches the compilation cache as
    configured first. Bad input (:class:`~libra_jax.types.LibraInputError`) logs one
    ``error: ...`` paragraph (stderr and the job's log file) and writes an error
    ``result.json``; any other exception is logged the same way with its traceback, so a bug
    does not stop the other jobs of a sweep. Both return +inf (:func:`objective_value`).
    """
    hydra_cfg = HydraConfig.get()
    _JOBS.append(hydra_cfg.mode == RunMode.MULTIRUN)
    output_dir = pathlib.Path(hydra_cfg.runtime.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        c = typed_config(cfg)
        enable_compilation_cache(c.compilation_cache_dir)
        return job(c, output_dir)
    except LibraInputError as e:
        message = " ".join(str(e).split())  # one paragraph
        log.error("error: %s", message)
    except OSError as e:  # a path the config names cannot be made, read or written
        message = os_error_message(e)
        log.error("error: %s", message)
    except Exception as e:  # noqa: BLE001 -- a bug must not stop the other jobs of a sweep
        text = " ".join(str(e).split())
        text = text if len(text) <= 400 else text[:397] + "..."
        message = (f"internal error ({type(e).__name__}: {text}); please report it with the "
                   "traceback")
        log.exception("error: %s", message)
    _fail(output_dir, message, cfg)
    return objective_value(None)


def exit_on_failures() -> None:
    """Exits with status 1 if any job of this process failed (after the whole sweep)."""
    if FAILURES:
        if any(_JOBS):
            print(f"error: {len(FAILURES)} of {len(_JOBS)} jobs failed:", file=sys.stderr)
            for failure in FAILURES:
                print(f"  {failure}", file=sys.stderr)
        sys.exit(1)
