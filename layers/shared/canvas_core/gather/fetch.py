"""The HTTP fetcher every gathering block uses for the web, with SSRF protection on by default.

Only http and https; the host is resolved here and every address it resolves to is checked before anything
connects (no loopback, private, link-local, cloud metadata, multicast or reserved ranges, IPv6 and IPv4
embedded in IPv6 included); the connection goes to an address that was checked, so a second DNS answer
cannot swap it; each redirect is checked again as a new request. Responses are capped in size and in time,
and asked for without compression so the cap is the size in memory. An operator may allow private addresses
(WEB_ALLOW_PRIVATE_ADDRESSES); metadata, link-local, multicast, unspecified, broadcast and 240.0.0.0/4 addresses
stay refused, in IPv6 forms that carry them too.
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from canvas_core.settings import FetchSettings, fetch_settings

USER_AGENT = "CanvasRunService/1.0 (research fetcher)"
REDIRECTS = {301, 302, 303, 307, 308}
CHUNK = 64 * 1024

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]
Connector = Callable[[str, int, float], socket.socket]

# Instance metadata services (AWS, ECS, EKS, GCP, Azure, Alibaba, Oracle): refused whatever the settings.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "168.63.129.16",
        "100.100.100.200",
        "192.0.0.192",
    )
)
# IPv6 ranges whose last 32 bits are an IPv4 address: IPv4-compatible (::/96, deprecated but still routed by
# some stacks), IPv4-mapped, IPv4-translated (SIIT), and NAT64's well-known and local-use prefixes.
_IPV4_IN_LOW_BITS = tuple(
    ipaddress.ip_network(n) for n in ("::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48")
)
_UNSPECIFIED_OR_LOOPBACK = (ipaddress.IPv6Address("::"), ipaddress.IPv6Address("::1"))
# Refused whatever the settings: "this network" (0.0.0.0 reaches the host itself), and 240.0.0.0/4, reserved,
# with the limited broadcast address at its end.
_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")
_RESERVED_IPV4 = ipaddress.ip_network("240.0.0.0/4")
_BROADCAST = ipaddress.IPv4Address("255.255.255.255")


class FetchError(Exception):
    """A fetch that did not give a page; the message says why, for the block's error."""


class BlockedAddressError(FetchError):
    """Refused by the SSRF policy, before any connection."""


class FetchRefusedError(FetchError):
    """A permanent failure: a URL that cannot be fetched, a client error, a page too large."""


class FetchTransientError(FetchError):
    """A passing failure: a timeout, a refused connection, 429 or a server error; worth retrying."""


@dataclass
class Page:
    url: str  # after redirects
    status: int
    content_type: str  # the media type, lower case, without parameters
    charset: str | None
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def text(self) -> str:
        charset = self.charset or _sniff_charset(self.body) or "utf-8"
        try:
            return self.body.decode(charset, errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")


def resolve_host(host: str, port: int) -> list[str]:
    """Every address the host resolves to (the system resolver)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise FetchRefusedError(f"The host {host} could not be resolved") from exc
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


def open_connection(address: str, port: int, timeout: float) -> socket.socket:
    return socket.create_connection((address, port), timeout=timeout)


def address_problem(ip: IPAddress, allow_private: bool = False) -> str | None:
    """Why this address may not be fetched (e.g. "a loopback address"), or None when it may. An IPv6 address
    that carries an IPv4 one is judged by that IPv4 address."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded is not None:
            problem = address_problem(embedded, allow_private)
            return f"{problem} ({embedded} inside an IPv6 address)" if problem else None
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_unspecified or ip in _THIS_NETWORK:
        return "an unspecified address"
    if ip.is_multicast:
        return "a multicast address"
    if ip in _RESERVED_IPV4:
        return "the broadcast address" if ip == _BROADCAST else "a reserved address"
    if allow_private:
        return None
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_reserved:
        return "a reserved address"
    if ip.is_private:
        return "a private address"
    if not ip.is_global:
        return "a reserved address"
    return None


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address a packet to this IPv6 address reaches through a transition mechanism: IPv4-mapped,
    IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo (its client); None for any other address."""
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip not in _UNSPECIFIED_OR_LOOPBACK and any(ip in network for network in _IPV4_IN_LOW_BITS):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


class Fetcher:
    """`Fetcher().fetch(url)` returns a Page or raises a FetchError. The resolver and the connector are
    parameters so tests can stand in for DNS and for the network (the checks run all the same)."""

    def __init__(
        self,
        settings: FetchSettings | None = None,
        resolver: Resolver | None = None,
        connector: Connector | None = None,
        allow_private: bool | None = None,
        private_opt_in: str | None = None,
    ):
        self.settings = settings or fetch_settings()
        self.allow_private = self.settings.web_allow_private_addresses if allow_private is None else allow_private
        # How the operator lets private addresses through, named when one is refused.
        self.private_opt_in = private_opt_in
        # Looked up when built, so a test may replace the module's functions.
        self.resolver = resolver or resolve_host
        self.connector = connector or open_connection

    def fetch(
        self,
        url: str,
        *,
        method: str = "GET",
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        max_bytes: int | None = None,
        timeout: float | None = None,
    ) -> Page:
        limit = max_bytes or self.settings.web_max_bytes
        seconds = timeout or self.settings.web_fetch_timeout_seconds
        deadline = time.monotonic() + seconds
        for _ in range(self.settings.web_max_redirects + 1):
            scheme, host, port, path = self._target(url)
            addresses = self.check_host(host, port)
            status, response_headers, data = self._exchange(
                scheme, host, port, path, addresses, method, body, headers or {}, limit, deadline, url, seconds
            )
            if status in REDIRECTS:
                location = response_headers.get("location")
                if not location:
                    raise FetchRefusedError(f"{url} answered HTTP {status} without a Location")
                url = urljoin(url, location.strip())
                if status == 303 or (status in (301, 302) and method != "GET"):
                    method, body = "GET", None
                continue
            if status == 429 or status >= 500:
                raise FetchTransientError(f"{url} answered HTTP {status}")
            if status >= 400:
                raise FetchRefusedError(f"{url} answered HTTP {status}")
            media, charset = _content_type(response_headers.get("content-type", ""))
            return Page(
                url=url, status=status, content_type=media, charset=charset, body=data, headers=response_headers
            )
        raise FetchRefusedError(f"Too many redirects (more than {self.settings.web_max_redirects}) from {url}")

    def send(
        self,
        url: str,
        *,
        method: str = "POST",
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        max_bytes: int = CHUNK,
        timeout: float | None = None,
    ) -> Page:
        """One request through the same checks, answered with whatever status came: no redirect is followed
        (a 3xx is returned as it is) and no status is an error, for callers that judge the answer themselves."""
        seconds = timeout or self.settings.web_fetch_timeout_seconds
        scheme, host, port, path = self._target(url)
        addresses = self.check_host(host, port)
        deadline = time.monotonic() + seconds
        status, response_headers, data = self._exchange(
            scheme, host, port, path, addresses, method, body, headers or {}, max_bytes, deadline, url, seconds
        )
        media, charset = _content_type(response_headers.get("content-type", ""))
        return Page(url=url, status=status, content_type=media, charset=charset, body=data, headers=response_headers)

    def check_url(self, url: str) -> None:
        """Refuse a URL the policy forbids, without connecting (resolves its host)."""
        _, host, port, _ = self._target(url)
        self.check_host(host, port)

    def check_host(self, host: str, port: int) -> list[str]:
        """The host's addresses, once every one of them is allowed."""
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None
        addresses = [str(literal)] if literal is not None else self.resolver(host, port)
        if not addresses:
            raise FetchRefusedError(f"The host {host} could not be resolved")
        for address in addresses:
            try:
                ip = ipaddress.ip_address(address)
            except ValueError as exc:
                raise BlockedAddressError(f"The host {host} resolved to an invalid address") from exc
            problem = address_problem(ip, self.allow_private)
            if problem:
                named = host if literal is not None else f"{host} (resolves to {address})"
                hint = "" if self.allow_private else "; private addresses are refused unless the operator allows them"
                if hint and self.private_opt_in:
                    hint += f" ({self.private_opt_in})"
                raise BlockedAddressError(f"Refused to fetch {named}: {problem}{hint}")
        return addresses

    def _target(self, url: str) -> tuple[str, str, int, str]:
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError as exc:
            raise FetchRefusedError(f"Not a valid URL: {url}") from exc
        if parts.scheme not in ("http", "https"):
            raise BlockedAddressError(f"Refused to fetch {url}: only http and https URLs are fetched")
        if not parts.hostname:
            raise FetchRefusedError(f"Not a valid URL (no host): {url}")
        if parts.username is not None or parts.password is not None:
            raise FetchRefusedError(f"Refused to fetch {parts.hostname}: URLs with credentials are not fetched")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return parts.scheme, parts.hostname.rstrip("."), port or (443 if parts.scheme == "https" else 80), path

    def _exchange(
        self,
        scheme: str,
        host: str,
        port: int,
        path: str,
        addresses: list[str],
        method: str,
        body: bytes | None,
        headers: dict[str, str],
        limit: int,
        deadline: float,
        url: str,
        seconds: float,
    ) -> tuple[int, dict[str, str], bytes]:
        connection_class = _PinnedHTTPSConnection if scheme == "https" else _PinnedHTTPConnection
        last_error: Exception | None = None
        for address in addresses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            connection = connection_class(host, port, address, self.connector, remaining)
            try:
                connection.request(
                    method,
                    path,
                    body=body,
                    headers={
                        "User-Agent": USER_AGENT,
                        "Accept": "text/html,application/xhtml+xml,application/json,text/plain;q=0.9,*/*;q=0.5",
                        "Accept-Encoding": "identity",
                        "Connection": "close",
                        **headers,
                    },
                )
                response = connection.getresponse()
                response_headers = {k.lower(): v for k, v in response.getheaders()}
                if response.status in REDIRECTS:
                    return response.status, response_headers, b""
                declared = response_headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise FetchRefusedError(f"{url} is too large: {declared} bytes (limit {limit})")
                return response.status, response_headers, _read(connection, response, limit, deadline, url)
            except FetchError:
                raise
            except ssl.SSLCertVerificationError as exc:
                raise FetchRefusedError(f"{url}: the TLS certificate could not be verified") from exc
            except TimeoutError as exc:
                raise FetchTransientError(f"{url} timed out after {seconds:g} s") from exc
            except (OSError, http.client.HTTPException) as exc:
                last_error = exc
            finally:
                connection.close()
        if last_error is None:
            raise FetchTransientError(f"{url} timed out after {seconds:g} s")
        raise FetchTransientError(f"{url} could not be reached ({type(last_error).__name__})") from last_error


def _read(
    connection: http.client.HTTPConnection, response: http.client.HTTPResponse, limit: int, deadline: float, url: str
) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        if connection.sock is not None:
            connection.sock.settimeout(remaining)
        chunk = response.read(CHUNK)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > limit:
            raise FetchRefusedError(f"{url} is too large: more than {limit} bytes")
        chunks.append(chunk)


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to an address already checked, while the request names the host."""

    def __init__(self, host: str, port: int, address: str, connector: Connector, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self._address, self._connector, self._connect_timeout = address, connector, timeout

    def connect(self) -> None:
        self.sock = self._connector(self._address, self.port, self._connect_timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, connector: Connector, timeout: float):
        self._tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self._tls)
        self._address, self._connector, self._connect_timeout = address, connector, timeout

    def connect(self) -> None:
        sock = self._connector(self._address, self.port, self._connect_timeout)
        self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)


def _content_type(value: str) -> tuple[str, str | None]:
    media, _, params = value.partition(";")
    match = re.search(r"charset=\"?([\w.:-]+)", params, re.IGNORECASE)
    return media.strip().lower(), (match.group(1) if match else None)


def _sniff_charset(body: bytes) -> str | None:
    match = re.search(rb"<meta[^>]+charset=[\"']?([\w.:-]+)", body[:4096], re.IGNORECASE)
    return match.group(1).decode("ascii") if match else None
