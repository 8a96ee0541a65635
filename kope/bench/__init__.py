"""``kope bench``: a suite under the paper's configurations, the paper's metrics, reports.

Modules: ``plan`` (options, configurations, operators, order, namespaces),
``pair`` (one configuration × operator run, read back from the graph),
``runner`` (fresh/resume, sequential or parallel pairs, results.json),
``worker`` (the process behind ``--workers``), ``store`` (the output folder),
``metrics`` (the definitions), ``report`` + ``plots`` (summary.md, PNGs),
``transfer`` (memory-transfer comparisons).
"""
