"""The report's HTML form (``bringup report --html``): the Markdown rendered by markdown-it-py
(the CommonMark parser rich uses, with GFM tables), the timeline SVG drawn in after the title,
on one self-contained page (no script, no outside resource)."""

from __future__ import annotations

from html import escape

from markdown_it import MarkdownIt

_STYLE = (
    "body{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px}"
    "pre{background:#f6f8fa;padding:8px;overflow-x:auto}figure{margin:1em 0}"
)


def render(markdown: str) -> str:
    """Markdown to HTML, as GitHub renders the parts a report uses."""
    parser = MarkdownIt("commonmark", {"html": True}).enable("table").enable("strikethrough")
    return str(parser.render(markdown))


def html_page(markdown: str, svg: str | None, title: str) -> str:
    """The whole page."""
    body = render(markdown)
    if svg is not None:
        figure = f'<figure class="timeline">{svg}</figure>'
        head_end = body.find("</h2>")
        body = (
            body[: head_end + 5] + figure + body[head_end + 5 :] if head_end >= 0 else figure + body
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body>\n{body}</body></html>\n"
    )
