"""The optimization loop: retrieve -> assemble -> propose -> evaluate -> record."""

PROPOSERS = ("llm", "offline")  # the proposers by name (kope.agent.runner.make_proposer; the CLI choices)
