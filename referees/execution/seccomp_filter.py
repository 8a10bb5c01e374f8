"""The sandbox's system-call filter: which calls model-written code may not make, compiled by libseccomp.

The filter is built once per process, through pyseccomp (a ctypes binding of the system's
libseccomp2), and handed to the sandbox's launcher as classic BPF, which the launcher loads with
one ``prctl``: so no run pays for importing the binding, and the launcher keeps to the
standard library. docs/sandbox.md explains each choice;

    python -m arena.referees.execution.seccomp_filter

prints the filter as libseccomp's pseudo code.
"""

from __future__ import annotations

import errno
import functools
import platform
import sys
import tempfile

__all__ = ["DENIED_CALLS", "FilterUnavailable", "compiled"]

# System calls that model-written code has no use for and that hand it more of the kernel:
# making or joining namespaces (an unprivileged user namespace grants the capabilities that
# mount, chroot and many kernel bugs need), mounting, reaching into other processes, keyrings,
# BPF, perf events, loading kernels or modules, and a few interfaces known from exploits. Each
# fails with EPERM, so the program sees an ordinary error rather than a crash.
DENIED_CALLS = (
    "unshare", "setns",
    "mount", "umount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd",
    "keyctl", "add_key", "request_key",
    "bpf", "perf_event_open",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "open_by_handle_at", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "modify_ldt",
)

NAMESPACE_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
# clone's flags are its first argument everywhere but on s390, where they come second.
CLONE_FLAGS_ARG = 1 if platform.machine().startswith("s390") else 0
PERSONALITY_QUERY = 0xFFFFFFFF


class FilterUnavailable(RuntimeError):
    """pyseccomp or libseccomp could not be loaded: the sandbox runs without a filter and says so."""


def _binding():
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError) as e:  # RuntimeError: pyseccomp found no libseccomp
        raise FilterUnavailable(f"pyseccomp could not be loaded: {e}") from e
    return pyseccomp


def _rules():
    """The filter (allow by default, refuse the calls above) and the names this libseccomp does not know."""
    sc = _binding()
    rules = sc.SyscallFilter(sc.ALLOW)
    # Only the native ABI is in the filter. A call made through another one (int 0x80 or x32 on
    # x86_64, 32-bit compat on arm64) gets "not implemented", so renumbering cannot dodge a rule.
    rules.set_attr(sc.Attr.ACT_BADARCH, sc.ERRNO(errno.ENOSYS))
    unknown: list[str] = []

    def deny(name: str, action: int, *args) -> None:
        if sc.resolve_syscall(sc.Arch.NATIVE, name) == -1:  # libseccomp's "never heard of it"
            if name not in unknown:
                unknown.append(name)
        else:
            rules.add_rule(action, name, *args)

    refuse = sc.ERRNO(errno.EPERM)
    for name in DENIED_CALLS:
        deny(name, refuse)
    # clone3 passes its flags in memory, out of a filter's sight: "not implemented" makes libc
    # fall back to clone, whose flags the filter does see.
    deny("clone3", sc.ERRNO(errno.ENOSYS))
    for flag in NAMESPACE_FLAGS.values():
        deny("clone", refuse, sc.Arg(CLONE_FLAGS_ARG, sc.MASKED_EQ, flag, flag))
    # The persona may be read but not changed (turning address randomisation off helps an exploit).
    deny("personality", refuse, sc.Arg(0, sc.LT, PERSONALITY_QUERY))
    deny("personality", refuse, sc.Arg(0, sc.GT, PERSONALITY_QUERY))
    return rules, unknown


def _exported(rules, export: str) -> bytes:
    with tempfile.TemporaryFile() as f:
        getattr(rules, export)(f)
        f.seek(0)
        return f.read()


@functools.cache
def compiled() -> tuple[bytes, tuple[str, ...]]:
    """The filter as BPF for this machine's ABI, and the calls left out because libseccomp does not know them."""
    rules, unknown = _rules()
    return _exported(rules, "export_bpf"), tuple(unknown)


def main() -> int:
    try:
        rules, unknown = _rules()
    except FilterUnavailable as e:
        print(f"no seccomp filter: {e}", file=sys.stderr)
        return 1
    sys.stdout.write(_exported(rules, "export_pfc").decode())
    if unknown:
        print(f"# not in the filter, unknown to this libseccomp: {', '.join(unknown)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
