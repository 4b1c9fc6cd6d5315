"""apphost Cortex runtime (placeholder, being implemented)."""

__version__ = "0.1.0"
