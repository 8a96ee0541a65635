"""What a task's reference computes: its traced op graph, and which kernel templates serve it.

The offline proposer used to pick a template by operator *name*; a KernelBench
file is named ``19_ReLU`` and got nothing. Here the reference is run on its own
inputs (``trace``: in a worker process with a timeout, under torch's fake
tensors so sizes cost nothing, falling back to real tensors) while a dispatch
mode records every aten op. ``graph`` turns that log into a small typed op
graph; ``lift`` folds aten's decompositions back into semantic ops (a matmul
with transposed or broadcast operands, a linear layer, an instance norm, an
RMS norm, ...); ``match`` covers the lifted graph with the patterns the
templates declare (``harness.structure.patterns``) and binds each pattern's
parameters (the reduced dimension, the activation, the epilogue chain,
strides and padding, dtype) to where the task keeps them: an input, a
parameter by its state-dict name, a module attribute, a constant.

A task that nothing covers gets a ``NoMatch`` naming the ops no template
computes. ``codegen`` turns a match into a candidate that follows the task's
own conventions (its constructor, parameter names and shapes, output shapes).

Nothing here imports torch at module level except ``trace_worker``, which
runs in its own process.
"""
