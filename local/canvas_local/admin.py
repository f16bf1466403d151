"""Operator commands on a deployment's tables: `create-account`, `grant-credits`, `create-key`, `list-keys` and
`revoke-key`. They reach the tables of

- a deployed stack: AWS credentials and region as for the AWS CLI, and `--stack-name` (the table and bucket names
  are read from the stack's outputs) or the variables a function is given (ACCOUNTS_TABLE_NAME, ...);
- the embedded stack: `--endpoint-url` with the AWS endpoint `canvas serve` prints (its names are template.yaml's
  outputs as the embedded stack names them, so nothing else is needed).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from canvas_local.credentials import published

# Stack outputs (template.yaml) and the environment variables canvas_core reads them from: the names its store
# needs (every one is required; the commands touch the accounts and keys tables only).
TABLE_OUTPUTS = {
    "AccountsTableName": "ACCOUNTS_TABLE_NAME",
    "ApiKeysTableName": "API_KEYS_TABLE_NAME",
    "PortalSessionsTableName": "PORTAL_SESSIONS_TABLE_NAME",
    "RunsTableName": "RUNS_TABLE_NAME",
    "CanvasesTableName": "CANVASES_TABLE_NAME",
    "TasksTableName": "TASKS_TABLE_NAME",
    "IdempotencyTableName": "IDEMPOTENCY_TABLE_NAME",
    "ArtifactsBucketName": "ARTIFACTS_BUCKET_NAME",
}
# template.yaml's functions publish to the account's default bus; no stack output names it.
EVENT_BUS_NAME = "default"


class AdminError(Exception):
    """A refusal the operator can act on: printed as one line, exit 1."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    account = _command(commands, "create-account", "create an account with a starting grant and its first key")
    account.add_argument("--credits", type=_non_negative, default=None, help="starting credits (default 5000)")
    account.set_defaults(admin_command=create_account)

    grant = _command(commands, "grant-credits", "add credits to an account's balance")
    grant.add_argument("account_id", metavar="ACCOUNT_ID")
    grant.add_argument("credits", type=_positive, metavar="N")
    grant.set_defaults(admin_command=grant_credits)

    create = _command(
        commands,
        "create-key",
        "create an API key: for --account, or (without it) in a new account, as create-account does",
    )
    create.add_argument("--account", metavar="ACCOUNT_ID", help="the account the key belongs to")
    create.add_argument("--credits", type=_non_negative, default=None, help="a new account's starting credits")
    create.set_defaults(admin_command=create_key)

    listing = _command(commands, "list-keys", "list an account's keys (prefix and last four, never the keys)")
    listing.add_argument("--account", metavar="ACCOUNT_ID", required=True)
    listing.set_defaults(admin_command=list_keys)

    revoke = _command(
        commands, "revoke-key", "revoke an API key: --account and --key-id, or the key itself on standard input"
    )
    revoke.add_argument("--account", metavar="ACCOUNT_ID", help="with --key-id: the account holding the key")
    revoke.add_argument("--key-id", metavar="KEY_ID", help="the key's id (list-keys, GET /v1/api_keys)")
    revoke.set_defaults(admin_command=revoke_key)


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help_text, description=help_text)
    target = parser.add_argument_group("which deployment")
    target.add_argument("--stack-name", help="a deployed stack: its tables are read from its outputs")
    target.add_argument("--region", help="the deployed stack's region (default: AWS_REGION / the AWS config)")
    target.add_argument(
        "--endpoint-url", help="the AWS endpoint to use, e.g. the one `canvas serve` prints for the embedded stack"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    command: Callable[[argparse.Namespace], int] = args.admin_command
    try:
        target(args.stack_name, args.region, args.endpoint_url)
        return command(args)
    except AdminError as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1


def target(stack_name: str | None, region: str | None, endpoint_url: str | None) -> None:
    """Point canvas_core's clients and settings at the chosen deployment (this process only)."""
    if region:
        os.environ["AWS_REGION"] = os.environ["AWS_DEFAULT_REGION"] = region
    if endpoint_url:
        os.environ["AWS_ENDPOINT_URL"] = endpoint_url
        os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        # The embedded stack accepts its own credentials only, published for its user (canvas_local.credentials);
        # real ones are never sent to it.
        own = published(endpoint_url)
        if own is not None:
            os.environ["AWS_ACCESS_KEY_ID"] = own.access_key_id
            os.environ["AWS_SECRET_ACCESS_KEY"] = own.secret_access_key
            os.environ.pop("AWS_SESSION_TOKEN", None)
        elif not os.environ.get("AWS_ACCESS_KEY_ID"):
            raise AdminError(
                f"no credentials for {endpoint_url}: run this as the user running `canvas serve`, on its machine "
                "(it publishes them there), or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            )
        if not stack_name:
            for variable, value in _embedded_names().items():
                os.environ.setdefault(variable, value)
    if stack_name:
        os.environ.update(_table_names(stack_name))
    os.environ.setdefault("EVENT_BUS_NAME", EVENT_BUS_NAME)
    from canvas_core import settings
    from canvas_core.adapters.aws import reset_clients

    settings.reset()
    reset_clients()


def _embedded_names() -> dict[str, str]:
    """template.yaml's outputs as the embedded stack names them (canvas_local.template), by variable."""
    from canvas_local.defaults import DEFAULT_TEMPLATE
    from canvas_local.template import Template

    template = Template(DEFAULT_TEMPLATE)
    outputs = template.document.get("Outputs") or {}
    return {
        variable: str(template.resolve(outputs[output]["Value"]))
        for output, variable in TABLE_OUTPUTS.items()
        if output in outputs
    }


def _table_names(stack_name: str) -> dict[str, str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        stacks = boto3.client("cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    except (BotoCoreError, ClientError) as exc:
        raise AdminError(f"cannot read stack {stack_name}: {exc}") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    missing = [name for name in ("AccountsTableName", "ApiKeysTableName") if name not in outputs]
    if missing:
        raise AdminError(f"stack {stack_name} has no output {', '.join(missing)}")
    return {variable: outputs[output] for output, variable in TABLE_OUTPUTS.items() if output in outputs}


# ---------------------------------------------------------------- the commands


def create_account(args: argparse.Namespace) -> int:
    from canvas_core.auth import STARTING_CREDITS, create_account_with_key

    account_id, api_key = create_account_with_key(credits=STARTING_CREDITS if args.credits is None else args.credits)
    print(f"account_id: {account_id}")
    print(f"api_key: {api_key}  (shown once; only its hash is stored)")
    return 0


def grant_credits(args: argparse.Namespace) -> int:
    from canvas_core.adapters.accounts import AccountStore
    from canvas_core.adapters.dynamodb import ConditionFailed

    try:
        balance = AccountStore().grant_credits(args.account_id, args.credits)
    except ConditionFailed:
        raise AdminError(f"no such account: {args.account_id}") from None
    print(f"account_id: {args.account_id}")
    print(f"credits_balance: {balance}")
    return 0


def create_key(args: argparse.Namespace) -> int:
    if args.account is None:
        return create_account(args)
    if args.credits is not None:
        raise AdminError("--credits is for a new account; use grant-credits for an existing one")
    from canvas_core.adapters.store import Store
    from canvas_core.keys import create_key as create

    if Store().get_account(args.account) is None:
        raise AdminError(f"no such account: {args.account}")
    created = create(args.account)
    print(f"account_id: {args.account}")
    print(f"key_id: {created.id}")
    print(f"api_key: {created.key}  (shown once; only its hash is stored)")
    return 0


def list_keys(args: argparse.Namespace) -> int:
    from canvas_core.keys import list_keys as listed

    keys = listed(args.account).keys
    for key in keys:
        print(f"{key.id}  {key.prefix}…{key.last_four or '????'}  {key.status:<7}  created {key.created}")
    if not keys:
        print("no keys")
    return 0


def revoke_key(args: argparse.Namespace) -> int:
    from canvas_core.adapters.dynamodb import ConditionFailed
    from canvas_core.adapters.store import Store
    from canvas_core.auth import hash_api_key
    from canvas_core.errors import ServiceError
    from canvas_core.keys import revoke_key as revoke

    if args.key_id is not None or args.account is not None:
        if args.key_id is None or args.account is None:
            print("revoke-key: give both --account and --key-id (or the key on standard input)", file=sys.stderr)
            return 2
        try:
            revoked = revoke(args.account, args.key_id)
        except ServiceError as exc:
            raise AdminError(exc.message) from None
        print(f"revoked {revoked.id}")
        return 0
    api_key = sys.stdin.readline().strip()
    if not api_key:
        print("revoke-key: give the key on standard input, or --account and --key-id", file=sys.stderr)
        return 2
    try:
        Store().revoke_api_key(hash_api_key(api_key))
    except ConditionFailed:
        print("revoke-key: no such key", file=sys.stderr)
        return 1
    print("revoked")
    return 0


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be at least 0")
    return value
