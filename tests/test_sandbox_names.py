import re

import pytest

from harness.errors import InputError
from harness.sandbox.docker import naming
from harness.sandbox.files import check_name

DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")


@pytest.mark.parametrize("instance_id", [
    "plain", "with spaces and / slashes", "ünïcödé 名前", "x" * 300, "../../etc", "-leading", "...", "",
])
def test_container_names_follow_docker_rules(instance_id):
    name = naming.container_name("run 1/é", instance_id, 3)
    assert DOCKER_NAME.match(name), name
    assert len(name) <= naming.MAX_NAME
    assert "-a3-" in name


def test_ids_that_slugify_alike_get_different_names():
    a = naming.container_name("r", "a/b", 1)
    b = naming.container_name("r", "a b", 1)
    assert a.rsplit("-", 2)[0] != b.rsplit("-", 2)[0]  # differ before the random suffix


def test_owner_of_this_process_is_alive_and_a_dead_pid_is_not():
    assert naming.owner_alive(naming.owner_token()) is True
    host = naming.owner_token().split(":")[0]
    assert naming.owner_alive(f"{host}:999999999:1") is False
    assert naming.owner_alive("other-host:1:1") is None


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", "", "C:/x"])
def test_bad_file_names_refused(bad):
    with pytest.raises(InputError):
        check_name(bad)
