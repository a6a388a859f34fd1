"""Finding the input files a config names (the working directory, then the shipped inputs)."""

from __future__ import annotations

import os
import pathlib

from libra_jax.inputs import DATA_DIR, LIBRA_INPUTS_DIR
from libra_jax.types import LibraInputError, show


def resolve_path(value: str, key: str, base_dir: str | os.PathLike | None = None) -> str:
    """Find the file a config key names.

    Args:
      value: the path as written in the config.
      key: the config key, for messages (e.g. ``"network.file"``).
      base_dir: directory relative paths are tried in first; default the current working
        directory (Hydra 1.3 does not change it, so this is where the command was started).

    Returns:
      The path of an existing file (absolute when ``base_dir`` is).

    Raises:
      LibraInputError: no such file (the message lists the places looked in), or a directory.
    """
    if not isinstance(value, (str, os.PathLike)) or "\0" in os.fspath(value):
        raise LibraInputError(f"{key} = {show(value)}: expected a file path.")
    raw = os.path.expanduser(os.fspath(value))
    path = pathlib.Path(raw)
    if path.is_absolute():
        candidates = [path]
    else:
        base = pathlib.Path(base_dir) if base_dir is not None else pathlib.Path.cwd()
        candidates = [base / path, LIBRA_INPUTS_DIR / path, DATA_DIR / path]
    for candidate in candidates:
        try:
            if candidate.is_file():
                return str(candidate)
        except OSError as e:  # e.g. a name too long for the file system
            raise LibraInputError(
                f"{key}: cannot use the path {show(value)} ({e.strerror or e}).") from None
    folders = [c for c in candidates if c.is_dir()]
    if folders:
        files = sorted(f.name for f in folders[0].iterdir() if f.is_file())
        listing = (f"; files there: {', '.join(files[:6])}{', ...' if len(files) > 6 else ''}"
                   if files else "; it holds no files")
        raise LibraInputError(
            f"{key}: {show(value)} is a directory ({folders[0]}), not a file; give a file, e.g. "
            f"{key}={pathlib.PurePath(value, files[0] if files else 'name.txt')}{listing}.")
    looked = " and ".join(str(c) for c in candidates)
    hint = "" if path.is_absolute() else " (relative paths are tried in that order)"
    raise LibraInputError(f"{key}: file {show(value)} not found; looked at {looked}{hint}.")
