"""What every command does around its job: JAX's compilation cache, and running one Hydra job
so that bad input is a message, not a traceback.

* :func:`enable_compilation_cache` -- JAX's persistent compilation cache (config key
  ``compilation_cache_dir``; the public API's `libra_jax.enable_compilation_cache`). The
  studies time JAX's compilation apart from the solve (``compile_seconds``).
* :func:`run_job` / :func:`exit_on_failures` -- one Hydra job: typed config in, the objective
  value out (what sweeper plugins such as Optuna minimise); a failed job logs one ``error:``
  paragraph, writes an error ``result.json`` and returns +inf, and the process exits 1 after
  the whole sweep.
* :class:`JobRecords` -- the Hydra callback that lets the launching process of a multirun
  see the failures of jobs that ran elsewhere (joblib, Ray or SLURM workers): each job
  writes a record into the sweep dir, and :func:`exit_on_failures` reads them.
* :func:`compose_once` -- a command's first step: Hydra composes the config once, not twice.
* :func:`end_process` -- a command's last step: streams and logs flushed, then the process
  ends without the interpreter's teardown.
"""

from __future__ import annotations

import atexit
import json
import logging
import math
import os
import pathlib
import sys
import threading
from typing import Any, Callable, NoReturn, Sequence

from hydra._internal.utils import get_args_parser  # Hydra's own command-line parser
from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from libra_jax import enable_compilation_cache
from libra_jax.cli import config, report
from libra_jax.types import LibraInputError, show_path

log = logging.getLogger(__name__)

#: One entry per failed job of this process ("<run dir>: <message>"); exit status 1 if non-empty.
FAILURES: list[str] = []
_JOBS: list[bool] = []  # one entry per job run; True in a multirun
#: In a multirun's sweep dir: one record per job (``.libra_job_<job num>.json``: its run dir,
#: and its error or null), written by the job in whichever process or host runs it (files,
#: not a folder, so the sweep dir's folders stay the jobs' run dirs).
JOB_RECORD = ".libra_job_{}.json"
_SWEEPS: list[pathlib.Path] = []  # the sweep dirs of the multiruns this process launched


class JobRecords(Callback):
    """Hydra callback (``hydra.callbacks`` in the commands' configs): at the start of a
    multirun, in the launching process, clears the sweep dir's job records of an earlier
    multirun and remembers the dir, so :func:`exit_on_failures` reports the jobs that failed
    in other processes (a launcher's workers) as it does those of the basic launcher."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweep = pathlib.Path(config.hydra.sweep.dir)
        for old in _records(sweep):
            old.unlink(missing_ok=True)
        _SWEEPS.append(sweep)


def _records(sweep: pathlib.Path) -> list[pathlib.Path]:
    """The job records in a sweep dir, by job number."""
    head, tail = JOB_RECORD.split("{}")
    return sorted(sweep.glob(JOB_RECORD.format("*")),
                  key=lambda p: int(p.name[len(head):-len(tail)]))


def _record_job(hydra_cfg: Any, output_dir: pathlib.Path, error: str | None) -> None:
    """Writes this job's record (multirun only; `JobRecords`)."""
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return
    sweep = pathlib.Path(hydra_cfg.sweep.dir)
    sweep.mkdir(parents=True, exist_ok=True)
    report.write_json(sweep / JOB_RECORD.format(hydra_cfg.job.num),
                      {"output_dir": str(output_dir), "error": error})


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
        typed = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", None) or "config"
        detail = (getattr(e, "msg", None) or str(e)).splitlines()
        text = detail[0] if detail else type(e).__name__
        raise LibraInputError(f"{key}: {text[:300]}") from None
    if isinstance(typed, config.LibraConfig):  # typed by the schema: no second conversion
        config.mark_checked(typed)
    return typed


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
    return f"cannot use {show_path(e.filename)}: {reason}"


def _fail(output_dir: pathlib.Path, message: str, cfg: DictConfig) -> None:
    """Write the error ``result.json``. Reads the composed config as it is: the typed one
    may be what failed."""
    multi_run = cfg.get("workloads") is not None
    data = report.error_dict(
        message,
        objective=cfg.get("multi_objective" if multi_run else "objective"),
        workload_file=OmegaConf.select(cfg, "workload.file"),
    )
    if multi_run:
        data.update({k: None for k in report.MULTI_EXTRA_KEYS})
    report.write_json(output_dir / "result.json", data)


def run_job(cfg: DictConfig, job: Callable[[Any, pathlib.Path], Any],
            schema: Any = config.LibraConfig, result_json: bool = True) -> Any:
    """Runs ``job(typed config, run dir)`` as one Hydra job and returns what it returns (the
    objective value of libra-train and libra-evaluate jobs).

    Converts the config to ``schema`` (:func:`typed_config`; the scan's is ``ScanConfig``)
    and switches the compilation cache as configured first. Bad input
    (:class:`~libra_jax.types.LibraInputError`) logs one ``error: ...`` paragraph (stderr
    and the job's log file), records the failure (:data:`FAILURES`, the sweep's job record)
    and, with ``result_json``, writes an error ``result.json``; any other exception is
    logged the same way with its traceback, so a bug does not stop the other jobs of a
    sweep. Both return +inf (:func:`objective_value`); :func:`exit_on_failures` exits 1
    after the sweep.
    """
    hydra_cfg = HydraConfig.get()
    _JOBS.append(hydra_cfg.mode == RunMode.MULTIRUN)
    output_dir = pathlib.Path(hydra_cfg.runtime.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        c = typed_config(cfg, schema)
        enable_compilation_cache(c.compilation_cache_dir)
        value = job(c, output_dir)
        _record_job(hydra_cfg, output_dir, None)
        return value
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
    FAILURES.append(f"{output_dir}: {message}")
    if result_json:
        _fail(output_dir, message, cfg)
    _record_job(hydra_cfg, output_dir, message)
    return objective_value(None)


def _swept_jobs() -> tuple[list[str], int]:
    """(failures "<run dir>: <message>" by job number, jobs) from the job records of the
    multiruns this process launched."""
    failures, jobs = [], 0
    for sweep in _SWEEPS:
        paths = _records(sweep)
        for path in paths:
            record = json.loads(path.read_text())
            if record["error"] is not None:
                failures.append(f"{record['output_dir']}: {record['error']}")
        jobs += len(paths)
    return failures, jobs


def exit_on_failures() -> None:
    """Exits with status 1 if any job failed, after the whole sweep: a job of this process,
    or, in a multirun, a job of any process (the job records of `JobRecords`)."""
    failures, jobs = (_swept_jobs() if _SWEEPS else (FAILURES, len(_JOBS)))
    if failures:
        if _SWEEPS or any(_JOBS):
            print(f"error: {len(failures)} of {jobs} jobs failed:", file=sys.stderr)
            for failure in failures:
                print(f"  {failure}", file=sys.stderr)
        sys.exit(1)


def mode_is_default(argv: Sequence[str]) -> bool:
    """Whether ``hydra.mode`` is certainly unset for this command line: no override names
    ``hydra.mode`` or picks a ``hydra/...`` group option, and no ``--config-dir``,
    ``--config-path`` or ``--config-name`` brings a primary config of the user's (the
    package's own configs never set it; a test checks). Then Hydra's mode is RUN, or
    MULTIRUN with ``-m``."""
    args, _ = get_args_parser().parse_known_args(list(argv))
    if args.config_dir or args.config_path or args.config_name:
        return False
    for override in args.overrides:
        key = override.split("=", 1)[0].lstrip("+~")
        if key.startswith("hydra/") or key in ("hydra", "hydra.mode"):
            return False
    return True


def compose_once(argv: Sequence[str] | None = None) -> None:
    """Lets Hydra compose the config once per run instead of twice (~0.15-0.25 s of a
    cached ``libra-train``'s ~1 s of work after imports).

    Before a run Hydra composes the whole config a first time only to read ``hydra.mode``
    (``Hydra.get_mode``), then again for the job. Where :func:`mode_is_default` shows the
    mode unset, that first composition can only answer None (Hydra's own answer for an unset
    mode, after which ``-m`` decides), so this process's ``get_mode`` answers None without
    composing. Otherwise Hydra is left as it is. Only the commands' ``cli()`` call this."""
    argv = sys.argv[1:] if argv is None else argv
    if not mode_is_default(argv):
        return
    from hydra._internal.hydra import Hydra

    if hasattr(Hydra, "get_mode"):  # Hydra 1.2-1.3; a later Hydra: left alone
        Hydra.get_mode = _mode_unset


def _mode_unset(self, config_name, overrides) -> None:  # noqa: ARG001 -- Hydra's signature
    """``Hydra.get_mode`` where the mode is known to be unset (:func:`compose_once`)."""
    return None


def end_process() -> NoReturn:
    """Ends a command's process with status 0 once its work is done, skipping the
    interpreter's own teardown.

    Finalising a JAX process frees every compiled program, the XLA client and some thousand
    modules one object at a time: about 0.5 s on 2 cores, as long as a cached ``libra-train``
    run's solve, sensitivities and table together. The exit handlers still run (they flush
    and close the log files, and disconnect from a Ray cluster), then stdout and stderr are
    flushed; results and compiled programs are already on disk. Only the commands' ``cli()``
    call this, never library code."""
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)  # CPython's atexit runner
    others = [t for t in threading.enumerate()
              if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if run_exit_handlers is None or others:
        # Another interpreter, or threads still running (e.g. joblib's worker manager after a
        # launcher's sweep, which the interpreter joins before its exit handlers): the usual
        # way out.
        sys.exit(0)
    run_exit_handlers()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to write to
            pass
    os._exit(0)
