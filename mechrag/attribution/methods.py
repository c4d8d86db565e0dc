"""The one registry of source-attribution methods, by name.

``Case.attribute``, the command line's ``--method`` choices, the sweep registry and every error
message read :data:`METHODS`. Adding a method is one class here: a
:class:`~mechrag.attribution.base.SourceMethod` subclass with a ``name``.
"""

from __future__ import annotations

from mechrag.attribution.arc_jsd import ARCJSD
from mechrag.attribution.attention import AttentionAttribution
from mechrag.attribution.base import SourceMethod
from mechrag.attribution.estimators import ESTIMATORS
from mechrag.attribution.hierarchical import HierarchicalARCJSD
from mechrag.attribution.overlap import QueryOverlap
from mechrag.attribution.proxy import ProxyAttribution
from mechrag.errors import InputError

METHODS: dict[str, type[SourceMethod]] = {
    ARCJSD.name: ARCJSD,
    HierarchicalARCJSD.name: HierarchicalARCJSD,
    AttentionAttribution.name: AttentionAttribution,
    ProxyAttribution.name: ProxyAttribution,
    **ESTIMATORS,
    QueryOverlap.name: QueryOverlap,
}


def resolve_method(method: str | SourceMethod) -> SourceMethod:
    """A configured method from a name (its defaults) or a method object (as it is)."""
    if isinstance(method, SourceMethod):
        return method
    if method not in METHODS:
        raise InputError(f"unknown method {method!r}: choose from {tuple(METHODS)}")
    return METHODS[method]()
