"""The embedded stack: the whole service on one machine, with moto standing in for AWS (see stack.py)."""
