"""`farm view MODEL`: the interactive preview window (farm/view). Also `python -m farm.cli.view MODEL`."""

from __future__ import annotations

import sys

from farm.cli.common import UsageError, load_model_arg
from farm.cli.options import add_render_options, render_settings
from farm.view.state import ViewState, parse_script, script_help
from renderer.errors import FormatError

__all__ = ["EXAMPLES", "add_parsers", "main"]

EXAMPLES = {"view": [
    "farm view maps/keep.w3x/war3mapImported/Footman.mdx",
    "farm view Ghost.mdx --size 800x600 --assets ../textures",
    'farm view crate.mdx --hidden --script "orbit 30 0; key s; quit"   # a scripted session: save one frame',
]}

KEYS_HELP = ("mouse: left drag orbit, right drag pan, wheel zoom; keys: [ ] or 1-9 sequence, space play/pause, "
             "left/right scrub, t team colour, b background, w wireframe, m missing-texture placeholder, l model "
             "lights, e event visuals, r reset camera, s save the frame (prints the farm render command), q quit")


def cmd_view(args) -> int:
    try:
        script = parse_script(args.script) if args.script is not None else None
    except ValueError as e:
        raise UsageError(f"--script: {e}") from None
    model, context = load_model_arg(args.model)
    render = render_settings(args)
    state = ViewState.for_model(model, args.model, width=render.width, height=render.height, render=render)
    from farm.view.window import ViewWindow  # noqa: PLC0415 - glfw and a window only for this command

    try:
        window = ViewWindow(state, model, out_dir=args.out, backend=args.backend, visible=not args.hidden,
                            context=context)
    except Exception as e:  # noqa: BLE001 - no display, no libglfw, no GL: one sentence
        raise UsageError(f"cannot open a window: {e}") from None
    if script is None:
        print(KEYS_HELP, file=sys.stderr)
    window.run(script)
    return 0


def add_parsers(sub) -> None:
    s = sub.add_parser("view", help="interactive preview window (glfw; needs a display)",
                       description=KEYS_HELP + "\n\n" + script_help())
    s.add_argument("model", help="model file (.mdx, .mdl, .model, .gbxmodel) or ARCHIVE:ENTRY")
    add_render_options(s, only=("size", "assets", "lighting"), defaults={"size": (512, 512)},
                       helps={"size": "WxH of the frame and window, default {default}"})
    s.add_argument("--out", default=".", help="folder for frames saved with s (default: the current folder)")
    s.add_argument("--script", help='steps instead of a user, e.g. "orbit 30 0; key s; quit" (every step: see'
                                    " above)")
    s.add_argument("--hidden", action="store_true", help="do not show the window (scripts)")
    s.add_argument("--backend", default="auto", choices=("auto", "egl", "osmesa"), help="the offscreen renderer's")
    s.set_defaults(func=cmd_view)


def main(argv: list[str] | None = None) -> int:
    """`python -m farm.cli.view ...`: `farm view ...` on its own (the same parser and command)."""
    import argparse  # noqa: PLC0415 - only this stand-alone entry needs its own parser

    p = argparse.ArgumentParser(prog="farm")
    add_parsers(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["view", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except FormatError as e:
        print(f"error: {e.sentence()}", file=sys.stderr)
        return 2
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
