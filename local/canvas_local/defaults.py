"""Defaults the `canvas` command and the stack share, apart from the stack so commands start without moto."""

from pathlib import Path

DEFAULT_TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"
PROVIDERS = ("offline", "bedrock", "openai")
