"""BFCL v4 multi-turn tools, executed by BFCL's own implementations.

BFCL runs its multi-turn tools as Python classes (``GorillaFileSystem``, ``TwitterAPI``,
...) kept in ``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/`` of the
``bfcl-eval`` wheel. Their code is not copied here: `bfcl_code_dir` extracts that
directory from the wheel into a cache, and `load_bfcl_class` imports a class from it
under a private package name, so no ``bfcl_eval`` package is put on ``sys.path`` or
left in ``sys.modules`` to shadow a real one.

`bfcl_environment` builds what BFCL builds for a conversation: a fresh instance of each
involved class loaded with the conversation's ``initial_config``; it can replay the
ground truth of the earlier turns, and returns one `Tool` per offered tool.

Errors: a code directory that cannot be filled, a missing module or dependency, an
unknown class, conversation or method raise `DatasetError` to the caller. What a tool
call does wrong (it raises, or returns BFCL's ``{"error": ...}``) comes back to the
model as an error `ToolResult`.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import cache, lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from toolweave.eval.bfcl_data import BFCL_VERSION, DatasetError, bfcl_data_dir, unpack_wheel_dir
from toolweave.eval.bfcl_multi_turn import FUNC_DOC_FILES, MultiTurnCase, load_multi_turn
from toolweave.eval.workload import PlanRequest
from toolweave.tools import Tool, ToolResult
from toolweave.toolspec import ToolSpec

__all__ = [
    "BFCL_CLASS_MODULES",
    "bfcl_code_dir",
    "bfcl_environment",
    "load_bfcl_class",
]

# Class -> module, as in BFCL's CLASS_FILE_PATH_MAPPING: each module is named like the
# class's function doc file (travel_booking.py holds TravelAPI).
BFCL_CLASS_MODULES: Mapping[str, str] = {
    name: file.removesuffix(".json") for name, file in FUNC_DOC_FILES.items()
}
_STATELESS = frozenset({"MathAPI"})  # BFCL loads no scenario into these
_CODE_ENV_VAR = "TOOLWEAVE_BFCL_CODE_DIR"
_CODE_PREFIX = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code/"
_BFCL_PACKAGE = _CODE_PREFIX.rstrip("/").replace("/", ".")
_MARKERS = ("__init__.py", "long_context.py", *(f"{m}.py" for m in BFCL_CLASS_MODULES.values()))
_HINT = (
    f"check network access to PyPI, or set {_CODE_ENV_VAR} to an unpacked {_CODE_PREFIX} directory"
)
_IMPORT_LOCK = threading.Lock()  # the temporary sys.modules aliases are process-wide


def bfcl_code_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the directory holding BFCL's multi-turn tool code, downloading once.

    The directory is ``cache_dir``, else ``$TOOLWEAVE_BFCL_CODE_DIR``, else
    ``~/.cache/toolweave/bfcl-code-2026.3.23``; it holds the files of the wheel's
    ``func_source_code/`` folder and nothing else. Raises `DatasetError`.
    """
    if cache_dir is None:
        cache_dir = os.environ.get(_CODE_ENV_VAR) or (
            Path.home() / ".cache" / "toolweave" / f"bfcl-code-{BFCL_VERSION}"
        )
    return unpack_wheel_dir(
        Path(cache_dir).expanduser(),
        _CODE_PREFIX,
        _MARKERS,
        what="the BFCL multi-turn tool code",
        hint=_HINT,
    )


def load_bfcl_class(class_name: str, *, code_dir: str | os.PathLike[str] | None = None) -> type:
    """BFCL's implementation of one multi-turn class, e.g. ``"GorillaFileSystem"``.

    Imported once per code directory; raises `DatasetError` for an unknown class or
    code that does not import (``MathAPI`` needs ``mpmath``).
    """
    if class_name not in BFCL_CLASS_MODULES:
        known = ", ".join(BFCL_CLASS_MODULES)
        raise DatasetError(f"unknown BFCL class {class_name!r} (known: {known})")
    return _load_class(class_name, bfcl_code_dir(code_dir).resolve())


def bfcl_environment(
    request_or_case: PlanRequest | MultiTurnCase,
    *,
    replay_history: bool = True,
    code_dir: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
) -> list[Tool]:
    """Fresh BFCL tools for one conversation, in the state BFCL starts it in.

    Every call builds new instances of the involved classes from the conversation's
    ``initial_config``, so environments never share state. For a `PlanRequest`, the
    tools are ``request.tools`` and, with ``replay_history``, the ground-truth calls of
    the turns before ``request.turn`` run first (their failures are ignored, as BFCL
    ignores them); for a `MultiTurnCase`, the tools are all of ``case.tools`` in the
    initial state. A tool runs its BFCL method synchronously when awaited, so calls
    take effect in the order they are started. Raises `DatasetError`.
    """
    if isinstance(request_or_case, MultiTurnCase):
        case, turn, specs = request_or_case, 0, request_or_case.tools
    else:
        request = request_or_case
        cases = _cases_by_id(request.category, bfcl_data_dir(data_dir))
        found = cases.get(request.conversation_id)
        if found is None:
            raise DatasetError(
                f"no BFCL {request.category} conversation {request.conversation_id!r} "
                f"for request {request.id!r}"
            )
        case, turn, specs = found, request.turn, request.tools
    root = bfcl_code_dir(code_dir).resolve()
    methods: dict[str, tuple[str, Callable[..., Any]]] = {}
    for class_name, instance in _instances(case, root).items():
        for name, method in _public_methods(instance):
            methods[name] = (class_name, method)
    if replay_history:
        for calls in case.ground_truth[:turn]:
            for call in calls:
                if call.name in methods:
                    _run_method(call.name, methods[call.name][1], call.arguments)
    tools: list[Tool] = []
    for spec in specs:
        if spec.name not in methods:
            classes = ", ".join(case.involved_classes)
            raise DatasetError(f"tool {spec.name!r} of {case.id} has no method in {classes}")
        class_name, method = methods[spec.name]
        tools.append(_tool(spec, method, class_name))
    return tools


# -- instances and tools ----------------------------------------------------------


def _instances(case: MultiTurnCase, root: Path) -> dict[str, object]:
    """One loaded instance per involved class, as BFCL's execute_multi_turn_func_call."""
    long_context = "long_context" in case.category or "composite" in case.category
    instances: dict[str, object] = {}
    for class_name in case.involved_classes:
        if class_name not in BFCL_CLASS_MODULES:
            raise DatasetError(f"{case.id} involves unknown BFCL class {class_name!r}")
        instance = _load_class(class_name, root)()
        if class_name not in _STATELESS:
            config = copy.deepcopy(dict(case.initial_config.get(class_name, {})))
            try:
                instance._load_scenario(config, long_context=long_context)
            except Exception as exc:  # a scenario BFCL's code rejects is a data problem
                raise DatasetError(
                    f"{class_name}._load_scenario failed for {case.id}: {type(exc).__name__}: {exc}"
                ) from exc
        instances[class_name] = instance
    return instances


def _public_methods(instance: object) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name, member in inspect.getmembers(instance, predicate=inspect.ismethod):
        if not name.startswith("_"):
            yield name, member


def _tool(spec: ToolSpec, method: Callable[..., Any], class_name: str) -> Tool:
    async def run(arguments: Mapping[str, Any]) -> ToolResult:
        # Run in the event loop, not a thread: BFCL's methods are fast pure Python,
        # and calls on one stateful instance must not overlap or reorder.
        return _run_method(spec.name, method, arguments)

    return Tool(spec=spec, run=run, source=f"bfcl:{class_name}", origin=method)


def _run_method(name: str, method: Callable[..., Any], arguments: Mapping[str, Any]) -> ToolResult:
    try:
        # A copy, so that state the method keeps never aliases the caller's arguments.
        value = method(**copy.deepcopy(dict(arguments)))
    except Exception as exc:  # BFCL records a raising call as an error observation
        return ToolResult.error(f"{name} raised {type(exc).__name__}: {exc}")
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
        structured = json.loads(text)  # a snapshot: results may alias live state
    except (TypeError, ValueError):
        text, structured = str(value), None
    problem = _error_of(structured)
    if problem is not None:
        text = problem if problem.startswith(f"{name}:") else f"{name}: {problem}"
        return ToolResult(text=text, structured=structured, is_error=True)
    return ToolResult(text=text, structured=structured)


def _error_of(value: Any) -> str | None:
    """The message of BFCL's error results: ``{"error": ...}``, or a list of just that."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, dict) and value.get("error"):
        return str(value["error"])
    return None


@lru_cache(maxsize=16)
def _cases_by_id(category: str, data_root: Path) -> Mapping[str, MultiTurnCase]:
    return {case.id: case for case in load_multi_turn(category, data_dir=data_root)}


# -- importing BFCL's modules -----------------------------------------------------


@cache
def _load_class(class_name: str, root: Path) -> type:
    module_name = BFCL_CLASS_MODULES[class_name]
    with _IMPORT_LOCK:
        module = _import(root, module_name, ())
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise DatasetError(f"{root / module_name}.py does not define class {class_name}")
    return found


def _import(root: Path, module_name: str, importing: tuple[str, ...]) -> ModuleType:
    """Import ``<private package>.<module_name>``, with its ``bfcl_eval....`` imports of
    sibling modules answered by the private copies for the time of the import."""
    if module_name in importing:
        raise DatasetError(f"circular imports in BFCL code: {' -> '.join(importing)}")
    path = root / f"{module_name}.py"
    if not path.is_file():
        raise DatasetError(f"{path} is missing; delete {root} to download it again")
    package = _private_package(root)
    chain = (*importing, module_name)
    aliases = {
        f"{_BFCL_PACKAGE}.{sibling}": _import(root, sibling, chain)
        for sibling in _sibling_imports(path)
    }
    saved = {name: sys.modules.get(name) for name in aliases}
    sys.modules.update(aliases)
    try:
        return importlib.import_module(f"{package}.{module_name}")
    except ImportError as exc:
        missing = f" needs {exc.name!r}, which is not installed" if exc.name else f": {exc}"
        raise DatasetError(f"BFCL's {module_name}.py{missing}") from exc
    except SyntaxError as exc:
        raise DatasetError(f"BFCL's {module_name}.py does not parse: {exc}") from exc
    finally:
        for name, previous in saved.items():
            if previous is None:
                del sys.modules[name]
            else:
                sys.modules[name] = previous


def _private_package(root: Path) -> str:
    """Register ``root`` as a package whose name is private to this code directory."""
    name = "_toolweave_bfcl_" + hashlib.sha256(str(root).encode()).hexdigest()[:12]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, root / "__init__.py", submodule_search_locations=[str(root)]
        )
        if spec is None or spec.loader is None:
            raise DatasetError(f"cannot import {root} as a package")
        package = importlib.util.module_from_spec(spec)
        sys.modules[name] = package
        spec.loader.exec_module(package)
    return name


def _sibling_imports(path: Path) -> list[str]:
    """Modules of BFCL's func_source_code package that ``path`` imports by full name."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as exc:
        raise DatasetError(f"BFCL's {path.name} does not parse: {exc}") from exc
    siblings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            head, _, sibling = node.module.rpartition(".")
            if head == _BFCL_PACKAGE and sibling not in siblings:
                siblings.append(sibling)
    return siblings
