"""image-block for an uploaded image: its format, size and dimensions, as a downstream block can cite them."""

from __future__ import annotations

import re
import struct

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.errors import BlockFatalError
from canvas_core.models.items import Source


def run(ctx: BlockContext) -> BlockOutput:
    upload = next((u for u in ctx.run.uploads if u.file_id == ctx.node.upload_id), None)
    if upload is None:
        raise BlockFatalError(f"The image for block '{ctx.node.name}' is missing from the run")
    data = ctx.files.get(upload.s3_key)
    size = dimensions(upload.extension, data)
    described = f"{size[0]}x{size[1]} pixels" if size else "dimensions unknown"
    content = f"Image {upload.name}: {upload.extension.upper()}, {described}, {upload.size_bytes} bytes."
    return BlockOutput(content=content, sources=[Source(file_name=upload.name, title=upload.name)])


def dimensions(extension: str, data: bytes) -> tuple[int, int] | None:
    try:
        if extension == "png":
            return struct.unpack(">II", data[16:24])
        if extension == "gif":
            return struct.unpack("<HH", data[6:10])
        if extension in ("jpg", "jpeg"):
            return _jpeg_dimensions(data)
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
