"""The strategies' typed configs, one module per strategy: each the one place of its
strategy's facts (its settings, how it runs, which frameworks have it, whether it needs
GPUs, splits the model, which frameworks the parity check covers).  Assembled, by name, in
:mod:`bench.core.strategy_configs`; this package's ``__init__`` imports nothing."""
