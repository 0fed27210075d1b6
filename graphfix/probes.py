"""Read-only helpers for applicability probes: what a target's code refers to and what it accepts."""

from __future__ import annotations

import dis
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
