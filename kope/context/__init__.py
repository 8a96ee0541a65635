"""Active Context Management and Injection (ACMI): budgeted hot/warm/cold prompts."""
