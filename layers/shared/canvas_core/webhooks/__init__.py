"""Signed webhooks: account endpoints (endpoints.py), the events and their signatures (events.py, signing.py),
the retry schedule (schedule.py) and delivery off the request and execution paths (delivery.py)."""
