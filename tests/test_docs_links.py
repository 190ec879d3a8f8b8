"""Every relative link in README.md and docs/ leads somewhere: the file exists, and an anchor
(``#section``) names a heading of the target, as GitHub forms it (lowercase, spaces to '-',
punctuation dropped, a repeat suffixed -1, -2, ...). External links (http, mailto) are not followed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: markup and punctuation dropped, lowercase, spaces to '-'."""
    text = re.sub(r"<[^>]+>", "", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)  # keeps letters, digits, '_', '-' and spaces
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    out: set[str] = set()
    counts: dict[str, int] = {}
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        match = re.match(r"#{1,6} (.*)", line)
        if match:
            base = slug(match.group(1))
            n = counts.get(base, 0)
            out.add(base if n == 0 else f"{base}-{n}")
            counts[base] = n + 1
    return out


def links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)
    return LINK.findall(text)


def test_slug_is_githubs():
    assert slug("Event time, late data, exactly-once") == "event-time-late-data-exactly-once"
    assert slug("The layers of `include/sda`") == "the-layers-of-includesda"
    assert slug("What `make run` starts") == "what-make-run-starts"
    assert slug("The conjunction stage at 13,000 objects") == "the-conjunction-stage-at-13000-objects"
    assert slug("A task's start") == "a-tasks-start"
    assert anchors("# A\n## B\n## B\n```\n# not a heading\n```\n") == {"a", "b", "b-1"}


def test_links_finds_relative_and_skips_code():
    text = "[a](docs/x.md#y) and ![img](p.png) `[no](z.md)`\n```\n[no](w.md)\n```\n[ext](https://e.org)"
    assert links(text) == ["docs/x.md#y", "https://e.org"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_relative_links_and_anchors_resolve(page):
    text = page.read_text()
    broken = []
    for target in links(text):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text()):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, broken


def test_every_docs_page_is_linked_from_the_readme_and_the_index():
    readme = (PROJECT_ROOT / "README.md").read_text()
    index = (PROJECT_ROOT / "docs" / "README.md").read_text()
    for page in PAGES[1:]:
        if page.name == "README.md":
            continue
        assert f"(docs/{page.name})" in readme, page.name
        assert f"({page.name})" in index, page.name
