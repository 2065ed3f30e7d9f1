"""Shared test helpers: where the corpus lives and which corpus files are which."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
# The tests' shared Redis: one setting, the same variable scripts/ensure-redis.sh reads (make test starts
# a throwaway server there when none answers). Tests that need a Redis of their own start one on a free port.
REDIS_HOST = "127.0.0.1"
REDIS_PORT = int(os.environ.get("MODELFARM_REDIS_PORT") or 6379)


def redis_url(db: int) -> str:
    """The URL of database `db` on the tests' shared Redis."""
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"


def redis_up(port: int = REDIS_PORT) -> bool:
    try:
        with socket.create_connection((REDIS_HOST, port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


REDIS_SERVER = shutil.which("redis-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind((REDIS_HOST, 0))
        return s.getsockname()[1]


class Redis:
    """A Redis server of a test's own, on a free port, keeping its data in `folder` (append-only file,
    fsync always), so a test can stop, kill and restart it."""

    def __init__(self, folder: Path):
        self.port = free_port()
        self.folder = folder
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://{REDIS_HOST}:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", REDIS_HOST, "--dir", str(self.folder),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 15
        while not redis_up(self.port):
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # Redis flushes its AOF and exits
            self.proc.wait(15)


@pytest.fixture
def redis_server(tmp_path):
    """A started `Redis` of the test's own (stopped after it)."""
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed (scripts/system-deps.sh installs it)")
    r = Redis(tmp_path)
    r.start()
    yield r
    r.stop()


def corpus_files(*patterns: str) -> list[Path]:
    out: set[Path] = set()
    for pat in patterns:
        out.update(CORPUS.rglob(pat))
    return sorted(out)


def corpus_path(rel: str) -> Path:
    p = CORPUS / rel
    if not p.exists():
        pytest.skip(f"corpus file {rel} is not present")
    return p


@pytest.fixture
def corpus():
    if not CORPUS.is_dir():
        pytest.skip("../shared/corpus is not present")
    return CORPUS


# Tests marked slow here rather than in their files (make test-fast leaves them out; make test runs
# them): each starts real processes (a local pool of spawned workers, a farm command, a notify
# command) or takes many seconds. "file::test" -> why.
SLOW_TESTS = {
    "test_anim_tracks.py::test_vectorised_sampling_matches_the_per_key_reference": "15 s of per-key reference sampling",
    "test_archive_args.py::test_inspect_lists_the_models_inside_and_its_example_command_works": "farm processes",
    "test_archive_args.py::test_render_of_an_archive_explains_archive_entry_in_one_sentence": "farm processes",
    "test_archive_args.py::test_a_mistyped_entry_gets_the_nearest_entries": "farm processes",
    "test_bootstrap_marks.py::test_the_printed_bootstrap_approves_a_partly_textured_suite_and_the_marks_stay":
        "farm runs on a local pool",
    "test_budgets.py::test_a_frame_over_its_time_or_memory_budget_fails_alone": "worker processes over budget",
    "test_budgets.py::test_memory_growing_in_small_steps_fails_each_frame_on_the_memory_budget": "worker processes",
    "test_budgets.py::test_a_worker_stuck_where_no_signal_reaches_is_stopped_and_its_batch_fails": "a stuck worker",
    "test_cli_quiet.py::test_run_and_status": "farm runs on a local pool",
    "test_default_look.py::test_camera_auto_and_time_0_give_the_bytes_farm_render_wrote_before": "farm processes",
    "test_default_look.py::test_several_times_keep_the_auto_camera_they_had": "farm processes",
    "test_default_look.py::test_render_thumbnails_and_view_agree_on_the_default_time_and_camera": "a local pool",
    "test_default_look.py::test_thumbnails_notice_the_camera_and_say_which_frames_are_blank": "a local pool",
    "test_farm_assets.py::test_models_inside_map_archives_render_like_the_folder_form": "a local pool",
    "test_farm_local.py::test_local_run_status_and_retry": "a local pool",
    "test_farm_local.py::test_same_bytes_for_any_worker_count_and_alone": "local pools",
    "test_farm_local.py::test_parent_never_loads_gl_and_children_split_the_cores": "a farm process and its pool",
    "test_farm_local.py::test_a_process_that_dies_fails_only_its_own_batch": "a pool whose process dies",
    "test_goldens_demo.py::test_farm_run_compares_a_manifest_that_has_goldens": "a farm run on a local pool",
    "test_nightly_ux.py::test_a_notify_line_that_hangs_is_stopped_with_its_children": "a notify command's processes",
    "test_output_paths.py::test_thumbnails_entry_names_that_are_not_utf8": "a local pool",
    "test_output_paths.py::test_thumbnails_folder_names_too_long_or_odd": "a local pool",
    "test_render_determinism.py::test_same_trace_in_five_fresh_processes_gives_identical_png_bytes": "five processes",
    "test_serve_limits.py::test_slow_clients_hold_at_most_the_cap_of_threads_and_a_normal_request_is_answered":
        "waits out slow clients",
    "test_farm_assets.py::test_an_archive_without_a_listfile_is_named_and_read_with_one": "local pools",
    "test_farm_assets.py::test_a_frame_with_placeholders_is_reported_and_not_approved_by_accident": "a local pool",
    "test_farm_assets.py::test_thumbnails_list_the_models_inside_map_archives": "a local pool",
    "test_farm_assets.py::test_editing_a_texture_renders_its_thumbnails_again": "local pools",
    "test_thumbnails.py::test_incremental_runs": "local pools",
    "test_thumbnails.py::test_a_model_that_kills_its_worker_gets_a_placeholder": "a pool whose process dies",
    "test_thumbnails.py::test_sheets_drawn_during_the_run_equal_sheets_drawn_from_the_final_index": "a local pool",
    "test_thumbnails.py::test_a_killed_run_resumes_where_it_stopped": "a farm process, killed",
    "test_cli_errors.py::test_status_answers_on_a_read_only_store": "a farm process in a read-only mount",
    "test_thumbnails_animated.py::test_animated_thumbnails_are_incremental_and_go_when_not_asked": "local pools",
    "test_thumbnails_animated.py::test_index_html_plays_the_animation_while_the_pointer_is_over_the_tile": "Chromium",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if f"{item.path.name}::{getattr(item, 'originalname', item.name)}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
