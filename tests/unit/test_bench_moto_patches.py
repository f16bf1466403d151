"""bench/moto_patches.py: what each moto patch buys is measured with the patch in and out, so taking one out and
putting it back must leave moto_patch as it was."""

from __future__ import annotations

import pytest
from moto.dynamodb.models.table import Table

from bench.moto_patches import MEMORY_PATCHES, memory_patches_left_out
from canvas_local import moto_patch

pytestmark = pytest.mark.unit


def test_a_memory_patch_left_out_is_not_installed_and_is_back_after():
    # Given moto's own table constructor, and moto_patch's install functions
    own_init = Table.__init__
    installs = {name: getattr(moto_patch, install) for name, install in MEMORY_PATCHES.items()}
    # When the stack would install the packed items while they are left out
    with memory_patches_left_out(["packed_items"]):
        moto_patch.install_packed_items()
        # Then moto's tables are moto's, and the other memory patches are still moto_patch's
        assert Table.__init__ is own_init
        assert moto_patch.install_untracked_models is installs["untracked_models"]
    # And after, every install function is moto_patch's again
    assert {name: getattr(moto_patch, install) for name, install in MEMORY_PATCHES.items()} == installs


def test_a_speed_patch_taken_out_and_put_back_replaces_its_attributes_again():
    # Given a speed patch the stack installs
    patch = moto_patch.speed_patches()["queries_read_their_items"]
    (replacement,) = patch.replacements
    patch.install()
    try:
        # When it is taken out, then put back (as bench/moto_patches.py alternates)
        patch.uninstall()
        out = Table.query
        patch.install()
        # Then moto's own query was back in between, and the patch is in again
        assert out is replacement.original
        assert Table.query is replacement.patch
    finally:
        patch.uninstall()
