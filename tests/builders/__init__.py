"""Builders that write real test inputs on the fly (checkpoints, GGUF files, logs)."""
