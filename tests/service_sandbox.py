"""Run a command under the restrictions of the systemd unit ``cambium service install``
writes, as far as they can be applied without systemd: for a test on machines where
systemd is not PID 1 (containers, CI).

    unshare --mount --propagation private python service_sandbox.py UNIT -- COMMAND...

In the new mount namespace each ``ReadWritePaths=`` directory is bound onto itself and the
root is remounted read-only (``ProtectSystem=strict`` with ``ProtectHome=read-only``: the
rest of the file system, home included, can be read, not written), with an empty /var/tmp
of its own (``PrivateTmp=``; /tmp, where tests keep their files, stays read-only); then
``UMask=``,
``NoNewPrivileges=`` and ``MemoryDenyWriteExecute=`` (the kernel's own
``PR_SET_MDWE``, which systemd uses too where the kernel has it) are applied and COMMAND is
executed. Not applied: the system call filter, the address families and the private /dev
and network (they need seccomp or more namespaces).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

PR_SET_NO_NEW_PRIVS = 38
PR_SET_MDWE = 65
PR_MDWE_REFUSE_EXEC_GAIN = 1


def settings(unit: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in unit.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith("#"):
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def main(unit: Path, command: list[str]) -> None:
    unit_settings = settings(unit)
    for directory in unit_settings.get("ReadWritePaths", []):
        subprocess.run(["mount", "--bind", directory, directory], check=True)
    if unit_settings.get("PrivateTmp") == ["yes"]:
        # Only /var/tmp: the test's own files are in /tmp, which stays read-only.
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/var/tmp"], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", "/"], check=True)
    os.umask(int(unit_settings["UMask"][0], 8))
    libc = ctypes.CDLL(None, use_errno=True)
    if unit_settings.get("NoNewPrivileges") == ["yes"]:
        assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    if unit_settings.get("MemoryDenyWriteExecute") == ["yes"]:
        assert libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) == 0, os.strerror(
            ctypes.get_errno()
        )
    os.execvp(command[0], command)


if __name__ == "__main__":
    separator = sys.argv.index("--")
    main(Path(sys.argv[1]), sys.argv[separator + 1 :])
