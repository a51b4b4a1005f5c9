"""Pure folds of the ledger's events into read models (BRIEF P*, O*, R*)."""
