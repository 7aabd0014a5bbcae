"""Example operations that show a newcomer a working service."""

from __future__ import annotations

import bulkops as bo

BLOCKED_DOMAIN = "@blocked.example"


class ImportMeta(bo.Metadata):
    """Who asked for the import, and for which department."""

    requested_by: str
    department: str | None = None


class UserRow(bo.Row):
    """One user account to create."""

    name: str
    email: str
    age: int | None = None

    def row_id(self) -> str | None:
        """Users are known by their email address."""
        return self.email


@bo.operation(
    "import-users",
    description="Create user accounts from a file of names and email addresses",
    retryable=True,
    track_row_data=True,
)
class ImportUsers(bo.RowOperation[ImportMeta, UserRow]):
    """Validates each email; the mail server 'rejects' addresses at blocked.example."""

    async def validate_row(self, row: UserRow, metadata: ImportMeta) -> None:
        """Reject rows without a plausible email address."""
        local, _, domain = row.email.partition("@")
        if not local or "." not in domain:
            raise bo.ValidationError(f"Invalid email address {row.email!r}")

    async def process_row(self, row: UserRow, metadata: ImportMeta) -> None:
        """Pretend to create the account; fail recognisably for blocked addresses."""
        if row.email.endswith(BLOCKED_DOMAIN):
            raise RuntimeError(f"Mail server rejected {row.email}: domain is blocked")
