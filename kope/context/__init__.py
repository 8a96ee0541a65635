"""Active Context Management and Injection (ACMI): budgeted hot/warm/cold prompts."""

# The context policies (kope.context.assemble; the CLI choices): active (the tiers), passive (the full
# chronological history, the paper's baseline), none (hot only).
POLICIES = ("active", "passive", "none")
