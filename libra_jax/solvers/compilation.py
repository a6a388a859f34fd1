"""JAX compilation around the solvers: the persistent compilation cache, for the commands
and for Python users alike, and the clock that tells compilation from solving.

* :func:`enable_compilation_cache` -- JAX's persistent compilation cache in a folder: a repeat
  run loads its XLA executables from disk instead of compiling them again.
* :func:`default_cache` -- called by `solve.solve`, `batch.solve_batch` and
  `batch.solve_stacked` before they compile: the first call of a process switches the cache on
  in ``$LIBRA_JAX_CACHE_DIR`` (default ``~/.cache/libra_jax/jax``, the commands' folder; an
  empty value turns it off), unless the user (or a command) already chose a cache. It changes
  only what the cache needs: ``jax_enable_compilation_cache``, ``jax_compilation_cache_dir``
  and the two thresholds that decide which programs are kept (every program is: the solvers
  compile many small ones).
* :class:`CompileClock` -- seconds JAX spends tracing, lowering and compiling (or loading from
  the cache) while it runs, read from ``jax.monitoring``'s duration events; results report
  them as ``compile_seconds``, apart from ``solve_seconds`` (:func:`timed`, the decorator of
  the solvers' entry points).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any

import jax
from jax.experimental.compilation_cache import compilation_cache

#: The environment variable naming the cache folder ("" = no cache).
CACHE_ENV = "LIBRA_JAX_CACHE_DIR"
#: The folder the commands and the Python API share by default.
DEFAULT_CACHE_DIR = "~/.cache/libra_jax/jax"

#: jax.monitoring duration events of one compilation: tracing to a jaxpr, lowering to MLIR,
#: XLA compilation (or loading the executable from the persistent cache). Tracing is
#: recorded for top-level traces only, so the three never overlap.
COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)

_DECIDED = False  # set once this process has chosen a cache (or none)



def enable_compilation_cache(directory: str | None) -> None:
    """Switches JAX's persistent compilation cache on in ``directory`` (``~`` expanded), or
    off when ``directory`` is None.

    Every program is cached, however small and quick to compile: a run compiles about 80
    small programs, and loading all of them is what makes a repeat run fast (with a
    threshold of 0.05 s of compile time, let alone JAX's default 1 s, only one of them is
    cached and a repeat ``conf=turing_nlg`` run took 4.3 s instead of 2.6 s). Call it before
    the first compilation; calling it again (each job of a multirun) re-reads the setting.
    """
    global _DECIDED
    _DECIDED = True
    compilation_cache.reset_cache()  # JAX decides once whether to use the cache: ask again
    if directory is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return
    jax.config.update("jax_enable_compilation_cache", True)
    compilation_cache.set_cache_dir(os.path.expanduser(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # no size floor


def cache_dir_from_env() -> str | None:
    """The cache folder ``$LIBRA_JAX_CACHE_DIR`` names (unset: the default folder; empty:
    None, no cache)."""
    value = os.environ.get(CACHE_ENV)
    if value is None:
        return DEFAULT_CACHE_DIR
    return value.strip() or None


def default_cache() -> None:
    """Once per process, before the solvers' first compilation: the persistent cache in
    :func:`cache_dir_from_env`'s folder, unless a cache was already chosen (by a command,
    :func:`enable_compilation_cache`, or the user's own ``jax_compilation_cache_dir``)."""
    global _DECIDED
    if _DECIDED:
        return
    _DECIDED = True
    if jax.config.jax_compilation_cache_dir is not None:
        return  # the user's own choice
    directory = cache_dir_from_env()
    if directory is not None:
        enable_compilation_cache(directory)


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
        compilation this clock measured during the solve; a result that already reports its
        own ``compile_seconds`` (the solvers' results do) is returned as it is."""
        if getattr(result, "compile_seconds", None) is not None:
            return result
        return dataclasses.replace(
            result, solve_seconds=max(result.solve_seconds - self.seconds, 0.0))


def timed(fn):
    """Decorates a solver entry point: the persistent cache first (:func:`default_cache`),
    then the call under a :class:`CompileClock`; its result (a dataclass with
    ``solve_seconds`` and ``compile_seconds``) gets the wall time without compilation and
    the compilation apart."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        default_cache()
        wall = time.perf_counter()
        with CompileClock() as clock:
            result = fn(*args, **kwargs)
        wall = time.perf_counter() - wall
        return dataclasses.replace(result, solve_seconds=max(wall - clock.seconds, 0.0),
                                   compile_seconds=clock.seconds)

    return wrapper
