"""toolweave: fast tool-calling agents on small local LLMs (llama.cpp), without retraining
the model and without changing what the agent does.

Every public name is imported from here::

    from toolweave import ChatToolweave, MCPHub, ToolCaller, Engine, ToolSpec

Names are loaded on first use, so ``import toolweave`` stays light: llama.cpp
is imported only when an engine-side name such as `Engine` is used.

Layout (see ``docs/architecture.md``): this package (`toolkit/`) is pure logic and never
imports llama.cpp; `toolweave.native` is the only code that does; `toolweave.adapters`
holds the edges (LangChain, MCP, the command line, the benchmarks).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolweave.adapters.langchain.chat_model import ChatToolweave
    from toolweave.adapters.langchain.plan_agent import PlanOutAgent, PlanOutResult
    from toolweave.adapters.langchain.provisional import ProvisionalToolMiddleware
    from toolweave.adapters.langchain.tools import from_langchain, to_langchain
    from toolweave.adapters.mcp.client import (
        MCPConfigError,
        chat_model_sampler,
        demo_server_configs,
        load_mcp_config,
    )
    from toolweave.adapters.mcp.config import ServerConfig
    from toolweave.adapters.mcp.hub import MCPHub
    from toolweave.consent import ConsentDecision, ConsentPolicy, ConsentRequest, with_consent
    from toolweave.drafting.ngram import NgramTable
    from toolweave.errors import (
        CallFormatError,
        ConstraintError,
        ContextFullError,
        DecodeCancelledError,
        DecodeError,
        EngineBusyError,
        EngineError,
        ModeError,
        ModelError,
        SequenceError,
        ToolServerError,
        ToolSpecError,
        ToolweaveError,
    )
    from toolweave.events import CallEvent
    from toolweave.formats import (
        CallFormat,
        CallStream,
        calls_in_text,
        detect_call_format,
        format_for_chat_template,
        get_format,
    )
    from toolweave.grammar.call import call_grammar, value_grammar
    from toolweave.models import default_model_path, gemma_model_path, resolve_model
    from toolweave.modes import MODES, Mode, check_mode
    from toolweave.native.calibration import CostTable, measure_costs
    from toolweave.native.caller import ToolCaller
    from toolweave.native.engine import Engine
    from toolweave.native.states.store import StateStore
    from toolweave.plan.executor import PlanRun, execute_plan, execute_plan_text
    from toolweave.plan.format import Plan, PlanError, PlanTask
    from toolweave.plan.ledger import CallLedger
    from toolweave.plan.parse import PlanStreamParser, parse_plan
    from toolweave.prompting.chat_template import render_chat
    from toolweave.prompting.promptweaver import PromptWeaver
    from toolweave.prompting.template_file import ChatTemplateError, load_chat_template
    from toolweave.prompting.toolrag import ToolRAG
    from toolweave.readonly import ReadOnlyDecision, classify_tool, classify_tools
    from toolweave.results import CallResult, CallStats, InvalidCall
    from toolweave.sampling import Sampling
    from toolweave.tools import Tool, ToolResult
    from toolweave.toolspec import ToolCall, ToolSpec, load_tools, load_tools_file

#: Public name -> the module that defines it.
_WHERE: dict[str, str] = {
    # pure: tools, calls, results, errors
    **dict.fromkeys(
        (
            "CallFormatError",
            "ConstraintError",
            "ContextFullError",
            "DecodeCancelledError",
            "DecodeError",
            "EngineBusyError",
            "EngineError",
            "ModeError",
            "ModelError",
            "SequenceError",
            "ToolServerError",
            "ToolSpecError",
            "ToolweaveError",
        ),
        "toolweave.errors",
    ),
    **dict.fromkeys(
        ("ToolCall", "ToolSpec", "load_tools", "load_tools_file"), "toolweave.toolspec"
    ),
    **dict.fromkeys(("Tool", "ToolResult"), "toolweave.tools"),
    **dict.fromkeys(("CallResult", "CallStats", "InvalidCall"), "toolweave.results"),
    "CallEvent": "toolweave.events",
    **dict.fromkeys(("MODES", "Mode", "check_mode"), "toolweave.modes"),
    "Sampling": "toolweave.sampling",
    **dict.fromkeys(
        ("default_model_path", "gemma_model_path", "resolve_model"), "toolweave.models"
    ),
    **dict.fromkeys(
        (
            "CallFormat",
            "CallStream",
            "calls_in_text",
            "detect_call_format",
            "format_for_chat_template",
            "get_format",
        ),
        "toolweave.formats",
    ),
    **dict.fromkeys(("call_grammar", "value_grammar"), "toolweave.grammar.call"),
    **dict.fromkeys(("ReadOnlyDecision", "classify_tool", "classify_tools"), "toolweave.readonly"),
    # pure: prompts, drafting, plans
    "render_chat": "toolweave.prompting.chat_template",
    **dict.fromkeys(
        ("ChatTemplateError", "load_chat_template"), "toolweave.prompting.template_file"
    ),
    "ToolRAG": "toolweave.prompting.toolrag",
    "PromptWeaver": "toolweave.prompting.promptweaver",
    "NgramTable": "toolweave.drafting.ngram",
    **dict.fromkeys(("Plan", "PlanError", "PlanTask"), "toolweave.plan.format"),
    **dict.fromkeys(("PlanStreamParser", "parse_plan"), "toolweave.plan.parse"),
    **dict.fromkeys(("PlanRun", "execute_plan", "execute_plan_text"), "toolweave.plan.executor"),
    "CallLedger": "toolweave.plan.ledger",
    # pure: consent for side effects
    **dict.fromkeys(
        ("ConsentDecision", "ConsentPolicy", "ConsentRequest", "with_consent"),
        "toolweave.consent",
    ),
    # engine side (imports llama.cpp)
    "Engine": "toolweave.native.engine",
    "ToolCaller": "toolweave.native.caller",
    **dict.fromkeys(("CostTable", "measure_costs"), "toolweave.native.calibration"),
    "StateStore": "toolweave.native.states.store",
    # edges
    "ChatToolweave": "toolweave.adapters.langchain.chat_model",
    "ProvisionalToolMiddleware": "toolweave.adapters.langchain.provisional",
    **dict.fromkeys(("PlanOutAgent", "PlanOutResult"), "toolweave.adapters.langchain.plan_agent"),
    **dict.fromkeys(("from_langchain", "to_langchain"), "toolweave.adapters.langchain.tools"),
    "MCPHub": "toolweave.adapters.mcp.hub",
    "ServerConfig": "toolweave.adapters.mcp.config",
    **dict.fromkeys(
        ("MCPConfigError", "chat_model_sampler", "demo_server_configs", "load_mcp_config"),
        "toolweave.adapters.mcp.client",
    ),
}

__all__ = [
    "MODES",
    "CallEvent",
    "CallFormat",
    "CallFormatError",
    "CallLedger",
    "CallResult",
    "CallStats",
    "CallStream",
    "ChatTemplateError",
    "ChatToolweave",
    "ConsentDecision",
    "ConsentPolicy",
    "ConsentRequest",
    "ConstraintError",
    "ContextFullError",
    "CostTable",
    "DecodeCancelledError",
    "DecodeError",
    "Engine",
    "EngineBusyError",
    "EngineError",
    "InvalidCall",
    "MCPConfigError",
    "MCPHub",
    "Mode",
    "ModeError",
    "ModelError",
    "NgramTable",
    "Plan",
    "PlanError",
    "PlanOutAgent",
    "PlanOutResult",
    "PlanRun",
    "PlanStreamParser",
    "PlanTask",
    "PromptWeaver",
    "ProvisionalToolMiddleware",
    "ReadOnlyDecision",
    "Sampling",
    "SequenceError",
    "ServerConfig",
    "StateStore",
    "Tool",
    "ToolCall",
    "ToolCaller",
    "ToolRAG",
    "ToolResult",
    "ToolServerError",
    "ToolSpec",
    "ToolSpecError",
    "ToolweaveError",
    "call_grammar",
    "calls_in_text",
    "chat_model_sampler",
    "check_mode",
    "classify_tool",
    "classify_tools",
    "default_model_path",
    "demo_server_configs",
    "detect_call_format",
    "execute_plan",
    "execute_plan_text",
    "format_for_chat_template",
    "from_langchain",
    "gemma_model_path",
    "get_format",
    "load_chat_template",
    "load_mcp_config",
    "load_tools",
    "load_tools_file",
    "measure_costs",
    "parse_plan",
    "render_chat",
    "resolve_model",
    "to_langchain",
    "value_grammar",
    "with_consent",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'toolweave' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
