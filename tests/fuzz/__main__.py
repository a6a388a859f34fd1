"""``python -m tests.fuzz [options]`` (from the repository root): a held-out fuzz run,
:func:`tests.fuzz.runner.main`; ``--help`` lists the options."""

import sys

from .runner import main

if __name__ == "__main__":
    sys.exit(main())
