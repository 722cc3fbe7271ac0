"""Long-term identities (a key pair and a self-signed certificate per agent and per master) and
the TLS 1.3 contexts that pin them.

Every agent and every master owns one ECDSA P-256 key, created on first use and stored
owner-only (``write_atomic(..., mode=0o600)``), and a self-signed X.509 certificate for it.
Pairing (:mod:`agent.pairing`) swaps the two certificates inside the PIN-authenticated exchange;
from then on each side trusts exactly the other's certificate:

* the master verifies the agent's certificate against the pinned one as the only trust anchor
  (no CA, no host name: an address says nothing about who answers there);
* the agent asks every client for a certificate (:func:`server_context`); the handshake accepts
  only certificates of masters that paired, and each request checks the certificate's
  fingerprint against the pairings *now* (:func:`peer_fingerprint`), so an unpairing takes
  effect at once even though OpenSSL's trust store only grows.

A fingerprint is the SHA-256 of the certificate's DER bytes (hex); :func:`display_fingerprint`
groups its start for people to compare, the way Syncthing shows device ids.
"""

from __future__ import annotations

import datetime
import hashlib
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent.files import write_atomic

KEY_SUFFIX = "-key.pem"
CERT_SUFFIX = "-cert.pem"


class IdentityError(RuntimeError):
    """A key or certificate file is unusable; the message names it."""


def fingerprint_of_der(der: bytes) -> str:
    """The fingerprint of a DER certificate: SHA-256, lowercase hex."""
    return hashlib.sha256(der).hexdigest()


def der_of_pem(pem: bytes | str) -> bytes:
    """The DER bytes of a PEM certificate (IdentityError if it is not one)."""
    if isinstance(pem, str):
        pem = pem.encode("ascii", "replace")
    try:
        return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)
    except ValueError as exc:
        raise IdentityError(f"not a PEM certificate ({exc})") from None


def fingerprint_of_pem(pem: bytes | str) -> str:
    """The fingerprint of a PEM certificate."""
    return fingerprint_of_der(der_of_pem(pem))


def display_fingerprint(fp: str, groups: int = 8) -> str:
    """``ab12cd34…`` → ``AB12-CD34-…`` (the first ``groups`` groups of 4 hex digits)."""
    fp = fp.upper()
    return "-".join(fp[i:i + 4] for i in range(0, min(len(fp), 4 * groups), 4))


@dataclass(frozen=True)
class Identity:
    """One side's key pair and self-signed certificate, as files (``ssl`` loads files).

    Attributes:
        key_path, cert_path: the PEM files (the key owner-only).
        cert_pem: the certificate (public; what pairing sends the other side).
        fingerprint: its fingerprint.
    """

    key_path: Path
    cert_path: Path
    cert_pem: bytes
    fingerprint: str

    @property
    def cert_der(self) -> bytes:
        return der_of_pem(self.cert_pem)


def _new_cert(key: ec.EllipticCurvePrivateKey, common_name: str) -> x509.Certificate:
    # Every pinned certificate is its own trust anchor in one store, where OpenSSL finds a
    # certificate's issuer by subject name: two masters of the same name (two PCs called alike,
    # or a master whose key was made again) would shadow each other, and only the first would
    # get through. The key's own digest in the subject, and the key identifiers, keep each
    # certificate its own issuer.
    public = key.public_key()
    key_id = x509.SubjectKeyIdentifier.from_public_key(public)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name[:64] or "llama-herd"),
                      x509.NameAttribute(NameOID.SERIAL_NUMBER, key_id.digest.hex()[:32])])
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(public).serial_number(x509.random_serial_number())
            .add_extension(key_id, critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(key_id),
                           critical=False)
            # Pinned, never checked against a CA: the validity only has to outlast the pairing.
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=365 * 100))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))


def load_or_create(folder: Path, stem: str, common_name: str) -> Identity:
    """The identity ``folder/<stem>-key.pem`` + ``<stem>-cert.pem``, created on first use.

    The key is written first, owner-only and atomically, then the certificate; a certificate
    that does not belong to the key (a half-finished earlier run) is made again.
    """
    key_path, cert_path = folder / (stem + KEY_SUFFIX), folder / (stem + CERT_SUFFIX)
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except FileNotFoundError:
        key = ec.generate_private_key(ec.SECP256R1())
        write_atomic(key_path, key.private_bytes(serialization.Encoding.PEM,
                                                 serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), mode=0o600)
    except (ValueError, TypeError, OSError) as exc:
        raise IdentityError(f"{key_path}: unusable private key ({exc}); move it away to make a new "
                            "identity (every pairing must then be made again)") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise IdentityError(f"{key_path}: not an EC private key")
    cert = None
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        if cert.public_key().public_numbers() != key.public_key().public_numbers():
            cert = None
    except (FileNotFoundError, ValueError):
        cert = None
    if cert is None:
        cert = _new_cert(key, common_name)
        write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    return Identity(key_path, cert_path, pem, fingerprint_of_der(cert.public_bytes(serialization.Encoding.DER)))


def _tls13(ctx: ssl.SSLContext) -> ssl.SSLContext:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    return ctx


def server_context(identity: Identity, client_certs=(), *, require: bool = False) -> ssl.SSLContext:
    """A TLS 1.3 server context presenting ``identity`` and trusting ``client_certs`` (PEM).

    ``require``: a client without a certificate is refused in the handshake (the RPC relay);
    otherwise such a client may connect and reaches only the public endpoints (the API).
    More certificates can be trusted later with :func:`trust`.
    """
    ctx = _tls13(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    ctx.load_cert_chain(identity.cert_path, identity.key_path)
    ctx.verify_mode = ssl.CERT_REQUIRED if require else ssl.CERT_OPTIONAL
    for pem in client_certs:
        trust(ctx, pem)
    return ctx


def trust(ctx: ssl.SSLContext, pem: bytes | str) -> None:
    """Let handshakes on ``ctx`` accept the certificate ``pem`` from now on."""
    ctx.load_verify_locations(cadata=pem.decode("ascii") if isinstance(pem, bytes) else pem)


def client_context(identity: Identity | None = None, pinned: bytes | str | None = None) -> ssl.SSLContext:
    """A TLS 1.3 client context: presents ``identity`` (if any) and accepts only the server
    certificate ``pinned`` (PEM). Without ``pinned`` any server certificate is accepted — only
    for the public calls and the PAKE, whose result does not depend on who terminated TLS."""
    ctx = _tls13(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    ctx.check_hostname = False
    if pinned is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        trust(ctx, pinned)
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if identity is not None:
        ctx.load_cert_chain(identity.cert_path, identity.key_path)
    return ctx


def peer_fingerprint(ssl_object) -> str | None:
    """The fingerprint of the certificate the peer of ``ssl_object`` presented, or None."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    return fingerprint_of_der(der) if der else None
