"""What students get back: nbgrader's feedback without hidden tests, or a page saying why not.

What the feedback's two nbconvert preprocessors do, as functions: ``steps/hide_hidden_tests.py`` withholds an output
that quotes a hidden test (``hidden_lines``, ``quotes_any``), ``steps/inert_feedback.py`` keeps an output inert
(``inert_output``) and markdown sanitised (``markdown_html``, ``sanitize_html``). When nbgrader wrote no feedback (the
notebook timed out, crashed or could not be read), the grader writes ``status_page`` instead.

A feedback page shows what a student made (their markdown, their outputs) to the instructor who opens
it, so nothing in it may run or call out: ``InertFeedback`` keeps only an allow-list of HTML from the
student, shows no script, and bounds each cell's outputs (``bounds``); ``make_inert`` puts a strict
Content-Security-Policy first in every page the grader writes, so that even markup that got through
could not run a script, load anything from outside, or submit a form.
"""
from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

from .. import bounds
from .languages import FEEDBACK, STATUS_EXPLANATIONS_IN_CHINESE, said
from .results import Result, Status, format_points
from .withhold import BEGIN, END, read_hidden_tests

MIN_QUOTED = 16  # shorter lines ("assert ok", "print(x)") could be the student's own


def hidden_lines(nb, begin: str = BEGIN, end: str = END) -> set[str]:
    """The lines of every hidden test region in ``nb``'s code cells (stripped; at least ``MIN_QUOTED`` characters)."""
    return {line.strip() for cell in nb.cells if cell.cell_type == "code"
            for line in read_hidden_tests(cell.source, begin, end).lines if len(line.strip()) >= MIN_QUOTED}


def output_text(output) -> str:
    """All the text an output shows: stream text, every text-like representation, an error's message."""
    parts = [output.get("text", ""), output.get("ename", ""), output.get("evalue", "")]
    parts += output.get("traceback", []) or []
    for value in (output.get("data") or {}).values():
        parts.append(value if isinstance(value, str) else "\n".join(value) if isinstance(value, list) else "")
    return "\n".join(p if isinstance(p, str) else "".join(p) for p in parts)


def quotes_any(text: str, lines: set[str]) -> bool:
    return any(line in text for line in lines) if text and lines else False


# -- inert feedback: what the student made is shown, never run ------------------------------------------------

# The HTML kept from a student (their markdown, their HTML outputs): text, structure, tables, and images that
# are data (a data: URI inside <img>, which runs no script, not even an SVG's). Any other tag is taken out, its
# text kept; a script, a style sheet or a frame goes with its content.
#
# ``sanitize_html`` writes its output itself, from what it read: escaped text, allowed tags with allowed
# attributes (values decoded, checked, escaped and quoted) and the end tags of the elements it opened. So a
# browser reads exactly what was checked, however oddly the input was written. bleach (nbconvert's
# SanitizeHTML) is not used: on this Python its parser takes minutes on a crafted 1 MB output (quadratic),
# and so does the standard library's; this reader is one pass, each character read once.
ALLOWED_TAGS = frozenset({
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del", "details",
    "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img",
    "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary",
    "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var"})
VOID_TAGS = frozenset({"br", "col", "hr", "img"})
ALLOWED_STYLES = frozenset({"color", "background-color", "text-align", "vertical-align", "font-weight",
                            "font-style", "text-decoration", "white-space"})   # nothing that moves or fetches
STYLE_VALUE = re.compile(r"[#\w\s.,%+-]*|(?:rgba?|hsla?)\([\d\s.,%]*\)", re.A)
# Elements whose content is not markup: dropped with it (a script leaves a note), or kept as text.
DROPPED_CONTENT = frozenset({"script", "style", "iframe", "noembed", "noframes", "noscript", "xmp"})
TEXT_CONTENT = frozenset({"textarea", "title"})
LINK_SCHEMES = ("http", "https", "mailto")
IMAGE_DATA = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml)[;,]")
BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
SCHEME = re.compile(r"([a-z][a-z0-9+.-]*):")
_WS = "\t\n\f\r "
_SPACE = re.compile(rf"[{_WS}]*")
_BETWEEN_ATTRIBUTES = re.compile(rf"[{_WS}/]*")
_TAG_NAME = re.compile(rf"[^{_WS}/>]*")
_ATTRIBUTE_NAME = re.compile(rf"[^{_WS}/>][^{_WS}/>=]*")
_UNQUOTED = re.compile(rf"[^{_WS}>]*")
_END_TAGS = {name: re.compile(rf"</{name}(?=[{_WS}/>]|\Z)", re.I) for name in DROPPED_CONTENT | TEXT_CONTENT}
# Opening a tag closes an open one as a browser would (a <li> the previous <li>), looking no further out than
# the stops; every block closes an open <p>.
_CONTAINERS = frozenset({"blockquote", "caption", "dd", "details", "div", "dl", "dt", "figcaption", "figure",
                         "li", "ol", "summary", "table", "td", "th", "ul"})
_BLOCKS = frozenset({"blockquote", "details", "div", "dl", "figure", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
                     "ol", "p", "pre", "table", "ul"})
_IMPLIED_ENDS = {
    "li": ({"li"}, {"ul", "ol"}), "dt": ({"dt", "dd"}, {"dl"}), "dd": ({"dt", "dd"}, {"dl"}),
    "tr": ({"tr"}, {"table", "thead", "tbody", "tfoot"}), "td": ({"td", "th"}, {"tr", "table"}),
    "th": ({"td", "th"}, {"tr", "table"}), "thead": ({"thead", "tbody", "tfoot"}, {"table"}),
    "tbody": ({"thead", "tbody", "tfoot"}, {"table"}), "tfoot": ({"thead", "tbody", "tfoot"}, {"table"})}


def _plain_uri(value: str) -> str:
    """``value`` (decoded) as a browser reads a URL: without whitespace and control characters, lower case."""
    return re.sub(r"[\x00-\x20\x7f-\xa0]+", "", value).lower()


def _clean_style(value: str) -> str:
    """The declarations of a style attribute that set an ``ALLOWED_STYLES`` property to a plain value."""
    kept = []
    for declaration in value.split(";"):
        name, colon, setting = declaration.partition(":")
        name, setting = name.strip().lower(), setting.strip()
        if colon and name in ALLOWED_STYLES and setting and STYLE_VALUE.fullmatch(setting):
            kept.append(f"{name}: {setting}")
    return "; ".join(kept)


def _allowed_attribute(tag: str, name: str, value: str) -> str | None:
    """The value to keep of attribute ``name`` (decoded ``value``) of an allowed ``tag``, or None."""
    if name in ("class", "title", "lang", "dir"):
        return value
    if name == "style":
        return _clean_style(value) or None
    if tag == "a" and name == "href":
        scheme = SCHEME.match(_plain_uri(value))
        return value if scheme is None or scheme.group(1) in LINK_SCHEMES else None
    if tag == "img" and name == "src":
        return value if IMAGE_DATA.match(_plain_uri(value)) else None
    if (tag == "img" and name in ("alt", "width", "height")) or (name == "id" and tag in (
            "h1", "h2", "h3", "h4", "h5", "h6")) or (name, tag) in {
            ("name", "a"), ("colspan", "td"), ("rowspan", "td"), ("colspan", "th"), ("rowspan", "th"),
            ("align", "td"), ("align", "th"), ("border", "table"), ("span", "col"), ("span", "colgroup"),
            ("start", "ol"), ("type", "ol"), ("value", "li"), ("open", "details")}:
        return value
    return None


def _read_tag(text: str, at: int) -> tuple[str, list[tuple[str, str]], int] | None:
    """The tag whose name starts at ``at``: its name, its attributes (values decoded) and where it ends;
    None if the text ends inside it (a browser drops such a tag, and everything after it)."""
    name = _TAG_NAME.match(text, at)
    at, attributes = name.end(), []
    while True:
        at = _BETWEEN_ATTRIBUTES.match(text, at).end()
        if at >= len(text):
            return None
        if text[at] == ">":
            return name.group().lower(), attributes, at + 1
        key = _ATTRIBUTE_NAME.match(text, at)
        at, value = _SPACE.match(text, key.end()).end(), ""
        if text.startswith("=", at):
            at = _SPACE.match(text, at + 1).end()
            if at >= len(text):
                return None
            if text[at] in "\"'":
                end = text.find(text[at], at + 1)
                if end < 0:
                    return None
                value, at = text[at + 1:end], end + 1
            else:
                unquoted = _UNQUOTED.match(text, at)
                value, at = unquoted.group(), unquoted.end()
        attributes.append((key.group().lower(), html.unescape(value)))


def _escaped(raw: str) -> str:
    """Text as read (character references decoded), escaped again."""
    return html.escape(html.unescape(raw).replace("\0", ""), quote=False)


class _Writer:
    """The sanitised HTML, and the elements it opened and has not closed."""

    def __init__(self):
        self.out: list[str] = []
        self.open: list[str] = []

    def start(self, tag: str, attributes: list[tuple[str, str]]) -> None:
        if tag not in ALLOWED_TAGS or len(self.open) >= bounds.FEEDBACK_HTML_DEPTH:
            return
        ends, stops = _IMPLIED_ENDS.get(tag, ({"p"}, _CONTAINERS) if tag in _BLOCKS else ((), ()))
        for element in reversed(self.open if ends else ()):
            if element in ends:
                self.end(element)
                break
            if element in stops:
                break
        kept = {}
        for name, value in attributes:
            if name not in kept and (value := _allowed_attribute(tag, name, value)) is not None:
                kept[name] = value
        if tag == "img" and "src" not in kept:      # an image from elsewhere: not fetched, not shown
            return
        self.out.append(f"<{tag}" + "".join(f' {name}="{html.escape(value)}"' for name, value in kept.items())
                        + ">")
        if tag not in VOID_TAGS:
            self.open.append(tag)

    def end(self, tag: str) -> None:
        if tag in self.open:
            while (element := self.open.pop()) != tag:
                self.out.append(f"</{element}>")
            self.out.append(f"</{tag}>")

    def finish(self) -> str:
        self.out.extend(f"</{element}>" for element in reversed(self.open))
        return "".join(self.out)


def sanitize_html(text: str) -> str:
    """The student's HTML ``text`` with only ``ALLOWED_TAGS`` and their safe attributes left: no script, event
    handler, javascript: URL, frame, object, form, base, meta or style sheet; images only as data; every
    element it opens closed. One pass over ``text`` (no parser that can be made to take quadratic time)."""
    writer, at, size = _Writer(), 0, len(text)
    while at < size:
        lt = text.find("<", at)
        if lt < 0:
            writer.out.append(_escaped(text[at:]))
            break
        writer.out.append(_escaped(text[at:lt]))
        at, after = lt + 1, text[lt + 1:lt + 3]
        if after[:1].isascii() and after[:1].isalpha():
            tag = _read_tag(text, at)
            if tag is None:
                break
            name, attributes, at = tag
            if name == "plaintext":
                writer.out.append(_escaped(text[at:]))
                break
            if name in _END_TAGS:
                end = _END_TAGS[name].search(text, at)
                content = text[at:] if end is None else text[at:end.start()]
                writer.out.append(_escaped(content) if name in TEXT_CONTENT else
                                  "<em>[a script was left out]</em>" if name == "script" else "")
                close = -1 if end is None else text.find(">", end.end())
                if close < 0:
                    break
                at = close + 1
            else:
                writer.start(name, attributes)
        elif after[:1] == "/" and after[1:].isascii() and after[1:].isalpha():
            tag = _read_tag(text, at + 1)
            if tag is None:
                break
            writer.end(tag[0])
            at = tag[2]
        elif after == "/>":
            at += 2
        elif text.startswith(("!-->", "!--->"), at):
            at = text.index(">", at) + 1
        elif text.startswith("!--", at):
            end = text.find("-->", at + 3)
            if end < 0:
                break
            at = end + 3
        elif after[:1] in ("!", "?", "/") and after != "/":
            close = text.find(">", at)
            if close < 0:
                break
            at = close + 1
        else:
            writer.out.append("&lt;")
    return writer.finish()

# An output's representations, in the order the page shows the first one present (nbconvert's HTMLExporter);
# the rest (JavaScript, widgets, anything unknown) are script or nothing the page shows.
SHOWN = ("text/html", "text/markdown", "image/svg+xml", "text/latex", "image/png", "image/jpeg")
RENDERED_MARKDOWN = "streamlab-rendered"    # class of the <div> holding a markdown cell's sanitised HTML


def _markdown(source: str, attachments=None, *, escape: bool = False) -> str:
    """``source`` as nbconvert's HTMLExporter renders markdown (its renderer; with ``escape`` raw HTML
    shows as text)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    renderer = IPythonRenderer(escape=escape, attachments=attachments if isinstance(attachments, dict) else {})
    return MarkdownWithMath(renderer=renderer).render(source)


def markdown_html(source: str, attachments=None) -> str:
    """Markdown written by a student, as sanitised HTML (a reference to a missing attachment, which
    would stop nbconvert's own rendering, is shown as text)."""
    try:
        rendered = _markdown(source, attachments)
    except Exception:  # noqa: BLE001 - crafted markdown or attachments: show it as text
        rendered = f"<pre>{html.escape(source)}</pre>"
    return sanitize_html(rendered)


def as_markdown_source(fragment: str) -> str:
    """Sanitised HTML ``fragment`` as a markdown cell source that the feedback template's ``markdown2html``
    passes through unchanged: one <div> on one line is one raw HTML block, so no markdown inside it is
    read again (a code span's ``[x](javascript:...)`` would become a live link). Checked, not assumed."""
    source = (f'<div class="{RENDERED_MARKDOWN}">'
              + fragment.replace("\r", "&#13;").replace("\n", "&#10;") + "</div>")
    if _markdown(source).strip() == source:
        return source
    return f'<div class="{RENDERED_MARKDOWN}"><p><em>[this text could not be shown safely]</em></p></div>'


def size_in_bytes(value) -> int:
    """About how many bytes ``value`` (an output, a source) takes: its strings' UTF-8 bytes, plus a little
    per item (walked without recursion or a copy: an output can be large, its metadata deep)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) if item.isascii() else len(item.encode("utf-8", "replace"))
        elif isinstance(item, dict):
            total += 2 * len(item) + 2
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            total += len(item) + 2
            stack.extend(item)
        else:
            total += len(json.dumps(item, default=str))
    return total


def _mb(count: int) -> str:
    return f"{count / bounds.MB:.1f} MB" if count >= bounds.MB // 10 else f"{max(1, round(count / 1024))} kB"


def left_out_note(size: int, limit: int, per: str, what: str = "output") -> str:
    """What replaces a part of the page past a limit."""
    return f"[{what} left out of this feedback: it was {_mb(size)}, over the limit of {_mb(limit)} for {per}]"


def _joined(value) -> str | None:
    """A representation's text (nbformat allows a list of lines), or None for anything else."""
    if isinstance(value, list) and all(isinstance(line, str) for line in value):
        return "".join(value)
    return value if isinstance(value, str) else None


def _image_metadata(metadata, mime: str) -> dict:
    """The keys nbconvert's template writes into an <img> tag (width and height unquoted: a number only)."""
    metadata = metadata if isinstance(metadata, dict) else {}
    nested = metadata.get(mime) if isinstance(metadata.get(mime), dict) else {}
    kept = {}
    for key in ("width", "height"):
        value = nested.get(key, metadata.get(key))
        if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).isdigit():
            kept[key] = int(value)
    alt = nested.get("alt", metadata.get("alt"))
    if isinstance(alt, str):
        kept["alt"] = alt
    if nested.get("unconfined", metadata.get("unconfined")) is True:
        kept["unconfined"] = True
    return {mime: kept} if kept else {}


def inert_output(output: dict) -> dict | None:
    """A cell output with nothing that could run: stream and error text as is (the page escapes it), a rich
    output reduced to the one representation the page shows, made safe, plus its plain text. None: drop it."""
    kind = output.get("output_type")
    if kind == "stream":
        return {"output_type": "stream", "name": "stderr" if output.get("name") == "stderr" else "stdout",
                "text": _joined(output.get("text")) or ""}
    if kind == "error":
        traceback = output.get("traceback") if isinstance(output.get("traceback"), list) else []
        return {"output_type": "error", "ename": str(output.get("ename", "")), "evalue": str(output.get("evalue", "")),
                "traceback": [line for line in traceback if isinstance(line, str)]}
    if kind not in ("display_data", "execute_result"):
        return None
    data = output.get("data") if isinstance(output.get("data"), dict) else {}
    kept, metadata = {}, {}
    shown = next((mime for mime in SHOWN if _joined(data.get(mime)) is not None), None)
    value = _joined(data.get(shown)) if shown else None
    if shown == "text/html":
        kept["text/html"] = sanitize_html(value)
    elif shown == "text/markdown":
        kept["text/html"] = markdown_html(value)
    elif shown == "image/svg+xml":   # an SVG can hold scripts; as an image it runs none
        encoded = base64.b64encode(value.encode("utf-8", "replace")).decode("ascii")
        kept["text/html"] = f'<img src="data:image/svg+xml;base64,{encoded}" alt="SVG image">'
    elif shown == "text/latex":
        kept["text/latex"] = value               # the page escapes it
    elif shown in ("image/png", "image/jpeg") and BASE64.fullmatch(value):
        kept[shown] = value
        metadata = _image_metadata(output.get("metadata"), shown)
    plain = _joined(data.get("text/plain"))
    if plain is not None:
        kept["text/plain"] = plain
    if not kept:
        left = ", ".join(sorted(str(mime) for mime in data)[:3]) or "no data"
        kept["text/plain"] = f"[an output the feedback does not show ({left})]"
    result = {"output_type": kind, "data": kept, "metadata": metadata}
    if kind == "execute_result":
        count = output.get("execution_count")
        result["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
    return result


# -- pages: a strict content security policy first in every page the grader writes -----------------------------

# Nothing runs (no script, inline or not, so no event handler or javascript: URL either) and nothing is fetched
# (images only as data: URIs, fonts too); inline CSS (nbconvert's, the grader's own) still styles the page.
# base-uri and form-action are not covered by default-src, so they are named.
CONTENT_SECURITY_POLICY = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; "
                           "base-uri 'none'; form-action 'none'")
INERT_HEAD = (f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
              '<meta name="referrer" content="no-referrer">')
_PAGE_START = re.compile(r"\A\s*(?:<!doctype[^>]*>\s*)?(?:<html(?P<attrs>\s[^>]*)?>\s*)?(?:<head(?:\s[^>]*)?>)?",
                         re.I)
_LANG = re.compile(r"""\slang\s*=\s*["']?([A-Za-z]{1,8}(?:-[A-Za-z0-9]{1,8})*)""", re.I)
# What a policy does not stop: a <meta http-equiv="refresh"> navigates. Renaming the attribute (and <base>,
# which base-uri already stops) is one linear pass, with no parsing to get wrong.
_UNSTOPPED = re.compile(r"(?<!data-)(http-equiv)|<(base)(?=[\s/>])", re.I)


def make_inert(page: str) -> str:
    """``page`` (a whole HTML page) starting ``<!DOCTYPE html><html><head>`` + ``INERT_HEAD``: the policy is the
    first element of <head>, before anything that could run or fetch (a meta policy covers only what follows
    it). Whatever the page had before its <head> is dropped (its <html> keeps only ``lang``), and any meta
    refresh or <base> is made a plain element. Idempotent: a page already made inert is returned unchanged."""
    start = _PAGE_START.match(page)
    lang = _LANG.search(start.group("attrs") or "")
    rest = page[start.end():].lstrip()
    while rest.startswith(INERT_HEAD):      # made inert before
        rest = rest[len(INERT_HEAD):].lstrip()
    rest = _UNSTOPPED.sub(lambda m: "data-" + m.group(1) if m.group(1) else "<x-" + m.group(2), rest)
    opening = f'<!DOCTYPE html>\n<html lang="{lang.group(1)}">' if lang else "<!DOCTYPE html>\n<html>"
    return f"{opening}<head>{INERT_HEAD}\n{rest}"


def inert_feedback_pages(folder: Path) -> list[Path]:
    """``make_inert`` every HTML page in ``folder`` (where nbgrader wrote a student's feedback), in place."""
    pages = sorted(Path(folder).glob("*.html"))
    for page in pages:
        text = page.read_text(encoding="utf-8", errors="replace")
        inert = make_inert(text)
        if inert != text:
            page.write_text(inert, encoding="utf-8")
    return pages


STATUS_EXPLANATIONS = {
    Status.TIMED_OUT: "Your notebook did not finish within the time allowed for the whole submission, so "
                      "it could not be graded. Look for a cell that never returns: a streaming query "
                      "waited on without a time limit (awaitTermination() with no timeout), a query that "
                      "never ends, or an endless loop.",
    Status.CRASHED: "Your notebook stopped the Python kernel that ran it (for example os._exit(), "
                    "sys.exit() in a forked process, a killed process, or running out of memory), so it "
                    "could not be graded.",
    Status.INVALID: "The file you submitted could not be read as this lab's Jupyter notebook.",
    Status.LIMIT: "Your notebook ran into one of the limits every submission runs under (the detail above "
                  "names it: memory, processes, CPU time or disk), so it was stopped and could not be graded. "
                  "A lab's reference solution uses a small part of each.",
    Status.ERROR: "The grader failed on your submission for a reason that is not your doing. Your "
                  "instructor has been told and will grade it again.",
}


def status_page(result: Result, lab: str, language: str = "en") -> str:
    """The feedback page for a submission nbgrader could not give feedback on, in the notebook's ``language``."""
    words = FEEDBACK[language]
    explanations = STATUS_EXPLANATIONS_IN_CHINESE if language == "zh" else STATUS_EXPLANATIONS
    explanation = explanations.get(result.status, "")
    detail = f"<p><b>{words['details']}{words['colon']}</b> {html.escape(result.detail)}</p>" if result.detail else ""
    return make_inert(f"""<!DOCTYPE html>
<html lang="{words['lang']}"><head><meta charset="utf-8">
<title>{html.escape(lab)}: {html.escape(result.student)}</title>
<style>body {{ font-family: sans-serif; max-width: 46em; margin: 2em auto; line-height: 1.5 }}</style></head>
<body>
<h1>{html.escape(lab)}</h1>
<p><b>{words['student']}{words['colon']}</b> {html.escape(result.student)}<br>
<b>{words['status']}{words['colon']}</b> {html.escape(said(result.status, language))}<br>
<b>{words['score']}{words['colon']}</b> {format_points(result.score)} / {format_points(result.max_score)}</p>
<p>{html.escape(explanation)}</p>
{detail}
<p>{words['again']}</p>
</body></html>
""")
