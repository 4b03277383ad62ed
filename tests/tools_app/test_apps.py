"""App start touches no database: on a fresh one, `manage.py` prints no warning and no traceback."""
import os
import subprocess
import sys

import pytest

from ahp import settings as host_settings

from ..conftest import ROOT

pytestmark = pytest.mark.e2e  # manage.py processes


@pytest.mark.parametrize("command", [["check"], ["migrate", "--noinput"]])
def test_manage_on_a_fresh_database_starts_cleanly(tmp_path, command):
    env = {k: v for k, v in os.environ.items() if k not in host_settings.ENVIRONMENT_KEYS}
    env.update(AHP_VAR_DIR=str(tmp_path), DATABASE_URL=f"sqlite:///{tmp_path / 'fresh.sqlite3'}",
               PYTHONPATH=str(ROOT), PYTHONWARNINGS="default")
    done = subprocess.run([sys.executable, "manage.py", *command], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output
    assert "RuntimeWarning" not in output
