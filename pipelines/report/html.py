"""``risk_report.html``: the Markdown page as one self-contained HTML file.

The Markdown of :func:`pipelines.report.page.render_page` is rendered by markdown-it-py (CommonMark with
GitHub tables; a dependency of ``rich``, which the project requires), raw HTML in the Markdown is not
passed through, every ``<img src="x.png">`` becomes a ``data:image/png;base64`` URI of the file next
to the page, and every link to such a file becomes a link to the image's anchor in the page (a PNG the
page only links, such as a profile plot, stays a link to the file beside it). The only
style is an inline ``<style>``: the file loads no external resource (no scripts, fonts, stylesheets or
images), so it renders the same when opened from disk, from an MLflow artifact or in a mail.

Read on one screen (issue 27): the ``<h2>`` sections named in ``folded`` become ``<details>`` (closed, the
heading as summary), the ``Plots`` section is a two-column grid (the Gantt chart full width), and every job id of ``nowrap`` and every
UTC time (``2025-03-16 19:00Z``, ``... 19:44:23Z``) in the text is a ``<span class="nw">`` that never wraps.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

#: The page's inline style sheet (no external resource).
STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 1300px;
       padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; border-bottom: 1px solid #ddd; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.86em; }
th, td { border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; text-align: left; }
th { background: #f3f3f3; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
code { background: #f3f3f3; padding: 0 3px; }
blockquote { border-left: 4px solid #d62728; margin: 0.6em 0; padding: 0.2em 0.8em; background: #fff4f4; }
.nw { white-space: nowrap; }
details { margin: 0.2em 0; } summary { cursor: pointer; }
summary h2 { display: inline-block; margin: 0.3em 0; border: none; font-size: 1.1em; }
.plots { display: grid; grid-template-columns: 1fr 1fr; gap: 0.4em 1em; align-items: start; }
.plots p { margin: 0; } .plots p:has(#plot-gantt) { grid-column: 1 / -1; }
.plots #plot-gantt { max-height: 640px; width: auto; }
.groups td:first-child { width: 15em; }
"""

#: A UTC time as the page prints it (:func:`pipelines.report.basics.clock` / :func:`~pipelines.report.basics.instant`).
TIME_PATTERN = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?Z"
#: ``<h2>`` sections whose content gets a class of the style sheet (the plot grid, the waiting groups' table).
SECTION_CLASSES: dict[str, str] = {"Plots": "plots", "Waiting jobs by reason": "groups"}
_TAG = re.compile(r"(<[^>]*>)")
_H2 = re.compile(r"(?=<h2>)")

_IMG = re.compile(r'<img src="([^"]+)" alt="([^"]*)"\s*/?>')
_HREF = re.compile(r'href="([^"/:#]+\.png)"')


def _anchor(name: str) -> str:
    return "plot-" + re.sub(r"[^A-Za-z0-9_-]", "-", Path(name).stem)


def _nowrap(body: str, ids: Sequence[str]) -> str:
    """``body`` with each id of ``ids`` and each UTC time in its text (not inside a tag) in ``<span class="nw">``."""
    alts = sorted({html.escape(i, quote=False) for i in ids if i}, key=len, reverse=True)
    parts = [TIME_PATTERN] + ([r"(?<![\w-])(?:" + "|".join(re.escape(a) for a in alts) + r")(?![\w-])"] if alts else [])
    pat = re.compile("|".join(f"(?:{p})" for p in parts))
    out = []
    for seg in _TAG.split(body):
        out.append(seg if seg.startswith("<") else pat.sub(lambda m: f'<span class="nw">{m.group(0)}</span>', seg))
    return "".join(out)


def _sections(body: str, folded: Sequence[str]) -> str:
    """Each ``<h2>`` section named in ``folded`` as a closed ``<details>``; those of :data:`SECTION_CLASSES` in a classed div."""
    out = []
    for chunk in _H2.split(body):
        m = re.match(r"<h2>(.*?)</h2>\n?", chunk)
        if m is None:
            out.append(chunk)
            continue
        title, rest = html.unescape(re.sub(r"<[^>]+>", "", m.group(1))), chunk[m.end():]
        if title in folded:
            out.append(f"<details>\n<summary>{m.group(0).strip()}</summary>\n{rest}</details>\n")
        elif title in SECTION_CLASSES:
            out.append(f'{m.group(0)}<div class="{SECTION_CLASSES[title]}">\n{rest}</div>\n')
        else:
            out.append(chunk)
    return "".join(out)


def render_html(markdown_text: str, folder: Path, title: str, folded: Sequence[str] = (),
                nowrap: Sequence[str] = ()) -> str:
    """The HTML document of ``markdown_text`` with the PNGs it references (relative to ``folder``) embedded.

    ``folded``: ``<h2>`` titles shown as closed ``<details>``; ``nowrap``: job ids kept on one line
    (with every UTC time; module docstring).

    Raises:
        FileNotFoundError: an image the page references is not in ``folder``.
    """
    from markdown_it import MarkdownIt  # lazily: only the report writer needs it

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown_text)
    folder = Path(folder)

    def embed(m: re.Match[str]) -> str:
        src, alt = html.unescape(m.group(1)), m.group(2)
        data = base64.b64encode((folder / src).read_bytes()).decode("ascii")
        return f'<img id="{_anchor(src)}" src="data:image/png;base64,{data}" alt="{alt}" />'

    body = _sections(_nowrap(body, nowrap), folded)
    embedded = {html.unescape(m.group(1)) for m in _IMG.finditer(body)}
    body = _IMG.sub(embed, body)
    body = _HREF.sub(lambda m: f'href="#{_anchor(html.unescape(m.group(1)))}"'
                     if html.unescape(m.group(1)) in embedded else m.group(0), body)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n")
