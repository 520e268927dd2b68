"""Named plugin registries (input generators, comparators): a dict plus a decorator that refuses
registering one name twice, so two modules cannot silently replace each other's entry."""

from __future__ import annotations

from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable[..., object])


def registrar(table: dict[str, F], kind: str) -> Callable[[str], Callable[[F], F]]:
    def register(name: str) -> Callable[[F], F]:
        def deco(fn: F) -> F:
            if name in table:
                raise ValueError(f"{kind} '{name}' registered twice")
            table[name] = fn
            return fn

        return deco

    return register
