"""A reply cut inside an argument's raw text (xml layouts) is not a call: its value is
not known, so nothing may run it; a reply cut after a finished call still parses."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolweave.errors import CallFormatError
from toolweave.formats import SyntaxFormat
from toolweave.formats.detect import detect_call_format
from toolweave.toolspec import ToolCall

TEMPLATES = Path(__file__).parents[1] / "data" / "templates"


@pytest.mark.parametrize(
    "template",
    ["Qwen3.5-4B.jinja", "GLM-4.6.jinja", "MiniMax-M2.jinja", "google-gemma-4-31B-it.jinja"],
)
def test_a_call_cut_inside_a_value_is_refused(template: str) -> None:
    fmt = detect_call_format((TEMPLATES / template).read_text(encoding="utf-8"))
    assert isinstance(fmt, SyntaxFormat)
    call = ToolCall("send_email", {"to": "sam@example.com", "body": "See you at noon."})
    text = fmt.serialize([call])
    assert fmt.parse(text) == [call]
    cut = text[: text.index("See you") + len("See you")]
    with pytest.raises(CallFormatError, match="not closed"):
        fmt.parse(cut)
