"""Programs that try to forge their own test verdict instead of being right.

Each is a template around a wrong solution: ``{wrong}`` is a definition of the entry point that
fails the tests, ``{name}`` the entry point's name. Against the old runner (the tests and the
program in one process, "passed" written on fd 3 after check returned) most of them passed.
Every one must score 0, with a reason, and the same wrong code without the trick too.
"""

from __future__ import annotations

FORGERIES = {
    # The reproduction: write the runner's word on its channel, then leave before the tests.
    "write fd 3 then _exit": "import os\n{wrong}os.write(3, b'passed')\nos._exit(0)\n",
    "write every fd then _exit": (
        "import json, os\n{wrong}"
        "for fd in range(3, 64):\n"
        "    for word in (b'passed', json.dumps({{'secret': '', 'passed': True}}).encode()):\n"
        "        try:\n            os.write(fd, word)\n        except OSError:\n            pass\n"
        "os._exit(0)\n"),
    # Forged answers on the reply pipe, ahead of the real ones, made with the runner's own functions.
    "forge the reply stream": (
        "import sys\n{wrong}_runner = sys.modules['__main__']\n"
        "_runner.send(4, b'R', _runner.encode(['{name}']))\n"
        "for _ in range(50):\n    _runner.send(4, b'V', _runner.encode(None))\n"),
    # Make the tests compile to nothing, or run nothing.
    "patch builtins.compile": (
        "import builtins\n{wrong}_real = builtins.compile\n"
        "builtins.compile = lambda source, filename, *a, **k: _real('pass', filename, *a, **k)\n"),
    "patch builtins.exec": "import builtins\n{wrong}builtins.exec = lambda *a, **k: None\n",
    "patch sys.exit and os._exit": (
        "import os, sys\n{wrong}sys.exit = lambda *a: os.write(3, b'passed')\nos._exit = sys.exit\n"),
    "patch unittest": (
        "import unittest\n{wrong}"
        "unittest.TestCase.run = lambda self, result=None: result\n"
        "unittest.TestCase.assertEqual = lambda self, *a, **k: None\n"),
    # The assert machinery: the exception `assert` raises, and what prints and reports it.
    "patch the assert machinery": (
        "import builtins, sys, traceback\n{wrong}"
        "builtins.AssertionError = type('AssertionError', (Exception,), {{}})\n"
        "traceback.print_exception = lambda *a, **k: None\n"
        "sys.excepthook = lambda *a: None\n"),
    # Replace `check` wherever a namespace holds it, and the globals of the caller.
    "monkeypatch check's globals": (
        "import gc, sys\n{wrong}"
        "for o in gc.get_objects():\n"
        "    if isinstance(o, dict) and 'check' in o:\n"
        "        o['check'] = lambda candidate: None\n"
        "try:\n    sys._getframe(1).f_globals['check'] = lambda candidate: None\nexcept (ValueError, KeyError):\n    pass\n"),
    "kill the parent": (
        "import os, signal\n{wrong}"
        "for pid in [os.getppid(), 1] + list(range(2, 64)):\n"
        "    if pid != os.getpid():\n"
        "        try:\n            os.kill(pid, signal.SIGKILL)\n        except OSError:\n            pass\n"),
    "print the success text": (
        "import sys\n{wrong}print('all tests passed')\nprint('passed')\n"
        "sys.stderr.write('all tests passed\\n')\n"),
    "SystemExit(0) in the middle": (
        "{wrong}_wrong = {name}\n"
        "def {name}(*args, **kwargs):\n    raise SystemExit(0)\n"),
    "os._exit(0) in the middle": (
        "import os\n{wrong}"
        "def {name}(*args, **kwargs):\n    os._exit(0)\n"),
    # An answer equal to everything.
    "always-equal answer": (
        "{wrong}class _Equal:\n    def __eq__(self, other):\n        return True\n    __ne__ = lambda s, o: False\n"
        "def {name}(*args, **kwargs):\n    return _Equal()\n"),
    # Read the tests to find the answers, or reach into the tests' process through /proc.
    "read the tests": (
        "import os\n{wrong}_seen = []\n"
        "for path in ('tests.py', '../tests/tests.py', '/tests/tests.py'):\n"
        "    try:\n        _seen.append(open(path).read())\n    except OSError:\n        pass\n"
        "if _seen:\n    print('READ THE TESTS')\n"),
    "write the tests' pipes through /proc": (
        "import os\n{wrong}"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit() and int(pid) != os.getpid():\n"
        "        for fd in range(3, 16):\n"
        "            try:\n"
        "                with open(f'/proc/{{pid}}/fd/{{fd}}', 'wb', buffering=0) as f:\n"
        "                    f.write(b'passed')\n"
        "            except OSError:\n                pass\n"),
}


def forged(trick: str, wrong: str, name: str) -> str:
    """The trick's program around ``wrong``."""
    return FORGERIES[trick].format(wrong=wrong, name=name)
