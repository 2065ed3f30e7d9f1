"""A worker's own FARM_OUT stands for the job's store only when it holds the job (issue 35 item 8):
the same store at this host's path (a container's /data/out) is used, another store is never
written silently: the batch is a TransientError naming both, retried preferably elsewhere."""

from __future__ import annotations

import pytest
from golden_runs import image, key, make_run

from farm.celery import tasks
from farm.run.execute import TransientError


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.setattr(tasks, "_SEEN_HERE", set())


def test_the_message_store_without_a_farm_out(tmp_path):
    assert tasks.store_for("/host/farm-out", "j1", environ={}) == "/host/farm-out"


def test_a_farm_out_holding_the_job_is_the_same_store_seen_here(tmp_path):
    run = make_run(tmp_path / "here", {key(): image(1)})
    env = {"FARM_OUT": str(tmp_path / "here")}
    assert tasks.store_for("/on/the/coordinator/farm-out", run.id, environ=env) == str(tmp_path / "here")
    (tmp_path / "here").rename(tmp_path / "gone")  # checked once per job and process, then remembered
    assert tasks.store_for("/on/the/coordinator/farm-out", run.id, environ=env) == str(tmp_path / "here")


def test_a_farm_out_without_the_job_is_refused_naming_both(tmp_path):
    run = make_run(tmp_path / "theirs", {key(): image(1)})
    (tmp_path / "other").mkdir()
    env = {"FARM_OUT": str(tmp_path / "other")}
    with pytest.raises(TransientError) as e:
        tasks.store_for(str(tmp_path / "theirs"), run.id, environ=env)
    assert str(tmp_path / "other") in str(e.value) and str(tmp_path / "theirs") in str(e.value)
    assert run.id in str(e.value) and not list((tmp_path / "other").iterdir())  # nothing written there
