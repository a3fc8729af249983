"""``python -m bench``: the sweep and every tool (``bench TOOL ...``); hands over to
:mod:`bench.cli`."""

import sys

try:
    from bench.cli import run
except KeyboardInterrupt:  # Ctrl-C while the imports load: an interrupt, no traceback
    print("bench: interrupted", file=sys.stderr)
    from bench.trial.runtime.processes import exit_with

    exit_with(130)

run()
