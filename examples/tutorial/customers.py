"""The tutorial's operation: invite customers, wait for each to confirm, welcome them.

Serve it with ``bulkops serve --operations examples/tutorial/customers.py``; the tutorial
of the documentation site builds it step by step.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from pydantic import Field

import bulkops as bo

log = logging.getLogger("tutorial")

PLANS = ("free", "team", "enterprise")


# --8<-- [start:models]
class InviteMeta(bo.Metadata):
    """What every row of one upload shares: sent as the metadata JSON object."""

    campaign: str  # JSON key "campaign", required
    sender_name: str = "The bulkops team"  # JSON key "senderName", optional


class Customer(bo.Row):
    """One line of the uploaded file; a CSV column matches a field's alias, else its name."""

    email: str
    name: str
    plan: str = "free"
    seats: int = Field(default=1, ge=1)

    def row_id(self) -> str | None:
        """The business key shown beside the row number."""
        return self.email


# --8<-- [end:models]


class Crm:
    """Stands in for the customer system the first step calls."""

    def __init__(self) -> None:
        self.accounts: dict[str, str] = {}

    async def create_account(self, email: str, plan: str, *, idempotency_key: str) -> None:
        """Create an account; the same key twice creates it once."""
        self.accounts.setdefault(idempotency_key, email)


# --8<-- [start:operation]
@bo.operation(
    "invite-customers",
    description="Create each customer's account, wait for them to confirm, welcome them",
    retryable=True,
    track_row_data=True,
)
class InviteCustomers(bo.PipelineOperation[InviteMeta, Customer]):
    """Three steps per row; the second waits for the customer's confirmation."""

    def __init__(self) -> None:
        self.crm = Crm()

    async def validate_row(self, row: Customer, metadata: InviteMeta) -> None:
        """Refuse rows no step could handle, before any step runs."""
        if "@" not in row.email or "." not in row.email.partition("@")[2]:
            raise bo.ValidationError(f"Invalid email address {row.email!r}")
        if row.plan not in PLANS:
            raise bo.ValidationError(f"Unknown plan {row.plan!r}: use {', '.join(PLANS)}")
        if row.plan == "free" and row.seats > 1:
            raise bo.ValidationError("The free plan has one seat")

    # --8<-- [end:operation]

    # --8<-- [start:steps]
    @bo.step("Create account", order=1, max_retries=2)
    async def create_account(self, row: Customer, metadata: InviteMeta) -> None:
        """Call the CRM; the row's idempotency key makes a repeated call harmless."""
        key = bo.current_row().idempotency_key
        await self.crm.create_account(row.email, row.plan, idempotency_key=key)

    @bo.signal_step(
        "Confirm email",
        order=2,
        timeout=timedelta(days=2),
        key=lambda row, metadata: row.email,
    )
    async def send_confirmation(self, row: Customer, metadata: InviteMeta) -> None:
        """Send the confirmation link; the row waits until the link's signal arrives."""
        log.info("Confirmation link sent to %s for %s", row.email, metadata.campaign)

    @bo.step("Welcome", order=3)
    def welcome(self, row: Customer, metadata: InviteMeta) -> None:
        """A plain ``def`` runs in a worker thread."""
        log.info("Welcome, %s, from %s", row.name, metadata.sender_name)


# --8<-- [end:steps]
