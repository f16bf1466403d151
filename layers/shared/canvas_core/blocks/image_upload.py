"""image-block for an uploaded image: its format, dimensions and metadata, as a downstream block can cite
them, and a description by a multimodal model when the provider has one (a `describe_image` method). An SVG
is sanitized (no scripts, no external references) and the safe copy is kept next to the upload."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from canvas_core.blocks.context import BlockContext, BlockOutput
from canvas_core.blocks.file import find_upload
from canvas_core.errors import BlockFatalError
from canvas_core.gather.images import ImageError, ImageInfo, image_info
from canvas_core.models.items import Source, Upload
from canvas_core.providers.base import Completion

# The formats multimodal models take as images (an SVG is described from its text instead).
DESCRIBABLE = {"png", "jpg", "jpeg", "gif", "webp"}


@runtime_checkable
class ImageDescriber(Protocol):
    """What a provider offers when its model can see images."""

    def describe_image(self, *, system: str, prompt: str, image: bytes, image_format: str, role: str) -> Completion: ...


def run(ctx: BlockContext) -> BlockOutput:
    upload = find_upload(ctx, "image")
    data = ctx.files.get(upload.s3_key)
    try:
        info = image_info(upload.extension, data, upload.name)
    except ImageError as exc:
        raise BlockFatalError(str(exc)) from exc
    lines = [f"Image {upload.name}: {info.describe()}, {upload.size_bytes} bytes."]
    if info.sanitized_svg is not None:
        ctx.files.put(sanitized_svg_key(upload), info.sanitized_svg, "image/svg+xml")
        removed = info.details.pop("sanitized", "")
        lines.append("Sanitized for display" + (f": removed {removed}." if removed else ": nothing unsafe found."))
    if info.details:
        lines.append("Metadata: " + "; ".join(f"{k}: {v}" for k, v in info.details.items()) + ".")
    if info.text:
        lines.append(f"Text in the image: {info.text}")
    description = describe(ctx, upload, data, info)
    if description:
        lines.append(f"Description: {description}")
    return BlockOutput(content="\n".join(lines), sources=[Source(file_name=upload.name, title=upload.name)])


def describe(ctx: BlockContext, upload: Upload, data: bytes, info: ImageInfo) -> str | None:
    if upload.extension not in DESCRIBABLE or not isinstance(ctx.provider, ImageDescriber):
        return None
    task = ctx.node.instructions or ctx.run.prompt
    prompt = (
        f"Describe the image {upload.name} for a research team: what it shows, any text in it, and what in it "
        f"bears on this task: {task}"
    )
    try:
        completion = ctx.provider.describe_image(
            system=ctx.system_prompt(),
            prompt=prompt,
            image=data,
            image_format="jpeg" if upload.extension == "jpg" else upload.extension,
            role="vision",  # VISION_MODEL_ID, else the writer's model
        )
    except BlockFatalError as exc:  # the metadata still stands without a description
        ctx.note(f"The image {upload.name} was not described ({exc}); its metadata was kept")
        return f"(not available: {exc})"
    ctx.usage.record(completion)
    return completion.text.strip() or None


def sanitized_svg_key(upload: Upload) -> str:
    """Where the safe copy of an uploaded SVG is kept: beside the upload."""
    return upload.s3_key.rsplit("/", 1)[0] + "/derived/sanitized.svg"
