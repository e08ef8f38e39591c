"""Placement: from per-job (GPU type, workers) to concrete nodes."""
