"""Names of the kernel language: a part of FunctionTranslator (translator.py).

A name is a local variable, or a global, closure variable or builtin read once at translation
time: numbers become constants, NumPy arrays constant tables, objects with
__cuda_array_interface__ device-array parameters, modules/functions/types static values.
"""

import ast
import builtins
import hashlib

import numpy as np

from .. import types as T
from ..errors import UnsupportedError
from . import typesys as TS
from . import ir
from . import emit
from .cgen import sanitize
from .fold import int_range_message
from .ir import NOCONST, RefVarVal, StaticVal, TupleVal, Val, _Bottom


class NamesMixin:
    """Names, globals and captured objects of FunctionTranslator."""

    def _mangle(self, name):
        """CPython's private name mangling: in a function written inside ``class C``, ``__x``
        means ``_C__x`` (for globals, closure variables and attributes alike)."""
        cls = self.src.mangle_class
        if cls and name.startswith("__") and not name.endswith("__") and "." not in name:
            stripped = cls.lstrip("_")
            if stripped:
                return "_%s%s" % (stripped, name)
        return name

    def _lookup_global(self, name):
        name = self._mangle(name)
        if name in self.closure:
            return self.closure[name]
        if name in self.empty_cells:
            return NOCONST
        if name in self.globals:
            return self.globals[name]
        return getattr(builtins, name, NOCONST)

    def load_name(self, node):
        name = node.id
        if name in self.locals:
            t = self.var_types.get(name)
            if t is None:
                if self.strict:
                    raise self.err(node, "variable '%s' is used before it is assigned a value"
                                   % name)
                raise _Bottom()
            cn = self.var_c(name)
            if isinstance(t, T.Tuple):
                return TupleVal([Val(x, "cf_tv_%s_%d" % (cn, i), simple=True)
                                 for i, x in enumerate(t.types)])
            if name in self.var_refs:
                return RefVarVal(t, cn, self.used_ref_vars, name, simple=True,
                                 ref=self.var_refs[name])
            return Val(t, cn, simple=True, nonneg=name in self.nonneg_vars)
        obj = self._lookup_global(name)
        if obj is NOCONST:
            if self._mangle(name) in self.empty_cells:
                raise self.err(node, "free variable '%s' has no value yet: the enclosing "
                               "function assigns it after this function is compiled (CPython "
                               "would raise NameError here)" % name)
            raise self.err(node, "name '%s' is not defined" % name)
        return self.object_val(obj, name, node)

    expr_Name = load_name

    def object_val(self, obj, name, node):
        """The Val of a captured global (or closure variable, or builtin)."""
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
            t = T.from_dtype(obj.dtype)
            self.check_scalar_type(t, node)
            return self.const_val(obj, t, node)
        if isinstance(obj, bool):
            return self.const_val(obj, TS.WEAK_BOOL, node)
        if isinstance(obj, int):
            if not -2 ** 63 <= obj < 2 ** 64:
                raise self.err(node, int_range_message(obj, name=name))
            return self.const_val(obj, TS.WEAK_INT, node)
        if isinstance(obj, float):
            return self.const_val(obj, TS.WEAK_FLOAT, node)
        if isinstance(obj, complex):
            return self.const_val(obj, TS.WEAK_COMPLEX, node)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
            t = T.from_dtype(obj.dtype)
            self.check_scalar_type(t, node)
            return self.const_val(obj, t, node)
        if isinstance(obj, tuple):
            items = []
            for i, x in enumerate(obj):
                v = self.object_val(x, "%s[%d]" % (name, i), node)
                if not isinstance(v, Val) or not v.is_const:
                    raise self.err(node, "global tuple '%s' may hold only numbers" % name,
                                   UnsupportedError)
                items.append(v)
            return TupleVal(items)
        if isinstance(obj, np.ndarray):
            return self.table(obj, name, node)
        if hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, type):
            return self.device_array(obj, name, node)
        if obj is None:
            raise self.unsupported(node, "None as a value")
        if isinstance(obj, (str, bytes)):
            raise self.unsupported(node, "a string (global '%s')" % name)
        return StaticVal(obj, name)

    def table(self, arr, name, node):
        """A captured NumPy array: a constant table in the generated source."""
        if arr.dtype.kind not in "biufc":
            raise self.err(node, "global array '%s' has dtype %s, which is not supported"
                           % (name, arr.dtype), UnsupportedError)
        t = T.from_dtype(arr.dtype)
        self.check_scalar_type(t, node)
        if arr.ndim == 0:
            return self.const_val(arr[()], t, node)
        flat = np.ascontiguousarray(arr).reshape(-1)
        h = hashlib.sha256()
        h.update(("%s|%s|" % (t.name, arr.shape)).encode())
        h.update(flat.tobytes())
        cname = "cf_tab_%s_%s" % (sanitize(name)[:24], h.hexdigest()[:12])
        # Complex tables are stored as (re, im) pairs of the real type: a __device__ variable
        # needs a constant initializer and cf_complex's constructor is not constexpr.
        et = t if t.kind != "c" else (T.float32 if t.bits == 64 else T.float64)
        if t.kind == "c":
            flat = np.stack([flat.real, flat.imag], axis=-1).reshape(-1).astype(et.dtype)
        if cname not in self.unit.tables:
            self.unit.tables[cname] = emit.table_definition(cname, name, t, arr.shape, et, flat)
        at = T.Array(t, arr.ndim, "C", readonly=True)
        storage = cname if t.kind != "c" else "((%s *)%s)" % (t.cname, cname)
        return self.ref_val(at, storage, arr.shape, node)

    def ref_val(self, at, storage, shape, node):
        shape = tuple(int(x) for x in shape)
        return ir.ArrayDesc(at, storage, shape, ref=(storage, shape))

    def device_array(self, obj, name, node):
        try:
            cai = obj.__cuda_array_interface__
            dt = np.dtype(cai["typestr"])
            shape = tuple(cai["shape"])
            readonly = bool(cai.get("data", (0, False))[1])
        except Exception as e:
            raise self.err(node, "global '%s' has a malformed __cuda_array_interface__ (%s)"
                           % (name, e))
        if dt.kind not in "biufc":
            raise self.err(node, "global device array '%s' has dtype %s, which is not "
                           "supported" % (name, dt), UnsupportedError)
        if len(shape) == 0:
            raise self.err(node, "global device array '%s' is 0-dimensional" % name,
                           UnsupportedError)
        t = T.Array(T.from_dtype(dt), len(shape), "A", readonly)
        self.check_scalar_type(t.dtype, node)
        for o, at, cn in self.garrays:
            if o is obj:
                return Val(at, cn, simple=True)
        cn = "cf_garr%d_%s" % (len(self.garrays), sanitize(name)[:32])
        self.garrays.append((obj, t, cn))
        return Val(t, cn, simple=True)

    def static(self, node):
        """The compile-time object an expression names (module, function, type) or None."""
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return None
            obj = self._lookup_global(node.id)
            if obj is NOCONST:
                return None
            return StaticVal(obj, node.id)
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            if base is None:
                return None
            try:
                obj = getattr(base.obj, self._mangle(node.attr))
            except AttributeError:
                return None
            return StaticVal(obj, "%s.%s" % (base.name, node.attr))
        return None



def _is_value_object(obj):
    return isinstance(obj, (bool, int, float, complex, np.generic, np.ndarray, tuple)) or \
        hasattr(obj, "__cuda_array_interface__")
