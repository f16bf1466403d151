"""API keys kept in Secrets Manager (the OpenAI key, the search provider's key).

On AWS a function gets the secret's ARN in its environment and reads it once per container: Powertools
parameters cache the value (`SECRET_MAX_AGE_SECONDS`), and only the functions whose role may read the secret are
given it. A key set directly in the environment (`OPENAI_API_KEY`, `SEARCH_API_KEY`) wins: the offline path and
the embedded stack's, which has no Secrets Manager."""

from __future__ import annotations

import json

from canvas_core.errors import BlockFatalError

# A rotated key reaches a warm container within the hour.
SECRET_MAX_AGE_SECONDS = 3600
_KEY_FIELDS = ("api_key", "apiKey", "key")


def secret_api_key(secret_arn: str, what: str, key_fields: tuple[str, ...] = ()) -> str:
    """The API key a secret holds: its text, or the first of `key_fields` and then `api_key`, `apiKey`, `key`
    when it holds JSON. BlockFatalError when it cannot be read or holds no key."""
    from aws_lambda_powertools.utilities import parameters

    try:
        secret = parameters.get_secret(secret_arn, max_age=SECRET_MAX_AGE_SECONDS)
    except Exception as exc:  # Powertools' GetParameterError wraps botocore's errors
        raise BlockFatalError(f"The {what} secret could not be read ({type(exc).__name__})") from exc
    text = secret.decode("utf-8") if isinstance(secret, bytes) else str(secret or "")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return text.strip()
    if isinstance(data, dict):
        for name in (*key_fields, *_KEY_FIELDS):
            if data.get(name):
                return str(data[name])
    raise BlockFatalError(f"The {what} secret holds JSON without an `api_key`")
