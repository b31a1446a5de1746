"""Reports checked as a reader sees them: rendered by markdown-it-py (the CommonMark parser
rich uses, with GFM tables, as GitHub renders an issue), their sections found, and grepped
for every secret the test gave."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token


@dataclass
class Rendered:
    tokens: list[Token]
    html: str

    def headings(self) -> list[str]:
        """The text of every heading, in order."""
        out = []
        for i, t in enumerate(self.tokens):
            if t.type == "heading_open":
                out.append(self.tokens[i + 1].content)
        return out

    def fences(self) -> list[str]:
        return [t.content for t in self.tokens if t.type == "fence"]

    def html_blocks(self) -> list[str]:
        return [t.content for t in self.tokens if t.type == "html_block"]

    def tables(self) -> int:
        return sum(t.type == "table_open" for t in self.tokens)


def render(markdown: str) -> Rendered:
    parser = MarkdownIt("commonmark", {"html": True}).enable("table")
    return Rendered(parser.parse(markdown), parser.render(markdown))


def check_report(markdown: str, sections: Iterable[str], secrets: Iterable[str] = ()) -> Rendered:
    """The report renders with the given section headings (h3), its log folded in one
    <details> block holding one code block, and none of ``secrets`` anywhere."""
    for secret in secrets:
        assert secret not in markdown, f"secret {secret!r} in the report"
    page = render(markdown)
    heads = page.headings()
    assert heads, "no heading"
    for name in sections:
        assert any(h.startswith(name) for h in heads), (name, heads)
    blocks = page.html_blocks()
    if "<details>" in markdown:
        # the details block opens and closes as HTML blocks, around the log's fence
        assert sum("<details>" in b for b in blocks) == 1, blocks
        assert sum(b.strip() == "</details>" for b in blocks) == 1, blocks
        assert page.html.rstrip().endswith("</details>"), page.html[-300:]
    return page
