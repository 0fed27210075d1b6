"""SGLang patches. ``register`` is the ``sglang.srt.plugins`` entry point."""

PATCH_MODULES = ("graph_pool", "logits_rows", "warmup_hook", "capture_stream")
SCENARIO_MODULES = ("graph_pool", "logits_rows", "warmup_hook", "capture_stream")


def register() -> None:
    """Called by SGLang's ``load_plugins()`` in every scheduler process and in the launcher."""
    import graphfix

    graphfix.apply("sglang")
