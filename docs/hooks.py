"""MkDocs hooks for the opendml site (mkdocs.yml: ``hooks``).

The API reference places each public name on a topic page with a
``::: opendml.NAME`` line. A name added to ``opendml.__all__`` that no page
places yet is still rendered: the reference index carries ``MARKER``, which
becomes a "More public names" section with those names, so the reference
never lacks a public name (``tests/test_docs.py`` checks the same list).
"""
from __future__ import annotations

import pathlib
import re

REFERENCE = pathlib.Path(__file__).resolve().parent / "reference"
MARKER = "<!-- public names placed on no other reference page -->"


def public_names() -> list[str]:
    import opendml
    return [n for n in (*opendml.__all__, "slice") if n != "__version__"]


def placed_names() -> set[str]:
    text = "\n".join(p.read_text(encoding="utf-8") for p in REFERENCE.glob("*.md"))
    return set(re.findall(r"^::: opendml\.(\w+)\s*$", text, re.M))


def unplaced_names() -> list[str]:
    placed = placed_names()
    return [n for n in public_names() if n not in placed]


def on_page_markdown(markdown, page, config, files):
    if MARKER not in markdown:
        return markdown
    names = unplaced_names()
    section = ("## More public names\n\nNames of `opendml.__all__` not yet placed on a topic page.\n\n"
               + "\n\n".join(f"::: opendml.{n}" for n in names)) if names else ""
    return markdown.replace(MARKER, section)
