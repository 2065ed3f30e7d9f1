"""A trace's card and its row in the trace list, as HTML, without a template engine.

A report prints one card and one row per trace: at 100k traces, Jinja's per-field work (an
`escape` and a `Markup` for each of about 120 printed values a card) was the largest part of the
report's time. These functions write the very bytes `templates/report.html.j2` wrote for them
before (autoescape, `trim_blocks`, `lstrip_blocks`, `finalize=html_finalize`), each field escaped
once (`_e`: farm.escape.html_finalize, then markupsafe's escape, as Jinja did); the page template
prints their output as it is. `tests/test_report_cards.py` holds them to a Jinja rendering of the
card markup they replace, hostile names included.
"""

from __future__ import annotations

import functools

from markupsafe import Markup, escape

from farm.escape import html_finalize

__all__ = ["card_html", "row_html"]


@functools.lru_cache(maxsize=1 << 14, typed=True)  # typed: a Markup is not the str of the same text
def _e(value) -> str:
    """A value as `{{ value }}` prints it on a report page (finalize, then autoescape); cached, since most
    of a card's values (statuses, models, labels, metric rows, who approved) repeat from card to card."""
    return str(escape(html_finalize(value)))


def _join(items) -> str:
    """`{{ items | join(', ') }}` under autoescape: plain strings joined, then printed as one value."""
    return _e(", ".join(map(str, items)))


def row_html(v: dict, pick: bool) -> str:
    """The trace list's row of card view `v` (`pick`: the serve mode's select column, not in a diff)."""
    key, status = _e(v["key"]), _e(v["status"])
    parts = [f'  <tr class="row group-{_e(v["group"])}" data-key="{key}" data-status="{status}"'
             f' data-model="{_e(v["model"])}" data-target="{_e(v["anchor"])}" tabindex="0">\n']
    if pick:
        parts.append('<td class="pick">' + ('<input type="checkbox" class="select" aria-label="select this trace">'
                                            if v["can_decide"] else "") + "</td>")
    parts.append(f'    <td><span class="badge status-{status}">{_e(v["label"])}</span>')
    if v["blank"]:
        parts.append(f' <span class="badge blank" title="blank frame: {_e(v["blank"])}">blank</span>')
    if v["missing"]:
        parts.append(f' <span class="badge missing" title="missing: {_join(v["missing"])}">missing assets</span>')
    if v["golden_note"]:
        parts.append(f' <span class="badge golden-marked" title="{_e(v["golden_note"])}">marked golden</span>')
    parts.append(f'</td>\n    <td class="key"><code>{key}</code></td>\n    <td class="num">{_e(v["ssim"])}</td>\n'
                 f'    <td class="num">{_e(v["over"])}</td>\n    <td class="thumb">')
    if v["new_src"]:
        parts.append(f'<img class="thumb checker" src="{_e(v["new_src"])}" alt="" width="32" height="32"'
                     f' loading="lazy">')
    parts.append("</td>\n  </tr>\n")
    return "".join(parts)


_VIEW_BUTTONS = """  <div class="view-buttons" role="group" aria-label="view of this trace">
    <button type="button" data-view="side" aria-pressed="true">side by side</button>
    <button type="button" data-view="swap" aria-pressed="false">swap</button>
    <button type="button" data-view="slider" aria-pressed="false">slider</button>
    <button type="button" data-view="onion" aria-pressed="false">onion</button>
  </div>
  <div class="views">
    <div class="view view-side">
"""

_ACTIONS = """  <div class="actions">
    <button type="button" class="approve" data-action="approve">Approve</button>
    <button type="button" class="reject" data-action="reject">Reject</button>
    <label class="env-scope"><input type="checkbox" class="env-only"> only for this environment</label>
    <span class="action-result" role="status"></span>
  </div>
"""


_COLLAPSED = ' data-collapsed="1"'
_OVER = ' class="over-limit"'


def _heading(v: dict, key: str, anchor: str) -> str:
    collapsed = v["collapsed"]
    g, status = _e(v["group"]), _e(v["status"])
    has_golden = 1 if v["golden_src"] and v["new_src"] else 0
    text = (f'<section class="trace group-{g}" id="{anchor}" data-status="{status}" data-group="{g}"'
            f' data-model="{_e(v["model"])}" data-key="{key}" data-view="side" data-has-golden="{has_golden}"'
            f'{_COLLAPSED if collapsed else ""}>\n  <h2>\n'
            f'    <button type="button" class="toggle" aria-expanded="{"false" if collapsed else "true"}"'
            f' aria-label="show or hide this trace">{"+" if collapsed else "−"}</button>\n'
            f'    <span class="badge status-{status}">{_e(v["label"])}'
            f'{" (similar)" if v["match"] == "similar" else ""}</span>\n')
    if v["blank"]:
        text += f'<span class="badge blank" title="blank frame: {_e(v["blank"])}">blank frame</span>'
    text += f'    <a class="key" href="#{anchor}"><code>{key}</code></a>\n  </h2>\n'
    if v["missing"]:
        text += (f'<p class="missing-note">Warning: this frame drew placeholders for {len(v["missing"])} missing'
                 f' asset(s): {_join(v["missing"])}. Approving it needs --allow-missing.</p>')
    if v["blank"]:
        text += (f'<p class="blank-note">Warning: this frame is blank ({_e(v["blank"])}): most likely nothing was'
                 f' drawn. Approving it needs --allow-blank.</p>')
    if v["golden_note"]:
        text += f'<p class="golden-note">Note: {_e(v["golden_note"])} (approved as drawn).</p>'
    if v["reason"]:
        text += f'<p class="reason">{_e(v["reason"])}</p>'
    return text


def _stack(golden: str, new: str, golden_label: str, new_label: str, dims: str) -> str:
    return (f'      <figure><div class="stack checker">\n'
            f'        <img loading="lazy" class="under" src="{golden}" alt="{golden_label}" {dims}>\n'
            f'        <img loading="lazy" class="over" src="{new}" alt="{new_label} frame" {dims}>\n      </div>\n')


def _views(v: dict, new_label: str, golden_label: str) -> str:
    dims = str(v["dims"]) if isinstance(v["dims"], Markup) else _e(v["dims"])
    new = _e(v["new_src"]) if v["new_src"] else ""
    golden = _e(v["golden_src"]) if v["golden_src"] else ""
    text = ('      <figure><div class="frame checker">'
            + (f'<img loading="lazy" src="{new}" alt="{new_label} frame" {dims}>' if new
               else f'<span class="none">no {new_label} frame</span>')
            + f'</div><figcaption>{new_label}</figcaption></figure>\n      <figure><div class="frame checker">'
            + (f'<img loading="lazy" src="{golden}" alt="{golden_label}" {dims}>' if golden
               else f'<span class="none">no {golden_label}</span>')
            + f'</div><figcaption>{golden_label}</figcaption></figure>\n')
    if v["diff_src"]:
        text += (f'<figure><div class="frame"><img loading="lazy" src="{_e(v["diff_src"])}" alt="difference heatmap"'
                 f' {dims}></div><figcaption>difference</figcaption></figure>')
    if v["ssim_src"]:
        text += (f'<figure><div class="frame"><img loading="lazy" src="{_e(v["ssim_src"])}" alt="SSIM map" {dims}>'
                 f'</div><figcaption>SSIM map</figcaption></figure>')
    text += "    </div>\n"
    if v["new_src"] and v["golden_src"]:
        text += ('    <div class="view view-swap">\n      <figure><div class="stack checker swap-area" tabindex="0">\n'
                 f'        <img loading="lazy" class="under" src="{golden}" alt="{golden_label}" {dims}>\n'
                 f'        <img loading="lazy" class="over" src="{new}" alt="{new_label} frame" {dims}>\n'
                 f'      </div><figcaption class="swap-caption">{golden_label} (hover to see the {new_label} frame)'
                 f'</figcaption></figure>\n    </div>\n    <div class="view view-slider">\n'
                 + _stack(golden, new, golden_label, new_label, dims)
                 + f'      <input type="range" class="slider-input" min="0" max="100" value="50" aria-label="slider:'
                   f' {new_label} on the left, {golden_label} on the right">\n      <figcaption>{new_label} left of'
                   f' the line, {golden_label} right of it</figcaption></figure>\n    </div>\n'
                   '    <div class="view view-onion">\n'
                 + _stack(golden, new, golden_label, new_label, dims)
                 + f'      <input type="range" class="onion-input" min="0" max="100" value="50" aria-label="opacity'
                   f' of the {new_label} frame">\n      <figcaption>{new_label} over {golden_label}, opacity from the'
                   f' slider</figcaption></figure>\n    </div>\n')
    else:
        text += ('    <p class="view view-only-one">' + (
            f"Only the {new_label} frame exists; the other views need both images." if v["new_src"]
            else "Nothing to compare.") + "</p>\n")
    return text + "  </div>\n"


def _details(v: dict) -> str:
    if v["metrics"]:
        text = ('  <table class="metrics">\n    <thead><tr><th>metric</th><th>value</th><th>threshold</th></tr>'
                '</thead>\n    <tbody>\n')
        for r in v["metrics"]:
            text += (f'      <tr{_OVER if r["ok"] is False else ""}><td>{_e(r["name"])}</td>'
                     f'<td>{_e(r["value"])}</td><td>{_e(r["limit"])}</td></tr>\n')
        text += "    </tbody>\n  </table>\n"
    else:
        text = f'  <p class="thresholds">thresholds: {_e(v["limits"])}</p>\n'
    if v["facts"]:
        text += ('  <dl class="facts">\n' + "".join(f"<dt>{_e(k)}</dt><dd>{_e(val)}</dd>" for k, val in v["facts"])
                 + "  </dl>\n")
    for verb, cmd in v["commands"]:
        verb = _e(verb)
        text += f'  <p class="command command-{verb}">{verb}: <code class="cmd">{_e(cmd)}</code></p>\n'
    if v["can_decide"]:
        text += _ACTIONS
    return text


def card_html(v: dict, new_label: str, golden_label: str) -> str:
    """The card (a <section>) of view `v` (farm.report.html.build_views); the labels: "new" and "golden",
    or a diff's "head" and "base" (plain words: printed as they are)."""
    key, anchor = _e(v["key"]), _e(v["anchor"])
    return (_heading(v, key, anchor) + _VIEW_BUTTONS + _views(v, new_label, golden_label) + _details(v)
            + "</section>\n")


def strip_heads_html(frames: list[dict]) -> str:
    """A filmstrip's time row: a <th> per frame (farm.report.html._strip_frame's views)."""
    out = []
    for f in frames:
        key, t = _e(f["key"]), _e(f["time"])
        worst, current = f["worst"], f["current"]
        out.append(
            f'<th scope="col" class="strip-col{" worst" if worst else ""}{" current" if current else ""}"'
            f' data-index="{_e(f["index"])}" data-trace="{key}" data-status="{_e(f["status"])}"'
            f' data-label="{_e(f["label"])}" data-time="{t}" data-ssim="{_e(f["ssim"])}"'
            f'{_WORST if worst else ""}'
            + (f' data-golden-src="{_e(f["golden_src"])}"' if f["golden_src"] else "")
            + (f' data-new-src="{_e(f["new_src"])}"' if f["new_src"] else "")
            + (f' data-diff-src="{_e(f["diff_src"])}"' if f["diff_src"] else "")
            + f'><a class="strip-card" href="#{_e(f["anchor"])}" data-trace="{key}" title="open this frame\'s card">'
              f'{t}</a>' + (_WORST_MARK if worst else "") + "</th>")
    return "".join(out)


def strip_cells_html(frames: list[dict], row: str, label: str) -> str:
    """A filmstrip's row of images (`row`: "golden" or "new"; `label` its plain word): a <td> per frame."""
    out = []
    for f in frames:
        src = f["golden_src"] if row == "golden" else f["new_src"]
        status, t = _e(f["status"]), _e(f["time"])
        out.append(
            f'<td class="strip-cell status-{status}{" worst" if f["worst"] else ""}'
            f'{" current" if f["current"] else ""}" data-index="{_e(f["index"])}" data-trace="{_e(f["key"])}"'
            f' data-status="{status}"{_APPROVABLE if row == "new" and f["approvable"] else ""}>'
            + (f'<img class="strip-thumb checker" src="{_e(src)}" alt="{label} at {t}" width="64" height="64"'
               f' loading="lazy">' if src else f'<span class="none">no {label}</span>')
            + f'<span class="badge status-{status}">{_e(f["label"])}</span></td>')
    return "".join(out)


_WORST = ' data-worst="1"'
_WORST_MARK = ' <span class="worst-mark" title="the strip\'s worst frame">worst</span>'
_APPROVABLE = ' data-approvable="1"'
