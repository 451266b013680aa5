"""The installed entry points start and list every command group."""

from __future__ import annotations

import subprocess
import sys


def test_python_m_vqadiag_help_lists_command_groups():
    out = subprocess.run(
        [sys.executable, "-m", "vqadiag", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for command in ("score", "stats", "version"):
        assert command in out


def test_version(run_cli):
    from vqadiag import __version__

    result = run_cli("version")
    assert result.exit_code == 0
    assert result.stdout.strip() == __version__
