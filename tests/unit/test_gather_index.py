"""The BM25 index of a canvas's files: chunks that keep their citation, ranked for a query."""

from __future__ import annotations

import pytest

from canvas_core.gather.extract import Section
from canvas_core.gather.index import Bm25Index, chunk_sections, tokens

pytestmark = pytest.mark.unit


def test_chunks_keep_file_and_page_and_overlap():
    # Given a long page
    text = " ".join(f"Sentence number {i} talks about tides." for i in range(200))
    # When
    chunks = chunk_sections([Section(text=text, file_name="a.pdf", page=3)], size=500, overlap=100)
    # Then
    assert len(chunks) > 10
    assert all(c.file_name == "a.pdf" and c.page == 3 and len(c.text) <= 500 for c in chunks)
    assert chunks[0].text.endswith(".") and chunks[1].text[:30] in chunks[0].text


def test_bm25_ranks_the_chunk_about_the_query_first():
    index = Bm25Index(
        chunk_sections(
            [
                Section(text="The budget for 2025 grows by nine percent.", file_name="plan.md"),
                Section(text="Hiring: two engineers and one designer join in March.", file_name="hr.txt"),
                Section(text="The budget covers hiring and travel.", file_name="notes.txt"),
            ]
        )
    )
    hits = index.search("when do the engineers join?", k=2)
    assert [h.chunk.file_name for h in hits] == ["hr.txt"]
    # The shorter chunk with the term ranks first (BM25's length normalisation)
    assert [h.chunk.file_name for h in index.search("budget")] == ["notes.txt", "plan.md"]
    assert index.search("volcano") == []


def test_an_index_survives_storage():
    index = Bm25Index(chunk_sections([Section(text="Anemones live in tide pools.", file_name="t.txt", page=None)]))
    again = Bm25Index.from_json(index.to_json())
    assert [(h.chunk.text, h.chunk.file_name) for h in again.search("anemones")] == [
        ("Anemones live in tide pools.", "t.txt")
    ]


def test_tokens_drop_stopwords_and_punctuation():
    assert tokens("The Budget, for 2025: what's NEW?") == ["budget", "2025", "s", "new"]
