"""`ChatToolweave`: a LangChain chat model over the native engine and the fast path.

    model = ChatToolweave()                      # embedded SmolLM2, mode "lossless"
    agent = create_agent(model, tools, middleware=[ProvisionalToolMiddleware()])

Tool calls are decoded by `ToolCaller` in the chosen mode (default `lossless`: the
fast path whose output equals `jump`'s greedy decoding); answers in text by greedy
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

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel, LanguageModelInput, ModelProfile
from langchain_core.language_models.chat_models import LangSmithParams
from langchain_core.messages import AIMessage
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
from toolweave.adapters.langchain.chat_decode import ChatDecoding
from toolweave.adapters.langchain.chat_states import (
    DEFAULT_STORE,
    default_state_store,
    default_store_dir,
)
from toolweave.adapters.langchain.chat_streaming import ChatStreaming
from toolweave.adapters.langchain.messages import PROVIDER
from toolweave.adapters.langchain.profile import model_profile
from toolweave.adapters.langchain.request_plan import bound_specs, openai_tool, tool_choice_name
from toolweave.adapters.langchain.structured import structured_output_runnable
from toolweave.errors import ToolSpecError
from toolweave.events import Observer
from toolweave.models import resolve_model
from toolweave.modes import MODES, check_mode
from toolweave.native.engine import Engine
from toolweave.prompting.template_file import check_chat_template
from toolweave.sampling import Sampling

__all__ = [
    "DEFAULT_STORE",
    "PARALLEL_CALLS",
    "ChatToolweave",
    "default_state_store",
    "default_store_dir",
]

#: Most tool calls in one message when parallel tool calls are asked for and
#: ``max_calls`` is left at its default of one.
PARALLEL_CALLS = 8


class ChatToolweave(ChatStreaming, ChatDecoding, BaseChatModel):
    """A chat model on a local GGUF model, with toolweave's tool-call decoders.

    Its fields, checks and bindings are here; it decodes a request as `ChatDecoding`,
    restores prompt states as `PromptStates` and runs LangChain's calls (whole,
    streamed, async) as `ChatStreaming`."""

    #: GGUF path or known model name (``model_path=`` is accepted for the same thing).
    model: str | None = Field(default=None, description="GGUF path or known model name.")
    mode: str = "lossless"
    #: The context window in tokens, prompt and answer together.
    n_ctx: int = 8192
    #: Most tokens in one prefill pass (None: the engine's default, 512).
    n_batch: int | None = None
    #: Threads for every pass (None: the engine's default, every physical core).
    n_threads: int | None = None
    #: The exact engine (`Engine(batch_invariant=True)`): single-token passes on one
    #: thread, bit-identical to the rows of a multi-token pass on some quantizations
    #: (SmolLM2 Q4_1), so from the same prompt state `jump` and `lossless` write
    #: ``constrained``'s tokens; how a prompt was split into prefill passes still moves
    #: its logits there. Serial steps then use one core.
    batch_invariant: bool = False
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
        return EngineSettings(
            n_ctx=self.n_ctx,
            n_batch=self.n_batch,
            n_threads=self.n_threads,
            batch_invariant=self.batch_invariant,
        )

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
        specs = bound_specs(formatted)  # reject bad schemas now
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
