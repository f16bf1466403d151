"""The title and main text of an HTML page (stdlib parser): scripts, styles, navigation, headers, footers,
asides, forms and hidden parts are dropped; when the page marks its main content (`<main>`, `<article>`,
`role="main"`), only that is kept. Headings and list items keep their markdown shape."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

SKIP = {
    "script", "style", "noscript", "template", "svg", "math", "nav", "header", "footer", "aside", "form",
    "iframe", "button", "select", "textarea", "canvas", "object", "embed", "dialog", "head",
}  # fmt: skip
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
BLOCK = {
    "p", "div", "section", "article", "main", "ul", "ol", "li", "table", "tr", "blockquote", "pre", "figure",
    "figcaption", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "br", "hr", "td", "th", "body",
}  # fmt: skip
BOILERPLATE = {
    "cookie", "cookies", "consent", "banner", "navbar", "menu", "sidebar", "breadcrumb", "breadcrumbs", "advert",
    "ads", "promo", "share", "social", "newsletter", "popup", "modal",
}  # fmt: skip


@dataclass
class Extracted:
    title: str
    text: str
    description: str = ""


def extract_html(html: str) -> Extracted:
    parser = _parse(html, drop_boilerplate=True)
    text = parser.text()
    if len(text) < 200:  # class names may have misled the boilerplate guess: then read the page without it
        plain = _parse(html, drop_boilerplate=False).text()
        text = plain if len(text) < len(plain) / 4 else text
    title = _one_line(parser.title) or _one_line(parser.og_title) or _one_line(parser.first_h1)
    return Extracted(title=title, text=text, description=_one_line(parser.description))


def _parse(html: str, drop_boilerplate: bool) -> _MainTextParser:
    parser = _MainTextParser(drop_boilerplate)
    try:
        parser.feed(html)
        parser.close()
    except AssertionError:  # the stdlib parser gives up on some broken markup; keep what it read
        pass
    return parser


def _looks_like_boilerplate(attributes: dict[str, str]) -> bool:
    for token in f"{attributes.get('class', '')} {attributes.get('id', '')}".lower().split():
        parts = re.split(r"[-_]", token)
        if parts[0] in BOILERPLATE or parts[-1] in BOILERPLATE:
            return True
    return False


class _MainTextParser(HTMLParser):
    def __init__(self, drop_boilerplate: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.drop_boilerplate = drop_boilerplate
        self.stack: list[tuple[str, bool, bool]] = []  # (tag, skipping, in main)
        self.all_parts: list[str] = []
        self.main_parts: list[str] = []
        self.title = self.og_title = self.first_h1 = self.description = ""
        self._in_title = False
        self._h1: list[str] | None = None

    def text(self) -> str:
        main = _clean("".join(self.main_parts))
        return main if len(main) >= 200 or not self.all_parts else _clean("".join(self.all_parts)) or main

    @property
    def skipping(self) -> bool:
        return bool(self.stack) and self.stack[-1][1]

    @property
    def in_main(self) -> bool:
        return bool(self.stack) and self.stack[-1][2]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "meta":
            key = (attributes.get("property") or attributes.get("name") or "").lower()
            if key == "og:title":
                self.og_title = attributes.get("content", "")
            elif key in ("description", "og:description") and not self.description:
                self.description = attributes.get("content", "")
            return
        if tag == "title":
            self._in_title = True
        if tag in VOID:
            if tag in ("br", "hr"):
                self._emit("\n")
            return
        hidden = (
            "hidden" in attributes
            or attributes.get("aria-hidden") == "true"
            or "display:none" in attributes.get("style", "").replace(" ", "")
            or (self.drop_boilerplate and _looks_like_boilerplate(attributes))
        )
        skipping = self.skipping or tag in SKIP or (hidden and tag not in ("body", "html", "main", "article"))
        main = self.in_main or tag in ("main", "article") or attributes.get("role") == "main"
        self.stack.append((tag, skipping, main))
        if tag in BLOCK:
            self._emit("\n")
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            self._emit("#" * int(tag[1]) + " ")
            if tag == "h1" and not self.first_h1:
                self._h1 = []
        elif tag == "li":
            self._emit("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag == "h1" and self._h1 is not None:
            self.first_h1, self._h1 = "".join(self._h1), None
        if not any(t == tag for t, _, _ in self.stack):
            return
        while self.stack:
            open_tag, _, _ = self.stack.pop()
            if open_tag in BLOCK and open_tag != "li":
                self._emit("\n")
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
            return
        if self._h1 is not None:
            self._h1.append(data)
        self._emit(data)

    def _emit(self, text: str) -> None:
        if self.skipping:
            return
        self.all_parts.append(text)
        if self.in_main:
            self.main_parts.append(text)


def _clean(text: str) -> str:
    lines: list[str] = []
    for raw in text.splitlines():
        line = re.sub(r"[ \t\u00a0]+", " ", raw).strip()
        if line in ("-", "#", "##", "###", "####", "#####", "######"):
            line = ""
        if line or (lines and lines[-1]):
            lines.append(line)
    return "\n".join(lines).strip()


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()
