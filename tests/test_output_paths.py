"""Nothing is written outside the output folder, and nothing but a regular file is replaced
(issue 23, items 2 and 3).

- Output names derived from untrusted names (archive entries with '..', '\\', a leading '/', drive
  letters, NUL, overlong names; folder model names) stay inside the output folder, distinct and
  stable (renderer.assets.paths.safe_relative); a bad entry fails its model only.
- `-o` that names a device, a FIFO or a symlink: renderer.files.atomic_write writes into it (the
  link keeps being a link); a full device is a clear error naming the path; a folder is refused.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest

os.environ.setdefault("EGL_PLATFORM", "surfaceless")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

from mpq_build import build, have_tools  # noqa: E402

from farm.cli import main  # noqa: E402
from renderer.assets.paths import SAFE_PART_BYTES, safe_relative  # noqa: E402
from renderer.files import atomic_write  # noqa: E402
from renderer.png import read_png  # noqa: E402
from renderer.samples import write_samples  # noqa: E402

needs_mpq = pytest.mark.skipif(have_tools() is not None, reason=str(have_tools()))

NASTY = ["in/crate.mdx", "in/a.mpq:../../../../x/deep.mdx", "in/a.mpq:../x/deep.mdx", "in/a.mpq:/lead.mdx",
         "/etc/passwd", "//host/share/x.mdx", "in/C:/Windows/x.mdx", "in/a\\..\\..\\b.mdx", "in/a_.._.._b.mdx",
         "in/x\0y.mdx", "in/x_y.mdx", "in/" + "l" * 300 + ".mdx", "in/" + "l" * 301 + ".mdx", "in/\udcff.mdx",
         "in/_.mdx", "in/./x.mdx", "in/x.mdx", "in/ .. /x.mdx", "in/..~0123456789abcdef/x.mdx", "..", ".", "",
         "/".join(["d"] * 700), "/".join(["d"] * 701), "in/odd <b>&\"'#%.MDX"]


@pytest.fixture(autouse=True)
def no_broker(monkeypatch):
    monkeypatch.delenv("FARM_BROKER_URL", raising=False)


def files_under(folder: Path) -> set[str]:
    """Everything under `folder` but folders: files, links, devices, FIFOs."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_symlink() or not p.is_dir()}


# --- safe_relative: the one rule for an output name from an untrusted name


def test_safe_relative_stays_inside_is_distinct_and_stable(tmp_path):
    base = (tmp_path / "out" / "thumbs").resolve()
    names = [safe_relative(n) for n in NASTY]
    assert len(set(names)) == len(NASTY)  # two different names never share an output
    assert names == [safe_relative(n) for n in NASTY]  # the same name always gives the same one
    for original, name in zip(NASTY, names, strict=True):
        parts = name.split("/")
        assert all(p.strip(". ") for p in parts), (original, name)  # no '', '.', '..' (nor ' .. ')
        assert "\\" not in name and "\0" not in name and not name.startswith("/")
        assert all(len((p + ".webp.json").encode("utf-8")) <= 255 for p in parts), original
        assert (base / (name + ".png")).resolve().is_relative_to(base), original
        name.encode("utf-8")  # a file name any tool can show, even from bytes that were not UTF-8
    # Ordinary names (every id the corpus and the samples give) are kept as they are: same files as before
    for kept in ("in/crate.mdx", "in/C:/Windows/x.mdx", "in/x.mdx", "in/odd <b>&\"'#%.MDX", "in/_.mdx"):
        assert safe_relative(kept) == kept
    assert len("l" * 200) == SAFE_PART_BYTES and safe_relative("in/" + "l" * 200) == "in/" + "l" * 200


# --- farm thumbnails over archives whose entry names climb out, and folders with odd names


def _archive(src: Path, dest: Path, renames: dict[str, str]) -> Path:
    """An MPQ built by smpq from `src`, then entries renamed to names no folder can hold."""
    build(src, dest)
    for old, new in renames.items():
        subprocess.run(["smpq", "-R", str(dest), old, new], check=True, capture_output=True)
    return dest


@needs_mpq
def test_thumbnails_archive_entries_stay_inside_out(tmp_path, capsys):
    write_samples(tmp_path / "samples")
    src = tmp_path / "src"
    src.mkdir()
    crate = (tmp_path / "samples" / "crate.mdx").read_bytes()
    for name in ("crate.mdx", "deep.mdx", "deeper.mdx", "lead.mdx", "drive.mdx"):
        (src / name).write_bytes(crate)
    roots = tmp_path / "in"
    _archive(src, roots / "a.mpq", {"deep.mdx": "..\\..\\..\\..\\x\\deep.mdx",  # the audit's entry
                                    "deeper.mdx": "..\\..\\..\\..\\..\\..\\..\\..\\esc\\deep.mdx",
                                    "lead.mdx": "\\lead.mdx", "drive.mdx": "C:\\y\\drive.mdx"})
    out = tmp_path / "o1" / "o2" / "out"
    before = files_under(tmp_path)
    code = main(["thumbnails", str(roots), "-o", str(out), "--size", "32", "--msaa", "0", "--workers", "1",
                 "--no-progress", "--sheet", "2"])
    printed = capsys.readouterr()
    assert code == 0, printed.err  # one bad entry is that model's failure, not the run's
    created = files_under(tmp_path) - before
    assert created and all(f.startswith("o1/o2/out/") for f in created), sorted(created)
    inside = {f.removeprefix("o1/o2/out/") for f in created}
    tops = {"thumbs", "by-sha256", "sheets", "index.json", "index.html", ".farm"}
    assert all(f.split("/")[0] in tops for f in inside), inside
    entries = {e["path"]: e for e in json.loads((out / "index.json").read_text("utf-8"))["models"]}
    assert set(entries) == {"a.mpq:crate.mdx", "a.mpq:../../../../x/deep.mdx", "a.mpq:C:/y/drive.mdx",
                            "a.mpq:../../../../../../../../esc/deep.mdx", "a.mpq:lead.mdx"}
    # '\\lead.mdx' is listed without its leading '\\' and opens by its stored name (issue 34 item 2)
    thumbs = {e["thumbnail"] for e in entries.values()}
    assert len(thumbs) == 5 and all(e["status"] == "done" for e in entries.values()), entries
    for rel in thumbs:
        path = out / rel
        assert path.resolve().is_relative_to((out / "thumbs").resolve()) and path.is_file()
        assert read_png(path)[0].shape == (32, 32, 4)
    assert entries["a.mpq:crate.mdx"]["thumbnail"] == "thumbs/in/a.mpq:crate.mdx.png"  # ordinary names as before
    # Stable: a second run finds every thumbnail where the first put it
    assert main(["thumbnails", str(roots), "-o", str(out), "--size", "32", "--msaa", "0", "--workers", "1",
                 "--no-progress", "--sheet", "2"]) == 0
    assert "5 up to date, 0 failed" in capsys.readouterr().out
    assert files_under(tmp_path) - before == created


@needs_mpq
def test_thumbnails_entry_names_that_are_not_utf8(tmp_path, capsys):
    """Maps made on Korean or Chinese systems name entries in their code page: such a name is a
    model like any other (it used to end the run with a UnicodeEncodeError writing the journal)."""
    write_samples(tmp_path / "samples")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("crate.mdx", "k.mdx", "bad.mdx"):
        (src / name).write_bytes((tmp_path / "samples" / "crate.mdx").read_bytes())
    (src / "bad.mdx").write_bytes(b"MDLXVERS\x04\x00\x00\x00\x20\x03\x00\x00GEOS\xe8\x03\x00\x00" + bytes(8))
    roots = tmp_path / "in"
    archive = _archive(src, roots / "m.w3x", {})
    for old, new in ((b"k.mdx", b"war3mapImported\\\xb0\xa1.mdx"), (b"bad.mdx", b"\xc7\xd1.mdx")):
        subprocess.run([b"smpq", b"-R", bytes(archive), old, new], check=True, capture_output=True)
    out = tmp_path / "out"
    args = ["thumbnails", str(roots), "-o", str(out), "--size", "32", "--msaa", "0", "--workers", "1",
            "--no-progress", "--sheet", "4"]
    assert main(args) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "3 models: 2 rendered, 0 up to date, 1 failed" in printed
    index = json.loads((out / "index.json").read_bytes().decode("utf-8"))  # UTF-8 text, as JSON must be
    entries = {e["path"]: e for e in index["models"]}
    korean = entries["m.w3x:war3mapImported/\udcb0\udca1.mdx"]  # the bytes, as os.fsdecode gives them
    assert korean["status"] == "done" and (out / korean["thumbnail"]).is_file()
    assert (out / korean["thumbnail"]).resolve().is_relative_to((out / "thumbs").resolve())
    bad = entries["m.w3x:\udcc7\udcd1.mdx"]
    assert bad["status"] == "failed" and bad["error"]
    (out / "index.html").read_bytes().decode("utf-8")
    assert main(args) == 0 and "2 up to date, 1 failed" in capsys.readouterr().out


def test_thumbnails_folder_names_too_long_or_odd(tmp_path, capsys):
    write_samples(tmp_path / "samples")
    crate = (tmp_path / "samples" / "crate.mdx").read_bytes()
    roots = tmp_path / "in"
    names = ["x" * 251 + ".mdx", "a\\..\\b.mdx", "a_.._b.mdx", "ok.mdx"]  # 255 bytes: a thumbnail name would be 259
    for name in names:
        (roots / name).parent.mkdir(parents=True, exist_ok=True)
        (roots / name).write_bytes(crate)
    out = tmp_path / "out"
    code = main(["thumbnails", str(roots), "-o", str(out), "--size", "32", "--msaa", "0", "--workers", "1",
                 "--no-progress", "--sheet", "0", "--format", "webp"])
    assert code == 0, capsys.readouterr().err
    entries = {e["path"]: e for e in json.loads((out / "index.json").read_text("utf-8"))["models"]}
    assert set(entries) == set(names) and all(e["status"] == "done" for e in entries.values())
    thumbs = {e["thumbnail"] for e in entries.values()} | {e["sidecar"] for e in entries.values()}
    assert len(thumbs) == 2 * len(names) and all((out / t).is_file() for t in thumbs)
    assert entries["ok.mdx"]["thumbnail"] == "thumbs/in/ok.mdx.webp"


# --- atomic_write: -o names a device, a FIFO, a symlink or a folder


@pytest.fixture(scope="module")
def crate_mdx(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("samples")
    write_samples(folder)
    return folder / "crate.mdx"


def _render(model: Path, dest: Path | str) -> list[str]:
    return ["render", str(model), "-o", str(dest), "--size", "16"]


def test_render_to_a_full_device_is_a_clear_error_and_the_device_stays(tmp_path, crate_mdx, capsys):
    dev = tmp_path / "full"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 7))  # /dev/full's numbers: a copy we may break
    except PermissionError:
        pytest.skip("mknod needs root")
    assert main(_render(crate_mdx, dev)) == 2
    err = capsys.readouterr().err
    assert err == f"error: {dev}: No space left on device\n"
    assert stat.S_ISCHR(os.lstat(dev).st_mode) and os.lstat(dev).st_rdev == os.makedev(1, 7)
    assert files_under(tmp_path) == {"full"}  # no temporary file left beside it


def test_render_into_a_fifo_writes_the_png_into_it(tmp_path, crate_mdx, capsys):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    os.link(fifo, tmp_path / "keep")  # to unblock the reader if the FIFO were replaced
    got: list[bytes] = []

    def reader():
        with open(fifo, "rb") as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    try:
        assert main(_render(crate_mdx, fifo)) == 0, capsys.readouterr().err
    finally:
        t.join(timeout=60)
        if t.is_alive():
            os.close(os.open(tmp_path / "keep", os.O_WRONLY | os.O_NONBLOCK))
            t.join()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    rgba, trace = read_png(got[0])
    assert rgba.shape == (16, 16, 4) and trace["size"] == [16, 16]
    assert files_under(tmp_path) == {"pipe.png", "keep"}


def test_atomic_write_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real" / "frame.png"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.png"
    link.symlink_to(Path("real") / "frame.png")
    atomic_write(link, b"new", tmp_path / "tmp")
    assert link.is_symlink() and os.readlink(link) == "real/frame.png"
    assert target.read_bytes() == b"new"
    dangling = tmp_path / "dangling.png"
    dangling.symlink_to(tmp_path / "real" / "later.png")
    atomic_write(dangling, b"made")
    assert dangling.is_symlink() and (tmp_path / "real" / "later.png").read_bytes() == b"made"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["frame.png", "later.png"]


def test_atomic_write_a_name_as_long_as_the_file_system_allows(tmp_path):
    name = "é" * 125 + ".png"  # 254 bytes: the name fits, so its temporary file's name must too
    atomic_write(tmp_path / name, b"png", tmp_path / "tmp")
    assert (tmp_path / name).read_bytes() == b"png" and not any((tmp_path / "tmp").iterdir())


def test_render_to_a_folder_is_refused_and_the_folder_stays(tmp_path, crate_mdx, capsys):
    folder = tmp_path / "frames.png"  # named like a frame: only what it is tells it apart
    folder.mkdir()
    (folder / "a.png").write_bytes(b"keep")
    assert main(_render(crate_mdx, folder)) == 2
    assert capsys.readouterr().err == f"error: {folder}: is a folder; name a file to write\n"
    assert folder.is_dir() and files_under(tmp_path) == {"frames.png/a.png"}
    with pytest.raises(IsADirectoryError, match="is a folder"):
        atomic_write(folder, b"x", tmp_path / "tmp")
    assert files_under(tmp_path) == {"frames.png/a.png"}


# --- other writers: the report's image copies go through atomic_write too


def test_report_images_are_whole_after_a_full_disk(tmp_path):
    """A report written to a full disk, then again once there is room: every image in img/ is whole
    (a copy cut short used to stay, and later reports kept it because the name existed)."""
    import numpy as np
    from golden_runs import key, make_run

    from farm.compare.runs import compare_run
    from farm.report import write_report

    rng = np.random.default_rng(7)
    frame = rng.integers(0, 256, (128, 128, 4), dtype=np.uint8)  # noise: a PNG of about 65 KB
    frame[..., 3] = 255
    run = make_run(tmp_path / "store", {key("models/a.mdx", "Stand", 0): frame})
    results = compare_run(run, tmp_path / "goldens")
    out = tmp_path / "report"
    out.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(out)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    try:
        with pytest.raises(OSError, match="No space left on device"):
            write_report(results, out)  # the static files fit, the frame does not
        subprocess.run(["mount", "-o", "remount,size=4m", str(out)], check=True, capture_output=True)
        write_report(results, out)
        images = sorted((out / "img").glob("*/*.png"))  # img/ab/<sha256>.png (farm.report.images)
        assert images
        for p in images:
            data = p.read_bytes()
            assert data[-12:] == b"\0\0\0\0IEND\xaeB`\x82" and read_png(data)[0].shape == (128, 128, 4), p.name
        assert not [p for p in out.rglob("*.tmp")]
    finally:
        subprocess.run(["umount", str(out)], check=True)


def test_render_several_frames_into_a_fifo_is_refused(tmp_path, crate_mdx, capsys):
    """Several frames are numbered after -o's name: next to a FIFO (or in /dev, for /dev/stdout) that
    made stray files while the reader waited; refused, in one sentence."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    assert main([*_render(crate_mdx, fifo), "--times", "0,100"]) == 2
    assert capsys.readouterr().err == (f"error: -o {fifo}: 2 frames go to files numbered after -o's name, and {fifo}"
                                       " is a device or a pipe; name a file instead (e.g. frames.png)\n")
    assert files_under(tmp_path) == {"pipe.png"}
