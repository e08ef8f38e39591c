"""One ECOS workspace per LP structure, set up once and re-solved with new numbers.

WHY: a replay solves the LAS LP some 1,700 times over a few dozen sparsity patterns
(``ecos_las._structure``), and ``_ecos.csolve`` runs ``ECOS_setup`` at every call: the
AMD ordering of the KKT matrix, its symbolic factorisation and every allocation, about a
quarter of ECOS's time there. ECOS's own C API is made for this case: ``ECOS_updateData``
takes new values for the same pattern (it re-equilibrates and rewrites the KKT entries),
then ``ECOS_solve`` starts from scratch as after a setup. The answers are the same to
the bit as ``csolve``'s (``tests/unit/test_ecos_workspace.py`` checks x, z and the exit
flag on LPs of every shape the policies build), so simulated JCTs do not move.

The ``ecos`` package exports that C API from its extension module but not to Python, so
this module calls it through :mod:`ctypes`, and reads the few fields it needs (the
solution vectors and the settings) at their offsets in ECOS 2.0's ``pwork`` struct.
Those offsets are checked against what the setup must have stored (dimensions, the data
pointers handed in, ECOS's default settings) before a workspace is used; where anything
disagrees, or the library lacks the entry points, :func:`available` is false and callers
keep ``csolve``.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

_I = ctypes.c_long
_P = ctypes.c_void_p
_D = ctypes.c_double

# ``pwork`` (ecos.h, ECOS 2.0 built with EQUILIBRATE and EXPCONE, as the wheel is):
# eight-byte fields n, m, p, D, then the pointers x, y, z, ... ; c at 240, h at 256,
# stgs (the settings) at 464. ``settings``: gamma, delta, eps, feastol, abstol, reltol,
# the three inaccurate tolerances (doubles), then nitref, maxit, verbose (idxint).
_N, _M, _X, _Z, _C, _H, _STGS = 0, 8, 32, 48, 240, 256, 464
_FEASTOL, _ABSTOL, _RELTOL, _NITREF, _MAXIT, _VERBOSE = 24, 32, 40, 72, 80, 88
_DEFAULTS = ((_FEASTOL, 1e-8), (_ABSTOL, 1e-8), (_RELTOL, 1e-8))
"""ECOS's defaults, which ``csolve`` also passes when called without options."""


class _Lib:
    """The C entry points, or the reason they cannot be used."""

    def __init__(self) -> None:
        self.error: str | None = None
        try:
            import _ecos

            lib = ctypes.CDLL(_ecos.__file__)
            lib.ECOS_ver.restype = ctypes.c_char_p
            version = (lib.ECOS_ver() or b"").decode()
            if not version.startswith("2.0."):
                raise OSError(f"ECOS {version!r}: the pwork layout is known for 2.0 only")
            lib.ECOS_setup.restype = _P
            lib.ECOS_setup.argtypes = [_I, _I, _I, _I, _I, _P, _I, *([_P] * 9)]
            lib.ECOS_solve.restype = _I
            lib.ECOS_solve.argtypes = [_P]
            lib.ECOS_updateData.restype = None
            lib.ECOS_updateData.argtypes = [_P] * 6
            lib.ECOS_cleanup.restype = None
            lib.ECOS_cleanup.argtypes = [_P, _I]
            self.lib: Any = lib
        except (ImportError, OSError, AttributeError) as e:
            self.error = str(e)


_LIB: _Lib | None = None
_LOCK = threading.Lock()


def _lib() -> _Lib:
    global _LIB
    if _LIB is None:
        with _LOCK:
            if _LIB is None:
                _LIB = _Lib()
    return _LIB


def available() -> bool:
    """Whether workspaces can be used here (else callers use ``csolve``)."""
    return _lib().error is None


def _read(addr: int, offset: int, kind: Any = _P) -> Any:
    return kind.from_address(addr + offset).value


class LayoutMismatch(RuntimeError):
    """The library's ``pwork`` does not look like ECOS 2.0's: do not use workspaces."""


class SetupFailed(RuntimeError):
    """``ECOS_setup`` refused this problem (as ``csolve`` would): solve it without a
    workspace; the layout is not in question."""


class Workspace:
    """ECOS set up for one LP structure: ``min c.x  s.t.  G x <= h`` (all rows linear),
    ``G`` in CSC form with fixed ``rows`` and ``indptr``. :meth:`resolve` takes new
    values for ``c``, ``G`` and ``h`` in the same layout.

    ECOS keeps pointers to the arrays handed to it and scales them in place, so the
    workspace owns its copies and writes each new problem into them; the index arrays
    are kept alive with it. :meth:`solve` solves the problem given here, :meth:`resolve`
    a new one; both hold the workspace's lock.
    """

    def __init__(
        self, c: FloatArray, csc: tuple[FloatArray, IntArray, IntArray], nrow: int, h: FloatArray
    ) -> None:
        lib = _lib()
        if lib.error is not None:
            raise LayoutMismatch(lib.error)
        values, rows, indptr = csc
        self._c = np.array(c, dtype=np.float64)
        self._g = np.array(values, dtype=np.float64)
        self._h = np.array(h, dtype=np.float64)
        self._rows = np.ascontiguousarray(rows, dtype=np.int64)
        self._indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.n, self.m = int(self._c.shape[0]), int(nrow)
        self._lock = threading.Lock()
        self._solved = False
        ptr = lib.lib.ECOS_setup(
            self.n, self.m, 0, self.m, 0, None, 0,
            self._g.ctypes.data, self._indptr.ctypes.data, self._rows.ctypes.data,
            None, None, None, self._c.ctypes.data, self._h.ctypes.data, None,
        )  # fmt: skip
        if not ptr:
            raise SetupFailed("ECOS_setup returned NULL")
        self._w: int | None = int(ptr)
        try:
            self._check_and_quiet()
        except LayoutMismatch:
            self.close()
            raise
        double_p = ctypes.POINTER(_D)
        x = ctypes.cast(_read(self._w, _X), double_p)
        z = ctypes.cast(_read(self._w, _Z), double_p)
        self._x = np.ctypeslib.as_array(x, (self.n,))
        self._z = np.ctypeslib.as_array(z, (self.m,))

    def _check_and_quiet(self) -> None:
        """Check the offsets against what ``ECOS_setup`` stored; silence its printing."""
        w = self._w
        assert w is not None
        if (
            _read(w, _N, _I) != self.n
            or _read(w, _M, _I) != self.m
            or _read(w, _C) != self._c.ctypes.data
            or _read(w, _H) != self._h.ctypes.data
            or not _read(w, _X)
            or not _read(w, _Z)
        ):
            raise LayoutMismatch("pwork's fields are not where ECOS 2.0 keeps them")
        stgs = _read(w, _STGS)
        if not stgs or any(_read(stgs, off, _D) != val for off, val in _DEFAULTS):
            raise LayoutMismatch("ECOS's settings are not at ECOS 2.0's offsets")
        if _read(stgs, _MAXIT, _I) != 100 or _read(stgs, _NITREF, _I) != 9:
            raise LayoutMismatch("ECOS's settings are not ECOS 2.0's defaults")
        _I.from_address(stgs + _VERBOSE).value = 0

    def solve(self) -> tuple[int, FloatArray, FloatArray]:
        """Solve the problem the workspace was set up with (once, before any :meth:`resolve`)."""
        with self._lock:
            if self._solved:
                raise RuntimeError("the setup's problem was solved already: use resolve()")
            return self._run()

    def resolve(
        self, c: FloatArray, values: FloatArray, h: FloatArray
    ) -> tuple[int, FloatArray, FloatArray]:
        """Solve new numbers in this structure: ``c``, ``G``'s values (same order) and ``h``."""
        with self._lock:
            w = self._w
            if w is None:
                raise RuntimeError("the ECOS workspace was closed")
            np.copyto(self._c, c)
            np.copyto(self._g, values)
            np.copyto(self._h, h)
            # The same arrays: ECOS re-equilibrates them without undoing the old scaling.
            _lib().lib.ECOS_updateData(
                w, self._g.ctypes.data, None, self._c.ctypes.data, self._h.ctypes.data, None
            )
            return self._run()

    def _run(self) -> tuple[int, FloatArray, FloatArray]:
        """(ECOS's exit flag, x, z): copies, since the vectors live in ECOS's memory."""
        w = self._w
        if w is None:
            raise RuntimeError("the ECOS workspace was closed")
        self._solved = True
        flag = int(_lib().lib.ECOS_solve(w))
        return flag, self._x.copy(), self._z.copy()

    def close(self) -> None:
        """Free ECOS's memory (the solution vectors too: nothing may view them after)."""
        with self._lock:  # not while a solve in another thread runs in this memory
            w, self._w = self._w, None
        if w is not None:
            _lib().lib.ECOS_cleanup(w, 0)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at teardown the library may be gone
            self.close()
