"""Pure decisions of a profile: which trials to run, SLO verdicts, cost, the best configuration, rightsizing."""
