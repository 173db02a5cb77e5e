"""Training health: per-step metrics of the completions, health checks and alerts, metric sinks."""
