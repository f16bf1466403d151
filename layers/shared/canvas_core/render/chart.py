"""PNG images drawn with Pillow, for image-block when no image model is at hand: a bar chart of a table's
numbers, else a title card. `check_png` reopens an image and says its size."""

from __future__ import annotations

import io
import textwrap

from PIL import Image, ImageDraw, ImageFont

from canvas_core.render import RenderCheckError
from canvas_core.render.structure import chart_columns, plain
from canvas_core.tables import Table, column_kinds, data_rows, typed_value

CONTENT_TYPE = "image/png"
WIDTH, HEIGHT = 1600, 900
BACKGROUND = (255, 255, 255)
INK = (33, 37, 41)
MUTED = (108, 117, 125)
GRID = (222, 226, 230)
SERIES = [(31, 78, 121), (46, 134, 171), (242, 153, 74)]
CARD_TOP, CARD_BOTTOM = (31, 78, 121), (20, 40, 70)


def raster(data: bytes, mime: str) -> tuple[bytes, str] | None:
    """An image as PNG or JPEG bytes, which Word and PowerPoint embed (WebP, GIF and the like are converted;
    an SVG is not drawn); None when it cannot be."""
    if mime in ("image/png", "image/jpeg"):
        return data, mime
    if mime == "image/svg+xml":
        return None
    try:
        with Image.open(io.BytesIO(data)) as image:
            out = io.BytesIO()
            image.convert("RGBA").save(out, format="PNG")
            return out.getvalue(), "image/png"
    except Exception:  # a damaged image is left out, not the deliverable
        return None


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def render_bar_chart(table: Table, title: str = "") -> bytes:
    """Bars per row of the table's label column, one series per value column (up to three), with axis labels."""
    columns = chart_columns(table)
    if columns is None:
        raise ValueError("the table has no label column with numbers to chart")
    label, values = columns
    rows = data_rows(table)
    kinds = column_kinds(table)
    series = [[_number(r[c]) for r in rows] for c in values]
    percent = all(kinds[c] == "percent" for c in values)
    top = max([0.0, *(v for s in series for v in s)])
    bottom = min([0.0, *(v for s in series for v in s)])
    span = (top - bottom) or 1.0

    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((60, 40), plain(title or table.caption or "Chart"), font=_font(44), fill=INK)
    left, right, plot_top, plot_bottom = 160, WIDTH - 60, 150, HEIGHT - 170
    for step in range(5):
        value = bottom + span * step / 4
        y = plot_bottom - (value - bottom) / span * (plot_bottom - plot_top)
        draw.line([(left, y), (right, y)], fill=GRID, width=2)
        draw.text((left - 12, y), _axis_label(value, percent), font=_font(22), fill=MUTED, anchor="rm")
    zero = plot_bottom - (0 - bottom) / span * (plot_bottom - plot_top)
    slot = (right - left) / len(rows)
    bar = slot * 0.75 / len(series)
    label_font = _font(22 if len(rows) <= 12 else 16)
    for i, row in enumerate(rows):
        x0 = left + slot * i + slot * 0.125
        for s, points in enumerate(series):
            y = plot_bottom - (points[i] - bottom) / span * (plot_bottom - plot_top)
            draw.rectangle([x0 + s * bar, min(y, zero), x0 + (s + 1) * bar - 4, max(y, zero)], fill=SERIES[s])
        name = textwrap.shorten(plain(row[label]) or "—", width=max(6, int(slot / 11)), placeholder="…")
        draw.text((left + slot * (i + 0.5), plot_bottom + 14), name, font=label_font, fill=INK, anchor="ma")
    draw.line([(left, zero), (right, zero)], fill=INK, width=2)
    legend_x = left
    for s, c in enumerate(values):
        draw.rectangle([legend_x, HEIGHT - 70, legend_x + 26, HEIGHT - 44], fill=SERIES[s])
        text = plain(table.headers[c])
        draw.text((legend_x + 36, HEIGHT - 57), text, font=_font(24), fill=INK, anchor="lm")
        legend_x += 80 + int(draw.textlength(text, font=_font(24)))
    return _png(image)


def render_card(title: str, subtitle: str = "") -> bytes:
    """A title card: the title large on a dark gradient, the subtitle under it."""
    image = Image.new("RGB", (WIDTH, HEIGHT), CARD_TOP)
    draw = ImageDraw.Draw(image)
    for y in range(HEIGHT):
        t = y / HEIGHT
        draw.line(
            [(0, y), (WIDTH, y)], fill=tuple(int(a + (b - a) * t) for a, b in zip(CARD_TOP, CARD_BOTTOM, strict=True))
        )
    lines = textwrap.wrap(plain(title), width=28)[:4]
    y = HEIGHT // 2 - len(lines) * 45
    for line in lines:
        draw.text((100, y), line, font=_font(80), fill=(255, 255, 255))
        y += 95
    if subtitle:
        for line in textwrap.wrap(plain(subtitle), width=60)[:2]:
            draw.text((100, y + 20), line, font=_font(36), fill=(214, 226, 240))
            y += 48
    draw.rectangle([100, 120, 260, 132], fill=(242, 153, 74))
    return _png(image)


def check_png(data: bytes) -> tuple[int, int]:
    """Reopen a PNG with Pillow; its (width, height), or RenderCheckError when it is not a whole PNG."""
    kind, size = check_image(data)
    if kind != "png":
        raise RenderCheckError(f"the image is {kind.upper()}, not PNG")
    return size


def check_image(data: bytes) -> tuple[str, tuple[int, int]]:
    """Reopen an image with Pillow: its format (png, jpeg, webp, ...) and size; RenderCheckError otherwise."""
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.verify()
            return (image.format or "").lower(), image.size
    except Exception as exc:
        raise RenderCheckError(f"the file does not reopen as an image ({type(exc).__name__})") from exc


def _png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _number(text: str) -> float:
    value = typed_value(text).value
    return float(value) if isinstance(value, int | float) else 0.0


def _axis_label(value: float, percent: bool) -> str:
    if percent:
        return f"{value:.0%}"
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:,.1f}M"
    if abs(value) >= 10_000:
        return f"{value / 1_000:,.0f}k"
    return f"{value:,.0f}" if abs(value) >= 10 or value == 0 else f"{value:,.2f}"
