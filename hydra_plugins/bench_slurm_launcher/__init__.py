"""bench's Slurm launcher plugin for Hydra (see bench_slurm_launcher.py)."""
