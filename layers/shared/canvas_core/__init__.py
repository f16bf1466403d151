"""Canvas Run Service core: the models, rules and adapters every Lambda of the service shares."""
