"""A real S3-compatible server for the tests: moto's server mode on a free local port, with IAM on.

``s3_server`` (session scope; import it into a test module to use it) starts one
``ThreadedMotoServer`` per test process, whichever module asks first, and stops it when the
session ends. Objects are reached over HTTP through s3fs exactly as a real bucket would be.

Two IAM users exist: ``admin`` (everything) for putting objects, and ``reader`` (every S3 action
except ``GetObject`` on :data:`DENIED_KEY` in :data:`BUCKET`) for the loads under test. IAM
enforcement is switched on once the users exist, so a denied read is a real ``AccessDenied`` from
the server, not a mock.

moto's SigV4 check rebuilds the request from the query string as the server received it, where
``prefix=run/`` arrives unescaped, so every listing with a ``/`` in its prefix fails the signature
check (``SignatureDoesNotMatch``) although the client signed it correctly. The fixture re-escapes
the query before moto computes the signature (:func:`_escape_query`); the check itself still runs.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

#: the bucket the tests share, and the one object in it that ``reader`` may not read
BUCKET = "denpex-runs"
DENIED_KEY = "mixed/attempt_0/1/stderr.log"
REGION = "us-east-1"

_ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
_READER = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{BUCKET}/{DENIED_KEY}"},
    ],
}


@dataclass
class S3Server:
    endpoint: str
    keys: dict  # user -> (access key id, secret)

    def options(self, user: str = "reader") -> dict:
        """storage_options for denpex_nb.load (s3fs)."""
        key, secret = self.keys[user]
        return {"endpoint_url": self.endpoint, "key": key, "secret": secret, "client_kwargs": {"region_name": REGION}}

    def env(self, user: str = "reader") -> dict:
        """Environment variables that point the AWS SDK (and so the CLI) at this server."""
        key, secret = self.keys[user]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "DENPEX_STORAGE_OPTIONS"}
        env.update(
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ACCESS_KEY_ID=key,
            AWS_SECRET_ACCESS_KEY=secret,
            AWS_DEFAULT_REGION=REGION,
        )
        return env

    def client(self, user: str = "admin"):
        import boto3

        key, secret = self.keys[user]
        return boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=REGION, aws_access_key_id=key, aws_secret_access_key=secret
        )

    def put(self, key: str, body: bytes, bucket: str = BUCKET) -> None:
        self.client("admin").put_object(Bucket=bucket, Key=key, Body=body)

    def upload_folder(self, folder: Path, prefix: str, transform=None, bucket: str = BUCKET) -> list[str]:
        """Every file under ``folder`` to ``s3://bucket/prefix/<relative path>``; ``transform(rel,
        data) -> (rel, data)`` may rename or compress on the way. Returns the keys."""
        s3 = self.client("admin")
        keys = []
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel, data = path.relative_to(folder).as_posix(), path.read_bytes()
            if transform is not None:
                rel, data = transform(rel, data)
            key = f"{prefix.rstrip('/')}/{rel}"
            s3.put_object(Bucket=bucket, Key=key, Body=data)
            keys.append(key)
        return keys


def free_port() -> int:
    """A local TCP port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_lock = threading.Lock()
_shared: dict = {}


def _escape_query(original):
    from urllib.parse import quote, unquote

    def create(self):
        path, _, query = self._path.partition("?")
        if query:
            pairs = [p.partition("=") for p in query.split("&")]
            self._path = (
                path
                + "?"
                + "&".join(quote(unquote(k), safe="-_.~") + "=" + quote(unquote(v), safe="-_.~") for k, _, v in pairs)
            )
        return original(self)

    return create


def _start() -> tuple[S3Server, callable]:
    pytest.importorskip("s3fs")
    pytest.importorskip("boto3")
    server_mod = pytest.importorskip("moto.server")
    import boto3
    import moto.iam.access_control as access_control
    import requests

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    original = access_control.IAMRequestBase._create_aws_request
    access_control.IAMRequestBase._create_aws_request = _escape_query(original)
    try:
        boot = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="boot", aws_secret_access_key="boot")
        iam = boto3.client("iam", **boot)
        keys = {}
        for user, policy in (("admin", _ALLOW_ALL), ("reader", _READER)):
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="access", PolicyDocument=json.dumps(policy))
            k = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (k["AccessKeyId"], k["SecretAccessKey"])
        boto3.client("s3", **boot).create_bucket(Bucket=BUCKET)
        # from here on every request is authenticated and authorised against the users' policies
        requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0", timeout=10).raise_for_status()
    except BaseException:
        access_control.IAMRequestBase._create_aws_request = original
        server.stop()
        raise

    def stop() -> None:
        try:
            requests.post(f"{endpoint}/moto-api/reset-auth", data=b"inf", timeout=10)
        finally:
            access_control.IAMRequestBase._create_aws_request = original
            server.stop()

    return S3Server(endpoint, keys), stop


@pytest.fixture(scope="session")
def s3_server(request) -> S3Server:
    """The test process' S3 server (started on first use, stopped at the end of the session)."""
    with _lock:
        if "server" not in _shared:
            server, stop = _start()
            _shared["server"] = server
            request.session.config.add_cleanup(_stopper(stop))
    return _shared["server"]


def _stopper(stop):
    def cleanup() -> None:
        _shared.pop("server", None)
        stop()

    return cleanup
