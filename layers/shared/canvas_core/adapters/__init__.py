"""Adapters: the only code that talks to AWS services. They raise domain errors, never botocore's."""
