"""``numba.core.errors``: cufunc.numba.errors under Numba's module path."""
from ..errors import *  # noqa: F401,F403
from ..errors import __all__  # noqa: F401
