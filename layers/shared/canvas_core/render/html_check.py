"""The check every HTML deliverable passes before it is stored: `check_html` parses a page back as a browser
would (`HtmlView`: its title, ids, controls and the scripts that wire them, links, what it loads) and fails
unless it is a whole, self-contained document. Standard library only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from canvas_core.render import RenderCheckError

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr"}
OPTIONAL_END = {"p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot", "option", "optgroup", "colgroup",
                "html", "head", "body", "rt", "rp", "caption"}  # fmt: skip
CONTROLS = {"button", "input", "select", "textarea"}
EXECUTABLE_TYPES = {"", "text/javascript", "application/javascript", "module"}


@dataclass
class HtmlView:
    """What a page holds, as a browser would see it."""

    title: str = ""
    doctype: bool = False
    tags: list[str] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # id -> tag
    hooks: dict[str, list[str]] = field(default_factory=dict)  # id -> selectors that find it: data-x, .class
    forms: dict[str, str] = field(default_factory=dict)  # control id -> id of the form it is in
    scripts: list[str] = field(default_factory=list)  # executable inline scripts
    data_islands: list[str] = field(default_factory=list)
    external: list[str] = field(default_factory=list)  # src/href that load from elsewhere
    handler_attributes: list[str] = field(default_factory=list)  # onclick=... and the like
    links: list[str] = field(default_factory=list)
    text: str = ""
    errors: list[str] = field(default_factory=list)

    def controls(self) -> list[str]:
        return [i for i, tag in self.ids.items() if tag in CONTROLS or tag == "form"]

    def wired_controls(self) -> list[str]:
        """Controls the script finds (by id, data attribute or class) and listens to, and the buttons of a form
        it listens to."""
        code = "\n".join(self.scripts)
        if not ("addEventListener" in code or re.search(r"\.on\w+\s*=", code)):
            return []

        def found(i: str) -> bool:
            by_id = re.search(rf"""(getElementById\(\s*["']{re.escape(i)}["']|["'`]#{re.escape(i)}\b)""", code)
            return bool(by_id) or any(
                re.search(rf"""["'`][^"'`]*{re.escape(h)}\b""", code) for h in self.hooks.get(i, [])
            )

        return [i for i in self.controls() if found(i) or (i in self.forms and found(self.forms[i]))]


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.view = HtmlView()
        self.stack: list[str] = []
        self.forms: list[tuple[str, str]] = []
        self._script: tuple[str, list[str]] | None = None
        self._in_title = False
        self._text: list[str] = []

    def handle_decl(self, decl: str) -> None:
        if decl.lower().startswith("doctype html"):
            self.view.doctype = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): v or "" for k, v in attrs}
        self.view.tags.append(tag)
        if "id" in values:
            element_id = values["id"]
            self.view.ids.setdefault(element_id, tag)
            hooks = [f"[{k}" for k in values if k.startswith("data-")]
            hooks += [f".{c}" for c in values.get("class", "").split()]
            self.view.hooks[element_id] = hooks
            form = next((i for t, i in reversed(self.forms) if t == "form"), None)
            if form and tag in CONTROLS:
                self.view.forms[element_id] = form
        if tag == "form":
            self.forms.append(("form", values.get("id", "")))
        self.view.handler_attributes += [k for k in values if k.startswith("on")]
        for key in ("src", "href", "action", "formaction", "data"):
            target = values.get(key, "").strip()
            if target.lower().startswith("javascript:"):
                self.view.errors.append(f"<{tag}> has a javascript: URL")
            elif re.match(r"^(https?:)?//", target) and not (tag == "a" or (tag == "form" and key == "action")):
                self.view.external.append(target)
            elif tag == "a" and target:
                self.view.links.append(target)
        if tag == "script":
            self._script = (values.get("type", "").lower(), [])
        if tag == "title":
            self._in_title = True
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID and self.stack and self.stack[-1] == tag:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if tag not in self.stack:
            self.view.errors.append(f"</{tag}> closes nothing")
            return
        while self.stack:
            open_tag = self.stack.pop()
            if open_tag == tag:
                break
            if open_tag not in OPTIONAL_END:
                self.view.errors.append(f"<{open_tag}> is not closed before </{tag}>")
        if tag == "script" and self._script is not None:
            kind, parts = self._script
            (self.view.scripts if kind in EXECUTABLE_TYPES else self.view.data_islands).append("".join(parts))
            self._script = None
        if tag == "title":
            self._in_title = False
        if tag == "form" and self.forms:
            self.forms.pop()

    def handle_data(self, data: str) -> None:
        if self._script is not None:
            self._script[1].append(data)
        elif self._in_title:
            self.view.title += data
        elif "style" not in self.stack:
            self._text.append(data)

    def close(self) -> None:
        super().close()
        unclosed = [t for t in self.stack if t not in OPTIONAL_END]
        if unclosed:
            self.view.errors.append(f"<{unclosed[-1]}> is never closed")
        self.view.text = re.sub(r"\s+", " ", "".join(self._text)).strip()


def parse_html(text: str) -> HtmlView:
    checker = _Checker()
    checker.feed(text)
    checker.close()
    return checker.view


def check_html(text: str | bytes, require_script: bool = False) -> HtmlView:
    """Parse a page back; RenderCheckError unless it is a whole, self-contained document (doctype, html, head,
    title, body; tags closed; nothing loaded from elsewhere) with, when `require_script`, a script."""
    try:
        source = text.decode("utf-8") if isinstance(text, bytes) else text
        view = parse_html(source)
    except UnicodeDecodeError as exc:
        raise RenderCheckError("the page is not UTF-8 text") from exc
    problems = list(view.errors)
    if not view.doctype:
        problems.append("no <!DOCTYPE html>")
    problems += [f"no <{t}>" for t in ("html", "head", "body") if t not in view.tags]
    if not view.title.strip():
        problems.append("no <title>")
    if view.external:
        problems.append(f"it loads {view.external[0]} from elsewhere")
    if require_script and not any(s.strip() for s in view.scripts):
        problems.append("no script")
    if problems:
        raise RenderCheckError("the page is not a whole, self-contained HTML document: " + "; ".join(problems))
    return view
