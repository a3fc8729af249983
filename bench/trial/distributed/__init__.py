"""Distributed training: one small protocol (:mod:`.base`), one module per strategy.

``distributed=`` picks a strategy; ``workers`` (per node), ``nodes`` and ``ps`` size it.
With ``nodes > 1`` the trial must run inside a Slurm allocation of that many nodes (the
submitit launcher sizes each job so); :mod:`.nodes` starts one agent per node.
Every strategy runs the trial in worker processes started by the trial's own process (the
coordinator, :mod:`.coordinator`): each rank runs the same timing loop as a single-process
trial (:func:`bench.trial.loop.run_trial`) on a session whose ``step`` is the strategy's
distributed step, writes its own result, and the coordinator assembles ONE
:class:`~bench.core.result.TrialResult` from them: global samples/s, per-worker samples/s
(``worker{i}_samples_per_s``), exposed communication time and, for parameter servers, push
and pull times.

MXNet's parameter-server modes (``kvstore_sync``, ``kvstore_async``) start a scheduler,
``ps`` servers and ``workers`` workers from :mod:`.kvstore` instead of the coordinator, with
the same per-epoch figures; ``kvstore_device`` reduces over devices inside one MXNet process
(the adapter does it).

The registry of strategies is :mod:`.registry`; this package's ``__init__`` imports
nothing, so its modules can name each other without a circle.
"""
