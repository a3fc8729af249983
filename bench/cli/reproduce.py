"""``python -m bench.cli.reproduce RUN_ID``: run a logged trial again, in the software it ran in.

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

    python -m bench.cli.reproduce RUN_ID [--tracking-uri URI]
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from bench import tracking
from bench.checks.preflight import validate
from bench.core.config import BenchConfig, ConfigError, TrackingConfig, from_dict

# What is compared, in this order, where either run has it.
COMPARED = (
    "trial_samples_per_s",
    "trial_time_s",
    "trial_step_time_p50_ms",
    "trial_step_time_p90_ms",
    "trial_step_time_p99_ms",
    "final_loss",
    "peak_host_rss_mb",
    "import_time_s",
    "build_time_s",
    "compile_time_s",
    "epochs_completed",
)
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
        env = environments.env_for(fw, version, extra)
        if not env.lock.exists() or env.lock_hash() != logged:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                got = tracking.download_artifact(uri, original.run_id, "lock.txt", Path(tmp))
                env.root.mkdir(parents=True, exist_ok=True)
                env.lock.write_bytes(got.read_bytes())
        try:
            environments.ensure(fw, version, extra=extra)
        except environments.EnvironmentError_ as exc:
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


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cli.reproduce", description=__doc__)
    parser.add_argument("run_id", help="the trial run to reproduce")
    parser.add_argument(
        "--tracking-uri",
        default=TrackingConfig.uri,
        help=f"where the run is logged, and where the new one goes (default {TrackingConfig.uri})",
    )
    args = parser.parse_args(argv)

    def fail(message: str) -> int:
        print(f"bench.cli.reproduce: {message}", file=sys.stderr)
        return 2

    try:
        original, config, experiment = tracking.load_trial(args.tracking_uri, args.run_id)
    except LookupError as exc:
        return fail(str(exc))
    image_id = original.tags.get("mlflow.docker.image.id", "")
    try:
        if image_id:
            cfg = pinned_config(config, image_id, args.tracking_uri, experiment)
        else:
            cfg = same_config(config, args.tracking_uri, experiment)
            problem = _same_software(original, cfg, args.tracking_uri)
            if problem:
                return fail(problem)
        validate(cfg)
    except ConfigError as exc:
        return fail(f"cannot rerun {args.run_id}:\n  " + "\n  ".join(exc.problems))

    # after the checks: it opens the store and a parent run
    from bench.sweep.session import Sweep, SweepContext, TrialStopped

    signal.signal(signal.SIGTERM, _sigterm)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    workdir = Path("outputs") / "reproduce" / f"{args.run_id[:8]}-{stamp}"
    given = [f"reproduces={args.run_id}"]
    sweep = Sweep.open(cfg, 1, f"reproduce-{args.run_id[:8]}", given, SweepContext())
    label = original.name or f"framework={cfg.framework.name} model={cfg.model.name}"
    try:
        row = sweep.run(cfg, label, workdir, 1, tags={"bench.reproduces": args.run_id})
    except KeyboardInterrupt as exc:
        sweep.finish([exc.row] if isinstance(exc, TrialStopped) else [], killed=True)
        print("bench.cli.reproduce: interrupted", file=sys.stderr)
        return 130
    code = sweep.finish([row])
    again, _, _ = tracking.load_trial(args.tracking_uri, row.run_id)
    print()
    print(side_by_side(original, again))
    return code


if __name__ == "__main__":
    raise SystemExit(main())
