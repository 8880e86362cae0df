"""LangChain tools in and out: `from_langchain` makes a `Tool`, `to_langchain` a `StructuredTool`.

`from_langchain` takes a LangChain `BaseTool` (a ``@tool`` function, a `StructuredTool`,
a `BaseTool` subclass) or a plain function, which it first turns into a tool with
LangChain's own ``tool()``. The model-facing schema is the one LangChain itself sends
to a chat model (``convert_to_openai_tool``): references inlined, titles dropped, and
injected arguments (``InjectedToolArg``, ``InjectedToolCallId``, ``InjectedState``,
``ToolRuntime``) left out. Running the `Tool` calls the LangChain tool's ``ainvoke``;
every failure comes back as an error `ToolResult`, never as an exception.

Read-only hints are read from these places, weakest first, and normalised into
camelCase `ToolSpec.annotations` (only hints present; nothing is defaulted):

1. ``metadata["readOnlyHint"]`` etc. at the top level, as ``langchain-mcp-adapters``
   writes them (``metadata = tool.annotations.model_dump()``, camelCase keys with mcp
   1.x, snake_case ``read_only_hint`` with mcp 2.x; both are read, ``None`` is absent).
2. ``metadata["mcp"]["tool"]["annotations"]["read_only_hint"]`` etc., as
   ``langchain.mcp`` writes them (snake_case keys).
3. Ours: the tag ``"read-only"`` or ``"toolweave:read-only"``, then
   ``metadata["toolweave"] = {"read_only": bool}`` (what `to_langchain` writes: the
   answer toolweave's classifier, or the user's override, gave before). Ours is final:
   it becomes the ``x-toolweave-read-only`` annotation (`DECIDED_KEY`), which the
   classifier takes as decided; the hints of 1 and 2 are kept beside it.

The list of hints an adapter filled in with defaults (``x-defaulted``) is carried over,
so a defaulted ``destructiveHint: true`` is not taken for the server's claim.

Hint keys: ``title``, ``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
``openWorldHint``. ``ToolSpec.read_only`` stays None: the classifier decides it.

`to_langchain` writes the annotations back at the top level of ``metadata`` (shape 1,
camelCase) and adds ``metadata["toolweave"] = {"read_only": spec.read_only, "source":
tool.source}``. A `Tool` made by `from_langchain` converts back to the same object.

Results travel as ``langchain-mcp-adapters`` shapes them: the artifact is
``{"structured_content": ...}`` (`ARTIFACT_KEY`) when the tool returned structured
content, else None; a result with images, audio or binary resources (an MCP result's
``blocks``) has a list of standard content blocks as its content: the observation text
first, then the image, audio and file blocks with their data. `from_langchain` reads
such an artifact back as the structured content.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import uuid
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.messages.tool import ToolOutputMixin
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from langchain_core.tools import tool as make_langchain_tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.utils.pydantic import get_fields
from pydantic import BaseModel, ValidationError

from toolweave.errors import ToolSpecError
from toolweave.readonly import DECIDED_KEY, DEFAULTED_KEY
from toolweave.tools import Tool, ToolResult
from toolweave.toolspec import ToolSpec

__all__ = [
    "ARTIFACT_KEY",
    "READ_ONLY_TAGS",
    "annotations_from_langchain",
    "from_langchain",
    "to_langchain",
    "tool_message_content",
]

#: The artifact's key for a tool's structured content (langchain-mcp-adapters' shape).
ARTIFACT_KEY = "structured_content"
#: Content blocks passed on beside the observation text (they carry binary data or links).
_DATA_BLOCKS = frozenset({"image", "audio", "file", "video"})

_T = TypeVar("_T")

#: Tags that mark a LangChain tool read-only.
READ_ONLY_TAGS = frozenset({"read-only", "toolweave:read-only"})

# MCP tool annotation fields: camelCase (the MCP wire name, our spelling) by snake_case.
_HINT_KEYS = {
    "title": "title",
    "read_only_hint": "readOnlyHint",
    "destructive_hint": "destructiveHint",
    "idempotent_hint": "idempotentHint",
    "open_world_hint": "openWorldHint",
}


def from_langchain(tool: BaseTool | Callable[..., Any]) -> Tool:
    """Wrap a LangChain tool (or a plain function) as a `Tool` with ``source="langchain"``.

    A function needs a docstring (LangChain's rule). Anything else, or a tool whose
    schema cannot be converted, raises `ToolSpecError`.

    The `Tool`'s ``run`` never raises for a tool failure: a `ToolException`, invalid
    arguments or any other exception becomes ``ToolResult(is_error=True, text="Error:
    ...")``; an error the tool handles itself (``handle_tool_error``) keeps the text
    its handler wrote. A str output is the text; dict, list and pydantic outputs are
    JSON text plus ``structured``; a ``content_and_artifact`` tool gives its content as
    text and its artifact as ``structured``. Injected arguments the caller passes in
    ``arguments`` reach the tool; a tool-call id is made up per call.
    """
    lc_tool = _as_base_tool(tool)
    try:
        function = convert_to_openai_tool(lc_tool)["function"]
    except Exception as exc:
        raise ToolSpecError(lc_tool.name, f"cannot convert the LangChain schema: {exc}") from exc
    spec = ToolSpec.from_dict(
        {
            "name": function["name"],
            "description": function.get("description", ""),
            "parameters": function.get("parameters", {}),
            "annotations": annotations_from_langchain(lc_tool),
        }
    )

    as_tool_call = _needs_tool_call(lc_tool)

    async def run(arguments: Mapping[str, Any]) -> ToolResult:
        call_input: dict[str, Any] | ToolCall = dict(arguments)
        if as_tool_call:
            call_input = ToolCall(
                name=lc_tool.name,
                args=dict(arguments),
                id=f"toolweave-{uuid.uuid4().hex}",
                type="tool_call",
            )
        try:
            output = await lc_tool.ainvoke(call_input)
        except ToolException as exc:
            return ToolResult.error(f"Error: {exc}")
        except ValidationError as exc:
            return ToolResult.error(f"Error: invalid arguments: {_describe(exc)}")
        except Exception as exc:
            return ToolResult.error(f"Error: {type(exc).__name__}: {exc}")
        return _result(output)

    return Tool(spec=spec, run=run, source="langchain", origin=lc_tool)


def annotations_from_langchain(tool: BaseTool) -> dict[str, Any]:
    """The MCP-style hints of a LangChain tool in camelCase, from every shape above."""
    metadata = tool.metadata or {}
    hints = _hints(metadata)
    mcp = metadata.get("mcp")
    mcp_tool = mcp.get("tool") if isinstance(mcp, Mapping) else None
    nested = mcp_tool.get("annotations") if isinstance(mcp_tool, Mapping) else None
    if isinstance(nested, Mapping):
        hints.update(_hints(nested))
    if READ_ONLY_TAGS.intersection(tool.tags or ()):
        hints[DECIDED_KEY] = True
    ours = metadata.get("toolweave")
    if isinstance(ours, Mapping) and isinstance(ours.get("read_only"), bool):
        hints[DECIDED_KEY] = ours["read_only"]
    defaulted = metadata.get(DEFAULTED_KEY)
    if isinstance(defaulted, list):
        hints[DEFAULTED_KEY] = [k for k in defaulted if isinstance(k, str)]
    return hints


def to_langchain(tool: Tool, *, content_blocks: bool = True) -> BaseTool:
    """A `StructuredTool` that runs ``tool``; the original object if ``tool`` came from one.

    Results are ``content_and_artifact``: the content is the observation text (or,
    with images, audio or files, `tool_message_content`'s blocks), the artifact
    ``{"structured_content": ...}`` when there is structured content, so agents keep
    both on ``ToolMessage``. ``content_blocks=False`` keeps the content to the text
    alone (its bracketed lines describe the binary data), for a text-only model.
    Error results raise `ToolException`, which ``handle_tool_error=True`` turns into an
    error observation (``status="error"``) instead of a crash.
    """
    if isinstance(tool.origin, BaseTool):
        return tool.origin
    spec = tool.spec

    async def call(**arguments: Any) -> tuple[str | list[dict[str, Any]], Any]:
        result = await tool.run(arguments)
        if result.is_error:
            raise ToolException(result.text)
        artifact = None if result.structured is None else {ARTIFACT_KEY: result.structured}
        content = tool_message_content(result) if content_blocks else result.observation()
        return content, artifact

    def call_sync(**arguments: Any) -> tuple[str | list[dict[str, Any]], Any]:
        return _run_blocking(lambda: call(**arguments))

    metadata: dict[str, Any] = {key: spec.annotations[key] for key in spec.annotations}
    metadata["toolweave"] = {"read_only": spec.read_only, "source": tool.source}
    return _ToolweaveTool(
        name=spec.name,
        description=spec.description,
        args_schema=copy.deepcopy(dict(spec.parameters)),
        func=call_sync,
        coroutine=call,
        response_format="content_and_artifact",
        metadata=metadata,
        handle_tool_error=True,
    )


def tool_message_content(result: ToolResult) -> str | list[dict[str, Any]]:
    """A ``ToolMessage`` content for ``result``: its observation text, or when it has
    image, audio or file blocks (an MCP result's ``blocks``), a text block with that
    text followed by those blocks."""
    text = result.observation()
    blocks = getattr(result, "blocks", ())
    data = [dict(block) for block in blocks if block.get("type") in _DATA_BLOCKS]
    if not data:
        return text
    return [{"type": "text", "text": text}, *data]


class _ToolweaveTool(StructuredTool):
    """A `StructuredTool` that hands every argument to the `Tool`, whatever its name.

    `StructuredTool`'s own ``_run``/``_arun`` take ``config`` and ``run_manager``
    keywords, so a tool argument called ``config`` would be silently replaced by the
    RunnableConfig; these signatures ask LangChain for nothing.
    """

    def _run(self, *args: Any, **arguments: Any) -> Any:
        if self.func is None:  # set by `to_langchain`; a copy may have dropped it
            raise NotImplementedError("this tool has no sync function")
        return self.func(*args, **arguments)

    async def _arun(self, *args: Any, **arguments: Any) -> Any:
        if self.coroutine is None:
            raise NotImplementedError("this tool has no coroutine")
        return await self.coroutine(*args, **arguments)


def _as_base_tool(tool: object) -> BaseTool:
    """Return ``tool`` if it is a LangChain tool, convert a function, reject the rest."""
    if isinstance(tool, BaseTool):
        return tool
    if inspect.isfunction(tool) or inspect.ismethod(tool):
        try:
            converted = make_langchain_tool(tool)
        except Exception as exc:
            name = getattr(tool, "__name__", None)
            raise ToolSpecError(name, f"cannot make a LangChain tool of it: {exc}") from exc
        if isinstance(converted, BaseTool):
            return converted
    raise ToolSpecError(
        None,
        f"unknown tool type {type(tool).__name__}: expected a LangChain BaseTool "
        "or a plain function",
    )


def _needs_tool_call(tool: BaseTool) -> bool:
    """True if the tool must be invoked with a full ToolCall rather than plain arguments.

    A ToolCall makes LangChain return a ToolMessage: needed for an artifact, for an
    injected tool-call id, and to tell a handled error (``status="error"``) from
    success. Otherwise plain arguments return the raw value, kept as structured content.
    """
    return bool(
        tool.response_format == "content_and_artifact"
        or tool.handle_tool_error
        or tool.handle_validation_error
        or _has_injected_arguments(tool)
    )


def _has_injected_arguments(tool: BaseTool) -> bool:
    """True if the tool takes arguments the model does not see (InjectedToolArg & co)."""
    if isinstance(tool.args_schema, dict):
        return False
    return bool(set(get_fields(tool.get_input_schema())) - set(tool.args))


def _result(output: Any) -> ToolResult:
    """Turn what ``ainvoke`` returned into a `ToolResult`."""
    if isinstance(output, ToolMessage):
        text = str(output.text)
        if not text and not isinstance(output.content, str):
            text = _json(output.content)
        artifact = output.artifact
        if isinstance(artifact, Mapping) and set(artifact) == {ARTIFACT_KEY}:
            artifact = artifact[ARTIFACT_KEY]  # the langchain-mcp-adapters shape
        return ToolResult(text=text, structured=artifact, is_error=output.status == "error")
    if isinstance(output, ToolOutputMixin) or _is_output_list(output):
        # A LangGraph Command updates graph state: only a LangGraph agent can apply it.
        return ToolResult.error(
            f"Error: the tool returned a {type(output).__name__}, which only a "
            "LangGraph agent can apply"
        )
    if isinstance(output, str):
        return ToolResult(text=output)
    if output is None:
        return ToolResult(text="")
    if isinstance(output, BaseModel):
        output = output.model_dump(mode="json")
    if isinstance(output, tuple):
        output = list(output)
    if isinstance(output, (dict, list)):
        return ToolResult(text=_json(output), structured=output)
    return ToolResult(text=str(output))


def _is_output_list(output: Any) -> bool:
    return (
        isinstance(output, list)
        and bool(output)
        and all(isinstance(item, ToolOutputMixin) for item in output)
    )


def _hints(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """The MCP hints in ``mapping`` under either spelling, camelCase out; None is absent."""
    hints: dict[str, Any] = {}
    for snake, camel in _HINT_KEYS.items():
        for key in (snake, camel):
            value = mapping.get(key)
            wanted = str if camel == "title" else bool
            if isinstance(value, wanted):
                hints[camel] = value
    return hints


def _run_blocking(make_coroutine: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run a coroutine to completion from sync code, inside or outside a running loop.

    Inside a running loop (sync ``invoke`` from async code) it runs in a fresh loop on
    a worker thread, since the caller's loop is blocked; a tool bound to one event loop
    (an MCP session) should then be called with ``ainvoke``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make_coroutine())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-sync") as pool:
        return pool.submit(lambda: asyncio.run(make_coroutine())).result()


def _describe(exc: ValidationError) -> str:
    """Pydantic errors in one line a small model can act on: ``path: message; ...``."""
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or '(arguments)'}: {error['msg']}"
        for error in exc.errors(include_url=False)
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
