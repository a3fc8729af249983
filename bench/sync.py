"""``python -m bench.sync``: the documented entry point, kept where it always was; the
command is :mod:`bench.cli.sync`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("bench.cli.sync", run_name="__main__", alter_sys=True)
