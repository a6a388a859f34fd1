"""``python -m libra_jax.evaluate``: the entry point; the command itself lives in :mod:`libra_jax.cli.evaluate`."""

from libra_jax.cli.evaluate import cli

if __name__ == "__main__":
    cli()
