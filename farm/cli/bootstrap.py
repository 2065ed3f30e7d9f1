"""`farm run --update-goldens`: the bootstrap command a first run prints, and the approval it makes.

Real assets always miss some game textures, and a model or sequence may draw nothing, so a first
run's frames can hold placeholders (checkers where a texture should be) or be blank. The bootstrap
command names those frames' flags (``--allow-missing``, ``--allow-blank``) only when the run has
such frames, so the approval is asked for in plain words; then every rendered trace becomes a
golden, those approvals stay marked in the goldens (farm.goldens.decisions.golden_marks) and the
run exits 0. Without the flags the frames are held back. Either way they are reported as one line
per outcome (counts by reason, a few models, where the full list is), not one line per frame; the
full list is the job artefact ``goldens-update.json``. The approval itself is farm.flows.pipeline's
(`update_goldens`, run by `compare_job`); this module says what it did (`say_update`).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from farm.flows.pipeline import MARKS, GoldensUpdate, marks, wanted
from farm.report.model import MARK_FLAGS, shell_path

__all__ = ["FLAGS", "bootstrap_command", "bootstrap_hint", "grouped_line", "say_update"]

FLAGS = MARK_FLAGS  # a mark -> the flag that approves it anyway (farm.report.model)
REASONS = {"missing": "drew placeholders for missing assets", "blank": "came out blank"}
assert set(FLAGS) == set(REASONS) == set(MARKS)  # one flag and one reason per mark (farm.flows.pipeline.MARKS)


def _command(job, folder: Path | None, mode: str, flags: list[str]) -> str:
    manifest = job.data.get("manifest") or "MANIFEST"
    parts = ["farm", "run", shell_path(manifest), f"--update-goldens={mode}"]
    if folder is not None and folder != Path(manifest).parent / "goldens":
        parts += ["--goldens", shell_path(folder)]
    return " ".join(shlex.quote(p) for p in [*parts, *flags])


def bootstrap_command(job, folder: Path | None, results: Mapping | None = None) -> str:
    """The command that renders the manifest again and approves its new traces (a first run); with
    the flags that approve frames with placeholders or blank ones when `results` has such new traces."""
    found = {m for k in (wanted(results, "new") if results else ()) for m in marks(results["traces"][k])}
    return _command(job, folder, "new", [flag for m, flag in FLAGS.items() if m in found])


def bootstrap_hint(results: Mapping | None) -> str:
    """What the bootstrap command's flags accept, in words, and the traces it cannot cover (those
    that did not render: a model that does not load); "" when there is neither."""
    if not results:
        return ""
    new = [results["traces"][k] for k in wanted(results, "new")]
    counts = {m: sum(1 for t in new if m in marks(t)) for m in FLAGS}
    said = [f"{n} {'frame' if n == 1 else 'frames'} {REASONS[m]}" for m, n in counts.items() if n]
    broken = sorted({t.get("model") or k for k, t in results["traces"].items() if t["status"] == "error"})
    out = ""
    if said:
        out = (f" ({' and '.join(said)}: {' and '.join(FLAGS[m] for m in FLAGS if counts[m])} approve"
               f" {'it' if sum(counts.values()) == 1 else 'them'} as drawn, marked as such in the goldens and in"
               f" every later report)")
    if broken:
        shown = ", ".join(broken[:3]) + (f" and {len(broken) - 3} more" if len(broken) > 3 else "")
        out += (f"; the only traces it leaves out are those that did not render ({shown}: fix them, the rerun"
                f" fails until then)")
    return out


def grouped_line(traces: Mapping[str, list[str]], results: Mapping) -> str:
    """Counts by reason of `traces` (key -> marks) with a few models and asset names."""
    parts = []
    for m in FLAGS:
        keys = [k for k, ms in traces.items() if m in ms]
        if not keys:
            continue
        models = list(dict.fromkeys(results["traces"][k].get("model") or k for k in keys))
        example = ", ".join(models[:3]) + (f" and {len(models) - 3} more" if len(models) > 3 else "")
        extra = ""
        if m == "missing":
            assets = list(dict.fromkeys(a for k in keys for a in results["traces"][k]["missing"]))
            extra = f"; {len(assets)} asset(s): " + ", ".join(assets[:3]) + (" ..." if len(assets) > 3 else "")
        parts.append(f"{len(keys)} {REASONS[m]} (e.g. {example}{extra})")
    return f"{len(traces)} trace(s): " + ", ".join(parts)


def say_update(job, done: GoldensUpdate, results: Mapping, out: TextIO | None = None) -> None:
    """What an --update-goldens did (farm.flows.pipeline.update_goldens, from the comparison `results`):
    one line for the approval, one grouped line per outcome (approved as marked, not approved), on
    `out` (stdout unless given); what was not approved on stderr."""
    out = out or sys.stdout
    mode, folder = done.mode, done.folder
    if not done.keys:
        print(f"--update-goldens={mode}: nothing to approve", file=out)
        return
    for s in done.skipped:  # other reasons (an image gone from the store): rare, each its own sentence
        print(f"skipped: {s}", file=sys.stderr)
    g = shell_path(folder)
    rec = done.record
    if rec is not None:
        print(f"--update-goldens={mode}: {len(rec['changes'])} trace(s) approved in {folder} (decision"
              f" #{rec['id']}; undo with: farm approve --undo {rec['id']} --goldens {g})", file=out)
    if done.approved:
        print(f"--update-goldens={mode}: approved as drawn and marked in the goldens:"
              f" {grouped_line(done.approved, results)}; full list: {done.listing} and farm goldens --json"
              f" --goldens {g}", file=out)
    if done.held:
        flags = [FLAGS[m] for m in FLAGS if done.allowed[m] or any(m in ms for ms in done.held.values())]
        again = _command(job, folder, mode, flags)
        print(f"--update-goldens={mode}: not approved: {grouped_line(done.held, results)}; full list:"
              f" {done.listing}; to approve them as drawn (marked in the goldens): {again}", file=sys.stderr)
