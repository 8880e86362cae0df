"""`ChatToolweave`: a LangChain chat model over the native engine and the fast path.

    model = ChatToolweave()                      # embedded SmolLM2, mode "lossless"
    agent = create_agent(model, tools, middleware=[ProvisionalToolMiddleware()])

Tool calls are decoded by `ToolCaller` in the chosen mode (default `lossless`: the
fast path whose output equals serial greedy decoding); answers in text by greedy
decoding; structured output under a JSON-schema grammar. ``temperature`` above 0
(with ``top_p``, ``top_k`` and ``seed``, in the constructor or per call as
``invoke(..., temperature=0.7, seed=1)``) samples instead: `lossless` then has the
distribution of plain sampling (docs/sampling.md); the ``auto_calls="model"`` decision
stays the greedy first token. One engine per model file is
shared by every instance in the process and serialised by its lock, so concurrent
callers (threads, ``batch``, async tasks, ``abatch``) never see each other's
sequences. A request holds the lock only while it decodes, on one thread: streams and
async calls decode on a worker thread and hand events back through a queue, so a
consumer that pauses never holds the engine, and closing a stream or cancelling an
async call stops its decoding at the next forward pass (`blocking`).

With ``tool_choice`` auto, ``auto_calls="model"`` lets the model decide: it calls a tool
when its greedy first token starts the call format. Small models rarely choose to call
on their own (SmolLM2-135M opened a call for 1 of 8 assistant requests), so
``auto_calls="user_turn"`` calls a tool whenever the last message is the user's and lets
the model decide after tool results, except that a call repeating one already made
since the user's message becomes a text answer (tiny models otherwise loop on it);
agents on tiny models want that one.

LangChain's conventions, as ChatLlamaCpp and ChatOllama follow them: an argument the
constructor does not take raises a one-line `TypeError` naming the closest one;
``model_path`` is ``model``; ``n_ctx``, ``n_batch`` and ``n_threads`` build the engine
(one per setting in the process) and ``chat_template`` replaces the file's template on
the shared engine; ``parallel_tool_calls`` (constructor or ``bind_tools``) allows one
call per message or several; ``profile`` gives the context window, the answer size and
the capabilities, so ``create_agent`` asks for structured responses as grammar-bound
JSON and summarization middleware can use fractional limits; ``usage_metadata`` counts
the prompt tokens read from a cached state in ``input_token_details["cache_read"]``,
and every message names ``model_provider`` and ``model_name`` in its metadata.
"""

from __future__ import annotations

import atexit
import dataclasses
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput, ModelProfile
from langchain_core.language_models.chat_models import LangSmithParams
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from toolweave.adapters.langchain.arguments import same_model, unknown_argument
from toolweave.adapters.langchain.caches import (
    CallerCache,
    EngineSettings,
    private_engine,
    shared_engine,
)
from toolweave.adapters.langchain.early import active_runner
from toolweave.adapters.langchain.messages import (
    PROVIDER,
    ai_message,
    final_chunk,
    message_text,
    split_system,
    template_messages,
)
from toolweave.adapters.langchain.profile import model_profile
from toolweave.adapters.langchain.request_plan import (
    RequestPlan,
    calls_since_user,
    openai_tool,
    plan_request,
    repeats,
    tool_choice_name,
)
from toolweave.adapters.langchain.stream import CallStreamer
from toolweave.adapters.langchain.structured import structured_output_runnable
from toolweave.disk_cache import cache_root
from toolweave.errors import ToolSpecError, ToolweaveError
from toolweave.events import (
    CallEvent,
    CallName,
    FinalCall,
    ModelDone,
    ModelStart,
    Observer,
    PromptCacheEvent,
    ProvisionalCallEvent,
)
from toolweave.grammar.call import arguments_schema
from toolweave.models import resolve_model
from toolweave.modes import MODES, check_mode
from toolweave.native.caller import ToolCaller, template_format
from toolweave.native.chat import chat_tokens
from toolweave.native.decode.exspec import exspec_table, generate_with_exspec
from toolweave.native.decode.text import first_token, generate_text
from toolweave.native.engine import Engine
from toolweave.native.sampling import Sampler
from toolweave.native.states.store import StateStore
from toolweave.prompting.template_file import check_chat_template
from toolweave.results import CallResult
from toolweave.sampling import Sampling
from toolweave.toolspec import ToolSpec

__all__ = ["DEFAULT_STORE", "PARALLEL_CALLS", "ChatToolweave", "default_state_store"]

#: ``ChatToolweave(state_store=DEFAULT_STORE)``, the default: the process's shared store.
DEFAULT_STORE = "default"

#: Most tool calls in one message when parallel tool calls are asked for and
#: ``max_calls`` is left at its default of one.
PARALLEL_CALLS = 8

_Event = tuple[CallEvent, ToolCaller | None]


class ChatToolweave(BaseChatModel):
    """A chat model on a local GGUF model, with toolweave's tool-call decoders."""

    #: GGUF path or known model name (``model_path=`` is accepted for the same thing).
    model: str | None = Field(default=None, description="GGUF path or known model name.")
    mode: str = "lossless"
    #: The context window in tokens, prompt and answer together.
    n_ctx: int = 8192
    #: Most tokens in one prefill pass (None: the engine's default, 512).
    n_batch: int | None = None
    #: Threads for every pass (None: the engine's default, every physical core).
    n_threads: int | None = None
    #: Chat-template text (Jinja) used instead of the model file's for every prompt
    #: (the engine stays shared with models that keep the file's template).
    chat_template: str | None = None
    max_tokens: int = 512
    #: Sampling temperature (0: greedy decoding, the default).
    temperature: float = 0.0
    #: Nucleus sampling: keep the most likely tokens up to this total (None: 1, off).
    top_p: float | None = None
    #: Keep only the k most likely tokens (None or 0: off).
    top_k: int | None = None
    #: Seed of every request's sampler: the same seed, the same answer (None: random).
    seed: int | None = None
    #: Most tool calls in one message (None: no limit but ``max_tokens``).
    max_calls: int | None = 1
    #: Several tool calls in one message: False allows one, True up to ``max_calls``
    #: (`PARALLEL_CALLS` when ``max_calls`` is left at 1), None leaves ``max_calls``
    #: alone. ``bind_tools(parallel_tool_calls=...)`` overrides it per binding.
    parallel_tool_calls: bool | None = None
    auto_calls: Literal["model", "user_turn"] = "model"
    call_format: str | None = None
    stop: list[str] | None = None
    #: ``invoke`` streams internally (LangChain's switch: callbacks see each token).
    streaming: bool = False
    #: Reuse the KV state of the longest prompt prefix already processed. Faster, but the
    #: logits then depend slightly on how earlier prompts were split into prefill passes,
    #: so greedy output can differ from a cold start on near-ties; False prefills every
    #: prompt from scratch (same request, same answer, whatever ran before).
    reuse_prompt_cache: bool = True
    #: Called with each decoding phase's event (live displays, traces).
    observer: Observer | None = Field(default=None, exclude=True)
    #: Saved prompt states shared by requests and later processes: each prompt starts from
    #: the longest saved prefix. ``"default"``: the process's store over
    #: ``<cache root>/prompt-states`` (disk bounded by ``$TOOLWEAVE_CACHE_LIMIT``, else
    #: 4 GiB); a `toolweave.native.states.store.StateStore`: that one; None or False: only
    #: the engine's live cache. Needs reuse_prompt_cache.
    state_store: Any = Field(default=DEFAULT_STORE, exclude=True)
    #: In ``fast`` and ``lossless``, draft argument text from the conversation's earlier
    #: calls, results and turns (verified like every draft: the calls are unchanged).
    session_drafts: bool = True
    #: Describe the bound tools through the chat template's own ``tools`` variable, with
    #: calls as ``tool_calls`` and results as ``tool`` messages (id and name). None: where
    #: the template lists tools and writes the syntax decoded; False: toolweave's own
    #: tool prompt, calls written into the text.
    template_tools: bool | None = None
    #: Load an engine of its own instead of sharing the process's engine of this model
    #: and settings: its KV cache then holds only this model's prompts (side-by-side
    #: comparisons; agents that must not see each other's live state). Close it with
    #: `close_engine`.
    private_engine: bool = False

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    _callers: CallerCache = PrivateAttr(default_factory=CallerCache)
    _own_engine: Engine | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _check_arguments(cls, data: Any) -> Any:
        """Unknown arguments raise (naming the closest known one); ``model_path`` is
        ``model`` under ChatLlamaCpp's name."""
        if not isinstance(data, Mapping):
            return data
        unknown = [k for k in data if k not in cls.model_fields and k != "model_path"]
        if unknown:
            raise TypeError(unknown_argument(str(unknown[0]), cls.model_fields))
        data = dict(data)
        if "model_path" in data:
            path = data.pop("model_path")
            model = data.get("model")
            if model is not None and path is not None and not same_model(model, path):
                raise TypeError(
                    f"ChatToolweave got model={model!r} and model_path={path!r}, which name "
                    "different models: give one of them"
                )
            if path is not None:
                data["model"] = str(path)
        return data

    def model_post_init(self, context: Any, /) -> None:
        check_mode(self.mode, offered=[m for m in MODES if m != "grammar"])
        self.sampling_for({})  # one-line ValueError for a bad setting
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        if self.max_calls is not None and self.max_calls < 1:
            raise ValueError("max_calls must be at least 1 (None: no limit)")
        if self.n_ctx < 16 or (self.n_batch is not None and self.n_batch < 1):
            raise ValueError("n_ctx must be at least 16 and n_batch at least 1")
        if self.n_threads is not None and self.n_threads < 1:
            raise ValueError("n_threads must be at least 1 (None: the engine's choice)")
        if self.chat_template is not None:
            check_chat_template(self.chat_template, source="chat_template")
        chosen = self.state_store
        if isinstance(chosen, str) and chosen != DEFAULT_STORE:
            raise ValueError(f"state_store={chosen!r}: give {DEFAULT_STORE!r}, a store or None")
        parallel = self.parallel_tool_calls
        if "max_calls" in self.model_fields_set and parallel not in (None, self.max_calls != 1):
            raise TypeError(
                f"ChatToolweave got parallel_tool_calls={parallel} and "
                f"max_calls={self.max_calls}, which disagree: give one of them"
            )
        resolve_model(self.model)  # a missing model file fails here, not at the first call

    def _resolve_model_profile(self) -> ModelProfile | None:
        return model_profile(self.n_ctx, self.max_tokens)

    # ------------------------------------------------------------ LangChain identity
    @property
    def _llm_type(self) -> str:
        return "toolweave"

    @property
    def model_path(self) -> Path:
        """The GGUF file this model loads."""
        return resolve_model(self.model)

    @property
    def engine_settings(self) -> EngineSettings:
        return EngineSettings(n_ctx=self.n_ctx, n_batch=self.n_batch, n_threads=self.n_threads)

    @property
    def engine(self) -> Engine:
        """The shared engine of this model (loaded on first use), or its own with
        ``private_engine=True``."""
        if not self.private_engine:
            return shared_engine(self.model, self.engine_settings)
        if self._own_engine is None:
            self._own_engine = private_engine(self.model, self.engine_settings)
        return self._own_engine

    def close_engine(self) -> None:
        """Free the engine of its own (``private_engine=True``); a shared one stays.
        Saves still pending for it are made first."""
        if self._own_engine is not None:
            if self.store is not None:
                self.store.flush()
            self._own_engine.close()
            self._own_engine = None

    @property
    def model_name(self) -> str:
        return self.engine.model_name or self.engine.model_path.stem

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "mode": self.mode,
            "n_ctx": self.n_ctx,
            "n_batch": self.n_batch,
            "n_threads": self.n_threads,
            "max_calls": self.max_calls_for(None),
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seed,
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = PROVIDER
        params["ls_model_name"] = kwargs.get("model") or self.model or "smollm2"
        params["ls_temperature"] = self.sampling_for(kwargs).temperature
        params["ls_max_tokens"] = self.max_tokens
        return params

    def sampling_for(self, kwargs: Mapping[str, Any]) -> Sampling:
        """The sampling settings of a request: the constructor's, with any of
        ``temperature``, ``top_p``, ``top_k`` and ``seed`` given per call in `kwargs`."""
        own = {"temperature": self.temperature, "top_p": self.top_p}
        own |= {"top_k": self.top_k, "seed": self.seed}
        return Sampling.of({**own, **{k: v for k, v in kwargs.items() if v is not None}})

    def max_calls_for(self, parallel_tool_calls: bool | None) -> int | None:
        """The most calls one message may hold, with this per-request setting (None:
        the constructor's)."""
        parallel = self.parallel_tool_calls if parallel_tool_calls is None else parallel_tool_calls
        if parallel is False:
            return 1
        if parallel and self.max_calls == 1:
            return PARALLEL_CALLS
        return self.max_calls

    # ------------------------------------------------------------ binding
    def bind_tools(
        self,
        tools: Sequence[Mapping[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | Mapping[str, Any] | bool | None = None,
        parallel_tool_calls: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (LangChain tools, functions, pydantic models or JSON schemas)."""
        formatted = [openai_tool(t) for t in tools]
        specs = [ToolSpec.from_dict(t) for t in formatted]  # reject bad schemas now
        names = [s.name for s in specs]
        if tool_choice is True:
            tool_choice = "required" if len(specs) != 1 else names[0]
        wanted = tool_choice_name(tool_choice)
        if wanted is not None and wanted not in names:
            raise ToolSpecError(wanted, f"tool_choice names a tool that is not bound ({names})")
        if parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = parallel_tool_calls
        return super().bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type | None = None,
        *,
        method: Literal["function_calling", "json_schema", "json_mode"] = "function_calling",
        include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, Any]:
        """Structured output by a forced tool call, a JSON-schema grammar or JSON mode."""
        if method == "function_calling":
            if schema is None:
                raise ValueError("function_calling needs a schema")
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        return structured_output_runnable(self, schema, method=method, include_raw=include_raw)

    # ------------------------------------------------------------ decoding a request
    def _caller(
        self, specs: Sequence[ToolSpec], system: str | None, max_calls: int | None
    ) -> ToolCaller:
        return self._callers.get(
            specs,
            system,
            max_calls,
            lambda: ToolCaller(
                self.engine,
                specs,
                fmt=self.call_format,
                max_calls=max_calls,
                max_tokens=self.max_tokens,
                system=system,
                chat_template=self.chat_template,
                session_drafts=self.session_drafts,
                template_tools=self.template_tools,
            ),
        )

    def _render(self, system: str | None, messages: Sequence[BaseMessage]) -> list[int]:
        eng = self.engine
        template = self.chat_template
        fmt = template_format(template if template is not None else eng.chat_template)
        msgs = template_messages(messages, fmt)
        if system:
            msgs.insert(0, {"role": "system", "content": system})
        return chat_tokens(eng, msgs, template=template)

    def _grammar_text(
        self,
        prompt: list[int],
        plan: RequestPlan,
        rest: Sequence[BaseMessage],
        kwargs: Mapping[str, Any],
    ) -> Iterator[CallEvent]:
        """Text under a bound grammar. With ``bind(exspec=[example texts])`` and a mode
        past `constrained`, ExSpec drafts from an n-gram table of those examples and the
        last user message, verified so the tokens equal plain greedy decoding's."""
        examples = kwargs.get("exspec")
        grammar = plan.extra["grammar"]
        sampler = _sampler(self.sampling_for(kwargs))
        if examples is None or self.mode == "constrained":
            return generate_text(
                self.engine, prompt, max_tokens=self.max_tokens, grammar=grammar, sampler=sampler
            )
        if isinstance(examples, str) or not all(isinstance(e, str) for e in examples):
            raise ToolweaveError("bind(exspec=...) takes a list of example texts")
        query = next((message_text(m) for m in reversed(rest) if isinstance(m, HumanMessage)), "")
        table = exspec_table(self.engine, list(examples), query)
        return generate_with_exspec(
            self.engine,
            prompt,
            table=table,
            max_tokens=self.max_tokens,
            grammar=grammar,
            learn=f"grammar:{hashlib.sha1(grammar.encode()).hexdigest()[:12]}",
            sampler=sampler,
        )

    def _decode(
        self,
        messages: Sequence[BaseMessage],
        emit: Callable[[CallEvent, ToolCaller | None], None],
        **kwargs: Any,
    ) -> None:
        """Decode the whole response on this thread, handing each event to `emit`.

        The engine lock is held from the first decision to the 'done' event (the
        decision and the decoding see the same cache) by this plain call, never by a
        suspended generator."""
        eng = self.engine
        restored: list[int] = []  # prompt tokens the state store supplied, if it ran
        with eng.lock:
            for ev, caller in self._events(messages, restored, **kwargs):
                if ev.result is not None and restored:
                    # The store filled the sequence just before the decoder looked: only
                    # what it restored was read from a cache, not what it prefilled.
                    stats = dataclasses.replace(ev.result.stats, cached_tokens=restored[-1])
                    ev = dataclasses.replace(ev, result=dataclasses.replace(ev.result, stats=stats))
                emit(ev, caller)
        store = self.store
        if restored and store is not None:
            # The prompt and the response kept after it: what this session's next prompt
            # extends, saved off the request path (and on disk for a new process).
            store.save_later(eng, 0)

    def _events(
        self, messages: Sequence[BaseMessage], restored: list[int], **kwargs: Any
    ) -> Iterator[tuple[CallEvent, ToolCaller | None]]:
        """Decode the response; events of the tool caller (None for text and JSON).
        Only `_decode` drives it, with the engine lock held."""
        plan = plan_request(
            kwargs.get("tools"),
            kwargs.get("tool_choice"),
            kwargs.get("response_format"),
            kwargs.get("grammar"),
        )
        if kwargs.get("model") not in (None, self.model):
            raise ToolweaveError(
                "a per-call 'model' is not supported: make another ChatToolweave(model=...)"
            )
        system, rest = split_system(messages)
        eng = self.engine
        max_calls = self.max_calls_for(kwargs.get("parallel_tool_calls"))
        stop = [*(self.stop or ()), *(kwargs.get("stop") or ())]
        sampling = self.sampling_for(kwargs)
        if not self.reuse_prompt_cache:
            eng.seq_remove(0)
        if plan.kind == "text" and not plan.specs:
            prompt = self._render(system, rest)
            self._restore(eng, prompt, restored)
            sampler = _sampler(sampling)
            for ev in generate_text(
                eng, prompt, max_tokens=self.max_tokens, stop=stop, sampler=sampler
            ):
                yield ev, None
            return
        if plan.kind == "grammar":  # text under a caller's grammar (model.bind(grammar=))
            prompt = self._render(system, rest)
            self._restore(eng, prompt, restored)
            yield from ((ev, None) for ev in self._grammar_text(prompt, plan, rest, kwargs))
            return
        if plan.kind == "json" and plan.schema is not None and not plan.specs:
            prompt = self._render(system, rest)
            self._restore(eng, prompt, restored)
            grammar = _json_grammar(plan.schema)
            sampler = _sampler(sampling)
            for ev in generate_text(
                eng, prompt, max_tokens=self.max_tokens, grammar=grammar, sampler=sampler
            ):
                yield ev, None
            return
        caller = self._caller(plan.specs, system, max_calls)
        msgs = template_messages(rest, caller.fmt, tool_calls=caller.template_tools)
        if self._stores_states:
            self._restore(eng, caller.prompt_tokens(msgs), restored)
        # tool_choice "none" with tools bound: a text (or JSON) answer on the tool prompt.
        text = plan.kind in ("text", "json") or (
            plan.kind == "auto" and not self._wants_call(caller, rest, msgs)
        )
        if not text and plan.kind == "auto" and self.auto_calls == "user_turn":
            earlier = calls_since_user(rest)
            if earlier:
                # After tool results: a call repeating one already answered would
                # loop; the model answers in text instead (events held until known).
                held = list(caller.events(msgs, self.mode, sampling=sampling))
                result = held[-1].result
                if result is None or not repeats(result, earlier):
                    yield from ((ev, caller) for ev in held)
                    return
                text = True
        if text and plan.schema is not None:
            # Tools and a structured response bound together: the answer is the JSON.
            grammar = _json_grammar(plan.schema)
            for ev in generate_text(
                eng,
                caller.prompt_tokens(msgs),
                max_tokens=self.max_tokens,
                grammar=grammar,
                sampler=_sampler(sampling),
            ):
                yield ev, None
            return
        if text:
            # A text answer: it may not open a tool call, and stops if it writes one.
            opener = caller.fmt.open
            for ev in generate_text(
                eng,
                caller.prompt_tokens(msgs),
                max_tokens=self.max_tokens,
                stop=[*stop, opener] if opener else stop,
                not_first=_opening_tokens(eng, opener),
                sampler=_sampler(sampling),
            ):
                yield ev, None
            return
        for ev in caller.events(msgs, self.mode, sampling=sampling):
            yield ev, caller

    @property
    def _stores_states(self) -> bool:
        return self.store is not None and self.reuse_prompt_cache

    @property
    def store(self) -> StateStore | None:
        """The state store this model restores prompts from (None: the live cache only)."""
        chosen = self.state_store
        if chosen is None or chosen is False:
            return None
        if chosen == DEFAULT_STORE or chosen is True:
            return default_state_store()
        return chosen

    def _restore(self, eng: Engine, prompt: list[int], restored: list[int]) -> None:
        """Start `prompt` from the state store's longest saved prefix (no-op without one),
        appending to `restored` how many of its tokens came from a cache.

        The decoder then finds the prompt cached and only runs its last token again."""
        store = self.store if self.reuse_prompt_cache else None
        if store is None:
            return
        store.prefill(eng, 0, prompt, self.max_tokens)
        record = store.last
        if record is not None:
            restored.append(record.reused)
        if self.observer is not None and record is not None:
            self.observer(
                PromptCacheEvent(
                    prompt_tokens=record.prompt_tokens,
                    reused=record.reused,
                    prefilled=record.prefilled,
                    source=record.source,
                    saved_at=record.saved_at,
                    ms=record.prompt_ms,
                )
            )

    def _wants_call(
        self, caller: ToolCaller, rest: Sequence[BaseMessage], msgs: list[dict[str, Any]]
    ) -> bool:
        if self.auto_calls == "user_turn" and rest and isinstance(rest[-1], HumanMessage):
            return True
        eng = self.engine
        piece = eng.detokenize([first_token(eng, caller.prompt_tokens(msgs))]).lstrip()
        opener = (caller.fmt.open or "{").lstrip()
        return bool(piece) and (opener.startswith(piece) or piece.startswith(opener))

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        streamer = CallStreamer(self.engine, active_runner())
        results: list[CallResult] = []

        def handle(ev: CallEvent, caller: ToolCaller | None) -> None:
            streamer.feed(ev, caller)
            self._observe(ev)
            if ev.kind == "done" and ev.result is not None:
                results.append(ev.result)

        self._observe_start()
        self._decode(messages, handle, stop=stop, **kwargs)
        if not results:  # pragma: no cover - decoders always end with 'done'
            raise ToolweaveError("decoder ended without a result")
        message = ai_message(results[-1], model_name=self.model_name, ids=streamer.ids)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def event_producer(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: Mapping[str, Any]
    ) -> Callable[[Callable[[_Event], None]], None]:
        """What a stream's worker thread runs: the whole decode, emitting each event with
        the tool caller that made it (None for text and JSON). Streams and `toolweave
        serve` run it on a worker thread of their own."""

        def produce(emit: Callable[[_Event], None]) -> None:
            self._decode(messages, lambda ev, caller: emit((ev, caller)), stop=stop, **kwargs)

        return produce

    def _chunks(
        self, streamer: CallStreamer, ev: CallEvent, caller: ToolCaller | None
    ) -> Iterator[ChatGenerationChunk]:
        self._observe(ev)
        for chunk in streamer.feed(ev, caller):
            if ev.kind == "done" and ev.result is not None:
                chunk = final_chunk(chunk, ev.result, self.model_name)
            yield ChatGenerationChunk(message=chunk)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        from toolweave.adapters.langchain.blocking import stream_in_worker

        streamer = CallStreamer(self.engine, active_runner())
        self._observe_start()
        for ev, caller in stream_in_worker(self.event_producer(messages, stop, kwargs)):
            for chunk in self._chunks(streamer, ev, caller):
                text = chunk.message.content
                if run_manager and isinstance(text, str) and text:
                    run_manager.on_llm_new_token(text, chunk=chunk)
                yield chunk

    def _observe_start(self) -> None:
        if self.observer is not None:
            self.observer(ModelStart(self.mode))

    def _observe(self, ev: CallEvent) -> None:
        if self.observer is None:
            return
        if ev.kind == "name":
            self.observer(CallName(ev.name or "", ev.t_ms))
        elif ev.kind == "provisional" and ev.call is not None:
            self.observer(ProvisionalCallEvent(ev.call, ev.t_ms))
        elif ev.kind == "call" and ev.call is not None:
            self.observer(FinalCall(ev.call, ev.t_ms))
        elif ev.kind == "done" and ev.result is not None:
            self.observer(ModelDone.of(ev.result))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        from toolweave.adapters.langchain.blocking import run_in_worker

        return await run_in_worker(self._generate, messages, stop, None, **kwargs)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        from toolweave.adapters.langchain.blocking import astream_in_worker

        streamer = CallStreamer(self.engine, active_runner())
        self._observe_start()
        async for ev, caller in astream_in_worker(self.event_producer(messages, stop, kwargs)):
            for chunk in self._chunks(streamer, ev, caller):
                text = chunk.message.content
                if run_manager and isinstance(text, str) and text:
                    await run_manager.on_llm_new_token(text, chunk=chunk)
                yield chunk


def default_store_dir() -> Path:
    """Where the default store keeps its files: ``<cache root>/prompt-states``."""
    return cache_root() / "prompt-states"


_DEFAULT_STORES: dict[Path, StateStore] = {}
_DEFAULT_STORES_LOCK = threading.Lock()


def default_state_store() -> StateStore:
    """The process's store over ``<cache root>/prompt-states`` (made on first use; its
    pending writes finish at exit). Processes sharing the directory at once are safe:
    every file is checksummed and written atomically, and a damaged one is skipped."""
    directory = default_store_dir().expanduser().resolve()
    with _DEFAULT_STORES_LOCK:
        store = _DEFAULT_STORES.get(directory)
        if store is None:
            store = StateStore(directory)
            _DEFAULT_STORES[directory] = store
            atexit.register(store.close)
        return store


def _sampler(sampling: Sampling) -> Sampler | None:
    """A fresh sampler for one decode (None: greedy)."""
    return None if sampling.greedy else Sampler(sampling)


def _json_grammar(schema: Mapping[str, Any]) -> str:
    """The grammar of a JSON answer to `schema`, bounded like every call's arguments."""
    spec = ToolSpec.from_dict({"name": "output", "parameters": schema})
    return "start: %json " + json.dumps(arguments_schema(spec))


def _opening_tokens(engine: Engine, opener: str) -> list[int]:
    """Tokens that would begin `opener` (as the first token of a response)."""
    if not opener:
        return []
    first = engine.tokenize(opener, parse_special=True)[:1]
    return first
