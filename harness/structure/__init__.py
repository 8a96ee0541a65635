"""What a task's reference computes: its traced op graph, and which kernel templates serve it.

docs/harness.md, "Module notes".
"""
