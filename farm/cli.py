"""`farm ...` commands: parse arguments, call the layer below, print, exit with a status."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from renderer.errors import FormatError


def _load(path: str, strict: bool = False, **opts):
    from renderer.formats import load_model

    return load_model(path, strict=strict, **opts)


def cmd_inspect(args) -> int:
    from renderer.summary import format_text, summarize

    model = _load(args.file, strict=args.strict, **_halo_options(args))
    if model.format == "halo":
        from renderer.formats.halo import format_halo_info

        if args.json:
            info = dict(model.info, diagnostics=[d.as_dict() for d in model.diagnostics], path=model.path)
            print(json.dumps(info, indent=2, sort_keys=True, default=str))
        else:
            print(format_halo_info(model.info, model.diagnostics))
        return 0
    chunks = None
    if Path(args.file).suffix.lower() == ".mdx" or Path(args.file).read_bytes()[:4] == b"MDLX":
        from renderer.formats.mdx import chunk_table

        chunks = chunk_table(Path(args.file).read_bytes())
    summary = summarize(model, chunks)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
    else:
        print(format_text(summary))
    return 0


def _halo_options(args) -> dict:
    """Loader options that only Halo tags take (LOD, regions, permutation, tag root)."""
    target = getattr(args, "file", None) or getattr(args, "model", None) or ""
    if Path(target).suffix.lower() not in (".model", ".gbxmodel"):
        return {}
    return {k: getattr(args, k) for k in ("lod", "permutation", "regions", "tag_root") if getattr(args, k, None)}


def _add_halo_options(s) -> None:
    g = s.add_argument_group("Halo model tags")
    g.add_argument("--lod", help="super_high (default), high, medium, low, super_low, or 0-4")
    g.add_argument("--permutation", help="permutation name or index for every region (default 0)")
    g.add_argument("--regions", help="regions to draw, names or indices separated by commas (default all)")
    g.add_argument("--tag-root", dest="tag_root", help="tags folder for shader and bitmap references")


def cmd_convert(args) -> int:
    from renderer.formats import save_model

    # A model with broken indices still converts (with diagnostics) so it can be fixed by hand.
    model = _load(args.input, strict=args.strict, check_indices=False)
    src, dst = Path(args.input).suffix.lower(), Path(args.output).suffix.lower()
    if dst not in (".mdx", ".mdl"):
        raise SystemExit(f"farm convert: cannot write {args.output!r}: the output must end in .mdx or .mdl")
    if src == ".mdl" and dst == ".mdx" or src == dst:
        model.layout = []  # write chunks in canonical order, not in the layout of another file
    save_model(model, args.output)
    for d in model.diagnostics:
        print(f"warning: {d.sentence(args.input)}", file=sys.stderr)
    print(f"{args.input} -> {args.output}")
    return 0


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 512x512, got {text!r}") from None
    if not (1 <= w <= 8192 and 1 <= h <= 8192):
        raise argparse.ArgumentTypeError(f"size {w}x{h} is outside 1..8192")
    return w, h


def _times(args, model, seq) -> list[int]:
    if args.times:
        try:
            return [int(t) for t in args.times.split(",") if t.strip()]
        except ValueError:
            raise SystemExit(f"farm render: --times must be integers in ms, comma-separated: {args.times!r}") from None
    if args.every:
        if seq is None:
            raise SystemExit("farm render: --every needs a sequence, and the model has none")
        start, end = model.sequences[seq].interval
        return list(range(0, max(end - start, 0) + 1, args.every))
    return [args.time]


def cmd_render(args) -> int:
    from renderer.anim import UnknownSequence
    from renderer.camera import CameraError
    from renderer.frame import FrameSpec, Renderer, resolve_sequence
    from renderer.png import write_png

    model = _load(args.model, strict=args.strict, **_halo_options(args))
    sequence = int(args.sequence) if args.sequence is not None and args.sequence.isdigit() else args.sequence
    try:
        seq = resolve_sequence(model, sequence)
    except UnknownSequence as e:
        raise SystemExit(f"farm render: {args.model}: {e}") from None
    times = _times(args, model, seq)
    out = Path(args.output)
    renderer = Renderer(args.backend)
    try:
        for i, t in enumerate(times):
            spec = FrameSpec(sequence=seq, time_ms=t, width=args.size[0], height=args.size[1], camera=args.camera,
                             team=args.team, msaa=args.msaa, background=args.background, assets=tuple(args.assets),
                             missing_textures=args.missing_textures)
            try:
                frame = renderer.render(model, spec)
            except (CameraError, ValueError) as e:
                raise SystemExit(f"farm render: {args.model}: {e}") from None
            dest = out if len(times) == 1 else out.with_name(f"{out.stem}_{i:04d}_{t}ms{out.suffix}")
            write_png(dest, frame.rgba, frame.trace)
            if i == 0:
                for d in frame.diagnostics:
                    print(f"warning: {d.sentence(args.model)}", file=sys.stderr)
            print(f"{dest}: t={t} ms")
    finally:
        renderer.close()
    return 0


def cmd_demo(args) -> int:
    """The project's own regression suite: sample models -> local runner -> goldens/ -> report."""
    from farm.demo import run_demo

    return run_demo(args.out, args.goldens, args.workers)


def _workers(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--workers must be a whole number >= 1, got {text!r}")
    return n


def _finish_job(job, verb: str) -> int:
    from farm.jobs import status_text

    c = job.counts()
    print(status_text(job))
    if c["failed"] or c["pending"]:
        print(f"farm {verb}: {c['failed']} frame(s) failed, {c['pending']} not rendered", file=sys.stderr)
        return 1
    return 0


def cmd_run(args) -> int:
    from farm.jobs import run_job

    try:
        job = run_job(args.manifest, out=args.out, broker=args.broker, workers=args.workers, job_id=args.job_id,
                      progress=False if args.no_progress else None)
    except KeyboardInterrupt:
        print("farm run: interrupted; `farm status JOB` shows what finished (Celery workers carry on)",
              file=sys.stderr)
        return 130
    rendered = _finish_job(job, "run")
    if args.no_compare:
        return rendered
    from farm.goldens_cli import compare_after_run

    compared = compare_after_run(job, args.goldens, allow_new=args.allow_new, report=args.report)
    return max(rendered, compared or 0)


def cmd_status(args) -> int:
    from farm.jobs import JobState, status_text

    job = JobState.load(args.job, args.out)
    job.merge_worker_results()
    if args.json:
        print(json.dumps({"job": job.id, **job.counts(), "failed_traces": {k: job.traces[k]["error"]
                                                                          for k in job.keys("failed")}},
                         indent=2, sort_keys=True))
    else:
        print(status_text(job, limit=args.limit))
    c = job.counts()
    return 0 if not (c["failed"] or c["pending"]) else 1


def cmd_retry(args) -> int:
    from farm.jobs import retry_job

    if not (args.failed or args.pending):
        raise SystemExit("farm retry: say what to run again: --failed and/or --pending")
    job = retry_job(args.job, out=args.out, failed=args.failed, pending=args.pending, broker=args.broker,
                    workers=args.workers, progress=False if args.no_progress else None)
    return _finish_job(job, "retry")


def cmd_thumbnails(args) -> int:
    """Thumbnails of every model under the roots (farm.thumbs); exit 0 even when some models fail
    (they get placeholder tiles and are listed), 1 with --strict, 2 for bad arguments."""
    from farm.thumbs import ThumbnailError, ThumbnailOptions, make_thumbnails
    from farm.thumbs.state import StateLocked

    opts = ThumbnailOptions(size=args.size, sequence=args.sequence, time=args.time, format=args.format,
                            team=args.team, msaa=args.msaa, sheet=args.sheet, assets=tuple(args.assets),
                            missing_textures=args.missing_textures)
    try:
        summary = make_thumbnails(args.roots, args.out, opts, broker=args.broker, workers=args.workers,
                                  progress=False if args.no_progress else None, force=args.force)
    except (ThumbnailError, StateLocked) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("farm thumbnails: interrupted; run the same command again to render the rest", file=sys.stderr)
        return 130
    print(summary.text())
    return 1 if args.strict and summary.failed else 0


def _add_thumbnails_parser(sub) -> None:
    s = sub.add_parser("thumbnails", help="a thumbnail of every model under some folders, contact sheets and a"
                                          " searchable index.html (incremental)")
    s.add_argument("roots", nargs="+", metavar="ROOT", help="folder to search for .mdx .mdl .model .gbxmodel")
    s.add_argument("--out", required=True, help="output folder (thumbs/, sheets/, index.html, index.json)")
    s.add_argument("--size", type=int, default=256, help="thumbnail width and height in pixels (default 256)")
    s.add_argument("--sequence", help="sequence to show when a model has it (default: Portrait); else Stand,"
                                      " else the first")
    s.add_argument("--time", type=int, help="ms from the sequence start (default: the middle of the sequence)")
    s.add_argument("--format", choices=("png", "webp"), default="png", help="png (trace in a text chunk) or webp"
                                                                             " (lossless, trace in a .json sidecar)")
    s.add_argument("--team", type=int, default=0, help="team colour index 0-27")
    s.add_argument("--msaa", type=int, default=4, help="MSAA samples (default 4, clamped to what GL grants)")
    s.add_argument("--sheet", type=int, default=64, help="models per contact sheet (default 64; 0: no sheets)")
    s.add_argument("--assets", action="extend", nargs="+", default=[], metavar="DIR",
                   help="more asset roots (each model's parent folders up to its ROOT, and the ROOTs, come first)")
    s.add_argument("--missing-textures", choices=("checker", "white"), default="checker")
    s.add_argument("--force", action="store_true", help="render every model, even those up to date")
    s.add_argument("--strict", action="store_true", help="exit 1 when any model failed")
    s.add_argument("--broker", help="Celery broker URL (default: $FARM_BROKER_URL; neither, or 'local': a local"
                                    " process pool)")
    s.add_argument("--workers", type=_workers, help="local processes (default: one per core)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_thumbnails)


def _add_runner_options(s) -> None:
    s.add_argument("--out", help="output store (default: $FARM_OUT or ./farm-out)")
    s.add_argument("--broker", help="Celery broker URL (default: $FARM_BROKER_URL; neither, or 'local': a local"
                                    " process pool)")
    s.add_argument("--workers", type=_workers, help="local processes (default: one per core; with a broker,"
                                                     " the workers' --concurrency decides)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="farm", description="Headless render and regression-test farm for game models.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("inspect", help="show what a model file holds")
    s.add_argument("file")
    s.add_argument("--json", action="store_true", help="print JSON with stable keys")
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    _add_halo_options(s)
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("convert", help="convert MDX <-> MDL by the output's extension")
    s.add_argument("input")
    s.add_argument("output")
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    s.set_defaults(func=cmd_convert)

    s = sub.add_parser("render", help="render frames of a model to PNG")
    s.add_argument("model")
    s.add_argument("-o", "--output", required=True, help="PNG path (numbered when several times are rendered)")
    s.add_argument("--sequence", help="sequence name (case-insensitive) or index; default: the first")
    s.add_argument("--time", type=int, default=0, help="ms from the sequence start")
    s.add_argument("--times", help="several times in ms, e.g. 0,250,500")
    s.add_argument("--every", type=int, help="render every N ms of the sequence")
    s.add_argument("--size", type=_size, default=(512, 512), help="WxH, default 512x512")
    s.add_argument("--camera", default="auto", help="auto | a CAMS camera name | ex,ey,ez:tx,ty,tz[:ux,uy,uz[:fov]]")
    s.add_argument("--team", type=int, default=0, help="team colour index 0-27")
    s.add_argument("--msaa", type=int, default=0, help="MSAA samples (clamped to what GL grants)")
    s.add_argument("--background", default="transparent", help="transparent or #rrggbb")
    s.add_argument("--assets", action="append", default=[], help="asset root (repeatable)")
    s.add_argument("--missing-textures", choices=("checker", "white"), default="checker")
    s.add_argument("--backend", default="auto", choices=("auto", "egl", "osmesa", "glfw"))
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    _add_halo_options(s)
    s.set_defaults(func=cmd_render)

    s = sub.add_parser("run", help="render a job manifest (local process pool, or Celery workers with a broker)")
    s.add_argument("manifest", help="job manifest (TOML)")
    s.add_argument("--job-id", help="name the job (default: NAME-DATE-TIME-XXXX)")
    _add_runner_options(s)
    from farm.goldens_cli import add_parsers as _add_golden_parsers
    from farm.goldens_cli import add_run_options

    add_run_options(s)
    s.set_defaults(func=cmd_run)

    s = sub.add_parser("status", help="show a job's frames: done, failed (with the reason), pending")
    s.add_argument("job", help="job id (in --out) or the path of its jobs/<id>.json")
    s.add_argument("--out", help="output store (default: $FARM_OUT or ./farm-out)")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--limit", type=int, default=20, help="failed frames to list (default 20)")
    s.set_defaults(func=cmd_status)

    s = sub.add_parser("retry", help="render a job's failed (or unfinished) frames again")
    s.add_argument("job", help="job id (in --out) or the path of its jobs/<id>.json")
    s.add_argument("--failed", action="store_true", help="frames that failed")
    s.add_argument("--pending", action="store_true", help="frames that never finished (an interrupted run)")
    _add_runner_options(s)
    s.set_defaults(func=cmd_retry)
    _add_thumbnails_parser(sub)

    s = sub.add_parser("demo", help="render the sample models (goldens/manifest.toml) locally, compare them with"
                                     " the committed goldens, write the report")
    s.add_argument("--out", default="demo-out", help="models, store/ and report/ go here (default demo-out)")
    s.add_argument("--goldens", help="the goldens folder with manifest.toml (default: the repository's goldens/)")
    s.add_argument("--workers", type=_workers, help="local processes (default: one per core)")
    s.set_defaults(func=cmd_demo)
    _add_golden_parsers(sub)  # compare, approve, reject, goldens, report, serve, diff (farm.goldens_cli)
    return p


def main(argv: list[str] | None = None) -> int:
    from farm.jobs import JobError
    from farm.manifest import ManifestError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except FormatError as e:
        print(f"error: {e.sentence()}", file=sys.stderr)
        return 2
    except (ManifestError, JobError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `farm inspect x | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
