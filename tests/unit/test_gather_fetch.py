"""The fetcher's SSRF policy: every address a URL resolves to is checked before anything connects."""

from __future__ import annotations

import ipaddress

import pytest

from canvas_core.gather.fetch import (
    BlockedAddressError,
    Fetcher,
    FetchRefusedError,
    address_problem,
)
from canvas_core.settings import GatherSettings, gather_settings

pytestmark = pytest.mark.unit


def never_connect(address: str, port: int, timeout: float):
    raise AssertionError(f"connected to {address}:{port}")


def fetcher(resolved: dict[str, list[str]] | None = None, allow_private: bool = False) -> Fetcher:
    def resolver(host: str, port: int) -> list[str]:
        return (resolved or {})[host]

    return Fetcher(GatherSettings(), resolver=resolver, connector=never_connect, allow_private=allow_private)


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/", "a loopback address"),
        ("http://127.8.9.10:8080/admin", "a loopback address"),
        ("http://10.0.0.5/", "a private address"),
        ("http://172.16.3.4/", "a private address"),
        ("http://192.168.1.1/router", "a private address"),
        ("http://100.64.0.1/", "a reserved address"),
        ("http://169.254.10.20/", "a link-local address"),
        ("http://169.254.169.254/latest/meta-data/iam/", "a cloud metadata address"),
        ("http://168.63.129.16/", "a cloud metadata address"),
        ("http://0.0.0.0:8000/", "an unspecified address"),
        ("http://224.0.0.1/", "a multicast address"),
        ("http://240.0.0.1/", "a reserved address"),
        ("http://[::1]/", "a loopback address"),
        ("http://[fd12:3456::1]/", "a private address"),
        ("http://[fe80::1]/", "a link-local address"),
        ("http://[fd00:ec2::254]/latest/meta-data/", "a cloud metadata address"),
        ("http://[::ffff:127.0.0.1]/", "a loopback address"),
        ("http://[::ffff:a9fe:a9fe]/", "a cloud metadata address"),
        ("http://[64:ff9b::a00:1]/", "a private address"),
        ("http://[2002:c0a8:101::1]/", "a private address"),
    ],
)
def test_forbidden_addresses_are_refused_before_connecting(url, reason):
    # When
    with pytest.raises(BlockedAddressError) as refused:
        fetcher().fetch(url)
    # Then
    assert reason in str(refused.value)
    assert "Refused to fetch" in str(refused.value)


def test_a_name_resolving_to_a_private_address_is_refused():
    with pytest.raises(BlockedAddressError, match=r"intranet\.example \(resolves to 10\.1\.2\.3\): a private address"):
        fetcher({"intranet.example": ["10.1.2.3"]}).fetch("https://intranet.example/wiki")


def test_every_resolved_address_is_checked_not_only_the_first():
    # Given a name with a public and a loopback address (DNS rebinding's usual trick)
    resolving = fetcher({"mixed.example": ["93.184.216.34", "127.0.0.1"]})
    # Then
    with pytest.raises(BlockedAddressError, match=r"127\.0\.0\.1"):
        resolving.fetch("http://mixed.example/")


def test_a_decimal_encoded_loopback_host_is_refused():
    # 2130706433 is 127.0.0.1 as one number; the system resolver reads it so, and the check sees that
    with pytest.raises(BlockedAddressError, match="a loopback address"):
        Fetcher(GatherSettings(), connector=never_connect).fetch("http://2130706433/")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://example.com/", "data:,x"])
def test_only_http_and_https_are_fetched(url):
    with pytest.raises(BlockedAddressError, match="only http and https URLs are fetched"):
        fetcher().fetch(url)


def test_urls_with_credentials_are_refused():
    with pytest.raises(FetchRefusedError, match="URLs with credentials are not fetched"):
        fetcher({"example.com": ["93.184.216.34"]}).fetch("http://user:pw@example.com/")


def test_a_url_without_a_host_is_refused():
    with pytest.raises(FetchRefusedError, match="no host"):
        fetcher().fetch("http:///path")


def test_allowing_private_addresses_lets_loopback_through_but_never_metadata():
    # Given the operator setting
    lenient = fetcher({"metadata.internal": ["169.254.169.254"]}, allow_private=True)
    # Then private and loopback pass the check
    assert lenient.check_host("127.0.0.1", 80) == ["127.0.0.1"]
    assert lenient.check_host("10.0.0.1", 80) == ["10.0.0.1"]
    # And metadata and link-local do not
    with pytest.raises(BlockedAddressError, match="a cloud metadata address"):
        lenient.check_url("http://metadata.internal/computeMetadata/v1/")
    with pytest.raises(BlockedAddressError, match="a link-local address"):
        lenient.check_url("http://[fe80::1]/")


ALWAYS_REFUSED = [
    ("http://[::169.254.169.254]/", "a cloud metadata address"),  # IPv4-compatible
    ("http://[::a9fe:a9fe]/", "a cloud metadata address"),  # the same, in hex
    ("http://[::ffff:169.254.169.254]/", "a cloud metadata address"),  # IPv4-mapped
    ("http://[::ffff:0:a9fe:a9fe]/", "a cloud metadata address"),  # IPv4-translated
    ("http://[64:ff9b::a9fe:a9fe]/", "a cloud metadata address"),  # NAT64
    ("http://[64:ff9b:1::a9fe:a9fe]/", "a cloud metadata address"),  # NAT64, local use
    ("http://[2002:a9fe:a9fe::1]/", "a cloud metadata address"),  # 6to4
    ("http://[2001:0:4136:e378:8000:63bf:5601:5601]/", "a cloud metadata address"),  # Teredo, client obfuscated
    ("http://[::a9fe:1]/", "a link-local address"),
    ("http://[::ffff:a9fe:1]/", "a link-local address"),
    ("http://255.255.255.255/", "the broadcast address"),
    ("http://[::ffff:255.255.255.255]/", "the broadcast address"),
    ("http://240.0.0.1/", "a reserved address"),
    ("http://[::f000:1]/", "a reserved address"),
    ("http://0.1.2.3/", "an unspecified address"),
    ("http://[::ffff:224.0.0.1]/", "a multicast address"),
]


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize(("url", "reason"), ALWAYS_REFUSED)
def test_metadata_broadcast_and_reserved_are_refused_in_every_form_whatever_the_setting(url, reason, allow_private):
    with pytest.raises(BlockedAddressError) as refused:
        fetcher(allow_private=allow_private).check_url(url)
    assert reason in str(refused.value)


@pytest.mark.parametrize("host", ["[::10.0.0.1]", "[::ffff:127.0.0.1]", "[64:ff9b::a00:1]", "[2002:a00:1::1]", "[::1]"])
def test_private_addresses_in_ipv6_forms_follow_the_setting(host):
    with pytest.raises(BlockedAddressError):
        fetcher().check_url(f"http://{host}/")
    fetcher(allow_private=True).check_url(f"http://{host}/")


def test_public_addresses_pass():
    assert address_problem(ipaddress.ip_address("93.184.216.34")) is None
    assert address_problem(ipaddress.ip_address("2606:2800:220:1:248:1893:25c8:1946")) is None


def test_settings_come_from_the_environment(monkeypatch):
    # Given
    monkeypatch.setenv("WEB_ALLOW_PRIVATE_ADDRESSES", "true")
    monkeypatch.setenv("WEB_FETCH_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("WEB_MAX_BYTES", "1000")
    monkeypatch.setenv("SEARCH_PROVIDER", "SearXNG")
    # When
    settings = gather_settings()
    # Then
    assert settings.web_allow_private_addresses is True
    assert settings.web_fetch_timeout_seconds == 2.5
    assert settings.web_max_bytes == 1000
    assert settings.search_provider == "searxng"
    assert Fetcher(settings).allow_private is True


def test_private_addresses_are_refused_by_default(monkeypatch):
    monkeypatch.delenv("WEB_ALLOW_PRIVATE_ADDRESSES", raising=False)
    assert gather_settings().web_allow_private_addresses is False
