"""Grammars for the plan-out agent's two outputs, as llguidance Lark text.

`plan_grammar` holds a Planner to the LLMCompiler plan format of `toolweave.plan.format`:
optional ``Thought:`` lines, numbered tasks ``N. tool(key=value, ...)`` with Python
literal values (every value bounded, as in the call grammar) or ``$N`` references,
and a final ``N. join()``. Arguments follow the canonical order: required ones in
schema order, then any optional ones in schema order. Numbering and references are
checked by the plan parser, which the executor runs on every line.

`arbiter_grammar` holds an Arbiter to ``Thought: ...`` then ``Action: Finish(answer)``
or ``Action: Replan``.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.errors import ConstraintError
from toolweave.grammar.lexemes import lark_literal
from toolweave.grammar.value import compile_value
from toolweave.toolspec import ToolSpec

__all__ = ["MAX_THOUGHT_CHARS", "arbiter_grammar", "plan_grammar"]

#: Longest thought or answer line the grammars allow (tiny models ramble otherwise).
MAX_THOUGHT_CHARS = 240


def plan_grammar(tools: Sequence[ToolSpec], *, max_tasks: int = 6) -> str:
    """Lark grammar of a plan of 1..max_tasks calls of `tools`, then ``join()``."""
    if not tools:
        raise ConstraintError("a plan grammar needs at least one tool")
    if max_tasks < 1:
        raise ConstraintError("max_tasks must be at least 1")
    # Tasks are numbered 1, 2, ... and join() takes the next number: rest<k> follows
    # task k and is either the join or task k+1.
    lines = ["start: task1 rest1"]
    for k in range(1, max_tasks + 1):
        lines.append(f'task{k}: thought? "{k}. " call "\\n"')
        more = f" | task{k + 1} rest{k + 1}" if k < max_tasks else ""
        lines.append(f'rest{k}: "{k + 1}. join()"{more}')
    lines += [
        f'thought: "Thought: " /[^\\n]{{1,{MAX_THOUGHT_CHARS}}}/ "\\n"',
        "REF: /\\$[1-9][0-9]?/",
        "call: " + " | ".join(f"c{i}" for i in range(len(tools))),
    ]
    for i, spec in enumerate(tools):
        items: list[str] = []
        for j, key in enumerate(spec.argument_order):
            root, rules = compile_value(
                spec.property_schema(key), flavor="python", rule_prefix=f"p{i}x{j}",
                root=spec.parameters,
            )  # fmt: skip
            lines.extend(rules)
            lines.append(f"i{i}x{j}: {lark_literal(key + '=')} ({root} | REF)")
            items.append(f"i{i}x{j}")
        lines.append(f'c{i}: {lark_literal(spec.name + "(")} {_arguments(spec, items)} ")"')
    return "\n".join(lines) + "\n"


def _arguments(spec: ToolSpec, items: Sequence[str]) -> str:
    """Required items in order, then optional ones in order, comma-separated."""
    n_req = len(spec.required)
    required, optional = list(items[:n_req]), list(items[n_req:])
    sep = lark_literal(", ")
    if required:
        text = f" {sep} ".join(required)
        return text + "".join(f" ({sep} {o})?" for o in optional)
    if not optional:
        return '""'
    # No required argument: any optional one may come first, the later ones follow it.
    starts = []
    for k, first in enumerate(optional):
        rest = "".join(f" ({sep} {o})?" for o in optional[k + 1 :])
        starts.append(f"{first}{rest}")
    return "(" + " | ".join(starts) + ")?"


def arbiter_grammar() -> str:
    """Lark grammar of an Arbiter decision."""
    n = MAX_THOUGHT_CHARS
    return (
        f'start: "Thought: " /[^\\n]{{1,{n}}}/ "\\nAction: " (finish | replan)\n'
        f'finish: "Finish(" /[^\\n)]{{1,{n}}}/ ")"\n'
        'replan: "Replan"\n'
    )
