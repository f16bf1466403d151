"""Benchmarks of the Canvas Run Service (`make bench`); figures and commands are kept in docs/benchmarks.md."""

# The embedded stack's parameters for a benchmark: quiet logs, and no limit on the runs one account starts in a
# minute (benchmarks measure what the service does under many runs, not one account's allowance).
STACK_PARAMETERS = {"LogLevel": "WARNING", "MaxRunStartsPerMinutePerAccount": "100000"}
