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
* :class:`ExecutableStore` (:data:`STORE`) -- the batch kernels' compiled XLA executables,
  kept on disk next to JAX's cache (``<cache>/executables``) and loaded without tracing or
  lowering: JAX's own cache must trace and lower a program to find it (1.5-2.5 s for the
  kernel), the store reads it by a key of the call's shapes.
* :func:`stored` -- ``types.jit`` through the store, for the other top-level programs a
  command runs (metrics, violations, the equal split's projection, sensitivities): a cached
  ``libra-train`` then traces and lowers nothing at all.
* :class:`CompileClock` -- seconds JAX spends tracing, lowering and compiling (or loading from
  the cache) while it runs, read from ``jax.monitoring``'s duration events; results report
  them as ``compile_seconds``, apart from ``solve_seconds`` (:func:`timed`, the decorator of
  the solvers' entry points).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import inspect
import os
import pathlib
import pickle
import platform
import tempfile
import threading
import time
from typing import Any, Callable

import jax
import jaxlib
import numpy as np
from jax.experimental import serialize_executable
from jax.experimental.compilation_cache import compilation_cache

from libra_jax.types import COMPILER_OPTIONS, jit

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
    "/libra_jax/executable_store/load_duration",
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


# ------------------------------------------------------------------------------------------
# The executable store


def _code_fingerprint() -> str:
    """Hash of the package's model and solver sources (what a kernel is compiled from): a
    stored executable of an older version of the code is never used."""
    root = pathlib.Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted([root / "types.py", *(root / "model").glob("*.py"),
                        *(root / "solvers").glob("*.py")]):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _host_fingerprint() -> str:
    """The machine an XLA executable was built for: JAX and jaxlib versions, the backend and
    its devices, the CPU's architecture and instruction-set flags (an executable of a
    machine with AVX-512 must not run on one without), the XLA flags."""
    flags = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), "")
    except OSError:
        pass
    devices = jax.local_devices()
    parts = (jax.__version__, jaxlib.__version__, jax.default_backend(),
             devices[0].device_kind if devices else "", len(devices), platform.machine(),
             flags, os.environ.get("XLA_FLAGS", ""), sorted(COMPILER_OPTIONS.items()))
    # (the options asked for: with the jaxlib and backend, they decide which of them
    # types.compiler_options() keeps, which costs a compile to ask)
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _signature(args, static) -> tuple:
    """What identifies a program of one function: the tree of the arguments with each
    leaf's shape, dtype and weak type, the static arguments, and whether float64 is on at
    the call (the fingerprint, computed once per process, cannot say)."""
    leaves, tree = jax.tree.flatten(args)
    dtypes = (np.dtype(x.dtype if hasattr(x, "dtype") else np.result_type(x)) for x in leaves)
    weak = (getattr(x, "weak_type", not hasattr(x, "dtype")) for x in leaves)
    return (str(tree), tuple((np.shape(x), d.name, w) for x, d, w in zip(leaves, dtypes, weak)),
            repr(sorted(static.items())), bool(jax.config.jax_enable_x64))


@contextlib.contextmanager
def _without_jax_cache():
    """JAX's persistent cache off for one compilation: an executable JAX loaded from its
    cache cannot be serialised again (its functions are missing: "Function ... not found"
    when the copy runs), so what the store keeps is always compiled afresh."""
    was = jax.config.jax_enable_compilation_cache
    if not was:
        yield
        return
    jax.config.update("jax_enable_compilation_cache", False)
    compilation_cache.reset_cache()
    try:
        yield
    finally:
        jax.config.update("jax_enable_compilation_cache", True)
        compilation_cache.reset_cache()


class ExecutableStore:
    """Compiled programs of the batch kernels (and of :func:`stored` functions), in memory
    and on disk.

    ``call(fn, args, static, options)`` runs the jitted ``fn`` on ``args`` (``static``: its
    static keyword arguments; ``options``: XLA compile options of this program, on top of
    the jit's own). The first call of a signature (`_signature`) in a process loads the
    executable from ``<cache folder>/executables/<key>.xla`` if a process on this machine
    compiled it before (the key covers the code, JAX, the machine and the signature), else
    traces, lowers and compiles it and writes it there (atomically; no folder: memory only).
    A stored file that fails to load or to run is deleted and compiled again. A program
    that calls LAPACK (e.g. ``pinv``) is marked as such in its file, and jaxlib's LAPACK
    kernels are set up before it is loaded (`_initialize_lapack`). Compilation and loading
    are timed as JAX's are (`CompileClock` adds them)."""

    def __init__(self) -> None:
        self._memory: dict[tuple, Any] = {}
        self._fingerprint: str | None = None
        self._lock = threading.Lock()
        self._notes: list | None = None
        self._notes_at: pathlib.Path | None = None
        self.loaded = 0  # executables read from disk in this process
        self.compiled = 0  # executables compiled in this process

    def notes(self) -> tuple:
        """The lines noted (`note`) in this store's folder for this code and machine, by
        this process and earlier ones (read once per process, then kept up to date)."""
        path = self._notes_path()
        if self._notes is None or path != self._notes_at:  # (the folder may change)
            self._notes, self._notes_at = [], path
            if path is not None:
                try:
                    text = path.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    text = ""
                self._notes = list(dict.fromkeys(x for x in text.splitlines() if x))
        return tuple(self._notes)

    def note(self, line: str) -> None:
        """Appends one line (no newline in it) to the store's notes (e.g. which bucket
        program a kernel executable is, for the batch planner); kept in memory without a
        folder, or when the folder cannot be written."""
        if line in self.notes() or "\n" in line:
            return
        self._notes = [*(self._notes or ()), line]
        path = self._notes_path()
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "a", encoding="utf-8") as f:  # (one short append: atomic)
                    f.write(line + "\n")
            except OSError:
                pass

    def _notes_path(self) -> pathlib.Path | None:
        folder = self.folder()
        return None if folder is None else folder / f"notes-{self._key('notes')[:24]}.txt"

    def programs(self, fn: Callable | None = None) -> int:
        """Executables in memory (of ``fn`` only, if given)."""
        return sum(1 for key in self._memory if fn is None or key[0] == _name(fn))

    def folder(self) -> pathlib.Path | None:
        directory = jax.config.jax_compilation_cache_dir
        if not jax.config.jax_enable_compilation_cache or not directory:
            return None
        return pathlib.Path(os.path.expanduser(directory)) / "executables"

    def _key(self, *sig) -> str:
        if self._fingerprint is None:
            self._fingerprint = hashlib.sha256(
                (_code_fingerprint() + _host_fingerprint()).encode()).hexdigest()
        return hashlib.sha256(repr((self._fingerprint, sig)).encode()).hexdigest()

    def call(self, fn, args: tuple, static: dict | None = None, options: dict | None = None):
        static = static or {}
        options = dict(options or {})
        sig = (_name(fn), _signature(args, static), repr(sorted(options.items())))
        exe = self._memory.get(sig)
        if exe is not None:
            return exe(*args)
        with self._lock:
            exe = self._memory.get(sig)  # (another thread may have made it meanwhile)
            if exe is not None:
                return exe(*args)
            folder = self.folder()
            path = None if folder is None else folder / (self._key(*sig) + ".xla")
            if path is not None and path.exists():
                exe = self._load(path)
                if exe is not None:
                    try:
                        out = jax.block_until_ready(exe(*args))
                    except jax.errors.JaxRuntimeError:
                        exe = None
                    else:
                        self._memory[sig] = exe
                        self.loaded += 1
                        return out
                path.unlink(missing_ok=True)
            exe = self._compile(fn, args, static, options, path)
            self._memory[sig] = exe
            self.compiled += 1
        return exe(*args)

    @staticmethod
    def _load(path: pathlib.Path):
        start = time.perf_counter()
        try:
            payload = pickle.loads(path.read_bytes())
            if payload["lapack"]:
                _initialize_lapack()
            exe = serialize_executable.deserialize_and_load(*pickle.loads(payload["executable"]))
        except Exception:  # noqa: BLE001 -- a damaged or foreign file is compiled again
            return None
        jax.monitoring.record_event_duration_secs(
            STORE_LOAD_EVENT, time.perf_counter() - start)
        return exe

    @staticmethod
    def _compile(fn, args, static, options, path: pathlib.Path | None):
        with _without_jax_cache():
            exe = fn.trace(*args, **static).lower().compile(compiler_options=options or None)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                executable = pickle.dumps(serialize_executable.serialize(exe))
                # (a LAPACK call names its kernel, "lapack_<routine>_ffi", in the executable)
                blob = pickle.dumps({"executable": executable,
                                     "lapack": b"lapack_" in executable})
                with tempfile.NamedTemporaryFile(dir=path.parent, delete=False) as tmp:
                    tmp.write(blob)
                os.replace(tmp.name, path)
            except OSError:
                pass  # a read-only or full cache folder: the program stays in memory
        return exe

    def clear_memory(self) -> None:
        """Forgets the executables in memory (the files stay): the next call of each
        signature loads it again, as a new process would."""
        self._memory.clear()


def _initialize_lapack() -> None:
    """Sets up jaxlib's LAPACK kernels (their BLAS/LAPACK function pointers), as JAX does
    when it lowers a linear-algebra operation: a program loaded from the store skips the
    lowering, and its LAPACK calls would jump to null pointers (a segmentation fault)."""
    from jaxlib import lapack

    lapack.prepare_lapack_call("getrf_ffi", np.dtype(np.float64))


def stored(fn: Callable | None = None, *, static_argnames: str | tuple[str, ...] = ()):
    """Decorates a top-level JAX function: ``types.jit`` whose programs run through
    :data:`STORE`, so that a later process loads them without tracing or lowering.

    Use it for the programs a command runs once or a few times per process (a cached
    ``libra-train`` otherwise spends ~0.4 s tracing and lowering them, and importing XLA's
    MLIR dialects, only to find them in JAX's cache); the call goes through the store's
    signature (~50 us), not jit's C++ fast path, so not for a function called in a hot loop.
    Dynamic arguments are positional; ``static_argnames`` are keywords (hashable, part of the
    key). ``.jitted`` is the plain jitted function (to call inside another jit)."""
    if fn is None:
        return functools.partial(stored, static_argnames=static_argnames)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    jitted = jit(fn, static_argnames=names)
    params = list(inspect.signature(fn).parameters)
    first_static = min((params.index(n) for n in names if n in params), default=len(params))

    @functools.wraps(fn)
    def call(*args, **kwargs):
        static = {name: kwargs.pop(name) for name in names if name in kwargs}
        if kwargs or len(args) > first_static:
            raise TypeError(
                f"{_name(fn)}: pass the dynamic arguments by position and {list(names)} by "
                f"keyword (a stored program is keyed by them; got {len(args)} positional, "
                f"keywords {sorted(kwargs)})")
        default_cache()  # (as the solvers' entry points do)
        return STORE.call(jitted, args, static)

    call.jitted = jitted
    return call


def _name(fn) -> str:
    return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


#: The jax.monitoring event of loading an executable from the store (counted as compile
#: time, as JAX counts a persistent-cache hit).
STORE_LOAD_EVENT = "/libra_jax/executable_store/load_duration"

#: The process's store (the batch engine's kernels run through it).
STORE = ExecutableStore()
