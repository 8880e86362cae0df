"""Command groups whose commands are imported only when used.

The benchmarks pull in matplotlib and the run command LangChain's agent stack; a group
made by `lazy_group` imports a command's module only when that command runs or its help
is shown, so `toolweave call` starts without them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import ClassVar

import typer
from typer import _click as click  # typer's groups are built on its own copy of click
from typer.core import TyperGroup

__all__ = ["LazyGroup", "lazy_group"]


class LazyGroup(TyperGroup):
    """A group that builds the commands of `lazy` on first use, listed in its order."""

    #: Command name -> "module:attribute", a typer command function or a `typer.Typer`.
    lazy: ClassVar[Mapping[str, str]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        eager = [n for n in super().list_commands(ctx) if n not in self.lazy]
        return [*self.lazy, *eager]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.commands[cmd_name] = _load(cmd_name, self.lazy[cmd_name])
        return super().get_command(ctx, cmd_name)


def lazy_group(commands: Mapping[str, str]) -> type[LazyGroup]:
    """A `LazyGroup` class (for ``typer.Typer(cls=...)``) with these lazy commands."""
    return type("LazyGroup", (LazyGroup,), {"lazy": dict(commands)})


def _load(name: str, target: str) -> click.Command:
    module, _, attribute = target.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    if isinstance(found, typer.Typer):
        return typer.main.get_group(found)
    # A one-command app: typer reads the function's options as when it is registered.
    single = typer.Typer(add_completion=False)
    single.command(name)(found)
    return typer.main.get_command(single)
