"""`farm demo` (`make demo`): the project's own regression suite, end to end.

1. Write the sample models (renderer.samples) into OUT/models, check each one's MDX -> MDL -> MDX
   round trip, and check they are the models committed in goldens/models.
2. Render goldens/manifest.toml with the local runner into the store OUT/store.
3. Compare the frames with the goldens committed in goldens/ (index.jsonl, images/; installed with
   the wheel as the package data farm/demo_goldens, see GOLDENS).
4. Write the report (OUT/report/index.html, junit.xml, summary.md) and print a summary.

Exit status 0 when every frame rendered and the comparison passed, 1 otherwise.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from farm.compare.status import verdict_word
from farm.flows.pipeline import CompareOptions, compare_job
from farm.report.text import summary_text
from farm.run.jobs import run_job, status_text
from renderer.formats import load_model, save_model
from renderer.samples import write_samples

__all__ = ["GOLDENS", "run_demo"]


def _committed_goldens() -> Path:
    """The committed goldens/ folder: the package data ``farm/demo_goldens`` (in a checkout a link to
    goldens/ at the repository root, in an installed wheel a copy of it), else goldens/ beside farm/."""
    packaged = resources.files("farm") / "demo_goldens"
    if packaged.is_dir():
        return Path(str(packaged)).resolve()
    return Path(__file__).resolve().parents[2] / "goldens"


GOLDENS = _committed_goldens()


def _round_trip(paths: list[Path]) -> list[str]:
    problems = []
    for p in paths:
        model = load_model(p, strict=True)
        mdl = p.with_suffix(".mdl")
        save_model(model, mdl)
        same = load_model(mdl, strict=True) == model
        seqs = ", ".join(str(s.name) for s in model.sequences) or "none"
        print(f"{p.name}: {len(model.sequences)} sequence(s) ({seqs}); MDX -> MDL -> MDX"
              f" {'equal' if same else 'DIFFERENT'}")
        if not same:
            problems.append(f"{p.name}: the MDL round trip changed the model")
    return problems


def _same_as_committed(built: Path, committed: Path) -> list[str]:
    out = []
    for f in sorted(p for p in built.rglob("*") if p.is_file() and p.suffix.lower() in (".mdx", ".tga")):
        rel = f.relative_to(built)
        c = committed / rel
        if not c.is_file() or c.read_bytes() != f.read_bytes():
            out.append(rel.as_posix())
    return out


def run_demo(out: str | Path = "demo-out", goldens: str | Path | None = None, workers: int | None = None) -> int:

    out = Path(out)
    goldens = Path(goldens) if goldens else GOLDENS
    manifest = goldens / "manifest.toml"
    if not manifest.is_file():
        print(f"farm demo: no {manifest} (pass --goldens DIR: the folder with manifest.toml and index.jsonl)")
        return 2
    models = write_samples(out / "models")
    problems = _round_trip(models)
    changed = _same_as_committed(out / "models", goldens / "models")
    if changed:
        print(f"warning: the sample models changed since {goldens / 'models'} was written ({', '.join(changed)});"
              f" the demo renders the committed ones. Refresh them with python -c \"from renderer.samples import"
              f" write_samples; write_samples('{goldens / 'models'}')\" and approve the new frames.")
    # the local runner, whatever FARM_BROKER_URL says (workers elsewhere cannot see this store)
    job = run_job(manifest, out=out / "store", broker="local", workers=workers, progress=False)
    print(status_text(job))
    compared = compare_job(job, CompareOptions(goldens, report=out / "report"))
    results, report = compared.results, compared.html
    print(summary_text(results, report=report))
    c = job.counts()
    ok = compared.status == 0 and not (c["failed"] or c["pending"]) and not problems
    for p in problems:
        print(f"problem: {p}")
    word = verdict_word({"verdict": "pass" if ok else "fail"}, "text")  # the demo's own: frames, models, comparison
    print(f"demo: {word}: {results['counts']['total']} frames of {len(models)} sample"
          f" models compared with {goldens}; report {report}")
    return 0 if ok else 1
