"""Fixtures shared by the loader's tests: a real S3-compatible server (moto) for remote inputs."""

from .s3server import s3_server  # noqa: F401  (a fixture: pytest finds it here)
