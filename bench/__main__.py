from bench.cli import run

run()
