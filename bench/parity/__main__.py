"""``python -m bench.parity``: the documented entry point, kept where it always was; the
command is :mod:`bench.cli.parity`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("bench.cli.parity", run_name="__main__", alter_sys=True)
