"""The provider contract's image operations: optional, and a provider without images declines
`harness images build|list|prune` with one line and exit 2 (not an AttributeError traceback)."""

from __future__ import annotations

import pytest

from harness import exit_codes
from harness.errors import InputError
from harness.sandbox.contract import SandboxProvider
from tests.helpers.e2e import explain, harness
from tests.helpers.providers import NoImagesProvider

PLUGIN = "tests.helpers.providers:NoImagesProvider"


@pytest.mark.parametrize("command", ["build", "list", "prune"])
def test_a_provider_without_images_declines_every_images_command_in_one_line(command):
    proc = harness("images", command, "--sandbox", PLUGIN)
    assert proc.returncode == exit_codes.INPUT, explain(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, explain(proc)
    assert lines[0].startswith("error (input): the sandbox provider tests.helpers.providers:NoImagesProvider "
                               "has no images of its own"), lines[0]
    assert proc.stdout == ""


def test_the_image_operations_default_to_declining():
    provider = NoImagesProvider()
    for call, operation in ((lambda: provider.build_image(force=True), "build_image"),
                            (provider.list_images, "list_images"), (provider.prune_images, "prune_images")):
        with pytest.raises(InputError, match=f"does not implement {operation}"):
            call()
    named = type("Named", (NoImagesProvider,), {"name": "lab"})()
    with pytest.raises(InputError, match="the sandbox provider lab has no images"):
        named.list_images()
    assert not getattr(SandboxProvider.build_image, "__isabstractmethod__", False)  # optional, not required
