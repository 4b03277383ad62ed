"""Opening a tenant's paths without following anything the tenant made.

Every path under a tenant's workspace root is resolved by the kernel with `openat2` from an
open folder descriptor, `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`: no `..` leaves the folder and
no symbolic link is followed, so a link swapped in between a check and a use reaches nothing
(the check and the use are one system call). What the host then does with the descriptor, it
does as the session's own identity (`as_identity`): the file system's permission checks apply
to it as to the session's processes, and what it creates belongs to the session."""
import ctypes
import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

# openat2(2) has one number on every architecture Linux added it after (5.6).
SYS_OPENAT2 = 437
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RENAME_NOREPLACE = 1
RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
NO_OPENAT2 = ("This host cannot touch a tenant's files safely: its kernel has no openat2 (Linux 5.6 or newer is "
              "needed), and it follows no path a tenant could have changed.")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class Unavailable(RuntimeError):
    """The kernel cannot resolve paths beneath a folder; the host touches no tenant path."""


def _syscall(number: int, *args: object) -> int:
    result = _libc.syscall(ctypes.c_long(number), *args)
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def open_beneath(folder_fd: int, relative: str, flags: int, mode: int = 0o666) -> int:
    """A descriptor of `relative` (no leading slash; "" or "." is the folder itself) beneath the
    open folder `folder_fd`, following no link. Raises OSError: ELOOP for a link on the way,
    EXDEV for a way out, ENOENT for nothing there."""
    how = OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, RESOLVE)
    name = (relative or ".").encode()
    try:
        return _syscall(SYS_OPENAT2, ctypes.c_int(folder_fd), ctypes.c_char_p(name), ctypes.byref(how),
                        ctypes.c_size_t(ctypes.sizeof(how)))
    except OSError as error:
        if error.errno == errno.ENOSYS:
            raise Unavailable(NO_OPENAT2) from None
        raise


def open_root(path: str | os.PathLike[str]) -> int:
    """The descriptor of a host-made folder (a tenant's workspace root), refusing a link."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def rename_no_replace(folder: int, name: str, new_name: str) -> None:
    """`name` in the open `folder` renamed `new_name`; FileExistsError when that is there already."""
    if _libc.renameat2(folder, name.encode(), folder, new_name.encode(), RENAME_NOREPLACE) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def remove_tree(folder: int, name: str) -> None:
    """`name` in the open `folder` and all in it, by descriptor: links are removed, not followed."""
    inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
    try:
        remove_contents(inner)
    finally:
        os.close(inner)
    os.rmdir(name, dir_fd=folder)


def remove_contents(folder: int) -> None:
    """All in the open `folder`, by descriptor: links are removed, not followed."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(folder, entry.name)
        else:
            os.unlink(entry.name, dir_fd=folder)


def _set_fs_ids(uid: int, gid: int) -> None:
    # setfsuid/setfsgid change the calling thread alone (glibc does not broadcast them to the
    # process's other threads, as it does setuid): other threads keep acting as the host.
    _libc.setfsgid(ctypes.c_uint(gid))
    _libc.setfsuid(ctypes.c_uint(uid))


@contextmanager
def as_identity(uid: int, gid: int) -> Iterator[None]:
    """While inside, this thread's file system checks are those of uid:gid (the kernel drops
    root's overriding capabilities for it); the host's own identity comes back after."""
    if os.geteuid() != 0:
        yield  # a host that is not root acts as itself: it has no other identity to take
        return
    _set_fs_ids(uid, gid)
    try:
        yield
    finally:
        _set_fs_ids(0, 0)
