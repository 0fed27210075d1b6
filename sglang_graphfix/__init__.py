"""SGLang patches. ``register`` is the ``sglang.srt.plugins`` entry point."""

PATCH_MODULES = ("graph_pool", "logits_rows", "warmup_hook", "capture_stream")
SCENARIO_MODULES = ("graph_pool", "logits_rows", "warmup_hook", "capture_stream")


def register() -> None:
    """Called by SGLang's ``load_plugins()`` in every scheduler process and in the launcher."""
    import graphfix
    from graphfix import logs

    logs.route("sglang")  # decisions into the engine's own log, whatever order logging is set up in
    graphfix.apply("sglang")
