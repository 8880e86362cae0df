"""The public surface: `from toolweave import ...` for every public name, loaded lazily,
and the pure packages stay free of llama.cpp."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import toolweave

#: The public names, pinned: a change here is a change of the public API.
EXPECTED = [
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
    "MODES",
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


_EVAL_IMPORT = re.compile(r"^\s*(from toolweave\.eval\b|import toolweave\.eval\b)", re.M)


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_all_is_the_expected_list() -> None:
    assert sorted(toolweave.__all__) == sorted(EXPECTED)
    assert len(set(toolweave.__all__)) == len(toolweave.__all__)


def test_every_public_name_imports() -> None:
    code = (
        "import toolweave\n"
        "for n in toolweave.__all__:\n"
        "    assert getattr(toolweave, n) is not None, n\n"
    )
    _run(code + "from toolweave import ChatToolweave, MCPHub, Engine, ToolSpec\nprint('ok')")


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        toolweave.NoSuchThing  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchThing" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_import_is_lazy_about_the_engine() -> None:
    code = (
        "import sys, toolweave\n"
        "from toolweave import ToolSpec, ToolRAG, parse_plan, classify_tool\n"
        "print('llama_cpp' in sys.modules)\n"
        "from toolweave import Engine\n"
        "print('llama_cpp' in sys.modules)"
    )
    assert _run(code).split() == ["False", "True"]


def test_toolkit_does_not_import_llama_cpp() -> None:
    code = (
        "import sys, toolweave, toolweave.eval.bfcl, toolweave.eval.scoring\n"
        "import toolweave.plan.executor, toolweave.prompting.promptweaver\n"
        "print('llama_cpp' in sys.modules)"
    )
    assert _run(code) == "False"
    toolkit = Path(toolweave.__file__).parent
    imports = re.compile(r"^\s*(?:import|from)\s+(?:llama_cpp|llguidance\.llamacpp)\b", re.M)
    for path in toolkit.rglob("*.py"):
        assert not imports.search(path.read_text(encoding="utf-8")), path


def test_library_never_imports_eval() -> None:
    root = Path(toolweave.__file__).resolve().parents[1]
    for folder in ("toolkit", "native", "adapters"):
        for path in (root / folder).rglob("*.py"):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(("toolkit/eval/", "adapters/bench/")):
                continue
            assert not _EVAL_IMPORT.search(path.read_text(encoding="utf-8")), rel
