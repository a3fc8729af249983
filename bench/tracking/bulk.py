"""Reading many runs at once: the report's read path at the scale of thousands of runs.

:func:`load_runs` gives what :func:`bench.tracking.query.load_runs` gives through MLflow's
client (the same runs, records, order and errors), without a round trip per run:

- a local sqlite store is read with set-based, read-only SQL (its own connection opened
  ``mode=ro``; MLflow is not imported) against the schema of the MLflow versions named in
  :data:`KNOWN_SCHEMAS` (alembic's revision in the store's ``alembic_version`` table).  A
  store of any other revision is not guessed at: it is read through the client, and that
  is said once;
- an http(s) tracking server is searched a page of :data:`HTTP_PAGE` runs at a time
  (MLflow's REST ``runs/search``, its JSON turned into records directly), and the per-epoch
  histories come from MLflow's bulk metric-history endpoint, 100 runs a request.

Only what the caller asks for is read: the per-epoch histories of ``history_keys`` (the
``metrics`` table is otherwise never touched), and the tags whose keys start with one of
``tag_prefixes``.  Strings that repeat from run to run (every key, and values such as
``sgd`` or ``fp32``) are kept once, so 100,000 runs fit in a few hundred MB.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import gc
import json
import math
import sqlite3
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.tracking.protocol import REFERENCE_METRIC, REUSED_RUN_TAG
from bench.tracking.records import Only, RunRecord, RunSet, kept, narrowed, select

# alembic revisions of MLflow's tracking schema whose tables this module reads; each one
# read and checked against the client (tests/unit/test_report_bulk_read.py pins them).
KNOWN_SCHEMAS = {
    "dc11669786a5": "MLflow 3.17 (runs, params, tags, latest_metrics, metrics; experiments "
    "with workspace)",
}
HTTP_PAGE = 1000
HTTP_THREADS = 4  # pages (and metric-history requests) asked for at once
_HISTORY_RUNS = 100  # run ids per bulk metric-history request (the server's limit)
_HISTORY_MAX = 25000  # points per bulk metric-history request (the server's limit)
_DECIDING = ("bench.sweep", "bench.framework")  # tags read to choose runs, asked for or not
_said: set[str] = set()


class UnknownSchema(Exception):
    """The store's schema is not one this module reads; the client reads it instead."""


def say_once(key: str, text: str) -> None:
    if key not in _said:
        _said.add(key)
        print(f"bench: {text}", file=sys.stderr)


class _Strings:
    """One copy of each repeated string."""

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        return self._seen.setdefault(text, text)


def _wanted(key: str, prefixes: Sequence[str] | None) -> bool:
    return prefixes is None or key.startswith(tuple(prefixes))


def load_runs(
    uri: str,
    experiment: str | None,
    sweep: str | None,
    history_keys: tuple[str, ...],
    tag_prefixes: Sequence[str] | None,
    only: Only | None = None,
) -> RunSet | None:
    """The runs :func:`bench.tracking.query.load_runs` would give, read in bulk; None where
    this store is one to read through the client (said once, with why)."""
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///") :])
        try:
            with contextlib.closing(_Sqlite(path)) as store:
                return store.load(uri, experiment, sweep, history_keys, tag_prefixes, only)
        except UnknownSchema as exc:
            say_once(f"schema:{uri}", f"{exc}; reading it run by run through MLflow's client")
            return None
        except sqlite3.Error as exc:
            raise LookupError(f"the MLflow store at {uri} cannot be read: {exc}") from exc
    if uri.startswith(("http://", "https://")):
        try:
            server = _Http(uri)
        except (ImportError, AttributeError) as exc:  # an MLflow without what this uses
            say_once(f"http:{uri}", f"MLflow's REST helpers are not there ({exc}); reading "
                     f"{uri} run by run through MLflow's client")  # fmt: skip
            return None
        return server.load(experiment, sweep, history_keys, tag_prefixes, only)
    return None


def references(uri: str, sweep_id: str) -> list[float] | None:
    """The drift check's reference times of a sweep, by round (:func:`by_round`), read from a
    local sqlite store of a known schema; None where the client must read them."""
    if not uri.startswith("sqlite:///"):
        return None
    try:
        with contextlib.closing(_Sqlite(Path(uri[len("sqlite:///") :]))) as store:
            if store.schema() not in KNOWN_SCHEMAS:
                return None
            rows = store.db.execute(
                "SELECT step, value FROM metrics WHERE run_uuid = ? AND key = ? ORDER BY timestamp",
                (sweep_id, REFERENCE_METRIC),
            ).fetchall()
    except sqlite3.Error as exc:
        raise LookupError(f"the MLflow store at {uri} cannot be read: {exc}") from exc
    return by_round([(int(step), float(value)) for step, value in rows])


def by_round(points: Iterable[tuple[int, float]]) -> list[float]:
    """One reference time per round from (round, seconds) points, rounds 0, 1, ... in order
    (a round logged twice, by a resumed sweep, keeps its later point; rounds without a point
    and values that are not positive finite numbers are left out)."""
    kept: dict[int, float] = {}
    for step, value in points:
        if 0 <= step < 100_000 and math.isfinite(value) and value > 0:
            kept[step] = value
    return [kept[k] for k in sorted(kept)]


# -- sqlite -------------------------------------------------------------------------------


class _Sqlite:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        self.strings = _Strings()

    def schema(self) -> str:
        try:
            row = self.db.execute("SELECT version_num FROM alembic_version").fetchone()
        except sqlite3.OperationalError:
            row = None
        return str(row[0]) if row else ""

    def close(self) -> None:
        self.db.close()

    def _one(self, sql: str, *args: Any) -> Any:
        return self.db.execute(sql, args).fetchone()

    def load(
        self,
        uri: str,
        experiment: str | None,
        sweep: str | None,
        history_keys: tuple[str, ...],
        tag_prefixes: Sequence[str] | None,
        only: Only | None = None,
    ) -> RunSet:
        version = self.schema()
        if version not in KNOWN_SCHEMAS:  # the store is closed by the caller either way
            raise UnknownSchema(
                f"the MLflow store at {uri} has schema revision {version or '(none)'}, which "
                f"bench's bulk reader does not know (it reads {', '.join(sorted(KNOWN_SCHEMAS))})"
            )
        db = self.db
        if experiment is not None:
            found = self._one(
                "SELECT experiment_id FROM experiments WHERE name = ? AND workspace = 'default'",
                experiment,
            )
            if found is None:
                names = sorted(
                    str(n)
                    for (n,) in db.execute(
                        "SELECT name FROM experiments WHERE lifecycle_stage = 'active' "
                        "AND workspace = 'default'"
                    )
                )
                raise LookupError(
                    f"no experiment {experiment!r} in {uri}; there are: "
                    f"{', '.join(names) or 'none'}"
                )
            experiment_ids = [int(found[0])]
        else:
            experiment_ids = [
                int(i)
                for (i,) in db.execute(
                    "SELECT experiment_id FROM experiments WHERE lifecycle_stage = 'active' "
                    "AND workspace = 'default'"
                )
            ]
        parent = None  # (run id, name, experiment id)
        if sweep == "latest" or (sweep is None and experiment is None):
            parent = self._one(
                "SELECT r.run_uuid, r.name, r.experiment_id FROM runs r JOIN tags t "
                "ON t.run_uuid = r.run_uuid AND t.key = 'bench.sweep' AND t.value = 'true' "
                "WHERE r.lifecycle_stage = 'active' "
                "AND r.experiment_id IN (SELECT value FROM json_each(?)) "
                "ORDER BY r.start_time IS NULL, r.start_time DESC, r.run_uuid LIMIT 1",
                json.dumps(experiment_ids),
            )
            if parent is None:
                raise LookupError(
                    "no sweep (a run tagged bench.sweep=true) in this store or experiment"
                )
        elif sweep is not None:
            parent = self._one(
                "SELECT run_uuid, name, experiment_id FROM runs WHERE run_uuid = ?", sweep
            )
            if parent is None:
                raise LookupError(f"no run {sweep!r} in {uri}")
            is_sweep = self._one(
                "SELECT value FROM tags WHERE run_uuid = ? AND key = 'bench.sweep'", sweep
            )
            if is_sweep is None or is_sweep[0] != "true":
                raise LookupError(f"run {sweep} is not a sweep (it has no tag bench.sweep=true)")
        db.execute("CREATE TEMP TABLE chosen (run_uuid TEXT PRIMARY KEY) WITHOUT ROWID")
        if parent is not None:
            reused = [
                key[len(REUSED_RUN_TAG) :]
                for (key,) in db.execute(
                    "SELECT key FROM tags WHERE run_uuid = ? AND substr(key, 1, ?) = ?",
                    (parent[0], len(REUSED_RUN_TAG), REUSED_RUN_TAG),
                )
            ]
            db.execute(
                "INSERT OR IGNORE INTO chosen SELECT r.run_uuid FROM tags t JOIN runs r "
                "ON r.run_uuid = t.run_uuid WHERE t.key = 'mlflow.parentRunId' "
                "AND t.value = ? AND r.experiment_id = ? AND r.lifecycle_stage = 'active'",
                (parent[0], parent[2]),
            )
            db.execute(
                "INSERT OR IGNORE INTO chosen SELECT run_uuid FROM runs WHERE run_uuid IN "
                "(SELECT value FROM json_each(?)) AND experiment_id = ? "
                "AND lifecycle_stage = 'active'",
                (json.dumps(reused), parent[2]),
            )
        else:
            db.execute(
                "INSERT INTO chosen SELECT run_uuid FROM runs WHERE lifecycle_stage = 'active' "
                "AND experiment_id IN (SELECT value FROM json_each(?))",
                (json.dumps(experiment_ids),),
            )
        db.execute(  # a sweep's parent run is no trial
            "DELETE FROM chosen WHERE run_uuid IN (SELECT run_uuid FROM tags "
            "WHERE key = 'bench.sweep' AND value = 'true')"
        )
        if only is not None:  # records.kept, in SQL
            db.execute(
                "DELETE FROM chosen WHERE run_uuid NOT IN (SELECT c.run_uuid FROM chosen c "
                "LEFT JOIN tags t ON t.run_uuid = c.run_uuid AND t.key = 'bench.framework' "
                "LEFT JOIN params f ON f.run_uuid = c.run_uuid AND f.key = 'framework.name' "
                "LEFT JOIN params m ON m.run_uuid = c.run_uuid AND m.key = 'model.name' "
                "JOIN json_each(?) w ON json_extract(w.value, '$[0]') = "
                "COALESCE(NULLIF(t.value, ''), f.value, '?') AND (json_extract(w.value, '$[1]') "
                "IS NULL OR json_extract(w.value, '$[1]') = m.value))",
                (json.dumps(sorted(only, key=lambda p: (p[0], p[1] or ""))),),
            )
        records = self._records(history_keys, tag_prefixes)
        exp_id = parent[2] if parent is not None else experiment_ids[0]
        if experiment is None:
            (experiment,) = self._one(
                "SELECT name FROM experiments WHERE experiment_id = ?", exp_id
            )
        return RunSet(
            records=records,
            uri=uri,
            experiment=str(experiment),
            sweep_id=str(parent[0]) if parent is not None else "",
            sweep_name=str(parent[1] or "") if parent is not None else "",
        )

    def _records(
        self, history_keys: tuple[str, ...], tag_prefixes: Sequence[str] | None
    ) -> list[RunRecord]:
        # Millions of small objects and no cycles among them: the cyclic collector would
        # walk them all again and again as they are made (a third of the time at 100,000).
        was = gc.isenabled()
        gc.disable()
        try:
            return self._read_records(history_keys, tag_prefixes)
        finally:
            if was:
                gc.enable()

    def _read_records(
        self, history_keys: tuple[str, ...], tag_prefixes: Sequence[str] | None
    ) -> list[RunRecord]:
        db, s = self.db, self.strings
        by_id: dict[str, RunRecord] = {}
        for run_id, name, start in db.execute(
            "SELECT r.run_uuid, r.name, r.start_time FROM chosen c JOIN runs r "
            "ON r.run_uuid = c.run_uuid"
        ):
            by_id[run_id] = RunRecord(run_id, name or "", int(start or 0), {}, {}, {})
        for run_id, key, value in db.execute(
            "SELECT p.run_uuid, p.key, p.value FROM chosen c JOIN params p "
            "ON p.run_uuid = c.run_uuid"
        ):
            by_id[run_id].params[s(key)] = s(value)
        for run_id, key, value in db.execute(
            "SELECT t.run_uuid, t.key, t.value FROM chosen c JOIN tags t ON t.run_uuid = c.run_uuid"
        ):
            if _wanted(key, tag_prefixes):
                by_id[run_id].tags[s(key)] = s(value if value is not None else "")
        for run_id, key, value, is_nan in db.execute(
            "SELECT m.run_uuid, m.key, m.value, m.is_nan FROM chosen c JOIN latest_metrics m "
            "ON m.run_uuid = c.run_uuid"
        ):
            by_id[run_id].metrics[s(key)] = math.nan if is_nan else float(value)
        if history_keys:
            for record in by_id.values():  # in the order of history_keys, as the client's
                for key in history_keys:
                    if key in record.metrics:
                        record.history[s(key)] = []
            for run_id, key, step, value, is_nan in db.execute(
                "SELECT m.run_uuid, m.key, m.step, m.value, m.is_nan FROM chosen c JOIN metrics "
                "m ON m.run_uuid = c.run_uuid AND m.key IN (SELECT value FROM json_each(?))",
                (json.dumps(list(history_keys)),),
            ):
                points = by_id[run_id].history.get(key)
                if points is not None:
                    points.append((int(step), math.nan if is_nan else float(value)))
        records = list(by_id.values())
        for record in records:
            for points in record.history.values():
                points.sort()
        records.sort(key=lambda r: (r.start_time_ms, r.run_id))
        return records


# -- http ---------------------------------------------------------------------------------

# A search: its experiments, its filter, and what makes a record of a run's JSON (None: no
# run to read).
_Search = tuple[list[str], str, Callable[[dict[str, Any]], RunRecord | None]]


class _Http:
    """MLflow's REST API: the few lookups through its client, the runs a page at a time."""

    def __init__(self, uri: str) -> None:
        from mlflow.tracking import MlflowClient
        from mlflow.tracking._tracking_service.utils import get_default_host_creds

        from bench.tracking.protocol import quiet_mlflow

        quiet_mlflow()
        self.uri = uri
        self.client = MlflowClient(tracking_uri=uri)
        self.creds = get_default_host_creds(uri)
        self.strings = _Strings()

    def _call(self, endpoint: str, method: str, **kwargs: Any) -> dict[str, Any]:
        from mlflow.utils.rest_utils import http_request, verify_rest_response

        response = http_request(self.creds, endpoint, method, **kwargs)
        verify_rest_response(response, endpoint)
        return dict(response.json())

    def load(
        self,
        experiment: str | None,
        sweep: str | None,
        history_keys: tuple[str, ...],
        tag_prefixes: Sequence[str] | None,
        only: Only | None = None,
    ) -> RunSet:
        chosen = select(self.client, self.uri, experiment, sweep)
        records: dict[str, RunRecord] = {}
        for experiment_ids, filter_string in narrowed(chosen.searches, only):
            search = (experiment_ids, filter_string,
                      lambda run: self._record(run, tag_prefixes, only))  # fmt: skip
            for record in self._search(search):
                records.setdefault(record.run_id, record)
        found = sorted(records.values(), key=lambda r: (r.start_time_ms, r.run_id))
        for record in found:  # in the order of history_keys, as the client's
            record.history = {str(k): [] for k in history_keys if k in record.metrics}
        for key in history_keys:
            self._histories([r for r in found if key in r.metrics], key)
        return chosen.runset(found)

    def _page(
        self, search: _Search, token: str | None, size: int
    ) -> tuple[list[RunRecord], str | None]:
        """A page of a search, its runs made records (in the thread that asked for it: a
        page's JSON is let go of as soon as it is read), and its next page's token."""
        experiment_ids, filter_string, make = search
        body: dict[str, Any] = {
            "experiment_ids": experiment_ids,
            "filter": filter_string,
            "max_results": size,
            "run_view_type": "ACTIVE_ONLY",
        }
        if token:
            body["page_token"] = token
        page = self._call("/api/2.0/mlflow/runs/search", "POST", json=body)
        records = [r for r in map(make, page.get("runs", [])) if r is not None]
        return records, page.get("next_page_token") or None

    def _search(self, search: _Search) -> Iterable[RunRecord]:
        """Every run of a search, a page at a time, in order.  :data:`HTTP_THREADS` pages are
        asked for at once, by offset, as MLflow's own servers page (the search is where a
        server spends its time, and one of several workers builds each page); where the
        first page's next token is not that offset's, the pages asked for ahead are dropped
        and the rest is read one page after another, by the server's tokens."""
        if HTTP_THREADS < 2:
            yield from self._pages(search, None)
            return
        at = 0
        with ThreadPoolExecutor(HTTP_THREADS) as pool:

            def ask() -> Future[tuple[list[RunRecord], str | None]]:
                nonlocal at
                token = _offset_token(at) if at else None
                at += HTTP_PAGE
                return pool.submit(self._page, search, token, HTTP_PAGE)

            pending = collections.deque(ask() for _ in range(HTTP_THREADS))
            first = True
            while pending:
                records, token = pending.popleft().result()
                yield from records
                if first and token and token != _offset_token(HTTP_PAGE):
                    for ahead in pending:
                        ahead.cancel()
                    yield from self._pages(search, token)
                    return
                first = False
                if not token:  # the last page; those asked for past it are empty
                    for ahead in pending:
                        ahead.cancel()
                    return
                pending.append(ask())

    def _pages(self, search: _Search, token: str | None) -> Iterable[RunRecord]:
        """The runs of a search from the page of ``token`` on, one page after another."""
        while True:
            records, token = self._page(search, token, HTTP_PAGE)
            yield from records
            if not token:
                return

    def _record(
        self, run: dict[str, Any], tag_prefixes: Sequence[str] | None, only: Only | None = None
    ) -> RunRecord | None:
        s = self.strings
        info, data = run.get("info", {}), run.get("data", {})
        tags = {
            s(t["key"]): s(t.get("value", ""))
            for t in data.get("tags", [])
            if t["key"] in _DECIDING or _wanted(t["key"], tag_prefixes)
        }
        params = {s(p["key"]): s(p.get("value", "")) for p in data.get("params", [])}
        if tags.get("bench.sweep") == "true" or not kept(only, tags, params):
            return None
        for key in _DECIDING:
            if not _wanted(key, tag_prefixes):
                tags.pop(key, None)
        return RunRecord(
            run_id=str(info["run_id"]),
            name=str(info.get("run_name") or ""),
            start_time_ms=int(info.get("start_time") or 0),
            params=params,
            tags=tags,
            metrics={s(m["key"]): float(m.get("value", 0.0)) for m in data.get("metrics", [])},
        )

    def _histories(self, records: list[RunRecord], key: str) -> None:
        by_id = {r.run_id: r for r in records}
        ids = sorted(by_id)
        batches = [ids[i : i + _HISTORY_RUNS] for i in range(0, len(ids), _HISTORY_RUNS)]
        with ThreadPoolExecutor(HTTP_THREADS) as pool:
            for points in pool.map(lambda batch: self._points(batch, key), batches):
                for rid, values in points.items():
                    by_id[rid].history[self.strings(key)] = sorted(values)

    def _points(self, batch: list[str], key: str) -> dict[str, list[tuple[int, float]]]:
        """The ``key`` history of each run of ``batch``, in one request where it fits."""
        try:
            found = self._call(
                "/ajax-api/2.0/mlflow/metrics/get-history-bulk",
                "GET",
                params={"run_id": batch, "metric_key": key, "max_results": _HISTORY_MAX},
            ).get("metrics", [])
        except Exception as exc:  # noqa: BLE001 - MLflow's own types: a server without it
            say_once(f"history:{self.uri}", f"{self.uri} gives no metric histories in bulk "
                     f"({exc}); reading them run by run")  # fmt: skip
            found = None
        if found is not None and len(found) >= _HISTORY_MAX and len(batch) > 1:  # cut short
            half = len(batch) // 2
            return {**self._points(batch[:half], key), **self._points(batch[half:], key)}
        points: dict[str, list[tuple[int, float]]] = {rid: [] for rid in batch}
        if found is None or len(found) >= _HISTORY_MAX:  # one run of more points than that
            for rid in batch:
                points[rid] = [(int(m.step), float(m.value))
                               for m in self.client.get_metric_history(rid, key)]  # fmt: skip
            found = []
        for m in found:
            points[m["run_id"]].append((int(m.get("step", 0)), float(m.get("value", 0.0))))
        return points


def _offset_token(offset: int) -> str:
    """The page token of MLflow's own servers for the page at ``offset`` (base64 JSON; not a
    documented format, so it is used only where a server's first page gave exactly it)."""
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()
