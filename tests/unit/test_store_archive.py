"""The archive of terminal jobs (issue #17, item 7): its store semantics and the buffer
that keeps a job in the state or in the archive, never in neither."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_ray import model as m
from lyra_ray.model.state import JobState
from lyra_ray.runtime.archive import JobArchive, describe
from lyra_ray.runtime.store import StateStore


def _job(i: int, status: m.JobStatus = m.JobStatus.FINISHED) -> JobState:
    spec = m.JobSpec(name=f"j{i}", total_steps=10.0, throughput={"v100": 1.0})
    j = JobState(f"j{i}", spec, arrival_s=0.0, status=status, steps_done=10.0)
    j.finish_s = 5.0
    return j


def test_commit_archives_atomically_and_reports_the_bytes_written(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    rows = [(f"j{i}", {"id": f"j{i}", "status": "finished"}) for i in range(3)]
    size = store.commit({"jobs": []}, [], rows)
    assert size == len(json.dumps({"jobs": []})) + sum(
        len(json.dumps(r, sort_keys=True)) for _, r in rows
    )
    assert [r["id"] for r in store.archive_records()] == ["j0", "j1", "j2"]
    assert store.archived("j1") == {"id": "j1", "status": "finished"}
    assert store.archived("nope") is None
    # Archiving a job again replaces its row instead of failing the commit.
    store.commit({"jobs": []}, [], [("j1", {"id": "j1", "status": "cancelled"})])
    assert store.archive_count() == 3 and store.archived("j1")["status"] == "cancelled"
    # A commit that fails writes nothing: neither the state nor the archive rows.
    with pytest.raises(TypeError):
        store.commit({"bad": {1, 2}}, [], [("j9", {"id": "j9"})])
    assert store.archived("j9") is None and store.load() == {"jobs": []}
    store.close()
    again = StateStore(tmp_path)  # and it all survives reopening
    assert again.archive_count() == 3


def test_the_store_is_wal_with_full_sync_and_pending_reads_use_the_index(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store._lock:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        plan = store._db.execute(
            "EXPLAIN QUERY PLAN SELECT seq, kind, job_id, payload FROM inbox "
            "WHERE consumed = 0 ORDER BY seq"
        ).fetchall()
    assert any("inbox_pending" in str(row) for row in plan), plan


def test_a_job_stays_in_the_buffer_until_a_commit_succeeds(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    archive = JobArchive(store)
    j = _job(1)
    archive.add(j, describe(j, now=9.0, generation=2, reason=None))
    assert archive.get("j1") is not None and archive.count() == 1  # readable while pending
    rows = archive.rows()
    assert rows[0][1]["spec"]["name"] == "j1"  # the spec is kept beside the record
    with pytest.raises(TypeError):
        store.commit({"x": {1}}, [], rows)  # the commit fails: the record stays pending
    assert archive.pending and store.archive_count() == 0
    store.commit({}, [], archive.rows())
    archive.committed(len(rows))
    assert not archive.pending
    got = archive.get("j1")
    assert got is not None and "spec" not in got
    assert (got["status"], got["steps_done"], got["generation"]) == ("finished", 10.0, 2)
    assert [r["id"] for r in archive.records()] == ["j1"]


def test_describe_an_ended_job_as_status_shows_it() -> None:
    j = _job(3, m.JobStatus.FAILED)
    j.first_start_s = 1.0
    d = describe(j, now=100.0, generation=4, reason="worker died")
    assert d["status"] == "failed" and d["reason"] == "worker died" and d["generation"] == 4
    assert d["queued_s"] == 1.0 and d["assignment"] is None


def test_archived_records_keep_their_launches_out_of_the_status_view(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    archive = JobArchive(store)
    j = _job(2)
    launch = (12.5, "j2", 1, {"gpu_type": "k80", "workers": 1, "nodes": [["n", 1]]})
    archive.add(j, describe(j, now=20.0, generation=1, reason=None), [launch])
    assert archive.launches() == [launch]  # pending
    store.commit({}, [], archive.rows())
    archive.committed(1)
    assert archive.launches() == [launch]  # from the store
    got = archive.get("j2")
    assert got is not None and "launches" not in got and "spec" not in got


def test_learned_throughputs_keep_the_most_recent_rows_and_restore_in_that_order() -> None:
    from lyra_ray.model.throughput import MeasuredThroughputs, catalogue_throughputs

    model = MeasuredThroughputs(catalogue_throughputs(), max_rows=3)
    for i in range(5):
        spec = m.JobSpec(name=f"n{i}", total_steps=1.0, throughput={"v100": 1.0})
        model.observe(spec, "v100", 1, 2.0 + i)
    again = m.JobSpec(name="n2", total_steps=1.0, throughput={"v100": 1.0})
    model.observe(again, "v100", 1, 9.0)  # seen again: now the newest
    assert list(model.measured) == [("n3", "v100"), ("n4", "v100"), ("n2", "v100")]
    twin = MeasuredThroughputs(catalogue_throughputs(), max_rows=3)
    twin.load_state(json.loads(json.dumps(model.to_state())))
    assert list(twin.measured) == list(model.measured)
    newer = m.JobSpec(name="n5", total_steps=1.0, throughput={"v100": 1.0})
    for x in (model, twin):
        x.observe(newer, "v100", 1, 1.0)
    assert list(twin.measured) == list(model.measured)  # both forget n3
