"""Pipeline operations for the integration tests; they log every step they run."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import bulkops as bo

LOG: list[tuple[str, str]] = []
FLAKY: dict[str, int] = {}
CHECKS: dict[str, int] = {}


class HoldGate:
    """Holds the action of rows named hold* until a test releases it."""

    def __init__(self) -> None:
        self.event: asyncio.Event | None = None
        self.entered = 0

    def reset(self) -> None:
        self.event, self.entered = None, 0

    async def wait(self) -> None:
        self.event = self.event or asyncio.Event()
        self.entered += 1
        await self.event.wait()

    def open(self) -> None:
        self.event = self.event or asyncio.Event()
        self.event.set()


HOLD = HoldGate()


def reset() -> None:
    LOG.clear()
    FLAKY.clear()
    CHECKS.clear()
    HOLD.reset()


class Meta(bo.Metadata):
    pass


class Person(bo.Row):
    name: str
    approver: str = "mgr"


@bo.operation("onboard", description="Three plain steps")
class Onboard(bo.PipelineOperation[Meta, Person]):
    # Declared out of order on purpose: order decides.
    @bo.step("Validate account", order=2)
    async def check_account(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Validate account"))

    @bo.step("Create account", order=1, max_retries=2)
    def create(self, row: Person, metadata: Meta) -> None:  # plain def: runs in a thread
        LOG.append((row.name, "Create account"))
        if row.name == "broken":
            raise RuntimeError("directory is down")
        if FLAKY.get(row.name, 0) > 0:
            FLAKY[row.name] -= 1
            raise ConnectionError("try again")

    @bo.step("Notify", order=3, allow_operation_retry=False)
    async def notify(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Notify"))


def _approver(row: Person, metadata: Meta) -> str:
    return row.approver


@bo.operation("approval", description="Waits for a manager's signal")
class Approval(bo.PipelineOperation[Meta, Person]):
    @bo.step("Prepare", order=1)
    async def prepare(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Prepare"))

    @bo.signal_step("Approve", order=2, key=_approver, timeout=timedelta(seconds=30))
    async def ask(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Approve"))
        if row.name.startswith("hold"):
            await HOLD.wait()

    @bo.step("Finish", order=3)
    async def finish(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Finish"))


@bo.operation("approval-timeout", description="Gives up waiting quickly")
class ApprovalTimeout(bo.PipelineOperation[Meta, Person]):
    @bo.signal_step("Approve", key=_approver, timeout=timedelta(milliseconds=200))
    async def ask(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Approve"))

    @bo.step("Finish", order=1)
    async def finish(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Finish"))


@bo.operation("provision", description="Polls until ready")
class Provision(bo.PipelineOperation[Meta, Person]):
    @bo.polling_step(
        "Provision laptop",
        poll_interval=timedelta(milliseconds=20),
        timeout=timedelta(milliseconds=500),
    )
    async def order_laptop(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Provision laptop"))

    @order_laptop.check
    async def laptop_ready(self, row: Person, metadata: Meta) -> bool:
        CHECKS[row.name] = CHECKS.get(row.name, 0) + 1
        return not row.name.startswith("never") and CHECKS[row.name] >= 3


class Announce(bo.Step):
    name = "Announce"
    order = 5

    async def run(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Announce"))


class Archive(bo.Step):
    name = "Archive"
    order = 20

    def run(self, row: Person, metadata: Meta) -> None:  # type: ignore[override]
        LOG.append((row.name, "Archive"))


@bo.operation("object-steps", description="Steps as objects merged with methods")
class ObjectSteps(bo.PipelineOperation[Meta, Person]):
    def steps(self) -> list[bo.Step]:
        return [Archive(), Announce()]

    @bo.step("Register", order=10)
    async def register(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Register"))


@bo.operation(
    "approval-retry",
    description="A signal step that times out, retried",
    retryable=True,
    track_row_data=True,
)
class ApprovalRetry(bo.PipelineOperation[Meta, Person]):
    @bo.signal_step("Approve", order=1, key=_approver, timeout=timedelta(seconds=3))
    async def ask(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Approve"))

    @bo.step("Finish", order=2)
    async def finish(self, row: Person, metadata: Meta) -> None:
        LOG.append((row.name, "Finish"))


ALL = [Onboard, Approval, ApprovalTimeout, Provision, ObjectSteps, ApprovalRetry]
