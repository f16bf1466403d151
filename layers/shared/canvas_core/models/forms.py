"""A request's form as the API parsed it (api/forms.py): its text fields and its uploaded files, which
validation.py turns into a CreateRunRequest."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class FilePart:
    filename: str
    content_type: str
    data: bytes


@dataclass
class Form:
    fields: dict[str, str] = field(default_factory=dict)
    files: list[FilePart] = field(default_factory=list)
