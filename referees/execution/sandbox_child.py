"""The sandbox's launcher: isolates itself, sets the limits, then runs the program.

``arena.referees.execution.sandbox`` starts this file as ``python -I sandbox_child.py CONFIG`` with
stdin = a control pipe (the parent closes it to ask for a stop; it also closes
when the parent dies), stdout/stderr = the program's own, and two inherited
pipes named in CONFIG: one for this launcher's report (JSON), one that the
program sees as fd 3 (its "result" channel).

With a tester (``run_tests``), the supervisor starts two programs: the tester, which runs the
problem's tests and alone holds the result pipe, as a uid of its own; and the program under
test, which only answers the tester's calls over two pipes (fds 3 and 4). The program never
holds the result pipe, nor the run's secret the tester puts in its verdict.

It only uses the standard library and never imports ``arena``: ``-I`` keeps the
environment and the user's site-packages out, and the code must keep working
after ``pivot_root`` has hidden everything but the interpreter. The seccomp
filter comes in CONFIG ready-made (``seccomp_filter.py`` builds it with libseccomp).

Three processes:
  launcher  (what the parent started)  unshares a PID namespace, forks:
  supervisor (pid 1 of that namespace) unshares mount/net/ipc/uts, builds the
             new root, loads the seccomp filter, forks the program (which
             inherits it), enforces the wall limit, kills everything left at
             the end and writes the report;
  program   drops to the sandbox uid, sets rlimits, execs Python.
Whatever a namespace refuses is noted under "missing" and the run goes on with
what is left: the parent decides whether that is good enough.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import math
import os
import platform
import resource
import select
import shutil
import signal
import stat
import sys
import time
import traceback

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
PF_EXITING = 0x00000004  # in /proc/PID/stat's flags: the process has begun to exit

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}.get(platform.machine())

# Enough of the host for Python to run; everything else (home directories, the
# repository, /tmp, sockets under /run) is simply not there.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")
WORK = "/sandbox"
TESTS = "/tests"
# How often the watchdog (used where no cgroup could be made) sums the program's memory.
WATCH_SECONDS = 0.05

# A read-only bind remount must repeat the flags the mount already has (the
# kernel refuses to drop locked ones); statvfs reports them with other values.
_ST_TO_MS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: 1024,
    os.ST_NODIRATIME: 2048,
    os.ST_RELATIME: 1 << 21,
}

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _b(text: str | None) -> bytes | None:
    return None if text is None else os.fsencode(text)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}")


def unshare(flags: int) -> None:
    _check(libc.unshare(flags), "unshare")


def prctl(option: int, value: int) -> None:
    _check(libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


def bind(source: str, target: str, readonly: bool = True) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a"):
            pass
    mount(source, target, None, MS_BIND)
    if readonly:
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV
        have = os.statvfs(target).f_flag
        for st, ms in _ST_TO_MS.items():
            if have & st:
                flags |= ms
        mount(None, target, None, flags)


def under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def others_can_run(path: str) -> bool:
    """Can a stranger (neither owner nor group) reach and execute ``path``?"""
    path = os.path.realpath(path)
    try:
        if not os.stat(path).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(path)
        while True:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False


def copy_files(source: str, target: str, uid: int) -> None:
    for top, dirs, files in os.walk(source):
        rel = os.path.relpath(top, source)
        dest = os.path.normpath(os.path.join(target, rel))
        os.makedirs(dest, exist_ok=True)
        os.chown(dest, uid, uid)
        for name in files:
            shutil.copyfile(os.path.join(top, name), os.path.join(dest, name))
            os.chown(os.path.join(dest, name), uid, uid)


class MemoryGroup:
    """One memory limit for all the program's processes together: a cgroup made for this run.

    Made by the launcher, which still sees the host's /sys; the supervisor keeps only file
    descriptors (the program writes itself into ``cgroup.procs`` before it drops root, and the
    supervisor waits on the OOM event), so the group works after ``pivot_root`` hid /sys.
    """

    PREFIX = "arena-sandbox-"

    def __init__(self, path: str, version: int):
        self.path, self.version = path, version
        self.fired = False  # v1: the kernel signalled an OOM on the eventfd
        self.procs_fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY)
        if version == 2:
            # The kernel flags a change of memory.events as an exceptional condition on the file.
            self.events_fd = os.open(os.path.join(path, "memory.events"), os.O_RDONLY)
            self.wait_fd = self.events_fd
        else:
            self.events_fd = os.open(os.path.join(path, "memory.oom_control"), os.O_RDONLY)
            self.wait_fd = os.eventfd(0, os.EFD_NONBLOCK)
            with open(os.path.join(path, "cgroup.event_control"), "w") as f:
                f.write(f"{self.wait_fd} {self.events_fd}")

    @classmethod
    def make(cls, limit: int, name: str) -> tuple[MemoryGroup | None, str | None]:
        """The group, or None and why not."""
        try:
            found = cls.where()
        except OSError as e:
            return None, f"the cgroups could not be read ({e.strerror})"
        if found is None:
            return None, "no cgroup file system with the memory controller is mounted"
        parent, version = found
        cls.sweep(parent)
        path = os.path.join(parent, name)
        try:
            os.mkdir(path)
        except OSError as e:
            return None, f"no cgroup could be made under {parent} ({e.strerror})"
        try:
            if version == 2:
                cls.write(path, "memory.max", limit)
                cls.write(path, "memory.swap.max", 0, optional=True)
                cls.write(path, "memory.oom.group", 1, optional=True)  # an OOM kill takes the whole group
            else:
                cls.write(path, "memory.limit_in_bytes", limit)
                cls.write(path, "memory.memsw.limit_in_bytes", limit, optional=True)  # no way round it through swap
            return cls(path, version), None
        except OSError as e:
            cls.remove(path)
            return None, f"the cgroup {path} refused its limit ({e.strerror})"

    @staticmethod
    def write(path: str, name: str, value: int, optional: bool = False) -> None:
        target = os.path.join(path, name)
        if optional and not os.path.exists(target):
            return
        with open(target, "w") as f:
            f.write(str(value))

    @staticmethod
    def where() -> tuple[str, int] | None:
        """Our own cgroup in the hierarchy that holds the memory controller, and that hierarchy's version."""
        mine: dict[str, str] = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else [""]:
                    mine[c] = path
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
        for fields in mounts:
            sep = fields.index("-")
            root, point, fstype, options = fields[3], fields[4], fields[sep + 1], fields[sep + 3].split(",")
            if fstype == "cgroup" and "memory" in options and "memory" in mine:
                own = mine["memory"]
            elif fstype == "cgroup2" and "" in mine:
                try:
                    with open(os.path.join(point, "cgroup.controllers")) as c:
                        if "memory" not in c.read().split():
                            continue
                except OSError:
                    continue
                own = mine[""]
            else:
                continue
            if not under(own, [root]):
                continue
            rel = os.path.relpath(own, root)
            return os.path.normpath(os.path.join(point, rel)), 2 if fstype == "cgroup2" else 1
        return None

    @classmethod
    def sweep(cls, parent: str) -> None:
        """Remove the empty groups of runs that were killed before they could remove their own."""
        try:
            names = os.listdir(parent)
        except OSError:
            return
        for name in names:
            if not name.startswith(cls.PREFIX):
                continue
            try:
                with open(f"/proc/{int(name[len(cls.PREFIX):].split('-')[0])}/stat", "rb") as f:
                    state = f.read().rpartition(b")")[2].split()[0]
                if state not in (b"Z", b"X"):
                    continue  # its launcher is alive (a zombie is not): the group is in use, or about to be
            except FileNotFoundError:
                pass
            except (ValueError, OSError, IndexError):
                continue
            try:
                os.rmdir(os.path.join(parent, name))  # refused while a process is still in it
            except OSError:
                pass

    def join(self) -> None:
        """Put the calling process (and so all it will start) into the group, if the kernel lets it."""
        try:
            os.write(self.procs_fd, b"0")
        except OSError:
            pass  # the supervisor sees the program outside the group and falls back on the watchdog

    def holds(self, pid: int, proc_fd: int) -> bool:
        name = "/" + os.path.basename(self.path)
        try:
            fd = os.open(f"{pid}/cgroup", os.O_RDONLY, dir_fd=proc_fd)
            try:
                lines = os.read(fd, 65536).decode(errors="replace").splitlines()
            finally:
                os.close(fd)
        except OSError:
            return True  # already gone: nothing left to watch either way
        return any(line.endswith(name) for line in lines)

    def hit(self) -> bool:
        """Did the kernel stop a process of the group for memory?"""
        try:
            text = os.pread(self.events_fd, 4096, 0).decode()
        except OSError:
            return False
        counts = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
        return self.fired or int(counts.get("oom_kill", 0)) > 0 or int(counts.get("oom_group_kill", 0)) > 0 or (
            self.version == 1 and counts.get("under_oom") == "1")

    def clear_wait(self) -> None:
        """Take the v1 event off the eventfd (it says OOM and nothing else). v2's file clears when read."""
        if self.version == 1:
            try:
                self.fired = self.fired or bool(os.read(self.wait_fd, 8))
            except BlockingIOError:
                pass

    @staticmethod
    def remove(path: str) -> None:
        """Remove the group once its processes are gone (they may take a moment to leave it)."""
        for _ in range(200):
            try:
                os.rmdir(path)
                return
            except FileNotFoundError:
                return
            except OSError:
                try:
                    with open(os.path.join(path, "cgroup.procs")) as f:
                        for pid in f.read().split():
                            try:
                                os.kill(int(pid), signal.SIGKILL)
                            except OSError:
                                pass
                except OSError:
                    pass
                time.sleep(0.01)


def process_memory(proc_fd: int, pid: str) -> int:
    """Proportional set size of one process, in bytes: shared pages count once over all who share them."""
    try:
        fd = os.open(f"{pid}/smaps_rollup", os.O_RDONLY, dir_fd=proc_fd)
    except OSError:
        return 0
    try:
        text = os.read(fd, 8192)
    except OSError:
        return 0
    finally:
        os.close(fd)
    for line in text.splitlines():
        if line.startswith(b"Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def place_fds(sources: list[int]) -> None:
    """Make ``sources`` fds 3, 4, ... of this process, inheritable, whatever numbers they have now."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 200) for fd in sources]
    for i, fd in enumerate(high):
        os.dup2(fd, 3 + i)  # dup2 leaves the copy inheritable
        os.close(fd)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Run:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.limits = cfg["limits"]
        self.protections: list[str] = ["empty environment", "resource limits"]
        self.missing: list[str] = []
        self.pid_ns = False
        self.user_ns = False
        self.mount_ns = False
        self.root = os.geteuid() == 0
        # As root we can become a uid nobody else uses, which makes file
        # permissions and RLIMIT_NPROC bite and lets us kill "everything of
        # that uid" without touching anything else. Without root we stay who we are.
        self.uid = cfg["uid"] if self.root else os.getuid()
        self.gid = cfg["uid"] if self.root else os.getgid()
        # The tests run as a second uid of their own, so the program cannot signal them, read
        # their memory or open their pipes through /proc.
        self.tester = cfg.get("tester")
        self.tester_uid = self.tester["uid"] if self.tester and self.root else self.uid
        self.group: MemoryGroup | None = None
        self.children: set[int] = set()  # what we started ourselves: the program, and the tester
        self.statuses: dict[int, tuple[int, object]] = {}  # how each of them ended
        self.program: int | None = None
        self.seccomp_refused: str | None = None

    # ---------------------------------------------------------------- launcher

    def launch(self) -> int:
        self.parent = os.getppid()
        namespaces = self.cfg["namespaces"]
        self.make_memory_group()
        if not namespaces:
            self.missing.append("namespaces turned off: no network, filesystem or process isolation")
        elif not self.root:
            self.enter_user_namespace()
        if namespaces and (self.root or self.user_ns):
            try:
                unshare(CLONE_NEWPID)
                self.pid_ns = True
            except OSError as e:
                self.missing.append(f"no PID namespace ({e.strerror}): leftover processes are killed by uid or process group instead")
        elif namespaces:
            self.missing.append("no PID namespace (not root and no user namespace)")
        # Nobody of the program's uid may read this process's memory or open its descriptors.
        prctl(PR_SET_DUMPABLE, 0)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = self.supervise()
            except BaseException:
                self.report({"error": traceback.format_exc()})
            finally:
                os._exit(code)
        # Nothing to do but wait: the supervisor does the work and reports.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for fd in self.handed_down():
            os.close(fd)
        try:
            while True:
                try:
                    _, status = os.waitpid(pid, 0)
                    return 0 if os.waitstatus_to_exitcode(status) == 0 else 1
                except InterruptedError:
                    continue
        finally:
            if self.group is not None:
                MemoryGroup.remove(self.group.path)
            if os.getppid() != self.parent:
                # The parent was killed and will not remove the work folder: none of the
                # program's files outlive the run. (A live parent removes it itself.)
                shutil.rmtree(self.cfg["base"], ignore_errors=True)

    def handed_down(self) -> list[int]:
        """The descriptors only the supervisor (and through it the tester) needs."""
        fds = [self.cfg["report_fd"]]
        if self.tester:
            fds += [self.tester["result_fd"], self.tester["nonce_fd"]]
        return fds

    def make_memory_group(self) -> None:
        limit = self.limits["memory_bytes"]
        if not self.cfg["memory_group"]:
            why = "turned off"
        else:
            self.group, why = MemoryGroup.make(limit, f"{MemoryGroup.PREFIX}{os.getpid()}-{os.urandom(4).hex()}")
        if self.group is not None:
            self.protections.append(f"one memory limit for all the program's processes (cgroup v{self.group.version})")
        else:
            self.missing.append(f"no cgroup for the memory limit ({why}): a watchdog sums the program's memory "
                                f"every {WATCH_SECONDS:g} s, so a fast allocation can overshoot the limit in between")

    def enter_user_namespace(self) -> None:
        """Without root, a user namespace grants the rights to set up the others."""
        uid, gid = os.getuid(), os.getgid()
        try:
            unshare(CLONE_NEWUSER)
        except OSError as e:
            self.missing.append(f"no user namespace ({e.strerror}), so no other namespace either")
            return
        # Map ourselves onto ourselves: inside we keep a non-zero uid, so the
        # program loses every capability when it execs Python.
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"{gid} {gid} 1")
        self.user_ns = True
        self.protections.append("user namespace")

    # -------------------------------------------------------------- supervisor

    def supervise(self) -> int:
        cfg = self.cfg
        # If the launcher is killed (the parent gave up on us), take the whole
        # namespace down with us rather than run on unsupervised.
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if self.pid_ns:
            self.protections.append("PID namespace")
        else:
            prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphans come to us, so we can reap and count them

        if cfg["namespaces"] and (self.root or self.user_ns):
            self.unshare_rest()

        devnull = os.open("/dev/null", os.O_RDWR)
        proc_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
        python = cfg["python"]
        if self.mount_ns:
            self.build_root()
            workdir, testdir = WORK, TESTS
            if self.pid_ns:
                os.close(proc_fd)
                proc_fd = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
        else:
            workdir = os.path.join(cfg["base"], "work")
            os.mkdir(workdir, 0o700)
            copy_files(os.path.join(cfg["base"], "in"), workdir, self.uid)
            os.chown(workdir, self.uid, self.gid)
            testdir = os.path.join(cfg["base"], "testwork")
            if self.tester:
                os.mkdir(testdir, 0o700)
                copy_files(os.path.join(cfg["base"], "tests"), testdir, self.tester_uid)
            self.missing.append(
                "no mount namespace: the program sees the host's files; world-writable places "
                "such as /tmp, /var/tmp and /dev/shm stay writable and the work directory's total size is not capped"
            )
            if self.root and not others_can_run(python):
                python = next((p for p in cfg["fallback_pythons"] if others_can_run(p)), None)
                if python is None:
                    raise RuntimeError(
                        f"the sandbox user cannot run {cfg['python']} (a parent directory is private) "
                        "and no other python3 is readable by everyone"
                    )
                self.missing.append(f"ran {python} instead of {cfg['python']}, which the sandbox user cannot reach")

        if self.root:
            self.protections.append(f"unprivileged uid {self.uid}")
            if self.tester:
                self.protections.append(f"tests as another uid, {self.tester_uid}")
        else:
            self.missing.append(f"not root: the program keeps your uid {self.uid}, and your file permissions")
            if self.tester:
                self.missing.append("not root: the tests run as the program's uid too, shielded from it only by "
                                    "being undumpable (no /proc access to their memory or pipes)")
        self.protections.append("no new privileges")
        self.load_filter()
        return self.run_program(python, workdir, testdir, devnull, proc_fd)

    def load_filter(self) -> None:
        """Filter the system calls of the supervisor, and so of the program it forks, across exec."""
        bpf = self.cfg["seccomp_bpf"]
        if bpf is None:
            return  # turned off, or no libseccomp: the parent says so
        code = bytes.fromhex(bpf)
        buffer = ctypes.create_string_buffer(code, len(code))
        fprog = SockFprog(len(code) // 8, ctypes.addressof(buffer))  # 8 bytes per instruction
        try:
            # Without the capability to skip it, the kernel takes a filter only after this.
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")
        except OSError as e:
            self.seccomp_refused = os.strerror(e.errno)
        else:
            self.protections.append("seccomp filter")

    def unshare_rest(self) -> None:
        wanted = [
            (CLONE_NEWNS, "mount namespace", "no mount namespace"),
            (CLONE_NEWNET, "network namespace", "no network namespace: the program can use the network"),
            (CLONE_NEWIPC, "IPC namespace", "no IPC namespace"),
            (CLONE_NEWUTS, "UTS namespace", "no UTS namespace"),
        ]
        try:
            unshare(sum(flag for flag, _, _ in wanted))
            got = [flag for flag, _, _ in wanted]
        except OSError:
            got = []
            for flag, _, miss in wanted:
                try:
                    unshare(flag)
                    got.append(flag)
                except OSError as e:
                    if flag != CLONE_NEWNS:  # reported with its consequences later
                        self.missing.append(f"{miss} ({e.strerror})")
        for flag, name, _ in wanted:
            if flag in got:
                self.protections.append(name)
        self.mount_ns = CLONE_NEWNS in got
        if CLONE_NEWUTS in got:
            libc.sethostname(b"sandbox", 7)
        if self.mount_ns:
            try:
                # Nothing we mount may leak back to the host.
                mount(None, "/", None, MS_REC | MS_PRIVATE)
            except OSError as e:
                self.mount_ns = False
                self.protections.remove("mount namespace")
                self.missing.append(f"mount namespace unusable ({e.strerror})")

    def build_root(self) -> None:
        """A fresh, read-only root holding only the system, the interpreter and a small writable work dir."""
        cfg, limits = self.cfg, self.limits
        new = os.path.join(cfg["base"], "root")
        mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,nr_inodes=4096,mode=755")
        bound: list[str] = []
        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                os.symlink(os.readlink(d), new + d)
            elif os.path.isdir(d):
                bind(d, new + d)
                bound.append(d)
        for d in cfg["python_roots"]:
            if not under(d, bound):
                bind(d, new + d)
                bound.append(d)
        os.makedirs(new + "/dev", mode=0o755)
        for name in DEVICES:
            if os.path.exists("/dev/" + name):
                bind("/dev/" + name, new + "/dev/" + name, readonly=False)
        for i, name in enumerate(("stdin", "stdout", "stderr")):
            os.symlink(f"/proc/self/fd/{i}", new + "/dev/" + name)
        os.symlink("/proc/self/fd", new + "/dev/fd")
        # The usual scratch places exist but are read-only, so code that tries
        # them gets a plain error instead of a surprise.
        for d in ("/tmp", "/var/tmp", "/dev/shm", "/run", "/proc", WORK):
            os.makedirs(new + d, mode=0o755, exist_ok=True)
        mount(
            "tmpfs",
            new + WORK,
            "tmpfs",
            MS_NOSUID | MS_NODEV,
            f"size={limits['disk_bytes']},nr_inodes=20000,mode=700,uid={self.uid},gid={self.gid}",
        )
        copy_files(os.path.join(cfg["base"], "in"), new + WORK, self.uid)
        if self.tester:
            # The tests live where the program cannot even list them, so it cannot read the answers.
            os.makedirs(new + TESTS, mode=0o755, exist_ok=True)
            mount("tmpfs", new + TESTS, "tmpfs", MS_NOSUID | MS_NODEV,
                  f"size={limits['disk_bytes']},nr_inodes=1000,mode=700,uid={self.tester_uid},gid={self.tester_uid}")
            copy_files(os.path.join(cfg["base"], "tests"), new + TESTS, self.tester_uid)  # its runner only
        if self.pid_ns:
            try:
                mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except OSError as e:
                self.missing.append(f"no /proc inside ({e.strerror})")
        os.chdir(new)
        pivoted = False
        if SYS_PIVOT_ROOT is not None:
            # pivot_root(".", ".") stacks the old root on top of the new one;
            # detaching it leaves the host's tree unreachable from in here.
            if libc.syscall(SYS_PIVOT_ROOT, b".", b".") == 0:
                _check(libc.umount2(b".", MNT_DETACH), "umount old root")
                pivoted = True
        if not pivoted:
            os.chroot(".")
            self.missing.append("pivot_root refused: chroot used instead (safe only because the program is not root)")
        os.chdir("/")
        mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        self.protections.append("read-only root, only the work directory writable")

    def run_program(self, python: str, workdir: str, testdir: str, devnull: int, proc_fd: int) -> int:
        limits = self.limits
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)

        started = time.monotonic()
        deadline = started + limits["wall_seconds"]
        tester = pid = None
        if self.tester:
            calls_r, calls_w = os.pipe2(os.O_CLOEXEC)
            replies_r, replies_w = os.pipe2(os.O_CLOEXEC)
            ready_r, ready_w = os.pipe2(os.O_CLOEXEC)
            t = self.tester
            tester_fds = [t["result_fd"], calls_w, replies_r, t["nonce_fd"], ready_w]
            program_fds = [calls_r, replies_w]
            if self.tester_uid == self.uid:
                # The program starts only once the tester has made itself undumpable and read the
                # secret: before that, a program of the same uid could have read it through /proc.
                tester, exec_error = self.start(python, testdir, devnull, self.tester_uid, False, False, tester_fds,
                                                ["--shared-uid"])
                os.close(ready_w)
                self.wait_for_eof(ready_r, deadline)
                if not exec_error:
                    pid, exec_error = self.start(python, workdir, devnull, self.uid, True, True, program_fds)
            else:
                # Another uid: the program cannot reach the tester at any moment, so both start at
                # once, the tester while the program moves into its cgroup (which takes a while).
                pid, program_started = self.spawn(python, workdir, devnull, self.uid, True, True, program_fds)
                tester, tester_started = self.spawn(python, testdir, devnull, self.tester_uid, False, False, tester_fds)
                errors = [self.confirm(program_started), self.confirm(tester_started)]
                exec_error = errors[0] or errors[1]
                os.close(ready_w)
                os.close(ready_r)
            # From here on only the tester holds the result pipe and the secret.
            for fd in (t["result_fd"], t["nonce_fd"], calls_w, replies_r, *program_fds):
                os.close(fd)
        else:
            pid, exec_error = self.start(python, workdir, devnull, self.uid, True, True, [])

        self.program = pid
        if self.group is not None and pid is not None and not exec_error and not self.group.holds(pid, proc_fd):
            self.protections.remove(f"one memory limit for all the program's processes (cgroup v{self.group.version})")
            self.missing.append(f"the program could not join its cgroup {self.group.path}: a watchdog sums the "
                                f"program's memory every {WATCH_SECONDS:g} s instead")
            self.group = None
        watched = tester if tester is not None else pid  # whose end ends the run
        timed_out = stopped = memory_exceeded = False
        control = 0
        waiting = [wake_r, control]
        exceptional = []
        if self.group is not None:
            (waiting if self.group.version == 1 else exceptional).append(self.group.wait_fd)
        watchdog = self.group is None
        while watched is not None:
            self.reap()
            if watched in self.statuses:
                break
            if (self.group is not None and self.group.hit()) or (
                    watchdog and self.program_memory(proc_fd, tester) > limits["memory_bytes"]):
                memory_exceeded = True
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            try:
                ready, _, _ = select.select(waiting, [], exceptional, min(remaining, WATCH_SECONDS) if watchdog else remaining)
            except InterruptedError:
                continue
            if self.group is not None:
                self.group.clear_wait()
            if control in ready:
                os.read(control, 1)
                stopped = True  # data or EOF: either way the parent wants us to stop
                break
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
        seconds = time.monotonic() - started
        live = self.count_tasks(proc_fd)
        self.reap()
        if tester is not None and pid is not None:
            self.await_exiting(pid, proc_fd)
        # The program's own end, if it came before the run's: with a tester, the program is
        # still answering calls when the tests finish, and that is no failure of its own.
        ended = self.statuses.get(pid) if pid is not None else None
        if tester is not None and tester not in self.statuses:
            try:
                os.kill(tester, signal.SIGKILL)
            except OSError:
                pass
        # Without a way to kill them all, do not wait for escaped processes.
        self.reap(block=self.kill_all(pid, proc_fd) if pid is not None else True)
        if self.group is not None:
            self.group.clear_wait()
            memory_exceeded = memory_exceeded or self.group.hit()
        status, usage = ended if ended is not None else (None, None)
        if tester is None and pid is not None:
            status, usage = self.statuses.get(pid, (None, None))
        tester_status = self.statuses.get(tester, (None, None))[0] if tester is not None else None

        self.report(
            {
                "exec_error": exec_error.decode(errors="replace") or None,
                "exitcode": None if status is None else os.waitstatus_to_exitcode(status),
                "tester_exitcode": None if tester_status is None else os.waitstatus_to_exitcode(tester_status),
                "timed_out": timed_out,
                "stopped": stopped,
                "memory_exceeded": memory_exceeded,
                "seconds": seconds,
                "cpu_seconds": None if usage is None else usage.ru_utime + usage.ru_stime,
                "tasks_at_end": live,
                "uid": self.uid if self.root else None,
                "protections": self.protections,
                "missing": self.missing,
                "seccomp_refused": self.seccomp_refused,
            }
        )
        return 0

    def start(self, python: str, workdir: str, devnull: int, uid: int, group: bool, site: bool,
              fds: list[int], args: list[str] = ()) -> tuple[int, bytes]:
        """Fork and exec one program; its pid and, if exec failed, why."""
        pid, started = self.spawn(python, workdir, devnull, uid, group, site, fds, args)
        return pid, self.confirm(started)

    def spawn(self, python: str, workdir: str, devnull: int, uid: int, group: bool, site: bool,
              fds: list[int], args: list[str] = ()) -> tuple[int, int]:
        """Fork one program, which sets itself up and execs; its pid and the pipe that tells
        whether the exec worked. The tester needs no site-packages (``site=False``): the
        interpreter's .pth files can cost it tens of ms."""
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        # Keep the exec-error pipe away from the low fds the program will get.
        err_w_high = fcntl.fcntl(err_w, fcntl.F_DUPFD_CLOEXEC, 100)
        os.close(err_w)
        err_w = err_w_high
        # glibc gives each new thread a malloc arena that reserves 64 MB of address space: under
        # RLIMIT_AS a dozen threads would exhaust the memory limit on reservations alone, long
        # before they used memory or reached the process limit. Python needs no more than one.
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": workdir, "TMPDIR": workdir,
               "MALLOC_ARENA_MAX": "1"}
        argv = [python, "-I", "-B", "-u", "-X", "utf8", *([] if site else ["-S"]), self.cfg["main"], *args]
        pid = os.fork()
        if pid == 0:
            try:
                self.become_program(workdir, devnull, err_w, uid, group, fds)
                os.execve(python, argv, env)
            except BaseException as e:
                try:
                    os.write(err_w, f"{type(e).__name__}: {e}".encode())
                finally:
                    os._exit(127)
        self.children.add(pid)
        os.close(err_w)
        return pid, err_r

    @staticmethod
    def confirm(err_r: int) -> bytes:
        """Why the exec failed, or nothing once it worked."""
        exec_error = b""
        while chunk := os.read(err_r, 4096):  # EOF as soon as exec succeeds
            exec_error += chunk
        os.close(err_r)
        return exec_error

    @staticmethod
    def wait_for_eof(fd: int, deadline: float) -> None:
        try:
            while (remaining := deadline - time.monotonic()) > 0:
                try:
                    ready, _, _ = select.select([fd], [], [], remaining)
                except InterruptedError:
                    continue
                if ready and not os.read(fd, 64):
                    return
        finally:
            os.close(fd)

    def program_memory(self, proc_fd: int, tester: int | None) -> int:
        """What the program's processes use together, for the watchdog."""
        if self.pid_ns:
            me, other = str(os.getpid()), str(tester)
            pids = [n for n in os.listdir(proc_fd) if n.isdigit() and n not in (me, other)]
        elif self.root:
            pids = self.sandbox_pids(proc_fd)
        else:
            pids = [str(self.program)]
        return sum(process_memory(proc_fd, p) for p in pids)

    def become_program(self, workdir: str, devnull: int, err_w: int, uid: int, group: bool, fds: list[int]) -> None:
        limits = self.limits
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()  # its own process group: the last resort for killing it without namespaces
        if group and self.group is not None:
            self.group.join()  # while still root: the group's files belong to root
        os.dup2(devnull, 0)
        place_fds(fds)
        os.closerange(3 + len(fds), err_w)
        os.closerange(err_w + 1, 65536)
        cpu = max(1, math.ceil(limits["cpu_seconds"]))
        wanted = {
            resource.RLIMIT_CORE: 0,
            resource.RLIMIT_CPU: (cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL a second later
            resource.RLIMIT_AS: limits["memory_bytes"],
            resource.RLIMIT_FSIZE: limits["file_size_bytes"],
            # In a user namespace the launcher and the supervisor share the
            # program's uid and count against the limit too.
            resource.RLIMIT_NPROC: limits["processes"] + (2 if self.user_ns else 0),
            resource.RLIMIT_NOFILE: 256,
        }
        for which, value in wanted.items():
            soft, hard = value if isinstance(value, tuple) else (value, value)
            _, old_hard = resource.getrlimit(which)
            if old_hard != resource.RLIM_INFINITY and not self.root:
                soft, hard = min(soft, old_hard), min(hard, old_hard)
            resource.setrlimit(which, (soft, hard))
        if self.root:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            if os.getuid() != uid or os.geteuid() != uid:
                raise RuntimeError("could not drop to the sandbox uid")
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after setuid, which clears it
        os.chdir(workdir)

    def reap(self, block: bool = False) -> None:
        """Reap exited children (all of them, until none is left, if ``block``), noting the program's status."""
        while True:
            try:
                got, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return
            if got == 0:
                return
            # A program that made itself our tracee reports its stops too; only its end counts.
            if got in self.children and not os.WIFSTOPPED(status):
                self.statuses[got] = (status, usage)

    def await_exiting(self, pid: int, proc_fd: int) -> None:
        """Note the program's end when it is already on its way out. Its pipe to the tests closes
        early in its exit, before the kernel makes it a zombie: the tests can see it gone, give their
        verdict and end in that moment, and the signal that ended it (a CPU limit's) must still count."""
        if pid in self.statuses:
            return
        try:
            fd = os.open(f"{pid}/stat", os.O_RDONLY, dir_fd=proc_fd)
            try:
                fields = os.read(fd, 4096).rpartition(b")")[2].split()
            finally:
                os.close(fd)
            exiting = fields[0] in (b"Z", b"X") or int(fields[6]) & PF_EXITING
        except (OSError, IndexError, ValueError):
            return
        while exiting:  # only a process already exiting is waited for: it cannot keep us here
            try:
                got, status, usage = os.wait4(pid, 0)
            except ChildProcessError:
                return
            if not os.WIFSTOPPED(status):
                self.statuses[got] = (status, usage)
                return

    def count_tasks(self, proc_fd: int) -> int | None:
        """Threads of the sandbox uid, every process's included: what RLIMIT_NPROC counts."""
        if not self.root:
            return None
        count = 0
        for name in self.sandbox_pids(proc_fd):
            try:
                fd = os.open(f"{name}/task", os.O_RDONLY | os.O_DIRECTORY, dir_fd=proc_fd)
            except OSError:
                continue  # gone already
            try:
                count += len(os.listdir(fd))
            except OSError:
                pass
            finally:
                os.close(fd)
        return count

    def sandbox_pids(self, proc_fd: int) -> list[str]:
        me = str(os.getpid())
        found = []
        for name in os.listdir(proc_fd):
            if not name.isdigit() or name == me:
                continue
            try:
                if os.stat(name, dir_fd=proc_fd).st_uid == self.uid:
                    found.append(name)
            except OSError:
                pass
        return found

    def count_living(self, proc_fd: int) -> int:
        """Processes of the sandbox uid that are not zombies yet."""
        count = 0
        for name in self.sandbox_pids(proc_fd):
            try:
                fd = os.open(f"{name}/stat", os.O_RDONLY, dir_fd=proc_fd)
                try:
                    state = os.read(fd, 4096).rpartition(b")")[2].split()[0]
                finally:
                    os.close(fd)
                if state not in (b"Z", b"X"):
                    count += 1
            except (OSError, IndexError):
                pass
        return count

    def kill_all(self, pid: int, proc_fd: int) -> bool:
        """Kill the program and everything it started; False if only its process group could be reached."""
        if self.pid_ns and os.getpid() == 1:
            # As init of the namespace, kill(-1) reaches exactly the sandbox.
            # Repeat until nothing is left: a fork bomb forks while we kill.
            while True:
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    return True
                self.reap(block=True)
        elif self.root and self.uid not in (0, os.getuid()):
            # The sandbox uid is ours alone, so a process of that uid calling
            # kill(-1) reaches the sandbox's processes and nothing else. Here
            # kill(-1) never says "none left" (it counts the processes it may
            # not signal), so /proc tells us when we are done.
            killer = os.fork()
            if killer == 0:
                try:
                    os.setresuid(self.uid, self.uid, self.uid)
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline:
                        os.kill(-1, signal.SIGKILL)
                        if not self.count_living(proc_fd):
                            break
                finally:
                    os._exit(0)
            # Reap as they die (orphans come to us as subreaper).
            self.reap(block=True)
            return True
        else:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
            return False

    def report(self, data: dict) -> None:
        data.setdefault("protections", self.protections)
        data.setdefault("missing", self.missing)
        payload = json.dumps(data).encode()
        fd = self.cfg["report_fd"]
        try:
            while payload:
                payload = payload[os.write(fd, payload):]
        except OSError:
            pass  # the parent is gone (or the launcher already handed the pipe on): nobody to tell


def main() -> int:
    cfg = json.loads(sys.argv[1])
    run = Run(cfg)
    try:
        return run.launch()
    except BaseException:
        run.report({"error": traceback.format_exc()})
        return 1


if __name__ == "__main__":
    sys.exit(main())
