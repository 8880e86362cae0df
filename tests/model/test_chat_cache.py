"""What a chat turn leaves cached for the next one (real SmolLM2, ChatToolweave).

An agent's next prompt repeats the previous prompt and the model's response, then adds
the new messages: the response stays in the KV cache after its prompt, so only the new
messages are prefilled; the state is saved off the request path for a later process;
``tool_choice="none"`` answers on the prompt that describes the tools.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.adapters.langchain.chat_states import conversation_session
from toolweave.checkpoints import CheckpointPolicy
from toolweave.events import PromptCacheEvent
from toolweave.native.states.store import StateStore


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"Sunny in {city}, 21 C."


class _Events:
    def __init__(self) -> None:
        self.prompts: list[PromptCacheEvent] = []

    def __call__(self, event: object) -> None:
        if isinstance(event, PromptCacheEvent):
            self.prompts.append(event)


def _model(
    tmp_path: Path, events: _Events, max_tokens: int = 48, per_session: int = 8
) -> ChatToolweave:
    policy = CheckpointPolicy(max_per_session=per_session)
    return ChatToolweave(
        n_ctx=2048,
        max_tokens=max_tokens,
        state_store=StateStore(tmp_path, policy=policy),
        observer=events,
        private_engine=True,
    )


def _resumes_from_disk(
    tmp_path: Path, messages: list[BaseMessage], live: int, **options: int
) -> None:
    """A new model on the same store directory starts `messages` from a state on disk
    covering the `live` tokens the earlier model left (all but the last token at least)."""
    later = _Events()
    again = _model(tmp_path, later, **options)
    try:
        again.invoke(messages)
        start = later.prompts[-1]
        assert start.source == "disk" and start.reused >= live - 1, start
    finally:
        again.close_engine()


def test_the_answer_and_the_call_stay_cached_for_the_next_prompt(tmp_path: Path) -> None:
    """Each next prompt reuses its predecessor and the response decoded after it, up to
    where the template's rendering of that response departs from the decoded tokens."""
    events = _Events()
    model = _model(tmp_path, events)
    try:
        talk = model.bind_tools([get_weather], tool_choice="none")
        history: list[BaseMessage] = [HumanMessage("Tell me about Paris in one line.")]
        answer = talk.invoke(history)
        first = events.prompts[-1]
        live = list(model.engine.seq_tokens[0])
        assert len(live) > first.prompt_tokens  # the answer's tokens are recorded
        assert model.engine.seq_len(0) == len(live)
        history += [answer, HumanMessage("What's the weather there? Use the tool.")]
        call = model.bind_tools([get_weather], tool_choice="any").invoke(history)
        second = events.prompts[-1]
        # Rendered again by the template, the answer is the same tokens: all of it reused.
        assert second.reused >= len(live) - 1 > first.prompt_tokens, (first, second)
        assert call.tool_calls and call.tool_calls[0]["name"] == "get_weather"
        kept = len(model.engine.seq_tokens[0])
        assert kept > second.prompt_tokens  # the call's tokens stay too
        history += [call, ToolMessage("Sunny, 21 C.", tool_call_id=call.tool_calls[0]["id"])]
        talk.invoke(history)
        third = events.prompts[-1]
        assert third.reused > second.prompt_tokens, (second, third)
    finally:
        model.close_engine()


def test_tool_choice_none_answers_in_text_on_the_tool_prompt(tmp_path: Path) -> None:
    """With tools bound and ``tool_choice="none"`` the tools stay described (as in
    OpenAI's API), the answer is text, and no call is made."""
    events = _Events()
    model = _model(tmp_path, events, max_tokens=12)
    try:
        question = [HumanMessage("What's the weather in Bern?")]
        plain = model.invoke(question)
        with_tools = model.bind_tools([get_weather], tool_choice="none").invoke(question)
        plain_tokens = plain.usage_metadata["input_tokens"] if plain.usage_metadata else 0
        assert with_tools.usage_metadata is not None
        assert with_tools.usage_metadata["input_tokens"] > plain_tokens + 20  # the tool list
        assert not with_tools.tool_calls and isinstance(with_tools.content, str)
        assert "<tool_call>" not in with_tools.content
    finally:
        model.close_engine()


def test_the_turn_is_saved_off_the_request_path_for_a_later_process(tmp_path: Path) -> None:
    """After a request the store saves the prompt and the response once the engine is
    quiet (the request itself saves nothing on the way); a store opened later over the
    same directory, on a new engine, starts the next prompt from that state."""
    events = _Events()
    model = _model(tmp_path, events)
    history: list[BaseMessage] = [HumanMessage("Name three rivers of Europe.")]
    try:
        answer = model.invoke(history)
        store = model.store
        assert store is not None
        store.flush()
        live = len(model.engine.seq_tokens[0])
        assert any(c.n_tokens == live and c.on_disk for c in store.checkpoints()), (
            live,
            store.checkpoints(),
        )
    finally:
        model.close_engine()
        if model.store is not None:
            model.store.close()
    _resumes_from_disk(tmp_path, [*history, answer, HumanMessage("And of Asia?")], live)


def test_each_conversation_keeps_its_own_states(tmp_path: Path) -> None:
    """The store's budget of states per session counts per conversation: another
    conversation's turns do not evict this one's, so a later process resumes it from
    disk. (With one session for every conversation, B's state evicted A's here.)"""
    events = _Events()
    model = _model(tmp_path, events, max_tokens=16, per_session=1)
    first = [HumanMessage("Name three rivers of Europe.")]
    other = [HumanMessage("Name three mountains of Asia.")]
    try:
        answer = model.invoke(first)
        assert model.store is not None
        model.store.flush()
        live = len(model.engine.seq_tokens[0])
        model.invoke(other)
        model.store.flush()
        sessions = {c.session for c in model.store.checkpoints()}
        assert sessions == {conversation_session(None, first), conversation_session(None, other)}
    finally:
        model.close_engine()
        if model.store is not None:
            model.store.close()
    _resumes_from_disk(
        tmp_path,
        [*first, answer, HumanMessage("And their lengths?")],
        live,
        max_tokens=16,
        per_session=1,
    )


def test_a_conversation_session_is_its_opening() -> None:
    opening = [HumanMessage("Plan my trip.")]
    later = [*opening, HumanMessage("And the hotel?")]
    assert conversation_session("Be brief.", opening) == conversation_session("Be brief.", later)
    assert conversation_session("Be brief.", opening) != conversation_session(None, opening)
    assert conversation_session(None, opening) != conversation_session(
        None, [HumanMessage("Plan my day.")]
    )
    assert conversation_session(None, opening).startswith("chat:")
