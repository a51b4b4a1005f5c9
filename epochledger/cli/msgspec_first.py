"""msgspec as the command line imports it: first, without typing_extensions (rule W2).

msgspec's `_utils` takes two things from typing_extensions when it can import it:
`get_type_hints`, which msgspec always calls with `include_extras=True`, and the
`Required` and `NotRequired` forms; when it cannot, it takes them from typing. On
Python 3.11 and later (the project's floor, pyproject.toml) they are the same: with
`include_extras=True` typing_extensions' get_type_hints returns typing.get_type_hints'
answer as it is (it cleans up Optional on 3.10 and earlier only, and strips the extras
only without the flag), and its Required and NotRequired are typing's own objects
(tests/app/test_startup.py pins both). So msgspec without it is the same msgspec, and
a start no longer pays for typing_extensions and the `inspect` it imports, with ast,
dis and tokenize (docs/benchmarks.md, "A fast start").

typing_extensions is made unimportable for the time msgspec is imported, and
importable again right after, so whatever imports it later (Litestar, under `serve`)
gets it as usual. Where msgspec or typing_extensions is imported already (a library
caller, the tests), nothing is done: there is nothing left to save.
"""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11) and "msgspec" not in sys.modules and "typing_extensions" not in sys.modules:
    sys.modules["typing_extensions"] = None  # type: ignore[assignment]  # None in sys.modules: ImportError
    try:
        import msgspec  # noqa: F401 - the import is the point
    finally:
        del sys.modules["typing_extensions"]
