"""The single source of pard's version (read by the build through scikit-build-core)."""

__version__ = "0.1.0"
