"""Rendering of deliverables: plain functions from plain data (`structure.py`) to file bytes, and the checks
that reopen each file with its library before it is stored.

`structure.py`, `html.py` (its stylesheets and scripts are files in `assets/`) and `html_check.py` use the
standard library only; `docx.py`, `pptx.py`, `xlsx.py` and `chart.py` import python-docx, python-pptx, openpyxl
and Pillow at the top, so import them only where they are needed (each block function lists its own in
`functions/blocks/<type>_block/requirements.txt`).
"""

from __future__ import annotations


class RenderCheckError(Exception):
    """A rendered file did not reopen with its library, or lacks the structure it must have."""
