"""Plan-out (LLMCompiler) plans: their text format, grammars, prompts and the DAG executor."""
