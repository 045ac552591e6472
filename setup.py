"""The package list, computed: the repository keeps ``analyzers/``, ``collectors/`` and ``datasets/`` beside
``traceql/``, and the installed package holds them inside it (``traceql.analyzers``, ``traceql.collectors``,
``traceql.datasets``), so nothing lands in site-packages under a generic name. Everything else is in
pyproject.toml."""

from setuptools import find_packages, setup

LEAVES = ("analyzers", "collectors")
setup(
    packages=[*find_packages(include=["traceql", "traceql.*"]),
              *(f"traceql.{p}" for p in find_packages(include=[f"{leaf}{s}" for leaf in LEAVES for s in ("", ".*")])),
              "traceql.datasets"],
    package_dir={**{f"traceql.{leaf}": leaf for leaf in LEAVES}, "traceql.datasets": "datasets"},
    # the embedded example `traceql detect` labels when given no trace (a run and its isolated run)
    package_data={"traceql": ["py.typed", "verdicts/measured.json"], "traceql.datasets": ["README.md", "default/**/*"],
                  # what a child process imports the collectors through (collectors.launch.CHILD_PATH)
                  "traceql.collectors": ["_child/traceql/__init__.py"],
                  "traceql.analyzers": ["baselines/factors.json"]},  # the estimates' learned factors
)
