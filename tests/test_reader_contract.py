"""One reader signature (issue 35 item 7): every format is one row of renderer.formats.FORMATS, and
its reader takes `(data, name, *, strict, resolver, its own options)`: a resolver is accepted by
every reader (no special case), an option a reader does not have is refused (never swallowed), and
a model read through the table comes with a context saying where it came from and the digest of its
bytes (renderer.context)."""

from __future__ import annotations

import hashlib
import inspect

import pytest

from renderer.formats import FORMATS, MAGIC, READERS, WRITERS, _resolve, load, load_model, read_model
from renderer.formats.mdl import write_mdl
from renderer.samples import write_samples


def test_the_tables_come_from_one_row_per_format():
    assert set(READERS) == {ext for f in FORMATS for ext in f.extensions}
    assert set(WRITERS) <= set(READERS) and MAGIC == {b"MDLX": ".mdx"}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.extensions[0])
def test_every_reader_has_the_one_signature(fmt):
    params = inspect.signature(_resolve(fmt.reader)).parameters
    positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    assert len(positional) == 2  # data, name
    for name in ("strict", "resolver"):
        assert params[name].kind == inspect.Parameter.KEYWORD_ONLY
    assert not any(p.kind == p.VAR_KEYWORD for p in params.values())  # nothing swallowed


def test_an_unknown_option_is_refused_and_a_resolver_is_accepted(tmp_path):
    write_samples(tmp_path)
    data = (tmp_path / "crate.mdx").read_bytes()
    with pytest.raises(TypeError):
        read_model(data, "crate.mdx", lod="high")  # a Halo option, not an MDX one
    model = read_model(data, "crate.mdx", resolver=object())
    mdl = write_mdl(model).encode()
    with pytest.raises(TypeError):
        read_model(mdl, "crate.mdl", permutation=1)
    assert read_model(mdl, "crate.mdl", resolver=object()) is not None


def test_a_loaded_file_carries_its_location_and_digest(tmp_path):
    write_samples(tmp_path)
    path = tmp_path / "crate.mdx"
    model, context = load(path)
    assert context.location.digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert context.location.folder == tmp_path and context.location.archive is None
    assert context.texture_source is None and context.pins is None
    assert load_model(path) == model


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.loader], ids=lambda f: f.extensions[0])
def test_a_loader_has_its_reader_s_signature(fmt):
    """A format whose reader finds its textures while it loads has a loader with the same parameters
    (it returns the model and its texture source: renderer.context)."""
    assert inspect.signature(_resolve(fmt.loader)).parameters == inspect.signature(_resolve(fmt.reader)).parameters
