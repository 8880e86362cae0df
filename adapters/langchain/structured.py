"""`with_structured_output` by JSON schema or JSON mode: the answer is decoded under a
grammar of the schema (bounded like every toolweave grammar), then parsed."""

from __future__ import annotations

from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.utils.function_calling import convert_to_json_schema
from pydantic import BaseModel

if TYPE_CHECKING:
    from langchain_core.language_models import LanguageModelInput

    from toolweave.adapters.langchain.chat_model import ChatToolweave

__all__ = ["structured_output_runnable"]


def structured_output_runnable(
    model: ChatToolweave,
    schema: dict[str, Any] | type | None,
    *,
    method: Literal["json_schema", "json_mode"],
    include_raw: bool,
) -> Runnable[LanguageModelInput, Any]:
    """The model bound to a response format, piped into a parser of that format."""
    if method == "json_mode" and schema is None:
        response_format: dict[str, Any] = {"type": "json_object"}
    elif schema is None:
        raise ValueError("json_schema needs a schema")
    else:  # json_mode with a schema: our grammar can hold the answer to it, so it does
        response_format = {
            "type": "json_schema",
            "json_schema": {"schema": convert_to_json_schema(schema)},
        }
    is_model = isinstance(schema, type) and issubclass(schema, BaseModel)
    parser: Runnable[Any, Any] = (
        PydanticOutputParser(pydantic_object=schema)  # type: ignore[arg-type]
        if is_model
        else JsonOutputParser()
    )
    bound = model.bind(
        response_format=response_format,
        ls_structured_output_format={
            "kwargs": {"method": method},
            "schema": convert_to_json_schema(schema) if schema is not None else None,
        },
    )
    if not include_raw:
        return bound | parser
    with_parsed = RunnablePassthrough.assign(
        parsed=itemgetter("raw") | parser, parsing_error=lambda _: None
    ).with_fallbacks(
        [RunnablePassthrough.assign(parsed=lambda _: None)], exception_key="parsing_error"
    )
    return RunnableMap(raw=bound) | with_parsed
