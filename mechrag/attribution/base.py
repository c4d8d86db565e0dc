"""The base of every source-attribution method: a configured object called on a case.

A method is a frozen dataclass whose fields are its parameters and hold their only defaults
(Captum's pattern): ``KernelSHAP(paired=True, budget=64)(case)`` returns an
:class:`mechrag.results.Attribution`. ``case.attribute(method, budget=...)`` is the same call
with some fields replaced (:meth:`SourceMethod.with_settings`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

from mechrag.errors import InputError


@dataclass(frozen=True)
class SourceMethod:
    """Base: ``method(case) -> Attribution``; ``name`` is its registry key."""

    name: ClassVar[str]
    description: ClassVar[str] = ""
    # Why a setting is refused (ARC-JSD's subsets are fixed), said before the allowed fields.
    refusal: ClassVar[str] = ""
    # Settings accepted and ignored because they cannot change the result (ARC-JSD's seed).
    ignored: ClassVar[tuple[str, ...]] = ()

    def __call__(self, case):
        raise NotImplementedError

    def check_inputs(self) -> None:
        """Refuse settings found wrong without a model (a missing file, a missing proxy), so a
        command fails on them before it loads one; the base method has none."""

    @classmethod
    def parameters(cls) -> tuple[str, ...]:
        """The names of the fields a caller may set."""
        return tuple(f.name for f in fields(cls))

    def with_settings(self, **settings):
        """A copy with the given fields replaced; ``None`` values leave a field as it is.

        A setting the method has no field for is an :class:`InputError`, so that ``budget`` on
        a method that has none is refused rather than ignored; only the settings in
        :attr:`ignored` (which cannot change the result) are dropped.
        """
        given = {
            key: value
            for key, value in settings.items()
            if value is not None and key not in self.ignored
        }
        unknown = sorted(set(given) - set(self.parameters()))
        if unknown:
            why = f"{self.refusal}: " if self.refusal else ""
            raise InputError(
                f"{why}method {self.name!r} takes {list(self.parameters())}, not {unknown}"
            )
        return replace(self, **given)
