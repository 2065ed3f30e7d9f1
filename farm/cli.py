"""`farm ...` commands: parse arguments, call the layer below, print, exit with a status."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from renderer.errors import FormatError


def _load(path: str, strict: bool = False, **opts):
    from renderer.formats import load_model

    return load_model(path, strict=strict, **opts)


def cmd_inspect(args) -> int:
    from renderer.summary import format_text, summarize

    model = _load(args.file, strict=args.strict)
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


def cmd_demo(args) -> int:
    from renderer.formats import load_model, save_model
    from renderer.samples import write_samples
    from renderer.summary import format_text, summarize

    out = Path(args.out)
    paths = write_samples(out / "models")
    for p in paths:
        model = load_model(p, strict=True)
        print(format_text(summarize(model)))
        mdl = p.with_suffix(".mdl")
        save_model(model, mdl)
        back = load_model(mdl, strict=True)
        same = back == model
        print(f"{p.name} -> {mdl.name} -> model: {'equal' if same else 'DIFFERENT'}\n")
        if not same:
            return 1
    print(f"demo: wrote {len(paths)} sample models and their MDL text under {out / 'models'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="farm", description="Headless render and regression-test farm for game models.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("inspect", help="show what a model file holds")
    s.add_argument("file")
    s.add_argument("--json", action="store_true", help="print JSON with stable keys")
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    s.set_defaults(func=cmd_inspect)

    s = sub.add_parser("convert", help="convert MDX <-> MDL by the output's extension")
    s.add_argument("input")
    s.add_argument("output")
    s.add_argument("--strict", action="store_true", help="treat diagnostics as errors")
    s.set_defaults(func=cmd_convert)

    s = sub.add_parser("demo", help="write the bundled sample models and inspect them")
    s.add_argument("--out", default="demo-out")
    s.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except FormatError as e:
        print(f"error: {e.sentence()}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
