"""The search index of a canvas's files: each file-block's text cut into overlapping chunks that keep their
citation (file name, page), scored with BM25 (k1 = 1.5, b = 0.75). A file-block stores its chunks in S3 with
the run (`uploads/<account>/<run>/index/<block_id>.json`, expiring with the uploads); a downstream block
searches the indexes of its input file-blocks (blocks/deep_research.py).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from canvas_core.gather.extract import Section

if TYPE_CHECKING:
    from canvas_core.adapters.artifacts import ArtifactStore

CHUNK_CHARS = 1200
OVERLAP_CHARS = 200
K1, B = 1.5, 0.75
STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have", "in", "is", "it",
        "its", "of", "on", "or", "that", "the", "their", "there", "these", "this", "to", "was", "were", "will",
        "with", "what", "which", "who", "how", "why", "when", "where", "do", "does", "did", "not", "no", "so",
        "than", "then", "them", "they", "we", "you", "your", "our",
    }
)  # fmt: skip


def tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"[^\W_]+", text.lower()) if t not in STOPWORDS]


@dataclass
class Chunk:
    text: str
    file_name: str
    page: int | None = None


@dataclass
class Hit:
    score: float
    chunk: Chunk


def chunk_sections(sections: list[Section], size: int = CHUNK_CHARS, overlap: int = OVERLAP_CHARS) -> list[Chunk]:
    """Chunks of about `size` characters, cut at paragraph or sentence ends where there is one."""
    chunks = []
    for section in sections:
        text = section.text.strip()
        start = 0
        while start < len(text):
            end = min(len(text), start + size)
            if end < len(text):
                window = text[start:end]
                cut = max(window.rfind("\n\n"), window.rfind(". "), window.rfind("\n"))
                if cut > size // 2:
                    end = start + cut + 1
            piece = text[start:end].strip()
            if piece:
                chunks.append(Chunk(text=piece, file_name=section.file_name, page=section.page))
            if end >= len(text):
                break
            start = max(end - overlap, start + 1)
    return chunks


class Bm25Index:
    def __init__(self, chunks: list[Chunk]):
        self.chunks = chunks
        self._terms = [Counter(tokens(c.text)) for c in chunks]
        self._lengths = [sum(t.values()) for t in self._terms]
        self.avgdl = (sum(self._lengths) / len(chunks)) if chunks else 0.0
        self.doc_freq: Counter[str] = Counter()
        for terms in self._terms:
            self.doc_freq.update(terms.keys())

    def search(self, query: str, k: int = 5) -> list[Hit]:
        n = len(self.chunks)
        query_terms = list(dict.fromkeys(tokens(query)))
        hits = []
        for i, terms in enumerate(self._terms):
            score = 0.0
            for term in query_terms:
                tf = terms.get(term)
                if not tf:
                    continue
                df = self.doc_freq[term]
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                norm = tf + K1 * (1 - B + B * self._lengths[i] / (self.avgdl or 1))
                score += idf * tf * (K1 + 1) / norm
            if score > 0:
                hits.append(Hit(score=round(score, 4), chunk=self.chunks[i]))
        hits.sort(key=lambda h: -h.score)
        return hits[:k]

    def to_json(self) -> bytes:
        return json.dumps(
            {"version": 1, "chunks": [asdict(c) for c in self.chunks], "avgdl": self.avgdl, "df": self.doc_freq},
            ensure_ascii=False,
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Bm25Index:
        return cls([Chunk(**c) for c in json.loads(data)["chunks"]])


def index_key(account_id: str, run_id: str, block_id: str) -> str:
    return f"uploads/{account_id}/{run_id}/index/{block_id}.json"


def save_index(files: ArtifactStore, key: str, index: Bm25Index) -> None:
    files.put(key, index.to_json(), "application/json")
