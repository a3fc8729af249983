"""The frameworks bench compares, one spec each: facts only (module and package names, the
supported version range, its environment, where its adapter, profiler and model builders
are, how its devices are probed and its weights read and written), read by every part of
bench that needs a framework's name for something.  Imports no framework and nothing of
bench: the adapters (:mod:`bench.trial.frameworks`) and the model builders
(:mod:`bench.trial.models`) are the only other places that name a framework."""

from __future__ import annotations

from dataclasses import dataclass, field

TORCH, TF, MXNET, JAX = "torch", "tf", "mxnet", "jax"


@dataclass(frozen=True)
class FrameworkSpec:
    name: str  # framework.name
    title: str  # as its users write it
    module: str  # the module a trial imports (and checks the __version__ of)
    adapter: str  # bench.trial.frameworks' module, imported only when a trial asks for it
    profiler: str  # bench.trial.profiling's module
    builder: str  # the function each of bench.trial.models' modules has for it
    # The minor series bench supports (a version outside is refused; bench.core.versions).
    supported: tuple[str, ...]
    # Its distributions on the package index: the first is the one a lock pins; then what
    # may be installed under other names (builds for CPU or CUDA).
    distributions: tuple[str, ...]
    # The package a version's environment installs from, without and with a GPU.
    cpu_package: str
    gpu_package: str
    # How it is asked which GPUs it sees: the function of bench.trial.runtime.device_probe that a
    # child process of its own interpreter runs (python -m bench.trial.runtime.device_probe NAME).
    device_probe: str
    # How its sessions' weights are exported and loaded in the canonical form (and dropout
    # switched off, the last step settled): the name of the form in
    # bench.trial.frameworks.weights.FORMS, shared by the frameworks that hold a model alike.
    weights: str
    # The one release bench runs, where it has one (''): no other version is accepted.
    only_release: str = ""
    # The variable naming the interpreter of its own environment ('': it runs in bench's).
    own_python_env: str = ""
    # Packages its environments install beside it (keras with TensorFlow).
    companions: tuple[str, ...] = ()
    # Where it keeps what it was built with, read as text (never imported): a path below
    # the package and the names of its version fields ('' where none is read).
    build_file: str = ""
    build_fields: dict[str, str] = field(default_factory=dict)
    # Its image's base for the cuda variant (launcher=docker; the cpu variant installs it
    # from pip on the official Python image).
    cuda_image: str = ""
    tag: str = ""  # the run tag holding its version
    gpu_fix: str = ""  # how to give it the GPUs it lacks
    colour: str = ""  # its colour in the report's figures
    # Whether its trial may run in bench's own process (launcher=inline): not where the
    # trial must choose its Keras backend before Keras is first imported.
    inline: bool = True
    # Whether bench has an image for it (docker/<name>.Dockerfile): launcher=docker and
    # compose.yaml's services; without one, its trials run in processes only.
    image: bool = True
    # model=<library> model.name=NAME: the library whose models it builds by name
    # (model.source; its stock twins are that library's too); '' where none is wired.
    library: str = ""
    # model=hf: the module of bench.trial.models that builds a Hugging Face causal LM for it (its
    # probe too), and the libraries that needs; '' where it has no build.
    hf_module: str = ""
    hf_libraries: str = ""
    # What its trials run, where not every framework's do (bench.checks refuses the rest):
    # settings only it has (cuDNN's autotuner, a channels-last memory format); tf32 on a
    # GPU's tensor cores; mixed precision (AMP) and fp16's loss scaling; compile=true (False:
    # it always compiles, so the key means nothing); data=folder's image files;
    # mode=generate's loop (a causal LM's cached forward); mode=serve's session
    # (bench.trial.frameworks.base.Predict: a forward on any number of samples).
    cudnn_benchmark: bool = False
    channels_last: bool = False
    tf32: bool = True
    amp: bool = True
    fp16_scaling: bool = True
    compile_setting: bool = True
    reads_folders: bool = True
    generates: bool = False
    serves: bool = True

    @property
    def own_environment(self) -> bool:
        """Whether its pinned version runs in an environment of its own, not bench's."""
        return bool(self.own_python_env)


FRAMEWORKS: dict[str, FrameworkSpec] = {
    s.name: s
    for s in (
        FrameworkSpec(
            TORCH,
            "PyTorch",
            module="torch",
            adapter="bench.trial.frameworks.torch_adapter",
            profiler="bench.trial.profiling.torch_profiler",
            builder="build_torch",
            supported=("2.13", "2.14", "2.15"),
            distributions=("torch",),
            cpu_package="torch",
            gpu_package="torch",
            device_probe="torch_gpus",
            weights="torch",
            build_file="version.py",
            build_fields={"__version__": "version", "cuda": "cuda"},
            cuda_image="pytorch/pytorch:2.13.0-cuda12.8-cudnn9-runtime",
            tag="torch_version",
            gpu_fix="install torch's CUDA wheel",
            colour="#c0392b",
            library="torchvision",
            hf_module="bench.trial.models.hf_lm",
            hf_libraries="transformers",
            cudnn_benchmark=True,
            channels_last=True,
            generates=True,
        ),
        FrameworkSpec(
            TF,
            "TensorFlow",
            module="tensorflow",
            adapter="bench.trial.frameworks.tf_adapter",
            profiler="bench.trial.profiling.tf_profiler",
            builder="build_keras",
            supported=("2.19", "2.20", "2.21"),
            distributions=("tensorflow", "tensorflow-cpu", "tensorflow-gpu"),
            cpu_package="tensorflow-cpu",
            gpu_package="tensorflow",
            device_probe="tf_gpus",
            weights="keras",
            companions=("keras",),
            build_file="python/platform/build_info.py",
            build_fields={"cuda_version": "cuda", "cudnn_version": "cudnn"},
            cuda_image="tensorflow/tensorflow:2.21.0-gpu",
            tag="tensorflow_version",
            gpu_fix="install TensorFlow's GPU build (tensorflow[and-cuda])",
            colour="#2471a3",
            library="keras",
            hf_module="bench.trial.models.keras_hub_lm",
            hf_libraries="keras-hub and tensorflow-text",
            generates=True,
        ),
        FrameworkSpec(
            MXNET,
            "MXNet",
            module="mxnet",
            adapter="bench.trial.frameworks.mxnet_adapter",
            profiler="bench.trial.profiling.mxnet_profiler",
            builder="build_mxnet",
            supported=("1.9",),
            distributions=("mxnet", "mxnet-cu117", "mxnet-cu112", "mxnet-cu110", "mxnet-cu102"),
            cpu_package="mxnet",
            gpu_package="mxnet",
            device_probe="mxnet_gpus",
            weights="gluon",
            only_release="1.9.1",
            own_python_env="BENCH_MXNET_PYTHON",
            # MXNet 1.9.1 (retired): its CUDA 11.7 build on NVIDIA's matching runtime image.
            cuda_image="nvidia/cuda:11.7.1-cudnn8-runtime-ubuntu22.04",
            tag="mxnet_version",
            gpu_fix="install MXNet's CUDA build in its own environment (`bench setup mxnet` "
            "on a host with the CUDA 11 runtime)",
            colour="#1e8449",
            tf32=False,  # its cuDNN settings are its own
            amp=False,
            compile_setting=False,  # always hybridized: a static graph, built in the warm-up
            reads_folders=False,
        ),
        FrameworkSpec(
            JAX,
            "JAX",
            module="jax",
            adapter="bench.trial.frameworks.jax_adapter",
            profiler="bench.trial.profiling.jax_profiler",
            builder="build_keras",  # the Keras models, on Keras' JAX backend
            supported=("0.10",),
            distributions=("jax", "jaxlib"),
            cpu_package="jax[cpu]",
            gpu_package="jax[cuda12]",
            device_probe="jax_gpus",
            weights="keras_stateless",  # the Keras model's, its state held by the jitted step
            companions=("keras",),
            build_file="version.py",
            build_fields={"_version": "version"},
            tag="jax_version",
            # JAX has no official CUDA image: its cuda variant takes the CUDA libraries from
            # pip (jax[cuda12]) on the official Python image, as its cpu variant does jaxlib.
            cuda_image="python:3.11-slim-bookworm",
            gpu_fix="install jax's CUDA plugin (jax[cuda12])",
            colour="#8e44ad",
            inline=False,
            fp16_scaling=False,
        ),
    )
}
NAMES = tuple(FRAMEWORKS)  # framework.name's choices, in the order bench lists them
WITH_IMAGE = tuple(n for n, s in FRAMEWORKS.items() if s.image)  # launcher=docker's


def own_environment(name: str) -> bool:
    """Whether framework ``name``'s pinned version runs in an environment of its own (False
    for a name bench does not know)."""
    spec = FRAMEWORKS.get(name)
    return spec is not None and spec.own_environment
