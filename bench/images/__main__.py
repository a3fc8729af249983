"""``python -m bench.images``: the entry point, kept where it always was; the command is
:mod:`bench.cli.images` (``bench images``)."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("bench.cli.images", run_name="__main__", alter_sys=True)
