"""OpenTelemetry spans for episodes, env steps, LLM calls, tool calls and rewards.

boltzoo, as a library, only uses the OpenTelemetry API: spans go wherever the application's
tracer provider sends them (nowhere, by default). The span tree of one episode::

    boltzoo.episode            env, task, episode id; at the end score, success, returns
      boltzoo.env.step         agent, turn, reward, token counts of the action
        boltzoo.tool.<name>    calculator / sql / search, with its input and status
      boltzoo.llm.call         one per turn sampled by a rollout: model, batch size, tokens
    (event boltzoo.reward on the episode span, for every reward paid)

The ``boltzoo`` command line calls :func:`configure_from_env`, so the standard ``OTEL_*``
variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_TRACES_EXPORTER=otlp|console``,
``OTEL_SERVICE_NAME``) send the spans to any OTLP collector.
"""

from __future__ import annotations

import os
from typing import Any

from opentelemetry import trace

tracer = trace.get_tracer("boltzoo")


def span_attributes(**values: Any) -> dict[str, Any]:
    """Return ``values`` as span attributes under ``boltzoo.``, dropping Nones, cutting text."""
    attributes = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, str) and len(value) > 500:
            value = value[:500] + "..."
        elif isinstance(value, (list, tuple)):
            value = [str(v) for v in value]
        elif not isinstance(value, (bool, int, float, str)):
            value = str(value)
        attributes[f"boltzoo.{key}"] = value
    return attributes


def completion_attributes(completion: Any) -> dict[str, Any]:
    """Return the span attributes of one LLM call's Completion: model, version, token counts."""
    return span_attributes(
        model=completion.model,
        policy_version=completion.policy_version,
        prompt_tokens=completion.num_prompt_tokens,
        response_tokens=completion.num_response_tokens,
        finish_reason=completion.finish_reason,
    )


def configure_from_env() -> bool:
    """Install an SDK tracer provider when ``OTEL_*`` variables ask for one; return whether.

    ``OTEL_TRACES_EXPORTER=console`` prints spans; ``otlp`` (or an ``OTEL_EXPORTER_OTLP_*``
    endpoint) sends them over OTLP/HTTP, which needs ``opentelemetry-exporter-otlp-proto-http``.
    """
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if exporter_name in ("", "none") and not endpoint:
        return False
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    if exporter_name == "console":
        exporter: Any = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            from boltzoo.errors import MissingDependencyError

            raise MissingDependencyError(
                "OTEL_* variables ask for OTLP export, which needs "
                "pip install opentelemetry-exporter-otlp-proto-http"
            ) from None
        exporter = OTLPSpanExporter()  # reads the endpoint and headers from OTEL_* itself
    service = os.environ.get("OTEL_SERVICE_NAME", "boltzoo")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True
