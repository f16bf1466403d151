"""Text out of each upload format, with the library made for it; clear reasons for files that cannot be read."""

from __future__ import annotations

import csv

import pytest

from canvas_core.gather.extract import ExtractionError, extract
from canvas_core.gather.images import ImageError, image_info, sanitize_svg
from tests.fakes import files

pytestmark = pytest.mark.unit

DOCUMENTS = [n for n in files.all_formats() if n.rsplit(".", 1)[1] not in ("png", "jpeg", "gif", "webp", "svg")]
IMAGES = [n for n in files.all_formats() if n not in DOCUMENTS]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_each_document_format_gives_its_text(name):
    # Given
    data, marker = files.all_formats()[name]
    # When
    extraction = extract(name, name.rsplit(".", 1)[1], data)
    # Then
    assert marker in extraction.text()
    assert all(s.file_name.startswith(name) for s in extraction.sections)


@pytest.mark.parametrize("name", IMAGES)
def test_each_image_format_gives_its_metadata(name):
    data, marker = files.all_formats()[name]
    info = image_info(name.rsplit(".", 1)[1], data, name)
    assert marker in f"{info.describe()} {info.text}"


def test_pdf_pages_keep_their_numbers():
    extraction = extract("two.pdf", "pdf", files.pdf(["First page text here.", "Second page text here."]))
    assert [(s.page, s.text) for s in extraction.sections] == [
        (1, "First page text here."),
        (2, "Second page text here."),
    ]


def test_docx_keeps_headings_and_tables():
    data = files.docx("Findings", ["Sales rose."], table=[["region", "sales"], ["North", "10"]])
    text = extract("f.docx", "docx", data).text()
    assert text.startswith("# Findings\n\nSales rose.")
    assert "| region | sales |" in text and "| North | 10 |" in text


def test_xlsx_gives_a_typed_table_per_sheet():
    data = files.xlsx({"Q1": [["item", "units", "ok"], ["bolts", 3, True]], "Empty": [], "Q2": [["item"], ["nuts"]]})
    extraction = extract("book.xlsx", "xlsx", data)
    assert [s.heading for s in extraction.sections] == ["Sheet Q1", "Sheet Q2"]
    assert "Columns: item (text), units (integer), ok (boolean)" in extraction.sections[0].text


def test_zip_members_are_read_by_their_own_type():
    archive = files.zip_of(
        {
            "a/report.pdf": files.pdf(["Inner PDF says hello."]),
            "a/sheet.xlsx": files.xlsx({"S": [["k", "v"], ["x", 1]]}),
            "a/pic.png": files.image("png", (3, 2)),
            "a/nested.zip": files.zip_of({"x.txt": b"x"}),
            "a/tool.exe": b"MZ\x00\x00",
            "a/broken.json": b"{not json",
        }
    )
    extraction = extract("bundle.zip", "zip", archive)
    text = extraction.text()
    assert "Inner PDF says hello." in text
    assert "| x | 1 |" in text
    assert "Image a/pic.png: PNG, 3x2 pixels" in text
    assert {s.file_name for s in extraction.sections} == {
        "bundle.zip/a/report.pdf",
        "bundle.zip/a/sheet.xlsx",
        "bundle.zip/a/pic.png",
    }
    assert "bundle.zip/a/nested.zip: archives inside archives are not opened" in extraction.notes
    assert any("tool.exe: .exe files are not read" in n for n in extraction.notes)
    assert any("broken.json is not valid JSON" in n for n in extraction.notes)


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("locked.pdf", files.encrypted_pdf("secret text"), "locked.pdf is encrypted (password-protected)"),
        ("broken.pdf", b"%PDF-1.4\n%fake but well-headed\n", "broken.pdf could not be read as a PDF: it is damaged"),
        ("scan.pdf", files.pdf([""]), "scan.pdf has no text to read"),
        ("broken.docx", files.zip_of({"word/x.xml": b"<x/>"}), "broken.docx could not be read as a Word document"),
        ("broken.xlsx", files.zip_of({"xl/x.xml": b"<x/>"}), "broken.xlsx could not be read as an Excel workbook"),
        ("bomb.docx", files.ratio_zip_bomb(), "bomb.docx looks like a zip bomb"),
        ("bad.yaml", b"key: [1, 2\nother: }", "bad.yaml is not valid YAML"),
        ("bad.json", b'{"a": }', "bad.json is not valid JSON (line 1, column 7"),
        ("latin.txt", "caf\u00e9".encode("latin-1"), "latin.txt is not UTF-8 text"),
        ("binary.csv", b"a,b\x00\x01", "binary.csv is not a text file"),
        ("locked.zip", files.encrypted_member_zip(), "locked.zip is encrypted"),
        ("evil.zip", files.zip_of({"../evil.txt": b"x"}), "evil.zip has an entry with an unsafe path"),
        ("empty.zip", files.zip_of({"a/tool.exe": b"MZ"}), "empty.zip has nothing that could be read"),
        ("notes.rtf", b"{\\rtf1}", ".rtf files are not read"),
    ],
)
def test_unreadable_files_fail_with_a_clear_reason(name, data, reason):
    with pytest.raises(ExtractionError) as failed:
        extract(name, name.rsplit(".", 1)[1], data)
    assert reason in str(failed.value)


def test_svg_loses_scripts_handlers_and_external_references():
    # When
    sanitized = sanitize_svg(files.SVG)
    markup = sanitized.markup.decode()
    # Then
    for gone in ("<script", "onclick", "tracker.example", "javascript:", "foreignObject", "evil.example"):
        assert gone not in markup
    assert "Q3 growth 12%" in markup and "<rect" in markup
    assert set(sanitized.removed) >= {"script", "onclick attribute", "external reference", "foreignobject"}


def test_svg_keeps_fragment_references_and_rewrites_external_css():
    svg = (
        b'<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" viewBox="0 0 30 20">'
        b'<style>@import url("https://evil.example/x.css"); rect { fill: url(#g) }</style>'
        b'<defs><linearGradient id="g"/></defs><use xlink:href="#g"/>'
        b'<rect style="background: url(https://evil.example/a.png)" width="3" height="2"/></svg>'
    )
    info = image_info("svg", svg)
    markup = info.sanitized_svg.decode()
    assert 'href="#g"' in markup and "url(#g)" in markup
    assert "evil.example" not in markup
    assert (info.width, info.height) == (30, 20)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY x "y">]><svg xmlns="http://www.w3.org/2000/svg">&x;</svg>',
            "declares a DTD",
        ),
        (b"<svg><rect></svg>", "is not well-formed SVG"),
        (b'<html xmlns="http://www.w3.org/1999/xhtml"><svg/></html>', "is not an SVG document"),
    ],
)
def test_unsafe_or_broken_svg_is_refused(data, reason):
    with pytest.raises(ImageError, match=reason):
        image_info("svg", data, "x.svg")


def test_a_damaged_or_mislabelled_image_is_refused():
    with pytest.raises(ImageError, match="could not be read as a PNG image"):
        image_info("png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 10, "x.png")
    with pytest.raises(ImageError, match="is a JPEG image, not PNG"):
        image_info("png", files.image("jpeg"), "x.png")


def test_exif_fields_are_kept():
    import io

    from PIL import Image

    image = Image.new("RGB", (2, 2))
    exif = Image.Exif()
    exif[271], exif[272] = "Canon", "EOS 5D"
    out = io.BytesIO()
    image.save(out, format="JPEG", exif=exif)
    info = image_info("jpg", out.getvalue())
    assert info.details == {"camera make": "Canon", "camera model": "EOS 5D"}


@pytest.mark.parametrize(
    ("data", "rows"),
    [
        (b"a,b\nx,\ry\n", "| x |  |\n| y |  |"),  # a bare CR in an unquoted field ends its row
        (b"a,b\rx,y\rz,w\r", "| x | y |\n| z | w |"),  # an old Mac file: every row ends with CR
        (b'a,b\r\n"x\ry",z\r\n', "| x y | z |"),  # inside quotes it is a line break in the cell
    ],
)
def test_a_csv_reads_a_bare_carriage_return_as_a_spreadsheet_does(data, rows):
    assert extract("cr.csv", "csv", data).text().endswith(f"| a | b |\n| --- | --- |\n{rows}")


@pytest.fixture
def default_csv_field_limit():
    """csv's limit is process-wide and only ever raised: each test starts from Python's default."""
    previous = csv.field_size_limit(131_072)
    yield
    csv.field_size_limit(previous)


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_a_csv_field_longer_than_pythons_default_limit_is_read_whole(delimiter, default_csv_field_limit):
    # Given: one cell of 200 KiB, past the csv module's default field_size_limit of 131,072 characters
    long_cell = "word " * 40_960
    data = f'name{delimiter}notes\r\nfirst{delimiter}"{long_cell}"\r\nsecond{delimiter}short\r\n'.encode()
    # When
    text = extract("long.csv", "csv", data).text()
    # Then
    assert long_cell.strip() in text
    assert "| second | short |" in text
