"""Fixtures shared by every test layer."""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

POSTGRES_ENV = "BULKOPS_TEST_POSTGRES_URL"
HERE = Path(__file__).parent
# The layers whose tests start real processes (services, workers, a browser): under
# pytest-xdist (`make pytest`) they run one after another in one worker, as without it, while
# the other workers take the in-process tests.
PROCESS_LAYERS = (HERE / "e2e", HERE / "browser")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the tests that start processes in one xdist group (``--dist loadgroup``)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        path = Path(str(item.fspath))
        if any(layer in path.parents for layer in PROCESS_LAYERS):
            item.add_marker(pytest.mark.xdist_group("processes"))


@pytest.fixture(autouse=True)
def _clean_bulkops_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the caller's BULKOPS_* settings (the Postgres test URL aside)."""
    for name in list(os.environ):
        if name.startswith("BULKOPS_") and name != POSTGRES_ENV:
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """A command run in-process (``serve``, ``gateway``) configures the root logger with a
    handler on the stderr of its test runner; later tests must not log into that closed
    stream, so each test gets the root logger's handlers and level back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    httpx_level = logging.getLogger("httpx").level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(httpx_level)


def _admin_url() -> str:
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    return url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test run, dropped afterwards.

    Skips only when BULKOPS_TEST_POSTGRES_URL is unset; when it is set and the server is
    down the fixture errors, so CI fails instead of skipping.
    """
    import psycopg

    admin = _admin_url()
    name = f"bulkops_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = admin.rpartition("/")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def migrated_postgres_url(postgres_url: str) -> str:
    """The session's PostgreSQL database, migrated once."""
    from bulkops.storage.sql import migrate

    migrate(postgres_url)
    return postgres_url


@pytest.fixture
def empty_postgres_url(migrated_postgres_url: str) -> str:
    """The session's PostgreSQL database with every table emptied."""
    import psycopg

    with psycopg.connect(migrated_postgres_url, autocommit=True) as conn:
        conn.execute(TRUNCATE_ALL)
    return migrated_postgres_url


# Empties every table the migrations made (whatever later migrations add), keeping the
# schema version.
TRUNCATE_ALL = """
DO $$ DECLARE names text;
BEGIN
  SELECT string_agg(quote_ident(tablename), ', ') INTO names
  FROM pg_tables WHERE schemaname = current_schema() AND tablename <> 'alembic_version';
  EXECUTE 'TRUNCATE ' || names || ' RESTART IDENTITY CASCADE';
END $$
"""


S3_REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """A moto S3 server on a free loopback port, shared by the session."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def aws_env(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Fake credentials for moto, read by obstore and boto3 from the usual variables."""
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_ENDPOINT", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", S3_REGION)
    return moto_endpoint


@pytest.fixture
def s3_bucket(aws_env: str) -> str:
    """A fresh bucket on the moto server."""
    import boto3

    bucket = f"bulkops-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=aws_env, region_name=S3_REGION).create_bucket(Bucket=bucket)
    return bucket
