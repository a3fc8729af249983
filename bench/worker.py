"""``python -m bench.worker TRIAL_DIR``: the documented entry point of a trial's worker, kept
where it always was; the worker itself is :mod:`bench.trial.worker`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("bench.trial.worker", run_name="__main__", alter_sys=True)
