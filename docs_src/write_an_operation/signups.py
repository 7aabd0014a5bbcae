"""Every hook of an operation, in one module (docs/guides/write-an-operation.md).

Run it (``python docs_src/write_an_operation/signups.py``) and it checks what the guide
says, through the real engine in memory.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field

import bulkops as bo
from bulkops.definition.registry import Registry
from bulkops.testing import run_operation_sync


# --8<-- [start:models]
class SignupMeta(bo.Metadata):
    campaign: str  # required: "campaign" in the metadata JSON
    sender_name: str = "The team"  # "senderName": camelCase on the wire
    max_seats: int = 100


class Signup(bo.Row):
    email: str = Field(alias="E-mail")  # the file's column is "E-mail"
    name: str
    seats: int = Field(default=1, ge=1)  # "0" or "many" fail the row (Validation)

    def row_id(self) -> str | None:
        return self.email  # shown as rowId beside the row number


# --8<-- [end:models]

SENT: list[str] = []


# --8<-- [start:row]
@bo.operation("import-signups", retryable=True, track_row_data=True)
class ImportSignups(bo.RowOperation[SignupMeta, Signup]):
    """Create one account per signup."""

    async def validate_metadata(self, metadata: SignupMeta) -> None:
        # Once per operation, after the create answered 201: a refusal ends it Failed.
        if not metadata.campaign.strip():
            raise bo.ValidationError("campaign must not be blank")

    async def validate_row(self, row: Signup, metadata: SignupMeta) -> None:
        # Every row, before any work: ValidationError fails the row as Validation.
        if "@" not in row.email:
            raise bo.ValidationError(f"Invalid email address {row.email!r}")
        if row.seats > metadata.max_seats:
            raise bo.ValidationError(f"At most {metadata.max_seats} seats")

    async def process_row(self, row: Signup, metadata: SignupMeta) -> None:
        # Any exception fails the row as Processing, its text the message.
        if row.email.endswith("@blocked.example"):
            raise RuntimeError("the mail server refused the address")
        SENT.append(bo.current_row().idempotency_key)


# --8<-- [end:row]


# --8<-- [start:batch]
@bo.operation("import-signups-in-batches", batch_size=50)
class ImportSignupsInBatches(bo.BatchOperation[SignupMeta, Signup]):
    async def process_batch(self, rows: list[Signup], metadata: SignupMeta) -> list[str | None]:
        # One call per 50 valid rows; one message per row (None: it succeeded).
        return [None if r.seats < 10 else "too many seats for a batch" for r in rows]


# --8<-- [end:batch]

DELIVERED: set[str] = set()


# --8<-- [start:pipeline]
@bo.operation("onboard-signups", retryable=True, track_row_data=True)
class OnboardSignups(bo.PipelineOperation[SignupMeta, Signup]):
    @bo.step("Create account", order=1, max_retries=2)
    async def create_account(
        self, row: Signup, metadata: SignupMeta
    ) -> None: ...  # raises after its retries: StepFailure

    @bo.signal_step(
        "Confirm email",
        order=2,
        key=lambda row, metadata: row.email,
        timeout=timedelta(days=2),  # no signal in time: Timeout
    )
    async def send_link(
        self, row: Signup, metadata: SignupMeta
    ) -> None: ...  # then the row waits for POST /api/bulks/{id}/signal/{email}

    @bo.polling_step(
        "Ship welcome pack",
        order=3,
        poll_interval=timedelta(seconds=30),
        timeout=timedelta(days=7),
    )
    async def ship(self, row: Signup, metadata: SignupMeta) -> None: ...  # starts the work

    @ship.check
    async def shipped(self, row: Signup, metadata: SignupMeta) -> bool:
        return row.email in DELIVERED  # True once done

    @bo.step("Say thanks", order=4, allow_operation_retry=False)
    def say_thanks(
        self, row: Signup, metadata: SignupMeta
    ) -> None: ...  # a plain def runs in a worker thread


# --8<-- [end:pipeline]


# --8<-- [start:objects]
class Audit(bo.Step):
    name = "Audit"
    order = 5

    async def run(self, row: Signup, metadata: SignupMeta) -> None: ...


@bo.operation("onboard-and-audit")
class OnboardAndAudit(OnboardSignups):
    def steps(self) -> list[bo.Step]:
        return [Audit()]  # merged with the decorated steps by order


# --8<-- [end:objects]

CSV = (
    "E-mail,name,seats\n"
    "ada@example.com,Ada,2\n"
    "bob-at-example,Bob,1\n"
    "ken@blocked.example,Ken,1\n"
    "cy@example.com,Cy,0\n"
)


def main() -> None:
    """What the guide promises, checked."""
    result = run_operation_sync(ImportSignups, CSV, metadata={"campaign": "spring"})
    failed = {row.row_number: (row.error_type, row.error_message) for row in result.failed_rows}
    assert failed[2] == (bo.ErrorType.VALIDATION, "Invalid email address 'bob-at-example'")
    assert failed[3][0] is bo.ErrorType.PROCESSING, failed[3]
    assert "the mail server refused the address" in str(failed[3][1])
    assert failed[4][0] is bo.ErrorType.VALIDATION and "seats" in str(failed[4][1])
    assert [row.row_id for row in result.rows][:1] == ["ada@example.com"]
    assert len(SENT) == 1

    blank = run_operation_sync(ImportSignups, CSV, metadata={"campaign": " "})
    assert blank.status is bo.OperationStatus.FAILED, blank.status

    mapped = run_operation_sync(
        ImportSignups,
        "mail,name\nann@example.com,Ann\n",
        metadata={"campaign": "spring"},
        column_map={"mail": "E-mail"},
    )
    assert mapped.status is bo.OperationStatus.COMPLETED, mapped.record

    batches = run_operation_sync(
        ImportSignupsInBatches,
        "E-mail,name,seats\na@x.com,A,1\nb@x.com,B,20\n",
        metadata={"campaign": "spring"},
    )
    assert [row.error_message for row in batches.failed_rows] == ["too many seats for a batch"]

    registry = Registry([ImportSignups, ImportSignupsInBatches, OnboardSignups, OnboardAndAudit])
    audited = registry.get("onboard-and-audit")
    assert audited is not None
    steps = [step.name for step in audited.steps]
    assert steps == ["Create account", "Confirm email", "Ship welcome pack", "Say thanks", "Audit"]


if __name__ == "__main__":
    main()
