"""renderer.gl.threads.available_cores honours the cgroup CPU quota (compose ``cpus:``, ``docker run
--cpus``), so llvmpipe threads per worker process follow the container's limit, not the host's cores."""

from __future__ import annotations

import os

import pytest

from renderer.gl import threads
from renderer.gl.threads import available_cores, cgroup_cpu_limit, llvmpipe_threads


def _v2(tmp_path, cgroup: str, files: dict[str, str]):
    for rel, text in files.items():
        p = tmp_path / "fs" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (tmp_path / "cgroup").write_text(cgroup)
    return str(tmp_path / "fs"), str(tmp_path / "cgroup")


def test_v2_quota_of_the_own_cgroup(tmp_path):
    root, self_cg = _v2(tmp_path, "0::/\n", {"cpu.max": "250000 100000\n"})
    assert cgroup_cpu_limit(root, self_cg) == 2.5


def test_v2_unlimited_is_none(tmp_path):
    root, self_cg = _v2(tmp_path, "0::/\n", {"cpu.max": "max 100000\n"})
    assert cgroup_cpu_limit(root, self_cg) is None


def test_v2_the_tightest_ancestor_wins(tmp_path):
    root, self_cg = _v2(tmp_path, "0::/farm.slice/worker-1\n", {
        "cpu.max": "max 100000",
        "farm.slice/cpu.max": "300000 100000",
        "farm.slice/worker-1/cpu.max": "max 100000",
    })
    assert cgroup_cpu_limit(root, self_cg) == 3.0


def test_v2_a_container_without_cgroup_namespace_reads_its_mounted_root(tmp_path):
    # /proc/self/cgroup names the host's path, /sys/fs/cgroup is the container's own cgroup
    root, self_cg = _v2(tmp_path, "0::/docker/0123abcd\n", {"cpu.max": "200000 100000"})
    assert cgroup_cpu_limit(root, self_cg) == 2.0


def test_v1_cfs_quota(tmp_path):
    root, self_cg = _v2(tmp_path, "4:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n", {
        "cpu,cpuacct/cpu.cfs_quota_us": "150000",
        "cpu,cpuacct/cpu.cfs_period_us": "100000",
    })
    assert cgroup_cpu_limit(root, self_cg) == 1.5
    root, self_cg = _v2(tmp_path / "b", "3:cpu:/\n", {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"})
    assert cgroup_cpu_limit(root, self_cg) is None


def test_unreadable_or_garbage_is_none(tmp_path):
    assert cgroup_cpu_limit(str(tmp_path / "nothing"), str(tmp_path / "nothing")) is None
    root, self_cg = _v2(tmp_path, "0::/\n", {"cpu.max": "lots\n"})
    assert cgroup_cpu_limit(root, self_cg) is None


@pytest.mark.parametrize(("quota", "expected"), [(None, 8), (4.0, 4), (2.5, 3), (0.5, 1), (16.0, 8)])
def test_available_cores_is_the_affinity_capped_by_the_quota(monkeypatch, quota, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: quota)
    assert available_cores() == expected


def test_threads_per_process_follow_the_container_limit(monkeypatch):
    """compose: cpus 4, --concurrency 2 on a 64-core host: 2 llvmpipe threads per process, not 32."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 4.0)
    assert llvmpipe_threads(2) == 2
    env: dict[str, str] = {}
    assert threads.set_llvmpipe_threads(llvmpipe_threads(2), env) == 2 and env == {"LP_NUM_THREADS": "2"}


def test_this_machine():
    limit = cgroup_cpu_limit()
    assert limit is None or limit > 0
    assert 1 <= available_cores() <= (os.cpu_count() or 1)
