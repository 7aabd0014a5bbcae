"""A step that passes its idempotency key downstream (docs/explanation/guarantees.md)."""

from __future__ import annotations

import bulkops as bo
from bulkops.testing import run_operation_sync


class Crm:
    """A stand-in for a CRM whose API takes an idempotency key."""

    def __init__(self) -> None:
        self.accounts: dict[str, str] = {}  # idempotency key -> email

    async def create_account(self, email: str, *, idempotency_key: str) -> None:
        """Create the account once per key: a repeat with the same key does nothing."""
        self.accounts.setdefault(idempotency_key, email)


crm = Crm()


class Person(bo.Row):
    email: str


@bo.operation("create-accounts")
class CreateAccounts(bo.PipelineOperation[bo.Metadata, Person]):
    # --8<-- [start:step]
    @bo.step("Create account", order=1, max_retries=2)
    async def create_account(self, row, metadata):
        await crm.create_account(row.email, idempotency_key=bo.current_row().idempotency_key)

    # --8<-- [end:step]


if __name__ == "__main__":
    result = run_operation_sync(CreateAccounts, "email\nada@example.com\nalan@example.com\n")
    assert result.status is bo.OperationStatus.COMPLETED, result.record
    assert sorted(crm.accounts.values()) == ["ada@example.com", "alan@example.com"]
    assert all(key.endswith(":0") for key in crm.accounts)  # operation:row:step index
