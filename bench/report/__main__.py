"""``python -m bench.report``: the documented entry point, kept where it always was; the
command is :mod:`bench.cli.report`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("bench.cli.report", run_name="__main__", alter_sys=True)
