"""Records described once as a table of MDL properties, read and written by the same table.

A `Spec` lists a record's properties (`Field`s), its bare flag words (`Unshaded,` sets a bit of
the flags word), its enum words (`Omnidirectional,` sets `type` to 0) and, for nodes, the shared
node header (ObjectId, Parent, DontInherit { ... }, Billboarded..., Translation/Rotation/Scaling).

Rules that make MDX -> MDL -> MDX exact:

* An animated property is written as its track (`Alpha 2 { ... }`); its static value is written
  too (`static Alpha 0.5,`) when there is no track or when the value differs from the default the
  reader assumes. Tracks are written in the order of the model's track dict (which is the MDX
  order); when the conventional property order would change that order, the tracks are written
  after the static properties instead, in dict order.
* Flag words name the known bits. When the flags word is not exactly what the words (plus the
  node type bit and implied bits) give back, `Flags <n>` is written as well and, when read,
  replaces the computed value.
* Enum values without a word are written as `<Fallback> <n>` (e.g. `LightType 7`).
* Properties inside sub-blocks (`Particle { ... }` of PREM, `Target { ... }` of a camera) may be
  split over several sub-blocks so that the track order survives; the reader merges them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from renderer import rules
from renderer.model import Track, key_dtype

from .text import Out, fmt_float, ivec, same_bits, vec
from .tokens import Parser, is_number
from .tracks import read_track, write_track

NODE_TRACK_TAGS = frozenset({"KGTR", "KGRT", "KGSC"})
DONT_INHERIT = (
    ("Translation", rules.NODE_FLAG_DONT_INHERIT_TRANSLATION),
    ("Rotation", rules.NODE_FLAG_DONT_INHERIT_ROTATION),
    ("Scaling", rules.NODE_FLAG_DONT_INHERIT_SCALING),
)
NODE_FLAG_WORDS = (
    ("Billboarded", 0x8),
    ("BillboardedLockX", 0x10),
    ("BillboardedLockY", 0x20),
    ("BillboardedLockZ", 0x40),
    ("CameraAnchored", 0x80),
)


@dataclass(frozen=True)
class Field:
    name: str  # MDL keyword
    attr: str | None  # model attribute (None: track only)
    kind: str = "f"  # f i32 u32 u8 vec3 vec4 u32x3 u8x3 str multiple none u32none track visibility
    tag: str | None = None  # track tag when the property can be animated
    block: str | None = None  # sub-block holding the property ("Particle", "Target")
    index: int | None = None  # element of a tuple attribute
    omit_default: bool = False  # leave out when equal to the default
    min_version: int = 0
    max_version: int = 1 << 30
    size: int = 0  # strings: the fixed MDX field size in bytes (the text must be shorter)
    force: Callable | None = None  # obj -> bool: write even when default
    when: Callable | None = None  # (obj, version) -> bool: the static field exists in this record

    def exists(self, obj, version: int) -> bool:
        if self.when is not None:
            return self.when(obj, version)
        return self.min_version <= version <= self.max_version


@dataclass(frozen=True)
class Enum:
    attr: str
    words: dict[int, str]
    fallback: str  # property for values without a word
    write_default: bool = True
    optional_number: bool = False  # `Squirt` or `Squirt 2`


@dataclass
class Spec:
    keyword: str
    cls: type
    fields: tuple[Field, ...] = ()
    node: bool = False
    type_bit: int = 0
    flag_words: tuple[tuple[str, int], ...] = ()
    enums: tuple[Enum, ...] = ()
    flags_attr: str | None = "flags"
    implied: tuple[tuple[int, str], ...] = ()  # (bit, property name): bit set when the property appears
    custom_read: dict[str, Callable] = field(default_factory=dict)  # name -> fn(p, obj, st, static)
    custom_write: Callable | None = None  # fn(obj, version, out, items) appends items after the fields
    named: bool = True
    flags_word: str = "Flags"  # the property that sets the whole flags value
    flags_after: tuple[str, ...] = ()  # write the flag words after these properties (else first)
    ignore_prefix: str | None = None  # properties starting with this take one number and are ignored
    name_attr: str = "name"
    name_size: int = 80
    label: str = ""

    def __post_init__(self):
        self.by_name: dict[tuple[str | None, str], Field] = {(f.block, f.name): f for f in self.fields}
        self.by_tag: dict[str, Field] = {f.tag: f for f in self.fields if f.tag}
        self.blocks = {f.block for f in self.fields if f.block}
        self.words: dict[str, tuple] = {}
        for w, bit in self.flag_words:
            self.words[w] = ("flag", bit)
        if self.node:
            for w, bit in NODE_FLAG_WORDS:
                self.words[w] = ("flag", bit)
        for e in self.enums:
            for v, w in e.words.items():
                self.words[w] = ("enum", e, v)
        self.fallbacks = {e.fallback: e for e in self.enums}
        self.defaults = _defaults(self.cls)
        if not self.label:
            self.label = self.keyword


def _defaults(cls) -> dict:
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    for k, v in list(out.items()):
        if dataclasses.is_dataclass(v):  # sub-records such as extent: "extent.min"
            for sub in dataclasses.fields(v):
                out[f"{k}.{sub.name}"] = getattr(v, sub.name)
    return out


def get_attr(obj, attr: str):
    head, _, tail = attr.partition(".")
    v = getattr(obj, head)
    return getattr(v, tail) if tail else v


def set_attr(obj, attr: str, value) -> None:
    head, _, tail = attr.partition(".")
    if tail:
        setattr(getattr(obj, head), tail, value)
    else:
        setattr(obj, head, value)


NODE_FIELDS = (
    Field("Translation", None, "track", "KGTR"),
    Field("Rotation", None, "track", "KGRT"),
    Field("Scaling", None, "track", "KGSC"),
)


class RecordState:
    """What a record's text said besides plain values: flag words, override, names seen, and what a
    custom reader found for the record's owner to take (`extra`: a 900/1000 layer's shader)."""

    __slots__ = ("bits", "extra", "override", "seen", "version")

    def __init__(self, version: int = 800):
        self.version = version
        self.bits = 0
        self.override: int | None = None
        self.seen: set[str] = set()
        self.extra: dict[str, object] = {}


# -- reading ----------------------------------------------------------------------------------
def read_record(p: Parser, spec: Spec, obj, version: int) -> RecordState:
    """Read `{ ... }` of one record into obj (the cursor is on '{')."""
    st = RecordState(version)
    _read_block(p, spec, obj, st, None)
    if spec.flags_attr is not None:
        if st.override is not None:
            flags = st.override
        else:
            flags = spec.type_bit | st.bits
            for bit, name in spec.implied:
                if name in st.seen:
                    flags |= bit
        setattr(obj, spec.flags_attr, flags)
    return st


def _read_block(p: Parser, spec: Spec, obj, st: RecordState, block: str | None) -> None:
    p.expect("{", "'{'")
    while True:
        at = p.i
        tok = p.next("a property or '}'")
        if tok == "}":
            return
        static = tok == "static"
        if static:
            tok = p.ident("a property name after 'static'")
        if not (tok[0].isalpha() or tok[0] == "_"):
            raise p.unexpected(f"a property of {spec.label} or '}}'", at)
        fn = spec.custom_read.get(tok) if block is None else None
        if fn is not None:
            st.seen.add(tok)
            fn(p, obj, st, static)
            continue
        f = spec.by_name.get((block, tok))
        if f is None and spec.node and block is None:
            f = _node_field(tok)
        if f is not None:
            st.seen.add(tok)
            _read_field(p, spec, obj, f, static, st)
            continue
        if static:
            raise p.error(f"{tok!r} is not a property of {spec.label}", at + 1)
        if block is None and tok in spec.blocks:
            _read_block(p, spec, obj, st, tok)
            continue
        if block is None and _read_word(p, spec, obj, st, tok):
            continue
        if spec.ignore_prefix and tok.startswith(spec.ignore_prefix):
            p.integer(f"the value of {tok}")
            continue
        raise p.error(f"{tok!r} is not a property of {spec.label}" + (f" {block}" if block else ""), at)


_NODE_BY_NAME = {f.name: f for f in NODE_FIELDS}


def _node_field(tok: str) -> Field | None:
    return _NODE_BY_NAME.get(tok)


def _read_word(p: Parser, spec: Spec, obj, st: RecordState, tok: str) -> bool:
    w = spec.words.get(tok)
    if w is not None:
        if w[0] == "flag":
            st.bits |= w[1]
        else:
            e: Enum = w[1]
            v = w[2]
            if e.optional_number and is_number(p.peek()):
                v = p.u32(f"the value of {tok}")
            setattr(obj, e.attr, v)
        st.seen.add(tok)
        return True
    e = spec.fallbacks.get(tok)
    if e is not None:
        setattr(obj, e.attr, p.u32(f"the value of {tok}"))
        return True
    if tok == spec.flags_word and spec.flags_attr is not None:
        st.override = p.u32("the flags value")
        return True
    if spec.node:
        if tok == "ObjectId":
            obj.object_id = p.u32("an object id")
            st.seen.add(tok)
            return True
        if tok == "Parent":
            obj.parent_id = p.i32("a parent object id")
            return True
        if tok == "DontInherit":
            p.expect("{", "'{' after DontInherit")
            words = dict(DONT_INHERIT)
            while not p.accept("}"):
                w = p.ident("Translation, Rotation or Scaling")
                if w not in words:
                    raise p.error(f"DontInherit takes Translation, Rotation or Scaling, not {w!r}", p.i - 1)
                st.bits |= words[w]
            return True
    return False


def _tracks_of(obj, tag: str) -> dict:
    return obj.node_tracks if tag in NODE_TRACK_TAGS else obj.tracks


def _read_field(p: Parser, spec: Spec, obj, f: Field, static: bool, st: RecordState) -> None:
    at = p.i - 1
    if f.tag is not None and not static and is_number(p.peek()) and p.peek(1) == "{":
        tracks = _tracks_of(obj, f.tag)
        if f.tag in tracks:
            raise p.error(f"{f.name} is animated twice", at)
        tracks[f.tag] = read_track(p, f.tag, f.name)
        return
    if f.kind == "track":
        if static:
            raise p.error(f"{f.name} has no static form; write {f.name} <keys> {{ <interpolation>, <frame>: "
                          "<value>, ... }", at)
        raise p.unexpected(f"the key count of {f.name}")
    if f.kind == "visibility":
        v = p.float32("a visibility value")
        if v != 1.0:
            keys = np.zeros(1, key_dtype(f.tag, 0))
            keys["value"] = v
            tracks = _tracks_of(obj, f.tag)
            tracks.setdefault(f.tag, Track(f.tag, 0, -1, keys))
            p.diag(f"static {f.name} {v} has no MDX field; kept as a one-key track", at)
        else:
            p.diag(f"static {f.name} 1 has no MDX field; ignored", at)
        return
    v = read_value(p, f)
    if f.index is not None:
        cur = list(get_attr(obj, f.attr))
        cur[f.index] = v
        v = tuple(cur)
    set_attr(obj, f.attr, v)


def read_value(p: Parser, f: Field):
    k = f.kind
    what = f"the value of {f.name}"
    if k == "f":
        return p.float32(what)
    if k == "u32":
        return p.u32(what)
    if k == "i32":
        return p.i32(what)
    if k == "u8":
        return p.u8(what)
    if k == "vec3":
        return p.vector(3, f.name)
    if k == "vec4":
        return p.vector(4, f.name)
    if k == "u32x3":
        return p.int_vector(3, f.name, p.u32)
    if k == "u32x2":
        return p.int_vector(2, f.name, p.u32)
    if k == "u8x3":
        return p.int_vector(3, f.name, p.u8)
    if k == "str":
        s = p.string(f"a quoted string for {f.name}")
        check_size(p, s, f.size, f.name)
        return s
    if k in ("multiple", "none", "u32none"):
        t = p.peek()
        if t in ("Multiple", "None"):
            p.i += 1
            return 0xFFFFFFFF if k == "u32none" else -1
        return p.u32(what) if k == "u32none" else p.i32(what)
    if k == "filter":
        t = p.peek()
        if t in LAYER_FILTERS:
            p.i += 1
            return LAYER_FILTERS[t]
        return p.u32(f"a filter mode ({', '.join(rules.LAYER_FILTER_MODES)} or a number)")
    raise AssertionError(k)


LAYER_FILTERS = {w: i for i, w in enumerate(rules.LAYER_FILTER_MODES)}


def check_size(p: Parser, s: str, size: int, what: str, at: int | None = None) -> None:
    if size:
        n = len(s.encode("utf-8", "surrogateescape"))
        if n >= size:
            raise p.error(f"{what} is {n} bytes long; the MDX field holds at most {size - 1}",
                          p.i - 1 if at is None else at)


# -- writing ----------------------------------------------------------------------------------
class TrackItem:
    __slots__ = ("name", "track", "tag")

    def __init__(self, name: str, tag: str, track: Track):
        self.name, self.tag, self.track = name, tag, track


def write_value(out: Out, f: Field, v) -> str:
    k = f.kind
    if k == "f":
        return fmt_float(v)
    if k in ("u32", "i32", "u8"):
        return str(int(v))
    if k in ("vec3", "vec4"):
        return vec(v)
    if k in ("u32x3", "u8x3", "u32x2"):
        return ivec(v)
    if k == "str":
        return out.quote(v, f.name)
    if k == "multiple":
        return "Multiple" if v == -1 else str(int(v))
    if k == "none":
        return "None" if v == -1 else str(int(v))
    if k == "u32none":
        return "None" if v in (-1, 0xFFFFFFFF) else str(int(v))
    if k == "filter":
        return rules.LAYER_FILTER_MODES[v] if 0 <= v < len(rules.LAYER_FILTER_MODES) else str(int(v))
    raise AssertionError(k)


def field_items(out: Out, spec: Spec, obj, version: int, fields=None) -> list:
    """(block, item) pairs for the record's fields and tracks, in the conventional order."""
    items: list = []
    tracks = getattr(obj, "tracks", {})
    for f in spec.fields if fields is None else fields:
        t = tracks.get(f.tag) if f.tag else None
        if f.attr is None or f.kind in ("track", "visibility"):
            if t is not None:
                items.append((f.block, TrackItem(f.name, f.tag, t)))
            continue
        v = get_attr(obj, f.attr)
        d = spec.defaults.get(f.attr)
        if f.index is not None:
            v, d = v[f.index], (None if d is None else d[f.index])
        is_default = d is not None and same_bits(v, d)
        prefix = "static " if f.tag else ""
        if f.exists(obj, version):
            if t is not None:
                if not is_default:
                    items.append((f.block, f"{prefix}{f.name} {write_value(out, f, v)},"))
            elif not (f.omit_default and is_default) or (f.force is not None and f.force(obj)):
                items.append((f.block, f"{prefix}{f.name} {write_value(out, f, v)},"))
        elif not is_default:  # not part of this version's MDX record, but the model holds it
            items.append((f.block, f"{prefix}{f.name} {write_value(out, f, v)},"))
        if t is not None:
            items.append((f.block, TrackItem(f.name, f.tag, t)))
    return items


def order_tracks(out: Out, spec: Spec, items: list, tracks: dict, where: str) -> list:
    """Keep the dict order of tracks: if the conventional order changes it, move tracks last."""
    got = [it.tag for _, it in items if isinstance(it, TrackItem)]
    want = [t for t in tracks if t in spec.by_tag]
    for t in tracks:
        if t not in spec.by_tag:
            out.diag(where, f"track {t} is not a property of {spec.label} in MDL; not written")
    if got == want:
        return items
    kept = [(b, it) for b, it in items if not isinstance(it, TrackItem)]
    for t in want:
        f = spec.by_tag[t]
        kept.append((f.block, TrackItem(f.name, t, tracks[t])))
    return kept


def flag_items(out: Out, spec: Spec, obj, emitted: set[str]) -> list:
    """Flag words, DontInherit, and `Flags n` when the words do not give the flags back."""
    if spec.flags_attr is None:
        return []
    actual = int(getattr(obj, spec.flags_attr))
    items: list = []
    named = 0
    for w, bit in spec.flag_words + (NODE_FLAG_WORDS if spec.node else ()):
        if actual & bit and not named & bit:
            items.append((None, f"{w},"))
            named |= bit
    if spec.node:
        dont = [w for w, bit in DONT_INHERIT if actual & bit]
        if dont:
            items.append((None, "DontInherit { " + ", ".join(dont) + " },"))
            for w, bit in DONT_INHERIT:
                if w in dont:
                    named |= bit
    computed = spec.type_bit | named
    for bit, name in spec.implied:
        if name in emitted:
            computed |= bit
    if computed != actual:
        items.append((None, f"{spec.flags_word} {actual},"))
    return items


def enum_items(spec: Spec, obj) -> list:
    items = []
    for e in spec.enums:
        v = getattr(obj, e.attr)
        d = spec.defaults.get(e.attr)
        if v in e.words:
            if e.write_default or v != d:
                items.append((None, f"{e.words[v]},"))
        elif e.optional_number and e.words:
            if v != d:
                items.append((None, f"{next(iter(e.words.values()))} {int(v)},"))
        else:
            items.append((None, f"{e.fallback} {int(v)},"))
    return items


def emitted_names(items: list) -> set[str]:
    names = set()
    for _, it in items:
        if isinstance(it, TrackItem):
            names.add(it.name)
        elif isinstance(it, str):
            w = it.split(" ", 2)
            names.add(w[1] if w[0] == "static" and len(w) > 1 else w[0].rstrip(","))
    return names


def emit(out: Out, items: list) -> None:
    k = 0
    while k < len(items):
        block = items[k][0]
        if block is not None:
            out.open(block)
        while k < len(items) and items[k][0] == block:
            it = items[k][1]
            if isinstance(it, str):
                out.line(it)
            elif isinstance(it, TrackItem):
                write_track(out, it.name, it.track)
            else:
                it(out)
            k += 1
        if block is not None:
            out.close()


def write_record(out: Out, spec: Spec, obj, version: int, where: str) -> None:
    head = f"{spec.keyword} {out.quote(getattr(obj, spec.name_attr), spec.keyword)}" if spec.named else spec.keyword
    out.open(head)
    items: list = []
    if spec.node:
        items.append((None, f"ObjectId {int(obj.object_id)},"))
        if obj.parent_id != -1:
            items.append((None, f"Parent {int(obj.parent_id)},"))
    body = enum_items(spec, obj)
    body += field_items(out, spec, obj, version)
    if spec.custom_write is not None:
        spec.custom_write(obj, version, out, body)
    body = order_tracks(out, spec, body, getattr(obj, "tracks", {}), where)
    flags = flag_items(out, spec, obj, emitted_names(body))
    at = 0
    if spec.flags_after:
        for k, (_, it) in enumerate(body):
            if isinstance(it, str) and it.split(" ", 1)[0] in spec.flags_after:
                at = k + 1
    items += body[:at] + flags + body[at:]
    if spec.node:
        for tag, t in obj.node_tracks.items():
            f = next((f for f in NODE_FIELDS if f.tag == tag), None)
            if f is None:
                out.diag(where, f"node track {tag} has no MDL name; not written")
                continue
            items.append((None, TrackItem(f.name, tag, t)))
    emit(out, items)
    out.close()


def read_named(p: Parser, spec: Spec, version: int, index: int):
    """`Keyword ["name"] { ... }` after the keyword: a new record and what its text said."""
    obj = spec.cls()
    if spec.named:
        at = p.i
        name = p.string(f"the name of the {spec.label}")
        check_size(p, name, spec.name_size, f"{spec.label} name", at)
        setattr(obj, spec.name_attr, name)
        p.where.append(f'{spec.keyword} {index} "{name}"')
    else:
        p.where.append(f"{spec.keyword} {index}")
    st = read_record(p, spec, obj, version)
    p.where.pop()
    return obj, st
