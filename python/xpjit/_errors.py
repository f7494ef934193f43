"""Exceptions: every failed C call raises one, carrying the library's
message (xpj_last_error) and status; kernel source errors carry the
rendered diagnostics, file:line:col included."""
from . import _lib


class XpjitError(Exception):
    """A failed xpjit call: .status (the C status number), .status_name
    ("INVALID", "SYNTAX", ...) and the library's message."""

    status = None

    def __init__(self, message, status=None, diagnostics=()):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.status_name = _lib.STATUS_NAMES.get(self.status, str(self.status))
        self.diagnostics = list(diagnostics)


class InvalidArgumentError(XpjitError, ValueError):
    status = 1


class OutOfMemoryError(XpjitError, MemoryError):
    status = 2


class NotFoundError(XpjitError, LookupError):
    status = 3


class KernelSyntaxError(XpjitError):
    """The kernel source has errors; .diagnostics lists them as
    (file, line, col, severity, message)."""
    status = 4


class SpecializationError(XpjitError, TypeError):
    """The dtypes, ndim or constants do not fit the kernel."""
    status = 5


class IOError_(XpjitError, OSError):
    status = 6


class VerifyError(XpjitError):
    status = 7


class CompileError(XpjitError):
    status = 8


class UnsupportedError(XpjitError, NotImplementedError):
    status = 9


class DeviceError(XpjitError, RuntimeError):
    status = 10


class CancelledError(XpjitError):
    status = 11


class BoundsError(XpjitError, IndexError):
    """A checked kernel indexed outside an array (checks="bounds")."""
    status = 12


_BY_STATUS = {c.status: c for c in (
    InvalidArgumentError, OutOfMemoryError, NotFoundError, KernelSyntaxError,
    SpecializationError, IOError_, VerifyError, CompileError,
    UnsupportedError, DeviceError, CancelledError, BoundsError)}


def error(status, message=None, diagnostics=()):
    """The exception for a C status, with the library's last message."""
    if message is None:
        message = _lib.last_error().decode("utf-8", "replace")
    cls = _BY_STATUS.get(status, XpjitError)
    return cls(message or _lib.STATUS_NAMES.get(status, "error %d" % status),
               status, diagnostics)


def check(status):
    """Raises the exception for a non-zero status."""
    if status:
        raise error(status)
