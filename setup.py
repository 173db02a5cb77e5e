"""Build hook: the preset configs (configs/*.yaml) ship inside the wheel as rlvr/presets/, so an
installed `rlvr train` finds its default preset outside a checkout. Everything else is in
pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CONFIGS = Path(__file__).resolve().parent / "configs"


class BuildPyWithPresets(build_py):
    """build_py, then copy the preset YAML files into the built package."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "rlvr" / "presets"
        target.mkdir(parents=True, exist_ok=True)
        for path in sorted(CONFIGS.glob("*.yaml")):
            shutil.copy2(path, target / path.name)


setup(cmdclass={"build_py": BuildPyWithPresets})
