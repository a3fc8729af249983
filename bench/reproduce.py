"""``python -m bench.reproduce RUN_ID``: the documented entry point, kept where it always was;
the command is :mod:`bench.cli.reproduce`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("bench.cli.reproduce", run_name="__main__", alter_sys=True)
