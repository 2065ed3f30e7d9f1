"""The argument parser of `farm`: argparse with the nearest option or command named on a typo.

argparse (before Python 3.14's ``suggest_on_error``) answers ``farm render m.mdx --seqence Walk``
with "unrecognized arguments" and nothing else, and the top-level parser reports it, with the
top-level usage. `FarmParser` reports an unknown option from the command's own parser, with the
command's usage and the nearest of its options (``difflib``), and adds the nearest command to
argparse's "invalid choice" error.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys

__all__ = ["FarmParser", "nearest"]


def nearest(word: str, choices, n: int = 1) -> list[str]:
    """The `n` choices closest to `word`, best first (none when nothing is close)."""
    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)


def _hint(word: str, choices) -> str:
    close = nearest(word, choices)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


class FarmParser(argparse.ArgumentParser):
    def _options(self) -> list[str]:
        return [s for a in self._actions for s in a.option_strings if s.startswith("--")]

    def _command_parser(self, namespace) -> argparse.ArgumentParser:
        """The parser of the command `namespace` ran (self when there is none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = getattr(namespace, action.dest, None)
                if chosen in action.choices:
                    return action.choices[chosen]
        return self

    def parse_args(self, args=None, namespace=None):
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._command_parser(namespace)
            options = parser._options()
            hints = "".join(_hint(e.split("=", 1)[0], options) for e in extras if e.startswith("--"))
            parser.error(f"unrecognized arguments: {' '.join(extras)}{hints}")
        return namespace

    def error(self, message: str):
        if "invalid choice: " in message and "(choose from " in message:  # argparse's words, any argument
            said, listed = message.split("invalid choice: ", 1)[1].split("(choose from ", 1)
            message += _hint(said.strip(" '"), re.findall(r"'([^']*)'", listed))
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")
