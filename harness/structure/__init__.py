"""What a task's reference computes: its traced op graph, and which kernel templates serve it.

The steps (``trace`` in a worker process, ``graph``, ``lift`` of aten's decompositions into semantic ops,
``match`` covering the lifted graph with the templates' patterns and binding their parameters, ``codegen`` of a
candidate that follows the task's conventions; a ``NoMatch`` names what nothing covers): docs/templates.md,
"How a task is matched".

Nothing here imports torch at module level except ``trace_worker``, which runs in its own process.
"""
