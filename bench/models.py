"""``python -m bench.models``: the documented entry point of the image-model inventory, kept
where it always was; the command runs on the host (:mod:`bench.cli.models`), the lines are
counted by :mod:`bench.trial.models.inventory`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("bench.cli.models", run_name="__main__", alter_sys=True)
