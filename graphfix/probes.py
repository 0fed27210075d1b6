"""Read-only helpers for applicability probes: what a target's code refers to and what it accepts."""

from __future__ import annotations

import dis
import sys
import inspect
import types


def _code(obj) -> types.CodeType | None:
    obj = inspect.unwrap(getattr(obj, "__func__", obj))
    return getattr(obj, "__code__", None)


def code_refs(obj) -> frozenset:
    """Every global, attribute, local and string constant the function's bytecode names,
    nested functions, comprehensions and lambdas included. Empty for non-functions."""
    code = _code(obj)
    if code is None:
        return frozenset()
    refs, todo = set(), [code]
    while todo:
        co = todo.pop()
        refs.update(co.co_names, co.co_varnames, co.co_freevars)
        for const in co.co_consts:
            if isinstance(const, types.CodeType):
                todo.append(const)
            elif isinstance(const, str):
                refs.add(const)
    return frozenset(refs)


def params(obj) -> tuple:
    """Parameter names of a function (``self`` included), ``()`` for non-callables."""
    code = _code(obj)
    if code is None:
        return ()
    return tuple(inspect.signature(inspect.unwrap(getattr(obj, "__func__", obj))).parameters)


def attr_reads(obj) -> list[tuple[str, str]]:
    """``(owner_expr, attribute)`` pairs for ``X.attr`` loads in the function body, in order,
    where ``owner_expr`` is the dotted name the attribute is read from (``self.model_runner``)."""
    code = _code(obj)
    if code is None:
        return []
    out, stack = [], []
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_FAST", "LOAD_GLOBAL", "LOAD_DEREF", "LOAD_NAME", "LOAD_FAST_LOAD_FAST"):
            stack = [str(ins.argval).split(" + ")[0]]
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and stack:
            out.append((".".join(stack), ins.argval))
            stack.append(ins.argval)
        else:
            stack = []
    return out


# -- where a value comes from: a small symbolic run of one function's bytecode ----------------------
class _Val(tuple):
    """A symbolic stack value: ("local", name) | ("attr", base, name) | ("global", name) |
    ("call", callee) | ("item", base) | ("const", value) | ("?",)."""


def _v(*parts):
    return _Val(parts)


_UNKNOWN = _v("?")
_POP2_PUSH1 = {"BINARY_OP", "BINARY_SUBSCR", "COMPARE_OP", "IS_OP", "CONTAINS_OP", "BINARY_ADD",
               "BINARY_MULTIPLY", "BINARY_SUBTRACT"}
_PUSH_LOCAL = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW", "LOAD_DEREF", "LOAD_CLOSURE"}
_NOOPS = {"NOP", "RESUME", "CACHE", "PRECALL", "KW_NAMES", "EXTENDED_ARG", "NOT_TAKEN"}


def _symbolic_run(code):
    """``(stores, lookups)``: every value stored into each local, and the receiver of every attribute
    lookup by name (``getattr(x, "name", ...)`` or ``x.name``), as symbolic values. Straight-line
    approximation: an instruction it does not model empties the stack, so unknowns stay unknown."""
    stores, lookups, stack = {}, [], []

    def pop(n=1):
        out = [stack.pop() if stack else _UNKNOWN for _ in range(n)]
        return out[0] if n == 1 else out

    for ins in dis.get_instructions(code):
        op, arg = ins.opname, ins.arg
        if op in _NOOPS:
            continue
        if op in _PUSH_LOCAL:
            stack.append(_v("local", ins.argval))
        elif op == "LOAD_FAST_LOAD_FAST":
            stack += [_v("local", n) for n in ins.argval]
        elif op == "LOAD_CONST":
            if isinstance(ins.argval, str):
                lookups.append((ins.argval, stack[-1] if stack else _UNKNOWN, "getattr"))
            stack.append(_v("const", ins.argval))
        elif op == "LOAD_GLOBAL":
            if sys.version_info >= (3, 11) and arg & 1:
                stack.append(_v("null"))
            stack.append(_v("global", ins.argval))
        elif op == "PUSH_NULL":
            stack.append(_v("null"))
        elif op in ("LOAD_ATTR", "LOAD_METHOD"):
            base = pop()
            lookups.append((ins.argval, base, "attr"))
            value = _v("attr", base, ins.argval)
            is_method = op == "LOAD_METHOD" or (sys.version_info >= (3, 12) and arg & 1)
            stack += [value, _v("self", base)] if is_method else [value]
        elif op in ("CALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW", "CALL_KW"):
            extra = {"CALL": 2, "CALL_METHOD": 2, "CALL_FUNCTION": 1, "CALL_FUNCTION_KW": 2, "CALL_KW": 3}[op]
            items = pop(arg + extra)
            items = items if isinstance(items, list) else [items]
            callee = next((i for i in reversed(items) if i and i[0] in ("attr", "global", "local")), _UNKNOWN)
            stack.append(_v("call", callee))
        elif op == "UNPACK_SEQUENCE":
            base = pop()
            stack += [_v("item", base)] * arg
        elif op in _POP2_PUSH1:
            base, _ = pop(2)[::-1]
            stack.append(_v("item", base) if op == "BINARY_SUBSCR" else _UNKNOWN)
        elif op in ("STORE_FAST", "STORE_DEREF"):
            stores.setdefault(ins.argval, []).append(pop())
        elif op in ("POP_TOP", "RETURN_VALUE", "STORE_GLOBAL"):
            pop()
        elif op == "COPY":
            stack.append(stack[-arg] if len(stack) >= arg else _UNKNOWN)
        elif op == "SWAP" and len(stack) >= arg:
            stack[-1], stack[-arg] = stack[-arg], stack[-1]
        elif op == "STORE_ATTR":
            pop(2)
        elif op in ("BUILD_TUPLE", "BUILD_LIST", "BUILD_SET", "BUILD_STRING", "BUILD_SLICE"):
            pop(arg) if arg else None
            stack.append(_UNKNOWN)
        elif op in ("BUILD_MAP", "BUILD_CONST_KEY_MAP"):
            n = 2 * arg if op == "BUILD_MAP" else arg + 1
            pop(n) if n else None
            stack.append(_UNKNOWN)
        elif op in ("LIST_EXTEND", "LIST_APPEND", "SET_ADD", "SET_UPDATE", "DICT_UPDATE", "DICT_MERGE"):
            pop()
        elif op.startswith("UNARY_") or op in ("GET_ITER", "TO_BOOL", "FORMAT_SIMPLE"):
            pop()
            stack.append(_UNKNOWN)
        else:
            stack = []
    return stores, lookups


def _origins(value, stores, seen=()):
    """Dotted renderings of where ``value`` comes from, locals followed to what was stored in them;
    a call renders as ``callee()``; a parameter or anything unknown as itself / ``?``."""
    kind = value[0]
    if kind == "local":
        name = value[1]
        if name not in stores or name in seen:
            return {name}
        return set().union(*(_origins(v, stores, seen + (name,)) for v in stores[name]))
    if kind == "attr":
        return {f"{b}.{value[2]}" for b in _origins(value[1], stores, seen)}
    if kind == "global":
        return {value[1]}
    if kind == "call":
        return {f"{c}()" for c in _origins(value[1], stores, seen)}
    if kind == "item":
        return {f"{b}[]" for b in _origins(value[1], stores, seen)}
    return {"?"}


def lookup_origins(obj, name: str) -> list[set]:
    """For each place the function looks ``name`` up on some object (``getattr(x, "name")`` or
    ``x.name``), the set of origins of that object, following locals through their assignments:
    e.g. ``{"self.capture_prepare()[]"}`` for ``a, b, c = self.capture_prepare(...); getattr(b, "name")``."""
    code = _code(obj)
    if code is None:
        return []
    stores, lookups = _symbolic_run(code)
    return [_origins(base, stores) for attr, base, _ in lookups if attr == name]
