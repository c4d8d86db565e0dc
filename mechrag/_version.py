"""The package version, in a module of its own so that records can name it without importing
the whole library."""

__version__ = "0.3.0"
