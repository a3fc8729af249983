"""The first stage of bench's checks: every rule that the composed configuration alone
decides (:func:`rules`), run once per distinct configuration of a sweep; the second stage,
what this machine allows, is :mod:`bench.checks.host`.

Each problem names its field.  The problems come by topic (:data:`TOPICS`, the order a user
reads them in); :func:`said` interleaves the two stages' findings topic by topic.  Besides
its own, this stage runs the typed configuration's field rules
(:func:`bench.checks.rules.check`), a zoo model's size rules (its architecture's, through
:func:`bench.trial.models.check_sequence_model`) and the keys' rules of a model that is not the
zoo's (:func:`bench.checks.own_models.parts`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from bench.checks.rules import check, choice
from bench.core.config import DATASETS, FRAMEWORKS, BenchConfig
from bench.core.frameworks import FRAMEWORKS as SPECS
from bench.core.zoo import NATIVE_SOURCES

# The topics of a configuration's problems, in the order they are said.
TOPICS = (
    "fields", "precision", "data", "model.sizes", "model.source", "model.keys", "model.run",
    "generate", "serve",
    "framework", "framework.version", "tracking", "launcher.docker", "launcher.docker.heartbeat",
    "launcher.docker.engine", "distributed", "tuning",
)  # fmt: skip
# What one stage found in one configuration: its problems by topic.
Found = dict[str, list[str]]
# Topics said only where others found nothing in either stage: how a model that is not the
# zoo's may run matters once the model can be had (its library is here, its keys are right).
UNLESS = {"model.run": ("model.source", "model.keys")}


def key(cfg: BenchConfig) -> str:
    """What makes two configurations one for the checks: every field but ``repeat``'s value
    (the round a job is in decides no rule; only a negative one is refused)."""
    return repr(dataclasses.replace(cfg, repeat=min(cfg.repeat, 0)))


def rules(cfg: BenchConfig) -> Found:
    """Every problem of ``cfg`` that ``cfg`` alone decides, by topic."""
    from bench.core.zoo import OWN_SOURCES
    from bench.trial.models import MODELS  # light: the registry imports no framework

    found: Found = {topic: [] for topic in TOPICS}
    fields = found["fields"] = check(cfg)
    zoo = cfg.model.source not in OWN_SOURCES
    if zoo and cfg.model.name not in MODELS:
        fields.insert(
            1,
            f"model: {cfg.model.name!r} is not allowed; choose one of {', '.join(MODELS)}",
        )
    _check_precision(found["precision"], cfg)
    if cfg.data.name in DATASETS:
        _check_data(found["data"], cfg)
    if zoo and cfg.model.name in MODELS and MODELS[cfg.model.name].task != "image":
        from bench.trial.models import check_sequence_model

        found["model.sizes"] += check_sequence_model(cfg.model)
    elif zoo and cfg.model.name in MODELS:
        low = MODELS[cfg.model.name].min_image_size
        if cfg.image_size < low:
            found["model.sizes"].append(
                f"image_size: {cfg.model.name} needs at least {low}x{low} inputs, "
                f"got {cfg.image_size}"
            )
    _check_model_source(found, cfg)
    if cfg.mode == "generate":
        _check_generate(found["generate"], cfg)
    if cfg.mode == "serve":
        _check_serve(found["serve"], cfg)
    _check_framework(found["framework"], cfg)
    _check_version(found["framework.version"], cfg)
    _check_tracking(found["tracking"], cfg.tracking.uri)
    if cfg.launcher.name == "docker":
        _check_docker(found["launcher.docker"], cfg)
        _check_heartbeat(found["launcher.docker.heartbeat"], cfg)
    _check_strategy(found["distributed"], cfg)
    from bench.trial.distributed.registry import distributes  # light: imports no framework

    if cfg.tuning.name == "best" and distributes(cfg.distributed.name):
        found["tuning"].append(
            f"tuning: best searches single-process trials; distributed={cfg.distributed.name} "
            "runs several processes (use tuning=default, and threads=/compile= by hand)"
        )
    return found


def said(*found: Found) -> list[str]:
    """The problems of one configuration that one stage or both (``found``) found, topic by
    topic (in a topic, the first stage's first), each once; a topic of :data:`UNLESS` only
    where the topics it waits on found nothing."""
    out = []
    for topic in TOPICS:
        if any(f[other] for other in UNLESS.get(topic, ()) for f in found):
            continue
        out += [p for f in found for p in f[topic]]
    return list(dict.fromkeys(out))


def one_store(configs: Sequence[tuple[str, BenchConfig]]) -> list[str]:
    """A sweep logs to one store: each job whose tracking.uri or experiment differs from the
    first job's, named."""
    first = configs[0][1].tracking
    return [
        f"[{label}] tracking: one sweep logs to one tracking.uri and experiment"
        for label, cfg in configs[1:]
        if (cfg.tracking.uri, cfg.tracking.experiment) != (first.uri, first.experiment)
    ]


# --- the topics -------------------------------------------------------------------------------


def _check_precision(problems: list[str], cfg: BenchConfig) -> None:
    """tf32 under MXNet; fp16 and tf32 on the CPU (device=auto on a host without a GPU is
    the host stage's)."""
    spec = SPECS.get(cfg.framework.name)
    if cfg.precision == "tf32" and spec is not None and not spec.tf32:
        problems.append(
            f"precision: tf32 is not wired into {spec.title} trials (its cuDNN settings are its "
            "own); use fp32, fp16 or bf16"
        )
        return
    if cfg.precision in ("fp16", "tf32") and cfg.device == "cpu":
        problems.append(on_the_cpu(cfg.precision))


def on_the_cpu(precision: str) -> str:
    """The refusal of fp16 or tf32 (``precision``) on the CPU."""
    what = {
        "fp16": "fp16 mixed precision needs a CUDA device",
        "tf32": "tf32 is a mode of a CUDA GPU's tensor cores",
    }[precision]
    return f"precision: {what} and this trial runs on the CPU; use bf16 or fp32"


def data_fits_model(cfg: BenchConfig) -> bool:
    """Whether the data set gives what the model takes (an image set, an image model)."""
    from bench.trial.data import task_of

    return task_of(cfg) == "image" or cfg.data.name == "synthetic"


def _check_data(problems: list[str], cfg: BenchConfig) -> None:
    """The data set against the model's task and the config's class count; its files are
    the host stage's (:func:`bench.trial.data.check`)."""
    from bench.trial.data import CLASSES, task_of

    name = cfg.data.name
    if not data_fits_model(cfg):
        takes = "spectrograms" if task_of(cfg) == "ctc" else "token sequences"
        problems.append(
            f"data: data={name} is a set of labelled images and model={cfg.model.name} takes "
            f"{takes}; use data=synthetic with this model"
        )
        return
    if name in CLASSES and cfg.num_classes != CLASSES[name]:
        problems.append(
            f"num_classes: data={name} has {CLASSES[name]} classes, got {cfg.num_classes}"
        )


def _check_model_source(found: Found, cfg: BenchConfig) -> None:
    """model.source is one of its choices; stock only where the framework's library has the
    model, a native source (flax) only for its framework and the models it builds; a model
    that is not the zoo's by its keys' own rules (its probe is the host stage's)."""
    from bench.checks import own_models
    from bench.core.zoo import ALL_SOURCES, OWN_SOURCES
    from bench.trial.models import MODELS, framework_problem, native_problem, stock_problem

    problems = found["model.source"]
    choice(problems, "model.source", cfg.model.source, ALL_SOURCES)
    model, unused, run = own_models.parts(cfg)  # model=py's keys, and models not the zoo's
    problems += model
    found["model.keys"] += unused
    found["model.run"] += run
    if cfg.model.source in OWN_SOURCES:  # docs/your-model.md
        return
    if cfg.model.name in MODELS and cfg.framework.name in FRAMEWORKS:
        problem = framework_problem(cfg.framework.name, cfg.model.name)
        if problem:
            problems.append(problem)
    if (
        cfg.model.source == "stock"
        and cfg.model.name in MODELS
        and cfg.framework.name in FRAMEWORKS
    ):
        problem = stock_problem(cfg.framework.name, cfg.model.name)
        if problem:
            problems.append(problem)
    if (
        cfg.model.source in NATIVE_SOURCES
        and cfg.model.name in MODELS
        and cfg.framework.name in FRAMEWORKS
    ):
        problem = native_problem(cfg.framework.name, cfg.model.name, cfg.model.source)
        if problem:
            problems.append(problem)


def _check_generate(problems: list[str], cfg: BenchConfig) -> None:
    """mode=generate: a causal LM of model=hf, or of model=py with a cached forward (its
    probe says, bench.checks.own_models), under torch or tf, undistributed, prompt and new
    tokens within its positions (bench.trial.generate)."""
    from bench.trial.models import own_causal_lm, task

    kind = task(cfg.model)
    if not own_causal_lm(cfg.model):
        article = "an" if kind[:1] in "aeiou" else "a"
        what = (
            f"{article} {kind} model"
            if kind != "causal_lm"
            else "a causal LM without a KV cache here"
        )
        problems.append(
            f"mode: generate runs the causal LMs of model=hf (model=hf model.name=llama) and "
            f"of model=py model.task=causal_lm with a cached forward; {cfg.model.name} is {what}"
        )
        return
    _generation(problems, cfg, "mode: generate is wired for framework=torch and tf")
    for name in ("compile", "breakdown", "profile"):
        if getattr(cfg, name):
            problems.append(f"{name}: not wired for mode=generate; leave it false")
    if cfg.tuning.name != "default":
        problems.append("tuning: best searches training and inference steps; mode=generate "
                        "takes tuning=default")  # fmt: skip


def _generation(problems: list[str], cfg: BenchConfig, wired: str) -> None:
    """A causal LM's generation (mode=generate, and mode=serve's): a framework with a
    generation loop (``wired`` says which), the prompt and new tokens within its positions."""
    spec = SPECS.get(cfg.framework.name)
    if spec is None or not spec.generates:
        problems.append(
            f"{wired}; framework={cfg.framework.name} has no generation loop for {cfg.model.name}"
        )
    if cfg.prompt_len + cfg.new_tokens > cfg.model.max_positions:
        problems.append(
            f"new_tokens: prompt_len + new_tokens = {cfg.prompt_len + cfg.new_tokens} exceeds "
            f"the model's positions (model.max_positions={cfg.model.max_positions})"
        )


def _check_serve(problems: list[str], cfg: BenchConfig) -> None:
    """mode=serve (bench.trial.serve): what is not wired for serving yet; the keys' own
    ranges and choices are :func:`bench.checks.rules.check`'s, LoadGen's presence the host
    stage's.  A causal LM is served as mode=generate generates (torch and tf, with LoadGen's
    token latencies, uncompiled), its prompt and new tokens within its positions; a
    token-latency bound is refused for any other model.  tuning=best searches serving
    (bench.trial.tuning) except a causal LM's: its compilation is not wired and its LoadGen run
    has two figures (first token, per token), not the one a search ranks by."""
    from bench.trial.models import own_causal_lm

    if own_causal_lm(cfg.model):
        wired = "mode: serve generates a causal LM's answers under framework=torch and tf"
        _generation(problems, cfg, wired)
        if cfg.compile:  # the generation loop's, as mode=generate's
            problems.append("compile: not wired for a causal LM's generation; leave it false")
        if cfg.tuning.name != "default":
            problems.append(
                "tuning: best searches serving by one figure per scenario; a causal LM is "
                "judged by two (time to first token and per output token): use tuning=default "
                "(set threads= and serve.max_batch by hand)"
            )
    else:
        serving = [name for name, spec in SPECS.items() if spec.serves]
        if cfg.framework.name not in serving:
            problems.append(
                f"mode: serve is wired for framework={', '.join(serving)}; "
                f"framework={cfg.framework.name} has no serving session"
            )
        if cfg.serve.tpot_bound_ms:
            problems.append(
                f"serve.tpot_bound_ms: a time-per-output-token bound needs a causal LM "
                f"(LoadGen's token latencies); {cfg.model.name} is not one: leave it 0"
            )
    for name in ("breakdown", "profile"):
        if getattr(cfg, name):
            problems.append(f"{name}: not wired for mode=serve; leave it false")


def _check_framework(problems: list[str], cfg: BenchConfig) -> None:
    """What the framework's trials do not run (its spec's facts, :mod:`bench.core.frameworks`),
    each refused naming its key: a framework that picks Keras' backend needs a process of
    its own; one with an environment of its own runs where only a fresh process or its image
    reaches (whether it is there is the host stage's)."""
    name = cfg.framework.name
    spec = SPECS.get(name)
    if spec is None:
        return  # the config's own rules refuse the name
    if not spec.inline and cfg.launcher.name == "inline":
        problems.append(
            "launcher: inline runs the trial inside bench's own process, which may already "
            f"hold Keras on TensorFlow's backend; framework={name} sets Keras' backend "
            "before Keras loads, in a process of its own: use launcher=process or Slurm"
        )
    if cfg.launcher.name == "docker" and not spec.image:
        problems.append(f"launcher: framework={name} has no image yet; use launcher=process")
    flax = NATIVE_SOURCES["flax"][0]  # the framework model.source=flax builds for
    if cfg.precision == "fp16" and not spec.fp16_scaling:
        problems.append(
            f"precision: framework={name} has no fp16 loss scaling yet; use fp32 or bf16"
        )
    elif cfg.precision == "bf16" and cfg.model.source == "flax" and name == flax:
        problems.append(
            "precision: model.source=flax trains in float32 so far (fp32, or tf32 on a GPU); "
            "bf16 runs the Keras models (model.source=bench)"
        )
    _check_sequence_strategy(problems, cfg)
    if not spec.amp and cfg.precision != "fp32":
        problems.append(
            f"precision: framework={name} trains in fp32 only ({spec.title}'s AMP is not "
            f"wired); got {cfg.precision}"
        )
    if not spec.compile_setting and cfg.compile:
        problems.append(
            f"compile: framework={name} always runs hybridized (a static graph, built in the "
            "warm-up); compile=true has no further meaning there, leave it false"
        )
    if not spec.reads_folders and cfg.data.name == "folder":
        readers = ", ".join(n for n, s in SPECS.items() if s.reads_folders)
        problems.append(
            f"data: framework={name} reads no image folder yet (data=folder: {readers}; "
            "docs/your-data.md)"
        )
    if spec.own_environment and cfg.launcher.name == "inline":
        from bench.envs import interpreters

        problems.append(
            "launcher: inline runs the trial inside bench's own process, which never imports "
            f"{spec.title} (it has its own environment, {interpreters.own_venv(name)}); use "
            "launcher=process or docker"
        )


def _check_sequence_strategy(problems: list[str], cfg: BenchConfig) -> None:
    """A zoo sequence model under a strategy of the framework that does not train them
    (its typed config's ``sequence_frameworks``); model=hf and model=py are refused by their
    own checks (bench.checks.own_models)."""
    from bench.trial.distributed.registry import STRATEGIES, distributes
    from bench.trial.models import task

    name, strategy = cfg.framework.name, cfg.distributed
    kind = task(cfg.model)
    if kind == "image" or name not in strategy.frameworks or name in strategy.sequence_frameworks:
        return
    able = [
        s
        for s, c in STRATEGIES.items()
        if distributes(s) and name in c.frameworks and name in c.sequence_frameworks
    ]
    problems.append(
        f"distributed: framework={name} trains sequence models undistributed or under "
        f"{' or '.join(able)} so far; {cfg.model.name} is a {kind} model (use distributed=none "
        f"or {' or '.join(able)})"
    )


def named_release(cfg: BenchConfig) -> str:
    """``cfg``'s framework.version where it names a release ('' where it is empty,
    ``installed``, or a name the config's own rules refuse)."""
    from bench.core import versions

    version = cfg.framework.version
    if not version or cfg.framework.name not in FRAMEWORKS or version == versions.INSTALLED:
        return ""
    return version if versions.is_release(version) else ""


def _check_version(problems: list[str], cfg: BenchConfig) -> None:
    """framework.version: ``installed`` outside a container, a release outside bench's own
    process and under a strategy built for more than the pinned version; whether it has a
    wheel here and an environment can be made for it is the host stage's."""
    from bench.core import versions

    field, version = "framework.version", cfg.framework.version
    if version == versions.INSTALLED and cfg.framework.name in FRAMEWORKS:
        if cfg.launcher.name == "docker":  # resolved (or refused) at composition
            problems.append(
                f"{field}: installed runs the {cfg.framework.name} that the trial's interpreter "
                "on this host has; launcher=docker runs its image's build (leave "
                "framework.version empty for the pinned one, or name a release)"
            )
        return
    if not named_release(cfg):
        return  # the pinned one, or the config's own rules refuse it
    if cfg.launcher.name == "inline":
        problems.append(
            f"{field}: {cfg.framework.name} {version} runs in an environment (or image) of its "
            "own, under launcher=process, docker or Slurm; launcher=inline runs the trial in "
            "bench's own process, which has the pinned version"
        )
    from bench.trial.distributed import registry

    strategy = registry.info(cfg.distributed.name)
    if strategy is not None and strategy.pinned_version_only:
        problems.append(
            f"{field}: distributed={cfg.distributed.name} ({strategy.what}) is built for the "
            f"pinned {cfg.framework.name} ({versions.pinned(cfg.framework.name)}) and runs only "
            "that version"
        )


def _check_tracking(problems: list[str], uri: str) -> None:
    """tracking.uri's form: a supported scheme, a host, an SQLite file named; where the
    store is and whether it can be written is the host stage's."""
    import urllib.parse

    parsed = urllib.parse.urlparse(uri)
    scheme = parsed.scheme
    if scheme not in ("sqlite", "file", "", "http", "https", "postgresql", "mysql", "databricks"):
        problems.append(
            f"tracking.uri: scheme {scheme!r} is not supported; use sqlite:///PATH.db, "
            "a directory, or http(s)://HOST:PORT"
        )
    elif scheme in ("http", "https") and not parsed.hostname:
        problems.append(f"tracking.uri: {uri!r} names no host; use http(s)://HOST:PORT")
    elif scheme == "sqlite" and (not parsed.path.strip("/") or parsed.path.endswith("/")):
        problems.append(
            f"tracking.uri: {uri!r} names no database file (sqlite:// alone is a store in "
            "memory, whose results are lost when bench ends); use sqlite:///PATH.db"
        )


def _check_docker(problems: list[str], cfg: BenchConfig) -> None:
    """launcher=docker's settings: the GPUs' spelling and image variant, a CUDA trial's
    GPUs; the files it names and the engine are the host stage's
    (:mod:`bench.launchers.docker_host`)."""
    from bench.launchers.docker_host import parse_gpus  # imports the Docker SDK

    d = cfg.launcher.docker
    try:
        wanted = parse_gpus(d.gpus)
    except ValueError as exc:
        problems.append(f"launcher.docker.gpus: {exc}")
        wanted = None
    if wanted is not None and d.variant == "cpu":
        problems.append(
            "launcher.docker.gpus: GPUs need the cuda image; launcher.docker.variant is cpu "
            "(use cuda or auto)"
        )
    if cfg.device == "cuda" and wanted is None:
        problems.append(
            "device: cuda in a container needs GPUs passed to it; set launcher.docker.gpus "
            "(all, a count or device ids)"
        )


def _check_heartbeat(problems: list[str], cfg: BenchConfig) -> None:
    """launcher=docker's heartbeat: a timeout of two of the container's beats at least."""
    from bench.trial.runtime import heartbeat

    d = cfg.launcher.docker
    if d.heartbeat_timeout_s < 2 * heartbeat.INTERVAL_S:
        problems.append(
            f"launcher.docker.heartbeat_timeout_s: must be >= {2 * heartbeat.INTERVAL_S:g} "
            f"seconds, got {d.heartbeat_timeout_s:g}"
        )


def _check_strategy(problems: list[str], cfg: BenchConfig) -> None:
    """distributed, workers, nodes and ps against the strategy's facts (what it needs of
    this machine's GPUs is the host stage's: its own ``check``)."""
    from bench.trial.distributed.registry import (
        MULTI_NODE,
        PS_STRATEGIES,
        STRATEGIES,
        distributes,
        strategies_for,
    )

    name = cfg.distributed.name
    if name not in STRATEGIES:
        problems.append(
            f"distributed: {name!r} is not allowed; choose one of {', '.join(STRATEGIES)}"
        )
        return
    for field, low in (("workers", 1), ("nodes", 1), ("ps", 0)):
        if getattr(cfg, field) < low:
            problems.append(f"{field}: must be >= {low}, got {getattr(cfg, field)}")
    if problems:
        return
    framework = cfg.framework.name
    info = STRATEGIES[name]
    if framework not in info.frameworks:
        problems.append(
            f"distributed: {name!r} ({info.what}) is not available with framework={framework}; "
            f"choose one of {', '.join(strategies_for(framework))}"
        )
        return
    if not distributes(name):
        if cfg.workers != 1 or cfg.nodes != 1:
            problems.append(
                f"workers: {cfg.workers} workers on {cfg.nodes} node(s) need a distributed "
                f"strategy; set distributed= one of {', '.join(strategies_for(framework)[1:])}"
            )
    if name in PS_STRATEGIES and cfg.ps < 1:
        problems.append(
            f"ps: distributed={name} needs at least 1 parameter server (ps=0, the default, "
            "means one per node)"
        )
    if name not in PS_STRATEGIES and cfg.ps != 0:
        problems.append(
            f"ps: parameter servers are used only by distributed="
            f"{', '.join(PS_STRATEGIES)}; got ps={cfg.ps}"
        )
    if info.runner == "kvstore" and cfg.launcher.name != "process":
        problems.append(
            f"launcher: distributed={name} starts a scheduler, servers and workers as "
            "processes; use launcher=process"
        )
    if cfg.nodes > 1 and distributes(name) and not info.multi_node:
        across = [s for s in MULTI_NODE if framework in STRATEGIES[s].frameworks]
        problems.append(
            f"nodes: distributed={name} runs on one node; across {cfg.nodes} nodes use one "
            f"of {', '.join(across)}"
            if across
            else f"nodes: distributed={name} runs on one node, and {framework} has no "
            f"strategy across nodes in bench; set nodes=1 (got {cfg.nodes})"
        )
    if info.stages and cfg.workers != info.stages:
        problems.append(
            f"workers: {name} splits the model into {info.stages} stages on {info.stages} "
            f"devices; set workers={info.stages} (got {cfg.workers})"
        )
    if distributes(name) and cfg.mode != "train":
        problems.append(f"mode: distributed={name} measures training; set mode=train")
    if distributes(name) and cfg.launcher.name == "docker":
        problems.append(
            "launcher: distributed trials run under launcher=process (or inline) in this version"
        )
    if distributes(name) and cfg.profile:
        problems.append("profile: the operator profile is per process; use breakdown=true instead")
    if distributes(name) and cfg.compile:
        problems.append(f"compile: not supported with distributed={name} in this version")
