"""Packaging beyond pyproject.toml: a built wheel carries bench's Hydra configs (conf/) and
image definitions (docker/) inside the package, as bench/_data/, so that an installed
``bench`` runs outside the checkout (bench/paths.py finds them).  An editable install reads
them from the checkout instead."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("conf", "docker")
SKIP = shutil.ignore_patterns("__pycache__", "wheelhouse")


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in DATA:
            target = Path(self.build_lib, "bench", "_data", name)
            shutil.copytree(name, target, ignore=SKIP, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildWithData})
