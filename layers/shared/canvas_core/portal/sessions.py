"""Portal sessions: an account holder signs in with a key once, and gets a random session token in an HttpOnly
cookie. Only the token's SHA-256 is stored, with the account, the key signed in with, a CSRF token and an expiry.

A session ends when it expires, when its holder signs out, or when the key it was opened with is revoked.
State-changing calls need the session's CSRF token in a header, and a same-origin `Origin` when one is sent.

Sign-in is limited per client address: after SIGN_IN_FAILURES_ALLOWED failed attempts within a minute, every
attempt from that address is refused (429, `Retry-After` the rest of the minute), a right key too, so guessing
keys gains nothing. The count lives in the sessions table (Lambda environments share no memory)."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from canvas_core.adapters.accounts import AccountStore
from canvas_core.auth import active_key
from canvas_core.clock import now_ms
from canvas_core.errors import AuthenticationError, BadRequestError, ServiceError
from canvas_core.observability import logger

SESSION_COOKIE = "canvas_session"
CSRF_HEADER = "x-csrf-token"
SIGN_IN_FAILURES_ALLOWED = 10  # failed sign-ins per client address and window
SIGN_IN_WINDOW_SECONDS = 60


class SignInRequiredError(AuthenticationError):
    def __init__(self) -> None:
        super().__init__("Sign in to the portal: no session, or it has ended")


class ForbiddenError(ServiceError):
    status_code = 403


class CsrfRefusedError(ForbiddenError):
    def __init__(self) -> None:
        super().__init__("Refused: the request lacks the session's CSRF token")


class CrossOriginRefusedError(ForbiddenError):
    def __init__(self) -> None:
        super().__init__("Refused: the request comes from another origin")


class TooManySignInsError(ServiceError):
    status_code = 429

    def __init__(self, retry_after_seconds: int):
        super().__init__(
            f"Too many failed sign-ins from this address: at most {SIGN_IN_FAILURES_ALLOWED} a minute; "
            f"try again in {retry_after_seconds} seconds"
        )
        self.retry_after_seconds = retry_after_seconds


@dataclass(frozen=True)
class Session:
    token_hash: str
    account_id: str
    key_hash: str
    csrf_token: str
    expires_at: int  # epoch seconds (the table's TTL attribute)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def sign_in(
    api_key: str, lifetime_seconds: int, store: AccountStore | None = None, client_address: str | None = None
) -> tuple[str, Session]:
    """A new session for the account holding `api_key`: (the cookie's token, the session). TooManySignInsError
    once the client's address has used up its failed attempts for the minute."""
    store = store or AccountStore()
    if not api_key.strip():
        raise BadRequestError("Give an API key to sign in")
    now = now_ms() // 1000
    window = now // SIGN_IN_WINDOW_SECONDS
    window_ends = (window + 1) * SIGN_IN_WINDOW_SECONDS
    window_key = f"sign-in#{hash_token(client_address or 'unknown')}#{window}"
    if store.sign_in_failures(window_key) >= SIGN_IN_FAILURES_ALLOWED:
        raise TooManySignInsError(window_ends - now)
    try:
        record = active_key(api_key.strip(), store)
    except AuthenticationError:
        failures = store.add_sign_in_failure(window_key, expires_at=window_ends)
        logger.warning("Portal sign-in refused", extra={"client_address": client_address, "failures": failures})
        raise
    token = secrets.token_urlsafe(32)
    session = Session(
        token_hash=hash_token(token),
        account_id=record["account_id"],
        key_hash=record["key_hash"],
        csrf_token=secrets.token_urlsafe(32),
        expires_at=now_ms() // 1000 + lifetime_seconds,
    )
    store.put_session(
        {
            "session_hash": session.token_hash,
            "account_id": session.account_id,
            "key_hash": session.key_hash,
            "csrf_token": session.csrf_token,
            "created_at_ms": now_ms(),
            "expires_at": session.expires_at,
        }
    )
    logger.info("Portal session opened", extra={"account_id": session.account_id})
    return token, session


def current_session(token: str | None, store: AccountStore | None = None) -> Session:
    """The live session of a cookie's token; SignInRequiredError when there is none (expired, signed out, or its
    key revoked: DynamoDB's TTL deletes late, so expiry is checked here too)."""
    if not token:
        raise SignInRequiredError()
    store = store or AccountStore()
    item = store.get_session(hash_token(token))
    if item is None or int(item["expires_at"]) <= now_ms() // 1000:
        raise SignInRequiredError()
    key = store.get_api_key(item["key_hash"])
    if key is None or key.get("status") != "active":
        store.delete_session(item["session_hash"])
        raise SignInRequiredError()
    return Session(
        token_hash=item["session_hash"],
        account_id=item["account_id"],
        key_hash=item["key_hash"],
        csrf_token=item["csrf_token"],
        expires_at=int(item["expires_at"]),
    )


def sign_out(session: Session, store: AccountStore | None = None) -> None:
    (store or AccountStore()).delete_session(session.token_hash)


def check_same_origin(headers: Mapping[str, str]) -> None:
    """Refuse a request whose `Origin` names another host than the one it was sent to (absent is allowed:
    same-origin GETs and some clients send none; the CSRF token still guards the change)."""
    origin = _header(headers, "origin")
    if origin is None:
        return
    host = _header(headers, "host")
    if origin == "null" or host is None or urlsplit(origin).netloc.lower() != host.lower():
        raise CrossOriginRefusedError()


def check_csrf(session: Session, headers: Mapping[str, str]) -> None:
    sent = _header(headers, CSRF_HEADER) or ""
    if not hmac.compare_digest(sent.encode("utf-8"), session.csrf_token.encode("utf-8")):
        raise CsrfRefusedError()


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((v for k, v in (headers or {}).items() if k.lower() == name), None)
