"""``python -m harness serve``: the evaluation service that runs on a target host (``kope worker`` wraps it).

A client (``kope optimize --evaluator http://HOST:PORT``) posts an evaluation request
(``harness.remote.EvalRequest``: candidate source, task file content and its hash,
options) with the worker's bearer key; the service evaluates it with the same
``harness.evaluate`` as a local run and answers with the ``kope.outcome/1`` record,
carrying this host's hardware (docs/evaluation-workers.md).

Modules: ``app`` (the HTTP API and its status codes), ``devices`` (a queue, a lock file and evaluator
processes per device), ``executor`` (one evaluator process), ``quarantine`` and ``probe`` (sticky device errors
and the fresh-process probe that decides whether a device may go on), ``cli`` (the command line and uvicorn).
"""
