"""``python -m sda.orchestration.certs``: the compose deployment's TLS certificates and Spark Connect token, made at
its first start when none are given (the ``certs-init`` service of docker-compose.yaml).

    python -m sda.orchestration.certs --out DIR --dns NAME[,NAME...] --ip ADDR[,ADDR...] [--postgres-uid UID]

Into ``DIR`` (each file written only when it is missing, so certificates and a token of your own, put there first,
are kept; docs/deployment.md, "Bring your own"):

* ``ca.crt`` / ``ca.key`` -- a private certificate authority (EC P-256, 10 years), the one root every client trusts;
* ``server.crt`` / ``server.key`` -- one server certificate signed by it for every service that terminates TLS
  (the Spark Connect proxy, PostgreSQL, the API server), with a subject alternative name for each ``--dns`` name
  and ``--ip`` address clients use (2 years);
* ``postgres.key`` -- the same key, owned by ``--postgres-uid`` with mode 0600, as PostgreSQL requires of its key;
* ``connect.token`` -- the Spark Connect server's pre-shared bearer token (32 random bytes, URL-safe).

Private keys are 0640, readable by group 0, the group every service of the deployment runs with; the CA's key
is 0600. A bad argument exits with status 2 and says which.
"""

from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import os
import secrets
import sys
from pathlib import Path

CA_DAYS, SERVER_DAYS = 3650, 730


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _load(path: Path, kind: str):
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    data = path.read_bytes()
    return x509.load_pem_x509_certificate(data) if kind == "cert" else serialization.load_pem_private_key(data, None)


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _certificate(subject: str, key, issuer_name, issuer_key, days: int, ca: bool, sans: list | None = None):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = dt.datetime.now(dt.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name or name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                                        critical=True)
    else:
        builder = (builder.add_extension(x509.SubjectAlternativeName(sans or []), critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False))
    return builder.sign(issuer_key, hashes.SHA256())


def ensure(out: Path, dns: list[str], ips: list[str], postgres_uid: int | None = None) -> list[str]:
    """Make what is missing in ``out``; returns the names of the files made."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    out.mkdir(parents=True, exist_ok=True)
    made = []
    if not (out / "ca.crt").is_file():
        key = _key()
        cert = _certificate("sda-fusion deployment CA", key, None, key, CA_DAYS, ca=True)
        _write(out / "ca.key", _pem_key(key), 0o600)
        _write(out / "ca.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        made += ["ca.key", "ca.crt"]
    if not (out / "server.crt").is_file():
        ca_cert, ca_key = _load(out / "ca.crt", "cert"), _load(out / "ca.key", "key")
        key = _key()
        sans = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
        cert = _certificate(dns[0] if dns else ips[0], key, ca_cert.subject, ca_key, SERVER_DAYS, ca=False, sans=sans)
        _write(out / "server.key", _pem_key(key), 0o640)
        _write(out / "server.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
        made += ["server.key", "server.crt"]
    if postgres_uid is not None and not (out / "postgres.key").is_file():
        _write(out / "postgres.key", (out / "server.key").read_bytes(), 0o600)
        os.chown(out / "postgres.key", postgres_uid, postgres_uid)
        made.append("postgres.key")
    if not (out / "connect.token").is_file():
        _write(out / "connect.token", (secrets.token_urlsafe(32) + "\n").encode(), 0o640)
        made.append("connect.token")
    for name in ("server.key", "connect.token"):  # group 0: the deployment's services
        if os.geteuid() == 0:
            os.chown(out / name, 0, 0)
    return made


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.split(",") if n.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m sda.orchestration.certs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="directory of the certificates and the token")
    parser.add_argument("--dns", type=_names, default=[], help="DNS names of the server certificate, comma-separated")
    parser.add_argument("--ip", type=_names, default=[], help="IP addresses of the server certificate, comma-separated")
    parser.add_argument("--postgres-uid", type=int, default=None, help="owner of postgres.key (PostgreSQL's user)")
    args = parser.parse_args(argv)
    if not args.dns and not args.ip:
        parser.error("give the names clients use: --dns and/or --ip")
    for address in args.ip:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            parser.error(f"--ip {address!r} is not an IP address")
    made = ensure(args.out, args.dns, args.ip, args.postgres_uid)
    print(f"certs: {', '.join(made) if made else 'nothing to make'} in {args.out}")


if __name__ == "__main__":
    main(sys.argv[1:])
