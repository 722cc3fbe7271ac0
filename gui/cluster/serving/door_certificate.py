"""herd's own certificate for the front door's HTTPS (#34 item 8).

Over plain HTTP a device's key crosses the LAN in clear with every request: anyone on the same
Wi-Fi who reads the traffic can use the cluster with it. With HTTPS on, the front door serves TLS
with a certificate herd makes itself, once, in the user's config folder:

* the private key (ECDSA P-256, which every TLS client of phones and PCs accepts) is written
  owner-only (0600) and atomically, and is kept for good;
* the certificate is self-signed, with the master's LAN addresses, ``hostname.local`` and
  ``localhost`` (and 127.0.0.1) as its names (SANs), so a client that checks names accepts it
  for each of them. When the addresses change (another network, a new DHCP lease) the
  certificate is made again for the same key.

No certificate authority vouches for it: a client either pins it (its file as the only trusted
certificate, e.g. ``httpx.Client(verify="door-cert.pem")``) or the user compares its SHA-256
fingerprint, which the Share… dialog and ``herd up --https`` show, with what the client shows.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from agent.files import write_atomic
from agent.i18n import translate
from gui.cluster.nodes.records import config_dir

KEY_FILE = "door-key.pem"
CERT_FILE = "door-cert.pem"
#: How long a certificate is valid. Clients pin it rather than trust a CA, and it is made again
#: whenever the addresses change; a long life spares the user checking a new fingerprint.
VALID_DAYS = 10 * 365


class DoorCertificateError(RuntimeError):
    """The front door's key or certificate cannot be made or read; the message says which file
    and what to do."""


@dataclass(frozen=True)
class DoorCertificate:
    """The front door's key and certificate, as files (``ssl`` loads files).

    Attributes:
        key_path: the private key, PEM, owner-only (0600).
        cert_path: the certificate, PEM: the file a client pins.
        names: the host names and addresses it is valid for (its SANs), sorted.
        fingerprint: the SHA-256 of the certificate's DER bytes, lowercase hex.
    """

    key_path: Path
    cert_path: Path
    names: tuple[str, ...]
    fingerprint: str

    @property
    def display_fingerprint(self) -> str:
        """The fingerprint as clients and browsers show it: ``AB:12:…`` (32 hex pairs)."""
        fp = self.fingerprint.upper()
        return ":".join(fp[i:i + 2] for i in range(0, len(fp), 2))

    def server_context(self) -> ssl.SSLContext:
        """A TLS server context presenting this certificate (TLS 1.2 and up: some phone apps
        do not speak 1.3 yet)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_path, self.key_path)
        return ctx


def certificate_names(addresses, hostname: str) -> tuple[str, ...]:
    """The names the certificate is for: ``addresses`` (the master's LAN addresses), the mDNS
    ``hostname`` (``name.local``), ``localhost`` and 127.0.0.1 — sorted, without repeats."""
    return tuple(sorted({*addresses, hostname, "localhost", "127.0.0.1"} - {""}))


def _san(names) -> x509.SubjectAlternativeName:
    entries: list[x509.GeneralName] = []
    for name in names:
        try:
            entries.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            entries.append(x509.DNSName(name))
    return x509.SubjectAlternativeName(entries)


def _names_of(cert: x509.Certificate) -> tuple[str, ...]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return ()
    return tuple(sorted([str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
                        + san.get_values_for_type(x509.DNSName)))


def _new_cert(key: ec.EllipticCurvePrivateKey, names, hostname: str) -> x509.Certificate:
    public = key.public_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (hostname or "llama-herd")[:64]),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "llama-herd")])
    now = datetime.datetime.now(datetime.timezone.utc)
    key_id = x509.SubjectKeyIdentifier.from_public_key(public)
    # A self-signed server certificate (not a CA: pinning it must not let it vouch for others).
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(_san(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(key_id, critical=False)
            .sign(key, hashes.SHA256()))


def _load_or_make_key(key_path: Path) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except FileNotFoundError:
        key = ec.generate_private_key(ec.SECP256R1())
        write_atomic(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()), mode=0o600)
        return key
    except (ValueError, TypeError, OSError) as exc:
        raise DoorCertificateError(translate(
            "DoorCertificate", "{path} is not a usable private key ({why}); move it away and herd makes a new "
                               "one (apps that pinned the old certificate must then get the new one)").format(
            path=key_path, why=exc)) from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise DoorCertificateError(translate(
            "DoorCertificate", "{path} is not an EC private key; move it away and herd makes a new one").format(
            path=key_path))
    return key


def door_certificate(addresses, hostname: str, folder: Path | None = None) -> DoorCertificate:
    """The front door's certificate for ``addresses`` and ``hostname`` (see
    :func:`certificate_names`), made on first use in ``folder`` (the user's config folder by
    default). The key is kept; the certificate is made again when its names differ, or when it
    does not belong to the key (a half-finished earlier run). :class:`DoorCertificateError`
    (in words) when a file cannot be read or written."""
    folder = folder or config_dir()
    key_path, cert_path = folder / KEY_FILE, folder / CERT_FILE
    names = certificate_names(addresses, hostname)
    try:
        key = _load_or_make_key(key_path)
        cert = None
        try:
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        except (FileNotFoundError, ValueError):
            pass
        if (cert is None or cert.public_key().public_numbers() != key.public_key().public_numbers()
                or _names_of(cert) != names):
            cert = _new_cert(key, names, hostname)
            # Public (it is what clients pin), but written whole or not at all.
            write_atomic(cert_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    except OSError as exc:
        raise DoorCertificateError(translate(
            "DoorCertificate", "cannot write the front door's certificate in {folder} ({why}); check that the "
                               "folder is yours and not full").format(folder=folder, why=exc.strerror or exc)) from None
    der = cert.public_bytes(serialization.Encoding.DER)
    return DoorCertificate(key_path, cert_path, names, hashlib.sha256(der).hexdigest())
