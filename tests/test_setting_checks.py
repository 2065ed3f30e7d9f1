"""Settings that skipped their checks (issue 34 item 8), through the real `farm` command in a
subprocess: each is one sentence on stderr, exit 2, before anything starts (no pool, no traceback)."""

from __future__ import annotations

import pytest
from test_cli_errors import farm, one_sentence

from farm.environment import INT_BOUNDS, check_broker, check_environment, env_int
from farm.settings import SettingError, check_camera
from renderer.samples import write_samples

MANIFEST = 'name = "t"\nsize = "32x32"\ntimestamps = [0]\n[[models]]\npaths = ["models/*.mdx"]\n'


@pytest.fixture
def project(tmp_path):
    write_samples(tmp_path / "models")
    (tmp_path / "job.toml").write_text(MANIFEST)
    return tmp_path


@pytest.mark.parametrize(("value", "words"), [
    ("nope", ["FARM_RENDERER", "'nope'", "gl, synthetic or module:factory"]),
    ("no_such_module:factory", ["FARM_RENDERER=no_such_module:factory", "no module 'no_such_module'"]),
])
def test_a_bad_renderer_is_one_sentence_before_anything_starts(project, value, words):
    for args in (["run", "job.toml", "--out", "out", "--workers", "1"],
                 ["thumbnails", "models", "-o", "thumbs", "--workers", "1", "--no-progress"]):
        r = farm(*args, cwd=project, FARM_RENDERER=value)
        one_sentence(r, *words)
        assert not (project / "out").exists() and not (project / "thumbs").exists()


def test_a_memory_limit_too_small_names_the_variable_and_the_least(project):
    r = farm("thumbnails", "models", "-o", "thumbs", "--workers", "1", cwd=project, FARM_MEMORY_LIMIT_MB="1")
    one_sentence(r, "FARM_MEMORY_LIMIT_MB=1", "at least 256 MiB", "0 (no limit)")
    assert env_int("FARM_MEMORY_LIMIT_MB", environ={"FARM_MEMORY_LIMIT_MB": "256"}) == 256
    assert env_int("FARM_MEMORY_LIMIT_MB", environ={"FARM_MEMORY_LIMIT_MB": "0"}) == 0


@pytest.mark.parametrize("raw", ["٣", "1_0", "10" + "0" * 25, "+5", "1e3", " 3 4", "0x10"])
def test_integer_variables_take_ascii_digits_within_their_bounds(raw):
    with pytest.raises(SettingError, match="FARM_TIME_LIMIT must be"):
        check_environment({"FARM_TIME_LIMIT": raw})
    assert all(hi is not None for _, hi in INT_BOUNDS.values())  # every one bounded above
    assert env_int("FARM_TIME_LIMIT", None, environ={"FARM_TIME_LIMIT": "604800"}) == 604800
    assert env_int("FARM_TIME_LIMIT", None, environ={"FARM_TIME_LIMIT": " 90 "}) == 90


def test_an_integer_past_its_bound_is_one_sentence(project):
    r = farm("run", "job.toml", "--out", "out", "--workers", "1", cwd=project, FARM_TIME_LIMIT="1" + "0" * 26)
    one_sentence(r, "FARM_TIME_LIMIT must be from 0 to 604800")


@pytest.mark.parametrize(("workers", "words"), [("-5", ["'-5'"]), ("100000", ["'100000'"]), ('"٣"', ["'٣'"])])
def test_project_defaults_go_through_the_command_line_checks(project, workers, words):
    (project / "farm.toml").write_text(f"[defaults]\nworkers = {workers}\n")
    for args in (["run", "job.toml", "--out", "out"], ["thumbnails", "models", "-o", "thumbs", "--no-progress"]):
        r = farm(*args, cwd=project)
        one_sentence(r, "farm.toml: [defaults] workers", "--workers must be a whole number from 1 to 1024", *words)
    r = farm("run", "job.toml", "--out", "out", "--workers", "100000", cwd=project)  # the command line: the same
    assert r.returncode == 2 and "--workers must be a whole number from 1 to 1024" in r.stderr
    (project / "farm.toml").write_text("[defaults]\nworkers = 1\n")
    assert farm("run", "job.toml", "--out", "out", cwd=project).returncode in (0, 1)


@pytest.mark.parametrize("camera", ["nan,nan,nan:0,0,0", "inf,0,0:0,0,0", "0,0,5:0,0,0:0,1,0:nan"])
def test_a_camera_of_non_finite_numbers_is_refused(project, camera):
    with pytest.raises(SettingError, match="finite"):
        check_camera(camera)
    (project / "cam.toml").write_text(MANIFEST.replace('timestamps', f'camera = "{camera}"\ntimestamps'))
    one_sentence(farm("run", "cam.toml", "--out", "out", cwd=project), "camera", "finite", camera)


@pytest.mark.parametrize("url", ["redis://[::1", "redis://[::1/0", "redis://::1]:6379/0"])
def test_a_malformed_broker_url_says_so(project, url):
    with pytest.raises(SettingError, match="malformed URL"):
        check_broker(url)
    one_sentence(farm("run", "job.toml", "--out", "out", "--broker", url, cwd=project), url, "malformed URL")
    assert check_broker("redis://[::1]:6379/0") == "redis://[::1]:6379/0"
