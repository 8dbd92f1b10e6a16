"""The command line against hostile input: ``python -m opendml``, ``opendml
dispatch`` on files that are not models (a device, a FIFO, a huge file),
truncated ``.npy`` initialisers and folders it cannot write. Every failure
is one line on stderr and exit 2, before anything runs."""
import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from opendml.cli import main

ROOT_LIKE = hasattr(os, "geteuid") and os.geteuid() == 0


def run_module(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "opendml", *args], capture_output=True, text=True, timeout=timeout)


def test_python_dash_m_opendml_is_the_command_line():
    r = run_module("dispatch", "--list")
    assert r.returncode == 0, r.stderr
    assert "slice-contiguous" in r.stdout
    r = run_module("frobnicate")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
