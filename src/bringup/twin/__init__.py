"""The engine twin: a faithful stand-in for a vLLM 0.33 server, for tests and demos.

``bringup twin vllm --scenario NAME`` starts real processes (an API server, an EngineCore
child, one worker per rank when ``--tp`` > 1) that write vLLM 0.33's own log lines in its
order, bind the port early and listen only when ready, serve the OpenAI endpoints, and
write their GPU memory into a readings file. It is an instrument, not product logic: it
never imports the knowledge packs that read logs (``bringup.core.packs``, ``.analyzer``,
``.logline``), so tests that run the packs against it prove something.

Modules:

- ``config``: the flags, the scenarios and the startup timeline (in real seconds).
- ``memory``: the per-GPU memory model that decides whether a scenario's failure happens.
- ``logfmt``: vLLM 0.33 / uvicorn / tqdm line formats.
- ``readings``: the GPU readings file (atomic, locked read-modify-write).
- ``procs``: child processes, their names and the JSON-lines pipes between them.
- ``worker``: what a GPU worker does (in a worker process, or inside EngineCore at TP=1).
- ``engine``: the EngineCore process.
- ``api``: the API server process (the one ``bringup twin vllm`` runs).
- ``http``: the HTTP server; ``openai``: the endpoints and the tokenizer.
- ``holder``: the earlier instance of the ``guard_wait`` scenario.
"""
