"""An account as its holder sees it: credits, this month's usage and the limits it runs under."""

from __future__ import annotations

from canvas_core.adapters.store import Store
from canvas_core.adapters.usage import credits_used_counter, month_of, runs_counter
from canvas_core.errors import NotFoundError
from canvas_core.models.accounts import AccountLimits, AccountView
from canvas_core.observability import tracer
from canvas_core.planner import MAX_BLOCKS
from canvas_core.settings import api_settings
from canvas_core.webhooks.settings import MAX_ENDPOINTS_PER_ACCOUNT


class AccountNotFoundError(NotFoundError):
    def __init__(self, account_id: str):
        super().__init__(f"Account not found: {account_id}")


@tracer.capture_method
def get_account(account_id: str, store: Store | None = None) -> AccountView:
    account = (store or Store()).get_account(account_id)
    if account is None:
        raise AccountNotFoundError(account_id)
    settings, month = api_settings(), month_of()
    return AccountView(
        account_id=account_id,
        credits_balance=int(account.get("credits_balance", 0)),
        credits_used_this_month=int(account.get(credits_used_counter(month), 0)),
        runs_this_month=int(account.get(runs_counter(month), 0)),
        month=f"{month[:4]}-{month[4:]}",
        active_runs=int(account.get("active_runs", 0)),
        limits=AccountLimits(
            max_concurrent_runs=settings.max_concurrent_runs,
            max_runs_per_minute=settings.max_runs_per_minute,
            max_webhook_endpoints=MAX_ENDPOINTS_PER_ACCOUNT,
            max_blocks_per_run=MAX_BLOCKS,
            max_files_per_run=settings.max_files,
            max_file_bytes=settings.max_file_bytes,
            max_prompt_chars=settings.max_prompt_chars,
        ),
    )
