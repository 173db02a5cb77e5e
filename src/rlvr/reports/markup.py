"""HTML pieces of the report (:mod:`rlvr.reports.run_report`): escaping, tables, sections,
"not recorded" notes, embedded figures and the page's style sheet. All user text is escaped
except markup built here (:class:`Html`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

NOT_RECORDED = "not recorded"


class Html(str):
    """Markup built here, inserted into a table cell as is (everything else is escaped)."""


def esc(value: Any) -> str:
    """``value`` as HTML text: escaped, unless it is :class:`Html`."""
    return value if isinstance(value, Html) else html.escape(str(value))


def html_table(header: Sequence[str], rows: Sequence[Sequence[Any]], css: str = "") -> str:
    """A table of ``header`` and ``rows`` (cells escaped by :func:`esc`), of class ``css``."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def html_section(anchor: str, title: str, body: str) -> str:
    """A ``<section id=anchor>`` with heading ``title`` around ``body`` (markup)."""
    return f'<section id="{anchor}">\n<h2>{esc(title)}</h2>\n{body}\n</section>'


def missing_note(what: str) -> str:
    """The note that ``what`` was not recorded."""
    return f'<p class="missing">{esc(what)}: {NOT_RECORDED}.</p>'


def html_figure(title: str, png: str | None, missing: str) -> str:
    """The embedded ``png`` (base64) titled ``title``; for None, a note saying why (``missing``)
    there is no plot."""
    if png is None:
        return missing_note(f"{title} ({missing})")
    return f'<figure><img alt="{esc(title)}" src="data:image/png;base64,{png}"></figure>'


#: The page's style sheet.
CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; background: #fff; line-height: 1.4; }
h1 { border-bottom: 2px solid #345; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #ccc; margin-top: 2em; }
nav a { color: #2a5db0; }
table { border-collapse: collapse; margin: .6em 0; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; vertical-align: top; }
th { background: #eef2f7; }
td:first-child, th:first-child { text-align: left; }
table.alerts td, table.alerts th, table.settings td, table.settings th { text-align: left; }
.headline { font-size: 20px; font-weight: bold; }
.caption { color: #555; font-size: 13px; }
.missing { color: #8a6d3b; background: #fcf8e3; padding: 4px 8px; border-radius: 3px; }
.notes { color: #8a6d3b; }
.action { color: #fff; padding: 1px 6px; border-radius: 3px; font-weight: bold; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.sample { border-left: 3px solid #9ab; margin: .8em 0; padding-left: .8em; }
.sample .meta { margin: 0; font-size: 13px; }
.segment .role { font-size: 12px; color: #555; }
.segment.env pre { background: #fdf1dc; border-left: 3px dashed #d08a00; color: #5a4a2a; }
pre { background: #f6f8fa; padding: 6px; white-space: pre-wrap; word-break: break-word;
      margin: .3em 0; font-size: 13px; }
"""
