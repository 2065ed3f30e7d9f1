"""`farm thumbnails`: a thumbnail of every model under some folders (farm.thumbs)."""

from __future__ import annotations

import os
import sys

from farm.cli.common import UsageError, msaa_arg, square_size_arg, team_arg, workers_arg
from farm.environment import broker_url
from farm.images import IMAGE_FORMATS
from farm.look import CAMERA_HELP
from farm.run import sandbox
from farm.run.inputs import INPUT_MODES
from farm.thumbs import ThumbnailError, ThumbnailOptions, make_thumbnails
from farm.thumbs.run import THUMBNAIL_RENDER
from farm.thumbs.state import StateLocked
from renderer.texture_set import DEFAULT_MISSING_TEXTURES, MISSING_MODES

__all__ = ["EXAMPLES", "add_parsers"]

EXAMPLES = {"thumbnails": ["farm thumbnails assets/war3 assets/halo -o thumbs-out --size 128",
                           "farm thumbnails assets/war3 --out thumbs-out --broker redis://localhost:6379/0"]}


def cmd_thumbnails(args) -> int:
    """Thumbnails of every model under the roots (farm.thumbs); exit 0 even when some models fail
    for a reason of their own (they get placeholder tiles and are listed; 1 with --strict), 1 when
    any failed for a reason outside the model (an input a worker could not read, a lost worker, a
    store error), 2 for bad arguments."""
    # a bad setting (--camera a|b) is a SettingError: the CLI's error guard (farm.cli._run) says it, exit 2
    if args.untrusted:
        _confine_local_workers(args)
    render = THUMBNAIL_RENDER.replace(team=args.team, msaa=args.msaa, missing_textures=args.missing_textures,
                                      game=tuple(args.game), camera=args.camera)
    opts = ThumbnailOptions(size=args.size, sequence=args.sequence, time=args.time, format=args.format,
                            animated=args.animated, frames=args.frames,
                            sheet=args.sheet, assets=tuple(args.assets), render=render,
                            follow_links=args.follow_links)
    try:
        summary = make_thumbnails(args.roots, args.out, opts, broker=args.broker, workers=args.workers,
                                  listfile=args.listfile, progress=False if args.no_progress else None,
                                  force=args.force, retry_failed=args.retry_failed, names=args.name or None,
                                  inputs=args.inputs)
    except (ThumbnailError, StateLocked) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("farm thumbnails: interrupted; run the same command again to render the rest", file=sys.stderr)
        return 130
    print(summary.text(verbose=getattr(args, "verbose", 0) > 0))
    return 1 if summary.outside or (args.strict and summary.failed) else 0


def _confine_local_workers(args) -> None:
    """--untrusted: this command's local workers render each batch confined (FARM_UNTRUSTED=1 for the
    pool it starts, farm.run.sandbox); Celery workers decide for themselves, so it is refused there."""
    if broker_url(args.broker) is not None:
        raise UsageError("--untrusted confines this machine's local workers; Celery workers confine themselves:"
                         " start them with FARM_UNTRUSTED=1 (and leave --untrusted off here)")
    try:
        sandbox.check_store(str(args.out))
    except sandbox.SandboxError as e:
        raise UsageError(f"--untrusted: {e}") from None
    os.environ["FARM_UNTRUSTED"] = "1"  # read by the local pool's processes (farm.run.worker, farm.run.local)


def add_parsers(sub) -> None:
    s = sub.add_parser("thumbnails", help="a thumbnail of every model under some folders, contact sheets and a"
                                          " searchable index.html (incremental)")
    s.add_argument("roots", nargs="+", metavar="ROOT", help="folder to search for .mdx .mdl .model .gbxmodel (and"
                                                            " map/MPQ archives), a model file, or an archive")
    s.add_argument("-o", "--out", required=True, help="output folder (thumbs/, sheets/, index.html, index.json)")
    s.add_argument("--size", type=square_size_arg, default=256, help="thumbnail size: N or NxN pixels (square;"
                                                                     " default 256)")
    s.add_argument("--sequence", help="sequence to show when a model has it (default: Portrait); else Stand,"
                                      " else the first")
    s.add_argument("--time", type=int, help="ms from the sequence start (default: the middle of the sequence)")
    s.add_argument("--camera", default=THUMBNAIL_RENDER.camera, help=CAMERA_HELP)
    s.add_argument("--format", choices=IMAGE_FORMATS, default="png", help="png (trace in a text chunk) or webp"
                                                                             " (lossless, trace in a .json sidecar)")
    s.add_argument("--team", type=team_arg, default=0, help="team colour index 0-27")
    s.add_argument("--msaa", type=msaa_arg, default=THUMBNAIL_RENDER.msaa,
                   help=f"MSAA samples (default {THUMBNAIL_RENDER.msaa}, clamped to what GL grants)")
    s.add_argument("--animated", action="store_true",
                   help="also an animated thumbnail per model (looping, the --format's animation: APNG or WebP) of"
                        " --frames frames evenly over the chosen sequence; the still is its poster, index.html plays"
                        " it on hover, contact sheets stay stills")
    s.add_argument("--frames", type=int, default=16, help="frames of an animated thumbnail (default 16; 2..240)")
    s.add_argument("--sheet", type=int, default=64, help="models per contact sheet (default 64; 0: no sheets)")
    s.add_argument("--assets", action="extend", nargs="+", default=[], metavar="DIR",
                   help="more asset roots (each model's parent folders up to its ROOT, and the ROOTs, come first)")
    s.add_argument("--listfile", metavar="FILE", help="entry names (one a line) for map or MPQ archives that carry"
                                                       " no (listfile), so their models can be listed")
    s.add_argument("--game", action="append", default=[], metavar="DIR|ARCHIVE",
                   help="Warcraft III game data, searched last (installation folder, archives, extracted data)")
    s.add_argument("--missing-textures", choices=MISSING_MODES, default=DEFAULT_MISSING_TEXTURES,
                   help=f"what a texture that cannot be found is drawn as (default {DEFAULT_MISSING_TEXTURES})")
    s.add_argument("--force", action="store_true", help="render every model, even those up to date")
    s.add_argument("--retry-failed", action="store_true",
                   help="try again the models that failed for a reason of their own and have not changed since"
                        " (without it they keep their failure; failures outside the model are always tried again)")
    s.add_argument("--name", action="append", default=[], metavar="LABEL",
                   help="the label of each ROOT in the models' ids, once per ROOT in their order (default: the"
                        " folder's name; two roots with one name get a hash of their path)")
    s.add_argument("--inputs", choices=INPUT_MODES, default=None,
                   help="auto (default: travel with an s3:// --out), travel (the models and their textures go"
                        " through the store, for workers that see only the bucket) or shared (workers open them"
                        " at their paths)")
    s.add_argument("--follow-links", action="store_true",
                   help="read models, archives, textures and tables through links to files outside the roots"
                        " named and the folders searched (refused and listed by default)")
    s.add_argument("--untrusted", action="store_true",
                   help="files from strangers: render each model in a process with no network, a read-only view of"
                        " the files but the output folder, and memory, CPU-time and file-size caps"
                        " (FARM_UNTRUSTED_*; README, 'Untrusted uploads'); a model over a cap fails alone")
    s.add_argument("--strict", action="store_true", help="exit 1 when any model failed")
    s.add_argument("--broker", help="Celery broker URL (default: $FARM_BROKER_URL; neither, or 'local': a local"
                                    " process pool)")
    s.add_argument("--workers", type=workers_arg, help="local processes (default: one per core)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.set_defaults(func=cmd_thumbnails)
