"""LangChain: the chat model, tools in and out, the provisional middleware, the plan-out agent."""
