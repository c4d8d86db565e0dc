"""Source-attribution methods; each returns :class:`mechrag.results.Attribution`."""
