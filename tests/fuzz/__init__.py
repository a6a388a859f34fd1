"""The fuzz suite of libra_jax's inputs (issue 17, "Hostile and malformed input"): a test
package, driven by ``tests/test_fuzz.py`` (hypothesis) and run on its own for long held-out
runs.

Seeded mutations of the shipped inputs and of the public API's arguments are fed to the
public loaders (in long-lived worker processes, each case bounded in time and memory) and,
kept apart, to the ``libra-train`` command. The contract checked: every input is either
accepted (and then solves to finite results or a non-ok status) or refused with
``libra_jax.LibraInputError``, within 10 s and 1 GB; a duplicate YAML key or a number
replaced by a non-number is never accepted; the command never prints a traceback for bad
input.

A held-out run, from the repository root (``tests.fuzz`` runs :func:`runner.main`; ``--help``
lists the options: ``--workers``, ``--family``, ``--kind``, ``--no-solve``, ...)::

    python -m tests.fuzz --seed 7 --cases 5000 --cli-cases 40 --out /tmp/fuzz

prints one table per run (in-process cases, then CLI cases) of outcomes by mutation family,
the distinct failure causes with one example each, and writes ``report.json`` plus one
reproducer per failing case (``repro/<id>.json`` and its input file) into ``--out``; it exits
1 when a case broke the contract.

Modules (every name below is also importable from the package):

* ``common``: the bounds, the input kinds and their seeds (the shipped inputs), the valid
  arguments of the argument kinds (:func:`base_args`), the generated multi-MB inputs
  (:func:`big_input`), the tagged argument values (:func:`decode`), RSS and CPU readings.
* ``mutations`` (text and numbers), ``yaml_mutations`` (YAML types, nesting, duplicate keys,
  tags, alias bombs), ``arg_mutations`` (notation and constraint grammar, wrong argument
  types): the families ``mutate_<family>(data, rng, kind=...) -> Mutation`` over the shipped
  inputs (bytes of a file, or a notation / constraint string) and over API arguments
  (``mutate_wrong_arg_type``, ``mutate_extreme_number`` and ``mutate_huge_int`` on argument
  dicts).
* ``generators``: :data:`FAMILIES`, :func:`make_case` (one seeded case),
  :func:`make_cli_case` (one command-line case).
* ``oracle``: what must be refused (:func:`yaml_duplicate_keys`, non-numbers) and
  :func:`run_case`, which runs one case in this process and classifies the outcome.
* ``runner``: :class:`Runner`, a pool of worker processes that import libra_jax once and run
  cases with the time and memory bounds enforced (a worker that dies, times out or grows
  past the memory bound is killed and replaced); :func:`run_cli_case`, one ``python -m
  libra_jax.train conf=turing_nlg ...`` run; :func:`main`, the held-out run.
* ``report``: the summary table, the failure causes, reproducers and the corpus
  (``tests/fixtures/fuzz/``).

Outcomes: ``accepted`` and ``rejected`` (LibraInputError) are the contract; every other
outcome is a failure: ``crash:<ExceptionType>`` (a RuntimeWarning counts: the suite runs
with warnings as errors), ``timeout`` (over 10 s of CPU time or 30 s of wall time, XLA
compilation excluded), ``memory`` (peak RSS over 1 GB above the worker's RSS before the case,
or MemoryError), ``silent-accept`` (a duplicate key or a non-number accepted),
``bad-result`` (status ok with a non-finite or negative number), ``code-exec`` (a YAML
python tag ran), ``long-message`` (an error message over 10,000 characters),
``worker-died``. CLI cases add ``traceback``, ``no-error-line`` (non-zero exit without an
``error:`` line).

Argument values are carried as JSON with a few tags (``{"$float": "inf"}``,
``{"$int_digits": ["7", 5000]}``, ``{"$ref": "net3d"}``, ...; see :func:`decode`), so a
reproducer is a small JSON file whatever it expands to.

How it is imported: the tests import it as ``fuzz`` (pytest's default import mode puts
``tests/`` on ``sys.path``, as for the tests' other sibling imports such as ``test_scan``),
the command line as ``tests.fuzz`` (from the repository root); its modules import each other
relatively, so both work. No module here is named ``test_*.py``, so pytest collects none.
"""

from __future__ import annotations

from .common import (
    ARG_KINDS,
    ASTRASIM_SEED,
    BIG_FILE_VARIANTS,
    CLI_TIME_LIMIT_S,
    FILE_KINDS,
    FIXTURES,
    INPUTS,
    KINDS,
    LINEAR_SEEDS,
    MAX_MESSAGE_CHARS,
    MEM_LIMIT_MB,
    NOTATION_SEEDS,
    OK_OUTCOMES,
    ROOT,
    SOLVE_HARD_S,
    SPEC_SEEDS,
    STR_KINDS,
    TIME_LIMIT_S,
    WALL_SLACK,
    YAML_KINDS,
    base_args,
    big_input,
    decode,
    seed_files,
    seeds,
)
from .oracle import MERGE_KEY, context, run_case, yaml_duplicate_keys
from .mutations import (
    EXTREMES,
    HUGE_DIGITS,
    NON_NUMBERS_TXT,
    NON_NUMBERS_YAML,
    ODD_CHARS,
    Mutation,
    mutate_byte_flip,
    mutate_extreme_number,
    mutate_huge_int,
    mutate_line_delete,
    mutate_line_duplicate,
    mutate_line_swap,
    mutate_non_utf8,
    mutate_token_delete,
    mutate_token_duplicate,
    mutate_token_swap,
)
from .yaml_mutations import (
    YAML_TAGS,
    alias_bomb,
    mutate_alias_bomb,
    mutate_deep_nesting,
    mutate_duplicate_key,
    mutate_wrong_yaml_type,
    mutate_yaml_tag,
)
from .arg_mutations import mutate_grammar, mutate_wrong_arg_type
from .generators import (
    CLI_FAMILIES,
    CLI_FILES,
    CLI_OVERRIDES,
    FAMILIES,
    families_for,
    make_case,
    make_cli_case,
    mutate_big_file,
)
from .report import (
    failure_causes,
    load_corpus,
    load_reproducer,
    signature,
    summarize,
    write_reproducer,
)
from .runner import Runner, main, run_cli_case, run_cli_cases

__all__ = [
    "ARG_KINDS", "ASTRASIM_SEED", "BIG_FILE_VARIANTS", "CLI_FAMILIES", "CLI_FILES",
    "CLI_OVERRIDES", "CLI_TIME_LIMIT_S", "EXTREMES", "FAMILIES", "FILE_KINDS", "FIXTURES",
    "HUGE_DIGITS", "INPUTS", "KINDS", "LINEAR_SEEDS", "MAX_MESSAGE_CHARS", "MEM_LIMIT_MB",
    "MERGE_KEY", "NON_NUMBERS_TXT", "NON_NUMBERS_YAML", "NOTATION_SEEDS", "ODD_CHARS",
    "OK_OUTCOMES", "ROOT", "SOLVE_HARD_S", "SPEC_SEEDS", "STR_KINDS", "TIME_LIMIT_S",
    "WALL_SLACK", "YAML_KINDS", "YAML_TAGS", "Mutation", "Runner", "alias_bomb", "base_args",
    "big_input", "context", "decode", "failure_causes", "families_for", "load_corpus",
    "load_reproducer", "main", "make_case", "make_cli_case", "mutate_alias_bomb",
    "mutate_big_file", "mutate_byte_flip", "mutate_deep_nesting", "mutate_duplicate_key",
    "mutate_extreme_number", "mutate_grammar", "mutate_huge_int", "mutate_line_delete",
    "mutate_line_duplicate", "mutate_line_swap", "mutate_non_utf8", "mutate_token_delete",
    "mutate_token_duplicate", "mutate_token_swap", "mutate_wrong_arg_type",
    "mutate_wrong_yaml_type", "mutate_yaml_tag", "run_case", "run_cli_case", "run_cli_cases",
    "seed_files", "seeds", "signature", "summarize", "write_reproducer", "yaml_duplicate_keys",
]
