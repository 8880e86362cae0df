"""LLMCompiler plans: numbered tool calls with ``$N`` references, parsed as they stream.

    Thought: I need the weather in both cities first.
    1. get_weather(city="Paris")
    2. get_weather("Rome")
    3. compare(a=$1, b=$2, question="Is ${1} warmer than $2?")
    4. join()

A task line is ``N. tool(arguments)``: keyword arguments with Python-literal values
(JSON's ``true``/``false``/``null`` are read too), or positional ones taken in the
tool's `ToolSpec.argument_order`. ``$N`` or ``${N}`` as a whole value (also inside a
list or dict) is a `TaskRef` to the result of task N; inside a string it stands for
the result's text. Inside strings ``${N}`` must name an earlier task, while a bare
``$N`` counts only when task N is an earlier task (so ``"under $300"`` stays text,
as in LLMCompiler). Numbers must increase; ``join()`` ends the plan (LLMCompiler's
``<END_OF_PLAN>`` marker may follow it). ``Thought:`` lines belong to the next task.

Every defect raises `PlanError`, whose message names the line and says what to write
instead: it is meant to go back to the model as an observation for replanning.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from jsonschema.exceptions import ValidationError, best_match
from jsonschema.validators import validator_for

from toolweave.errors import CallFormatError, ToolweaveError
from toolweave.formats.pycall import from_literal, to_literal
from toolweave.toolspec import ToolSpec

__all__ = [
    "END_OF_PLAN",
    "Plan",
    "PlanError",
    "PlanStreamParser",
    "PlanTask",
    "TaskRef",
    "format_call",
    "format_plan",
    "format_task",
    "parse_plan",
    "resolve_arguments",
]

#: LLMCompiler's end marker, accepted after ``join()``.
END_OF_PLAN = "<END_OF_PLAN>"

# Task numbers have at most 9 digits: int() refuses strings of more than 4300 digits.
_REF = re.compile(r"\$\{(\d{1,9})\}|\$(\d{1,9})(?!\d)")
_TASK_LINE = re.compile(r"(\d{1,9})\s*\.\s*(.*)", re.DOTALL)
_THOUGHT_LINE = re.compile(r"Thought\s*:(.*)", re.DOTALL | re.IGNORECASE)
_CALL = re.compile(r"([A-Za-z0-9_.\-]+)\s*(\(.*)", re.DOTALL)
_JOIN = re.compile(r"join\s*\(\s*\)\s*(?:" + re.escape(END_OF_PLAN) + r")?")
_JSON_NAMES = {"true": True, "false": False, "null": None}
# Schema keywords whose verdict does not depend on the values inside a container.
_STRUCTURAL = frozenset(
    {
        "type",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "minItems",
        "maxItems",
        "dependentRequired",
        "propertyNames",
    }
)


class PlanError(ToolweaveError, ValueError):
    """A plan that cannot run; the message names the line and how to fix it.

    ``line`` is the 1-based line number (one past the last line for a missing
    ``join()``), ``text`` the offending line, ``problem`` the explanation.
    """

    def __init__(self, line: int, problem: str, text: str | None = None) -> None:
        self.line = line
        self.problem = problem
        self.text = text
        where = f"line {line}" if text is None else f"line {line} ({text.strip()!r})"
        super().__init__(f"plan {where}: {problem}")


@dataclass(frozen=True)
class TaskRef:
    """``$N`` as a whole argument value: the result of task ``index``."""

    index: int

    def __str__(self) -> str:
        return f"${self.index}"


@dataclass(frozen=True)
class PlanTask:
    """One numbered tool call of a plan.

    ``arguments`` holds literal values, `TaskRef` values and strings that may contain
    ``$N``; ``dependencies`` lists the earlier tasks they refer to, ascending;
    ``thought`` is the ``Thought:`` text written just before the task (lines joined
    by ``"\\n"``). ``provisional`` marks an early version of a call that a later
    version with the same index may replace (an executor runs it early only for
    read-only tools); the parser never sets it.
    """

    index: int
    tool: str
    arguments: Mapping[str, Any]
    dependencies: tuple[int, ...] = ()
    thought: str | None = None
    provisional: bool = False

    # Hash by position: dict fields are unhashable, and indices are unique in a plan.
    def __hash__(self) -> int:
        return hash((self.index, self.tool))


@dataclass(frozen=True)
class Plan:
    """A parsed plan: its tasks in order, the thoughts after the last task, join seen."""

    tasks: tuple[PlanTask, ...]
    thoughts: tuple[str, ...] = ()
    joined: bool = True


def parse_plan(text: str, tools: Mapping[str, ToolSpec]) -> Plan:
    """Parse a whole plan; `PlanError` on the first defect."""
    parser = PlanStreamParser(tools)
    parser.feed(text)
    return parser.close()


class PlanStreamParser:
    """Incremental plan parser: `feed` text as the model writes it, `close` at the end.

    `feed` returns each task as soon as its line ends (its newline arrived); `close`
    parses a last line without newline, requires ``join()`` and returns the `Plan`.
    When a chunk completes good lines and then a bad one, `feed` returns the good
    tasks and the `PlanError` is raised by the next `feed` or `close`.
    """

    def __init__(self, tools: Mapping[str, ToolSpec]) -> None:
        self._tools = tools
        self._buffer = ""
        self._line_number = 0
        self._tasks: list[PlanTask] = []
        self._thoughts: list[str] = []
        self._joined = False
        self._error: PlanError | None = None
        self._plan: Plan | None = None

    @property
    def joined(self) -> bool:
        """True once ``join()`` was read: the model can stop writing."""
        return self._joined

    @property
    def tasks(self) -> tuple[PlanTask, ...]:
        """The tasks parsed so far."""
        return tuple(self._tasks)

    @property
    def plan(self) -> Plan | None:
        """The plan `close` returned, None before."""
        return self._plan

    def feed(self, text: str) -> list[PlanTask]:
        """Add text; return the tasks whose lines it completed, in order."""
        self._raise_pending()
        if self._plan is not None:
            raise RuntimeError("feed() after close(): the plan is already complete")
        self._buffer += text
        emitted: list[PlanTask] = []
        while (cut := self._buffer.find("\n")) >= 0:
            line, self._buffer = self._buffer[:cut], self._buffer[cut + 1 :]
            try:
                task = self._read_line(line)
            except PlanError as exc:
                self._error = exc
                if emitted:
                    return emitted
                raise
            if task is not None:
                emitted.append(task)
        return emitted

    def close(self) -> Plan:
        """End the text: read the last line, check for ``join()``, return the plan."""
        if self._plan is not None:
            return self._plan
        self._raise_pending()
        if self._buffer:
            line, self._buffer = self._buffer, ""
            try:
                self._read_line(line)
            except PlanError as exc:
                self._error = exc
                raise
        if not self._joined:
            next_number = self._tasks[-1].index + 1 if self._tasks else 1
            self._error = PlanError(
                self._line_number + 1,
                f"the plan ends without join(); after the last task write '{next_number}. join()'",
            )
            raise self._error
        self._plan = Plan(tuple(self._tasks), tuple(self._thoughts), joined=True)
        return self._plan

    async def iter_tasks(self, deltas: AsyncIterable[str]) -> AsyncIterator[PlanTask]:
        """Feed an async stream of text deltas, yielding tasks as their lines end.

        Closes the parser when the stream ends (so a missing ``join()`` raises there);
        the `Plan` is then in `plan`.
        """
        async for delta in deltas:
            for task in self.feed(delta):
                yield task
        self.close()

    def _raise_pending(self) -> None:
        if self._error is not None:
            raise self._error

    def _read_line(self, raw: str) -> PlanTask | None:
        self._line_number += 1
        line = raw.strip()
        try:
            return self._interpret(line)
        except _LineProblem as exc:
            raise PlanError(self._line_number, str(exc), line) from None

    def _interpret(self, line: str) -> PlanTask | None:
        if self._joined:
            if line and line != END_OF_PLAN:
                raise _LineProblem(
                    "text after join(): the plan must end with join(); "
                    "put every task and thought before it"
                )
            return None
        if not line:
            return None
        if thought := _THOUGHT_LINE.fullmatch(line):
            self._thoughts.append(thought[1].strip())
            return None
        task_line = _TASK_LINE.fullmatch(line)
        if task_line is None:
            raise _LineProblem(
                "expected a numbered task 'N. tool_name(arg=value, ...)', "
                "a 'Thought: ...' line or 'N. join()'"
            )
        number, body = int(task_line[1]), task_line[2]
        self._check_number(number)
        if _JOIN.fullmatch(body):
            self._joined = True
            return None
        call = _CALL.fullmatch(body)
        if call is None:
            raise _LineProblem(f"expected 'tool_name(arg=value, ...)' after '{number}.'")
        name, rest = call[1], call[2]
        if name == "join":
            raise _LineProblem(f"join takes no arguments: write '{number}. join()'")
        task = self._task(number, name, rest)
        self._tasks.append(task)
        self._thoughts = []
        return task

    def _check_number(self, number: int) -> None:
        last = self._tasks[-1].index if self._tasks else 0
        if number > last:
            return
        if number == 0:
            raise _LineProblem("task numbers start at 1")
        if any(task.index == number for task in self._tasks):
            raise _LineProblem(
                f"task number {number} is used twice; number the tasks 1, 2, 3, ... "
                f"(the next one is {last + 1})"
            )
        raise _LineProblem(
            f"task number {number} comes after task {last}; numbers must increase "
            f"(the next one is {last + 1})"
        )

    def _task(self, number: int, name: str, rest: str) -> PlanTask:
        spec = self._tools.get(name)
        if spec is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise _LineProblem(
                f"unknown tool {name!r}; use one of: {known} (or '{number}. join()' "
                f"to end the plan)"
            )
        arguments = _parse_arguments(spec, rest)
        earlier = {task.index for task in self._tasks}
        checked, dependencies = _scan(arguments, number, earlier)
        _validate(spec, checked)
        return PlanTask(
            index=number,
            tool=name,
            arguments=arguments,
            dependencies=tuple(sorted(dependencies)),
            thought="\n".join(self._thoughts) if self._thoughts else None,
        )


def resolve_arguments(
    task: PlanTask, values: Mapping[int, Any], texts: Mapping[int, str]
) -> dict[str, Any]:
    """Substitute the task's references: `TaskRef` N by ``values[N]``, ``$N`` in strings
    by ``texts[N]``.

    Only references to ``task.dependencies`` are substituted, the same ones the parser
    recognised; other ``$`` text is kept.
    """
    dependencies = set(task.dependencies)

    def text_of(match: re.Match[str]) -> str:
        index = int(match[1] or match[2])
        return texts[index] if index in dependencies else match[0]

    def substitute(value: Any) -> Any:
        if isinstance(value, TaskRef):
            return values[value.index]
        if isinstance(value, str):
            return _REF.sub(text_of, value)
        if isinstance(value, (list, tuple)):
            return [substitute(item) for item in value]
        if isinstance(value, Mapping):
            return {key: substitute(item) for key, item in value.items()}
        return value

    return {key: substitute(value) for key, value in task.arguments.items()}


def format_plan(plan: Plan) -> str:
    """Write a plan in canonical form: keyword arguments, ``join()`` numbered one past
    the last task. `parse_plan` reads a joined plan back equal."""
    lines: list[str] = []
    for task in plan.tasks:
        if task.thought is not None:
            lines.extend(f"Thought: {part}" for part in task.thought.split("\n"))
        lines.append(format_task(task))
    lines.extend(f"Thought: {thought}" for thought in plan.thoughts)
    if plan.joined:
        last = plan.tasks[-1].index if plan.tasks else 0
        lines.append(f"{last + 1}. join()")
    return "\n".join(lines)


def format_task(task: PlanTask) -> str:
    """``N. tool(key=value, ...)``."""
    return f"{task.index}. {format_call(task.tool, task.arguments)}"


def format_call(tool: str, arguments: Mapping[str, Any]) -> str:
    """``tool(key=value, ...)`` with Python literals and ``$N`` for `TaskRef` values."""
    return f"{tool}({', '.join(f'{key}={_format_value(v)}' for key, v in arguments.items())})"


def _format_value(value: Any) -> str:
    if isinstance(value, TaskRef):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_format_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        items = (f"{to_literal(key)}: {_format_value(item)}" for key, item in value.items())
        return "{" + ", ".join(items) + "}"
    return to_literal(value)


class _LineProblem(Exception):
    """What is wrong with the current line; the parser adds the line number."""


class _Unknown:
    """Stand-in for a value only known at run time, during schema validation."""

    def __repr__(self) -> str:
        return "<result of an earlier task>"


_UNKNOWN = _Unknown()


def _parse_arguments(spec: ToolSpec, rest: str) -> dict[str, Any]:
    """Read ``(arg=value, ...)`` (``rest`` starts at the parenthesis) into a dict."""
    prefix = "_ref_"
    while prefix in rest:
        prefix = "_" + prefix
    source = "_call" + _mark_references(rest, prefix)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes such as "\d" only warn
            tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        # CPython's parser gives up on very deeply nested text with MemoryError/RecursionError.
        message = exc.msg if isinstance(exc, SyntaxError) else str(exc) or "nested too deeply"
        raise _LineProblem(
            f"not a valid call ({message}); write {spec.name}(arg=value, ...) with "
            f"Python literal values, strings in double quotes"
        ) from None
    call = tree.body
    if not (
        isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "_call"
    ):
        raise _LineProblem(
            f"expected one call {spec.name}(...) and nothing after its closing parenthesis"
        )
    order = spec.argument_order
    properties: Mapping[str, Any] = spec.parameters["properties"]
    # Unknown names are a typical small-model slip; only an open schema accepts them.
    open_schema = spec.parameters.get("additionalProperties", False) is not False or (
        "patternProperties" in spec.parameters
    )
    arguments: dict[str, Any] = {}
    for position, node in enumerate(call.args):
        if isinstance(node, ast.Starred):
            raise _LineProblem("'*' arguments are not allowed; write arg=value")
        if position >= len(order):
            raise _LineProblem(
                f"{spec.name} takes at most {len(order)} positional argument(s) "
                f"({', '.join(order) or 'none'}); {_usage(spec)}"
            )
        arguments[order[position]] = _checked_value(node, prefix)
    for keyword in call.keywords:
        name = keyword.arg
        if name is None:
            raise _LineProblem("'**' arguments are not allowed; write arg=value")
        if name in arguments:
            raise _LineProblem(f"argument {name!r} is given twice; {_usage(spec)}")
        if name not in properties and not open_schema:
            raise _LineProblem(f"{spec.name} has no argument {name!r}; {_usage(spec)}")
        arguments[name] = _checked_value(keyword.value, prefix)
    return arguments


def _checked_value(node: ast.expr, prefix: str) -> Any:
    """`_value`, with a value nested too deeply to convert as a line problem."""
    try:
        return _value(node, prefix)
    except RecursionError:
        raise _LineProblem("a value is nested too deeply; write plain literal values") from None


def _mark_references(source: str, prefix: str) -> str:
    """Replace ``$N``/``${N}`` outside string literals by the identifier ``{prefix}N_``."""
    out: list[str] = []
    i = 0
    while i < len(source):
        char = source[i]
        if char in "'\"":
            quote = char * 3 if source.startswith(char * 3, i) else char
            end = i + len(quote)
            while end < len(source) and not source.startswith(quote, end):
                end += 2 if source[end] == "\\" else 1
            end = min(end + len(quote), len(source))
            out.append(source[i:end])
            i = end
        elif char == "$" and (match := _REF.match(source, i)):
            out.append(f"{prefix}{match[1] or match[2]}_")
            i = match.end()
        else:
            out.append(char)
            i += 1
    return "".join(out)


def _value(node: ast.expr, prefix: str) -> Any:
    """Turn an argument's syntax tree into data, with `TaskRef` for marked references."""
    if isinstance(node, ast.Name):
        if node.id.startswith(prefix) and node.id.endswith("_"):
            digits = node.id[len(prefix) : -1]
            if digits.isdigit():
                return TaskRef(int(digits))
        if node.id in _JSON_NAMES:
            return _JSON_NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(item, prefix) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key_node, value_node in zip(node.keys, node.values, strict=True):
            key = None if key_node is None else _value(key_node, prefix)
            if not isinstance(key, str):
                raise _LineProblem("dict keys must be strings in quotes")
            result[key] = _value(value_node, prefix)
        return result
    try:
        return from_literal(ast.unparse(node))
    except CallFormatError:
        raise _LineProblem(
            f"{ast.unparse(node)!r} is not a literal value; write strings in double "
            f"quotes, numbers, True/False/None, lists, dicts, or $N for the result of task N"
        ) from None


def _scan(value: Any, index: int, earlier: set[int]) -> tuple[Any, set[int]]:
    """Check the references in ``value``; return it with each value that holds a
    reference replaced by `_UNKNOWN`, and the referenced task numbers."""
    if isinstance(value, TaskRef):
        _check_reference(value.index, index, earlier)
        return _UNKNOWN, {value.index}
    if isinstance(value, str):
        found: set[int] = set()
        for match in _REF.finditer(value):
            target = int(match[1] or match[2])
            if match[1] is not None:
                _check_reference(target, index, earlier)
            if target in earlier:
                found.add(target)
        return (_UNKNOWN if found else value), found
    if isinstance(value, list):
        pairs = [_scan(item, index, earlier) for item in value]
        return [v for v, _ in pairs], set().union(*(refs for _, refs in pairs))
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        refs: set[int] = set()
        for key, item in value.items():
            out[key], item_refs = _scan(item, index, earlier)
            refs |= item_refs
        return out, refs
    return value, set()


def _check_reference(target: int, index: int, earlier: set[int]) -> None:
    if target in earlier:
        return
    if target == index:
        problem = f"task {index} uses its own result ${target}"
    elif target > index:
        problem = f"${target} is the result of a later task"
    else:
        problem = f"${target} refers to task {target}, which does not exist"
    raise _LineProblem(
        f"{problem}; a task can only use results of tasks above it "
        f"({_known(earlier)}): reorder or renumber the tasks"
    )


def _known(earlier: set[int]) -> str:
    if not earlier:
        return "there are none yet"
    return ", ".join(f"${i}" for i in sorted(earlier))


def _validate(spec: ToolSpec, arguments: Mapping[str, Any]) -> None:
    """Schema-check arguments, ignoring what depends on values only known at run time."""
    errors = _validator(spec).iter_errors(dict(arguments))
    error = best_match(e for e in errors if not _depends_on_unknown(e))
    if error is not None:
        path = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path
        )
        raise _LineProblem(
            f"invalid arguments for {spec.name} at arguments{path}: {error.message}; {_usage(spec)}"
        )


def _depends_on_unknown(error: ValidationError) -> bool:
    if error.instance is _UNKNOWN:
        return True
    return error.validator not in _STRUCTURAL and _contains_unknown(error.instance)


def _contains_unknown(value: Any) -> bool:
    if value is _UNKNOWN:
        return True
    if isinstance(value, list):
        return any(_contains_unknown(item) for item in value)
    if isinstance(value, Mapping):
        return any(_contains_unknown(item) for item in value.values())
    return False


@lru_cache(maxsize=256)
def _validator(spec: ToolSpec) -> Any:
    return validator_for(spec.parameters)(spec.parameters)


def _usage(spec: ToolSpec) -> str:
    """A short reminder of the tool's arguments for error messages."""
    properties: Mapping[str, Any] = spec.parameters["properties"]
    if not properties:
        return f"call it as {spec.name}()"

    def describe(name: str, kind: str) -> str:
        schema_type = properties[name].get("type")
        return f"{name} ({schema_type + ', ' if isinstance(schema_type, str) else ''}{kind})"

    described = [describe(n, "required") for n in spec.required]
    described += [describe(n, "optional") for n in spec.optional]
    return f"the arguments of {spec.name} are: {', '.join(described)}"
