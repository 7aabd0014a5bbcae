"""Example operations that show a newcomer a working service."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from pydantic import Field

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


class Directory:
    """A stand-in for a user directory that honours an Idempotency-Key: a call repeated
    with a key it has seen does nothing more."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.accounts: set[str] = set()
        self.seen: set[str] = set()  # idempotency keys of the calls that took effect

    def create(self, email: str, *, idempotency_key: str) -> None:
        """Create the account ``email`` once per key."""
        with self._lock:
            if idempotency_key not in self.seen:
                self.seen.add(idempotency_key)
                self.accounts.add(email)

    def delete(self, email: str, *, idempotency_key: str) -> None:
        """Delete the account ``email`` once per key."""
        with self._lock:
            if idempotency_key not in self.seen:
                self.seen.add(idempotency_key)
                self.accounts.discard(email)


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

    directory = Directory()  # the downstream system (one per process in this example)

    async def process_row(self, row: UserRow, metadata: ImportMeta) -> None:
        """Pretend to create the account; fail recognisably for blocked addresses."""
        if row.email.endswith(BLOCKED_DOMAIN):
            raise RuntimeError(f"Mail server rejected {row.email}: domain is blocked")
        self.directory.create(row.email, idempotency_key=bo.current_row().idempotency_key)

    # --8<-- [start:undo]
    async def undo_row(self, row: UserRow, metadata: ImportMeta) -> None:
        """Delete the account the row created (``POST /api/bulks/{id}/undo``)."""
        key = bo.current_row().idempotency_key  # the undo operation's: once per row
        self.directory.delete(row.email, idempotency_key=key)

    # --8<-- [end:undo]


class OnboardingMeta(bo.Metadata):
    """Who starts the onboarding."""

    requested_by: str


class Employee(bo.Row):
    """One new employee and the manager who approves their access."""

    name: str
    email: str
    manager: str

    def row_id(self) -> str | None:
        """Employees are known by their email address."""
        return self.email


LAPTOP_DELIVERY_SECONDS = 3.0


@bo.operation(
    "onboard-employees",
    description="Create an account, wait for the manager's approval, provision a laptop, "
    "send a welcome email",
    retryable=True,
    track_row_data=True,
)
class OnboardEmployees(bo.PipelineOperation[OnboardingMeta, Employee]):
    """A pipeline with a plain step, a signal step, a polling step and a final step that
    operation retry skips."""

    def __init__(self) -> None:
        self._laptops_ordered: dict[str, float] = {}

    @bo.step("Create account", order=1, max_retries=2)
    async def create_account(self, row: Employee, metadata: OnboardingMeta) -> None:
        """Pretend to create the directory account."""

    # --8<-- [start:undo_step]
    @bo.undo_step("Create account")
    async def delete_account(self, row: Employee, metadata: OnboardingMeta) -> None:
        """Pretend to delete the account again: undoing the onboarding runs this for each
        row that created one (the other steps define no undo)."""
        assert bo.current_row().undo  # and step_name == "Create account"

    # --8<-- [end:undo_step]

    @bo.signal_step(
        "Manager approval",
        order=2,
        timeout=timedelta(minutes=30),
        key=lambda row, metadata: row.manager,
    )
    async def request_approval(self, row: Employee, metadata: OnboardingMeta) -> None:
        """Ask the manager; the row waits until POST /api/bulks/{id}/signal/{manager}."""

    # --8<-- [start:polling]
    @bo.polling_step(
        "Provision laptop",
        order=3,
        poll_interval=timedelta(seconds=1),
        timeout=timedelta(minutes=10),
    )
    async def order_laptop(self, row: Employee, metadata: OnboardingMeta) -> None:
        """Order a laptop; delivery takes a few seconds."""
        self._laptops_ordered[row.email] = time.monotonic()

    @order_laptop.check
    async def laptop_delivered(self, row: Employee, metadata: OnboardingMeta) -> bool:
        """True once the laptop has arrived."""
        ordered = self._laptops_ordered.setdefault(row.email, time.monotonic())
        return time.monotonic() - ordered >= LAPTOP_DELIVERY_SECONDS

    # --8<-- [end:polling]

    @bo.step("Welcome email", order=4, allow_operation_retry=False)
    def send_welcome(self, row: Employee, metadata: OnboardingMeta) -> None:
        """Send the welcome email (a plain def runs in a worker thread)."""


class PaymentProvider:
    """A stand-in for a payment API that honours an Idempotency-Key, as Stripe's does: a
    charge repeated with a key it has seen returns the first charge and charges nothing."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # rows may call from several worker threads
        self.charges: dict[str, tuple[str, int]] = {}  # idempotency key -> (customer, cents)

    def charge(self, customer: str, amount_cents: int, *, idempotency_key: str) -> str:
        """Charge ``customer`` once per key; returns the charge's id (the key)."""
        with self._lock:
            self.charges.setdefault(idempotency_key, (customer, amount_cents))
        return idempotency_key


class BillingMeta(bo.Metadata):
    """What the charges are for."""

    description: str | None = None


class ChargeRow(bo.Row):
    """One customer to charge."""

    customer: str
    amount_cents: int = Field(gt=0)


@bo.operation(
    "charge-customers",
    description="Charge each customer of a file once, even when a row runs again",
    retryable=True,
    track_row_data=True,
)
class ChargeCustomers(bo.RowOperation[BillingMeta, ChargeRow]):
    """Passes the row's idempotency key to the payment call.

    A row may run more than once (a worker that dies before its finished rows are stored,
    a retry of failed rows): the key is the same for every run of the row, so the provider
    charges it once.
    """

    provider = PaymentProvider()  # the downstream system (one per process in this example)

    async def process_row(self, row: ChargeRow, metadata: BillingMeta) -> None:
        """Charge the customer under the row's idempotency key."""
        key = bo.current_row().idempotency_key
        self.provider.charge(row.customer, row.amount_cents, idempotency_key=key)
