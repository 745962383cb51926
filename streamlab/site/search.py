"""The site's search box looks through an index of every section of every page (assets/search-index.js):
its heading, its page, its link, and its words, code included, outputs left out."""
from __future__ import annotations

import re
from html.parser import HTMLParser

from .pages import Page

BLOCKS = {"p", "div", "pre", "li", "td", "th", "tr", "br", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote"}


class SectionText(HTMLParser):
    """The words of a page, section by section (a section starts at a heading with an id), leaving
    out outputs: what the search box looks through."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[dict] = [{"id": "", "heading": "", "text": []}]
        self.skip_depth = 0  # >0 inside an output area
        self.depth = 0
        self.heading: dict | None = None

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "img", "hr", "input", "meta", "link", "wbr"):
            return
        self.depth += 1
        attrs = dict(attrs)
        if tag in BLOCKS:
            self._text().append(" ")
        if not self.skip_depth and {"output_wrapper", "prompt"} & set((attrs.get("class") or "").split()):
            self.skip_depth = self.depth
        if re.fullmatch(r"h[1-4]", tag) and attrs.get("id") and not self.skip_depth:
            self.heading = {"id": attrs["id"], "heading": "", "text": []}
            self.sections.append(self.heading)

    def handle_endtag(self, tag):
        if tag in ("br", "img", "hr", "input", "meta", "link", "wbr"):
            return
        if self.skip_depth == self.depth:
            self.skip_depth = 0
        if re.fullmatch(r"h[1-4]", tag):
            self.heading = None
        if tag in BLOCKS:
            self._text().append(" ")
        self.depth -= 1

    def _text(self) -> list[str]:
        return self.sections[-1]["text"] if self.heading is None else []

    def handle_data(self, data):
        if self.skip_depth or data == "¶":
            return
        if self.heading is not None:
            self.heading["heading"] += data
        else:
            self.sections[-1]["text"].append(data)


def search_entries(page: Page, body: str) -> list[dict]:
    parser = SectionText()
    parser.feed(body)
    entries = []
    for section in parser.sections:
        text = re.sub(r"\s+", " ", "".join(section["text"])).strip()
        if text or section["heading"]:
            entries.append({"page": page.title, "heading": section["heading"].strip(),
                            "url": page.file + (f"#{section['id']}" if section["id"] else ""), "text": text})
    return entries
