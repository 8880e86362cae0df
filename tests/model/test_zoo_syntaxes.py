"""The argument layouts the zoo's own templates do not reach, decoded end to end.

The zoo has no vocabulary for LFM2.5, GLM, MiniMax or DeepSeek (Gemma 4's, where its
markers are special tokens, is in test_zoo.py). Here their llama.cpp templates replace
the template of one zoo model (Phi-3.5's 32k vocabulary, on which every marker is plain
text, so Gemma 4's syntax is decoded as text too): the caller must read
the syntax off the template, and every mode must write one valid call in it, with the
exact modes agreeing token for token.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import jsonschema
import pytest

from toolweave.formats import SyntaxFormat
from toolweave.grammar.syntax_call import call_parts
from toolweave.native.caller import ToolCaller
from toolweave.native.engine import Engine
from toolweave.results import CallResult

if TYPE_CHECKING:
    from toolweave.adapters.bench.zoo import Zoo

from test_zoo import MODES, REQUEST, SCHEMA, TOOLS

TEMPLATES = Path(__file__).parents[1] / "data" / "templates"

#: llama.cpp templates, and the layout (typed or not) the caller must decode in.
CASES = {
    "google-gemma-4-31B-it.jinja": ("xml", True),
    "deepseek-ai-DeepSeek-V3.2.jinja": ("xml", True),
    "GLM-4.6.jinja": ("xml", False),
    "MiniMax-M2.jinja": ("xml", False),
    "LFM2.5-8B-A1B.jinja": ("python", False),
}


@pytest.fixture(scope="module")
def phi_engine(zoo: Zoo) -> Iterator[Engine]:
    with Engine(zoo.model("phi3").path, n_ctx=1024, n_seq_max=8) as eng:
        yield eng


class Decoded:
    """One template's caller on the engine and each mode's result."""

    def __init__(self, engine: Engine, template: str) -> None:
        self.caller = ToolCaller(engine, TOOLS[:1], max_tokens=128, chat_template=template)
        # Every marker is plain text in this vocabulary: no special token in the grammar.
        assert "<[" not in self.caller.grammar
        self.results: dict[str, CallResult] = {
            mode: self.caller.call(REQUEST, mode) for mode in MODES
        }


@pytest.fixture(scope="module", params=sorted(CASES), ids=lambda name: name.split(".jinja")[0])
def decoded(request: pytest.FixtureRequest, phi_engine: Engine) -> tuple[str, Decoded]:
    name: str = request.param
    return name, Decoded(phi_engine, (TEMPLATES / name).read_text(encoding="utf-8"))


def test_caller_reads_the_syntax_off_the_template(decoded: tuple[str, Decoded]) -> None:
    name, item = decoded
    fmt = item.caller.fmt
    assert isinstance(fmt, SyntaxFormat), fmt
    assert (fmt.syntax.layout, fmt.syntax.typed) == CASES[name]


@pytest.mark.parametrize("mode", MODES)
def test_each_mode_writes_one_valid_call_in_the_syntax(
    decoded: tuple[str, Decoded], mode: str
) -> None:
    _, item = decoded
    fmt = item.caller.fmt
    assert isinstance(fmt, SyntaxFormat)
    result = item.results[mode]
    assert result.finish_reason == "stop", result.text
    assert not result.invalid, result.invalid
    assert [c.name for c in result.calls] == ["set_light"], result.text
    jsonschema.validate(result.calls[0].arguments, SCHEMA)
    head, tail = call_parts(fmt, "set_light")
    assert result.text.startswith(fmt.syntax.open + head), result.text
    assert tail.strip() in result.text, result.text
    assert fmt.parse(result.text) == list(result.calls)


def test_exact_modes_agree_and_values_are_not_drafted(decoded: tuple[str, Decoded]) -> None:
    """`jump` equals `constrained`, `lossless` equals `jump`; `fast` drafts no values in
    these layouts (value drafts are JSON members), so it writes `jump`'s tokens too."""
    _, item = decoded
    jump = item.results["jump"].tokens
    assert item.results["constrained"].tokens == jump
    assert item.results["lossless"].tokens == jump
    assert item.results["fast"].tokens == jump
    assert item.results["fast"].stats.drafted_tokens == 0
