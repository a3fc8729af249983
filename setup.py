"""Packaging beyond pyproject.toml: a built wheel carries bench's Hydra configs (conf/), image
definitions (docker/), the Horovod patch (patches/) and the two set-up scripts that
`bench setup` runs inside the package, as bench/_data/, so that an installed
``bench`` runs outside the checkout (bench/core/paths.py finds them).  An editable install reads
them from the checkout instead."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

DATA = ("conf", "docker", "patches")
SCRIPTS = ("setup_mxnet.sh", "setup_horovod.sh")  # run by `bench setup`
SKIP = shutil.ignore_patterns("__pycache__", "wheelhouse")


class BuildWithData(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in DATA:
            target = Path(self.build_lib, "bench", "_data", name)
            shutil.copytree(name, target, ignore=SKIP, dirs_exist_ok=True)
        for name in SCRIPTS:
            target = Path(self.build_lib, "bench", "_data", "scripts", name)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path("scripts", name), target)


setup(cmdclass={"build_py": BuildWithData})
