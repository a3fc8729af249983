"""``python -m bench``: the sweep and every tool (``bench TOOL ...``); hands over to
:mod:`bench.cli`."""

from bench.cli import run

run()
