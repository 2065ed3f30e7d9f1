"""The command line's render options, made from the table of render settings (farm.settings.RENDER_SETTINGS).

`add_render_options(parser)` adds a flag for each row that has one (its help, its choices, its
check, under the flag's name); a command passes its own defaults where they differ from a job's
(`farm render` draws 512x512 by default). `render_settings(args)` builds the RenderSettings those
flags gave; farm.settings.flag_words spells settings back as these flags (farm view's command line).
"""

from __future__ import annotations

import argparse

from farm.settings import RENDER_SETTINGS, RenderSettings, SettingError

__all__ = ["add_render_options", "render_settings"]


def _type(setting):
    def convert(text: str):
        try:
            return setting.from_text(text, setting.flag)
        except SettingError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = setting.flag.lstrip("-")
    return convert


def _shown(setting, value) -> str:
    return " ".join(setting.text(value)) if value else str(value)


def add_render_options(parser, only: tuple | None = None, defaults: dict | None = None,
                       helps: dict | None = None) -> None:
    """A flag per render setting (those named in `only`, else all), with `defaults` and `helps`
    ({name: ...}) where the command's differ from the table's."""
    defaults, helps = defaults or {}, helps or {}
    for s in RENDER_SETTINGS:
        if s.flag is None or (only is not None and s.name not in only):
            continue
        default = defaults.get(s.name, s.default)
        if s.type is tuple:  # repeatable; the list is checked as one (render_settings)
            kw = {"action": "append", "default": [], "metavar": "DIR|ARCHIVE"}
        elif s.type is bool:  # a switch: the flag alone turns it on
            kw = {"action": "store_true", "default": default}
        elif s.type is str:  # choices, or text checked by render_settings (one sentence, no usage)
            kw = {"default": default, **({"choices": s.choices} if s.choices else {})}
        else:  # numbers and sizes: converted and checked as the command line is read
            kw = {"default": default, "type": _type(s)}
        parser.add_argument(s.flag, help=helps.get(s.name, s.help).format(default=_shown(s, default)), dest=s.name,
                            **kw)


def render_settings(args, **given) -> RenderSettings:
    """The RenderSettings of the flags `add_render_options` added (those it did not add keep the
    table's defaults), each checked under its flag's name (SettingError); `given` ({field: value}) wins."""
    fields = {}
    for s in RENDER_SETTINGS:
        value = getattr(args, s.name, None)
        if s.flag is not None and value is not None:  # None: the command decides later (farm render's camera)
            if s.type is tuple:
                value = s.check(list(value), s.flag) if value else s.default
            elif s.type is str:
                value = s.check(value, s.flag)
            fields.update(s.spread(value))
    return RenderSettings(**{**fields, **given})
