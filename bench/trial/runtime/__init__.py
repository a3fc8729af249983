"""The trial side's process runtime: what every child process of bench shares.

- :mod:`.protocol`: a trial directory (``config.json`` in; ``events.jsonl``, one line per
  finished epoch, and ``result.json`` out), its writer and its one event reader;
- :mod:`.processes`: die-with-parent, process-group and descendant kills, free ports;
- :mod:`.heartbeat`: the host's heartbeat for a child that cannot see the host die;
- :mod:`.child`: the one way a child process serves a trial directory;
- :mod:`.hooks`: a trial's hooks (what a check harness changes in it), named in
  ``hooks.json`` and in the result.

It imports no framework and nothing of Hydra, MLflow or Docker, so it runs in every
environment and image bench starts trials in.
"""
