"""``python -m harness serve``: the evaluation service that runs on a target host (``kope worker`` wraps it).

A client (``kope optimize --evaluator http://HOST:PORT``) posts an evaluation request
(``harness.remote.EvalRequest``: candidate source, task file content and its hash,
options) with the worker's bearer key; the service evaluates it with the same
``harness.evaluate`` as a local run and answers with the ``kope.outcome/1`` record,
carrying this host's hardware.

Modules, by role:

* ``app`` - the HTTP API (``/health``, ``/evaluate``): bearer-key auth, request size
  limit, the answers and their status codes;
* ``devices`` - the devices (the CPU, each GPU of ``--devices``), each with its own
  queue, lock file and evaluator processes;
* ``executor`` - an evaluator process (``python -m harness.serve.executor``): it keeps
  torch and the harness's worker pools warm and runs one evaluation at a time;
* ``quarantine`` - sticky device errors (a CUDA illegal address, a lost device) and
  the probe that decides whether a device is still fit to time kernels;
* ``probe`` - the probe itself (``python -m harness.serve.probe``): a fresh process that
  checks the device and reports its hardware fingerprint;
* ``cli`` - the command line and the uvicorn server.
"""
