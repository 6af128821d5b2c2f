"""The one packaging step pyproject.toml cannot say: the image build contexts live at the top level
(`images/`: base and sandbox, the one source) and ship inside the package as `harness/images/`,
where an installed harness finds them (harness/sandbox/docker/images.py `images_dir`). The rest of
the configuration is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

setup(packages=[*find_namespace_packages(include=["harness*"]), "harness.images"],
      package_dir={"harness.images": "images"})
