"""Every relative link in README.md and docs/*.md reaches a file that exists, and every
anchor a heading of it (GitHub's slugs), so that moving a section cannot strand a link."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def prose(text: str) -> str:
    """The text without code blocks and inline code, where a bracket is not a link."""
    return CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor: a link's text for the link, lower case, punctuation but ``-`` and
    ``_`` dropped, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, a repeated one numbered as GitHub numbers it."""
    seen: Counter[str] = Counter()
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def broken(page: Path) -> list[str]:
    """The relative links of ``page`` that reach no file, or no heading of it."""
    bad = []
    for target in LINK.findall(prose(page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            bad.append(f"{page.name}: {target} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            bad.append(f"{page.name}: {target} (no such heading)")
    return bad


def test_every_relative_link_and_anchor_resolves() -> None:
    assert [bad for page in PAGES for bad in broken(page)] == []


def test_a_link_to_a_missing_heading_is_found(tmp_path: Path) -> None:
    """The check can fail: a moved heading, a missing file and a repeated heading's number."""
    (tmp_path / "a.md").write_text("# Top\n\n## Same\n\n## Same\n", encoding="utf-8")
    page = tmp_path / "b.md"
    page.write_text(
        "[ok](a.md#same-1) [gone](a.md#moved) [none](c.md) `[code](c.md)` [web](https://x.y/z)",
        encoding="utf-8",
    )
    assert broken(page) == ["b.md: a.md#moved (no such heading)", "b.md: c.md (no such file)"]
