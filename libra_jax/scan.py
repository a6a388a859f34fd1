"""``python -m libra_jax.scan``: the entry point; the command itself lives in :mod:`libra_jax.cli.scan`."""

from libra_jax.cli.scan import cli

if __name__ == "__main__":
    cli()
