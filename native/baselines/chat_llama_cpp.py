"""What a LangChain user runs today on a local GGUF, for `toolweave bench session`.

- `chat_llama_cpp`: langchain-community's `ChatLlamaCpp` at its best settings (greedy,
  no repetition penalty, 512-token prefill batches, the decode thread count a sweep
  found best), optionally with llama-cpp-python's `LlamaDiskCache` so a new process
  starts from the states an earlier one left on disk.
- `GrammarCompletions`: llama-cpp-python's `create_chat_completion`, a tool call decoded
  under the JSON schema of the tools (`call_schema`, the `grammar` baseline's schema).
- `best_thread_count`: the quick 1..cores sweep of llama-cpp-python's greedy step.

Both report what llama.cpp evaluated (`llama_perf_context`): prompt tokens prefilled and
decode passes. `ChatLlamaCpp` imports llama_cpp, so it is built here, the one package
that imports it.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp

from toolweave.errors import ModelError, ToolweaveError
from toolweave.native.baselines.llama_cpp_steps import LlamaCppSteps
from toolweave.native.compute import route_llama

__all__ = [
    "INSTALL_HINT",
    "Completion",
    "GrammarCompletions",
    "LlamaPerf",
    "best_thread_count",
    "chat_llama_cpp",
    "chat_llama_cpp_missing",
    "template_handler",
]

INSTALL_HINT = "pip install 'toolweave[bench]' (or: pip install langchain-community)"


def chat_llama_cpp_missing() -> str | None:
    """One line saying why `ChatLlamaCpp` cannot be used here, or None when it can."""
    try:
        _chat_llama_cpp_class()
    except ImportError:
        return f"ChatLlamaCpp needs langchain-community: {INSTALL_HINT}"
    return None


def _chat_llama_cpp_class() -> type[Any]:
    """langchain-community's `ChatLlamaCpp`, imported without the package's warning
    that it is being sunset (the baseline still works: docs/session.md)."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        from langchain_community.chat_models.llamacpp import ChatLlamaCpp
    return ChatLlamaCpp


class _QuietDiskCache(llama_cpp.LlamaDiskCache):
    """`LlamaDiskCache` without the line it prints on stderr at every lookup and store."""

    def __getitem__(self, key: Sequence[int]) -> llama_cpp.LlamaState:
        with contextlib.redirect_stderr(io.StringIO()):
            return super().__getitem__(key)

    def __setitem__(self, key: Sequence[int], value: llama_cpp.LlamaState) -> None:
        with contextlib.redirect_stderr(io.StringIO()):
            super().__setitem__(key, value)


class LlamaPerf:
    """Running totals of one `llama_cpp.Llama`: prompt tokens evaluated, decode passes,
    and the milliseconds llama.cpp spent evaluating prompts."""

    def __init__(self, llm: llama_cpp.Llama) -> None:
        self.llm = llm

    def totals(self) -> tuple[int, int]:
        perf = llama_cpp.llama_perf_context(self.llm._ctx.ctx)
        return int(perf.n_p_eval), int(perf.n_eval)

    def prefill_ms(self) -> float:
        return float(llama_cpp.llama_perf_context(self.llm._ctx.ctx).t_p_eval_ms)


def chat_llama_cpp(
    model_path: str | os.PathLike[str],
    *,
    n_ctx: int,
    n_threads: int,
    max_tokens: int,
    disk_cache: Path | None = None,
    chat_template: str | None = None,
) -> tuple[Any, LlamaPerf]:
    """`ChatLlamaCpp` on `model_path` at its best settings, and its llama.cpp totals.

    `disk_cache`: a directory for llama-cpp-python's `LlamaDiskCache` (states saved after
    every completion, the longest matching one loaded first). `chat_template`: Jinja text
    replacing the GGUF's template, rendered by llama-cpp-python's own Jinja formatter
    with the bound tools as its ``tools``. Raises `ToolweaveError`
    (with the install hint) without langchain-community, `ModelError` when the file
    does not load."""
    missing = chat_llama_cpp_missing()
    if missing is not None:
        raise ToolweaveError(missing)
    ChatLlamaCpp = _chat_llama_cpp_class()
    try:
        chat = ChatLlamaCpp(
            model_path=str(model_path),
            n_ctx=n_ctx,
            n_batch=512,  # its default of 8 makes prefill several times slower
            n_threads=n_threads,
            max_tokens=max_tokens,
            temperature=0.0,
            top_k=1,
            repeat_penalty=1.0,  # greedy like every other configuration
            streaming=False,
            verbose=False,
        )
    except ValueError as exc:
        raise ModelError(f"ChatLlamaCpp could not load {model_path}: {exc}") from None
    llm = route_llama(chat.client)  # its passes on toolweave's compute thread
    if chat_template is not None:
        llm.chat_handler = template_handler(llm, chat_template)
    if disk_cache is not None:
        disk_cache.mkdir(parents=True, exist_ok=True)
        llm.set_cache(_QuietDiskCache(cache_dir=str(disk_cache)))
    return chat, LlamaPerf(llm)


def template_handler(llm: llama_cpp.Llama, template: str) -> Any:
    """llama-cpp-python's chat handler for Jinja `template` on `llm`, built as it builds
    the handler of a GGUF's own template (its BOS and EOS texts, EOS as the stop)."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos, bos = llm.token_eos(), llm.token_bos()
    return Jinja2ChatFormatter(
        template=template,
        eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
        stop_token_ids=[eos],
    ).to_chat_handler()


@dataclass(frozen=True)
class Completion:
    """One `create_chat_completion`: its text and what llama.cpp evaluated for it."""

    text: str
    prompt_tokens: int
    prefilled: int
    decode_passes: int
    ms: float
    truncated: bool


class GrammarCompletions:
    """llama-cpp-python's `create_chat_completion` on its own `Llama`, optionally under a
    JSON schema (llama.cpp's GBNF from the schema)."""

    def __init__(self, model_path: str | os.PathLike[str], *, n_ctx: int, n_threads: int):
        try:
            self.llm = llama_cpp.Llama(
                str(model_path), n_ctx=n_ctx, n_batch=512, n_threads=n_threads, verbose=False
            )
        except (ValueError, RuntimeError) as exc:
            raise ModelError(f"llama-cpp-python could not load {model_path}: {exc}") from None
        route_llama(self.llm)
        self.perf = LlamaPerf(self.llm)

    def complete(
        self, messages: list[dict[str, Any]], schema: dict[str, Any] | None, max_tokens: int
    ) -> Completion:
        p0, d0 = self.perf.totals()
        options: dict[str, Any] = {}
        if schema is not None:
            options["response_format"] = {"type": "json_object", "schema": schema}
        t0 = time.perf_counter()
        out: Any = self.llm.create_chat_completion(
            messages=messages,  # type: ignore[arg-type]
            temperature=0.0,
            top_k=1,
            repeat_penalty=1.0,
            max_tokens=max_tokens,
            **options,
        )
        ms = (time.perf_counter() - t0) * 1000
        p1, d1 = self.perf.totals()
        choice = out["choices"][0]
        return Completion(
            text=choice["message"]["content"] or "",
            prompt_tokens=int(out["usage"]["prompt_tokens"]),
            prefilled=p1 - p0,
            decode_passes=d1 - d0,
            ms=ms,
            truncated=choice.get("finish_reason") == "length",
        )

    def close(self) -> None:
        self.llm.close()


def best_thread_count(
    model_path: str | os.PathLike[str], text: str, *, steps: int = 8
) -> tuple[int, dict[int, float]]:
    """The thread count of llama-cpp-python's fastest greedy step after `text`, from a
    quick sweep over 1..cores (each count timed once; the median of `steps` steps), and
    the ms per step of every count."""
    cores = os.cpu_count() or 1
    with LlamaCppSteps(model_path, n_ctx=2048, n_threads_batch=cores) as llm:
        prompt = llm.tokenize(text)[:1500] or [0]
        llm.step_ms(prompt, cores, 2)  # the prompt's prefill, untimed
        timed = {n: llm.step_ms(prompt, n, steps) for n in range(1, cores + 1)}
    return min(timed, key=lambda n: timed[n]), timed
