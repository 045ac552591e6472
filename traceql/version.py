"""traceql's version, in one place (the package, the command line and every file it writes say it)."""

__version__ = "0.1.0"
