"""``bench reproduce RUN_ID``: run a logged trial again, in the software it ran in.

Reads the trial's resolved config (its ``config.json`` artifact) and what pinned its
software, and runs that config again as a new run in the same experiment tagged
``bench.reproduces=RUN_ID`` (``force=true``), then prints the two results side by side:

- a containerized run: in the very image it ran in (``mlflow.docker.image.id``:
  ``launcher=docker`` with ``launcher.docker.image`` pinned to the id);
- a run of a non-pinned framework version (``framework.version``): in that version's
  environment, re-created from the lock the run logged where the cached one differs
  (``bench.lock_sha``); the configuration, and so its hash, is the original's;
- a run of the pinned version under the process launcher: in bench's own environment,
  which must still be installed from the lock the run logged (else it is refused, naming
  both hashes: set up bench at the run's commit, or rerun in its image).

    bench reproduce RUN_ID [--tracking-uri URI]   (also python -m bench.cli.reproduce)
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from bench import tracking
from bench.checks.preflight import validate
from bench.core import metrics
from bench.core.config import (
    BenchConfig,
    ConfigError,
    TrackingConfig,
    distributed_config,
    flatten,
    from_dict,
    to_dict,
)

# What is compared, in this order, where either run has it.
COMPARED = (
    metrics.TRIAL_SAMPLES_PER_S,
    metrics.TRIAL_TIME_S,
    metrics.TRIAL_STEP_TIME_P50_MS,
    metrics.TRIAL_STEP_TIME_P90_MS,
    metrics.TRIAL_STEP_TIME_P99_MS,
    metrics.FINAL_LOSS,
    metrics.PEAK_HOST_RSS_MB,
    metrics.IMPORT_TIME_S,
    metrics.BUILD_TIME_S,
    metrics.COMPILE_TIME_S,
    metrics.EPOCHS_COMPLETED,
)
# The most of a run's lock.txt read (bench's locks are tens of KiB).
LOCK_MAX = 4 * 2**20
# What the tags a reproduction acts on must look like; a run is data, not instructions.
RUN_TAGS = {
    "mlflow.docker.image.id": re.compile(r"sha256:[0-9a-f]{64}"),
    "bench.lock_sha": re.compile(r"[0-9a-f]{16}"),
    "bench.launcher": re.compile(r"[a-z]{1,16}"),
}
TAGS = (
    "bench.status",
    "mlflow.docker.image.id",
    "bench.base_image.digest",
    "bench.lock_sha",
    "bench.torch_version",
    "bench.tensorflow_version",
    "bench.config_hash",
)


def pinned_config(
    config: dict[str, object], image_id: str, uri: str, experiment: str
) -> BenchConfig:
    """The logged config, to run again in ``image_id`` and log beside the original."""
    cfg = from_dict(BenchConfig, config)
    cfg.launcher.name = "docker"
    d = cfg.launcher.docker
    d.image = image_id
    d.base_image = d.ca_bundle = d.wheelhouse = ""  # nothing is built: the image is given
    cfg.force = True
    cfg.tracking = TrackingConfig(uri=uri, experiment=experiment)
    return cfg


def same_config(config: dict[str, object], uri: str, experiment: str) -> BenchConfig:
    """The logged config, to run again as it was (``force``: even though an ok run exists)."""
    cfg = from_dict(BenchConfig, config)
    cfg.force = True
    cfg.tracking = TrackingConfig(uri=uri, experiment=experiment)
    return cfg


def _same_software(original: tracking.RunRecord, cfg: BenchConfig, uri: str) -> str:
    """Make the software of a run that did not run in a container what it was: a framework
    version's environment from the logged lock; or why it cannot be ('' when it is)."""
    from bench.envs import environments

    launcher = original.tags.get("bench.launcher", "?")
    logged = original.tags.get("bench.lock_sha", "")
    if not logged or launcher not in ("process", "slurm"):
        return (
            f"run {original.run_id} (launcher={launcher}) logged no lock that pins its "
            "software; containerized runs and runs since bench.lock_sha can be reproduced"
        )
    from bench.core.versions import own_release

    fw, version = cfg.framework.name, own_release(cfg.framework.version)
    if version:
        extra = environments.extra_of(cfg)  # the extra its model needs, as the run's had
        env = environments.env_for(fw, version, extra)  # a release: validate() said so
        wrote = False
        if not env.lock.exists() or env.lock_hash() != logged:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                try:
                    got = tracking.download_artifact(uri, original.run_id, "lock.txt", Path(tmp))
                except LookupError as exc:
                    return str(exc)
                if got.is_symlink() or not got.is_file() or got.stat().st_size > LOCK_MAX:
                    return f"run {original.run_id}'s lock.txt is not a lock file"
                text = got.read_bytes()
            found = environments.lock_problems(text.decode("utf-8", "replace"))
            if found:
                return f"run {original.run_id}'s lock.txt is refused: " + "; ".join(found)
            env.root.mkdir(parents=True, exist_ok=True)
            env.lock.write_bytes(text)
            wrote = True
        try:
            environments.ensure(fw, version, extra=extra, wheels_only=True)
        except environments.EnvironmentError_ as exc:
            if wrote:  # not left for a later sweep to install otherwise
                env.lock.unlink(missing_ok=True)
            return str(exc)
        return ""
    lock = environments.lock_of(fw, "")
    now = environments.lock_hash_of(lock) if lock is not None else "none"
    if now != logged:
        return (
            f"run {original.run_id} ran the pinned {fw} from a lock with hash {logged}; bench's "
            f"environment here has {now}: set up bench at the run's commit, or rerun in its image"
        )
    return ""


def run_problems(original: tracking.RunRecord) -> list[str]:
    """Why the tags a reproduction acts on cannot be believed ([] if they can): each of
    :data:`RUN_TAGS` that a run has must be written as bench writes it."""
    return [
        f"{tag}: {value[:80]!r} is not what bench logs there"
        for tag, grammar in RUN_TAGS.items()
        if (value := original.tags.get(tag)) is not None and not grammar.fullmatch(value)
    ]


def type_problems(cfg: BenchConfig) -> list[str]:
    """The fields of a config rebuilt from a run's ``config.json`` whose values are not of
    their field's type (a string where a number belongs...): the schema's types are not
    checked by :func:`from_dict`, and the rules would compare them as numbers."""
    reference = BenchConfig(distributed=distributed_config(cfg.distributed.name))
    want = flatten(to_dict(reference))
    problems = []
    for key, value in flatten(to_dict(cfg)).items():
        if key not in want or want[key] is None:
            continue
        kind = type(want[key])
        fits = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            fits = True
        if not fits:
            problems.append(f"{key}: {type(value).__name__} where bench logs a {kind.__name__}")
    return problems


def _fmt(value: float | str | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.1f}"


def side_by_side(original: tracking.RunRecord, again: tracking.RunRecord) -> str:
    """A table of the two runs' status, image and metrics, with the relative change."""
    rows = [("", f"original {original.run_id[:8]}", f"reproduction {again.run_id[:8]}", "change")]
    for tag in TAGS:
        a, b = original.tags.get(tag, "-"), again.tags.get(tag, "-")
        if tag.endswith(("image.id", ".digest")):
            a, b = a.removeprefix("sha256:")[:12], b.removeprefix("sha256:")[:12]
        rows.append((tag, a, b, "same" if a == b else "differs"))
    for key in COMPARED:
        x, y = original.metrics.get(key), again.metrics.get(key)
        if x is None and y is None:
            continue
        change = f"{(y / x - 1) * 100:+.1f}%" if x and y is not None else ""
        rows.append((key, _fmt(x), _fmt(y), change))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    lines = []
    for row in rows:
        values = zip(row[1:], widths[1:], strict=True)
        cells = [row[0].ljust(widths[0])] + [v.rjust(w) for v, w in values]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def explained(original: tracking.RunRecord, again: tracking.RunRecord) -> list[str]:
    """Why the figures of a reproduction differ from the original's where that is expected,
    in a line each: the numbers a run's windows were sized by, its start-up, its machine."""
    notes = []
    steps = [r.metrics.get(metrics.STEPS_PER_EPOCH_USED) for r in (original, again)]
    if any(steps) and steps[0] != steps[1]:
        a, b = (_fmt(x) for x in steps)
        notes.append(
            f"steps_per_epoch=auto sized each run's windows to min_window_s: {a} and {b} steps "
            "a window, so final_loss is the loss after a different number of steps and "
            "trial_time_s covers different work; the rates (samples/s, step times) compare"
        )
    elif any(k in original.metrics for k in (metrics.FINAL_LOSS, metrics.TRIAL_TIME_S)):
        notes.append(
            "final_loss and trial_time_s follow the steps each run trained (auto windows are "
            "sized by time); the rates (samples/s, step times) are what a reproduction compares"
        )
    if metrics.IMPORT_TIME_S in original.metrics or metrics.BUILD_TIME_S in original.metrics:
        notes.append(
            "trial_time_s includes starting the process, importing the framework and building "
            "the model (import_time_s, build_time_s), which the operating system's file cache "
            "shortens on a second run"
        )
    loaded = [r.run_id[:8] for r in (original, again) if r.tags.get("bench.contention")]
    if loaded:
        notes.append(
            f"tagged bench.contention ({', '.join(loaded)}): other processes used the trial's "
            "CPUs while it was timed, so its rates are lower than the machine's"
        )
    return notes


def plain(doc: str) -> str:
    """A docstring as ``--help`` prints it: without reStructuredText's markup (````x````,
    ``:mod:`x```), its first line and paragraphs kept."""
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", doc)
    return text.replace("``", "")


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    from bench.tracking.recent import store_or_last

    parser = argparse.ArgumentParser(
        prog="bench reproduce",
        description=plain(__doc__ or ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_id", help="the trial run to reproduce")
    parser.add_argument(
        "--tracking-uri",
        default=None,
        help="where the run is logged, and where the new one goes (default: the store of the "
        f"last sweep, else {TrackingConfig.uri})",
    )
    args = parser.parse_args(argv)
    args.tracking_uri, why = store_or_last(args.tracking_uri, TrackingConfig.uri)
    print(f"bench reproduce: reading {args.tracking_uri} ({why})", file=sys.stderr)

    def fail(message: str) -> int:
        print(f"bench reproduce: {message}", file=sys.stderr)
        return 2

    try:
        original, config, experiment = tracking.load_trial(args.tracking_uri, args.run_id)
    except LookupError as exc:
        return fail(str(exc))
    bad = run_problems(original)
    if bad:
        return fail(f"cannot rerun {args.run_id}:\n  " + "\n  ".join(bad))
    image_id = original.tags.get("mlflow.docker.image.id", "")
    try:  # every value checked before anything is written, installed or run
        if not isinstance(config, dict):
            raise ConfigError(["config.json: not a mapping"])
        if image_id:
            cfg = pinned_config(config, image_id, args.tracking_uri, experiment)
        else:
            cfg = same_config(config, args.tracking_uri, experiment)
        wrong = type_problems(cfg)
        if wrong:
            raise ConfigError(wrong)
        validate(cfg)
    except ConfigError as exc:
        return fail(f"cannot rerun {args.run_id}:\n  " + "\n  ".join(exc.problems))
    except (TypeError, ValueError, AttributeError) as exc:  # a config.json of another shape
        return fail(f"cannot rerun {args.run_id}: its config.json is not bench's ({exc})")
    if not image_id:
        problem = _same_software(original, cfg, args.tracking_uri)
        if problem:
            return fail(problem)

    # after the checks: it opens the store and a parent run
    from bench.sweep.session import Sweep, SweepContext, TrialStopped

    signal.signal(signal.SIGTERM, _sigterm)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workdir = Path("outputs") / "reproduce" / f"{args.run_id[:8]}-{stamp}"
    given = [f"reproduces={args.run_id}"]
    sweep = Sweep.open(cfg, 1, f"reproduce-{args.run_id[:8]}", given, SweepContext())
    name = "".join(c for c in original.name if c.isprintable())[:200]  # no terminal escapes
    label = name or f"framework={cfg.framework.name} model={cfg.model.name}"
    try:
        row = sweep.run(cfg, label, workdir, 1, tags={"bench.reproduces": args.run_id})
    except KeyboardInterrupt as exc:
        sweep.finish([exc.row] if isinstance(exc, TrialStopped) else [], killed=True)
        print("bench reproduce: interrupted", file=sys.stderr)
        return 130
    code = sweep.finish([row])
    again, _, _ = tracking.load_trial(args.tracking_uri, row.run_id)
    print()
    print(side_by_side(original, again))
    notes = explained(original, again)
    if notes:
        print("\nWhy figures differ:\n" + "\n".join(f"- {n}" for n in notes))
    return code


if __name__ == "__main__":
    from bench.trial.runtime.processes import exit_with

    exit_with(main())
