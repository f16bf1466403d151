"""Pydantic models by role: the block catalog, API request and response bodies, stored items, block I/O."""
