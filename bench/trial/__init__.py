"""One trial in one process: the training/inference loop (:mod:`.loop`) and the worker entry
point that runs it, or hands it to a distributed strategy, from a trial folder
(:mod:`.worker`, ``python -m bench.trial.worker``).  Imports nothing itself, so that the
strategies can use the loop while the worker uses the strategies."""
