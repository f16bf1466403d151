"""landing-page-block: a responsive landing page in one self-contained HTML file: a hero with the headline and
the call to action, feature cards, content sections, a signup section the call to action leads to, and the
sources. The model writes the copy; the page is built from it by the template in canvas_core/render/html.py,
so no input text ever becomes markup or script. An image from an image-block input is embedded in the hero."""

from __future__ import annotations

import re

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.deliverable import CITE, compose, draft, input_figures, sources, store
from canvas_core.models.catalog import BlockType
from canvas_core.prompt_format import NOT_COVERED, NOTHING_YET
from canvas_core.providers.offline import NO_MATERIAL
from canvas_core.render import RenderCheckError, html, html_check
from canvas_core.render.structure import BulletList, Deliverable, Paragraph, plain, sentences, spans

INSTRUCTIONS = (
    "Write the copy of a landing page in Markdown: '# ' with the headline, one sentence of tagline, '## Features' "
    "with three to six bullets written '**Name**: one sentence', up to three more '## ' sections (how it works, "
    "who it is for, questions and answers), and '## Call to action' with the button label (two to four words) on "
    f"its first line and one sentence under it. {CITE}"
)
MAX_FEATURES = 6
_LOGO = re.compile(r"\blogo", re.IGNORECASE)
NOTHING_SAID = (NOT_COVERED, NOTHING_YET, NO_MATERIAL)
_FEATURES = re.compile(r"feature|benefit|why|highlight", re.IGNORECASE)
_CTA = re.compile(r"call to action|\bcta\b|get started|sign up|join|contact", re.IGNORECASE)
_NAMED = re.compile(r"^\s*(?P<name>[^:\u2014\u2013]{2,60}?)\s*(?::|\u2014|\u2013| - )\s*(?P<text>.+)$")


def run(ctx: BlockContext) -> BlockOutput:
    # Images are shown, not read: the copy is written from the other inputs. Listed last, their sources keep
    # the numbers the copy cites the others by.
    readable = [n for n in ctx.inputs if n.type != BlockType.IMAGE.value]
    ctx.inputs = readable + [n for n in ctx.inputs if n.type == BlockType.IMAGE.value]
    text = draft(ctx, INSTRUCTIONS, role="designer", inputs=readable)
    copy = compose(ctx, text, with_input_tables=False, lead_title="About")
    # A page for the requester's customers: where the material has nothing, it has nothing (the run's answer
    # says so), rather than a sentence about the material.
    drop_statements(copy, NOTHING_SAID)
    page = html.LandingPage(
        title=copy.title,
        tagline=_take_tagline(copy),
        features=[],
        sections=[],
        references=copy.references,
        date=copy.date,
    )
    page.cta, page.cta_note = _take_cta(copy)
    page.features = _take_features(copy)
    page.sections = [s for s in copy.sections if s.blocks]
    page.logo, page.image, page.image_alt = _images(ctx, page.title)
    text = html.render_landing_page(page)
    artifact = store(ctx, page.title, "html", text.encode("utf-8"), html.CONTENT_TYPE, _check, label="landing page")
    outline = [f"# {page.title}", page.tagline, f"Call to action: {page.cta}"]
    outline += [f"- {plain(f.name)}: {plain(f.text)}" for f in page.features]
    outline += [f"## {s.title or 'About'}" for s in page.sections]
    return BlockOutput(content="\n\n".join(outline), sources=sources(ctx), artifacts=[artifact])


def drop_statements(copy: Deliverable, statements: tuple[str, ...]) -> None:
    for section in copy.sections:
        section.blocks = [b for b in section.blocks if not (isinstance(b, Paragraph) and b.text in statements)]
    copy.sections = [s for s in copy.sections if s.blocks]


def _take_tagline(copy: Deliverable) -> str:
    """The first sentence of the first section's opening paragraph, taken out of the page body."""
    first = copy.sections[0] if copy.sections else None
    if first is None or not first.blocks or not isinstance(first.blocks[0], Paragraph) or first.blocks[0].code:
        return ""
    block = first.blocks[0]
    tagline = (sentences(block.text) or [block.text])[0]
    rest = block.text[len(tagline) :].strip()
    if rest:
        block.text = rest
    else:
        first.blocks.pop(0)
    return tagline


def _take_cta(copy: Deliverable) -> tuple[str, str]:
    section = next((s for s in copy.sections if s.title and _CTA.search(s.title)), None)
    if section is None:
        return "Get started", ""
    copy.sections.remove(section)
    lines = [line for b in section.blocks if isinstance(b, Paragraph) for line in (b.lines or [b.text])]
    lines += [i for b in section.blocks if isinstance(b, BulletList) for i in b.items]
    label = plain(lines[0]).strip(" *[]\"'") if lines else ""
    if not label or len(label) > 40:
        return "Get started", " ".join(lines)
    return label, " ".join(lines[1:])


def _take_features(copy: Deliverable) -> list[html.Feature]:
    """Bullets of the Features section (else the first list) as cards named by their bold or leading words."""
    section = next((s for s in copy.sections if s.title and _FEATURES.search(s.title)), None)
    candidates = [section] if section else copy.sections
    for candidate in candidates:
        for block in candidate.blocks:
            if isinstance(block, BulletList):
                candidate.blocks.remove(block)
                if section is not None and not section.blocks:
                    copy.sections.remove(section)
                return [_feature(item) for item in block.items[:MAX_FEATURES]]
    return []


def _feature(item: str) -> html.Feature:
    parts = spans(item)
    if parts and parts[0].bold:
        return html.Feature(
            name=parts[0].text.rstrip(":"), text=item[len(parts[0].text) + 4 :].lstrip(" :-\u2013\u2014")
        )
    if named := _NAMED.match(plain(item)):
        return html.Feature(name=named.group("name"), text=named.group("text"))
    words = plain(item).split()
    name = " ".join(words[:5]) + ("…" if len(words) > 5 else "")
    return html.Feature(name=name, text=item if len(words) > 5 else "")


def _images(ctx: BlockContext, title: str) -> tuple[tuple[bytes, str] | None, tuple[bytes, str] | None, str]:
    """The logo (an uploaded image named or asked for as one) and the hero image (another upload, else one an
    input drew, else the logo itself), with the hero's alternative text. The requester's images come first."""
    figures = input_figures(ctx)
    uploads = [f for f in figures if f.uploaded]
    logo = next((f for f in uploads if _LOGO.search(f.caption)), None)
    if logo is None and len(uploads) == 1 and _LOGO.search(ctx.run.prompt):
        logo = uploads[0]
    hero = next((f for f in figures if f is not logo), logo)
    return (
        (logo.data, logo.mime) if logo else None,
        (hero.data, hero.mime) if hero else None,
        title if hero is None or hero is logo else hero.caption,
    )


def _check(data: bytes) -> html_check.HtmlView:
    view = html_check.check_html(data, require_script=True)
    if "signup" not in view.ids or not any(link == "#signup" for link in view.links):
        raise RenderCheckError("the page has no call to action leading to its signup section")
    return view
