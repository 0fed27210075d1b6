"""vLLM patches. ``register`` is the ``vllm.general_plugins`` entry point."""

PATCH_MODULES = ("spec_prefill_metadata", "cudagraph_sizes")
SCENARIO_MODULES = ("spec_prefill_metadata", "cudagraph_sizes")


def register() -> None:
    """Called by vLLM's ``load_general_plugins()`` in the front end, the engine core and every worker."""
    import graphfix
    from graphfix import logs

    logs.route("vllm")  # decisions into the engine's own log, whatever order logging is set up in
    graphfix.apply("vllm")
