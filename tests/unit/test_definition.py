"""The definition API: decorator, models, field descriptors, registry and loading."""

from __future__ import annotations

import textwrap
import uuid
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field

import bulkops as bo
from bulkops.definition import Registry, definition_of, load_registry
from bulkops.definition.conversion import convert
from bulkops.errors import DefinitionError
from bulkops.formats import FileFormat, read_rows


class Meta(bo.Metadata):
    requested_by: str
    department: str | None = None


class UserRow(bo.Row):
    name: str
    email: str = Field(alias="E-mail")
    age: int | None = None

    def row_id(self) -> str | None:
        return self.email


@bo.operation("import-users", description="Create users", retryable=True)
class ImportUsers(bo.RowOperation[Meta, UserRow]):
    track_row_data = True

    async def process_row(self, row: UserRow, metadata: Meta) -> None:
        return None


def test_decorator_builds_a_definition() -> None:
    definition = definition_of(ImportUsers)
    assert definition is not None
    assert definition.name == "import-users"
    assert definition.description == "Create users"
    assert definition.metadata_model is Meta and definition.row_model is UserRow
    assert definition.retryable is True
    assert definition.track_row_data is True  # from the class attribute
    assert definition.is_step_based is False
    assert [s.name for s in definition.steps] == ["process"]
    assert definition.columns == ("name", "E-mail", "age")
    assert definition.required_columns == ("name", "E-mail")
    assert definition.overrides_row_id and not definition.overrides_validate_row


def test_descriptors_use_aliases_types_and_declared_requiredness() -> None:
    definition = definition_of(ImportUsers)
    assert definition is not None
    meta = [(f.name, f.type, f.required) for f in definition.metadata_fields]
    assert meta == [("requestedBy", "string", True), ("department", "string?", False)]
    columns = [(f.name, f.type, f.required) for f in definition.file_columns]
    assert columns == [("name", "string", True), ("E-mail", "string", True), ("age", "int?", False)]


def test_every_type_name() -> None:
    class Wide(bo.Row):
        a: int
        b: Decimal
        c: bool
        d: datetime
        e: uuid.UUID
        f: date
        g: float
        h: Literal["x", "y"]
        i: float | None = None

    types = [f.type for f in bo.definition.describe(Wide)]
    assert types == [
        "int",
        "decimal",
        "bool",
        "datetime",
        "guid",
        "date",
        "float",
        "string",
        "float?",
    ]


def test_description_defaults_to_docstring() -> None:
    @bo.operation("documented")
    class Documented(bo.RowOperation[Meta, UserRow]):
        """First paragraph.

        Second paragraph."""

        def process_row(self, row: UserRow, metadata: Meta) -> None:
            return None

    definition = definition_of(Documented)
    assert definition is not None and definition.description == "First paragraph."


def test_missing_process_row_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="process_row"):

        @bo.operation("broken")
        class Broken(bo.RowOperation[Meta, UserRow]):
            pass


def test_unparametrized_operation_is_rejected() -> None:
    with pytest.raises(DefinitionError, match="RowOperation"):

        @bo.operation("bare")
        class Bare(bo.RowOperation):  # type: ignore[type-arg]
            async def process_row(self, row: object, metadata: object) -> None:
                return None


@pytest.mark.parametrize("name", ["", "  ", "a/b", " padded"])
def test_bad_names_are_rejected(name: str) -> None:
    with pytest.raises(DefinitionError):

        @bo.operation(name)
        class Named(bo.RowOperation[Meta, UserRow]):
            async def process_row(self, row: UserRow, metadata: Meta) -> None:
                return None


def test_registry_rejects_duplicate_names_case_insensitively() -> None:
    @bo.operation("IMPORT-USERS")
    class Other(bo.RowOperation[Meta, UserRow]):
        async def process_row(self, row: UserRow, metadata: Meta) -> None:
            return None

    registry = Registry([ImportUsers])
    with pytest.raises(DefinitionError, match="Duplicate operation name"):
        registry.add(Other)
    assert registry.get("Import-Users") is definition_of(ImportUsers)
    assert "IMPORT-users" in registry and len(registry) == 1


def test_registry_rejects_undecorated_classes() -> None:
    with pytest.raises(DefinitionError, match="not decorated"):
        Registry([int])


def test_load_registry_from_a_file_and_a_module(tmp_path: Path) -> None:
    source = tmp_path / "myops.py"
    source.write_text(
        textwrap.dedent(
            """
            import bulkops as bo

            class M(bo.Metadata):
                pass

            class R(bo.Row):
                value: str

            @bo.operation("from-file")
            class FromFile(bo.RowOperation[M, R]):
                def process_row(self, row, metadata):
                    pass
            """
        )
    )
    registry = load_registry([str(source), "bulkops.examples.operations"])
    assert [d.name for d in registry] == [
        "charge-customers",
        "from-file",
        "import-users",
        "onboard-employees",
    ]


def test_load_registry_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(DefinitionError, match="not found"):
        load_registry([str(tmp_path / "missing.py")])
    with pytest.raises(DefinitionError, match="Cannot import"):
        load_registry(["no_such_module_here"])
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    with pytest.raises(DefinitionError, match="defines no"):
        load_registry([str(empty)])


def test_loading_two_files_with_the_same_name_fails(tmp_path: Path) -> None:
    body = textwrap.dedent(
        """
        import bulkops as bo
        class M(bo.Metadata):
            pass
        class R(bo.Row):
            value: str
        @bo.operation("same")
        class Op(bo.RowOperation[M, R]):
            def process_row(self, row, metadata):
                pass
        """
    )
    (tmp_path / "a.py").write_text(body)
    (tmp_path / "b.py").write_text(body)
    with pytest.raises(DefinitionError, match="Duplicate"):
        load_registry([str(tmp_path / "a.py"), str(tmp_path / "b.py")])


def test_convert_names_fields_and_empty_csv_cells_are_missing(tmp_path: Path) -> None:
    csv_file = tmp_path / "users.csv"
    csv_file.write_text("name,E-mail,age\nAda,a@x.io,\nAda,a@x.io,abc\nAda,,\n")
    columns = ("name", "E-mail", "age")
    empty_age, bad_age, no_email = (
        raw.values or {}
        for raw in read_rows(csv_file, FileFormat.CSV, columns=columns, drop_empty=True)
    )
    row = convert(UserRow, empty_age)
    assert row.age is None and row.row_id() == "a@x.io"
    with pytest.raises(bo.ValidationError, match=r"age: Input should be a valid integer.*'abc'"):
        convert(UserRow, bad_age)
    with pytest.raises(bo.ValidationError, match="E-mail: Field required"):
        convert(UserRow, no_email)


def test_metadata_uses_camel_case_and_accepts_snake_case() -> None:
    assert Meta.model_validate({"requestedBy": "x"}).requested_by == "x"
    assert Meta.model_validate({"requested_by": "y"}).requested_by == "y"
