"""The fallback view: the scalar entries of a result's ``to_dict()`` as a table."""

from __future__ import annotations

from mechrag.views.blocks import section, table

SCALARS = (str, int, float, bool, type(None))


def generic_view(result) -> str:
    """A table of the scalars in ``result.to_dict()`` (also those one level down in a dict)."""
    rows = []
    for name, value in result.to_dict().items():
        if isinstance(value, SCALARS):
            rows.append([name, value])
        elif isinstance(value, dict):
            rows += [
                [f"{name}.{key}", item] for key, item in value.items() if isinstance(item, SCALARS)
            ]
    return section(type(result).__name__, table(["entry", "value"], rows), "generic")
