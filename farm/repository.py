"""The git work tree a command runs in: its root, and whether a path in it is ignored.

What a report records about where the goldens and manifest are (farm.report.published) is
relative to this root, so a reviewer's clone of the repository finds them again; `farm run` says
once when the store is inside the work tree and not ignored (`store_ignore_hint`). Without git (no
work tree, no git program) there is no root here and no hint.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["relative_to_root", "store_ignore_hint", "work_tree_root"]

_GIT_TIMEOUT_S = 10


def work_tree_root(start: str | Path | None = None) -> Path | None:
    """The top of the git work tree holding `start` (default: the current folder): the nearest
    folder upwards with a ``.git`` entry (a folder, or a file for a linked work tree); else None."""
    here = Path(start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def relative_to_root(path: str | Path | None, root: Path | None = None) -> str | None:
    """`path` relative to the work tree root (or `root`), as a POSIX string; None when it is not
    inside it (or there is no root)."""
    if not path:
        return None
    root = root or work_tree_root()
    if root is None:
        return None
    try:
        return Path(path).absolute().relative_to(root).as_posix() or "."
    except ValueError:
        return None


def store_ignore_hint(store: str | Path) -> str | None:
    """One sentence when the folder store `store` is inside a git work tree and git does not ignore
    it: the line to add to .gitignore. None otherwise (not in a work tree, ignored, no git)."""
    root = work_tree_root(store if Path(store).exists() else Path(store).absolute().parent)
    git = shutil.which("git")
    if root is None or git is None:
        return None
    rel = relative_to_root(store, root)
    if rel is None or rel == ".":
        return None
    try:
        done = subprocess.run([git, "-C", str(root), "check-ignore", "-q", "--", rel], capture_output=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 1:  # 0: ignored; 128: not a repository git can read (or another error)
        return None
    return (f"hint: the store {rel}/ is inside the git work tree {root} and not ignored: add the line"
            f" '/{rel}/' to {root / '.gitignore'} so its frames stay out of commits")
