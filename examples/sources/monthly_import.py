"""Import a supplier's monthly export from where it already lives, with the column mapping
saved the first month, and without importing the same file twice."""

from __future__ import annotations

from uuid import UUID

from bulkops.client import ApiError, AsyncClient


async def save_supplier_mapping(client: AsyncClient, operation: str) -> None:
    """Once: the supplier's column names -> the operation's columns, saved as "acme"."""
    await client.save_operation_mapping(operation, "acme", {"Full Name": "name", "E-Mail": "email"})


async def import_monthly(client: AsyncClient, operation: str, source_url: str) -> UUID | None:
    """Every month: check the file, skip it when it was imported already, else import it.

    Returns the new operation's id, or None when the file is a duplicate.
    """
    metadata = {"requestedBy": "monthly-import"}
    checked = await client.validate_bulk(
        operation, metadata=metadata, source_url=source_url, mapping="acme"
    )
    if not checked.valid:
        raise ValueError(checked.metadata_errors + checked.file_errors)
    if checked.duplicate_of is not None:
        print(f"Already imported as {checked.duplicate_of}")
        return None
    try:
        # rejectDuplicate closes the gap between the check and the create.
        return await client.submit(
            operation,
            None,
            metadata,
            source_url=source_url,
            mapping="acme",
            reject_duplicate=True,
        )
    except ApiError as exc:
        if exc.status_code == 409:  # another run imported it meanwhile
            return None
        raise
