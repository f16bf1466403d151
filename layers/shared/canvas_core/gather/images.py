"""Images: their metadata (format, dimensions, mode, frames, a few EXIF fields) and SVG made safe to serve.

Raster images are read with Pillow, which parses headers only (no pixel is decoded), with a stdlib reading
of the header as a fallback. SVG is parsed with defusedxml (no DTD, no entities) and rebuilt without
scripts, event handlers, foreign objects or any reference outside the document (`href` to a fragment or a
raster `data:` URL is kept; `url(...)` in styles must point inside the document too).
"""

from __future__ import annotations

import contextlib
import io
import re
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element


class ImageError(Exception):
    """The image cannot be read; the message says why."""


@dataclass
class ImageInfo:
    format: str
    width: int | None = None
    height: int | None = None
    mode: str | None = None
    frames: int = 1
    details: dict[str, str] = field(default_factory=dict)  # EXIF and SVG title/description
    text: str = ""  # text an SVG carries (<title>, <desc>, <text>)
    sanitized_svg: bytes | None = None  # an SVG's markup once made safe

    def describe(self) -> str:
        size = f"{self.width}x{self.height} pixels" if self.width and self.height else "dimensions unknown"
        parts = [f"{self.format.upper()}, {size}"]
        if self.mode:
            parts.append(f"{self.mode} colour")
        if self.frames > 1:
            parts.append(f"{self.frames} frames (animated)")
        return ", ".join(parts)


EXIF_TAGS = {271: "camera make", 272: "camera model", 306: "taken", 270: "description", 315: "artist"}


def image_info(extension: str, data: bytes, name: str = "The image") -> ImageInfo:
    """What an image is; raises ImageError when its bytes are not the image its extension says."""
    extension = "jpeg" if extension == "jpg" else extension
    if extension == "svg":
        return _svg_info(data, name)
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:  # a function without Pillow still reports what the header says
        size = header_dimensions(extension, data)
        return ImageInfo(format=extension, width=size[0] if size else None, height=size[1] if size else None)
    try:
        with Image.open(io.BytesIO(data)) as image:
            info = ImageInfo(
                format=(image.format or extension).lower(),
                width=image.width,
                height=image.height,
                mode=image.mode,
                frames=int(getattr(image, "n_frames", 1) or 1),
            )
            try:
                exif = image.getexif()
            except Exception:  # EXIF is optional; a broken block of it does not make the image unreadable
                exif = Image.Exif()
            for tag, label in EXIF_TAGS.items():
                value = exif.get(tag)
                if isinstance(value, str | bytes) and str(value).strip():
                    info.details[label] = (value.decode("utf-8", "replace") if isinstance(value, bytes) else value)[
                        :200
                    ].strip()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, struct.error) as exc:
        raise ImageError(f"{name} could not be read as a {extension.upper()} image") from exc
    if info.format not in (extension, "mpo"):  # MPO is a JPEG with extra frames
        raise ImageError(f"{name} is a {info.format.upper()} image, not {extension.upper()}")
    return info


def header_dimensions(extension: str, data: bytes) -> tuple[int, int] | None:
    """Width and height from the file header alone (stdlib)."""
    try:
        if extension == "png":
            return struct.unpack(">II", data[16:24])
        if extension == "gif":
            return struct.unpack("<HH", data[6:10])
        if extension in ("jpg", "jpeg"):
            return _jpeg_dimensions(data)
        if extension == "webp":
            return _webp_dimensions(data)
        if extension == "svg":
            match = re.search(rb'<svg[^>]*\bwidth="(\d+)[^"]*"[^>]*\bheight="(\d+)', data[:4096])
            return (int(match.group(1)), int(match.group(2))) if match else None
    except struct.error:
        return None
    return None


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


def _webp_dimensions(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


# ---------------------------------------------------------------------------------------------- SVG

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
DROP_ELEMENTS = {"script", "foreignobject", "iframe", "embed", "object", "handler", "listener", "set", "animate"}
REFERENCE_ATTRIBUTES = {"href", "src", "action", "formaction", "data"}
SAFE_DATA_URL = re.compile(r"^data:image/(png|jpeg|jpg|gif|webp);base64,[a-z0-9+/=\s]*$", re.I)
EXTERNAL_CSS = re.compile(r"url\(\s*['\"]?\s*(?!#)[^)]*\)|@import|expression\(|javascript:", re.I)


@dataclass
class SanitizedSvg:
    markup: bytes
    removed: list[str]  # what was taken out, e.g. "script", "onload attribute", "external reference"


def sanitize_svg(data: bytes, name: str = "The SVG") -> SanitizedSvg:
    """The SVG rebuilt without scripts, event handlers or external references; ImageError when unreadable."""
    import xml.etree.ElementTree as ET

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        root = fromstring(data, forbid_dtd=True)
    except DefusedXmlException as exc:
        raise ImageError(f"{name} declares a DTD or entities, which are not accepted in SVG uploads") from exc
    except ET.ParseError as exc:
        raise ImageError(f"{name} is not well-formed SVG ({exc})") from exc
    if _local(root.tag) != "svg":
        raise ImageError(f"{name} is not an SVG document (its root is <{_local(root.tag)}>)")
    removed: list[str] = []
    _clean_element(root, removed)
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    return SanitizedSvg(markup=ET.tostring(root, encoding="utf-8", xml_declaration=True), removed=removed)


def _clean_element(element: Element, removed: list[str]) -> None:
    for child in list(element):
        if not isinstance(child.tag, str):  # comments and processing instructions
            element.remove(child)
            continue
        tag = _local(child.tag).lower()
        if tag in DROP_ELEMENTS:
            element.remove(child)
            removed.append(tag)
            continue
        if tag == "style" and child.text and EXTERNAL_CSS.search(child.text):
            child.text = EXTERNAL_CSS.sub("none", child.text)
            removed.append("external reference in <style>")
        _clean_element(child, removed)
    for attribute in list(element.attrib):
        local = _local(attribute).lower()
        value = element.attrib[attribute].strip()
        if local.startswith("on"):
            del element.attrib[attribute]
            removed.append(f"{local} attribute")
        elif local in REFERENCE_ATTRIBUTES and not (value.startswith("#") or SAFE_DATA_URL.match(value)):
            del element.attrib[attribute]
            removed.append("external reference")
        elif local == "style" and EXTERNAL_CSS.search(value):
            element.attrib[attribute] = EXTERNAL_CSS.sub("none", value)
            removed.append("external reference in style")
        elif EXTERNAL_CSS.search(value) and "url(" in value.lower():
            del element.attrib[attribute]
            removed.append("external reference")


def _svg_info(data: bytes, name: str) -> ImageInfo:
    sanitized = sanitize_svg(data, name)
    import xml.etree.ElementTree as ET

    root = ET.fromstring(sanitized.markup)  # our own output: already defused
    width, height = _svg_length(root.get("width")), _svg_length(root.get("height"))
    if (width is None or height is None) and root.get("viewBox"):
        numbers = re.split(r"[\s,]+", root.get("viewBox", "").strip())
        if len(numbers) == 4:
            with contextlib.suppress(ValueError):
                width, height = width or round(float(numbers[2])), height or round(float(numbers[3]))
    texts = []
    for element in root.iter():
        if isinstance(element.tag, str) and _local(element.tag) in ("title", "desc", "text", "tspan"):
            text = " ".join("".join(element.itertext()).split()) if _local(element.tag) != "tspan" else ""
            if text and text not in texts:
                texts.append(text)
    info = ImageInfo(
        format="svg", width=width, height=height, text="; ".join(texts)[:2000], sanitized_svg=sanitized.markup
    )
    if sanitized.removed:
        info.details["sanitized"] = ", ".join(dict.fromkeys(sanitized.removed))
    return info


def _svg_length(value: str | None) -> int | None:
    match = re.match(r"^\s*([\d.]+)\s*(px)?\s*$", value or "")
    return round(float(match.group(1))) if match else None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
