"""Test-time reconstruction of the never-released vLLM main-branch build between upstream PRs 50488
(2026-08-20) and 54418 (2026-08-31): the build whose default CUDA-graph sizes ran out of memory on H200.

PR 50488's shape, as its review thread and the draft revert (PR 54352) describe it:
- the default maximum is raised to the widest uniform-decode batch: ``min(max_num_seqs * q * 2,
  max(ceiling, min(max_num_seqs, ceiling) * q))`` (q = 1 + num_speculative_tokens), so the token grid
  itself extends that far (581 sizes at 512 sequences and 16 draft tokens; maxima 768, 1024, 2176, 6400
  in the failing nightly jobs);
- the uniform-decode sizes ``n * q`` are appended with no ceiling filter.
PR 54418 (0.29.0) undid the first point and added the filter. So the build is rebuilt from the installed
0.29.0 method by reversing exactly those two edits in its syntax tree (nothing of upstream's is stored in
this repository). Anything unexpected in the tree raises: the reconstruction never guesses.
"""

import ast
import importlib
import inspect
import textwrap

FILTER = "n * query_len <= max_cudagraph_capture_size"
WIDENED = "max(default_max_graph_size, min(max_num_seqs, default_max_graph_size) * decode_query_len)"


class _Reverse(ast.NodeTransformer):
    def __init__(self):
        self.filters = self.maxima = 0

    def visit_comprehension(self, node):
        self.generic_visit(node)
        kept = [c for c in node.ifs if ast.unparse(c) != FILTER]
        self.filters += len(node.ifs) - len(kept)
        node.ifs = kept
        return node

    def visit_Assign(self, node):
        self.generic_visit(node)
        value = node.value
        if ([ast.unparse(t) for t in node.targets] == ["max_cudagraph_capture_size"]
                and isinstance(value, ast.Call) and ast.unparse(value.func) == "min"
                and len(value.args) == 2 and ast.unparse(value.args[1]) == "default_max_graph_size"):
            value.args[1] = ast.parse(WIDENED, mode="eval").body
            self.maxima += 1
        return node


class _PlainGrid(ast.NodeTransformer):
    """A revert of PR 50488 after 0.29.0 (what draft PR 54352 proposed): the uniform-decode sizes are
    no longer appended to the default list."""

    def __init__(self):
        self.appends = 0

    def visit_AugAssign(self, node):
        if ast.unparse(node.target) == "cudagraph_capture_sizes" and "uniform_decode_sizes" in ast.unparse(node.value):
            self.appends += 1
            return ast.Pass()
        return node


def _install(edit, expected, label):
    module = importlib.import_module("vllm.config.vllm")
    shipped = inspect.unwrap(module.VllmConfig.__dict__["_set_cudagraph_sizes"])
    tree = ast.fix_missing_locations(edit.visit(ast.parse(textwrap.dedent(inspect.getsource(shipped)))))
    found = tuple(getattr(edit, name) for name in expected)
    if found != (1,) * len(expected):
        raise RuntimeError(f"installed _set_cudagraph_sizes is not 0.29.0's shape: {dict(zip(expected, found))}")
    namespace = {}
    exec(compile(tree, f"<tests: {label}>", "exec"), vars(module), namespace)
    module.VllmConfig._set_cudagraph_sizes = namespace["_set_cudagraph_sizes"]
    return shipped


def install():
    """Put the PR-50488 build's method on ``VllmConfig``; returns the shipped function to restore later."""
    return _install(_Reverse(), ("filters", "maxima"), "PR-50488 build reconstruction")


def install_plain_grid():
    """Put a plain-grid revert of 0.29.0's method on ``VllmConfig``; returns the shipped function."""
    return _install(_PlainGrid(), ("appends",), "plain-grid revert of 0.29.0")


def restore(shipped):
    importlib.import_module("vllm.config.vllm").VllmConfig._set_cudagraph_sizes = shipped
