"""Each study's claims table from the MLflow store of the runs it reports (issue 52, item 4):
claim, verdict, ratio and interval, runs, main commit, date, and which version of the claims
each row ran, so that docs/studies.md quotes verdicts generated from their runs.

    .venv/bin/python scripts/study_table.py --uri sqlite:///mlruns/mlflow.db \
        --experiment seed003_distributed_cpu_machine [--sweep ID] [--current]

The runs are one sweep (``--sweep``, else the experiment's latest); the claims are those the
sweep kept with its parent run (what it ran), or with ``--current`` the preset's claims as
they are now (conf/experiment/<preset>.yaml) checked on the same runs.  A claim's version is
the first 8 hex digits of the SHA-256 of its YAML item (sorted JSON); a row says
``current`` where that item is still the preset's, ``older`` where the preset has changed
it since.  Prints a Markdown table."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
COMMIT_TAG = "mlflow.source.git.commit"


def version(item: Any) -> str:
    """A claim's version: its YAML item, hashed (sorted JSON)."""
    return hashlib.sha256(json.dumps(item, sort_keys=True).encode()).hexdigest()[:8]


def preset_claims(experiment: str) -> tuple[str, list[Any]]:
    """The preset an experiment (``<preset>_<scale>``) belongs to, and its claims as they are
    now; ("", []) where no preset has that name."""
    import yaml

    preset = re.sub(r"_(paper|machine|smoke)$", "", experiment)
    path = ROOT / "conf" / "experiment" / f"{preset}.yaml"
    if not path.is_file():
        return "", []
    return preset, list((yaml.safe_load(path.read_text()) or {}).get("claims") or [])


def _section(source: str) -> str:
    """Where in the study a claim comes from: its source up to the quotation."""
    return source.split(":", 1)[0].split(" '", 1)[0].strip().removeprefix("seed00").strip()


def rows(records: Sequence[Any], items: Sequence[Any], current: Sequence[Any]) -> list[list[str]]:
    """One row per claim item: claim, source, verdict, effect, runs, commit, date, version."""
    from bench.report import claims
    from bench.report.trials import to_trial

    trials = [to_trial(r) for r in records]
    commits = Counter(r.tags.get(COMMIT_TAG, "")[:7] or "?" for r in records)
    main = commits.most_common(1)[0][0] if commits else "?"
    # the main commit (most runs), and how many others the runs were made at
    commit = main + (f" (+{len(commits) - 1} others)" if len(commits) > 1 else "")
    started = min((r.start_time_ms for r in records), default=0)
    date = time.strftime("%Y-%m-%d", time.gmtime(started / 1000)) if started else "?"
    now = {version(i) for i in current}
    out = []
    for item in items:
        (claim,) = claims.parse([item])
        checked = claims.check(claim, trials)
        v = version(item)
        state = "current" if v in now else "older" if now else "-"
        out.append([claim.text, _section(claim.source), checked.verdict,
                    " ".join(checked.effect.split()), str(checked.runs), commit, date,
                    f"{v} ({state})"])  # fmt: skip
    return out


def markdown(table: list[list[str]]) -> str:
    head = ["claim", "source", "verdict", "ratio and interval", "runs", "commit", "date",
            "claims version"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in table]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--uri", required=True, help="the MLflow store (sqlite:///... or http)")
    parser.add_argument("--experiment", required=True, help="<preset>_<scale>")
    parser.add_argument("--sweep", help="the sweep's parent run id (default: the latest)")
    parser.add_argument(
        "--current", action="store_true", help="check the preset's claims as they are now"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from bench import tracking

    try:
        runs = tracking.load_runs(args.uri, experiment=args.experiment,
                                  sweep=args.sweep or "latest", tag_prefixes=None)  # fmt: skip
        kept = tracking.logged_claims(args.uri, runs.sweep_id) if runs.sweep_id else None
    except LookupError as exc:
        print(f"study_table: {exc}", file=sys.stderr)
        return 2
    preset, current = preset_claims(args.experiment)
    items = current if args.current or kept is None else kept
    if not items:
        print(f"study_table: no claims for {args.experiment} (preset {preset or '?'})")
        return 1
    which = "the preset's current claims" if items is current else "the claims the sweep ran"
    print(f"{args.experiment}, sweep {runs.sweep_name or runs.sweep_id or '-'}: "
          f"{len(runs.records)} runs, {len(items)} claims ({which})\n")  # fmt: skip
    print(markdown(rows(runs.records, items, current)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
