"""Decoders: tool-call responses, parallel values, ExSpec and free or constrained text."""
