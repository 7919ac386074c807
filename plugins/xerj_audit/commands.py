"""``xerj audit verify``: walk the audit chain of a data directory offline; exit non-zero when it is broken."""

from __future__ import annotations

import json
from pathlib import Path

import click

from xerj_audit.chain import verify_files
from xerj_audit.jsonl import log_files


@click.group("audit")
def audit_group() -> None:
    """Inspect the hash-chained audit log of a data directory."""


@audit_group.command("verify")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Data directory (default: the user data directory).")
def verify_command(data_dir: Path | None) -> None:
    """Check every entry of every audit file; print the verdict as JSON; exit 1 on a broken chain.

    Reads the files only: no server needs to be stopped, and nothing is opened for writing.
    """
    if data_dir is None:
        from xerj_core.engine import default_data_dir

        data_dir = default_data_dir()
    data_dir = Path(data_dir).expanduser()
    if not data_dir.is_dir():
        raise click.UsageError(f"no data directory at {data_dir}")
    verdict = verify_files(log_files(data_dir))
    click.echo(json.dumps(verdict.to_dict(), indent=2))
    if not verdict.valid:
        broken = verdict.first_broken
        click.echo(f"xerj: the audit chain in {data_dir} is broken at seq {broken.seq} in {broken.file}: "
                   f"{broken.reason}", err=True)
        raise SystemExit(1)
