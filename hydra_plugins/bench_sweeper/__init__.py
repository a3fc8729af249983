"""bench's Hydra sweeper: the basic sweeper, with ``repeats`` interleaved (see bench_sweeper)."""
