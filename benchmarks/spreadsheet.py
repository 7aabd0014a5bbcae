"""Scenario 15: an XLSX import beside the same rows as CSV, and beside the bare loop of the
library that reads XLSX (openpyxl in read-only mode)."""

from __future__ import annotations

import time
import zipfile
from datetime import date
from pathlib import Path
from xml.sax.saxutils import escape

from benchmarks.client import run_to_end
from benchmarks.context import Context, data_dir
from benchmarks.inputs import COLUMNS, VERSION, ensure_csv, people
from benchmarks.operations import BenchRow
from benchmarks.procfs import MB
from benchmarks.results import Result, at_least, at_most
from benchmarks.service import Service

FULL_ROWS = 200_000
QUICK_ROWS = 20_000

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_DOC = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml"
_EXCEL_EPOCH = date(1899, 12, 30)

_PARTS = {
    "[Content_Types].xml": (
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" '
        'ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        f'<Override PartName="/xl/workbook.xml" ContentType="{_TYPE}.sheet.main+xml"/>'
        f'<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{_TYPE}.worksheet+xml"/>'
        f'<Override PartName="/xl/styles.xml" ContentType="{_TYPE}.styles+xml"/>'
        f'<Override PartName="/xl/sharedStrings.xml" ContentType="{_TYPE}.sharedStrings+xml"/>'
        "</Types>"
    ),
    "_rels/.rels": (
        f'<Relationships xmlns="{_RELS}"><Relationship Id="rId1" '
        f'Type="{_DOC}/officeDocument" Target="xl/workbook.xml"/></Relationships>'
    ),
    "xl/workbook.xml": (
        f'<workbook xmlns="{_MAIN}" xmlns:r="{_DOC}"><sheets>'
        '<sheet name="People" sheetId="1" r:id="rId1"/></sheets></workbook>'
    ),
    "xl/_rels/workbook.xml.rels": (
        f'<Relationships xmlns="{_RELS}">'
        f'<Relationship Id="rId1" Type="{_DOC}/worksheet" Target="worksheets/sheet1.xml"/>'
        f'<Relationship Id="rId2" Type="{_DOC}/styles" Target="styles.xml"/>'
        f'<Relationship Id="rId3" Type="{_DOC}/sharedStrings" Target="sharedStrings.xml"/>'
        "</Relationships>"
    ),
    "xl/styles.xml": (  # style 1: the built-in short date format (numFmtId 14)
        f'<styleSheet xmlns="{_MAIN}"><fonts count="1"><font><sz val="11"/></font></fonts>'
        '<fills count="1"><fill><patternFill patternType="none"/></fill></fills>'
        '<borders count="1"><border/></borders>'
        '<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/>'
        '</cellStyleXfs><cellXfs count="2"><xf numFmtId="0" fontId="0" fillId="0" '
        'borderId="0" xfId="0"/><xf numFmtId="14" fontId="0" fillId="0" borderId="0" '
        'xfId="0" applyNumberFormat="1"/></cellXfs>'
        '<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>'
        "</styleSheet>"
    ),
}


def write_xlsx(path: Path, rows: int) -> Path:
    """The rows of ``inputs.people`` as Excel saves a sheet: its dimension first, text in
    the shared strings table, ages as numbers, start dates as date serials styled as
    dates."""
    strings: dict[str, int] = {}

    def shared(text: str) -> int:
        return strings.setdefault(text, len(strings))

    def text_cell(ref: str, text: str) -> str:
        return f'<c r="{ref}" t="s"><v>{shared(text)}</v></c>'

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, xml in _PARTS.items():
            archive.writestr(name, xml)
        with archive.open("xl/worksheets/sheet1.xml", "w", force_zip64=True) as sheet:
            sheet.write(
                f'<worksheet xmlns="{_MAIN}"><dimension ref="A1:E{rows + 1}"/><sheetData>'.encode()
            )
            header = "".join(text_cell(f"{'ABCDE'[i]}1", c) for i, c in enumerate(COLUMNS))
            lines = [f'<row r="1">{header}</row>']
            for n, (name, email, age, department, start) in enumerate(people(rows), 2):
                serial = (date.fromisoformat(start) - _EXCEL_EPOCH).days
                lines.append(
                    f'<row r="{n}">{text_cell(f"A{n}", name)}{text_cell(f"B{n}", email)}'
                    f'<c r="C{n}"><v>{age}</v></c>{text_cell(f"D{n}", department)}'
                    f'<c r="E{n}" s="1"><v>{serial}</v></c></row>'
                )
                if len(lines) >= 1000:
                    sheet.write("".join(lines).encode())
                    lines.clear()
            lines.append("</sheetData></worksheet>")
            sheet.write("".join(lines).encode())
        items = "".join(f"<si><t>{escape(text)}</t></si>" for text in strings)
        archive.writestr(
            "xl/sharedStrings.xml",
            f'<sst xmlns="{_MAIN}" count="{len(strings)}" uniqueCount="{len(strings)}">'
            f"{items}</sst>",
        )
    return path


def ensure_xlsx(directory: Path, rows: int) -> Path:
    """Generate (or reuse) the workbook of ``rows`` rows."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"people-v{VERSION}-{rows}.xlsx"
    if not path.exists():
        write_xlsx(path.with_suffix(".tmp"), rows).rename(path)
    return path


def bare_loop(path: Path, *, validate: bool) -> tuple[int, float, float]:
    """openpyxl's read-only reader over the sheet (values only), each row validated by the
    benchmark's row model when ``validate``: rows, seconds and CPU seconds."""
    from openpyxl import load_workbook

    check = BenchRow.model_validate
    start, cpu = time.perf_counter(), time.process_time()
    book = load_workbook(path, read_only=True, data_only=True)
    rows = book.worksheets[0].iter_rows(values_only=True)
    header = [str(name) for name in next(rows)]
    count = 0
    for row in rows:
        if validate:
            check(dict(zip(header, row, strict=False)))
        count += 1
    book.close()
    return count, time.perf_counter() - start, time.process_time() - cpu


def xlsx_import(context: Context) -> Result:
    """Scenario 15: the workbook through a row operation, beside the same rows as CSV."""
    rows = QUICK_ROWS if context.sizes.name == "quick" else FULL_ROWS
    xlsx = ensure_xlsx(context.input_dir, rows)
    csv = ensure_csv(context.input_dir, rows)
    loop_rows, loop_seconds, loop_cpu = bare_loop(xlsx, validate=True)
    _, read_seconds, _ = bare_loop(xlsx, validate=False)
    if loop_rows != rows:
        raise RuntimeError(f"the bare loop read {loop_rows:,} rows, expected {rows:,}")
    with data_dir() as directory, Service(directory) as service:
        run = run_to_end(service, xlsx)
    with data_dir() as directory, Service(directory) as service:
        csv_run = run_to_end(service, csv)
    for done in (run, csv_run):
        status = done.status
        if status.get("status") != "Completed" or done.rows != rows or status.get("errorCount"):
            raise RuntimeError(f"expected {rows:,} rows Completed without errors, got {status}")
    reference = rows / loop_seconds
    early = next((s for s in run.samples if s.processed >= rows // 10), run.samples[0])
    growth = run.samples[-1].rss / early.rss
    result = Result(
        figures={
            "rows": rows,
            "xlsx_mb": round(xlsx.stat().st_size / MB, 1),
            "xlsx_wall_s": round(run.wall_seconds, 3),
            "xlsx_rows_per_s": round(run.rows_per_second, 1),
            "xlsx_peak_rss_mb": round(run.peak_rss / MB, 1),
            "xlsx_rss_early_mb": round(early.rss / MB, 1),
            "xlsx_rss_end_mb": round(run.samples[-1].rss / MB, 1),
            "csv_rows_per_s": round(csv_run.rows_per_second, 1),
            "csv_peak_rss_mb": round(csv_run.peak_rss / MB, 1),
            "xlsx_service_cpu_s": round(run.cpu.process + run.cpu.helpers, 2),
            "csv_service_cpu_s": round(csv_run.cpu.process + csv_run.cpu.helpers, 2),
            "bare_loop_rows_per_s": round(reference, 1),
            "bare_loop_cpu_s": round(loop_cpu, 2),
            "bare_read_rows_per_s": round(rows / read_seconds, 1),
        },
        notes=[
            "Bare loop: openpyxl load_workbook(read_only=True), iter_rows(values_only=True)"
            " and BenchRow.model_validate of each row, in the benchmark's process"
            " (bare_read: the same without validation). The workbook is written as Excel"
            " saves one: shared strings, date serials styled as dates."
        ],
    )
    ratio = run.rows_per_second / reference
    result.ratios["throughput_vs_bare_loop"] = ratio
    result.ratios["throughput_vs_csv"] = run.rows_per_second / csv_run.rows_per_second
    result.ratios["rss_end_vs_early"] = growth
    # CPU seconds, the service's and its helpers' against the bare loop's: what the import
    # costs whatever else the machine runs meanwhile (it is shared).
    result.ratios["cpu_of_bare_loop_vs_import"] = loop_cpu / (run.cpu.process + run.cpu.helpers)
    result.checks.append(at_least("throughput vs bare loop", ratio, 0.5, "x"))
    result.checks.append(at_most("RSS at end vs at a tenth of the rows", growth, 1.3, "x"))
    return result
