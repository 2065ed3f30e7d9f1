"""index.json (for other tools) and index.html (a searchable grid) of a thumbnail folder.

index.json has stable keys: ``format``, ``options``, ``counts``, ``sheets`` and ``models``, a list
in discovery order whose entries all have the keys of ENTRY_KEYS (null where a failed model has no
value). It holds no times, so an unchanged folder gives the same bytes run after run. Its layout is
farm.files.json_wide_bytes': each top-level member on a line, each model's entry on a line of its
own (compact, by the C encoder: the indented pure-Python layout cost a third of the coordinator's
CPU on 2,000 one-frame thumbnails).

index.html is one static page: a filter box (every word typed must appear in a tile's name, file,
path, sequence, format or error; case-insensitive), a "failed only" switch and a grid. The script
reads only the page's own attributes; every string from a model or a path goes through Jinja2's
autoescaping, and image URLs are percent-encoded first, so names with < > & " ' # % or spaces are
shown as text and still load. A model with an animated thumbnail (`farm thumbnails --animated`)
plays it while the pointer is over its tile (the still is the poster, shown otherwise).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import jinja2

from farm.escape import html_finalize
from farm.files import atomic_write, encoded, json_wide_encoded
from farm.thumbs.sheets import short_error

__all__ = ["ENTRY_KEYS", "FORMAT", "html_chunks", "render_html", "write_index"]

FORMAT = "modelfarm.thumbnails/1"
ENTRY_KEYS = (
    "id", "root", "path", "file", "name", "model_format", "status", "error", "cause", "thumbnail", "sidecar",
    "digest_thumbnail", "image_sha256",
    "sha256", "sequence", "sequence_index", "sequence_rule", "time_ms", "sequences", "geosets", "vertices",
    "triangles", "camera_source", "diagnostic_count", "diagnostics", "sheet", "missing", "blank",
    "animation", "animation_sidecar", "animation_sha256",
)

TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
  body { font: 14px/1.35 system-ui, sans-serif; margin: 0; background: #1b1b1b; color: #e6e6e6; }
  header { position: sticky; top: 0; background: #262626; padding: 10px 16px; display: flex; gap: 16px;
           align-items: center; flex-wrap: wrap; border-bottom: 1px solid #333; z-index: 1; }
  header h1 { font-size: 16px; margin: 0; }
  input[type=search] { font: inherit; padding: 4px 8px; width: 28em; max-width: 90vw; }
  .count, .sheets { color: #aaa; }
  .sheets a { color: #9cf; margin-right: 6px; }
  .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax({{ tile }}px, 1fr)); gap: 12px;
          padding: 16px; }
  figure { margin: 0; background: #262626; border-radius: 4px; overflow: hidden; }
  figure img, figure .placeholder { display: block; width: 100%; aspect-ratio: 1; object-fit: contain;
          background: #3a3a3a; }
  figure .placeholder { background: #601818; color: #fdd; font-size: 12px; padding: 8px; box-sizing: border-box;
          overflow: auto; word-break: break-word; }
  figcaption { padding: 6px 8px; }
  figcaption .file { font-weight: 600; word-break: break-all; }
  figcaption .path, figcaption .facts { color: #aaa; font-size: 12px; word-break: break-all; }
  figure.failed figcaption .facts { color: #f99; }
  [hidden] { display: none !important; }
  .tile.missing { outline: 2px solid #d9a400; }
  .missing-assets { color: #d9a400; font-size: 11px; }
</style>
</head>
<body>
<header>
  <h1>{{ title }}</h1>
  <input id="filter" type="search" placeholder="filter: name, path, sequence, error" autocomplete="off" autofocus>
  <label><input id="failed-only" type="checkbox"> failed only</label>
  <span class="count" id="count">{{ counts["models"] }} models, {{ counts["failed"] }} failed</span>
  {% if sheets %}<span class="sheets">sheets: {% for s in sheets %}<a href="{{ s["url"] }}">{{ loop.index }}</a>
  {% endfor %}</span>{% endif %}
</header>
<main class="grid" id="grid">
{% for m in models %}{% set missing = m["missing"] %}
<figure class="tile{% if m["status"] != 'done' %} failed{% endif %}{% if m["missing"] %} missing{% endif %}"
  data-search="{{ m["search"] }}">
  {% if m["url"] %}<a href="{{ m["url"] }}"><img loading="lazy" src="{{ m["url"] }}" alt="{{ m["file"] }}"
    width="{{ size }}" height="{{ size }}"{% if m["anim_url"] %} data-poster="{{ m["url"] }}"
    data-animation="{{ m["anim_url"] }}"{% endif %}></a>
  {% else %}<div class="placeholder" title="{{ m["error"] }}">failed: {{ m["short_error"] }}</div>{% endif %}
  <figcaption>
    <div class="file" title="{{ m["id"] }}">{{ m["file"] }}</div>
    {% if m["name"] %}<div class="path">model {{ m["name"] }}</div>{% endif %}
    <div class="path">{{ m["id"] }}</div>
    {% if missing %}<div class="missing-assets" title="{{ missing | join(', ') }}">&#9888; {{ missing | length }}
      missing asset(s): {{ missing[:3] | join(', ') }}{% if missing | length > 3 %} ...{% endif %}</div>{% endif %}
    {% if m["blank"] %}<div class="missing-assets" title="{{ m["blank"] }}">&#9888; blank: nothing is drawn at this
      time</div>{% endif %}
    <div class="facts">{% if m["status"] == 'done' %}{{ m["sequence"] if m["sequence"] is not none else '(bind pose)' }}
      {%- if m["time_ms"] is not none %} at {{ m["time_ms"] }} ms{% endif %} &middot; {{ m["vertices"] }} vertices
      &middot; {{ m["triangles"] }} triangles{% if m["diagnostic_count"] %} &middot; {{ m["diagnostic_count"] }}
      diagnostics{% endif %}{% else %}failed{% endif %}</div>
  </figcaption>
</figure>
{% endfor %}
</main>
<script>
(function () {
  var box = document.getElementById("filter"), failedOnly = document.getElementById("failed-only");
  var count = document.getElementById("count");
  var tiles = Array.prototype.slice.call(document.querySelectorAll("#grid .tile"));
  function apply() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean), shown = 0;
    tiles.forEach(function (t) {
      var text = t.getAttribute("data-search");
      var ok = words.every(function (w) { return text.indexOf(w) >= 0; }) &&
               (!failedOnly.checked || t.classList.contains("failed"));
      t.hidden = !ok;
      if (ok) shown++;
    });
    count.textContent = shown + " of " + tiles.length + " models";
  }
  box.addEventListener("input", apply);
  failedOnly.addEventListener("change", apply);
  if (box.value || failedOnly.checked) apply();
  tiles.forEach(function (t) {  // an animated thumbnail plays while the pointer is over its tile
    var img = t.querySelector("img[data-animation]");
    if (!img) return;
    t.addEventListener("mouseenter", function () { img.src = img.getAttribute("data-animation"); });
    t.addEventListener("mouseleave", function () { img.src = img.getAttribute("data-poster"); });
  });
})();
</script>
</body>
</html>
"""

_env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                          finalize=html_finalize)
_template = _env.from_string(TEMPLATE)


def _url(rel: str, version: str | None = None) -> str:
    url = quote(rel, safe="/")
    return f"{url}?v={version[:12]}" if version else url


def _tiles(doc: dict):
    """Each model's tile: its entry and what the page shows of it (made as the page is written, one at
    a time, not a second list of every entry)."""
    for e in doc["models"]:
        search = " ".join(str(e.get(k) or "") for k in ("file", "name", "id", "sequence", "model_format", "error"))
        search += " missing" if e.get("missing") else ""
        search += " blank" if e.get("blank") else ""
        yield {**e, "url": _url(e["thumbnail"], e.get("image_sha256")) if e.get("thumbnail") else None,
               "anim_url": _url(e["animation"], e.get("animation_sha256")) if e.get("animation") else None,
               "search": " ".join(search.lower().split()),
               "short_error": "" if e.get("thumbnail") else short_error(e)}  # shown for a tile without one


def html_chunks(doc: dict, title: str = "Thumbnails"):
    """index.html's text in pieces (about 64 KiB each), as the template makes it."""
    sheets = [{"url": _url(s)} for s in doc.get("sheets", [])]
    pieces, size = [], 0
    for piece in _template.generate(title=title, models=_tiles(doc), sheets=sheets, counts=doc["counts"],
                                    size=doc["options"]["size"], tile=min(int(doc["options"]["size"]), 256)):
        pieces.append(piece)
        size += len(piece)
        if size >= 1 << 16:
            yield "".join(pieces)
            pieces, size = [], 0
    yield "".join(pieces)


def render_html(doc: dict, title: str = "Thumbnails") -> str:
    return "".join(html_chunks(doc, title))


def write_index(out: Path, doc: dict, tmp_dir: Path, title: str = "Thumbnails") -> None:
    """index.json and index.html, each written in pieces (never one string of every model)."""
    atomic_write(out / "index.json", json_wide_encoded(doc, "models"), tmp_dir)  # a model a line, C-encoded
    # Names from bytes that are not UTF-8 (os.fsdecode's surrogates) show as \udcXX escapes
    atomic_write(out / "index.html", encoded(html_chunks(doc, title)), tmp_dir)
