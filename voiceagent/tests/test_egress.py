"""The egress guard against a real HTTP server on loopback."""

from __future__ import annotations

import gzip
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from kit import egress
from kit.errors import ApiError
from kit.validation import url_problem
from testing.webhooks import allow_loopback_fixture  # noqa: F401 (a fixture)


class _Handler(BaseHTTPRequestHandler):
    release: threading.Event

    def log_message(self, *args: object) -> None:  # keep test output quiet
        pass

    def _reply(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {"Content-Type": "application/json"}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        if self.path == "/echo":
            self._reply(200, json.dumps({"host": self.headers["Host"], "x": self.headers.get("X-Test")}).encode())
        elif self.path == "/gzip":
            self._reply(200, gzip.compress(b'{"zipped": true}'), {"Content-Encoding": "gzip"})
        elif self.path == "/big":
            self._reply(200, b"x" * 5000)
        elif self.path == "/to-private":
            self._reply(302, b"", {"Location": "http://10.20.30.40/secret"})
        elif self.path == "/to-metadata":
            self._reply(307, b"", {"Location": "http://169.254.169.254/latest/meta-data/"})
        elif self.path == "/to-oracle-metadata":
            self._reply(302, b"", {"Location": "http://192.0.0.192/opc/v2/instance/"})
        elif self.path == "/to-echo":
            self._reply(302, b"", {"Location": f"http://127.0.0.1:{port}/echo"})
        elif self.path == "/to-other-origin":
            self._reply(302, b"", {"Location": f"http://other.example.test:{port}/echo"})
        elif self.path == "/loop":
            self._reply(302, b"", {"Location": "/loop"})
        elif self.path == "/hang":
            self.release.wait(30)  # released at teardown; the client gives up long before
            self._reply(200, b"{}")
        else:
            self._reply(404, b"{}")

    def do_POST(self) -> None:
        port = self.server.server_address[1]
        length = int(self.headers.get("Content-Length", 0))
        body = self.rfile.read(length)
        if self.path.startswith("/post-redirect/"):  # /post-redirect/<status>/<same|other>
            status, where = self.path.split("/")[2:4]
            host = "127.0.0.1" if where == "same" else "other.example.test"
            self._reply(int(status), b"", {"Location": f"http://{host}:{port}/echo-post"})
            return
        echoed = {"got": json.loads(body)}
        if self.path == "/echo-post":
            echoed.update(path=self.path, x=self.headers.get("X-Test"))
        self._reply(200, json.dumps(echoed).encode())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    release = threading.Event()
    handler = type("Handler", (_Handler,), {"release": release})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "::1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # cloud metadata
        "168.63.129.16",  # Azure's wire server (the host's own endpoint, reachable from every VM)
        "fd00:ec2::254",  # AWS metadata over IPv6
        "100.100.100.200",  # shared address space (another cloud's metadata)
        "0.0.0.0",
        "224.0.0.1",
        "239.1.2.3",
        "ff02::1",
        "240.0.0.1",
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "2002:7f00:1::1",  # 6to4 wrapping 127.0.0.1
        "64:ff9b::a00:1",  # NAT64 wrapping 10.0.0.1
    ],
)
def test_it_refuses_non_public_addresses(address):
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(egress.EgressBlocked) as caught:
        egress.check_url(f"http://{host}/hook")
    assert "public" in caught.value.message
    assert isinstance(caught.value, ApiError) and caught.value.status_code == 400


def test_public_addresses_pass_the_check():
    egress.check_url("https://8.8.8.8/hook")
    egress.check_url("https://[2606:4700:4700::1111]/hook")


def test_names_are_checked_after_dns_resolution():
    with pytest.raises(egress.EgressBlocked, match=r"localhost: 127\.0\.0\.1 is a loopback address"):
        egress.check_url("http://localhost:8080/hook")


def test_unresolvable_names_and_bad_urls_are_refused():
    with pytest.raises(egress.EgressBlocked, match="does not resolve"):
        egress.check_url("http://no-such-host.invalid/hook")
    for url in ("ftp://8.8.8.8/x", "http://user:pw@8.8.8.8/x", "not a url"):
        with pytest.raises(egress.EgressBlocked):
            egress.check_url(url)


def test_saving_refuses_what_every_request_refuses_but_only_warns_about_a_name_that_does_not_resolve():
    # The save-time check is the request check: same verdict, same reason.
    with pytest.raises(egress.EgressBlocked) as caught:
        egress.check_url("http://localhost:9/hook")
    assert egress.destination_problem("http://localhost:9/hook") == caught.value.message
    with pytest.raises(ApiError) as refused:
        egress.validate_destination("http://localhost:9/hook", field="toolUrl")
    assert (refused.value.status_code, refused.value.issues) == (400, {"toolUrl": [caught.value.message]})
    assert egress.destination_warning("http://localhost:9/hook") is None  # refused, not warned about

    # A name that does not resolve: every request is refused, saving is not (it may resolve later).
    with pytest.raises(egress.EgressBlocked, match="does not resolve"):
        egress.check_url("http://no-such-host.invalid/hook")
    assert egress.destination_problem("http://no-such-host.invalid/hook") is None
    egress.validate_destination("http://no-such-host.invalid/hook", field="toolUrl")
    assert egress.destination_warning("http://no-such-host.invalid/hook") == (
        "no-such-host.invalid does not resolve right now: requests to it are refused until it does "
        "(check the host name)."
    )

    assert egress.destination_problem("https://8.8.8.8/hook") is None
    assert egress.destination_warning("https://8.8.8.8/hook") is None
    egress.validate_destination(None, field="serverUrl")  # no URL, nothing to check


def test_listed_networks_are_allowed(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["10.0.0.0/8", "fd00::/8"]
    egress.check_url("http://10.9.8.7/hook")
    egress.check_url("http://[fd00:ec2::254]/hook")
    with pytest.raises(egress.EgressBlocked):
        egress.check_url("http://192.168.0.1/hook")


async def test_loopback_is_refused_by_default(server):
    with pytest.raises(egress.EgressBlocked, match="loopback"):
        await egress.send("GET", f"{server}/echo", timeout_s=5)


async def test_loopback_is_reachable_when_listed(server, allow_loopback):
    response = await egress.send("GET", f"{server}/echo", headers={"X-Test": "yes"}, timeout_s=5)
    assert response.status_code == 200
    assert response.json()["x"] == "yes"

    response = await egress.send("POST", f"{server}/post", json={"a": 1}, timeout_s=5)
    assert response.json() == {"got": {"a": 1}}


async def test_it_connects_to_the_checked_address_and_keeps_the_host_name(server, allow_loopback, monkeypatch):
    # A name only the guard's resolver knows: if anything resolved it again (DNS rebinding window),
    # the request would fail; it reaches the checked address with the original Host header.
    port = int(server.rsplit(":", 1)[1])

    async def resolver(host, port_, **kwargs):
        assert host == "tools.example.test"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port_))]

    monkeypatch.setattr(egress.anyio, "getaddrinfo", resolver)
    response = await egress.send("GET", f"http://tools.example.test:{port}/echo", timeout_s=5)
    assert response.json()["host"] == f"tools.example.test:{port}"


async def test_a_name_with_any_refused_address_is_refused(monkeypatch):
    async def resolver(host, port, **kwargs):
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("8.8.8.8", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.5", port)),
        ]

    monkeypatch.setattr(egress.anyio, "getaddrinfo", resolver)
    with pytest.raises(egress.EgressBlocked, match=r"10\.0\.0\.5 is a private address"):
        await egress.send("GET", "http://mixed.example.test/hook", timeout_s=5)


async def test_redirects_are_checked_on_every_hop(server, allow_loopback):
    with pytest.raises(egress.EgressBlocked, match=r"10\.20\.30\.40 is a private address"):
        await egress.send("GET", f"{server}/to-private", timeout_s=5)
    with pytest.raises(egress.EgressBlocked, match="link-local"):
        await egress.send("GET", f"{server}/to-metadata", timeout_s=5)
    followed = await egress.send("GET", f"{server}/to-echo", headers={"X-Test": "kept"}, timeout_s=5)
    assert followed.status_code == 200 and followed.json()["x"] == "kept"  # same origin: headers kept
    with pytest.raises(httpx.TooManyRedirects):
        await egress.send("GET", f"{server}/loop", timeout_s=5)


async def test_the_callers_headers_do_not_follow_a_redirect_to_another_origin(server, allow_loopback, monkeypatch):
    async def resolver(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(egress.anyio, "getaddrinfo", resolver)
    response = await egress.send("GET", f"{server}/to-other-origin", headers={"X-Test": "api-key"}, timeout_s=5)
    assert response.status_code == 200
    assert response.json()["host"].startswith("other.example.test:")
    assert response.json()["x"] is None


async def test_the_callers_timeout_is_applied(server, allow_loopback):
    with pytest.raises(egress.EgressTimeout) as caught:
        await egress.send("GET", f"{server}/hang", timeout_s=0.3)
    assert isinstance(caught.value, httpx.TimeoutException)


def test_the_sync_twin_applies_the_same_rules(server, allow_loopback, settings):
    assert egress.send_sync("GET", f"{server}/gzip", timeout_s=5).json() == {"zipped": True}
    with pytest.raises(egress.EgressTimeout):
        egress.send_sync("GET", f"{server}/hang", timeout_s=0.3)
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    with pytest.raises(egress.EgressBlocked):
        egress.send_sync("GET", f"{server}/echo", timeout_s=5)


async def test_oversized_responses_are_cut_off(server, allow_loopback):
    with pytest.raises(egress.EgressTooLarge):
        await egress.send("GET", f"{server}/big", timeout_s=5, max_response_bytes=1000)
    assert len((await egress.send("GET", f"{server}/big", timeout_s=5)).content) == 5000


async def test_the_mcp_client_is_guarded(server, settings):
    async with egress.mcp_http_client(timeout_s=5) as client:
        with pytest.raises(egress.EgressBlocked):
            await client.get(f"{server}/echo")
        settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
        response = await client.get(f"{server}/echo")
        assert response.status_code == 200


def _tls_material(tmp_path):
    """A throwaway CA and a server certificate for tls.example.test (cryptography, no network)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject, issuer, public_key, signing_key, *, ca, names=()):
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), False)
        return builder.sign(signing_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate("Test CA", "Test CA", ca_key.public_key(), ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = certificate("tls.example.test", "Test CA", key.public_key(), ca_key, ca=False, names=["tls.example.test"])
    pem = serialization.Encoding.PEM
    (tmp_path / "ca.pem").write_bytes(ca.public_bytes(pem))
    (tmp_path / "server.pem").write_bytes(
        cert.public_bytes(pem) + key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return tmp_path / "ca.pem", tmp_path / "server.pem"


async def test_https_to_a_pinned_address_still_verifies_the_certificate_for_the_name(
    tmp_path, allow_loopback, monkeypatch, settings
):
    import ssl

    ca_file, server_file = _tls_material(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(server_file)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"release": threading.Event()}))
    httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]

    async def resolver(host, port_, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port_))]

    monkeypatch.setattr(egress.anyio, "getaddrinfo", resolver)
    settings.OUTBOUND_CA_FILE = str(ca_file)  # the test's own CA, trusted besides the system's bundle
    try:
        response = await egress.send("GET", f"https://tls.example.test:{port}/echo", timeout_s=5)
        assert response.json()["host"] == f"tls.example.test:{port}"
        # The certificate is checked against the name asked for, not the pinned address.
        with pytest.raises(httpx.ConnectError, match=r"CERTIFICATE_VERIFY_FAILED|certificate"):
            await egress.send("GET", f"https://other.example.test:{port}/echo", timeout_s=5)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


# The guard's own table (IANA special-purpose registries): what the interpreter's `ipaddress` got wrong
# on some patch releases (192.0.0.0/24 counted as global on Python 3.11.7) and the blocks it never knew.
@pytest.mark.parametrize(
    "address",
    [
        "192.0.0.192",  # Oracle Cloud metadata
        "192.0.0.1",
        "192.0.0.9",  # PCP anycast: globally reachable per IANA, refused with the whole /24
        "192.0.0.170",  # NAT64 discovery
        "192.0.0.255",
        "192.0.2.10",  # documentation
        "198.51.100.7",
        "203.0.113.9",
        "198.18.0.1",  # benchmarking
        "198.19.255.254",
        "192.88.99.1",  # deprecated 6to4 relay anycast
        "255.255.255.255",
        "0.1.2.3",
        "100.64.0.1",
        "2001:db8::1",  # documentation
        "3fff::1",  # documentation (RFC 9637)
        "2001:2::1",  # benchmarking
        "2001::1",  # Teredo
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo wrapping a public address
        "100::1",  # discard-only
        "64:ff9b:1::a00:1",  # local-use translation
        "5f00::1",  # SRv6
        "fec0::1",  # deprecated site-local
        "::8.8.8.8",  # deprecated IPv4-compatible, outside 2000::/3
        "4000::1",  # reserved by the IETF, outside 2000::/3
        "::ffff:192.0.0.192",  # IPv4-mapped metadata address
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "64:ff9b::c000:c0",  # NAT64 of 192.0.0.192
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "64:ff9b::c0a8:101",  # NAT64 of 192.168.1.1
        "2002:c000:c0::1",  # 6to4 of 192.0.0.192
        "2002:a00:1::1",  # 6to4 of 10.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
    ],
)
def test_it_refuses_every_block_that_is_not_globally_reachable(address):
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(egress.EgressBlocked) as caught:
        egress.check_url(f"http://{host}/hook")
    assert "public" in caught.value.message


@pytest.mark.parametrize(
    "address",
    [
        "192.0.1.1",  # just past 192.0.0.0/24
        "1.1.1.1",
        "100.128.0.1",  # just past the shared block
        "::ffff:8.8.8.8",  # IPv4-mapped public address
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8
        "2002:808:808::1",  # 6to4 of 8.8.8.8
        "2a00:1450:4001:80b::200e",
    ],
)
def test_globally_reachable_addresses_pass(address):
    host = f"[{address}]" if ":" in address else address
    egress.check_url(f"http://{host}/hook")


def test_a_listed_network_also_opens_its_ipv6_forms(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["192.0.0.0/24"]
    egress.check_url("http://192.0.0.192/hook")
    egress.check_url("http://[::ffff:192.0.0.192]/hook")
    egress.check_url("http://[64:ff9b::c000:c0]/hook")
    with pytest.raises(egress.EgressBlocked):
        egress.check_url("http://[64:ff9b::a00:1]/hook")


def test_the_table_does_not_depend_on_the_interpreter(monkeypatch):
    # Whatever this Python's ipaddress module believes, the guard answers from its own table.
    import ipaddress

    monkeypatch.setattr(ipaddress.IPv4Address, "is_global", property(lambda self: True))
    monkeypatch.setattr(ipaddress.IPv4Address, "is_private", property(lambda self: False))
    with pytest.raises(egress.EgressBlocked, match=r"192\.0\.0\.192"):
        egress.check_url("http://192.0.0.192/latest/meta-data/")


async def test_a_redirect_to_the_metadata_address_is_refused(server, allow_loopback):
    # Through a real exchange: the first hop (loopback, allowed) redirects to 192.0.0.192.
    with pytest.raises(egress.EgressBlocked, match=r"192\.0\.0\.192"):
        await egress.send("GET", f"{server}/to-oracle-metadata", timeout_s=5)


def _other_origin_on_loopback(monkeypatch):
    async def resolver(host, port, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))]

    monkeypatch.setattr(egress.anyio, "getaddrinfo", resolver)


@pytest.mark.parametrize("status", [307, 308])
async def test_a_body_is_sent_again_only_within_its_origin(server, allow_loopback, monkeypatch, status):
    _other_origin_on_loopback(monkeypatch)
    signed = {"X-Test": "sha256=signature"}
    same = await egress.send(
        "POST", f"{server}/post-redirect/{status}/same", headers=signed, json={"a": 1}, timeout_s=5
    )
    assert same.status_code == 200 and same.json() == {"got": {"a": 1}, "path": "/echo-post", "x": "sha256=signature"}
    # To another origin the body (signed tool arguments, a token request's credentials) is not sent again:
    # the redirect itself is the answer.
    other = await egress.send(
        "POST", f"{server}/post-redirect/{status}/other", headers=signed, json={"a": 1}, timeout_s=5
    )
    assert other.status_code == status and other.headers["location"].startswith("http://other.example.test:")


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
async def test_call_events_follow_only_a_same_origin_307_or_308(server, allow_loopback, monkeypatch, status):
    _other_origin_on_loopback(monkeypatch)
    same = await egress.send(
        "POST", f"{server}/post-redirect/{status}/same", json={"a": 1}, timeout_s=5, redirects="same_request"
    )
    if status in (307, 308):
        assert same.status_code == 200 and same.json()["got"] == {"a": 1}
    else:  # followed, it would be a GET without the body
        assert same.status_code == status and same.headers["location"].endswith("/echo-post")
    other = await egress.send(
        "POST", f"{server}/post-redirect/{status}/other", json={"a": 1}, timeout_s=5, redirects="same_request"
    )
    assert other.status_code == status


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://a\u200b.example/hook", "Invalid IDNA hostname"),
        ("http://a..b.example/hook", "empty label"),
        (f"http://{'a' * 64}.example/hook", "longer than 63"),
    ],
)
def test_a_url_the_http_client_cannot_encode_is_refused_before_any_request(url, reason):
    with pytest.raises(egress.EgressBlocked, match=reason) as caught:
        egress.send_sync("POST", url, content=b"{}", timeout_s=5)
    assert caught.value.message.startswith("Refused outbound URL: The HTTP client cannot encode this URL")
    assert "\n" not in caught.value.message
    with pytest.raises(ApiError, match=reason):
        egress.validate_destination(url, field="url")


@pytest.mark.parametrize("url", ["https://münchen.example/hook", "http://a_b.example/x", "http://[2606:4700::1]:8080/"])
def test_urls_the_http_client_encodes_are_accepted(url):
    assert url_problem(url) is None
