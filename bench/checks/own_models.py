"""The refusals of a model that is not the zoo's (``model=py``, ``model=keras``,
``model=torchvision``, ``model=hf``; docs/your-model.md), before any trial: the keys' own
rules, and a probe that imports and builds the model in a child process of the trial's
interpreter (:mod:`bench.trial.models.custom`; model=hf's: :mod:`bench.trial.models.hf_lm`, on the
meta device), once per model and size in a sweep, so that a module that cannot be imported,
a builder that raises or returns no model of its framework, a name its library does not
have, a config field its class lacks or a missing library is one line naming the key.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from bench.core.config import BenchConfig
from bench.core.frameworks import FRAMEWORKS, FrameworkSpec
from bench.core.zoo import LIBRARY_FRAMEWORK, MODELS, OWN_SOURCES, OWN_TASKS
from bench.trial.distributed.registry import distributes

_OWN_KEYS = ("builder", "torch", "tf", "task")
PROBE_TIMEOUT_S = 300.0
_LIBRARIES = {"keras": "keras.applications", "torchvision": "torchvision.models", "timm": "timm"}
_EXAMPLES = {"keras": "EfficientNetV2S", "torchvision": "resnet50", "timm": "resnet50d"}


# The facts of a framework bench does not know (the config's own rules refuse its name).
_UNKNOWN = FrameworkSpec("", "", "", "", "", "", (), (), "", "", "", "")


def _spec(framework: str) -> FrameworkSpec:
    return FRAMEWORKS.get(framework, _UNKNOWN)


def _library_refusal(source: str, framework: str, name: str) -> str:
    """Why ``model=<source>`` cannot run under ``framework``, naming what can."""
    from bench.trial.models import stock

    library = _LIBRARIES[source]
    other = {"keras": "torchvision", "torchvision": "keras", "timm": "keras"}[source]
    twins = [
        spec.name
        for spec in MODELS.values()
        if name in (spec.stock_keras, spec.stock_torch) and spec.stock_name(framework)
    ]
    hint = f"model={twins[0]} model.source=stock builds it in both" if twins else ""
    own = _spec(framework).library  # the library this framework builds models of by name
    if own == "torchvision":
        where = "model=torchvision model.name=NAME"
        if not stock.torchvision_available():
            where += " (torchvision is not installed here)"
        hint = hint or f"for {framework}: {where}, or bench's zoo (python -m bench.models)"
    elif own:
        hint = hint or f"for {framework}: model={own} model.name=NAME ({_LIBRARIES[own]})"
    else:
        hint = hint or f"the libraries' models are not wired for framework={framework}"
    return (
        f"model.source: {source} builds {library} models for framework="
        f"{LIBRARY_FRAMEWORK[source]} only, not framework={framework}; {hint} "
        f"(model={other} builds framework={LIBRARY_FRAMEWORK[other]}'s)"
    )


def _library_missing(cfg: BenchConfig) -> list[str]:
    """torchvision's or timm's absence, where the trial runs with this interpreter (the
    pinned torch, or framework.version=installed); a version's own environment is the
    probe's to ask."""
    from bench.core import versions
    from bench.trial.models import stock

    source = cfg.model.source
    if LIBRARY_FRAMEWORK.get(source) != cfg.framework.name:
        return []  # another framework's library: refused by _library_refusal
    if versions.own_release(cfg.framework.version):
        return []
    if source == "timm" and stock.timm_missing():
        return [f"model.source: {stock.timm_missing()}"]
    if source == "torchvision" and not stock.torchvision_available():
        return [
            "model.source: torchvision is not importable here (it must match this "
            "torch build; pip's torchvision wants pip's torch): install it, or run "
            "in a framework.version environment that has it"
        ]
    return []


def _torchvision_in_docker(cfg: BenchConfig) -> list[str]:
    """torchvision's and timm's models (and torch's stock twins) under launcher=docker:
    bench's torch images have neither library (torchvision must be the build of the image's
    torch); a user's image (launcher.docker.image) is theirs to equip."""
    source = cfg.model.source
    wanted = source in ("timm", "torchvision") or (
        source == "stock" and _spec(cfg.framework.name).library == "torchvision"
    )
    if not wanted or cfg.launcher.name != "docker" or cfg.launcher.docker.image:
        return []
    needs = "torchvision and timm" if source == "timm" else "torchvision"
    return [
        f"launcher: model.source={source} needs {needs}, which bench's torch images do not "
        "install (torchvision must be the build of the image's torch); use launcher=process "
        "(a framework.version environment installs them), or launcher.docker.image=an image "
        "of yours that has them"
    ]


def rules(cfg: BenchConfig) -> list[str]:
    """The keys' own rules, without building anything or asking this machine (the config
    stage's, :mod:`bench.checks.config`)."""
    model, keys, run = parts(cfg)
    return [*model, *keys, *run]


def parts(cfg: BenchConfig) -> tuple[list[str], list[str], list[str]]:
    """:func:`rules` in three parts: the model and its source; the keys of model=py that a
    library's model does not use (this machine's answer on the library, :func:`check`, is
    said between the two); how the model may run, found only where the first two found
    nothing (and said only where that answer is none)."""
    from bench.trial.models import custom

    model, framework = cfg.model, cfg.framework.name
    problems = _torchvision_in_docker(cfg)
    unused: list[str] = []  # model=py's keys that a library's model does not use
    if model.config and model.source != "hf":
        problems.append(
            f"model.config: only model=hf (a Hugging Face config class's fields) uses it; got "
            f"{', '.join(sorted(map(str, model.config)))} with model.source={model.source}"
        )
    if model.source == "hf":
        problems += _hf_rules(cfg)
    elif model.source not in OWN_SOURCES:
        for key in _OWN_KEYS:
            if getattr(model, key):
                problems.append(
                    f"model.{key}: only model=py (model.source=py) uses it; got "
                    f"{getattr(model, key)!r} with model.source={model.source}"
                )
        return problems, [], []
    elif model.source != "py":
        if not model.name:
            named = (
                f"model.name: model={model.source} builds a {_LIBRARIES[model.source]} model by "
                f"its name; give one, e.g. model.name={_EXAMPLES[model.source]}"
            )
            return [named], [], []
        if framework != LIBRARY_FRAMEWORK[model.source]:
            problems.append(_library_refusal(model.source, framework, model.name))
        for key in _OWN_KEYS[:3]:
            if getattr(model, key):
                unused.append(f"model.{key}: only model=py uses it, not model={model.source}")
    else:
        if model.task not in OWN_TASKS:
            problems.append(
                f"model.task: {model.task!r} is not allowed for model=py; choose one of "
                f"{', '.join(OWN_TASKS)}"
            )
        elif model.task == "causal_lm":  # the sizes the builder receives
            problems += [
                f"model.{size}: must be >= 1, got {getattr(model, size)}"
                for size in custom.LM_SIZES
                if getattr(model, size) < 1
            ]
        for key in _OWN_KEYS[:3]:
            value = getattr(model, key)
            if value and not custom.SPEC.fullmatch(value):
                problems.append(f"model.{key}: {value!r} is not MODULE:FUNCTION")
        if framework not in custom.MODEL_TYPES:
            problems.append(
                f"framework: model=py builds for torch and tf; framework={framework} is not wired"
            )
        elif not custom.builder_key(model, framework)[1]:
            problems.append(
                f"model.{framework}: framework={framework} has no builder; set "
                f"model.{framework}=MODULE:FUNCTION, or model.builder for every framework"
            )
    if problems or unused:
        return problems, unused, []
    run: list[str] = []
    if distributes(cfg.distributed.name):
        run.append(
            f"distributed: model={model.source} trains undistributed in this version; "
            "use distributed=none"
        )
    if cfg.parity and model.source != "hf":  # hf: the LM logit check (bench.sweep.parity)
        run.append(
            f"parity: the parity check covers bench's zoo and model=hf, not model={model.source}"
        )
    if model.source == "py" and cfg.launcher.name == "docker":
        run.append(
            f"launcher: docker does not see model=py's module ({', '.join(custom.modules(model))}, "
            "on this host); use launcher=process (Slurm: a shared working directory)"
        )
    if model.source == "hf" and cfg.launcher.name == "docker":
        run += _hf_image(cfg)
    return problems, [], run


def _hf_image(cfg: BenchConfig) -> list[str]:
    """model=hf under launcher=docker: bench's image of the pinned version has the library
    (torch: transformers; tf: keras-hub and tensorflow-text), at the host lock's versions,
    which the host's probe builds with; the image of another version installs that
    version's own lock (bench.envs.environments.image_lock), without it.  An image of the
    user's (``launcher.docker.image``) is theirs to equip."""
    from bench.core import versions

    version = versions.own_release(cfg.framework.version)
    if not version or cfg.launcher.docker.image:
        return []
    framework = cfg.framework.name
    library = _spec(framework).hf_libraries  # torch or tf here: the rules refused the rest
    return [
        f"framework.version: model=hf under launcher=docker needs {library}, which the "
        f"image of {framework} {version} does not install (it installs that version's own "
        f"lock: {framework} and bench's trial side); bench's image of the pinned {framework} "
        "has it, launcher=process runs it in the version's own environment, or pass an "
        "image of yours that has it as launcher.docker.image"
    ]


def _hf_rules(cfg: BenchConfig) -> list[str]:
    """model=hf's own keys: a family bench maps, built for torch (transformers) and tf
    (keras-hub)."""
    from bench.trial.models import hf_lm

    model, framework = cfg.model, cfg.framework.name
    problems = [p for p in [hf_lm.family_problem(model.name)] if p]
    for key in _OWN_KEYS:
        if getattr(model, key):
            problems.append(f"model.{key}: only model=py uses it, not model=hf")
    built_by = _spec(framework).hf_module
    if not problems and built_by == "bench.trial.models.keras_hub_lm":  # keras-hub (tf)
        from bench.trial.models import keras_hub_lm

        # at another version, its environment with the keras-hub extra has them
        # (bench.envs.environments, refused naming framework.version where it cannot)
        problems += keras_hub_lm.problems(model.name, hf_lm.config_fields(model))
    elif not problems and not built_by:
        problems.append(
            f"model.name: model=hf builds {model.name} with transformers for framework=torch; "
            f"framework={framework} has no build of {model.name} (framework=tf: keras-hub's)"
        )
    return problems


@cache
def _probe(
    python: str, cwd: str, request: str, module: str = "bench.trial.models.custom"
) -> dict[str, object]:
    from bench.envs.interpreters import child_env

    try:
        done = subprocess.run(
            [python, "-m", module, request],
            capture_output=True,
            text=True,
            cwd=cwd,
            timeout=PROBE_TIMEOUT_S,
            env=child_env(CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3"),
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"problem": f"model: the probe that builds it could not run: {exc}"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("BENCH_PROBE "):
            found: dict[str, object] = json.loads(line.removeprefix("BENCH_PROBE "))
            return found
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"problem": f"model: building it in a child process failed: {last}"}


def _request(cfg: BenchConfig) -> tuple[str, str, str, str] | None:
    """The arguments of ``cfg``'s probe (:func:`_probe`), None where its interpreter is not
    there yet (a version environment made before its first trial)."""
    from bench.envs.environments import extra_of
    from bench.envs.interpreters import python_for

    # a version's environment with the extra the model needs (bench.envs.environments)
    python = python_for(cfg.framework.name, cfg.framework.version, extra_of(cfg))
    if not Path(python).exists():  # a version environment made before its first trial
        return None
    m = cfg.model
    if m.source == "hf":  # the family's config class checks the fields (bench.trial.models.hf_lm)
        fields = ("name", "vocab_size", "hidden", "layers", "heads", "intermediate",
                  "max_positions", "config")  # fmt: skip
        hf = json.dumps({k: getattr(m, k) for k in fields}, sort_keys=True)
        # transformers' (torch) or keras-hub's (tf, which imports and maps the fields)
        return python, str(Path.cwd()), hf, _spec(cfg.framework.name).hf_module
    from bench.trial.models.custom import LM_SIZES

    keys: tuple[str, ...] = ("name", "source", "builder", "torch", "tf", "task")
    if m.task == "causal_lm":  # the sizes the builder receives
        keys += LM_SIZES
    request = {
        "framework": cfg.framework.name,
        "num_classes": cfg.num_classes,
        "image_size": cfg.image_size,
        "model": {k: getattr(m, k) for k in keys},
        "digest": m.digest,  # an edited module is asked again
    }
    return python, str(Path.cwd()), json.dumps(request, sort_keys=True), "bench.trial.models.custom"


def probe(cfg: BenchConfig) -> dict[str, object]:
    """The probe's answer for ``cfg`` (:func:`bench.trial.models.custom.probe`, ``probe_lm`` for a
    causal LM of model=py, which also says whether mode=generate can run it): built with the
    trial's interpreter, in this working directory; the same request is asked once.  Under
    launcher=docker the host's interpreter of the pinned version stands in for the image's:
    bench's images install transformers and keras-hub at the host lock's versions (their
    constraints are resolved under it), so a name or field the host refuses, the image would."""
    request = _request(cfg)
    return _probe(*request) if request else {}


def warm(configs: Sequence[BenchConfig]) -> None:
    """Ask the distinct probes of a sweep's configurations at once, each in its own child
    process, so that :func:`check` finds their answers (a torch and a tf probe of one
    model=hf family, each seconds of importing its libraries, overlap); a configuration
    the rules refuse, or model=py's before its digest, is left to :func:`check`."""
    requests = {
        request
        for cfg in configs
        if cfg.model.source in OWN_SOURCES
        and (cfg.model.source != "py" or cfg.model.digest)
        and not rules(cfg)
        and not _library_missing(cfg)
        and (request := _request(cfg))
    }
    if len(requests) > 1:
        with ThreadPoolExecutor(min(len(requests), 4)) as pool:
            list(pool.map(lambda request: _probe(*request), sorted(requests)))


def check(cfg: BenchConfig) -> list[str]:
    """What this machine says of ``cfg``'s model, if it is not the zoo's (the host stage's,
    :mod:`bench.checks.host`): a library that is not importable here, a module that cannot
    be found, the probe's answer; [] for the zoo's, and where the keys' own :func:`rules`
    refuse it (the config stage says why)."""
    if cfg.model.source not in OWN_SOURCES:
        return []
    problems = _library_missing(cfg) if cfg.model.source in _LIBRARIES and cfg.model.name else []
    if problems or rules(cfg):
        return problems
    if cfg.model.source == "py" and not cfg.model.digest:
        from bench.trial.models import custom

        try:
            custom.digest(cfg.model)
        except Exception as exc:  # noqa: BLE001 - whatever finding the module raises
            key, text = custom.builder_key(cfg.model, cfg.framework.name)
            return [f"{key}: cannot import {text}: {type(exc).__name__}: {exc}"]
    answer = probe(cfg)
    if "problem" in answer:
        return [str(answer["problem"])]
    # a causal LM of model=py without a (working) cached forward: mode=generate is refused,
    # and mode=serve, which serves it by generating
    if cfg.mode in ("generate", "serve") and answer.get("generate"):
        return [str(answer["generate"])]
    return []
