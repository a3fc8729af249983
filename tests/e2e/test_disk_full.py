"""A full disk under the tracking store, on a small tmpfs mounted in the test's own mount
namespace (``unshare -m``: nothing outside the test sees it, and it goes when the test ends).

Full before the sweep: one line naming the store and the free space, exit 1, no trial.
Full in the middle: the trials' records and the sweep's end go to the spool, the sweep's
last line says so; once space is freed, ``bench.cli.sync`` logs them, the parent run gets its
summary, no run is left RUNNING, and the same command again skips both trials.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import Bench

pytestmark = pytest.mark.e2e

SCRIPT = r"""
set -u
mount -t tmpfs -o size=16m tmpfs "$STORE"
bench() { "$PY" -m bench "$@" tracking.uri="$URI" hydra.sweep.dir="$ROOT/multirun"; }
"$PY" -c "from bench import tracking; tracking.open_store('$URI', 'bench')"
dd if=/dev/zero of="$STORE/filler" bs=4k 2>/dev/null
bench $ARGS >"$ROOT/a.out" 2>"$ROOT/a.err"; echo $? >"$ROOT/a.rc"
rm "$STORE/filler"
# Fill it again once the first trial is under way.
( while [ ! -e "$ROOT/multirun/0/config.json" ]; do sleep 0.05; done
  dd if=/dev/zero of="$STORE/filler" bs=4k 2>/dev/null ) &
bench $ARGS >"$ROOT/b.out" 2>"$ROOT/b.err"; echo $? >"$ROOT/b.rc"
wait
ls "$STATE"/spool/*/ >"$ROOT/spooled"
rm "$STORE/filler"
"$PY" -m bench.cli.sync >"$ROOT/sync.out" 2>&1; echo $? >"$ROOT/sync.rc"
bench $ARGS >"$ROOT/c.out" 2>"$ROOT/c.err"; echo $? >"$ROOT/c.rc"
cp -a "$STORE/mlflow.db" "$ROOT/kept.db"
"""


def _mount_namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d && umount $d && rmdir $d"
    return subprocess.run(["unshare", "-m", "sh", "-c", probe], capture_output=True).returncode == 0


@pytest.mark.skipif(not _mount_namespaces(), reason="needs root to mount a tmpfs (unshare -m)")
def test_a_full_disk_before_and_during_a_sweep(bench: Bench) -> None:
    store = bench.root / "store"
    store.mkdir()
    # The disk fills as the first trial's worker starts (config.json written, torch still
    # importing for seconds), before its first epoch is logged: the trial's length adds no
    # margin, so its epochs are short.
    args = "-m model=lenet5 batch_size=4,8 epochs=2 steps_per_epoch=20 warmup_steps=1"
    env = {
        **bench.env,
        "STORE": str(store),
        "ROOT": str(bench.root),
        "STATE": str(bench.state),
        "PY": sys.executable,
        "URI": f"sqlite:///{store}/mlflow.db",
        "ARGS": args,
    }
    subprocess.run(["unshare", "-m", "bash", "-c", SCRIPT], env=env, cwd=bench.root, timeout=600)

    def read(name: str) -> str:
        return (bench.root / name).read_text()

    # Full before the sweep: refused in one line, nothing ran.
    assert read("a.rc").strip() == "1", read("a.err")
    (line,) = [x for x in read("a.err").splitlines() if x.strip()]
    assert "cannot be written" in line and "disk is full" in line and "KiB free in" in line
    assert "no trial was started" in line
    # Full in the middle: both trials ran, their records and the sweep's end were spooled.
    assert read("b.rc").strip() == "0", read("b.err")
    assert "2 trials: 2 ok" in read("b.out") and "a spool" in read("b.out")
    assert "Traceback" not in read("b.err"), read("b.err")
    spooled = read("spooled").split()
    assert len([n for n in spooled if n.endswith(".json")]) == 2, spooled
    assert len([n for n in spooled if n.endswith(".sweep-end")]) == 1, spooled
    # Space freed: synced, closed with the summary, and a resume skips both trials.
    assert read("sync.rc").strip() == "0" and "synced 2" in read("sync.out"), read("sync.out")
    assert read("c.rc").strip() == "0" and "2 trials: 2 skipped" in read("c.out"), read("c.err")

    bench.db = bench.root / "kept.db"
    bench.uri = f"sqlite:///{bench.db}"
    children = bench.children()
    assert sorted(c.data.tags["bench.status"] for c in children) == ["ok", "ok"]
    assert not [r for r in bench.runs() if r.info.status == "RUNNING"]
    parents = bench.parents()
    assert sorted(p.info.status for p in parents) == ["FINISHED", "FINISHED"]
    summaries = [p.data.tags.get("mlflow.note.content", "") for p in parents]
    assert any("batch_size=8" in s and " ok " in s for s in summaries), summaries
    assert bench.spooled() == []
