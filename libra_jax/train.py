"""``python -m libra_jax.train``: the entry point; the command itself lives in :mod:`libra_jax.cli.train`."""

from libra_jax.cli.train import cli

if __name__ == "__main__":
    cli()
