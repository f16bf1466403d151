"""The one Logger, Tracer and Metrics trio every function uses (service name from POWERTOOLS_SERVICE_NAME)."""

from aws_lambda_powertools import Logger, Metrics, Tracer

logger = Logger()
tracer = Tracer()
metrics = Metrics()
