"""The shared progress bar: what it leaves on stderr when stderr is a log file."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
from vqadiag.progress import progress_bar
for transient in (True, True, False):
    with progress_bar(transient=transient) as bar:
        task = bar.add_task("work", total=3)
        for _ in range(3):
            bar.advance(task)
"""


def test_transient_bars_leave_nothing_in_a_log_and_others_their_last_state(tmp_path):
    log = tmp_path / "stderr.log"
    # variables that make rich treat any stream as a terminal are left out
    forced = {"FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS"}
    env = {k: v for k, v in os.environ.items() if k not in forced}
    with log.open("w") as err:
        subprocess.run([sys.executable, "-c", SCRIPT], stderr=err, check=True, env=env)
    lines = log.read_text().splitlines()
    # the two transient bars write nothing (rich wrote an empty line for each);
    # the lasting bar writes its final state once
    assert len(lines) == 1
    assert lines[0].startswith("work") and "3/3" in lines[0]
