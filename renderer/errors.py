"""The one error type every loader raises, and the diagnostics loaders attach to what they load.

A `FormatError` names the file, the place (chunk, record or block), the byte offset and the
problem, so a user can find the bad bytes without a debugger. Recoverable oddities are
`Diagnostic`s on the loaded object instead; `strict` loading turns them into errors.
"""

from __future__ import annotations

from dataclasses import dataclass


class FormatError(Exception):
    """Bad input: names the file, where in it, the byte offset and what was wrong."""

    def __init__(self, path: str, where: str, offset: int | None, problem: str, unit: str = "byte"):
        self.path = str(path)
        self.where = where
        self.offset = offset
        self.problem = problem
        self.unit = unit  # "byte" for binary formats, "character" for text (MDL)
        super().__init__(self.sentence())

    def __reduce__(self):  # survive pickling across processes (farm workers)
        return (FormatError, (self.path, self.where, self.offset, self.problem, self.unit))

    def sentence(self) -> str:
        at = f" at {self.unit} {self.offset}" if self.offset is not None else ""
        place = f" {self.where}" if self.where else ""
        if not (place or at):  # a problem of the whole file: "path: problem", not "path:: problem"
            return f"{self.path}: {self.problem}"
        return f"{self.path}:{place}{at}: {self.problem}"


@dataclass(frozen=True)
class Diagnostic:
    """A recoverable problem found while loading; kept on the loaded object."""

    where: str
    offset: int | None
    message: str
    unit: str = "byte"

    def sentence(self, path: str = "") -> str:
        at = f" at {self.unit} {self.offset}" if self.offset is not None else ""
        head = f"{path}: " if path else ""
        return f"{head}{self.where}{at}: {self.message}"

    def as_dict(self) -> dict:
        return {"where": self.where, "offset": self.offset, "unit": self.unit, "message": self.message}


def error_text(e: BaseException) -> str:
    """An exception as one sentence: our errors' own `sentence()`, else "Type: message"."""
    sentence = getattr(e, "sentence", None)
    if callable(sentence):
        try:
            return sentence()
        except Exception as inner:  # noqa: BLE001 - a failing sentence must not hide the error it words
            return f"{type(e).__name__}: {e} (its sentence() failed: {type(inner).__name__}: {inner})"
    return f"{type(e).__name__}: {e}"
