"""Chat templates given by the user: read, checked, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolweave.prompting.chat_template import CHATML_TEMPLATE
from toolweave.prompting.template_file import (
    MAX_TEMPLATE_BYTES,
    ChatTemplateError,
    check_chat_template,
    load_chat_template,
)

#: Refuses a system role, as Gemma 2's template does: checked with user and assistant.
NO_SYSTEM = (
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "<turn>{{ m['role'] }}\n{{ m['content'] }}</turn>\n{% endfor %}"
)


def test_a_chatml_template_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "chatml.jinja"
    path.write_text(CHATML_TEMPLATE, encoding="utf-8")
    assert load_chat_template(path) == CHATML_TEMPLATE


def test_a_template_refusing_a_system_role_still_passes() -> None:
    assert check_chat_template(NO_SYSTEM) == NO_SYSTEM


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{% if messages %}unclosed", "is not a Jinja template"),
        ("Hello, no messages here.", "does not render a two-message chat"),
        (
            "{{ raise_exception('never') }}",
            "does not render a two-message chat: chat template: never",
        ),
        ("   \n", "is empty"),
    ],
)
def test_bad_templates_fail_with_one_line(text: str, message: str) -> None:
    with pytest.raises(ChatTemplateError, match=message) as info:
        check_chat_template(text)
    assert "\n" not in str(info.value)


def test_unreadable_files_fail_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(ChatTemplateError, match="cannot read the chat template"):
        load_chat_template(tmp_path / "missing.jinja")
    with pytest.raises(ChatTemplateError, match="cannot read the chat template"):
        load_chat_template(tmp_path)  # a folder
    binary = tmp_path / "model.gguf"
    binary.write_bytes(b"GGUF\xff\xfe\x00")
    with pytest.raises(ChatTemplateError, match="not UTF-8"):
        load_chat_template(binary)
    big = tmp_path / "big.jinja"
    big.write_bytes(b"x" * (MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(ChatTemplateError, match="over"):
        load_chat_template(big)
