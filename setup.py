"""Only the package list: every package under app/ is found, so a new folder cannot be left out of the wheel.

The rest of the build's configuration is in pyproject.toml; ``app.resources`` is the top-level resources/
folder (``package-dir`` there), which a search under app/ cannot find by itself.
"""

from setuptools import find_packages, setup

setup(packages=[*find_packages(include=["app", "app.*"]), "app.resources"])
