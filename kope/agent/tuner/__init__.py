"""The offline proposer's tuner: features, a random-forest cost model, expected improvement, ranking.

``Tuner(template, seed).plan(...)`` ranks the untried settings of a kernel
template for one operator from the tuning records memory returned
(``kope.memory.tuning``); ``kope.agent.offline.OfflineProposer`` turns the best
one into a decision.
"""

from kope.agent.tuner.tuner import CONVERGED_RATIO, VETO_RATIO, Choice, Plan, Tuner, Veto, settings_key

__all__ = ["CONVERGED_RATIO", "VETO_RATIO", "Choice", "Plan", "Tuner", "Veto", "settings_key"]
