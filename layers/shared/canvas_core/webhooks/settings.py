"""Fixed values of the webhooks (their settings read from the environment are canvas_core.settings.WebhookSettings)."""

# At most this many endpoints per account (docs/webhooks.md).
MAX_ENDPOINTS_PER_ACCOUNT = 10
# Envelope schema version: bumped on a breaking change of the envelope or of the objects it carries.
API_VERSION = "2026-11-01"
