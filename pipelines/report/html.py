"""``risk_report.html``: the Markdown page as one self-contained HTML file.

The Markdown of :func:`pipelines.report.page.render_page` is rendered by markdown-it-py (CommonMark with
GitHub tables; a dependency of ``rich``, which the project requires), raw HTML in the Markdown is not
passed through, every ``<img src="x.png">`` becomes a ``data:image/png;base64`` URI of the file next
to the page, and every link to such a file becomes a link to the image's anchor in the page. The only
style is an inline ``<style>``: the file loads no external resource (no scripts, fonts, stylesheets or
images), so it renders the same when opened from disk, from an MLflow artifact or in a mail.
"""

from __future__ import annotations

import base64
import html
import re
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
"""

_IMG = re.compile(r'<img src="([^"]+)" alt="([^"]*)"\s*/?>')
_HREF = re.compile(r'href="([^"/:#]+\.png)"')


def _anchor(name: str) -> str:
    return "plot-" + re.sub(r"[^A-Za-z0-9_-]", "-", Path(name).stem)


def render_html(markdown_text: str, folder: Path, title: str) -> str:
    """The HTML document of ``markdown_text`` with the PNGs it references (relative to ``folder``) embedded.

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

    body = _IMG.sub(embed, body)
    body = _HREF.sub(lambda m: f'href="#{_anchor(html.unescape(m.group(1)))}"', body)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n")
