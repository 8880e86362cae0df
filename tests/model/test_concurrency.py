"""Concurrency on the real engine: batches, paused and cancelled requests, shared buffers.

Every request here starts cold (``reuse_prompt_cache=False``): with prompt-cache reuse,
logits depend slightly on which prompt ran before, and these tests compare concurrent
answers with serial ones exactly.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool

from toolweave.adapters.langchain.chat_model import ChatToolweave
from toolweave.events import CallEvent
from toolweave.models import default_model_path
from toolweave.native.concurrency import DecodeCancelledError, EngineBusyError, cancel_scope
from toolweave.native.decode.text import generate_text
from toolweave.native.engine import Engine

N_CTX = 1024  # one shared engine for every chat model here
CITIES = ["Oslo", "Rome", "Bern", "Lima", "Paris", "Tokyo", "Cairo", "Quito"]
TEXTS = [
    "Name a fruit.",
    "Say hello.",
    "What is 2+2?",
    "Name a colour.",
    "Name a planet.",
    "Say goodbye.",
    "Name an animal.",
    "Name a month.",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"sunny in {city}"


def tool_model() -> Runnable[LanguageModelInput, AIMessage]:
    model = ChatToolweave(n_ctx=N_CTX, max_tokens=48, reuse_prompt_cache=False)
    return model.bind_tools([get_weather], tool_choice="any")


def text_model(max_tokens: int = 8) -> ChatToolweave:
    return ChatToolweave(n_ctx=N_CTX, max_tokens=max_tokens, reuse_prompt_cache=False)


def answer(msg: object) -> tuple[str, list[tuple[str, dict[str, object]]]]:
    assert isinstance(msg, AIMessage)
    assert isinstance(msg.content, str)
    return msg.content, [(c["name"], c["args"]) for c in msg.tool_calls]


def healthy(engine: Engine) -> None:
    """Nobody holds the engine and sequence 0 holds exactly its recorded tokens."""
    got: list[bool] = []

    def probe() -> None:
        got.append(engine.lock.acquire(timeout=5))
        if got[-1]:
            engine.lock.release()

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    assert got == [True], "the engine lock is still held"
    assert engine.seq_len(0) == len(engine.seq_tokens.get(0, []))


# -- batches equal serial answers ----------------------------------------------------------


@pytest.mark.slow
def test_batch_of_eight_tool_calls_equals_serial() -> None:
    model = tool_model()
    queries = [f"What's the weather in {c}?" for c in CITIES]
    serial = [answer(model.invoke(q)) for q in queries]
    assert all(len(calls) == 1 and calls[0][0] == "get_weather" for _, calls in serial)
    batched = [answer(m) for m in model.batch(queries, config={"max_concurrency": 8})]
    assert batched == serial


@pytest.mark.anyio
async def test_abatch_of_eight_text_answers_equals_serial() -> None:
    model = text_model()
    serial = [answer(model.invoke(q)) for q in TEXTS]
    assert all(text for text, _ in serial)
    batched = [answer(m) for m in await model.abatch(TEXTS, config={"max_concurrency": 8})]
    assert batched == serial


# -- cancelled requests stop decoding ------------------------------------------------------


def decoding_started(engine: Engine, passes0: int) -> bool:
    return engine.counters.forward_passes > passes0 + 2


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["wait_for", "cancel"])
async def test_cancelled_ainvoke_stops_decoding_and_frees_the_engine(how: str) -> None:
    model = text_model(max_tokens=400)
    engine = model.engine
    passes0 = engine.counters.forward_passes
    task = asyncio.ensure_future(model.ainvoke("Write a long story about a cat."))
    while not decoding_started(engine, passes0):  # bounded: 400 passes at most
        assert not task.done()
        await asyncio.sleep(0.01)
    t0 = time.perf_counter()
    if how == "wait_for":
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(task, 0.05)
    else:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    stopped_ms = (time.perf_counter() - t0) * 1000
    at_cancel = engine.counters.forward_passes
    await asyncio.sleep(0.3)
    assert engine.counters.forward_passes == at_cancel, "a thread is still decoding"
    assert at_cancel - passes0 < 400
    assert not engine.lock.locked()
    assert stopped_ms < 5000  # one pass, on a loaded machine
    t1 = time.perf_counter()
    nxt = await asyncio.wait_for(text_model().ainvoke("Name a fruit."), 120)
    assert answer(nxt)[0]
    assert time.perf_counter() - t1 < 120
    healthy(engine)


def test_decode_loop_checks_the_cancel_flag_between_passes() -> None:
    model = text_model()
    engine = model.engine
    prompt = engine.tokenize("<|im_start|>user\nCount to fifty.<|im_end|>\n<|im_start|>assistant\n")
    flag = threading.Event()
    seen: list[CallEvent] = []
    at_cancel = -1
    with cancel_scope(flag), engine.lock:
        events = generate_text(engine, prompt, max_tokens=40)
        with pytest.raises(DecodeCancelledError):
            for ev in events:
                seen.append(ev)
                if len(seen) == 3:
                    flag.set()
                    at_cancel = engine.counters.forward_passes
        assert engine.counters.forward_passes == at_cancel  # not one pass more
        assert engine.seq_len(0) == len(prompt)  # the answer's cells are gone
    assert len(seen) == 3


# -- paused and moved streams --------------------------------------------------------------


def test_paused_chat_stream_does_not_hold_the_engine() -> None:
    model = text_model(max_tokens=24)
    prompt = "Tell me about the sea."
    expected = answer(model.invoke(prompt))[0]
    stream = model.stream(prompt)
    first = next(stream)
    other = threading.Thread(target=lambda: model.invoke("Say hello."))
    t0 = time.perf_counter()
    other.start()
    other.join(120)  # an RLock held by the paused stream would hang here
    assert not other.is_alive() and time.perf_counter() - t0 < 120
    text = str(first.content) + "".join(str(c.content) for c in stream)
    assert text == expected
    early = model.stream(prompt)
    next(early)
    early.close()  # stops the worker at its next pass and waits for it
    assert not model.engine.lock.locked()
    healthy(model.engine)


def test_paused_decoder_generator_is_a_clear_error_and_can_resume_elsewhere() -> None:
    engine = text_model().engine
    prompt = engine.tokenize("<|im_start|>user\nSay hi.<|im_end|>\n<|im_start|>assistant\n")
    reference = list(generate_text(engine, prompt, max_tokens=6))[-1].result
    assert reference is not None
    events = generate_text(engine, prompt, max_tokens=6)
    first = next(events)  # holds the engine, paused at a yield
    t0 = time.perf_counter()
    with pytest.raises(EngineBusyError, match="paused stream"):
        list(generate_text(engine, prompt, max_tokens=2))
    assert time.perf_counter() - t0 < 10
    rest: list[CallEvent] = []
    mover = threading.Thread(target=lambda: rest.extend(events))  # resumed on another thread
    mover.start()
    mover.join(60)
    assert not mover.is_alive()
    done = rest[-1].result
    assert done is not None and done.tokens == reference.tokens
    assert first.tokens == reference.tokens[:1]
    assert not engine.lock.locked()


def test_token_pieces_from_many_threads_equal_serial_ones() -> None:
    serial_engine = Engine(default_model_path(), n_ctx=64, n_seq_max=1)
    expected = [serial_engine.token_bytes(t) for t in range(serial_engine.n_vocab)]
    serial_engine.close()
    engine = Engine(default_model_path(), n_ctx=64, n_seq_max=1)
    got: dict[int, list[bytes]] = {}

    def read(k: int) -> None:
        order = range(engine.n_vocab) if k % 2 == 0 else range(engine.n_vocab - 1, -1, -1)
        got[k] = [engine.token_bytes(t) for t in order]

    threads = [threading.Thread(target=read, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    engine.close()
    assert got[0] == expected and got[2] == expected
    assert got[1][::-1] == expected and got[3][::-1] == expected
