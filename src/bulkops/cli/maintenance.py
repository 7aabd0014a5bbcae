"""Commands that work on the configured database itself, not over HTTP."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import typer

from bulkops.cli.client.common import fail


def prune_events(older_than: float | None) -> None:
    """``bulkops events prune --older-than DAYS``: delete the events of the configured
    database (``BULKOPS_DATABASE_URL``) older than the given days."""
    if older_than is None or older_than < 0:
        raise fail("`bulkops events prune` needs --older-than DAYS (0 or more)")
    # Imported here: the client commands beside this one start without the serving side.
    from bulkops.clock import utcnow
    from bulkops.runtime import MEMORY_URL
    from bulkops.settings import Settings

    settings = Settings()
    if settings.database_url.startswith(MEMORY_URL):
        raise fail("In-memory storage keeps no events to prune")

    async def prune() -> int:
        from bulkops.storage.sql import Database, SqlEventStore

        database = Database.from_url(settings.database_url)
        try:
            return await SqlEventStore(database).prune(utcnow() - timedelta(days=older_than))
        finally:
            await database.close()

    removed = asyncio.run(prune())
    typer.echo(f"Removed {removed} events older than {older_than:g} days")
