"""Commands on one model: inspect, convert, render."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import sys
from pathlib import Path

from farm.cli.common import UsageError, folder_models, load_model_arg
from farm.cli.options import add_render_options, render_settings
from farm.environment import default_game
from farm.escape import terminal
from farm.files import atomic_write, atomic_write_json
from farm.images import (
    ANIMATION_FORMATS,
    ANIMATION_MAX_BYTES,
    IMAGE_FORMATS,
    animation_sidecar,
    blank_reason,
    encode_animation,
    encode_image,
    frame_durations,
    image_sidecar,
)
from farm.look import CAMERA_HELP, blank_warning, frame_defaults, sequence_length
from farm.plan.batches import frame_limit
from farm.settings import (
    check_assets,
    check_camera,
    check_game,
    check_time,
    containing_root,
)
from renderer.anim import UnknownSequence
from renderer.assets import MpqError, list_models, read_source
from renderer.assets.search import AssetSearch
from renderer.assets.sources import entry_problem, is_archive
from renderer.camera import CameraError
from renderer.files import is_stream
from renderer.formats import save_model
from renderer.formats.halo import TAG_KINDS, format_halo_info
from renderer.formats.mdx import chunk_table
from renderer.frame import Renderer, resolve_sequence
from renderer.fx.events import resolve_events
from renderer.summary import format_text, summarize

__all__ = ["EXAMPLES", "add_parsers"]

EXAMPLES = {
    "inspect": ["farm inspect models/crate.mdx", "farm inspect units/footman.mdx --json --strict",
                "farm inspect maps/keep.w3x", "farm inspect 'maps/keep.w3x:war3mapImported/Ghost.mdx'"],
    "convert": ["farm convert models/crate.mdx crate.mdl"],
    "render": ["farm render models/crate.mdx -o crate.png --sequence Stand --time 500 --size 256x256",
               "farm render models/crate.mdx -o walk.png --sequence Walk --every 100 --size 128",
               "farm render models/crate.mdx -o walk.webp --animate --sequence Walk --every 50 --size 128"],
}


def cmd_inspect(args) -> int:
    if is_archive(args.file) and Path(args.file).is_file():
        return _inspect_archive(args)
    if Path(args.file).is_dir():
        return _inspect_folder(args)
    model, context = load_model_arg(args.file, strict=args.strict, **_halo_options(args))
    if model.format == "halo":
        if args.json:
            info = dict(model.info, diagnostics=[d.as_dict() for d in model.diagnostics], path=model.path)
            print(json.dumps(info, indent=2, sort_keys=True, default=str))
        else:
            print(format_halo_info(model.info, model.diagnostics))
        return 0
    chunks = None
    data = read_source(args.file)  # a file, or an archive entry
    if Path(args.file).suffix.lower() == ".mdx" or data[:4] == b"MDLX":
        chunks = chunk_table(data)
    summary = summarize(model, chunks)
    events = _resolved_events(model, context, args) if model.event_objects else []
    if args.json:
        print(json.dumps({**summary, "events_resolved": events} if events else summary, indent=2, sort_keys=True))
    else:
        print(format_text(summary))
        if events:
            print(f"event codes ({len(events)}):")
            for e in events:
                what = e["resolved"] if e["resolved"] is not None else f"not resolved: {e['why']}"
                print(f"  {e['name']}: {e['kind'] or '?'} {e['id']} -> {what}")
    return 0


def _inspect_archive(args) -> int:
    """The models inside a map or MPQ archive, and how to inspect or render one."""
    try:
        models = list_models(args.file, listfile=args.listfile)
    except MpqError as e:
        raise UsageError(str(e)) from None
    commands = []
    if models:  # commands to paste: the entry quoted (always, as a shell word; a quote in it too)
        entry = shlex.quote(models[0]) if shlex.quote(models[0]) != models[0] else f"'{models[0]}'"
        commands = [f"inspect one: farm inspect {entry}",
                    f"render one:  farm render {entry} -o {shlex.quote(Path(models[0]).stem + '.png')}"]
    problems = {m: why for m in models if (why := entry_problem(m))}
    return _list_models(args, "archive", "an archive", models, commands, problems)


def _inspect_folder(args) -> int:
    """The models under a folder (an extracted map, an asset tree), and how to inspect or render one."""
    models = folder_models(args.file)
    commands = [f"inspect one: farm inspect {shlex.quote(models[0])}",
                f"render all:  farm thumbnails {shlex.quote(args.file)} -o thumbs"] if models else []
    return _list_models(args, "folder", "a folder", models, commands)


def _list_models(args, key: str, what: str, models: list[str], commands: list[str],
                 problems: dict[str, str] | None = None) -> int:
    """What `farm inspect` prints for an archive or a folder (`what`): its models (JSON with --json,
    the file under `key`), each with its problem when it has one (an entry name too long to open),
    then `commands` to paste. Names are escaped for the terminal (farm.escape.terminal)."""
    problems = problems or {}
    if args.json:
        doc = {key: args.file, "models": models, **({"problems": problems} if problems else {})}
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    print(f"{terminal(args.file)}: {what} holding {len(models)} model(s)")
    for m in models:
        print(f"  {terminal(m)}" + (f"  (cannot be opened: the entry {problems[m]})" if m in problems else ""))
    for line in commands:
        print(terminal(line))
    return 0


def _resolved_events(model, context, args) -> list[dict]:
    """What each EVTS code names in the game's tables, found like textures (renderer.fx.events)."""
    search = AssetSearch.for_model(context.location, check_assets(args.assets, "--assets"),
                                   check_game(args.game, "--game") if args.game else default_game(),
                                   follow_links=args.follow_links)
    return resolve_events(model, search)


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
    # A model with broken indices still converts (with diagnostics) so it can be fixed by hand.
    src, dst = Path(args.input).suffix.lower(), Path(args.output).suffix.lower()
    lenient = {"check_indices": False} if src in (".mdx", ".mdl") else {}  # the Warcraft readers' option
    model = load_model_arg(args.input, strict=args.strict, **lenient).model
    if dst not in (".mdx", ".mdl"):
        raise SystemExit(f"farm convert: cannot write {args.output!r}: the output must end in .mdx or .mdl")
    if src == ".mdl" and dst == ".mdx" or src == dst:
        model.layout = []  # write chunks in canonical order, not in the layout of another file
    save_model(model, args.output)
    for d in model.diagnostics:
        print(f"warning: {d.sentence(args.input)}", file=sys.stderr)
    print(f"{args.input} -> {args.output}")
    return 0


def _times(args, model, seq, time_ms: int) -> list[int]:
    """The ms to render: --times, --every over the sequence, or `time_ms` (--time, else the default
    look's, farm.look); each checked by farm.settings.check_time, the count bounded as a job's is
    (farm.plan.batches.frame_limit: memory, FARM_MAX_FRAMES)."""
    if args.times is not None:
        parts = [t.strip() for t in args.times.split(",")]
        if not any(parts) or not all(p.isdigit() for p in parts if p) or "" in parts[:-1]:
            raise UsageError(f"--times must be whole ms separated by commas, e.g. 0,250,500; not {args.times!r}")
        return sorted({check_time(int(p), "--times") for p in parts if p})
    if args.every is not None:
        if args.every < 1:
            raise UsageError(f"--every must be a whole number of ms >= 1, not {args.every}")
        if seq is None:
            raise UsageError(f"{args.model}: --every needs a sequence, and the model has none")
        length = sequence_length(model, seq)
        count = length // args.every + 1
        limit, why = frame_limit()
        if count > limit:
            raise UsageError(f"--every {args.every} over a sequence of {length} ms is {count:,} frames,"
                             f" more than {why}")
        return list(range(0, length + 1, args.every))
    return [check_time(time_ms, "--time")]


def _animated(args) -> bool:
    """One animated image instead of numbered stills: --animate, --fps, or a .gif output."""
    return bool(args.animate or args.fps is not None or Path(args.output).suffix.lower() == ".gif")


def _output_format(output: str, animated: bool = False) -> str:
    """The format -o asks for, by its extension (farm.images.IMAGE_FORMATS: .png, .webp, any case;
    animated, farm.images.ANIMATION_FORMATS: .gif too); a device or pipe (/dev/stdout, a FIFO:
    renderer.files.is_stream) takes PNG whatever its name, but not an animation (its traces go in a
    sidecar next to it). Anything else is refused before the model is read, in one sentence."""
    suffix = Path(output).suffix
    ext, stream = suffix.lower().lstrip("."), is_stream(output)
    if animated and stream:
        raise UsageError(f"-o {output}: an animation's frame traces go in a sidecar next to it, and {output} is a"
                         f" device or a pipe; name a file instead (e.g. anim.webp)")
    if ext in (ANIMATION_FORMATS if animated else IMAGE_FORMATS):
        return ext
    if stream:
        return "png"
    allowed = " or ".join(f".{f}" for f in IMAGE_FORMATS)
    raise UsageError(f"-o {output}: the extension picks the format and must be {allowed}, not"
                     f" {suffix or 'none'}")


def _write_frame(dest: Path, fmt: str, frame) -> None:
    """The frame as `fmt` (farm.images.encode_image), written atomically; a WebP's trace and diagnostics
    go in a sidecar, DEST.json, as `farm thumbnails --format webp` keeps them."""
    atomic_write(dest, encode_image(frame.rgba, frame.trace, fmt))
    if fmt != "png":
        atomic_write_json(dest.with_name(dest.name + ".json"),
                          image_sidecar(frame.trace, [d.as_dict() for d in frame.diagnostics]))


def _write_animation(dest: Path, fmt: str, frames: list, times: list[int], fps: float | None) -> None:
    """The frames as one looping animation (farm.images.encode_animation), durations from the
    timestamps or --fps, written atomically; the sidecar DEST.json keeps every frame's time, duration,
    trace and diagnostics, in order (the encoders merge consecutive identical frames; the sidecar
    lists every frame rendered)."""
    durations = frame_durations(times, fps)
    atomic_write(dest, encode_animation([f.rgba for f in frames], durations, fmt))
    atomic_write_json(dest.with_name(dest.name + ".json"), animation_sidecar(
        fmt, times, durations, [f.trace for f in frames], [[x.as_dict() for x in f.diagnostics] for f in frames]))
    kind = "lossy preview" if fmt == "gif" else "lossless"
    print(f"{dest}: {len(frames)} frames, t={times[0]}..{times[-1]} ms, {sum(durations)} ms a loop ({kind})")


def _check_animation(args, times: list[int]) -> None:
    """--fps in range, and the frames' pixels (all held until the animation is encoded) within
    farm.images.ANIMATION_MAX_BYTES: refused before anything is rendered."""
    if args.fps is not None and not 0 < args.fps <= 1000:
        raise UsageError(f"--fps must be more than 0 and at most 1000 frames a second, not {args.fps:g}")
    need = len(times) * args.size[0] * args.size[1] * 4
    if need > ANIMATION_MAX_BYTES:
        raise UsageError(f"-o {args.output}: {len(times):,} frames of {args.size[0]}x{args.size[1]} hold"
                         f" {need / (1 << 30):.1f} GiB until the animation is encoded, more than"
                         f" {ANIMATION_MAX_BYTES / (1 << 30):.0f} GiB; render fewer frames (--every) or smaller ones")


def _warn_blank(name: str, model, seq, blank: list[tuple[int, str]], count: int) -> None:
    """A blank frame is never silent: farm.look.blank_warning's sentence for the first, and how many more."""
    if not blank:
        return
    t, reason = blank[0]
    more = f" ({len(blank)} of the {count} frames are blank)" if len(blank) > 1 else ""
    print(f"warning: {blank_warning(name, model, seq, t, reason)}{more}", file=sys.stderr)


STDOUT = "/dev/stdout"  # what `-o -` writes to


def writes_stdout(output: str) -> bool:
    """Whether -o is this command's own stdout: `-`, /dev/stdout, /dev/fd/1, or the file or pipe that
    descriptor 1 is (`-o so.png > so.png`)."""
    if output == "-":
        return True
    try:
        have, mine = os.stat(output), os.fstat(1)
    except (OSError, ValueError):
        return False
    return (have.st_dev, have.st_ino) == (mine.st_dev, mine.st_ino)


def cmd_render(args) -> int:
    """`farm render`; when the image goes to stdout (`-o -`, `-o /dev/stdout`), everything else the
    command prints goes to stderr, so stdout holds the image alone."""
    if not writes_stdout(args.output):
        return _render(args)
    if args.output == "-":
        args.output = STDOUT
    with contextlib.redirect_stdout(sys.stderr):
        return _render(args)


def _render(args) -> int:
    animated = _animated(args)
    fmt = _output_format(args.output, animated)
    model, context = load_model_arg(args.model, strict=args.strict, **_halo_options(args))
    sequence = int(args.sequence) if args.sequence is not None and args.sequence.isdigit() else args.sequence
    try:
        seq = resolve_sequence(model, sequence)
    except UnknownSequence as e:
        raise UsageError(f"{args.model}: {e}") from None
    several = args.times is not None or args.every is not None  # frames that share a camera: auto, as before
    time_ms, camera = frame_defaults(model, seq, args.time, args.camera, several)  # the default look (farm.look)
    times = _times(args, model, seq, time_ms)
    out = Path(args.output)
    if animated:
        _check_animation(args, times)
    elif len(times) > 1 and is_stream(out):  # numbered names next to /dev/stdout or a FIFO: never what was meant
        raise UsageError(f"-o {args.output}: {len(times)} frames go to files numbered after -o's name, and"
                         f" {args.output} is a device or a pipe; name a file instead (e.g. frames.png)")
    settings = render_settings(args, camera=check_camera(camera, "--camera"),
                               **({} if args.game else {"game": default_game()}))
    stop_at = containing_root(args.model, settings.assets)
    renderer = Renderer(args.backend)
    blank: list[tuple[int, str]] = []  # (ms, why) of each blank frame
    frames: list = []  # animated: every frame, encoded together at the end
    try:
        for i, t in enumerate(times):
            spec = settings.frame_spec(seq, t, stop_at)
            if args.wireframe:  # a look of farm view's, not a job setting
                spec = dataclasses.replace(spec, wireframe=True)
            try:
                frame = renderer.render(model, spec, context=context)
            except (CameraError, ValueError) as e:
                raise UsageError(f"{args.model}: {e}") from None
            dest = out if len(times) == 1 or animated else out.with_name(f"{out.stem}_{i:04d}_{t}ms{out.suffix}")
            if animated:
                frames.append(frame)
            else:
                _write_frame(dest, fmt, frame)
            reason = blank_reason(frame.rgba)
            if reason is not None:
                blank.append((t, reason))
            if i == 0:
                _print_diagnostics(args.model, frame.diagnostics, bool(getattr(args, "verbose", 0)))
                _tag_root_hint(args.model, model, frame)
            if not animated:
                print(f"{dest}: t={t} ms")
    finally:
        renderer.close()
    if animated:
        _write_animation(out, fmt, frames, times, args.fps)
    _warn_blank(args.model, model, seq, blank, len(times))
    return 0


SHOWN_DIAGNOSTICS = 3  # warnings a render prints before it counts the rest (-v prints them all)


def _print_diagnostics(name: str, diagnostics: list, verbose: bool) -> None:
    """The frame's warnings: all of them with -v, else the first few and one line counting the rest,
    so a model missing 48 textures is not 48 long lines."""
    shown = diagnostics if verbose else diagnostics[:SHOWN_DIAGNOSTICS]
    for d in shown:
        print(f"warning: {d.sentence(name)}", file=sys.stderr)
    if len(diagnostics) > len(shown):
        print(f"warning: {name}: {len(diagnostics) - len(shown)} more warning(s); -v lists them all", file=sys.stderr)


def _tag_root_hint(name: str, model, frame) -> None:
    """After the warnings of a Halo model whose shader or bitmap tags were not found: where they
    were looked for, and the option that names another tags folder."""
    missing = [a for a in frame.assets if a.get("missing") and a.get("kind") in TAG_KINDS]
    if not missing:
        return
    root = model.info.get("tag_root")
    where = f"under the tag root {root}" if root else "anywhere: no folder named 'tags' is above the model"
    print(f"hint: {name}: {len(missing)} Halo tag(s) were not found {where}; name the tags folder that holds"
          " them with --tag-root DIR", file=sys.stderr)


def add_parsers(sub) -> None:
    s = sub.add_parser("inspect", help="show what a model file holds")
    s.add_argument("file", help="the model file (.mdx, .mdl, .model, .gbxmodel), an archive entry"
                                " (maps/x.w3x:path/in/archive.mdx), or an archive (lists its models)")
    s.add_argument("--listfile", metavar="FILE", help="entry names (one a line) for an archive that carries no"
                                                       " (listfile), so its models can be listed")
    s.add_argument("--json", action="store_true", help="print JSON with stable keys")
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    add_render_options(s, only=("assets", "game", "follow_links"), helps={
        "assets": "asset roots where event tables (Splats\\*.slk) are looked for (repeatable)",
        "game": "game data, for the event tables (default: $FARM_GAME_DIR)",
        "follow_links": "read event tables through links out of the folders searched (refused by default)"})
    _add_halo_options(s)
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("convert", help="convert MDX <-> MDL by the output's extension")
    s.add_argument("input", help="the model to read (.mdx or .mdl)")
    s.add_argument("output", help="the file to write; its extension (.mdl or .mdx) picks the format")
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    s.set_defaults(func=cmd_convert)

    s = sub.add_parser("render", help="render frames of a model to PNG or WebP, or one animation (--animate)")
    s.add_argument("model", help="the model file to render, or a model inside an archive:"
                                 " maps/x.w3x:path/in/archive.mdx")
    s.add_argument("-o", "--output", required=True, help="the image to write, .png (trace in a text chunk) or .webp"
                   " (lossless, trace in a .json sidecar): this command's one output; numbered when several times are"
                   " rendered; `-` (or /dev/stdout): a PNG to stdout, everything else to stderr")
    s.add_argument("--sequence", help="sequence name (case-insensitive) or index; default: the first")
    s.add_argument("--time", type=int, help="ms from the sequence start (default: the middle of the sequence)")
    s.add_argument("--times", help="several times in ms, e.g. 0,250,500")
    s.add_argument("--every", type=int, help="render every N ms of the sequence")
    s.add_argument("--animate", action="store_true",
                   help="write the frames as one looping animated image instead of numbered files: .webp (lossless),"
                        " .png (APNG, lossless) or .gif (a lossy preview; a .gif output always animates); each frame"
                        " lasts until the next timestamp (the last one the gap before it); every frame's trace goes in"
                        " the OUTPUT.json sidecar")
    s.add_argument("--fps", type=float, help="with --animate (implies it): each frame lasts 1000/FPS ms instead")
    add_render_options(s, defaults={"size": (512, 512), "camera": None}, helps={"camera": CAMERA_HELP})
    s.add_argument("--wireframe", action="store_true", help="draw the geosets as lines (what farm view's w shows)")
    s.add_argument("--backend", default="auto", choices=("auto", "egl", "osmesa", "glfw"),
                   help="GL backend (default auto: EGL, then OSMesa, then a hidden GLFW window)")
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    _add_halo_options(s)
    s.set_defaults(func=cmd_render)
