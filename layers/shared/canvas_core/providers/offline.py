"""The offline provider: deterministic, no network. It writes extractively from the material a run has
gathered and says plainly that no language model was called."""

from __future__ import annotations

import re

from canvas_core.providers.base import Completion

MODEL_ID = "offline/extractive-v1"
NOTICE = "Offline answer: no language model was called (this deployment uses the deterministic offline provider)."


class OfflineProvider:
    def complete(self, *, system: str, prompt: str, role: str) -> Completion:
        task, _, material = prompt.partition("\n\nMaterial:\n")
        lines = [NOTICE, "", f"Task: {_first_paragraph(task)}"]
        sentences = _sentences(material)
        if sentences:
            lines += ["", "Key points from the material:"]
            lines += [f"- {s}" for s in sentences[:8]]
        else:
            lines += ["", "No material was provided beyond the prompt itself."]
        text = "\n".join(lines)
        return Completion(
            text=text, model_id=MODEL_ID, input_tokens=_tokens(system + prompt), output_tokens=_tokens(text)
        )


def _first_paragraph(text: str) -> str:
    return text.strip().split("\n\n")[0].strip()


def _sentences(text: str) -> list[str]:
    found, seen = [], set()
    for raw in re.split(r"(?<=[.!?])\s+|\n+", text):
        sentence = raw.strip(" -*#\t")
        if len(sentence) >= 20 and sentence.lower() not in seen and not sentence.startswith(NOTICE[:20]):
            seen.add(sentence.lower())
            found.append(sentence if len(sentence) <= 300 else sentence[:297] + "...")
    return found


def _tokens(text: str) -> int:
    # About four characters a token, the usual rule of thumb for English.
    return max(1, len(text) // 4)
