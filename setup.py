"""Package discovery that pyproject.toml alone cannot express.

The repository keeps ``cypher/`` and ``docker/`` at the top level (design card),
but the installed package must carry them: they are mapped to the data
packages ``kope._resources.cypher`` and ``kope._resources.docker``. The
cold-tier knowledge documents ``kope/knowledge/*.md`` (a folder without
``__init__.py``) ship as the data package ``kope.knowledge``, listed explicitly
so setuptools neither skips nor warns about it. Everything else is in pyproject.toml.
"""

from setuptools import find_packages, setup

RESOURCE_DIRS = {"kope._resources.cypher": "cypher", "kope._resources.docker": "docker"}
DATA_PACKAGES = {"kope.knowledge": ["*.md"]}


def _resource_packages() -> list[str]:
    import os

    found = []
    for package, folder in RESOURCE_DIRS.items():
        for root, dirs, _files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            rel = os.path.relpath(root, folder)
            found.append(package if rel == "." else package + "." + rel.replace(os.sep, "."))
    return found


setup(
    packages=find_packages(include=["kope", "kope.*", "harness", "harness.*"])
    + _resource_packages()
    + list(DATA_PACKAGES),
    package_dir={"": ".", **RESOURCE_DIRS},
    package_data={
        **{package: ["*.cypher", "*.grass", "*.html", "*.yml", "*.md"] for package in _resource_packages()},
        **DATA_PACKAGES,
        # the built-in suite's task and candidate files live in plain folders (not packages)
        "harness.suite": ["tasks/*/*.py", "tasks/README.md", "candidates/*/*.py", "templates/*/*.py"],
    },
)
