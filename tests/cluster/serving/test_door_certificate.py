"""herd's own certificate for the front door's HTTPS (#34 item 8): made once, the private key
owner-only, valid for the LAN addresses, ``hostname.local`` and localhost, made again (same key)
when the addresses change, and a clear error for an unusable key file."""

from __future__ import annotations

import ipaddress
import os
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from gui.cluster.serving.door_certificate import (
    CERT_FILE,
    KEY_FILE,
    DoorCertificateError,
    certificate_names,
    door_certificate,
)


def sans(path) -> set[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(ip) for ip in san.get_values_for_type(x509.IPAddress)} | set(san.get_values_for_type(x509.DNSName))


def public_key_bytes(path) -> bytes:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    return key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def test_made_once_with_the_private_key_owner_only_and_every_name(tmp_path):
    cert = door_certificate(["192.168.1.20", "10.0.0.7"], "den-pc.local", tmp_path)
    assert cert.key_path == tmp_path / KEY_FILE and cert.cert_path == tmp_path / CERT_FILE
    assert stat.S_IMODE(os.stat(cert.key_path).st_mode) == 0o600
    assert sans(cert.cert_path) == {"192.168.1.20", "10.0.0.7", "den-pc.local", "localhost", "127.0.0.1"}
    assert set(cert.names) == sans(cert.cert_path)
    # IP addresses are IP SANs (clients match an address only against those), names DNS ones.
    parsed = x509.load_pem_x509_certificate(cert.cert_path.read_bytes())
    ips = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.IPAddress)
    assert ipaddress.ip_address("192.168.1.20") in ips
    # The fingerprint is the SHA-256 of the DER certificate, shown as clients show it.
    import hashlib
    assert cert.fingerprint == hashlib.sha256(parsed.public_bytes(serialization.Encoding.DER)).hexdigest()
    assert cert.display_fingerprint.count(":") == 31 and cert.display_fingerprint.replace(":", "").lower() \
        == cert.fingerprint

    again = door_certificate(["10.0.0.7", "192.168.1.20"], "den-pc.local", tmp_path)
    assert again.fingerprint == cert.fingerprint  # same names: the same certificate, not a new one


def test_new_addresses_make_a_new_certificate_for_the_same_key(tmp_path):
    first = door_certificate(["192.168.1.20"], "den-pc.local", tmp_path)
    key_before = public_key_bytes(first.key_path)
    moved = door_certificate(["10.1.2.3"], "den-pc.local", tmp_path)
    assert moved.fingerprint != first.fingerprint
    assert "10.1.2.3" in sans(moved.cert_path) and "192.168.1.20" not in sans(moved.cert_path)
    assert public_key_bytes(moved.key_path) == key_before
    assert stat.S_IMODE(os.stat(moved.key_path).st_mode) == 0o600


def test_a_certificate_of_another_key_is_made_again(tmp_path):
    door_certificate(["192.168.1.20"], "den-pc.local", tmp_path)
    (tmp_path / KEY_FILE).unlink()  # a new key (the old one moved away): the old certificate no longer fits
    cert = door_certificate(["192.168.1.20"], "den-pc.local", tmp_path)
    parsed = x509.load_pem_x509_certificate(cert.cert_path.read_bytes())
    assert parsed.public_key().public_bytes(serialization.Encoding.DER,
                                            serialization.PublicFormat.SubjectPublicKeyInfo) \
        == public_key_bytes(cert.key_path)


def test_an_unusable_key_file_is_named_with_what_to_do(tmp_path):
    (tmp_path / KEY_FILE).write_text("not a key")
    with pytest.raises(DoorCertificateError) as err:
        door_certificate(["192.168.1.20"], "den-pc.local", tmp_path)
    message = str(err.value)
    assert str(tmp_path / KEY_FILE) in message and "move it away" in message
    assert "Traceback" not in message and "ValueError(" not in message


def test_names_are_sorted_without_repeats():
    assert certificate_names(["127.0.0.1", "10.0.0.2", ""], "pc.local") == ("10.0.0.2", "127.0.0.1", "localhost",
                                                                           "pc.local")
