"""Which Python runs a trial, and making it: MXNet's pinned environment, the environment of a
non-pinned framework version, ``bench setup mxnet|horovod``."""
