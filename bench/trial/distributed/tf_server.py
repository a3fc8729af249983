"""A TensorFlow server task (a parameter server, or a worker in ps_async):
``python -m bench.trial.distributed.tf_server``, told its place by ``TF_CONFIG`` and its threads by
``BENCH_THREADS``.  It serves until the coordinator stops it (and dies with its parent)."""

from __future__ import annotations

import json
import os

from bench.trial.runtime import processes


def main() -> None:
    processes.die_with_parent()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    spec = json.loads(os.environ["TF_CONFIG"])
    threads = int(os.environ.get("BENCH_THREADS", "0"))
    # Inter-op threads stay TensorFlow's default: a server with one can deadlock (a receive
    # waiting on the only thread that would run the send).
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads)
    server = tf.distribute.Server(
        tf.train.ClusterSpec(spec["cluster"]),
        job_name=spec["task"]["type"],
        task_index=spec["task"]["index"],
        protocol="grpc",
        config=config,
        start=True,
    )
    server.join()


if __name__ == "__main__":
    main()
