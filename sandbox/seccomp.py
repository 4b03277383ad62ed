"""The system-call filter every sandbox runs under: no new user namespace.

Inside a user namespace of its own a process holds every capability over it, which opens the
kernel's namespaced interfaces (netfilter, mounts) to it: a kernel bug there would be a way to
the host's root. A sandbox needs none, so `unshare` and `clone` asking CLONE_NEWUSER fail with
EPERM, `clone3` (whose flags a classic filter cannot read) answers ENOSYS so libraries fall back
to `clone`, and a system call of another ABI (32-bit, x32) fails, so none of them goes around the
filter. The filter is classic BPF, as bubblewrap's `--seccomp` takes it; it is made once per
host, in a file the launch shell opens for bubblewrap.
"""
import errno
import os
import platform
import struct
from pathlib import Path

from django.conf import settings

# (audit arch, unshare, clone, clone3) per machine.
ABI = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
CLONE_NEWUSER = 0x10000000
X32_SYSCALL_BIT = 0x40000000
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW = 0x7FFF0000


def errno_return(code: int) -> int:
    return 0x00050000 | code


def program() -> list[tuple[int, int, int, int]]:
    """The filter's instructions: (code, jump if true, jump if false, k)."""
    arch, unshare, clone, clone3 = ABI[platform.machine()]
    return [
        (LD_W_ABS, 0, 0, 4),                 # 0: arch
        (JEQ, 1, 0, arch),                   # 1: this machine's ABI: on to 3
        (RET, 0, 0, errno_return(errno.EPERM)),  # 2: another ABI
        (LD_W_ABS, 0, 0, 0),                 # 3: system call number
        (JGE, 7, 0, X32_SYSCALL_BIT),        # 4: x32: to 12
        (JEQ, 5, 0, clone3),                 # 5: to 11
        (JEQ, 1, 0, unshare),                # 6: to 8
        (JEQ, 0, 2, clone),                  # 7: to 8, else to 10
        (LD_W_ABS, 0, 0, 16),                # 8: its first argument (flags), low word
        (JSET, 3, 0, CLONE_NEWUSER),         # 9: asks a user namespace: to 13
        (RET, 0, 0, ALLOW),                  # 10
        (RET, 0, 0, errno_return(errno.ENOSYS)),  # 11: clone3
        (RET, 0, 0, errno_return(errno.EPERM)),   # 12: x32
        (RET, 0, 0, errno_return(errno.EPERM)),   # 13: a new user namespace
    ]


def filter_file() -> Path | None:
    """The compiled filter's path (made on first use), or None on a machine it has no ABI for."""
    if platform.machine() not in ABI:
        return None
    path = Path(settings.VAR_DIR) / "sandboxes" / f"seccomp-{platform.machine()}.bpf"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{path.name}.{os.getpid()}")
        draft.write_bytes(b"".join(struct.pack("=HBBI", *instruction) for instruction in program()))
        os.replace(draft, path)
    return path
